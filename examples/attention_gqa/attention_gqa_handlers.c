/* C handlers of examples/attention_gqa/attention_gqa.mlir: split-KV GQA
   decode attention, fp16 in, fp32 accumulate. Written once for the GPU
   (clang --target=nvptx64-nvidia-cuda, linked by df-translate --df-link)
   and the host backend (a shared object; a plain serial version).

   Tensors (row-major, contiguous):
     Q f16[seqs][HQ=32][D=128]            one decode query per head
     K f16[seqs][GQA_LMAX][HKV=8][D=128]  keys, the first L(seq) rows valid
     V f16[seqs][GQA_LMAX][HKV=8][D=128]  values, same layout
     O f32[seqs][HQ][D]                   output
   GQA_LMAX (compile-time, default 32768) is the KV capacity per sequence.
   Query head hq reads KV head hq / G (G = HQ / HKV = 4 consecutive heads).
   Task (seq, kv_head): the G query heads of one KV head.

   GqaInter {lse f32[G]; o f16[G][D]}: lse at byte 0, o at byte 16
   (REFERENCE 1.4), 1040 bytes; o is normalised, lse natural-log.

   GPU partial: threads are split into half-warps; a half-warp takes one
   key row at a time (16 lanes x 16-byte loads = the 256-byte row of K and
   V), lane l owns dims 8l..8l+7 of all G heads, scores are reduced with
   butterfly shuffles, each half-warp keeps an online softmax; the two
   half-warps of a warp merge by shuffles, warps merge through static
   shared memory in a fixed order (so results are bitwise reproducible). */
#include <stdbool.h>

#include "df/device.h"

#define D 128
#define G 4
#define HQ 32
#define HKV 8
#ifndef GQA_LMAX
#define GQA_LMAX 32768u
#endif
#define SCALE 0.08838834764831845f /* 1/sqrt(D) */
#define LOG2E 1.4426950408889634f
#define LN2 0.6931471805599453f
#define MAX_WARPS 16 /* up to 512 threads take part; more threads idle */
#define UNROLL 2     /* key rows in flight per half-warp */

typedef struct gqa_inter {
  float lse[G];
  _Float16 o[G][D];
} gqa_inter;

_Static_assert(__builtin_offsetof(gqa_inter, o) == 16, "o follows lse[4] (REFERENCE 1.4)");
_Static_assert(sizeof(gqa_inter) == 1040, "GqaInter is 1040 bytes");

static inline uint64_t kv_row(uint32_t seq, uint32_t pos, uint32_t hk) {
  return (((uint64_t)seq * GQA_LMAX + pos) * HKV + hk) * D;
}

#if defined(__NVPTX__)

typedef _Float16 half8 __attribute__((ext_vector_type(8)));
typedef float float8 __attribute__((ext_vector_type(8)));

static inline float ex2(float x) { return __nvvm_ex2_approx_f(x); }
static inline float lg2(float x) { return __nvvm_lg2_approx_f(x); }
static inline float bfly(float v, int mask) {
  return __nvvm_shfl_sync_bfly_f32(0xffffffffu, v, mask, 0x1f);
}
static inline float fmaxf_(float a, float b) { return a > b ? a : b; }
/* exp2(m - ref), 0 for an empty state (m = -inf). */
static inline float weight(float m, float ref) {
  return m == -__builtin_inff() ? 0.0f : ex2(m - ref);
}

static __attribute__((address_space(3))) float red_o[MAX_WARPS][G][D];
static __attribute__((address_space(3))) float red_m[MAX_WARPS][G];
static __attribute__((address_space(3))) float red_l[MAX_WARPS][G];

static inline float8 load8(const _Float16 *p) {
  half8 h = *(const half8 *)p; /* 16-byte aligned: rows are 256 bytes */
  return __builtin_convertvector(h, float8);
}

void gqa_partial(const df_ctx *ctx) {
  const uint32_t seq = df_ctx_task_coord(ctx, 0), hk = df_ctx_task_coord(ctx, 1);
  const uint32_t begin = df_ctx_range_begin(ctx), end = df_ctx_range_end(ctx);
  const _Float16 *Q = (const _Float16 *)df_ctx_tensor(ctx, 0);
  const _Float16 *K = (const _Float16 *)df_ctx_tensor(ctx, 1);
  const _Float16 *V = (const _Float16 *)df_ctx_tensor(ctx, 2);
  gqa_inter *out = df_ctx_output(ctx);
  const uint32_t tid = df_ctx_thread(ctx);
  uint32_t threads = df_ctx_threads(ctx) & ~31u;
  threads = threads > 32 * MAX_WARPS ? 32 * MAX_WARPS : threads;
  const bool active = tid < threads;
  const uint32_t lane = tid & 31, warp = tid >> 5, sub = lane & 15, half = lane >> 4;
  const uint32_t warps = threads >> 5, stride = 2 * warps; /* keys per round */

  /* q pre-scaled into the base-2 domain: scores come out as log2 weights. */
  float8 q[G];
  _Pragma("unroll") for (int h = 0; h < G; h++)
    q[h] = load8(Q + ((uint64_t)seq * HQ + hk * G + h) * D + sub * 8) * (SCALE * LOG2E);
  float m[G], l[G];
  float8 acc[G];
  _Pragma("unroll") for (int h = 0; h < G; h++) {
    m[h] = -__builtin_inff();
    l[h] = 0.0f;
    acc[h] = (float8)0.0f;
  }
  /* The trip count depends on the warp only, so every lane reaches the
     shuffles; a half-warp past the end computes and discards. */
  for (uint32_t jw = begin + 2 * warp; active && jw < end; jw += stride * UNROLL) {
    float8 k[UNROLL], v[UNROLL];
    bool ok[UNROLL];
    _Pragma("unroll") for (int u = 0; u < UNROLL; u++) {
      uint32_t j = jw + u * stride + half;
      ok[u] = j < end;
      uint64_t row = kv_row(seq, ok[u] ? j : jw, hk) + sub * 8;
      k[u] = load8(K + row);
      v[u] = load8(V + row);
    }
    _Pragma("unroll") for (int u = 0; u < UNROLL; u++)
      _Pragma("unroll") for (int h = 0; h < G; h++) {
        float8 p = q[h] * k[u];
        float s = ((p.s0 + p.s1) + (p.s2 + p.s3)) + ((p.s4 + p.s5) + (p.s6 + p.s7));
        s += bfly(s, 8);
        s += bfly(s, 4);
        s += bfly(s, 2);
        s += bfly(s, 1);
        if (!ok[u])
          continue;
        float mn = fmaxf_(m[h], s);
        float corr = ex2(m[h] - mn), w = ex2(s - mn);
        l[h] = l[h] * corr + w;
        acc[h] = acc[h] * corr + v[u] * w;
        m[h] = mn;
      }
  }
  /* Merge the two half-warps of each warp (lane ^ 16). */
  _Pragma("unroll") for (int h = 0; h < G; h++) {
    float mo = bfly(m[h], 16), lo = bfly(l[h], 16);
    float mn = fmaxf_(m[h], mo);
    float a = weight(m[h], mn), b = weight(mo, mn);
    l[h] = l[h] * a + lo * b;
    float8 other;
    other.s0 = bfly(acc[h].s0, 16);
    other.s1 = bfly(acc[h].s1, 16);
    other.s2 = bfly(acc[h].s2, 16);
    other.s3 = bfly(acc[h].s3, 16);
    other.s4 = bfly(acc[h].s4, 16);
    other.s5 = bfly(acc[h].s5, 16);
    other.s6 = bfly(acc[h].s6, 16);
    other.s7 = bfly(acc[h].s7, 16);
    acc[h] = acc[h] * a + other * b;
    m[h] = mn;
  }
  if (active && lane < 16) {
    _Pragma("unroll") for (int h = 0; h < G; h++)
      _Pragma("unroll") for (int e = 0; e < 8; e++)
        red_o[warp][h][sub * 8 + e] = acc[h][e];
    if (lane == 0)
      _Pragma("unroll") for (int h = 0; h < G; h++) {
        red_m[warp][h] = m[h];
        red_l[warp][h] = l[h];
      }
  }
  df_ctx_barrier(ctx);
  /* Warps in a fixed order: deterministic. */
  for (uint32_t idx = tid; idx < G * D; idx += df_ctx_threads(ctx)) {
    uint32_t h = idx / D, d = idx % D;
    float M = -__builtin_inff();
    for (uint32_t w = 0; w < warps; w++)
      M = fmaxf_(M, red_m[w][h]);
    float L = 0.0f, O = 0.0f;
    for (uint32_t w = 0; w < warps; w++) {
      float a = weight(red_m[w][h], M);
      L += red_l[w][h] * a;
      O += red_o[w][h][d] * a;
    }
    out->o[h][d] = (_Float16)(O / L);
    if (d == 0)
      out->lse[h] = (M + lg2(L)) * LN2;
  }
  df_ctx_barrier(ctx); /* the static arrays are free for the next call */
}

static inline float fexp(float x) { return ex2(x * LOG2E); }
static inline float flog(float x) { return lg2(x) * LN2; }

#else /* host backend: serial, thread 0 */

#include <math.h>

static inline float fexp(float x) { return expf(x); }
static inline float flog(float x) { return logf(x); }

void gqa_partial(const df_ctx *ctx) {
  if (df_ctx_thread(ctx) == 0) {
    const uint32_t seq = df_ctx_task_coord(ctx, 0), hk = df_ctx_task_coord(ctx, 1);
    const uint32_t begin = df_ctx_range_begin(ctx), end = df_ctx_range_end(ctx);
    const _Float16 *Q = (const _Float16 *)df_ctx_tensor(ctx, 0);
    const _Float16 *K = (const _Float16 *)df_ctx_tensor(ctx, 1);
    const _Float16 *V = (const _Float16 *)df_ctx_tensor(ctx, 2);
    gqa_inter *out = df_ctx_output(ctx);
    for (int h = 0; h < G; h++) {
      const _Float16 *q = Q + ((uint64_t)seq * HQ + hk * G + h) * D;
      float m = -INFINITY, l = 0.0f, acc[D] = {0};
      for (uint32_t j = begin; j < end; j++) {
        const _Float16 *k = K + kv_row(seq, j, hk), *v = V + kv_row(seq, j, hk);
        float s = 0.0f;
        for (int d = 0; d < D; d++)
          s += (float)q[d] * (float)k[d];
        s *= SCALE;
        float mn = s > m ? s : m, corr = expf(m - mn), w = expf(s - mn);
        l = l * corr + w;
        for (int d = 0; d < D; d++)
          acc[d] = acc[d] * corr + w * (float)v[d];
        m = mn;
      }
      for (int d = 0; d < D; d++)
        out->o[h][d] = (_Float16)(acc[d] / l);
      out->lse[h] = m + logf(l);
    }
  }
  df_ctx_barrier(ctx);
}

#endif

/* LSE combine of the partials of one task: weights exp(lse_i - max). */
static float max_lse(const df_ctx *ctx, uint32_t n, uint32_t h) {
  float mx = -__builtin_inff();
  for (uint32_t i = 0; i < n; i++) {
    float v = ((const gqa_inter *)df_ctx_input(ctx, i))->lse[h];
    mx = v > mx ? v : mx;
  }
  return mx;
}

void gqa_combine(const df_ctx *ctx) {
  const uint32_t n = df_ctx_input_count(ctx);
  gqa_inter *out = df_ctx_output(ctx);
  for (uint32_t idx = df_ctx_thread(ctx); idx < G * D; idx += df_ctx_threads(ctx)) {
    uint32_t h = idx / D, d = idx % D;
    float mx = max_lse(ctx, n, h), sum = 0.0f, acc = 0.0f;
    for (uint32_t i = 0; i < n; i++) {
      const gqa_inter *p = df_ctx_input(ctx, i);
      float w = fexp(p->lse[h] - mx);
      sum += w;
      acc += w * (float)p->o[h][d];
    }
    out->o[h][d] = (_Float16)(acc / sum);
  }
  /* lse after every o: the output may alias an input whose lse is read.
     Threads stride over the G heads (a CTA may have fewer than G threads:
     the host backend runs one by default). */
  float lse[G];
  for (uint32_t h = df_ctx_thread(ctx); h < G; h += df_ctx_threads(ctx)) {
    float mx = max_lse(ctx, n, h), sum = 0.0f;
    for (uint32_t i = 0; i < n; i++)
      sum += fexp(((const gqa_inter *)df_ctx_input(ctx, i))->lse[h] - mx);
    lse[h] = mx + flog(sum);
  }
  df_ctx_barrier(ctx);
  for (uint32_t h = df_ctx_thread(ctx); h < G; h += df_ctx_threads(ctx))
    out->lse[h] = lse[h];
  df_ctx_barrier(ctx);
}

/* The task's G output rows as f32. */
void gqa_finalize(const df_ctx *ctx) {
  const gqa_inter *in = df_ctx_input(ctx, 0);
  const uint32_t seq = df_ctx_task_coord(ctx, 0), hk = df_ctx_task_coord(ctx, 1);
  float *O = (float *)df_ctx_tensor(ctx, 3) + ((uint64_t)seq * HQ + hk * G) * D;
  for (uint32_t idx = df_ctx_thread(ctx); idx < G * D; idx += df_ctx_threads(ctx))
    O[idx] = (float)in->o[idx / D][idx % D];
}
