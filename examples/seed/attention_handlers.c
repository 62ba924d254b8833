/* C handlers for examples/seed/attention.mlir, written once for the GPU
   (clang --target=nvptx64-nvidia-cuda) and the host backend.

   AttnInter {lse: f32; o: f16[2,8]} holds one query head's split-KV
   partial with head dim D = 16 (o's 2x8 elements): lse at byte 0, o at
   byte 4 (REFERENCE 1.4 field layout).
   Tensors: Q f16[tasks][16]; K, V f16[tasks][KV_STRIDE][16]; O f32[tasks][16].
   Threads stride over the head dim; thread 0 computes the softmax stats. */
#include "df/device.h"

#define D 16
#define KV_STRIDE 4096u
#define LOG2E 1.4426950408889634f

typedef struct attn_inter {
  float lse;
  _Float16 o[D];
} attn_inter;

_Static_assert(__builtin_offsetof(attn_inter, o) == 4, "o follows lse (REFERENCE 1.4)");

static inline float ex2(float x) {
#if defined(__NVPTX__)
  return __nvvm_ex2_approx_f(x);
#else
  return __builtin_exp2f(x);
#endif
}

static inline float lg2(float x) {
#if defined(__NVPTX__)
  return __nvvm_lg2_approx_f(x);
#else
  return __builtin_log2f(x);
#endif
}

/* Natural-log domain helpers on top of the fast base-2 forms. */
static inline float fexp(float x) { return ex2(x * LOG2E); }
static inline float flog(float x) { return lg2(x) / LOG2E; }

/* Partial attention of query `task` over keys [begin, end). */
void split_kv(const df_ctx *ctx) {
  uint32_t t = df_ctx_task_id(ctx);
  uint32_t begin = df_ctx_range_begin(ctx), end = df_ctx_range_end(ctx);
  const _Float16 *q = (const _Float16 *)df_ctx_tensor(ctx, 0) + t * D;
  const _Float16 *k = (const _Float16 *)df_ctx_tensor(ctx, 1) + (uint64_t)t * KV_STRIDE * D;
  const _Float16 *v = (const _Float16 *)df_ctx_tensor(ctx, 2) + (uint64_t)t * KV_STRIDE * D;
  attn_inter *out = df_ctx_output(ctx);
  const float scale = 0.25f; /* 1/sqrt(D) */
  /* Every thread computes the running max and sum (cheap at D = 16) so no
     shared reduction is needed; thread d owns output column d. */
  float m = -__builtin_inff(), l = 0.0f;
  for (uint32_t j = begin; j < end; j++) {
    float s = 0.0f;
    for (uint32_t d = 0; d < D; d++)
      s += (float)q[d] * (float)k[(uint64_t)j * D + d];
    s *= scale;
    float m2 = s > m ? s : m;
    l = l * fexp(m - m2) + fexp(s - m2);
    m = m2;
  }
  for (uint32_t d = df_ctx_thread(ctx); d < D; d += df_ctx_threads(ctx)) {
    float acc = 0.0f;
    for (uint32_t j = begin; j < end; j++) {
      float s = 0.0f;
      for (uint32_t e = 0; e < D; e++)
        s += (float)q[e] * (float)k[(uint64_t)j * D + e];
      acc += fexp(s * scale - m) * (float)v[(uint64_t)j * D + d];
    }
    out->o[d] = (_Float16)(acc / l);
  }
  if (df_ctx_thread(ctx) == 0)
    out->lse = m + flog(l);
  df_ctx_barrier(ctx);
}

/* LSE combine: weights exp(lse_i - max lse), renormalised. */
void combine(const df_ctx *ctx) {
  uint32_t n = df_ctx_input_count(ctx);
  attn_inter *out = df_ctx_output(ctx);
  float mx = -__builtin_inff();
  for (uint32_t i = 0; i < n; i++) {
    float lse = ((const attn_inter *)df_ctx_input(ctx, i))->lse;
    mx = lse > mx ? lse : mx;
  }
  float sum = 0.0f;
  for (uint32_t i = 0; i < n; i++)
    sum += fexp(((const attn_inter *)df_ctx_input(ctx, i))->lse - mx);
  for (uint32_t d = df_ctx_thread(ctx); d < D; d += df_ctx_threads(ctx)) {
    float acc = 0.0f;
    for (uint32_t i = 0; i < n; i++) {
      const attn_inter *p = df_ctx_input(ctx, i);
      acc += fexp(p->lse - mx) * (float)p->o[d];
    }
    out->o[d] = (_Float16)(acc / sum);
  }
  df_ctx_barrier(ctx);
  if (df_ctx_thread(ctx) == 0)
    out->lse = mx + flog(sum);
  df_ctx_barrier(ctx);
}

/* Write the combined output row of the task as f32. */
void finalize(const df_ctx *ctx) {
  const attn_inter *in = df_ctx_input(ctx, 0);
  float *o = (float *)df_ctx_tensor(ctx, 3) + df_ctx_task_id(ctx) * D;
  for (uint32_t d = df_ctx_thread(ctx); d < D; d += df_ctx_threads(ctx))
    o[d] = (float)in->o[d];
}
