/* A stand-in for the generated df_dispatch: handler 0 writes the task id
   and range into its output slot through the df_ctx accessors. */
#include "df/device.h"

void df_dispatch(uint32_t handler_id, const df_ctx *ctx) {
  if (handler_id != 0)
    return;
  uint32_t *out = (uint32_t *)df_ctx_output(ctx);
  if (out && df_ctx_thread(ctx) < 2)
    out[df_ctx_thread(ctx)] = df_ctx_task_id(ctx) + df_ctx_range_begin(ctx) + df_ctx_tiles(ctx);
  df_ctx_barrier(ctx);
}
