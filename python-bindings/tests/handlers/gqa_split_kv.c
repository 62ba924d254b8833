/* A GQA-style split_kv for test_implementations.py: one task is a group of
   H = 4 query heads sharing K and V (head dim D = 128); a partial over keys
   [begin, end) writes each head's log-sum-exp and softmax-normalised
   output, GqaInter {lse: f32[4]; o: f16[4][128]} (lse at byte 0, o at byte
   16), which df's built-in lse_combine and copy handlers consume.
   Tensors: Q f32[tasks][4][128]; K, V f32[tasks][512][128]. Host only
   (libm's expf/logf). */
#include "df/device.h"

#define H 4
#define D 128
#define KV_STRIDE 512u
#define MAX_KEYS 512u

typedef struct gqa_inter {
  float lse[H];
  _Float16 o[H][D];
} gqa_inter;

_Static_assert(__builtin_offsetof(gqa_inter, o) == 16, "o follows lse");

float expf(float);
float logf(float);

void gqa_split_kv(const df_ctx *ctx) {
  uint32_t t = df_ctx_task_id(ctx);
  uint32_t begin = df_ctx_range_begin(ctx), end = df_ctx_range_end(ctx);
  const float *q = (const float *)df_ctx_tensor(ctx, 0) + (uint64_t)t * H * D;
  const float *k = (const float *)df_ctx_tensor(ctx, 1) + (uint64_t)t * KV_STRIDE * D;
  const float *v = (const float *)df_ctx_tensor(ctx, 2) + (uint64_t)t * KV_STRIDE * D;
  gqa_inter *out = df_ctx_output(ctx);
  const float scale = 0.08838834764831845f; /* 1/sqrt(D) */
  float w[MAX_KEYS];
  uint32_t n = end - begin;
  if (n > MAX_KEYS)
    n = MAX_KEYS;
  for (uint32_t h = df_ctx_thread(ctx); h < H; h += df_ctx_threads(ctx)) {
    float m = -__builtin_inff();
    for (uint32_t j = 0; j < n; j++) {
      float s = 0.0f;
      for (uint32_t d = 0; d < D; d++)
        s += q[h * D + d] * k[(uint64_t)(begin + j) * D + d];
      w[j] = s * scale;
      m = w[j] > m ? w[j] : m;
    }
    float l = 0.0f;
    for (uint32_t j = 0; j < n; j++) {
      w[j] = expf(w[j] - m);
      l += w[j];
    }
    for (uint32_t d = 0; d < D; d++) {
      float acc = 0.0f;
      for (uint32_t j = 0; j < n; j++)
        acc += w[j] * v[(uint64_t)(begin + j) * D + d];
      out->o[h][d] = (_Float16)(n ? acc / l : 0.0f);
    }
    out->lse[h] = n ? m + logf(l) : -__builtin_inff();
  }
}
