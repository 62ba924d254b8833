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
  if (c->workspace) {
    /* undefined at entry on the GPU: poison it so no handler relies on
       what an earlier instruction left */
    memset(c->workspace, HB_WORKSPACE_POISON, r->o.workspace_bytes);
    ctx->workspace = c->workspace;
    ctx->workspace_bytes = r->o.workspace_bytes;
  }
}

/* One handler call over args `a`: inputs checked (unless `check` is
   false: a composite's inner inputs), then its output counts as written. */
static df_status run_one(hb_run *r, hb_cta *c, uint32_t instr, const df_abi_args *a,
                         df_handler_fn fn, bool check) {
  if (check)
    DF_TRY(hb_check_part_inputs(r, c, instr, a, NULL, 0));
  df_ctx ctx;
  make_ctx(r, c, instr, &ctx);
  ctx.args = a;
  df_ctx_resolve(&ctx, a);
  DF_TRY(hb_run_handler(r, &ctx, fn));
  DF_TRY(hb_check_guards(r, c->id, instr));
  uint32_t out = a->output_slot;
  if (out != HB_S)
    hb_mark_written(r, hb_slot_region(r, c->id, out, 0, r->k->slots[out].bytes), out, instr);
  return df_status_ok();
}

/* A fused instruction (docs/fusion.md): the composite function of its
   handler id runs every part in one call (as the generated dispatch does
   on the device); without one, the backend runs the composite's part
   handlers in order itself. Inputs written by an earlier part are inner
   and not checked before the call. */
static df_status run_fused(hb_run *r, hb_cta *c, uint32_t instr, uint32_t h) {
  const df_packed *k = r->k;
  uint32_t parts = hb_parts(k, instr);
  if (!r->handlers[h]) {
    const df_handler *d = &k->handlers[h];
    for (uint32_t i = 0; i < parts; i++)
      DF_TRY(run_one(r, c, instr, hb_part_args(k, instr, i), r->handlers[d->parts[i]], true));
    return df_status_ok();
  }
  uint32_t inner[DF_FUSE_MAX_PARTS], n = 0;
  for (uint32_t i = 0; i < parts; i++) {
    const df_abi_args *a = hb_part_args(k, instr, i);
    DF_TRY(hb_check_part_inputs(r, c, instr, a, inner, n));
    if (a->output_slot != HB_S)
      inner[n++] = a->output_slot;
  }
  df_ctx ctx;
  make_ctx(r, c, instr, &ctx);
  /* Part 0's addresses; the composite's later parts move args and so
     read the records, as on the device. */
  df_ctx_resolve(&ctx, ctx.args);
  DF_TRY(hb_run_handler(r, &ctx, r->handlers[h]));
  DF_TRY(hb_check_guards(r, c->id, instr));
  for (uint32_t i = 0; i < parts; i++) {
    uint32_t out = hb_part_args(k, instr, i)->output_slot;
    if (out != HB_S)
      hb_mark_written(r, hb_slot_region(r, c->id, out, 0, k->slots[out].bytes), out, instr);
  }
  return df_status_ok();
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
    if (hb_parts(r->k, instr) > 1)
      DF_TRY(run_fused(r, c, instr, h));
    else
      DF_TRY(run_one(r, c, instr, hb_part_args(r->k, instr, 0), r->handlers[h], true));
  } else {
    h = HB_S;
  }
  r->handler_done[instr] = 1;
  return hb_log_instr(r, c, instr, h);
}
