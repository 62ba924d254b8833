/* Handlers of bench/overhead/overhead.mlir, for nvptx64 and the host.

   Built with -DOV_EMPTY every handler returns at once: the dispatch plans
   then measure the runtime alone. Without it thread 0 counts: ov_iter
   writes 1, ov_step writes the sum of its inputs + 1, ov_finalize stores
   the count in Out[task] (f32), so a chain of one ITER and L REDUCEs
   ends with L + 1 in Out and a miswired chain shows. */
#include "df/device.h"

void ov_iter(const df_ctx *ctx) {
#ifndef OV_EMPTY
  if (ctx->thread == 0)
    *(float *)df_ctx_output(ctx) = 1.0f;
#else
  (void)ctx;
#endif
}

void ov_step(const df_ctx *ctx) {
#ifndef OV_EMPTY
  if (ctx->thread == 0) {
    float s = 1.0f;
    for (uint32_t i = 0; i < df_ctx_input_count(ctx); i++)
      s += *(const float *)df_ctx_input(ctx, i);
    *(float *)df_ctx_output(ctx) = s;
  }
#else
  (void)ctx;
#endif
}

void ov_finalize(const df_ctx *ctx) {
#ifndef OV_EMPTY
  if (ctx->thread == 0)
    ((float *)df_ctx_tensor(ctx, 0))[df_ctx_task_id(ctx)] = *(const float *)df_ctx_input(ctx, 0);
#else
  (void)ctx;
#endif
}
