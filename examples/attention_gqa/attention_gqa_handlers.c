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

   GPU partial (sm_90, tensor cores): each warp takes 16-key steps of the
   block; per step every lane issues 16 coalesced 16-byte loads of K and V
   that are its mma.sync.m16n8k16 fragments as they are, S = Q K^T and
   O^T += V^T P^T run on the tensor cores (f16 in, f32 accumulate), the
   online softmax in fp32 once per step, the next step's loads in flight
   during this one's compute. Warps merge through static shared memory in a
   fixed order (so results are bitwise reproducible). See step() for the
   fragment mapping.

   -DKV_STAGES=S (S >= 2) builds the staged partial instead: the same
   loads as cp.async copies into a ring of S steps per warp in the handler
   workspace (the declaration needs df.workspace_bytes), S - 1 steps in
   flight, one register buffer, the warps merging through their rings
   (README.md; group arithmetic at the loop). Measured ~30 % slower than
   the register path on the H200 (bench/attention/HISTORY.md, run H): off by default.
   With -DKV_BULK as well the ring is filled by one cp.async.bulk per K/V
   row on per-stage mbarriers (run AC: 2-4 % slower than the register
   path; examples/attention_gqa/README.md). */
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
#define STEP 16      /* keys per warp step (two n8 tiles of the QK mma) */
#ifndef AHEAD
/* Steps between an L2 bulk prefetch of a step and its compute; 0 = none.
   Off: on the H200 prefetching 4 (or 1) steps ahead made every case
   10-17 % slower (bench/README.md). */
#define AHEAD 0
#endif

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

static inline float ex2(float x) { return __nvvm_ex2_approx_f(x); }
static inline float lg2(float x) { return __nvvm_lg2_approx_f(x); }
static inline float bfly(float v, int mask) {
  return __nvvm_shfl_sync_bfly_f32(0xffffffffu, v, mask, 0x1f);
}
static inline float from_lane(float v, int lane) {
  return __nvvm_shfl_sync_idx_f32(0xffffffffu, v, lane, 0x1f);
}
static inline float fmaxf_(float a, float b) { return a > b ? a : b; }
/* exp2(m - ref), 0 for an empty state (m = -inf). */
static inline float weight(float m, float ref) {
  return m == -__builtin_inff() ? 0.0f : ex2(m - ref);
}

/* 16 bytes of a K/V row: read once, so not kept in L1. The L2 fetches
   whole 128-byte lines (.L2::128B): a K load's quarter warps ask for 64
   bytes of a line each, its two halves in separate instructions, and one
   fetch per line was 1-3 us faster on every case (bench/attention/HISTORY.md, run
   AC). -DKV_L2_HINT asks for 256 bytes instead (the default before run J:
   6-7 % slower), -DKV_L2_NONE for no hint (runs J-AB). */
#ifdef KV_L2_HINT
#define KV_L2 ".L2::256B"
#elif defined(KV_L2_NONE)
#define KV_L2 ""
#else
#define KV_L2 ".L2::128B"
#endif
/* The K/V load's cache operators: the default (0) streams through the
   non-coherent path without allocating in L1; -DKV_LD_KIND=1..4 try the
   coherent path without L1 allocation, L2 only (.cg), streaming (.cs.nc)
   and L1 evict-first (bench/attention/HISTORY.md, run AE). */
#ifndef KV_LD_KIND
#define KV_LD_KIND 0
#endif
#if KV_LD_KIND == 0
#define KV_LD "ld.global.nc.L1::no_allocate"
#elif KV_LD_KIND == 1
#define KV_LD "ld.global.L1::no_allocate"
#elif KV_LD_KIND == 2
#define KV_LD "ld.global.cg"
#elif KV_LD_KIND == 3
#define KV_LD "ld.global.cs.nc"
#elif KV_LD_KIND == 4
#define KV_LD "ld.global.nc.L1::evict_first"
#else
#error "KV_LD_KIND must be 0..4"
#endif
#ifdef KV_EVICT_FIRST
/* -DKV_EVICT_FIRST: the K/V rows ask the L2 to evict them first, so the
   stream does not push the plan's records and the reduce inputs out of
   the L2 (an experiment: bench/attention/HISTORY.md, run M). Not volatile: one
   policy register per handler. */
static inline uint64_t kv_policy(void) {
  uint64_t p;
  __asm__("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
static inline void ldg16(const _Float16 *p, uint32_t *r) {
  __asm__(KV_LD ".L2::cache_hint" KV_L2 ".v4.u32 {%0, %1, %2, %3}, [%4], %5;"
          : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
          : "l"(p), "l"(kv_policy()));
}
#else
static inline void ldg16(const _Float16 *p, uint32_t *r) {
  __asm__(KV_LD KV_L2 ".v4.u32 {%0, %1, %2, %3}, [%4];"
          : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
          : "l"(p));
}
#endif
/* d += A B, m16n8k16, fp16 operands, fp32 accumulators (PTX fragment
   layouts: a0 = (row g, k 2t..2t+1), a1 = (g+8, 2t), a2 = (g, 2t+8),
   a3 = (g+8, 2t+8); b0 = (k 2t..2t+1, col g), b1 = (2t+8, g); d0,d1 =
   (g, 2t..2t+1), d2,d3 = (g+8, 2t..2t+1); g = lane/4, t = lane%4). */
static inline void mma(float *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                       uint32_t b0, uint32_t b1) {
  __asm__("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
          "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
          : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
/* Two floats as f16x2: lo in bits 0-15. */
static inline uint32_t pack_h2(float lo, float hi) {
  uint32_t r;
  __asm__("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
/* {lo(a), lo(b)} (sel 0x5410) or {hi(a), hi(b)} (sel 0x7632). */
static inline uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  __asm__("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

#ifdef GQA_PROBE_TIMES
/* Timing probe (bench/smrate's harness of the partial): per CTA, thread
   0's clock before the Q loads, when its warp has issued its loop, after
   the block barrier that follows, and at the handler's end. The loop's
   stamp precedes the last loads' arrival (nothing waits for them until
   the warps' merge), so the last phase holds the stream's drain. */
uint64_t gqa_probe_times[4 * 1024];
static inline uint64_t probe_time(void) {
  uint64_t t;
  __asm__ volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
#endif

#ifndef KV_STAGES
static __attribute__((address_space(3))) float red_o[MAX_WARPS][G][D];
static __attribute__((address_space(3))) float red_m[MAX_WARPS][G];
static __attribute__((address_space(3))) float red_l[MAX_WARPS][G];
#endif

#ifndef KV_STAGES
/* L2 prefetch of a later step: one 256-byte row per lane (lanes 0-15 K,
   16-31 V), rows past the range end skipped. Nothing lands in registers,
   so the bytes in flight per SM are not bounded by the register file. */
static inline void prefetch_step(const _Float16 *Kt, const _Float16 *Vt, uint32_t pos,
                                 uint32_t end, uint32_t lane) {
  uint32_t key = pos + (lane & 15);
  if (key < end) {
    const _Float16 *p = (lane < 16 ? Kt : Vt) + (uint64_t)key * (HKV * D);
    __asm__ volatile("cp.async.bulk.prefetch.L2.global [%0], 256;" ::"l"(p) : "memory");
  }
}
#endif

/* Loads of one warp step (STEP keys from pos; rows past the range end
   read the last row, whose scores are masked): lane (g, t) holds
   K rows pos+g and pos+8+g, 16-byte chunks 4j+t (k[16u + 4j .. +3]),
   V rows pos + {2t, 2t+1, 2t+8, 2t+9}, chunks g and g+8 (v[8i .. 8i+7]). */
static inline void load_step(uint32_t *k, uint32_t *v, const _Float16 *Kt, const _Float16 *Vt,
                             uint32_t pos, uint32_t last, uint32_t g, uint32_t t) {
  _Pragma("unroll") for (int u = 0; u < 2; u++) {
    uint32_t key = pos + 8 * u + g;
    const _Float16 *p = Kt + (uint64_t)(key < last ? key : last) * (HKV * D);
    _Pragma("unroll") for (int j = 0; j < 4; j++)
      ldg16(p + (4 * j + t) * 8, k + 16 * u + 4 * j);
  }
  _Pragma("unroll") for (int i = 0; i < 4; i++) {
    uint32_t key = pos + 2 * t + (i & 1) + 8 * (i >> 1);
    const _Float16 *p = Vt + (uint64_t)(key < last ? key : last) * (HKV * D);
    ldg16(p + g * 8, v + 8 * i);
    ldg16(p + (g + 8) * 8, v + 8 * i + 4);
  }
}

typedef struct warp_state {
  float o[8][4]; /* O^T fragments: dims (8g + mt, 64 + 8g + mt) x heads (2t, 2t+1) */
  float m, l;    /* head g: running max (log2 domain), this lane's share of the sum */
} warp_state;

/* One step on tensor cores. S = Q K^T with the G heads as rows 0..3 of the
   m16 tile and 16 keys as two n8 tiles; the dot product's k order is a
   permutation of the dims (slice s, lane t: dims 8(4(s/2)+t) + 4(s%2) +
   0..3), the same for Q and K, so each lane's 16-byte loads are its
   fragments as they are. The S accumulator is, per lane, exactly the P
   operand of O^T += V^T P^T (keys 2t, 2t+1, 2t+8, 2t+9 of head g); V^T's
   rows are dims 8g + mt and 64 + 8g + mt of m-tile mt, paired across keys
   with byte permutes. */
static inline void step(warp_state *st, const uint32_t *k, const uint32_t *v, const uint32_t *qf,
                        uint32_t pos, uint32_t end, uint32_t t) {
  float s[2][4] = {{0.0f}};
  _Pragma("unroll") for (int u = 0; u < 2; u++)
    _Pragma("unroll") for (int sl = 0; sl < 8; sl++)
      mma(s[u], qf[2 * sl], 0u, qf[2 * sl + 1], 0u, k[16 * u + 2 * sl], k[16 * u + 2 * sl + 1]);
  const float sc = SCALE * LOG2E;
  float x[4] = {s[0][0] * sc, s[0][1] * sc, s[1][0] * sc, s[1][1] * sc};
  uint32_t key0 = pos + 2 * t;
  if (key0 >= end)
    x[0] = -__builtin_inff();
  if (key0 + 1 >= end)
    x[1] = -__builtin_inff();
  if (key0 + 8 >= end)
    x[2] = -__builtin_inff();
  if (key0 + 9 >= end)
    x[3] = -__builtin_inff();
  float mx = fmaxf_(fmaxf_(x[0], x[1]), fmaxf_(x[2], x[3]));
  mx = fmaxf_(mx, bfly(mx, 1));
  mx = fmaxf_(mx, bfly(mx, 2));
  /* Key pos is valid, so mn is finite. */
  float mn = fmaxf_(st->m, mx), corr = ex2(st->m - mn);
  float p[4];
  _Pragma("unroll") for (int i = 0; i < 4; i++) p[i] = ex2(x[i] - mn);
  st->l = st->l * corr + ((p[0] + p[1]) + (p[2] + p[3]));
  st->m = mn;
  uint32_t b0 = pack_h2(p[0], p[1]), b1 = pack_h2(p[2], p[3]);
  /* Columns 2t, 2t+1 of O^T are heads whose max lives in lanes 8t, 8t+4. */
  float ca = from_lane(corr, 8 * t), cb = from_lane(corr, 8 * t + 4);
  _Pragma("unroll") for (int mt = 0; mt < 8; mt++) {
    st->o[mt][0] *= ca;
    st->o[mt][1] *= cb;
    st->o[mt][2] *= ca;
    st->o[mt][3] *= cb;
    uint32_t sel = (mt & 1) ? 0x7632u : 0x5410u, w = mt >> 1;
    mma(st->o[mt], prmt(v[w], v[8 + w], sel), prmt(v[4 + w], v[12 + w], sel),
        prmt(v[16 + w], v[24 + w], sel), prmt(v[20 + w], v[28 + w], sel), b0, b1);
  }
}

#include "gqa_join.h"

#ifndef KV_STAGES
void gqa_partial(const df_ctx *ctx) {
  const uint32_t seq = df_ctx_task_coord(ctx, 0), hk = df_ctx_task_coord(ctx, 1);
  const uint32_t begin = df_ctx_range_begin(ctx), end = df_ctx_range_end(ctx);
  const _Float16 *Q = (const _Float16 *)df_ctx_tensor(ctx, 0);
  const _Float16 *Kt = (const _Float16 *)df_ctx_tensor(ctx, 1) + kv_row(seq, 0, hk);
  const _Float16 *Vt = (const _Float16 *)df_ctx_tensor(ctx, 2) + kv_row(seq, 0, hk);
#ifdef GQA_JOIN
  gqa_inter *out = join_out(ctx);
  float *const whole = join_whole(ctx);
#else
  gqa_inter *out = df_ctx_output(ctx);
#endif
  const uint32_t tid = df_ctx_thread(ctx);
  uint32_t warps = df_ctx_threads(ctx) >> 5;
  warps = warps > MAX_WARPS ? MAX_WARPS : warps;
  const uint32_t warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const bool active = warp < warps;
#ifdef PARTIAL_SPIN_NS
  /* Timing probe (bench/attention/HISTORY.md, run M; results are wrong): instead of
     reading K/V the partial waits PARTIAL_SPIN_NS ns per 8192 keys and
     writes an empty state, so the reduce tree's tail can be timed without
     the stream's memory traffic. The real path stays in the kernel (the
     test is not constant), so the code the SM runs is the same. */
  if (end - begin != 1u) {
    uint64_t t0, t1;
    __asm__ volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    const uint64_t ns = (uint64_t)PARTIAL_SPIN_NS * (end - begin) / 8192u;
    do
      __asm__ volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
    while (t1 - t0 < ns);
    for (uint32_t i = tid; i < G * D; i += df_ctx_threads(ctx))
      out->o[i / D][i % D] = (_Float16)0.0f;
    if (tid < G)
      out->lse[tid] = 0.0f;
    df_ctx_barrier(ctx);
    return;
  }
#endif

#ifdef GQA_PROBE_TIMES
  if (tid == 0)
    gqa_probe_times[4 * __nvvm_read_ptx_sreg_ctaid_x()] = probe_time();
#endif
  /* Q as the A fragments (rows g < G are heads; rows 4..15 are zero). */
  uint32_t qf[16];
  if (g < G) {
    const _Float16 *q = Q + ((uint64_t)seq * HQ + hk * G + g) * D;
    _Pragma("unroll") for (int j = 0; j < 4; j++) ldg16(q + (4 * j + t) * 8, qf + 4 * j);
  } else {
    _Pragma("unroll") for (int i = 0; i < 16; i++) qf[i] = 0;
  }
  warp_state st;
  st.m = -__builtin_inff();
  st.l = 0.0f;
  _Pragma("unroll") for (int mt = 0; mt < 8; mt++)
    _Pragma("unroll") for (int e = 0; e < 4; e++) st.o[mt][e] = 0.0f;

  /* Warp w takes steps w, w + warps, ...: two register buffers, the next
     step's loads in flight while this one computes (the branches depend
     on the warp only). */
  const uint32_t stride = STEP * warps, last = end - 1;
  uint32_t ka[32], va[32], kb[32], vb[32];
  uint32_t pos = begin + STEP * warp;
  if (active && pos < end) {
    load_step(ka, va, Kt, Vt, pos, last, g, t);
    if (AHEAD)
      _Pragma("unroll") for (uint32_t a = 1; a < AHEAD; a++)
        prefetch_step(Kt, Vt, pos + a * stride, end, lane);
  }
  while (active && pos < end) {
    uint32_t p1 = pos + stride;
    if (AHEAD)
      prefetch_step(Kt, Vt, pos + AHEAD * stride, end, lane);
    if (p1 < end)
      load_step(kb, vb, Kt, Vt, p1, last, g, t);
    step(&st, ka, va, qf, pos, end, t);
    if (p1 >= end)
      break;
    uint32_t p2 = p1 + stride;
    if (AHEAD)
      prefetch_step(Kt, Vt, p1 + AHEAD * stride, end, lane);
    if (p2 < end)
      load_step(ka, va, Kt, Vt, p2, last, g, t);
    step(&st, kb, vb, qf, p1, end, t);
    pos = p2;
  }
#ifdef GQA_PROBE_TIMES
  if (tid == 0)
    gqa_probe_times[4 * __nvvm_read_ptx_sreg_ctaid_x() + 1] = probe_time();
  df_ctx_barrier(ctx);
  if (tid == 0)
    gqa_probe_times[4 * __nvvm_read_ptx_sreg_ctaid_x() + 2] = probe_time();
#endif
  st.l += bfly(st.l, 1);
  st.l += bfly(st.l, 2);
  if (active) {
    if (t == 0 && g < G) {
      red_m[warp][g] = st.m;
      red_l[warp][g] = st.l;
    }
    if (t < 2)
      _Pragma("unroll") for (int mt = 0; mt < 8; mt++) {
        uint32_t da = 8 * g + mt, db = 64 + 8 * g + mt;
        red_o[warp][2 * t][da] = st.o[mt][0];
        red_o[warp][2 * t + 1][da] = st.o[mt][1];
        red_o[warp][2 * t][db] = st.o[mt][2];
        red_o[warp][2 * t + 1][db] = st.o[mt][3];
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
#ifdef GQA_JOIN
    if (whole) {
      whole[h * D + d] = O / L;
      continue;
    }
#endif
    out->o[h][d] = (_Float16)(O / L);
    if (d == 0)
      out->lse[h] = (M + lg2(L)) * LN2;
  }
  df_ctx_barrier(ctx); /* the static arrays are free for the next call */
#ifdef GQA_JOIN
  if (!whole)
    join_arrive(ctx, out);
#endif
#ifdef GQA_PROBE_TIMES
  if (tid == 0)
    gqa_probe_times[4 * __nvvm_read_ptx_sreg_ctaid_x() + 3] = probe_time();
#endif
}
#else /* KV_STAGES: K/V through a shared-memory ring (cp.async) */

#if KV_STAGES < 2
#error "KV_STAGES is the ring depth in warp steps and must be at least 2"
#endif
#if AHEAD
#error "AHEAD (L2 bulk prefetch) is for the register path only, not with KV_STAGES"
#endif

#define SHARED __attribute__((address_space(3)))
#define CHUNK_BYTES 512 /* one 16-byte chunk of each of a warp's 32 lanes */
#ifdef KV_BULK
/* -DKV_BULK: the stages are filled by one 256-byte cp.async.bulk per K/V
   row (a lane each), completing on the stage's mbarrier, so the bytes in
   flight occupy neither registers nor L1. A stage holds the step's 16 K
   rows and 16 V rows, placed so that the fragment reads are free of bank
   conflicts (kv_row_at); the ring ends with its S mbarriers. */
#define STAGE_BYTES 8448 /* 2 x 2112 (K) + 4 x 1056 (V); a multiple of 128 */
#define RING_BYTES (KV_STAGES * STAGE_BYTES + 128)
_Static_assert(KV_STAGES * 8 <= 128, "the ring's mbarriers fit in its last 128 bytes");
#else
#define STAGE_BYTES (16 * CHUNK_BYTES)       /* one warp step: 8 chunks of K, 8 of V (8 KB) */
#define RING_BYTES (KV_STAGES * STAGE_BYTES) /* one warp's ring */
#endif

/* A warp's share of the merge, written over its own ring after its loop. */
typedef struct warp_red {
  float o[G][D];
  float m[G], l[G];
} warp_red;
_Static_assert(sizeof(warp_red) <= RING_BYTES, "a warp's merge record fits in its ring");

static inline SHARED warp_red *red_of(uint8_t *ws, uint32_t warp) {
  return (SHARED warp_red *)(ws + (uint64_t)warp * RING_BYTES);
}
/* The shared-window address of a generic pointer into shared memory. */
static inline uint32_t shared_addr(void *p) { return (uint32_t)(uint64_t)(SHARED void *)p; }

static inline void lds16(uint32_t a, uint32_t *r) {
  __asm__ volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                   : "r"(a)
                   : "memory");
}

#ifndef KV_BULK
/* 16 bytes global -> shared, not through L1 (the L2 fetch-size hint as
   ldg16's). Completion: cp.async.wait_group of the issuing thread. */
static inline void cp16(uint32_t dst, const _Float16 *src) {
  __asm__ volatile("cp.async.cg.shared.global" KV_L2 " [%0], [%1], 16;" ::"r"(dst), "l"(src)
                   : "memory");
}
static inline void cp_commit(void) { __asm__ volatile("cp.async.commit_group;" ::: "memory"); }
#define CP_WAIT(n) __asm__ volatile("cp.async.wait_group %0;" ::"n"(n) : "memory")

/* load_step's 16 chunks into a stage (st: the stage's address + 16 * lane):
   chunk c at st + 512 c; K chunk c = 4u + j is k[4c..4c+3] of load_step,
   V chunk 8 + c (c = 2i + h) is v[4c..4c+3]. Same rows, same clamp. */
static inline void issue_step(uint32_t st, const _Float16 *Kt, const _Float16 *Vt, uint32_t pos,
                              uint32_t last, uint32_t g, uint32_t t) {
  _Pragma("unroll") for (int u = 0; u < 2; u++) {
    uint32_t key = pos + 8 * u + g;
    const _Float16 *p = Kt + (uint64_t)(key < last ? key : last) * (HKV * D);
    _Pragma("unroll") for (int j = 0; j < 4; j++)
      cp16(st + (4 * u + j) * CHUNK_BYTES, p + (4 * j + t) * 8);
  }
  _Pragma("unroll") for (int i = 0; i < 4; i++) {
    uint32_t key = pos + 2 * t + (i & 1) + 8 * (i >> 1);
    const _Float16 *p = Vt + (uint64_t)(key < last ? key : last) * (HKV * D);
    cp16(st + (8 + 2 * i) * CHUNK_BYTES, p + g * 8);
    cp16(st + (9 + 2 * i) * CHUNK_BYTES, p + (g + 8) * 8);
  }
}
static inline void read_step(uint32_t st, uint32_t *k, uint32_t *v) {
  _Pragma("unroll") for (int c = 0; c < 8; c++) {
    lds16(st + c * CHUNK_BYTES, k + 4 * c);
    lds16(st + (8 + c) * CHUNK_BYTES, v + 4 * c);
  }
}
#endif

#ifdef KV_BULK
/* Where row r (0..15) of a step's K (v = 0) or V (v = 1) lies in a stage.
   K reads: a quarter warp takes rows g = 2q, 2q + 1 at chunks 4j + t, so
   odd rows start 64 bytes (16 banks) after even ones: the two halves of
   K at 0 and 2112. V reads: rows 2t + e (+ 8) at chunks g, so rows of
   different t = (r / 2) % 4 start 32 bytes apart: four quarters of V at
   1056-byte strides. Every row 16-byte aligned, as cp.async.bulk needs. */
static inline uint32_t kv_row_at(uint32_t v, uint32_t r) {
  return v ? 4224u + ((r >> 1) & 3u) * 1056u + ((r & 1u) + 2u * (r >> 3)) * 256u
           : (r & 1u) * 2112u + (r >> 1) * 256u;
}
static inline void bar_init(uint32_t bar) {
  __asm__ volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
static inline void bar_inval(uint32_t bar) {
  __asm__ volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
static inline void bar_wait(uint32_t bar, uint32_t parity) {
  __asm__ volatile("{\n\t.reg .pred p;\n"
                   "W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t"
                   "@!p bra W;\n\t}" ::"r"(bar),
                   "r"(parity)
                   : "memory");
}
/* One step into a stage: lane 0 arms the stage's mbarrier for the step's
   32 rows, then lane l copies K row l (l < 16) or V row l - 16, clamped
   to the range's last row as load_step's. The caller's warp has read the
   stage's last contents into registers and used them. */
static inline void bulk_step(uint32_t st, uint32_t bar, const _Float16 *Kt, const _Float16 *Vt,
                             uint32_t pos, uint32_t last, uint32_t lane) {
  __nvvm_bar_warp_sync(0xffffffffu);
  if (lane == 0)
    __asm__ volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                     "n"(32 * 2 * D)
                     : "memory");
  __nvvm_bar_warp_sync(0xffffffffu);
  const uint32_t r = lane & 15u, key = pos + r;
  const _Float16 *p = (lane < 16 ? Kt : Vt) + (uint64_t)(key < last ? key : last) * (HKV * D);
  __asm__ volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
                   "%2, [%3];" ::"r"(st + kv_row_at(lane >> 4, r)),
                   "l"(p), "n"(2 * D), "r"(bar)
                   : "memory");
}
/* load_step's registers from a stage filled by bulk_step. */
static inline void read_step(uint32_t st, uint32_t *k, uint32_t *v, uint32_t g, uint32_t t) {
  _Pragma("unroll") for (int u = 0; u < 2; u++)
    _Pragma("unroll") for (int j = 0; j < 4; j++)
      lds16(st + kv_row_at(0, 8 * u + g) + (4 * j + t) * 16, k + 16 * u + 4 * j);
  _Pragma("unroll") for (int i = 0; i < 4; i++) {
    uint32_t row = st + kv_row_at(1, 2 * t + (i & 1) + 8 * (i >> 1));
    lds16(row + g * 16, v + 8 * i);
    lds16(row + (g + 8) * 16, v + 8 * i + 4);
  }
}
#endif

/* Without a workspace big enough for one warp's ring: warp 0 alone, one
   register buffer (load, then compute), writing the output itself. Slow,
   but it keeps the staged build correct without the ring and without
   raising its register count to the double-buffered path's. */
static void partial_one_warp(const df_ctx *ctx, warp_state *st, const uint32_t *qf,
                             const _Float16 *Kt, const _Float16 *Vt, gqa_inter *out,
                             uint32_t lane) {
  const uint32_t begin = df_ctx_range_begin(ctx), end = df_ctx_range_end(ctx), last = end - 1;
  const uint32_t g = lane >> 2, t = lane & 3;
  uint32_t k[32], v[32];
  for (uint32_t pos = begin; pos < end; pos += STEP) {
    load_step(k, v, Kt, Vt, pos, last, g, t);
    step(st, k, v, qf, pos, end, t);
  }
  st->l += bfly(st->l, 1);
  st->l += bfly(st->l, 2);
  /* O^T columns 2t, 2t+1 are heads whose sums live in lanes 8t, 8t+4. */
  float la = from_lane(st->l, 8 * t), lb = from_lane(st->l, 8 * t + 4);
  if (t < 2)
    _Pragma("unroll") for (int mt = 0; mt < 8; mt++) {
      uint32_t da = 8 * g + mt, db = 64 + 8 * g + mt;
      out->o[2 * t][da] = (_Float16)(st->o[mt][0] / la);
      out->o[2 * t + 1][da] = (_Float16)(st->o[mt][1] / lb);
      out->o[2 * t][db] = (_Float16)(st->o[mt][2] / la);
      out->o[2 * t + 1][db] = (_Float16)(st->o[mt][3] / lb);
    }
  if (t == 0 && g < G)
    out->lse[g] = (st->m + lg2(st->l)) * LN2;
}

void gqa_partial(const df_ctx *ctx) {
  const uint32_t seq = df_ctx_task_coord(ctx, 0), hk = df_ctx_task_coord(ctx, 1);
  const uint32_t begin = df_ctx_range_begin(ctx), end = df_ctx_range_end(ctx);
  const _Float16 *Q = (const _Float16 *)df_ctx_tensor(ctx, 0);
  const _Float16 *Kt = (const _Float16 *)df_ctx_tensor(ctx, 1) + kv_row(seq, 0, hk);
  const _Float16 *Vt = (const _Float16 *)df_ctx_tensor(ctx, 2) + kv_row(seq, 0, hk);
  gqa_inter *out = df_ctx_output(ctx);
  uint8_t *ws = df_ctx_workspace(ctx);
  const uint32_t tid = df_ctx_thread(ctx);
  /* As many warps as have a ring in the workspace (at most MAX_WARPS). */
  uint32_t warps = df_ctx_threads(ctx) >> 5;
  warps = warps > MAX_WARPS ? MAX_WARPS : warps;
  if (ws == 0) /* no workspace: df.workspace_bytes not declared or not supported */
    warps = 0;
  else if (warps > df_ctx_workspace_bytes(ctx) / RING_BYTES)
    warps = df_ctx_workspace_bytes(ctx) / RING_BYTES;
  const uint32_t warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const bool active = warp < warps;

  uint32_t qf[16];
  if (g < G) {
    const _Float16 *q = Q + ((uint64_t)seq * HQ + hk * G + g) * D;
    _Pragma("unroll") for (int j = 0; j < 4; j++) ldg16(q + (4 * j + t) * 8, qf + 4 * j);
  } else {
    _Pragma("unroll") for (int i = 0; i < 16; i++) qf[i] = 0;
  }
  warp_state st;
  st.m = -__builtin_inff();
  st.l = 0.0f;
  _Pragma("unroll") for (int mt = 0; mt < 8; mt++)
    _Pragma("unroll") for (int e = 0; e < 4; e++) st.o[mt][e] = 0.0f;

  if (warps == 0) {
    if (warp == 0)
      partial_one_warp(ctx, &st, qf, Kt, Vt, out, lane);
    df_ctx_barrier(ctx);
    return;
  }

  /* Warp w takes steps w, w + warps, ... (its steps n = 0, 1, ...), step n
     in stage n % KV_STAGES of its ring. Group arithmetic (per thread; every
     branch depends on the warp only): the prologue commits KV_STAGES - 1
     groups, steps 0 .. KV_STAGES - 2, and iteration n one more, step
     n + KV_STAGES - 1, so group m always holds step m (empty when step m
     is past the range end: the count stays uniform). Before iteration n
     reads, n + KV_STAGES groups are committed; cp.async.wait_group
     (KV_STAGES - 1) leaves at most the newest KV_STAGES - 1 pending, so
     groups 0 .. n, step n included, are complete. Iteration n writes
     stage (n - 1) % KV_STAGES, which iteration n - 1 read into registers
     and step n - 1 consumed, and KV_STAGES - 1 steps are in flight while
     step n computes. Each lane reads back only the bytes it copied, so
     its own wait orders the copy before the read: no warp barrier. */
  const uint32_t stride = STEP * warps, last = end - 1;
  uint32_t k[32], v[32];
#ifdef KV_BULK
  /* Step n of the warp in stage n % S, its mbarrier's phase n / S: the
     prologue fills stages 0 .. S - 2, iteration n refills the stage that
     iteration n - 1 read (step n + S - 1) and then waits for step n, so
     S - 1 steps are in flight while step n computes. Every step issued is
     waited for, so no copy is pending when the loop ends. */
  if (active) {
    const uint32_t ring = shared_addr(ws) + warp * RING_BYTES;
    const uint32_t bars = ring + KV_STAGES * STAGE_BYTES;
    if (lane < KV_STAGES)
      bar_init(bars + 8 * lane);
    /* The ring's last generic writes (another handler's, or a merge)
       before the bulk copies' async-proxy writes; the inits before use. */
    __asm__ volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __nvvm_bar_warp_sync(0xffffffffu);
    uint32_t pos = begin + STEP * warp, next = pos;
    _Pragma("unroll") for (uint32_t s = 0; s + 1 < KV_STAGES; s++) {
      if (next < end)
        bulk_step(ring + s * STAGE_BYTES, bars + 8 * s, Kt, Vt, next, last, lane);
      next += stride;
    }
    for (uint32_t n = 0; pos < end; pos += stride, next += stride, n++) {
      const uint32_t rd = n % KV_STAGES, wr = (n + KV_STAGES - 1) % KV_STAGES;
      if (next < end)
        bulk_step(ring + wr * STAGE_BYTES, bars + 8 * wr, Kt, Vt, next, last, lane);
      bar_wait(bars + 8 * rd, (n / KV_STAGES) & 1u);
      read_step(ring + rd * STAGE_BYTES, k, v, g, t);
      step(&st, k, v, qf, pos, end, t);
    }
    __nvvm_bar_warp_sync(0xffffffffu);
    if (lane < KV_STAGES)
      bar_inval(bars + 8 * lane);
    __nvvm_bar_warp_sync(0xffffffffu);
  }
#else
  if (active) {
    const uint32_t ring = shared_addr(ws) + warp * RING_BYTES + lane * 16;
    uint32_t pos = begin + STEP * warp, next = pos, rd = 0, wr = KV_STAGES - 1;
    _Pragma("unroll") for (uint32_t s = 0; s + 1 < KV_STAGES; s++) {
      if (next < end)
        issue_step(ring + s * STAGE_BYTES, Kt, Vt, next, last, g, t);
      cp_commit();
      next += stride;
    }
    for (; pos < end; pos += stride) {
      if (next < end)
        issue_step(ring + wr * STAGE_BYTES, Kt, Vt, next, last, g, t);
      cp_commit();
      next += stride;
      CP_WAIT(KV_STAGES - 1);
      read_step(ring + rd * STAGE_BYTES, k, v);
      step(&st, k, v, qf, pos, end, t);
      rd = rd + 1 == KV_STAGES ? 0 : rd + 1;
      wr = wr + 1 == KV_STAGES ? 0 : wr + 1;
    }
    /* The groups left are empty; then every lane's copies into the ring
       are done before any lane writes its merge record over them. */
    __asm__ volatile("cp.async.wait_all;" ::: "memory");
    __nvvm_bar_warp_sync(0xffffffffu);
  }
#endif
  st.l += bfly(st.l, 1);
  st.l += bfly(st.l, 2);
  if (active) {
    SHARED warp_red *r = red_of(ws, warp);
    if (t == 0 && g < G) {
      r->m[g] = st.m;
      r->l[g] = st.l;
    }
    if (t < 2)
      _Pragma("unroll") for (int mt = 0; mt < 8; mt++) {
        uint32_t da = 8 * g + mt, db = 64 + 8 * g + mt;
        r->o[2 * t][da] = st.o[mt][0];
        r->o[2 * t + 1][da] = st.o[mt][1];
        r->o[2 * t][db] = st.o[mt][2];
        r->o[2 * t + 1][db] = st.o[mt][3];
      }
  }
  df_ctx_barrier(ctx);
  /* Warps in a fixed order: deterministic. */
  for (uint32_t idx = tid; idx < G * D; idx += df_ctx_threads(ctx)) {
    uint32_t h = idx / D, d = idx % D;
    float M = -__builtin_inff();
    for (uint32_t w = 0; w < warps; w++)
      M = fmaxf_(M, red_of(ws, w)->m[h]);
    float L = 0.0f, O = 0.0f;
    for (uint32_t w = 0; w < warps; w++) {
      SHARED warp_red *r = red_of(ws, w);
      float a = weight(r->m[h], M);
      L += r->l[h] * a;
      O += r->o[h][d] * a;
    }
    out->o[h][d] = (_Float16)(O / L);
    if (d == 0)
      out->lse[h] = (M + lg2(L)) * LN2;
  }
  df_ctx_barrier(ctx); /* the workspace is free for the next handler */
}
#endif

static inline float fexp(float x) { return ex2(x * LOG2E); }
static inline float flog(float x) { return lg2(x) * LN2; }

#else /* host backend: serial, thread 0 */

#include <math.h>

static inline float fexp(float x) { return expf(x); }
static inline float flog(float x) { return logf(x); }

#include "gqa_join.h"

void gqa_partial(const df_ctx *ctx) {
  if (df_ctx_thread(ctx) == 0) {
    const uint32_t seq = df_ctx_task_coord(ctx, 0), hk = df_ctx_task_coord(ctx, 1);
    const uint32_t begin = df_ctx_range_begin(ctx), end = df_ctx_range_end(ctx);
    const _Float16 *Q = (const _Float16 *)df_ctx_tensor(ctx, 0);
    const _Float16 *K = (const _Float16 *)df_ctx_tensor(ctx, 1);
    const _Float16 *V = (const _Float16 *)df_ctx_tensor(ctx, 2);
#ifdef GQA_JOIN
    gqa_inter *out = join_out(ctx);
    float *const whole = join_whole(ctx);
#else
    gqa_inter *out = df_ctx_output(ctx);
    float *const whole = (float *)0;
#endif
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
      for (int d = 0; d < D; d++) {
        if (whole)
          whole[h * D + d] = acc[d] / l;
        else
          out->o[h][d] = (_Float16)(acc[d] / l);
      }
      out->lse[h] = m + logf(l);
    }
#ifdef GQA_JOIN
    if (!whole)
      join_arrive(ctx, out);
#endif
  }
  df_ctx_barrier(ctx);
}

#endif

/* LSE combine of the partials of one task: weights exp(lse_i - max).

   On the GPU, up to COMBINE_FAST inputs (every reduce of a reduce-fan-in
   plan) take three steps with a block barrier between them: thread i
   resolves input i once and copies its G lse values to shared memory;
   thread h < G turns lse column h into the weights, their sum and the
   output lse; then every thread combines two adjacent o elements of one
   head, its n input loads independent of each other. Run O: the combine
   of 4 inputs took 2.2 us with the table of run M (-DCOMBINE_TABLE, kept
   for comparison), each thread walking max -> weights -> sum per element
   through dependent loads. Otherwise, and on the host, every access
   resolves its input through the records; -DCOMBINE_LOOP keeps that for
   every count (run M's comparison). Every path adds inputs in order
   0..n-1 with the same expressions, so all give the same bits. */
#if defined(__NVPTX__) && !defined(COMBINE_LOOP)
#define COMBINE_FAST 16
typedef const gqa_inter *gqa_in_ptr; /* the table holds generic pointers */
static __attribute__((address_space(3))) gqa_in_ptr comb_in[COMBINE_FAST];
#ifndef COMBINE_TABLE
static __attribute__((address_space(3))) float comb_w[COMBINE_FAST][G]; /* lse, then weights */
static __attribute__((address_space(3))) float comb_sum[G];
#endif
#endif

/* Input i: from the table, or through the records. */
static inline const gqa_inter *comb_input(const df_ctx *ctx, uint32_t i, bool table) {
#ifdef COMBINE_FAST
  if (table)
    return comb_in[i];
#endif
  (void)table;
  return df_ctx_input(ctx, i);
}

static inline float max_lse(const df_ctx *ctx, uint32_t n, uint32_t h, bool table) {
  float mx = -__builtin_inff();
  for (uint32_t i = 0; i < n; i++) {
    float v = comb_input(ctx, i, table)->lse[h];
    mx = v > mx ? v : mx;
  }
  return mx;
}

static inline __attribute__((always_inline)) void combine(const df_ctx *ctx, uint32_t n,
                                                          bool table) {
  gqa_inter *out = df_ctx_output(ctx);
  for (uint32_t idx = df_ctx_thread(ctx); idx < G * D; idx += df_ctx_threads(ctx)) {
    uint32_t h = idx / D, d = idx % D;
    float mx = max_lse(ctx, n, h, table), sum = 0.0f, acc = 0.0f;
    for (uint32_t i = 0; i < n; i++) {
      const gqa_inter *p = comb_input(ctx, i, table);
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
    float mx = max_lse(ctx, n, h, table), sum = 0.0f;
    for (uint32_t i = 0; i < n; i++)
      sum += fexp(comb_input(ctx, i, table)->lse[h] - mx);
    lse[h] = mx + flog(sum);
  }
  df_ctx_barrier(ctx); /* after it the table is free too */
  for (uint32_t h = df_ctx_thread(ctx); h < G; h += df_ctx_threads(ctx))
    out->lse[h] = lse[h];
  df_ctx_barrier(ctx);
}

#if defined(COMBINE_FAST) && !defined(COMBINE_TABLE)
/* The three-step combine (n <= COMBINE_FAST, at least COMBINE_FAST
   threads). The output may alias an input: every lse is read in step 1,
   before step 2 writes the output's, and each o element is read and
   written by one thread. */
static inline __attribute__((always_inline)) void combine_steps(const df_ctx *ctx,
                                                                uint32_t n) {
  const uint32_t t = df_ctx_thread(ctx), threads = df_ctx_threads(ctx);
  gqa_inter *out = df_ctx_output(ctx);
  if (t < n) {
    const gqa_inter *p = df_ctx_input(ctx, t);
    comb_in[t] = p;
    float l[G];
    _Pragma("unroll") for (int h = 0; h < G; h++) l[h] = p->lse[h];
    _Pragma("unroll") for (int h = 0; h < G; h++) comb_w[t][h] = l[h];
  }
  df_ctx_barrier(ctx);
  if (t < G) {
    float mx = -__builtin_inff(), sum = 0.0f;
    for (uint32_t i = 0; i < n; i++)
      mx = comb_w[i][t] > mx ? comb_w[i][t] : mx;
    for (uint32_t i = 0; i < n; i++) {
      float w = fexp(comb_w[i][t] - mx);
      sum += w;
      comb_w[i][t] = w;
    }
    comb_sum[t] = sum;
    out->lse[t] = mx + flog(sum);
  }
  df_ctx_barrier(ctx);
  for (uint32_t pair = t; pair < G * D / 2; pair += threads) {
    const uint32_t h = pair / (D / 2), d = 2 * (pair % (D / 2));
    float acc0 = 0.0f, acc1 = 0.0f;
    _Pragma("unroll 4") for (uint32_t i = 0; i < n; i++) {
      const _Float16 *o = &comb_in[i]->o[h][d];
      const float w = comb_w[i][h];
      acc0 += w * (float)o[0];
      acc1 += w * (float)o[1];
    }
    const float sum = comb_sum[h];
    out->o[h][d] = (_Float16)(acc0 / sum);
    out->o[h][d + 1] = (_Float16)(acc1 / sum);
  }
  df_ctx_barrier(ctx); /* after it the tables are free */
}
#endif

void gqa_combine(const df_ctx *ctx) {
  const uint32_t n = df_ctx_input_count(ctx);
#ifdef COMBINE_FAST
  if (n <= COMBINE_FAST && df_ctx_threads(ctx) >= COMBINE_FAST) {
#ifdef COMBINE_TABLE
    const uint32_t t = df_ctx_thread(ctx);
    if (t < n)
      comb_in[t] = df_ctx_input(ctx, t);
    df_ctx_barrier(ctx);
    combine(ctx, n, true);
#else
    combine_steps(ctx, n);
#endif
    return;
  }
#endif
  combine(ctx, n, false);
}

/* The task's G output rows as f32. */
void gqa_finalize(const df_ctx *ctx) {
  const gqa_inter *in = df_ctx_input(ctx, 0);
  const uint32_t seq = df_ctx_task_coord(ctx, 0), hk = df_ctx_task_coord(ctx, 1);
  float *O = (float *)df_ctx_tensor(ctx, 3) + ((uint64_t)seq * HQ + hk * G) * D;
  for (uint32_t idx = df_ctx_thread(ctx); idx < G * D; idx += df_ctx_threads(ctx))
    O[idx] = (float)in->o[idx / D][idx % D];
}
