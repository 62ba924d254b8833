/* GPU smoke-test handlers: one generic handler for every id. ITER: writes
   f(task, range, word); with inputs: their word-wise sum; FINALIZE (no
   output): the sum into tensor 0 at task * words. */
#include "df/device.h"
#include "df/kernel_plan.h"

/* What the generated module defines: every protocol path on, records
   from the kernel parameters. */
const uint32_t df_plan_features = DF_FEATURES_ALL;
const df_plan_records df_embedded_plan = {0};
const uint32_t df_handler_workspace_bytes = 0; /* gpu_smoke launches the plan's bytes only */

static uint32_t f(uint32_t t, uint32_t b, uint32_t e, uint32_t w) {
  return t * 1000003u + b * 31u + e * 7u + w * 13u + 1u;
}

void df_dispatch(uint32_t id, const df_ctx *ctx) {
  (void)id;
  const df_abi_args *a = ctx->args;
  uint32_t n_in = df_ctx_input_count(ctx);
  uint32_t out = a->output_slot;
  uint32_t bytes = out != DF_SENTINEL ? ctx->slots[out].bytes
                   : n_in ? ctx->slots[ctx->input_slots[a->input_slot_offset]].bytes : 0;
  uint32_t words = bytes / 4;
  uint32_t *o = out != DF_SENTINEL ? (uint32_t *)df_ctx_output(ctx)
                                   : (uint32_t *)df_ctx_tensor(ctx, 0) + a->task_id * words;
  for (uint32_t w = ctx->thread; w < words; w += ctx->threads) {
    uint32_t v = n_in ? 0 : f(a->task_id, a->range_begin, a->range_end, w);
    for (uint32_t i = 0; i < n_in; i++)
      v += ((const uint32_t *)df_ctx_input(ctx, i))[w];
    o[w] = v;
  }
}
