/* Handler libraries for df-run's host-backend test (df_run_host_test.sh),
   for the seed attention plan. Built twice:
   - df_run_rogue_handlers: split_kv by its packed symbol
     dataflow_handler_0_split_kv writes below the slot arena (the host
     backend diagnoses an arena violation); a harmless split_kv by
     operator name that df-run must not prefer; combine and finalize by
     operator name.
   - df_run_partial_handlers (DF_TEST_PARTIAL): no combine at all, so
     resolving handler 1 'combine' fails. */
#include <string.h>

#include "df/device.h"

static void fill_output(const df_ctx *ctx) {
  uint8_t *out = df_ctx_output(ctx);
  if (out && df_ctx_thread(ctx) == 0)
    memset(out, 0, ctx->slots[ctx->args->output_slot].bytes);
}

void split_kv(const df_ctx *ctx) { fill_output(ctx); }

#ifndef DF_TEST_PARTIAL
void dataflow_handler_0_split_kv(const df_ctx *ctx) {
  fill_output(ctx);
  ctx->shared_slots[-4] = 0; /* into the shared control region */
}

void combine(const df_ctx *ctx) { fill_output(ctx); }
#endif

void finalize(const df_ctx *ctx) { (void)ctx; }
