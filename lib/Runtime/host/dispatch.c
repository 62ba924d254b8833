/* Step 4 of an instruction: the cluster barrier of CLUSTER_SYNC, or the
   handler of the instruction's handler id with its df_ctx; then the
   output slot counts as written. RESHARED instructions (no handler) only
   move data. */
#include <string.h>

#include "host_internal.h"

/* CLUSTER_SYNC with cluster_size > 1: every CTA of the cluster must reach
   its n-th cluster sync. */
static bool cluster_ready(hb_run *r, hb_cta *c, uint32_t instr) {
  if (!c->sync_arrived) {
    c->sync_arrived = true;
    c->sync_count++;
  }
  uint32_t base = c->id / r->cluster_size * r->cluster_size;
  uint32_t slowest = c->sync_count;
  for (uint32_t m = base; m < base + r->cluster_size; m++)
    if (r->ctas[m].sync_count < slowest)
      slowest = r->ctas[m].sync_count;
  if (slowest < c->sync_count) {
    hb_block(c, DF_HOST_WAIT_CLUSTER, instr, HB_S, HB_S, c->id / r->cluster_size,
             c->sync_count, slowest, r);
    return false;
  }
  c->sync_arrived = false;
  return true;
}

static void make_ctx(const hb_run *r, const hb_cta *c, uint32_t instr, df_ctx *ctx) {
  const df_packed *k = r->k;
  memset(ctx, 0, sizeof *ctx);
  ctx->args = &k->args[k->instrs[instr].arg_offset / sizeof(df_abi_args)];
  ctx->slots = k->slots;
  ctx->input_slots = k->input_slots;
  ctx->task_coords = k->task_coords;
  ctx->tensors = r->tensors;
  ctx->shared_slots = c->arena;
  ctx->scratch = c->scratch;
  ctx->global_staging = r->staging;
  ctx->block_size = r->block_size;
}

df_status hb_dispatch(hb_run *r, hb_cta *c, uint32_t instr, hb_step_result *res) {
  const df_abi_instr *in = &r->k->instrs[instr];
  *res = HB_STEP_PROGRESS;
  if (in->opcode == DF_ABI_OP_CLUSTER_SYNC && r->cluster_size > 1 &&
      !cluster_ready(r, c, instr)) {
    *res = HB_STEP_BLOCKED;
    return df_status_ok();
  }
  hb_cost_dispatch(r, c, instr);
  uint32_t h = in->handler_id;
  if (h != HB_S && in->opcode != DF_ABI_OP_CLUSTER_SYNC) {
    DF_TRY(hb_check_inputs(r, c, instr));
    df_ctx ctx;
    make_ctx(r, c, instr, &ctx);
    DF_TRY(hb_run_handler(r, &ctx, r->handlers[h]));
    DF_TRY(hb_check_guards(r, c->id, instr));
    uint32_t out = ctx.args->output_slot;
    if (out != HB_S)
      hb_mark_written(r, hb_slot_region(r, c->id, out, 0, r->k->slots[out].bytes), out, instr);
  } else {
    h = HB_S;
  }
  r->handler_done[instr] = 1;
  return hb_log_instr(r, c, instr, h);
}
