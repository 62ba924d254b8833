/* A kernel that runs examples/attention_gqa's partial handler on a df_ctx
   it does not know: unlike a df kernel, which may construct the ctx with
   constant fields (a NULL workspace when no handler declares one), every
   path of the handler stays, so ptxas sees its full register demand. */
#include "attention_gqa_handlers.c"

__attribute__((nvptx_kernel)) void gqa_partial_probe(const df_ctx *ctx) { gqa_partial(ctx); }
