/* A stand-in for the generated df_dispatch: handler 0 writes the task id
   and range into its output slot through the df_ctx accessors. */
#include "df/device.h"
#include "df/kernel_plan.h"

/* What the generated module defines: every protocol path on, records
   from the kernel parameters, a handler workspace (so the kernel places
   one: docs/workspace.md). */
const uint32_t df_plan_features = DF_FEATURES_ALL;
const df_plan_records df_embedded_plan = {0};
const uint32_t df_handler_workspace_bytes = 4096;

void df_dispatch(uint32_t handler_id, const df_ctx *ctx) {
  if (handler_id != 0)
    return;
  uint32_t *out = (uint32_t *)df_ctx_output(ctx);
  if (out && df_ctx_thread(ctx) < 2)
    out[df_ctx_thread(ctx)] = df_ctx_task_id(ctx) + df_ctx_range_begin(ctx) + df_ctx_tiles(ctx);
  df_ctx_barrier(ctx);
}
