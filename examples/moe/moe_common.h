/* Part of moe_fused_handlers.c (included by it, in order, after df/device.h):
   the shapes and their checks, the lane model shared by the GPU and the
   host backend, the loads, bf16 and SiLU, the warp mma (emulated on the
   host with PTX's fragment layout), the task record and the n-tile counts. */

#ifndef MOE_HIDDEN
#define MOE_HIDDEN 2048
#endif
#ifndef MOE_INTER
#define MOE_INTER 768
#endif
#ifndef MOE_CS
#define MOE_CS 4
#endif
#ifndef MOE_TT
#define MOE_TT 64
#endif
#ifndef MOE_NWARPS
#define MOE_NWARPS 8 /* warps per CTA the host emulates (the GPU uses its block's) */
#endif

#define ISHARD (MOE_INTER / MOE_CS)  /* intermediate columns per rank */
/* output columns per rank: whole 16-column m-tiles, rounded up when the
   cluster size does not divide hidden (3: 688, the last rank's 672 valid;
   moe_fused_gen --shards gives down that range) */
#define HSHARD ((MOE_HIDDEN / 16 + MOE_CS - 1) / MOE_CS * 16)
#define HSHARD_EVEN (MOE_HIDDEN % (16 * MOE_CS) == 0)
/* down's step count per warp assumes every warp (up to 32) has an m-tile
   on the last rank too */
_Static_assert(HSHARD_EVEN || (MOE_HIDDEN - (MOE_CS - 1) * HSHARD) / 16 >= 32,
               "the last rank's shard inside hidden must hold an m-tile per warp");
#define ICHUNKS (ISHARD / 32)        /* 32-column chunks of an UpShard */

_Static_assert(MOE_INTER % MOE_CS == 0 && ISHARD % 32 == 0,
               "intermediate shards must be equal multiples of 32");
_Static_assert(HSHARD % 16 == 0, "hidden shard must be a multiple of 16");
_Static_assert(MOE_HIDDEN % 32 == 0, "hidden must be a multiple of 32");
_Static_assert(MOE_TT % 8 == 0 && MOE_TT <= 64, "token tile: a multiple of 8, at most 64");

#if defined(__clang__)
#define UNROLL _Pragma("unroll") /* register arrays need constant indices */
#else
#define UNROLL
#endif

enum { T_X, T_WGU, T_TASKS, T_TOKENS, T_OUTPUT, T_SYNC, T_WD, T_WEIGHTS };

typedef uint32_t u32x4 __attribute__((vector_size(16)));

/* Lane-private state: on the GPU each thread holds its lane's values
   (arrays of extent 1, index 0); the host holds all 32 lanes of a warp and
   loops over them. FOR_LANES(L, Li): L = the lane id, Li = the array index. */
#if defined(__NVPTX__)
#define LANES 1
#define FOR_LANES(L, Li) for (uint32_t L = lane_, Li = 0, once_ = 1; once_; once_ = 0, (void)L, (void)Li)
#define FOR_WARPS(ctx, w, nw)                                                                    \
  for (uint32_t nw = df_ctx_threads(ctx) / 32, w = df_ctx_thread(ctx) / 32, once_ = 1;           \
       once_ && w < nw; once_ = 0)
#define LANE_ID(ctx) (df_ctx_thread(ctx) & 31)
#else
#include <math.h>
#include <string.h>
#define LANES 32
#define FOR_LANES(L, Li) for (uint32_t L = 0, Li = 0; L < 32; Li = ++L)
/* The host's threads of a virtual CTA share out MOE_NWARPS virtual warps. */
#define FOR_WARPS(ctx, w, nw)                                                                    \
  for (uint32_t nw = MOE_NWARPS, w = df_ctx_thread(ctx); w < nw; w += df_ctx_threads(ctx))
#define LANE_ID(ctx) 0u
#endif

/* A read-only 16-byte global load of P with the PTX cache qualifiers Q
   (a string literal); a plain copy on the host. */
#if defined(__NVPTX__)
#define LD_GLOBAL_V4(Q, P)                                                                       \
  ({                                                                                             \
    uint32_t a_, b_, c_, d_;                                                                     \
    __asm__("ld.global.nc" Q ".v4.u32 {%0, %1, %2, %3}, [%4];"                                   \
            : "=r"(a_), "=r"(b_), "=r"(c_), "=r"(d_)                                             \
            : "l"(P));                                                                           \
    (u32x4){a_, b_, c_, d_};                                                                     \
  })
#else
#define LD_GLOBAL_V4(Q, P)                                                                       \
  ({                                                                                             \
    u32x4 v_;                                                                                    \
    memcpy(&v_, (P), sizeof v_);                                                                 \
    v_;                                                                                          \
  })
#endif

/* Timing probes with wrong results (bench/moe, where the time goes), bits:
   1 skips down's GEMM, 2 skips gate_up's, 4 keeps down's GEMM but drops
   its Output additions (a never-true test keeps the products live), 8
   (GPU) replaces every mma.sync by a float add of its operands' XOR: the
   loads and the loops stay, the tensor-core work goes. */
#ifndef MOE_PROBE
#define MOE_PROBE 0
#endif
/* -DMOE_PACKED: Wgu and Wd in the fragment-packed layout (README.md,
   "Packed weights"): a warp's weights of one k step of an m-tile are
   1 KB, contiguous, and the next k step's follow them. */
#ifdef MOE_PACKED
#define PACKED 1
#else
#define PACKED 0
#endif

/* Weights: streamed once, not kept in L1. Plain layout: the L2 fetches
   256 B around each miss (a warp walks 16 rows 64 bytes per k step, so the
   next steps hit; 9-19 % faster, bench/moe run J). Packed: each load is
   512 contiguous bytes, and whole 128-byte lines were 2-3 % faster at 128,
   256 and 512 tokens than 256-byte fetches (level at 1024; bench/moe run
   AD). -DMOE_W_L2=S puts another L2 qualifier (or none) in its place. */
#ifndef MOE_W_L2
#if PACKED
#define MOE_W_L2 .L2::128B
#else
#define MOE_W_L2 .L2::256B
#endif
#endif
#define MOE_STR_(x) #x
#define MOE_STR(x) MOE_STR_(x)
static inline u32x4 ld_stream(const uint16_t *p) {
  return LD_GLOBAL_V4(".L1::no_allocate" MOE_STR(MOE_W_L2), p);
}

/* Token rows: re-read by every m-tile of the CTA, so through L1. */
static inline u32x4 ld_cached(const uint16_t *p) { return LD_GLOBAL_V4("", p); }

/* A slot (shared memory on the GPU): 16-byte aligned vector load. */
static inline u32x4 ld_slot(const uint16_t *p) { return *(const u32x4 *)p; }

__attribute__((unused)) static inline float bf16_to_f32(uint16_t h) {
  union {
    uint32_t u;
    float f;
  } x = {(uint32_t)h << 16};
  return x.f;
}

/* Round to nearest even (no NaNs arise here). */
static inline uint16_t f32_to_bf16(float f) {
  union {
    float f;
    uint32_t u;
  } x = {f};
  return (uint16_t)((x.u + 0x7fffu + ((x.u >> 16) & 1u)) >> 16);
}

static inline float silu(float g) {
#if defined(__NVPTX__)
  return g / (1.0f + __nvvm_ex2_approx_f(-1.4426950408889634f * g));
#else
  return g / (1.0f + expf(-g));
#endif
}

/* One warp-wide mma.m16n8k16 (bf16 in, fp32 accumulate) per `half` of a
   32-wide k step. Lane Li's operands: c + Li*cs (4 floats), a + Li*as (the
   16-byte loads of rows g and g+8), b + Li*bs (the 16-byte load of token
   g). Registers follow PTX's fragment layout: a = {A[g][2t..], A[g+8][2t..],
   A[g][2t+8..], A[g+8][2t+8..]}, b = {B[2t..][g], B[2t+8..][g]}, c =
   {C[g][2t], C[g][2t+1], C[g+8][2t], C[g+8][2t+1]} (g = lane / 4, t = lane
   % 4, low half = lower k). */
static inline void frag_regs(const u32x4 *a, const u32x4 *b, int half, uint32_t r[6]) {
  r[0] = half ? a[0][2] : a[0][0];
  r[1] = half ? a[1][2] : a[1][0];
  r[2] = half ? a[0][3] : a[0][1];
  r[3] = half ? a[1][3] : a[1][1];
  r[4] = half ? b[0][2] : b[0][0];
  r[5] = half ? b[0][3] : b[0][1];
}

#if defined(__NVPTX__)
static inline __attribute__((always_inline)) void warp_mma(float *c, uint32_t cs, const u32x4 *a,
                                                           uint32_t as, const u32x4 *b,
                                                           uint32_t bs, int half) {
  (void)cs, (void)as, (void)bs;
  uint32_t r[6];
  frag_regs(a, b, half, r);
  if (MOE_PROBE & 8) {
    c[0] += (float)((r[0] ^ r[1] ^ r[2] ^ r[3] ^ r[4] ^ r[5]) & 1u);
    return;
  }
  __asm__("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
          "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "r"(r[4]), "r"(r[5]));
}
#else
static void warp_mma(float *c, uint32_t cs, const u32x4 *a, uint32_t as, const u32x4 *b,
                     uint32_t bs, int half) {
  float A[16][16], B[16][8];
  for (uint32_t L = 0; L < 32; L++) {
    uint32_t g = L >> 2, t = L & 3, r[6];
    frag_regs(a + L * as, b + L * bs, half, r);
    uint32_t rows[4] = {g, g + 8, g, g + 8}, cols[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
    UNROLL for (int i = 0; i < 4; i++) {
      A[rows[i]][cols[i]] = bf16_to_f32((uint16_t)r[i]);
      A[rows[i]][cols[i] + 1] = bf16_to_f32((uint16_t)(r[i] >> 16));
    }
    B[2 * t][g] = bf16_to_f32((uint16_t)r[4]);
    B[2 * t + 1][g] = bf16_to_f32((uint16_t)(r[4] >> 16));
    B[2 * t + 8][g] = bf16_to_f32((uint16_t)r[5]);
    B[2 * t + 9][g] = bf16_to_f32((uint16_t)(r[5] >> 16));
  }
  for (uint32_t L = 0; L < 32; L++) {
    uint32_t g = L >> 2, t = L & 3;
    float *cl = c + L * cs;
    UNROLL for (int i = 0; i < 4; i++) {
      uint32_t m = g + 8 * (i >> 1), n = 2 * t + (i & 1);
      float s = 0.0f;
      for (int k = 0; k < 16; k++)
        s += A[m][k] * B[k][n];
      cl[i] += s;
    }
  }
}
#endif

typedef struct moe_task {
  uint32_t expert, start, count;
} moe_task;

static inline moe_task task_of(const df_ctx *ctx) {
  const int32_t *t = (const int32_t *)df_ctx_tensor(ctx, T_TASKS) + 4 * df_ctx_task_coord(ctx, 0);
  uint32_t n = (uint32_t)t[2];
  return (moe_task){(uint32_t)t[0], (uint32_t)t[1], n < MOE_TT ? n : MOE_TT};
}

/* n-tiles for `count` tokens, rounded up to 1, 2, 4 or 8; with MOE_NT6
   also 6 (33-48 rows pay for 48, not 64: the 64-row GEMMs are bound by
   the mma's, bench/moe run P), with MOE_NT_FINE each of 5 to 8, with
   MOE_NT3 also 3 (17-24 rows: bench/moe's small-tile c2 rows, run U). */
#if defined(MOE_NT_FINE) && !defined(MOE_NT6)
#define MOE_NT6 1
#endif
#if defined(MOE_NT3) && defined(MOE_BULK)
#error "MOE_NT3 has no bulk-ring variant"
#endif
static inline uint32_t ntiles(uint32_t count) {
  uint32_t nt = (count + 7) / 8;
#ifdef MOE_WGMMA
  return nt; /* wgmma takes any multiple of 8 rows */
#endif
#ifdef MOE_NT3
  if (nt == 3)
    return 3;
#endif
#ifdef MOE_NT_FINE
  if (nt >= 5)
    return nt;
#elif defined(MOE_NT6)
  if (nt == 5 || nt == 6)
    return 6;
#endif
  return nt <= 1 ? 1 : nt <= 2 ? 2 : nt <= 4 ? 4 : 8;
}
