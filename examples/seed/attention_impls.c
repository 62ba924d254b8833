/* Implementations for examples/seed/attention_impls.mlir: split_kv in two
   capability regions (exactly 128 keys, and the general one). Both run the
   seed's split_kv body; each leaves a mark in a global so a test can see
   which implementations a kernel links. The reduce and the finalize come
   from df's built-in library (lse_combine, copy). */
#include "attention_handlers.c"

/* volatile: the marks survive optimisation exactly where their function does */
volatile unsigned df_example_ran_len128, df_example_ran_general, df_example_ran_tiles4;

void split_kv_len128(const df_ctx *ctx) {
  df_example_ran_len128 = 1;
  split_kv(ctx);
}

void split_kv_general(const df_ctx *ctx) {
  df_example_ran_general = 1;
  split_kv(ctx);
}

/* Declared for 4-tile calls, which the example's plans never make. */
void split_kv_tiles4(const df_ctx *ctx) {
  df_example_ran_tiles4 = 1;
  split_kv(ctx);
}
