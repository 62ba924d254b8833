/* The seed attention handlers (examples/seed/attention_handlers.c) with a
   partial that first proves it owns a handler workspace of WORKSPACE_NEED
   bytes (docs/workspace.md): the CTA's threads write a pattern over all of
   df_ctx_workspace_bytes, meet, and each reads back another thread's
   words. A workspace that is missing, smaller than WORKSPACE_NEED, not
   128-byte aligned or not shared by the CTA's threads makes the partial's
   lse NaN, so the output fails its reference check. WORKSPACE_WRITE_PAST
   writes one word past the end (the host backend's guard catches it). */
#define split_kv seed_split_kv
#include "../../../../examples/seed/attention_handlers.c"
#undef split_kv

#ifndef WORKSPACE_NEED
#define WORKSPACE_NEED 8192u
#endif

static uint32_t pattern(uint32_t task, uint32_t begin, uint32_t i) {
  return (task * 2654435761u) ^ (begin * 97u) ^ (i * 40503u + 7u);
}

void split_kv(const df_ctx *ctx) {
  uint32_t *ws = df_ctx_workspace(ctx);
  uint32_t bytes = df_ctx_workspace_bytes(ctx);
  uint32_t t = df_ctx_task_id(ctx), b = df_ctx_range_begin(ctx);
  uint32_t me = df_ctx_thread(ctx), n = df_ctx_threads(ctx);
  int ok = ws && bytes >= WORKSPACE_NEED && (uintptr_t)ws % 128 == 0;
  uint32_t words = ok ? bytes / 4 : 0;
  for (uint32_t i = me; i < words; i += n)
    ws[i] = pattern(t, b, i);
#ifdef WORKSPACE_WRITE_PAST
  if (ok && me == 0)
    ws[words] = 0;
#endif
  df_ctx_barrier(ctx);
  for (uint32_t i = (me + 1) % n; i < words; i += n)
    ok &= ws[i] == pattern(t, b, i);
  df_ctx_barrier(ctx);
  seed_split_kv(ctx);
  if (!ok)
    ((attn_inter *)df_ctx_output(ctx))->lse = __builtin_nanf("");
  df_ctx_barrier(ctx);
}
