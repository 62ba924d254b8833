/* Handlers of examples/moe/moe_fused.mlir: a fused MoE layer with bf16
   weights and activations, fp32 accumulation, written once for the GPU
   (clang --target=nvptx64-nvidia-cuda -march=sm_90a: tensor cores through
   mma.sync.m16n8k16 bf16 inline PTX, 16-byte vector loads) and the host
   backend (the same warp code; the mma is emulated lane by lane with the
   PTX fragment layout, so the host test checks the fragment indexing the
   GPU runs).

   Tensors (row-major), indices in the program's order:
     0 X       bf16 [T][H]           token activations
     1 Wgu     bf16 [E][2][I][H]     gate rows (0) and up rows (1) per expert
     2 Tasks   int32 [tasks][4]      expert, first row in Tokens, token count, 0
     3 Tokens  int32 [2T]            token ids grouped by expert
     4 Output  f32 [T][H]            must be zero before the launch (built
                                     with -DMOE_ZERO_OUTPUT=1 the kernel
                                     zeroes it, moe_zero_output.h); every
                                     element receives exactly two additions
                                     (top-2) onto zero, so the result does
                                     not depend on their order: bitwise
                                     deterministic
     5 Sync    int32 [8]             -DMOE_ZERO_OUTPUT=1's words: T, the Tasks
                                     rows, the first-round rows, two counters
                                     that are zero between launches
     6 Wd      bf16 [E][H][I]        down projection
     7 Weights f32 [2T]              routing weight of each Tokens row
   H = MOE_HIDDEN (2048), I = MOE_INTER (768), a task covers at most
   MOE_TT (64) tokens, the cluster size is MOE_CS (4).
   Built with -DMOE_PACKED, Wgu and Wd hold the same values in the
   fragment-packed layout: Wgu [E][I/8][H/32][2][32][8] (m-tile of 8
   columns, k step of 32, gate/up, lane L = 4g + t, then row 8m + g's k
   32s + 8t .. +7) and Wd [E][H/16][I/32][2][32][8] (m-tile of 16 rows,
   k step, half h: row 16m + 8h + g, lane, 8 k); moe_fused_gen --packed
   writes them.

   GEMM mapping (one warp = 16-row m-tiles of a weight matrix times the
   task's tokens as the n dimension, 8 tokens per n-tile): weights are the
   A operand (row-major, K contiguous) and are read exactly once per task;
   tokens are the B operand (K contiguous per token). Each lane loads 16
   bytes of a row (8 consecutive k) and the k order inside a 32-wide step
   is permuted identically for A and B (logical k 2t..2t+1 / 2t+8..2t+9 of
   the two mma halves = physical 8t..8t+3 / 8t+4..8t+7), which a reduction
   may do. The number of n-tiles is specialised (1, 2, 4 or 8; more
   variants by flag, see ntiles()) so that lightly routed experts do not
   pay for 64 tokens. gate_up's m-tile pairs
   8 gate rows with the 8 up rows of the same columns; both GEMMs stream
   their weights through register rings (see "register ring" below).
   Built with -DMOE_WGMMA both GEMMs run on warpgroup wgmma's from shared
   memory instead (moe_wgmma.h). */
#include "df/device.h"

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

#include "moe_bulk_ring.h"
#include "moe_wgmma.h"
#include "moe_zero_output.h"

/* The smallest n-tile count a staged build (MOE_GU_STAGE) stages (default
   5: fewer rows stay in L1 next to the slots). */
#ifndef MOE_GU_STAGE_MIN_NT
#define MOE_GU_STAGE_MIN_NT 5
#endif

/* Both GEMMs stream weights through a register ring. A warp walks one flat
   sequence of 32-wide k steps over all its m-tiles (m-tile w, w + nw, ...;
   KSTEPS steps each). Step s uses ring slot s % DW for the weights and
   s % DX for the B operand; right after its mma's the slot is refilled with
   step s + DW (s + DX), so DW steps of weight loads stay in flight without
   a gap, also across m-tiles (the next m-tile's first loads are issued while
   the current one finishes). DX | DW | KSTEPS: slot indices are constants
   after unrolling the DW steps of a pass, and an m-tile ends only at the
   pass's last step, where the accumulators are written out and cleared. */

#define GU_KSTEPS (MOE_HIDDEN / 32)
#define GU_MTILES (ISHARD / 8) /* 8 gate rows + the 8 up rows of the same columns */

/* gate_up: an m-tile is 8 intermediate columns; the mma's A rows 0-7 are
   their gate rows and rows 8-15 their up rows, so a lane's accumulators
   {c0, c1} (gate) and {c2, c3} (up) are the same column and tokens, and the
   768 / MOE_CS columns of a rank make 24 (cluster 4) or 48 (cluster 2)
   m-tiles: 3 or 6 per warp of 8. A warp takes MW m-tiles at once (a group:
   m-tiles MW mg .. MW mg + MW - 1), so each token fragment feeds MW times
   NT x 2 mma's: with 8 n-tiles the token loads (through L1) would
   otherwise outnumber the weight loads 4 to 1. xoff: the element offset of
   each lane's token row per n-tile. */
#define GATE_UP_RUN(NT, MW, DW, DX, CH)                                                          \
  GATE_UP_RUN_(NT, MW, DW, DX, CH, BK_FOR(NT))
#define GATE_UP_RUN_(NT, MW, DW, DX, CH, BK)                                                     \
  _Static_assert(GU_KSTEPS % RING_U(DW, DX) == 0 && RING_U(DW, DX) % DW == 0 &&                  \
                     RING_U(DW, DX) % DX == 0,                                                   \
                 "ring depths must divide");                                                     \
  _Static_assert(GU_MTILES % MW == 0, "m-tile groups must divide the shard");                    \
  _Static_assert(!(BK) || (GU_KSTEPS % CH == 0 && BK_STAGES(MW, CH) >= 2 &&                      \
                           DW <= (BK_STAGES(MW, CH) - 1) * CH),                                  \
                 "bulk ring: chunks divide the k steps, 2+ stages, DW within the stages ahead"); \
  static inline __attribute__((always_inline)) void gate_up_run_##NT(                            \
      const df_ctx *ctx, const uint16_t *wgu, const uint16_t *x, const uint32_t xoff[LANES][8],  \
      uint16_t *out, uint8_t *ws, uint32_t w, uint32_t nw) {                                     \
    enum { CH_ = CH, NB_ = BK_NB(MW, CH), U_ = RING_U(DW, DX) };                                 \
    uint32_t lane_ = LANE_ID(ctx);                                                               \
    (void)lane_, (void)ctx;                                                                      \
    uint32_t nsteps = (GU_MTILES / MW - w + nw - 1) / nw * GU_KSTEPS;                            \
    u32x4 a[LANES][DW][MW][2], b[LANES][DX][NT];                                                 \
    float acc[LANES][MW][NT][4];                                                                 \
    FOR_LANES(L, Li)                                                                             \
    UNROLL for (int q = 0; q < MW; q++) UNROLL for (int j = 0; j < NT; j++)                      \
        UNROLL for (int i = 0; i < 4; i++) acc[Li][q][j][i] = 0.0f;                              \
    BK_OPEN((BK) ? ws : (uint8_t *)0, wgu, nsteps, GU_MTILES / MW, GU_KSTEPS, MW);               \
    UNROLL for (int u = 0; u < DW; u++) GU_LOAD_A(MW, u, u);                                     \
    UNROLL for (int u = 0; u < DX; u++) GU_LOAD_B(NT, u, u);                                     \
    for (uint32_t s0 = 0; s0 < nsteps; s0 += U_) {                                               \
      UNROLL for (int u = 0; u < U_; u++) {                                                      \
        uint32_t s = s0 + u;                                                                     \
        UNROLL for (int q = 0; q < MW; q++) UNROLL for (int j = 0; j < NT; j++)                  \
            UNROLL for (int half = 0; half < 2; half++)                                          \
                warp_mma(acc[0][q][j], MW * NT * 4, a[0][u % DW][q], DW * MW * 2,                \
                         &b[0][u % DX][j], DX * NT, half);                                       \
        if (!BULK && s + DW < nsteps)                                                            \
          GU_LOAD_A(MW, u % DW, s + DW);                                                         \
        if (s + DX < nsteps)                                                                     \
          GU_LOAD_B(NT, u % DX, s + DX);                                                         \
        /* bulk: the tokens are in flight before GU_LOAD_A waits */                              \
        BK_RELEASE(s, GU_KSTEPS, MW);                                                            \
        if (BULK && s + DW < nsteps)                                                             \
          GU_LOAD_A(MW, u % DW, s + DW);                                                         \
        if (u == U_ - 1 && (s + 1) % GU_KSTEPS == 0)                                             \
          GU_STORE_H(MW, NT);                                                                    \
      }                                                                                          \
    }                                                                                            \
    BK_CLOSE();                                                                                  \
  }
/* The last k step of group w + nw (s / GU_KSTEPS) is done: h = SiLU(gate)
   * up -> UpShard[m / 32][token][m % 32], accumulators cleared. */
#define GU_STORE_H(MW, NT) GU_STORE_H_MT(MW, NT, w + nw * (s / GU_KSTEPS), mg_ * MW + q, 1)
/* The same for group MG, whose m-tile q is MT (an expression of mg_, q),
   stored where COND holds; the accumulators are read on every lane
   (wg_read: before the branch, for the wgmma paths). */
#define GU_STORE_H_MT(MW, NT, MG, MT, COND)                                                      \
  do {                                                                                           \
    uint32_t mg_ = (MG);                                                                         \
    FOR_LANES(L, Li) {                                                                           \
      uint32_t g = L >> 2, t = L & 3;                                                            \
      UNROLL for (int q = 0; q < MW; q++) UNROLL for (int j = 0; j < NT; j++)                    \
          UNROLL for (int i = 0; i < 2; i++) {                                                   \
        float gt_ = wg_read(acc[Li][q][j][i]), up_ = wg_read(acc[Li][q][j][i + 2]);              \
        if (COND) {                                                                              \
          uint32_t m = (MT) * 8 + g, n = 8 * j + 2 * t + i;                                      \
          out[UP_INDEX(n, m)] = f32_to_bf16(silu(gt_) * up_);                                    \
        }                                                                                        \
        acc[Li][q][j][i] = acc[Li][q][j][i + 2] = 0.0f;                                          \
      }                                                                                          \
    }                                                                                            \
  } while (0)
/* Slot `slot` <- the weights of step `step`: gate row and up row of column
   8 m + g of each m-tile m of the group, 8 k from 8 t (from the bulk ring
   when it is on). */
#if BULK
#define GU_LOAD_A(MW, slot, step)                                                                \
  do {                                                                                           \
    if (bk.on) {                                                                                 \
      uint32_t sb_ = (step);                                                                     \
      BK_READ_STEP(sb_, MW, a[Li][slot][q_][h_]);                                                \
    } else                                                                                       \
      GU_LOAD_A_OF(MW, slot, step, w + nw * ((step) / GU_KSTEPS));                               \
  } while (0)
#else
#define GU_LOAD_A(MW, slot, step) GU_LOAD_A_OF(MW, slot, step, w + nw * ((step) / GU_KSTEPS))
#endif
#define GU_LOAD_A_OF(MW, slot, step, group)                                                      \
  do {                                                                                           \
    uint32_t st_ = (step), mg_ = (group), k_ = (st_ % GU_KSTEPS) * 32;                           \
    FOR_LANES(L, Li) UNROLL for (int q_ = 0; q_ < MW; q_++) {                                    \
      const uint16_t *p_ =                                                                       \
          PACKED ? wgu + ((uint64_t)(mg_ * MW + q_) * GU_KSTEPS + st_ % GU_KSTEPS) * 512 + 8 * L \
                 : wgu + (uint64_t)((mg_ * MW + q_) * 8 + (L >> 2)) * MOE_HIDDEN + k_ + 8 * (L & 3); \
      a[Li][slot][q_][0] = ld_stream(p_);                                                        \
      a[Li][slot][q_][1] = ld_stream(p_ + (PACKED ? 256 : (uint64_t)MOE_INTER * MOE_HIDDEN));    \
    }                                                                                            \
  } while (0)
/* The same addressing for the wgmma paths (moe_wgmma.h): lane L's 16
   bytes of m-tile mt's gate row 8 mt + g at k step ks (8 k from 8 t); its
   up row is GU_A_HALF elements further. */
__attribute__((unused)) static inline const uint16_t *gu_a_ptr(const uint16_t *wgu, uint32_t mt,
                                                               uint32_t ks, uint32_t L) {
  return PACKED ? wgu + ((uint64_t)mt * GU_KSTEPS + ks) * 512 + 8 * L
                : wgu + (uint64_t)(mt * 8 + (L >> 2)) * MOE_HIDDEN + ks * 32 + 8 * (L & 3);
}
#define GU_A_HALF (PACKED ? 256 : (uint64_t)MOE_INTER * MOE_HIDDEN)
/* Slot `slot` <- the token rows of step `step` (the same for every m-tile). */
#define GU_LOAD_B(NT, slot, step)                                                                \
  do {                                                                                           \
    uint32_t k_ = ((step) % GU_KSTEPS) * 32;                                                     \
    FOR_LANES(L, Li)                                                                             \
    UNROLL for (int j = 0; j < NT; j++) b[Li][slot][j] = ld_cached(x + xoff[Li][j] + k_ + 8 * (L & 3)); \
  } while (0)
/* m-tiles per group MW, ring depths DW (weight steps of MW KB per warp)
   and DX (token steps) under the register file of 256 threads per SM:
   fewer n-tiles leave more registers for weights in flight. */
#if BULK
/* Bulk builds: the register ring only reads DW steps ahead from shared
   memory; CH k steps per chunk (MOE_GU_BULK: MW, DW, DX, CH for 1, 2, 4
   and 8 n-tiles; the stages are what fits MOE_BULK KiB). */
#ifndef MOE_GU_BULK
#define MOE_GU_BULK 1, 2, 8, 2, 1, 2, 4, 2, 1, 2, 2, 2, 3, 1, 1, 1
#endif
#define GU_BULK_(m1, a1, b1, c1, m2, a2, b2, c2, m4, a4, b4, c4, m8, a8, b8, c8)                 \
  GATE_UP_RUN(1, m1, a1, b1, c1)                                                                 \
  GATE_UP_RUN(2, m2, a2, b2, c2) GATE_UP_RUN(4, m4, a4, b4, c4) GATE_UP_RUN(8, m8, a8, b8, c8)
#define GU_BULK(...) GU_BULK_(__VA_ARGS__)
GU_BULK(MOE_GU_BULK)
#else
/* Groups of 3 m-tiles where they divide the shard (24 or 48 m-tiles at
   clusters of 4 or 2), of 2 otherwise (32 at clusters of 3). */
#if (MOE_INTER / MOE_CS / 8) % 3 == 0
#define GU_MW 3
#else
#define GU_MW 2
#endif
#ifndef MOE_GU_RING /* MW, DW and DX for 1, 2, 4 and 8 n-tiles */
#define MOE_GU_RING 1, 16, 8, 1, 16, 4, 1, 16, 2, GU_MW, 2, 1
#endif
#define GU_RING_(m1, a1, b1, m2, a2, b2, m4, a4, b4, m8, a8, b8)                                 \
  GATE_UP_RUN(1, m1, a1, b1, 1)                                                                  \
  GATE_UP_RUN(2, m2, a2, b2, 1) GATE_UP_RUN(4, m4, a4, b4, 1) GATE_UP_RUN(8, m8, a8, b8, 1)
#define GU_RING(...) GU_RING_(__VA_ARGS__)
GU_RING(MOE_GU_RING)
#endif
/* Staged builds run 5-7 n-tiles staged; their fallback without a
   workspace takes the 8-n-tile code (rows past the count are not stored),
   so the register-ring variants are not compiled there: they would only
   add code (and ptxas spilled 40 bytes with both). */
#if defined(MOE_NT6) && !defined(MOE_GU_STAGE)
#if BULK
#ifndef MOE_GU_BULK_FINE /* MW, DW, DX and CH for 5, 6 and 7 n-tiles */
#define MOE_GU_BULK_FINE 3, 1, 1, 1
#endif
#define MOE_GU_RING_FINE MOE_GU_BULK_FINE
#define GU_RING_FINE_(NT, ...) GATE_UP_RUN(NT, __VA_ARGS__)
#else
#ifndef MOE_GU_RING_FINE /* MW, DW and DX for 5, 6 and 7 n-tiles */
#define MOE_GU_RING_FINE GU_MW, 2, 1
#endif
#define GU_RING_FINE_(NT, ...) GATE_UP_RUN(NT, __VA_ARGS__, 1)
#endif
GU_RING_FINE_(6, MOE_GU_RING_FINE)
#ifdef MOE_NT_FINE
GU_RING_FINE_(5, MOE_GU_RING_FINE)
GU_RING_FINE_(7, MOE_GU_RING_FINE)
#endif
#endif
/* 3 n-tiles on the register ring, unless a staged build stages them. */
#if defined(MOE_NT3) && !(defined(MOE_GU_STAGE) && MOE_GU_STAGE_MIN_NT <= 3)
#define GU_NT3_RING 1
#ifndef MOE_GU_RING3 /* MW, DW and DX for 3 n-tiles */
#define MOE_GU_RING3 1, 16, 2
#endif
#define GU_RING3_(...) GATE_UP_RUN(3, __VA_ARGS__, 1)
GU_RING3_(MOE_GU_RING3)
#else
#define GU_NT3_RING 0
#endif

#ifdef MOE_GU_STAGE
/* gate_up at 5-8 n-tiles with the token rows staged in shared memory (the
   handler workspace; bench/moe's 1024-token c2 variant). Without it every
   m-tile group re-reads the 64 token rows (256 KB per task, more than L1
   holds next to the slots) through L1 and L2: at cluster 2 each SM read
   4 MB of token rows for 3.1 MB of weights. Staged, the CTA copies each
   32-wide k step of the rows once per pass (cp.async, 16 bytes per
   thread) into a ring of MOE_GU_STAGE steps, and every warp reads its B
   operand from there. The ring is [step][token][32 k], 64 bytes per token
   row: the 16-byte reads of lanes 0-7 (tokens g, g + 1, parts t) cover
   128 contiguous bytes, no bank conflicts. A CTA barrier every GS_KC
   steps frees the oldest GS_KC slots for the copies GS_STEPS - GS_KC
   steps ahead, so every warp walks the same number of steps: passes over
   the m-tile groups are rounded up and a warp without a group in the last
   pass repeats the last group and stores nothing (a branch around its
   mma's spilled 232 bytes). Declare df.workspace_bytes =
   MOE_GU_STAGE * 4096 on @moe_gate_up (make_moe_carry.sh MOE_GU_STAGE). */
#define GS_STEPS MOE_GU_STAGE
#ifndef MOE_GU_STAGE_KC
#define MOE_GU_STAGE_KC 4 /* k steps per barrier */
#endif
#define GS_KC MOE_GU_STAGE_KC
#define GS_STEP_BYTES (64 * 64) /* 64 token rows of 64 bytes, whatever MOE_TT */
#define GS_CHUNKS (GS_STEPS / GS_KC)
_Static_assert(GS_STEPS % GS_KC == 0 && GS_CHUNKS >= 2, "stage ring: whole chunks, at least 2");
_Static_assert(GU_KSTEPS % GS_KC == 0, "stage chunks must divide the k steps");
#define GS_BYTES (GS_STEPS * GS_STEP_BYTES)

#if defined(__NVPTX__)
static inline void gs_copy(sm_ptr dst, const uint16_t *src) {
  __asm__ volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
static inline void gs_commit(void) { __asm__ volatile("cp.async.commit_group;" ::: "memory"); }
#define GS_WAIT(n) __asm__ volatile("cp.async.wait_group %0;" ::"n"(n) : "memory")
#define GS_BARRIER(ctx) df_ctx_barrier(ctx)
#else
/* The host's virtual warp fills its own ring (every copy of a step, no
   waits, no barriers): the layout and indexing are the GPU's, the
   synchronisation is not exercised. */
static inline void gs_copy(sm_ptr dst, const uint16_t *src) { memcpy(dst, src, 16); }
static inline void gs_commit(void) {}
#define GS_WAIT(n) ((void)0)
#define GS_BARRIER(ctx) ((void)0)
#endif
typedef sm_ptr gs_ring;

/* Copies of k step `step` (< nsteps) of the first `rows` token rows into
   its ring slot: copy ci (< 4 rows) is row ci / 4 at k 8 (ci % 4); rows
   past the count repeat the last token. */
static inline __attribute__((always_inline)) void gs_issue(gs_ring ring, const uint16_t *x,
                                                          const int32_t *tokens, uint32_t count,
                                                          uint32_t rows, uint32_t step,
                                                          uint32_t nsteps, uint32_t first,
                                                          uint32_t stride) {
  if (step >= nsteps)
    return;
  gs_ring st = ring + (step % GS_STEPS) * GS_STEP_BYTES;
  uint32_t k = (step % GU_KSTEPS) * 32;
  for (uint32_t ci = first; ci < rows * 4; ci += stride) {
    uint32_t n = ci >> 2;
    gs_copy(st + ci * 16,
            x + (uint64_t)tokens[n < count ? n : count - 1] * MOE_HIDDEN + k + 8 * (ci & 3));
  }
}

static inline uint32_t gu_clamp(uint32_t mg, uint32_t groups) {
  return mg < groups ? mg : groups - 1;
}
/* Slot `slot` <- the weights of step `step` of the staged walk (groups
   clamped: a warp past the last group repeats it), from the bulk ring
   when it is on. */
#if BULK
#define GU_LOAD_A_ST(MW, slot, step)                                                             \
  do {                                                                                           \
    uint32_t sb_ = (step);                                                                       \
    if (bk.on)                                                                                   \
      BK_READ_STEP(sb_, MW, a[Li][slot][q_][h_]);                                                \
    else                                                                                         \
      GU_LOAD_A_OF(MW, slot, sb_, gu_clamp(w + nw * (sb_ / GU_KSTEPS), groups));                 \
  } while (0)
#define GU_LOAD_A_ST0(MW, u) GU_LOAD_A_ST(MW, u, u)
#else
#define GU_LOAD_A_ST(MW, slot, step)                                                             \
  GU_LOAD_A_OF(MW, slot, step, gu_clamp(w + nw * ((step) / GU_KSTEPS), groups))
#define GU_LOAD_A_ST0(MW, u) GU_LOAD_A_OF(MW, u, u, gu_clamp(w, groups)) /* steps < KSTEPS */
#endif

#define GATE_UP_STAGED(NT, MW, DW, CH)                                                           \
  _Static_assert(GU_KSTEPS % DW == 0, "ring depth must divide the k steps");                     \
  _Static_assert(GU_MTILES % MW == 0, "m-tile groups must divide the shard");                    \
  _Static_assert(!BK_FOR(NT) ||                                                                  \
                     (GU_KSTEPS % CH == 0 && BK_STAGES(MW, CH) >= 2 &&                           \
                      DW <= (BK_STAGES(MW, CH) - 1) * CH),                                       \
                 "bulk ring: chunks divide the k steps, 2+ stages, DW within the stages ahead"); \
  static inline __attribute__((always_inline)) void gate_up_staged_##NT(                         \
      const df_ctx *ctx, const uint16_t *wgu, const uint16_t *x, const int32_t *tokens,          \
      uint32_t count, gs_ring ring, uint16_t *out, uint8_t *ws, uint32_t w, uint32_t nw,         \
      uint32_t first, uint32_t stride) {                                                         \
    enum { CH_ = CH, NB_ = BK_NB(MW, CH) };                                                      \
    uint32_t lane_ = LANE_ID(ctx);                                                               \
    (void)lane_, (void)ctx;                                                                      \
    const uint32_t groups = GU_MTILES / MW;                                                      \
    uint32_t nsteps = (groups + nw - 1) / nw * GU_KSTEPS;                                        \
    u32x4 a[LANES][DW][MW][2];                                                                   \
    float acc[LANES][MW][NT][4];                                                                 \
    FOR_LANES(L, Li)                                                                             \
    UNROLL for (int q = 0; q < MW; q++) UNROLL for (int j = 0; j < NT; j++)                      \
        UNROLL for (int i = 0; i < 4; i++) acc[Li][q][j][i] = 0.0f;                              \
    for (uint32_t c = 0; c + 1 < GS_CHUNKS; c++) {                                               \
      UNROLL for (int u = 0; u < GS_KC; u++)                                                     \
          gs_issue(ring, x, tokens, count, 8 * NT, c * GS_KC + u, nsteps, first, stride);        \
      gs_commit();                                                                               \
    }                                                                                            \
    BK_OPEN(BK_FOR(NT) ? ws : (uint8_t *)0, wgu, nsteps, groups, GU_KSTEPS, MW);                 \
    /* without a group in the last pass: the last group again, not stored */                     \
    UNROLL for (int u = 0; u < DW; u++) GU_LOAD_A_ST0(MW, u);                                    \
    for (uint32_t s0 = 0; s0 < nsteps; s0 += DW) {                                               \
      UNROLL for (int u = 0; u < DW; u++) {                                                      \
        uint32_t s = s0 + u, mg = w + nw * (s / GU_KSTEPS);                                      \
        if (s % GS_KC == 0) {                                                                    \
          /* this thread's copies of the chunk landed; the barrier makes all                     \
             of them visible and frees the slots every warp has passed */                        \
          GS_WAIT(GS_CHUNKS - 2);                                                                \
          GS_BARRIER(ctx);                                                                       \
          UNROLL for (int v = 0; v < GS_KC; v++)                                                 \
              gs_issue(ring, x, tokens, count, 8 * NT, s + GS_STEPS - GS_KC + v, nsteps, first,  \
                       stride);                                                                  \
          gs_commit();                                                                           \
        }                                                                                        \
        gs_ring st_ = ring + (s % GS_STEPS) * GS_STEP_BYTES;                                     \
        UNROLL for (int j = 0; j < NT; j++) {                                                    \
          /* one n-tile's token fragment at a time: 4 registers live, not 32 */                  \
          u32x4 b[LANES];                                                                        \
          FOR_LANES(L, Li) b[Li] = sm_read(st_ + ((8 * j + (L >> 2)) * 4 + (L & 3)) * 16);       \
          UNROLL for (int q = 0; q < MW; q++) UNROLL for (int half = 0; half < 2; half++)        \
              warp_mma(acc[0][q][j], MW * NT * 4, a[0][u][q], DW * MW * 2, &b[0], 1, half);      \
        }                                                                                        \
        BK_RELEASE(s, GU_KSTEPS, MW);                                                            \
        if (s + DW < nsteps)                                                                     \
          GU_LOAD_A_ST(MW, u, s + DW);                                                           \
        if (u == DW - 1 && (s + 1) % GU_KSTEPS == 0 && mg < groups)                              \
          GU_STORE_H(MW, NT);                                                                    \
      }                                                                                          \
    }                                                                                            \
    BK_CLOSE();                                                                                  \
    GS_WAIT(0);                                                                                  \
    GS_BARRIER(ctx); /* the workspace is free for the next handler */                            \
  }
#if BULK
#ifndef MOE_GU_STAGED_BULK /* MW, DW and CH of the staged gate_up from the bulk ring */
#define MOE_GU_STAGED_BULK 2, 1, 1
#endif
#define GU_STAGED_(NT, ...) GATE_UP_STAGED(NT, __VA_ARGS__)
#define MOE_GU_STAGED_RING MOE_GU_STAGED_BULK
#else
#ifndef MOE_GU_STAGED_RING /* MW and DW of the staged gate_up at 8 n-tiles (and 6) */
#define MOE_GU_STAGED_RING 2, 4
#endif
#define GU_STAGED_(NT, ...) GATE_UP_STAGED(NT, __VA_ARGS__, 1)
#endif
/* Per n-tile count, the ring of the staged gate_up at 1-4 n-tiles
   (MOE_GU_STAGED_RING1 .. 4; default MOE_GU_STAGED_RING): few n-tiles
   leave registers for more weight steps in flight, but 2 x 8, 1 x 16 and
   3 x 4 were all slower than 2 x 4 at 512 tokens (bench/moe run AD), so
   they are A/B knobs, not defaults. */
#ifndef MOE_GU_STAGED_RING1
#define MOE_GU_STAGED_RING1 MOE_GU_STAGED_RING
#endif
#ifndef MOE_GU_STAGED_RING2
#define MOE_GU_STAGED_RING2 MOE_GU_STAGED_RING
#endif
#ifndef MOE_GU_STAGED_RING3
#define MOE_GU_STAGED_RING3 MOE_GU_STAGED_RING
#endif
#ifndef MOE_GU_STAGED_RING4
#define MOE_GU_STAGED_RING4 MOE_GU_STAGED_RING
#endif
GU_STAGED_(8, MOE_GU_STAGED_RING)
#ifdef MOE_NT6
GU_STAGED_(6, MOE_GU_STAGED_RING)
#endif
#ifdef MOE_NT_FINE
GU_STAGED_(5, MOE_GU_STAGED_RING)
GU_STAGED_(7, MOE_GU_STAGED_RING)
#endif
#if MOE_GU_STAGE_MIN_NT <= 1
GU_STAGED_(1, MOE_GU_STAGED_RING1)
#endif
#if MOE_GU_STAGE_MIN_NT <= 2
GU_STAGED_(2, MOE_GU_STAGED_RING2)
#endif
#if defined(MOE_NT3) && MOE_GU_STAGE_MIN_NT <= 3
GU_STAGED_(3, MOE_GU_STAGED_RING3)
#endif
#if MOE_GU_STAGE_MIN_NT <= 4
GU_STAGED_(4, MOE_GU_STAGED_RING4)
#endif
#define GU_STAGED_CALL(NT)                                                                       \
  gate_up_staged_##NT(ctx, wgu, x, tokens, count, ring, out, ws, w, nw, first, stride)
static inline __attribute__((always_inline)) void
gate_up_staged(uint32_t nt, const df_ctx *ctx, const uint16_t *wgu, const uint16_t *x,
               const int32_t *tokens, uint32_t count, gs_ring ring, uint16_t *out, uint8_t *ws,
               uint32_t w, uint32_t nw, uint32_t first, uint32_t stride) {
#define GU_STAGED_IF(NT)                                                                         \
  if (nt == NT) {                                                                                \
    GU_STAGED_CALL(NT);                                                                          \
    return;                                                                                      \
  }
#if MOE_GU_STAGE_MIN_NT <= 1
  GU_STAGED_IF(1)
#endif
#if MOE_GU_STAGE_MIN_NT <= 2
  GU_STAGED_IF(2)
#endif
#if defined(MOE_NT3) && MOE_GU_STAGE_MIN_NT <= 3
  GU_STAGED_IF(3)
#endif
#if MOE_GU_STAGE_MIN_NT <= 4
  GU_STAGED_IF(4)
#endif
#ifdef MOE_NT_FINE
  switch (nt) {
  case 5: GU_STAGED_CALL(5); break;
  case 6: GU_STAGED_CALL(6); break;
  case 7: GU_STAGED_CALL(7); break;
  default: GU_STAGED_CALL(8); break;
  }
#elif defined(MOE_NT6)
  if (nt == 6)
    GU_STAGED_CALL(6);
  else
    GU_STAGED_CALL(8);
#else
  (void)nt;
  GU_STAGED_CALL(8);
#endif
}
#endif

#if WGMMA
/* gate_up on warpgroups (moe_wgmma.h): block b of a rank is m-tiles
   4 b .. 4 b + 3, warp i of a warpgroup takes m-tile 4 b + i; a warpgroup
   walks groups of MW blocks (wg, wg + nwg, ...) through its ring of
   MOE_WG_GU_STAGES stages (A tiles, then the step's token rows), copying
   D - 1 steps ahead; each warpgroup walks the same step count and a group
   past the last repeats it unstored (no branch around the wgmma's). */
#define GU_WG_PTR(mt, ks, L) gu_a_ptr(wgu, mt, ks, L)
/* token copies per thread (a warpgroup's 128 make 8 NT rows x 4 pieces;
   the host's one virtual warp all of them) */
#define GU_WG_COPIES(NT) (LANES == 1 ? 2u : 8u * (NT) * 4)
/* This thread's token copies' element offsets in X (k step 0), read once
   per task, not next to every copy (no load left in the k loop; no
   faster on its own: bench/moe/README.md, run X call 4). */
#define GU_WG_XS(NT)                                                                             \
  uint32_t xs_[GU_WG_COPIES(NT)];                                                                \
  UNROLL for (uint32_t r_ = 0; r_ < GU_WG_COPIES(NT); r_++) {                                    \
    uint32_t ci = first + r_ * stride, n_ = ci >> 2;                                             \
    xs_[r_] = (uint32_t)tokens[n_ < count ? n_ : count - 1] * MOE_HIDDEN + 8 * (ci & 3);         \
  }
/* A gate_up warpgroup's walk: warp wi of warpgroup wg, its passes over
   the block groups (rounded up: every warpgroup walks the same steps). */
#define GU_WG_WALK()                                                                             \
  uint32_t lane_ = LANE_ID(ctx);                                                                 \
  (void)lane_, (void)ctx;                                                                        \
  const uint32_t wi = w % 4, wg = w / 4, nwg = nw / 4, groups = GU_MTILES / 4 / MW;              \
  const uint32_t passes = (groups + nwg - 1) / nwg, nsteps = passes * GU_KSTEPS
#define GATE_UP_WG(NT)                                                                           \
  static inline __attribute__((always_inline)) void gate_up_wg_##NT(                             \
      const df_ctx *ctx, const uint16_t *wgu, const uint16_t *x, const int32_t *tokens,          \
      uint32_t count, sm_ptr ring, uint16_t *out, uint32_t w, uint32_t nw, uint32_t first,       \
      uint32_t stride) {                                                                         \
    /* probe bits 128 + 256: A-only stages, twice as many in the space */                     \
    enum { AONLY_ = WG_BULK_PROBE && (MOE_WG_PROBE & 256) };                                     \
    enum { MW = MOE_WG_MW, KC = MOE_WG_KC,                                                       \
           D = (AONLY_ ? 2 : 1) * MOE_WG_GU_STAGES - WG_BULK_PROBE,                              \
           GU_SB_ = AONLY_ ? MW * WG_A_BYTES : WG_GU_STAGE_BYTES };                              \
    _Static_assert(GU_MTILES % (4 * MW) == 0, "wgmma gate_up: groups of MW blocks");             \
    GU_WG_WALK();                                                                                \
    const sm_ptr bars_ = ring + D * GU_SB_;                                                      \
    const uint32_t lead_ = LANE_ID(ctx) == 0;                                                    \
    (void)bars_, (void)lead_;                                                                    \
    WGB_OPEN(bars_, D);                                                                          \
    float acc[LANES][MW][NT][4];                                                                 \
    FOR_LANES(L, Li)                                                                             \
    UNROLL for (int q = 0; q < MW; q++) UNROLL for (int j = 0; j < NT; j++)                      \
        UNROLL for (int i = 0; i < 4; i++) acc[Li][q][j][i] = 0.0f;                              \
    GU_WG_XS(NT);                                                                                \
    UNROLL for (int p = 0; p + KC < D; p += KC) {                                                \
      UNROLL for (int u = 0; u < KC; u++) GU_WG_ISSUE(NT, p + u);                                \
      WG_CP_COMMIT();                                                                            \
    }                                                                                            \
    for (uint32_t pass = 0; pass < passes; pass++) {                                             \
      /* a constant trip count and no branch while a wgmma group is in                           \
         flight: ptxas then keeps one group in flight instead of waiting                         \
         after each wgmma */                                                                     \
      for (uint32_t k0 = 0; k0 < GU_KSTEPS; k0 += KC) {                                          \
        uint32_t s0 = pass * GU_KSTEPS + k0;                                                     \
        if (WG_BULK_PROBE)                                                                       \
          bk_wait(bars_ + 8 * (s0 % D), (s0 / D) & 1);                                          \
        if (!WG_BULK_PROBE || !(MOE_WG_PROBE & 256)) {                                           \
          WG_CP_WAIT(D / KC - 2); /* this thread's copies of the chunk */                       \
          WG_PROXY_FENCE();                                                                      \
          WG_BAR(wg); /* everyone's */                                                           \
        }                                                                                        \
        WG_FENCE();                                                                              \
        UNROLL for (int u = 0; u < KC; u++) {                                                    \
          sm_ptr st = ring + ((s0 + u) % D) * GU_SB_;                                            \
          WG_MMAS(NT, MW, &acc[0][0][0][0], MW * NT * 4, st, st + MW * WG_A_BYTES, WG_PLANE);    \
        }                                                                                        \
        WG_COMMIT();                                                                             \
        WG_WAIT(1); /* the previous chunk's wgmma's are done: its stages are free */             \
        UNROLL for (int u = 0; u < KC; u++) GU_WG_ISSUE(NT, s0 + D - KC + u);                    \
        WG_CP_COMMIT();                                                                          \
      }                                                                                          \
      WG_WAIT(0);                                                                                \
      GU_WG_STORE_H(NT, wg + nwg * pass);                                                        \
    }                                                                                            \
    WG_CP_WAIT(0);                                                                               \
    WGB_CLOSE(bars_, D);                                                                         \
  }
/* The copies of step `step` into its stage (zero fills past the last
   step): this warp's A pieces, and this thread's share of the token rows
   (copy ci: row ci / 4, k chunk ci % 4; rows past the count repeat the
   last token, copies past 8 NT rows fill zeros; at most 2 per thread of a
   warpgroup, the host's one virtual warp makes all of them). */
#define GU_WG_ISSUE(NT, step)                                                                    \
  do {                                                                                           \
    uint32_t sp_ = (step), on_ = sp_ < nsteps;                                                   \
    sm_ptr st_ = ring + (sp_ % D) * GU_SB_;                                                      \
    uint32_t mg_ = wg + nwg * (sp_ / GU_KSTEPS), k_ = sp_ % GU_KSTEPS;                           \
    mg_ = mg_ < groups ? mg_ : groups - 1; /* past the last group: the last again */            \
    if (WG_BULK_PROBE) {                                                                         \
      sm_ptr b_ = bars_ + 8 * (sp_ % D);                                                         \
      uint32_t lon_ = lead_ && on_;                                                              \
      wgb_expect(lon_, b_, MW * 1024);                                                           \
      UNROLL for (int q_ = 0; q_ < MW; q_++)                                                     \
          wgb_copy(lon_, st_ + q_ * WG_A_BYTES + wi * 1024,                                      \
                   GU_WG_PTR((mg_ * MW + q_) * 4 + wi, k_, 0), 1024, b_);                        \
    } else                                                                                       \
      WG_COPY_A(MW, st_, k_, (mg_ * MW + q_) * 4 + wi, GU_WG_PTR, GU_A_HALF, on_);               \
    if (!WG_BULK_PROBE || !(MOE_WG_PROBE & 256))                                                 \
    UNROLL for (uint32_t r_ = 0; r_ < GU_WG_COPIES(NT); r_++) {                                 \
      uint32_t ci = first + r_ * stride;                                                         \
      wg_copy(st_ + MW * WG_A_BYTES + WG_TILE_OFF(ci >> 2, ci & 3), x + xs_[r_] + k_ * 32,       \
              on_ && ci < 8 * NT * 4);                                                           \
    }                                                                                            \
  } while (0)
/* h = SiLU(gate) * up of group mg -> UpShard (a group past the last: read,
   not stored), accumulators cleared. */
#define GU_WG_STORE_H(NT, mg_expr)                                                               \
  GU_STORE_H_MT(MW, NT, mg_expr, (mg_ * MW + q) * 4 + wi, mg_ < groups)
#if MOE_WG_REG
/* The register-ring form (moe_wgmma.h, MOE_WG_REG): per step, store the
   step's pieces (loaded R steps ago) into its stage, load those of step
   s + R (steps past the last load the last one again: valid addresses,
   no branch), barrier, the step's wgmma's, wait for the previous step's. */
#define GU_WR(NT, slot, step, st, STORE)                                                         \
  do {                                                                                           \
    uint32_t sp_ = (step);                                                                       \
    sp_ = sp_ < nsteps ? sp_ : nsteps - 1;                                                       \
    uint32_t k_ = sp_ % GU_KSTEPS, mg_ = wg + nwg * (sp_ / GU_KSTEPS);                           \
    mg_ = mg_ < groups ? mg_ : groups - 1;                                                       \
    WR_A(MW, slot, st, k_, (mg_ * MW + q_) * 4 + wi, GU_WG_PTR, GU_A_HALF, STORE);               \
    UNROLL for (uint32_t r_ = 0; r_ < NC; r_++) {                                                \
      uint32_t ci = first + r_ * stride;                                                         \
      (void)ci;                                                                                  \
      if (STORE)                                                                                 \
        WR_ST((st) + MW * WG_A_BYTES + WG_TILE_OFF(ci >> 2, ci & 3), rb[slot][r_],               \
              x + xs_[r_] + k_ * 32);                                                            \
      else                                                                                       \
        WR_LD(rb[slot][r_], x + xs_[r_] + k_ * 32, ld_cached);                                   \
    }                                                                                            \
  } while (0)
#define GATE_UP_WR(NT)                                                                           \
  static inline __attribute__((always_inline)) void gate_up_wr_##NT(                             \
      const df_ctx *ctx, const uint16_t *wgu, const uint16_t *x, const int32_t *tokens,          \
      uint32_t count, sm_ptr ring, uint16_t *out, uint32_t w, uint32_t nw, uint32_t first,       \
      uint32_t stride) {                                                                         \
    enum { MW = MOE_WG_MW, D = MOE_WG_GU_STAGES, R = MOE_WG_RR, NC = GU_WG_COPIES(NT) };         \
    _Static_assert(GU_MTILES % (4 * MW) == 0 && GU_KSTEPS % R == 0 && D >= 2,                    \
                   "wgmma gate_up (registers): groups of MW blocks, R divides the k steps");     \
    GU_WG_WALK();                                                                                \
    float acc[LANES][MW][NT][4];                                                                 \
    u32x4 ra[LANES][R][MW][2], rb[R][LANES == 1 ? NC : 1];                                       \
    (void)ra, (void)rb;                                                                          \
    FOR_LANES(L, Li)                                                                             \
    UNROLL for (int q = 0; q < MW; q++) UNROLL for (int j = 0; j < NT; j++)                      \
        UNROLL for (int i = 0; i < 4; i++) acc[Li][q][j][i] = 0.0f;                              \
    GU_WG_XS(NT);                                                                                \
    UNROLL for (int u = 0; u < R; u++) GU_WR(NT, u, u, ring, 0);                                 \
    for (uint32_t pass = 0; pass < passes; pass++) {                                             \
      for (uint32_t k0 = 0; k0 < GU_KSTEPS; k0 += R) { /* constant trip, no branch */           \
        UNROLL for (int u = 0; u < R; u++) {                                                     \
          uint32_t s = pass * GU_KSTEPS + k0 + u;                                                \
          sm_ptr st = ring + (s % D) * WG_GU_STAGE_BYTES;                                        \
          GU_WR(NT, u, s, st, 1);                                                                \
          GU_WR(NT, u, s + R, st, 0);                                                            \
          WG_PROXY_FENCE();                                                                      \
          WG_BAR(wg);                                                                            \
          WG_FENCE();                                                                            \
          WG_MMAS(NT, MW, &acc[0][0][0][0], MW * NT * 4, st, st + MW * WG_A_BYTES, WG_PLANE);    \
          WG_COMMIT();                                                                           \
          WG_WAIT(1);                                                                            \
        }                                                                                        \
      }                                                                                          \
      WG_WAIT(0);                                                                                \
      GU_WG_STORE_H(NT, wg + nwg * pass);                                                        \
    }                                                                                            \
  }
#define GU_WG_FN(NT) gate_up_wr_##NT
#define GU_WG_DEF(NT) GATE_UP_WR(NT)
#else
#define GU_WG_FN(NT) gate_up_wg_##NT
#define GU_WG_DEF(NT) GATE_UP_WG(NT)
#endif
GU_WG_DEF(1)
GU_WG_DEF(2)
GU_WG_DEF(3)
GU_WG_DEF(4)
GU_WG_DEF(5)
GU_WG_DEF(6)
GU_WG_DEF(7)
GU_WG_DEF(8)
#define GU_WG_BYTES (MOE_WG_GU_STAGES * WG_GU_STAGE_BYTES) /* per warpgroup */
static inline __attribute__((always_inline)) void
gate_up_wg(uint32_t nt, const df_ctx *ctx, const uint16_t *wgu, const uint16_t *x,
           const int32_t *tokens, uint32_t count, sm_ptr ring, uint16_t *out, uint32_t w,
           uint32_t nw, uint32_t first, uint32_t stride) {
  switch (nt) {
#define GU_WG_CASE(NT)                                                                           \
  case NT: GU_WG_FN(NT)(ctx, wgu, x, tokens, count, ring, out, w, nw, first, stride); break;
    GU_WG_CASE(1)
    GU_WG_CASE(2)
    GU_WG_CASE(3)
    GU_WG_CASE(4)
    GU_WG_CASE(5)
    GU_WG_CASE(6)
    GU_WG_CASE(7)
    default: GU_WG_CASE(8)
  }
}
#endif

/* The workspace when it holds every warp's bulk ring, else NULL (the
   weights then load into registers; the host rings are on its stack). */
static inline uint8_t *bk_workspace(const df_ctx *ctx) {
#if defined(__NVPTX__)
  uint32_t need = BK_OFFSET + df_ctx_threads(ctx) / 32 * BK_WARP_BYTES;
  if (!BULK || df_ctx_workspace_bytes(ctx) < need)
    return (uint8_t *)0;
  return (uint8_t *)df_ctx_workspace(ctx) + BK_OFFSET;
#else
  (void)ctx;
  return BULK ? (uint8_t *)1 : (uint8_t *)0; /* on: BK_MEM takes the stack ring */
#endif
}

static inline __attribute__((always_inline)) void gate_up_task(const df_ctx *ctx) {
  moe_task tk = task_of(ctx);
  if (tk.count == 0 || (MOE_PROBE & 2) != 0)
    return;
  uint32_t col0 = df_ctx_range_begin(ctx); /* first intermediate column of this shard */
  const uint16_t *x = df_ctx_tensor(ctx, T_X);
  const int32_t *tokens = (const int32_t *)df_ctx_tensor(ctx, T_TOKENS) + tk.start;
  const uint16_t *wgu = (const uint16_t *)df_ctx_tensor(ctx, T_WGU) +
                        ((uint64_t)tk.expert * 2 * MOE_INTER + (PACKED ? 2 : 1) * col0) *
                            MOE_HIDDEN; /* packed: the shard's m-tiles hold gate and up rows */
  uint16_t *out = df_ctx_output(ctx);
  uint32_t nt = ntiles(tk.count), lane_ = LANE_ID(ctx);
  (void)lane_;
#if WGMMA
  if (nt >= MOE_WG_MIN_NT && wg_usable(ctx, GU_WG_BYTES)) {
#if defined(__NVPTX__)
    uint8_t *ws = df_ctx_workspace(ctx);
    FOR_WARPS(ctx, w, nw)
    gate_up_wg(nt, ctx, wgu, x, tokens, tk.count, sm_of(ws) + w / 4 * GU_WG_BYTES, out, w, nw,
               df_ctx_thread(ctx) % 128, 128);
#else
    FOR_WARPS(ctx, w, nw) {
      uint8_t ring[GU_WG_BYTES] __attribute__((aligned(16)));
      gate_up_wg(nt, ctx, wgu, x, tokens, tk.count, ring, out, w, nw, 0, 1);
    }
#endif
    df_ctx_barrier(ctx); /* the workspace is free for the next handler */
    return;
  }
#endif
#ifdef MOE_GU_STAGE
  /* Staged only with the workspace to hold the ring; without it (a
     program that does not declare it) the register-ring path. */
#if defined(__NVPTX__)
  uint8_t *ring = df_ctx_workspace(ctx);
  const uint32_t first = df_ctx_thread(ctx), stride = df_ctx_threads(ctx);
  if (nt >= MOE_GU_STAGE_MIN_NT && ring && df_ctx_workspace_bytes(ctx) >= GS_BYTES) {
    FOR_WARPS(ctx, w, nw)
    gate_up_staged(nt, ctx, wgu, x, tokens, tk.count, sm_of(ring), out, bk_workspace(ctx), w, nw,
                   first, stride);
    return;
  }
#else
  if (nt >= MOE_GU_STAGE_MIN_NT) {
    FOR_WARPS(ctx, w, nw) {
      uint8_t ring[GS_BYTES] __attribute__((aligned(16)));
      gate_up_staged(nt, ctx, wgu, x, tokens, tk.count, ring, out, bk_workspace(ctx), w, nw, 0,
                     1);
    }
    return;
  }
#endif
#endif
  /* Token row of each lane's B operand; rows past the count repeat the
     last token (their columns are computed but never used). */
  uint32_t xoff[LANES][8];
  FOR_LANES(L, Li)
  UNROLL for (uint32_t j = 0; j < 8; j++) {
    uint32_t i = 8 * j + (L >> 2);
    xoff[Li][j] = (uint32_t)tokens[i < tk.count ? i : tk.count - 1] * MOE_HIDDEN;
  }
  uint8_t *ws = bk_workspace(ctx);
  FOR_WARPS(ctx, w, nw)
  switch (nt) {
  case 1: gate_up_run_1(ctx, wgu, x, xoff, out, ws, w, nw); break;
  case 2: gate_up_run_2(ctx, wgu, x, xoff, out, ws, w, nw); break;
  case 4: gate_up_run_4(ctx, wgu, x, xoff, out, ws, w, nw); break;
#if GU_NT3_RING
  case 3: gate_up_run_3(ctx, wgu, x, xoff, out, ws, w, nw); break;
#endif
#if defined(MOE_NT6) && !defined(MOE_GU_STAGE)
  case 6: gate_up_run_6(ctx, wgu, x, xoff, out, ws, w, nw); break;
#endif
#if defined(MOE_NT_FINE) && !defined(MOE_GU_STAGE)
  case 5: gate_up_run_5(ctx, wgu, x, xoff, out, ws, w, nw); break;
  case 7: gate_up_run_7(ctx, wgu, x, xoff, out, ws, w, nw); break;
#endif
  default: gate_up_run_8(ctx, wgu, x, xoff, out, ws, w, nw); break;
  }
}

void moe_gate_up(const df_ctx *ctx) {
  if (MOE_ZERO_OUTPUT)
    zero_begin(ctx, df_ctx_range_begin(ctx) / ISHARD);
  gate_up_task(ctx);
#if WGMMA
  WG_PROXY_FENCE(); /* the h stores, to the tensor cores' reads of them in down */
#endif
  if (MOE_ZERO_OUTPUT)
    zero_publish(ctx);
}

/* Where down's results go: the task's token ids and routing weights, the
   Output columns of this shard. */
typedef struct out_rows {
  const int32_t *tokens;
  const float *weights;
  float *out;
  uint32_t count;
  uint32_t mtiles; /* the shard's m-tiles inside hidden (HSHARD_EVEN: DN_MTILES) */
} out_rows;

/* One of the two additions an Output element receives; 0 + a + b is the
   same float in either order, so the result is deterministic. */
__attribute__((unused)) static inline void add_output(float *o, float v) {
  if ((MOE_PROBE & 4) != 0 && v != -0x1p127f)
    return;
#if defined(__NVPTX__)
  __asm__ volatile("red.global.add.f32 [%0], %1;" ::"l"(o), "f"(v) : "memory");
#else
  *o += v; /* the host runs one virtual CTA at a time, its threads on disjoint columns */
#endif
}

/* down adds its results four columns per red (red.global.add.v4.f32, a
   quarter of the L2 operations), after a transpose of each n-tile through
   a per-warp tile in shared memory: the accumulators hold columns g and
   g + 8 of tokens 2t and 2t + 1, a red needs four adjacent columns of one
   token. Rows of 16 columns + 4 floats: the writes are conflict-free and
   every row starts 16-byte aligned. 5 us faster at 512 tokens, 1-2 us at
   128 and 1024, level at 256 (bench/moe run AD; run Y's transpose by
   shuffles was slower). -DMOE_DN_RED1: one scalar red per accumulator,
   as before run AD. */
#if defined(MOE_DN_RED1) && defined(MOE_DN_RED4)
#error "MOE_DN_RED1 and MOE_DN_RED4 choose opposite output additions: give one"
#endif
#ifndef MOE_DN_RED1
#define MOE_DN_RED4 1
#endif
#ifdef MOE_DN_RED4
#define DN_T_STRIDE 20
#define DN_T_WARPS 16
#if defined(__NVPTX__)
static SHARED float dn_tile[DN_T_WARPS][8 * DN_T_STRIDE];
#define DN_TILE(w) (w < DN_T_WARPS ? dn_tile[w] : (__builtin_trap(), dn_tile[0]))
#define DN_WARP_SYNC() __asm__ volatile("bar.warp.sync -1;" ::: "memory")
#else
#define DN_WARP_SYNC() ((void)0)
#endif
static inline void add_output4(float *o, const float *v) {
  if ((MOE_PROBE & 4) != 0 && v[0] != -0x1p127f)
    return;
#if defined(__NVPTX__)
  __asm__ volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(o), "f"(v[0]), "f"(v[1]),
                   "f"(v[2]), "f"(v[3])
                   : "memory");
#else
  for (int i = 0; i < 4; i++)
    o[i] += v[i];
#endif
}
#endif

#define DN_KSTEPS (MOE_INTER / 32) /* MOE_CS parts of ICHUNKS chunks */
#define DN_MTILES (HSHARD / 16)

/* Part p of the gathered intermediate without a dynamic index into parts[]
   (which would put the array in local memory): selects between values the
   optimiser cannot turn back into loads from the array. */
static inline const uint16_t *part_of(const uint16_t *const parts[MOE_CS], uint32_t p) {
  const uint16_t *r = parts[0];
  UNROLL for (uint32_t q = 1; q < MOE_CS; q++) {
    const uint16_t *v = parts[q];
#if defined(__NVPTX__)
    __asm__("" : "+l"(v));
#endif
    r = p == q ? v : r;
  }
  return r;
}

/* down: an m-tile is 16 output columns of this rank's shard (rows of Wd),
   k the 768 intermediate columns gathered from the MOE_CS ranks. A ring
   whose period U does not divide the m-tile's k steps (24: DW = 16) is
   unrolled over lcm(U, k steps) instead (DN_U, at most two m-tiles), each
   step leaving the loop once past the warp's steps (an odd m-tile
   count). */
#define DN_BOTH(U, D) ((U) % (D) == 0 && DN_KSTEPS % (D) == 0)
#define DN_GCD(U)                                                                                \
  (DN_BOTH(U, 24)   ? 24                                                                         \
   : DN_BOTH(U, 16) ? 16                                                                         \
   : DN_BOTH(U, 12) ? 12                                                                         \
   : DN_BOTH(U, 8)  ? 8                                                                          \
   : DN_BOTH(U, 6)  ? 6                                                                          \
   : DN_BOTH(U, 4)  ? 4                                                                          \
   : DN_BOTH(U, 3)  ? 3                                                                          \
   : DN_BOTH(U, 2)  ? 2                                                                          \
                    : 1)
#define DN_LONG(DW, DX) (DN_KSTEPS % RING_U(DW, DX) != 0)
#define DN_U(DW, DX)                                                                             \
  (DN_LONG(DW, DX) ? RING_U(DW, DX) * DN_KSTEPS / DN_GCD(RING_U(DW, DX)) : RING_U(DW, DX))
#define DOWN_RUN(NT, DW, DX, CH)                                                                 \
  _Static_assert(DN_U(DW, DX) % DN_KSTEPS == 0 || !DN_LONG(DW, DX), "ring period: lcm");        \
  _Static_assert(DN_U(DW, DX) <= 2 * DN_KSTEPS && RING_U(DW, DX) % DW == 0 &&                    \
                     (DX == 0 || RING_U(DW, DX) % (DX ? DX : 1) == 0),                           \
                 "ring depths must divide, unrolled over at most two m-tiles");                  \
  _Static_assert(!DN_BULK_ON || (DN_KSTEPS % CH == 0 && BK_STAGES(1, CH) >= 2 &&                 \
                           DW <= (BK_STAGES(1, CH) - 1) * CH),                                   \
                 "bulk ring: chunks divide the k steps, 2+ stages, DW within the stages ahead"); \
  static inline __attribute__((always_inline)) void down_run_##NT(                               \
      const df_ctx *ctx, const uint16_t *wd, const uint16_t *const parts[MOE_CS],                \
      const out_rows *rows, uint8_t *ws, uint32_t w, uint32_t nw) {                              \
    enum { CH_ = CH, NB_ = BK_NB(1, CH), U_ = DN_U(DW, DX), LONG_ = DN_LONG(DW, DX) };           \
    uint32_t lane_ = LANE_ID(ctx);                                                               \
    (void)lane_, (void)ctx;                                                                      \
    uint32_t nsteps = ((HSHARD_EVEN ? DN_MTILES : rows->mtiles) - w + nw - 1) / nw * DN_KSTEPS;  \
    u32x4 a[LANES][DW][2], b[LANES][DX ? DX : 1][NT];                                            \
    float acc[LANES][NT][4];                                                                     \
    FOR_LANES(L, Li)                                                                             \
    UNROLL for (int j = 0; j < NT; j++) UNROLL for (int i = 0; i < 4; i++) acc[Li][j][i] = 0.0f; \
    BK_OPEN(DN_BULK_ON ? ws : (uint8_t *)0, wd, nsteps, DN_MTILES, DN_KSTEPS, 1);                \
    UNROLL for (int u = 0; u < DW; u++) DN_LOAD_A(u, u);                                         \
    UNROLL for (int u = 0; u < DX; u++) DN_LOAD_B(NT, u, u);                                     \
    for (uint32_t s0 = 0; s0 < nsteps; s0 += U_) {                                               \
      UNROLL for (int u = 0; u < U_; u++) {                                                      \
        uint32_t s = s0 + u;                                                                     \
        if (LONG_ && s >= nsteps)                                                                \
          break;                                                                                 \
        if (DX == 0) /* B read right before its mma's: no ring registers */                      \
          DN_LOAD_B(NT, 0, s);                                                                   \
        UNROLL for (int j = 0; j < NT; j++) UNROLL for (int half = 0; half < 2; half++)          \
            warp_mma(acc[0][j], NT * 4, a[0][u % DW], DW * 2, &b[0][u % (DX ? DX : 1)][j],       \
                     (DX ? DX : 1) * NT, half);                                                  \
        if (!BULK && s + DW < nsteps)                                                            \
          DN_LOAD_A(u % DW, s + DW);                                                             \
        if (DX && s + DX < nsteps)                                                               \
          DN_LOAD_B(NT, u % (DX ? DX : 1), s + DX);                                              \
        BK_RELEASE(s, DN_KSTEPS, 1);                                                             \
        if (BULK && s + DW < nsteps)                                                             \
          DN_LOAD_A(u % DW, s + DW);                                                             \
        if (LONG_ ? (u + 1) % DN_KSTEPS == 0 : u == U_ - 1 && (s + 1) % DN_KSTEPS == 0) {        \
          /* Output[token][col] += weight * y: two additions per element */                      \
          uint32_t mt = w + nw * (s / DN_KSTEPS);                                                \
          DN_STORE_OUT(NT, mt);                                                                  \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
    BK_CLOSE();                                                                                  \
  }
/* down's m-tile mt into Output: four columns per red after the
   shared-memory transpose, or (MOE_DN_RED1) each accumulator by its own
   red. */
#define DN_STORE_OUT(NT, mt) DN_STORE_OUT_P(NT, mt, acc[Li])
#ifndef MOE_DN_RED4
#define DN_STORE_OUT_P(NT, mt, ACC)                                                              \
  FOR_LANES(L, Li) {                                                                             \
    uint32_t g = L >> 2, t = L & 3;                                                              \
    UNROLL for (int j = 0; j < NT; j++) UNROLL for (int i = 0; i < 4; i++) {                     \
      uint32_t m = (mt) * 16 + g + 8 * (i >> 1), n = 8 * j + 2 * t + (i & 1);                    \
      if (n < rows->count)                                                                       \
        add_output(rows->out + (uint64_t)rows->tokens[n] * MOE_HIDDEN + m,                       \
                   rows->weights[n] * ACC[j][i]);                                                \
      ACC[j][i] = 0.0f;                                                                          \
    }                                                                                            \
  }
#else
#if defined(__NVPTX__)
#define DN_TILE_DECL(tile) SHARED float *tile = DN_TILE(w)
#else
#define DN_TILE_DECL(tile) float tile[8 * DN_T_STRIDE]
#endif
#define DN_STORE_OUT_P(NT, mt, ACC)                                                              \
  do {                                                                                           \
    DN_TILE_DECL(tile_);                                                                         \
    UNROLL for (int j = 0; j < NT; j++) {                                                        \
      FOR_LANES(L, Li) {                                                                         \
        uint32_t g = L >> 2, t = L & 3;                                                          \
        UNROLL for (int i = 0; i < 4; i++) {                                                     \
          uint32_t r = 2 * t + (i & 1), n = 8 * j + r;                                           \
          tile_[r * DN_T_STRIDE + g + 8 * (i >> 1)] =                                            \
              n < rows->count ? rows->weights[n] * ACC[j][i] : 0.0f;                            \
          ACC[j][i] = 0.0f;                                                                      \
        }                                                                                        \
      }                                                                                          \
      DN_WARP_SYNC();                                                                            \
      FOR_LANES(L, Li) {                                                                         \
        uint32_t r = L >> 2, c = 4 * (L & 3), n = 8 * j + r;                                     \
        (void)Li;                                                                                \
        if (n < rows->count) {                                                                   \
          float v_[4];                                                                           \
          UNROLL for (int i = 0; i < 4; i++) v_[i] = tile_[r * DN_T_STRIDE + c + i];             \
          add_output4(rows->out + (uint64_t)rows->tokens[n] * MOE_HIDDEN + (mt) * 16 + c, v_);   \
        }                                                                                        \
      }                                                                                          \
      DN_WARP_SYNC(); /* read before the next n-tile overwrites the tile */                     \
    }                                                                                            \
  } while (0)
#endif
/* Slot `slot` <- Wd rows g and g + 8 of m-tile mt at k step `step` (from
   the bulk ring when it is on). */
#define DN_LOAD_A_REG(slot, step)                                                                \
  do {                                                                                           \
    uint32_t st_ = (step), mt_ = w + nw * (st_ / DN_KSTEPS), k_ = (st_ % DN_KSTEPS) * 32;        \
    FOR_LANES(L, Li) {                                                                           \
      const uint16_t *p_ =                                                                       \
          PACKED ? wd + ((uint64_t)mt_ * DN_KSTEPS + st_ % DN_KSTEPS) * 512 + 8 * L              \
                 : wd + (uint64_t)(mt_ * 16 + (L >> 2)) * MOE_INTER + k_ + 8 * (L & 3);          \
      a[Li][slot][0] = ld_stream(p_);                                                            \
      a[Li][slot][1] = ld_stream(p_ + (PACKED ? 256 : 8 * MOE_INTER));                           \
    }                                                                                            \
  } while (0)
/* The same addressing for the wgmma paths: lane L's 16 bytes of Wd row
   16 mt + g at k step ks (8 k from 8 t); row 16 mt + g + 8 is DN_A_HALF
   elements further. */
__attribute__((unused)) static inline const uint16_t *dn_a_ptr(const uint16_t *wd, uint32_t mt,
                                                               uint32_t ks, uint32_t L) {
  return PACKED ? wd + ((uint64_t)mt * DN_KSTEPS + ks) * 512 + 8 * L
                : wd + (uint64_t)(mt * 16 + (L >> 2)) * MOE_INTER + ks * 32 + 8 * (L & 3);
}
#define DN_A_HALF (PACKED ? 256 : 8 * MOE_INTER)
#if BULK
#define DN_LOAD_A(slot, step)                                                                    \
  do {                                                                                           \
    if (bk.on) {                                                                                 \
      uint32_t sb_ = (step);                                                                     \
      BK_READ_STEP(sb_, 1, a[Li][slot][h_]);                                                     \
    } else                                                                                       \
      DN_LOAD_A_REG(slot, step);                                                                 \
  } while (0)
#else
#define DN_LOAD_A(slot, step) DN_LOAD_A_REG(slot, step)
#endif
/* Slot `slot` <- the gathered h of step `step`: chunk kk % ICHUNKS of part
   kk / ICHUNKS, token-major inside the chunk (conflict-free 16-byte loads). */
#define DN_LOAD_B(NT, slot, step)                                                                \
  do {                                                                                           \
    uint32_t kk_ = (step) % DN_KSTEPS;                                                           \
    const uint16_t *part_ = part_of(parts, kk_ / ICHUNKS) + (kk_ % ICHUNKS) * MOE_TT * 32;       \
    FOR_LANES(L, Li)                                                                             \
    UNROLL for (int j = 0; j < NT; j++)                                                          \
        b[Li][slot][j] = ld_slot(part_ + UP_ROW_OFF(8 * j + (L >> 2)) + UP_K_OFF(L & 3));        \
  } while (0)
#ifdef MOE_DN_MW
/* -DMOE_DN_MW=M (an experiment, register rings only): each warp takes
   groups of M adjacent m-tiles per pass, so every token fragment it reads
   from the gathered h feeds M m-tiles' mma's, as in gate_up's staged path
   (M = 2 there; 1 x 16 steps was far slower than 2 x 8 there, bench/moe
   run AD). Ring MOE_DN_MW_RING = DW, DX at every n-tile count: DW steps
   of M KB of weights per warp in flight. A group past the shard's last
   m-tile loads that one again and stores nothing. */
#if DN_BULK_ON
#error "MOE_DN_MW takes the register rings, not MOE_BULK_DOWN"
#endif
#if MOE_DN_MW < 1
#error "MOE_DN_MW is the m-tiles per group: 1 or more"
#endif
#ifndef MOE_DN_MW_RING
#define MOE_DN_MW_RING 4, 2
#endif
#define DN_LOAD_AM(MW, slot, step)                                                               \
  do {                                                                                           \
    uint32_t st_ = (step), mg_ = w + nw * (st_ / DN_KSTEPS), ks_ = st_ % DN_KSTEPS;              \
    UNROLL for (int q = 0; q < MW; q++) {                                                        \
      uint32_t mt_ = mg_ * MW + q < mtiles ? mg_ * MW + q : mtiles - 1;                          \
      FOR_LANES(L, Li) {                                                                         \
        const uint16_t *p_ = dn_a_ptr(wd, mt_, ks_, L);                                          \
        a[Li][slot][q][0] = ld_stream(p_);                                                       \
        a[Li][slot][q][1] = ld_stream(p_ + DN_A_HALF);                                           \
      }                                                                                          \
    }                                                                                            \
  } while (0)
#define DOWN_RUN_MW(NT, MW, DW, DX)                                                              \
  _Static_assert(DN_KSTEPS % RING_U(DW, DX) == 0 && RING_U(DW, DX) % DW == 0 &&                  \
                     (DX == 0 || RING_U(DW, DX) % (DX ? DX : 1) == 0),                           \
                 "grouped down ring: depths divide the period, the period the k steps");         \
  static inline __attribute__((always_inline)) void down_run_##NT(                               \
      const df_ctx *ctx, const uint16_t *wd, const uint16_t *const parts[MOE_CS],                \
      const out_rows *rows, uint8_t *ws, uint32_t w, uint32_t nw) {                              \
    enum { U_ = RING_U(DW, DX) };                                                                \
    uint32_t lane_ = LANE_ID(ctx);                                                               \
    (void)lane_, (void)ctx, (void)ws;                                                            \
    const uint32_t mtiles = HSHARD_EVEN ? DN_MTILES : rows->mtiles;                              \
    const uint32_t groups = (mtiles + MW - 1) / MW;                                              \
    const uint32_t nsteps = w < groups ? (groups - w + nw - 1) / nw * DN_KSTEPS : 0;             \
    u32x4 a[LANES][DW][MW][2], b[LANES][DX ? DX : 1][NT];                                        \
    float acc[LANES][MW][NT][4];                                                                 \
    FOR_LANES(L, Li)                                                                             \
    UNROLL for (int q = 0; q < MW; q++) UNROLL for (int j = 0; j < NT; j++)                      \
        UNROLL for (int i = 0; i < 4; i++) acc[Li][q][j][i] = 0.0f;                              \
    if (nsteps == 0)                                                                             \
      return;                                                                                    \
    UNROLL for (int u = 0; u < DW; u++) DN_LOAD_AM(MW, u, u);                                    \
    UNROLL for (int u = 0; u < DX; u++) DN_LOAD_B(NT, u, u);                                     \
    for (uint32_t s0 = 0; s0 < nsteps; s0 += U_) {                                               \
      UNROLL for (int u = 0; u < U_; u++) {                                                      \
        uint32_t s = s0 + u;                                                                     \
        if (DX == 0)                                                                             \
          DN_LOAD_B(NT, 0, s);                                                                   \
        UNROLL for (int j = 0; j < NT; j++) UNROLL for (int q = 0; q < MW; q++)                  \
            UNROLL for (int half = 0; half < 2; half++)                                          \
            warp_mma(acc[0][q][j], MW * NT * 4, a[0][u % DW][q], DW * MW * 2,                    \
                     &b[0][u % (DX ? DX : 1)][j], (DX ? DX : 1) * NT, half);                     \
        if (s + DW < nsteps)                                                                     \
          DN_LOAD_AM(MW, u % DW, s + DW);                                                        \
        if (DX && s + DX < nsteps)                                                               \
          DN_LOAD_B(NT, u % (DX ? DX : 1), s + DX);                                              \
        if ((s + 1) % DN_KSTEPS == 0) {                                                          \
          uint32_t mg = w + nw * (s / DN_KSTEPS);                                                \
          UNROLL for (int q = 0; q < MW; q++) {                                                  \
            if (mg * MW + q < mtiles) {                                                          \
              DN_STORE_OUT_P(NT, mg * MW + q, acc[Li][q]);                                       \
            } else {                                                                             \
              FOR_LANES(L, Li) UNROLL for (int j = 0; j < NT; j++)                               \
                  UNROLL for (int i = 0; i < 4; i++) acc[Li][q][j][i] = 0.0f;                    \
            }                                                                                    \
          }                                                                                      \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
  }
#define DN_MW_(NT, ...) DOWN_RUN_MW(NT, MOE_DN_MW, __VA_ARGS__)
#define DN_MW(NT, ...) DN_MW_(NT, __VA_ARGS__)
DN_MW(1, MOE_DN_MW_RING)
DN_MW(2, MOE_DN_MW_RING)
DN_MW(4, MOE_DN_MW_RING)
#ifdef MOE_NT3
DN_MW(3, MOE_DN_MW_RING)
#endif
/* 5-8 n-tiles keep one m-tile per pass and the default rings: groups of
   two there hold twice the accumulators, and ptxas spilled hundreds of
   bytes for the whole kernel. */
DOWN_RUN(8, 8, 2, 1)
#ifdef MOE_NT6
DOWN_RUN(6, 8, 0, 1)
#endif
#ifdef MOE_NT_FINE
DOWN_RUN(5, 8, 0, 1)
DOWN_RUN(7, 8, 0, 1)
#endif
#else /* MOE_DN_MW */
#if DN_BULK_ON
#ifndef MOE_DN_BULK /* DW, DX and CH for 1, 2, 4 and 8 n-tiles */
#define MOE_DN_BULK 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2
#endif
#define DN_BULK_(a1, b1, c1, a2, b2, c2, a4, b4, c4, a8, b8, c8)                                 \
  DOWN_RUN(1, a1, b1, c1) DOWN_RUN(2, a2, b2, c2) DOWN_RUN(4, a4, b4, c4) DOWN_RUN(8, a8, b8, c8)
#define DN_BULK(...) DN_BULK_(__VA_ARGS__)
DN_BULK(MOE_DN_BULK)
#else
#ifndef MOE_DN_RING /* DW and DX for 1, 2, 4 and 8 n-tiles */
#define MOE_DN_RING 12, 4, 12, 4, 8, 2, 8, 2
#endif
#define DN_RING_(a1, b1, a2, b2, a4, b4, a8, b8)                                                 \
  DOWN_RUN(1, a1, b1, 1) DOWN_RUN(2, a2, b2, 1) DOWN_RUN(4, a4, b4, 1) DOWN_RUN(8, a8, b8, 1)
#define DN_RING(...) DN_RING_(__VA_ARGS__)
DN_RING(MOE_DN_RING)
#endif
#ifdef MOE_NT6
#if DN_BULK_ON
#ifndef MOE_DN_BULK_FINE /* DW, DX and CH for 5, 6 and 7 n-tiles */
#define MOE_DN_BULK_FINE 2, 0, 2
#endif
#define MOE_DN_RING_FINE MOE_DN_BULK_FINE
#define DN_RING_FINE_(NT, ...) DOWN_RUN(NT, __VA_ARGS__)
#else
#ifndef MOE_DN_RING_FINE /* DW and DX for 5, 6 and 7 n-tiles */
#define MOE_DN_RING_FINE 8, 0
#endif
#define DN_RING_FINE_(NT, ...) DOWN_RUN(NT, __VA_ARGS__, 1)
#endif
DN_RING_FINE_(6, MOE_DN_RING_FINE)
#ifdef MOE_NT_FINE
DN_RING_FINE_(5, MOE_DN_RING_FINE)
DN_RING_FINE_(7, MOE_DN_RING_FINE)
#endif
#endif
#ifdef MOE_NT3
#ifndef MOE_DN_RING3 /* DW and DX for 3 n-tiles */
#define MOE_DN_RING3 8, 2
#endif
#define DN_RING3_(...) DOWN_RUN(3, __VA_ARGS__, 1)
DN_RING3_(MOE_DN_RING3)
#endif
#endif /* MOE_DN_MW */

#if WGMMA
/* down on warpgroups (moe_wgmma.h): block b is m-tiles 4 b .. 4 b + 3 of
   the shard, warp i of a warpgroup takes m-tile 4 b + i; a warpgroup walks
   groups of MW blocks (wg, wg + nwg, ...) through its ring of
   MOE_WG_DN_STAGES A stages. An m-tile past the shard's last (the last
   rank at clusters of 3) copies the last one's weights again and stores
   nothing. The B operand is the gathered h in the UpShard slots: k step
   kk is chunk kk % ICHUNKS of part kk / ICHUNKS. */
#define DN_WG_PTR(mt, ks, L) dn_a_ptr(wd, (mt) < mtiles ? (mt) : mtiles - 1, ks, L)
/* A down warpgroup's walk: warp wi of warpgroup wg, its passes over the
   block groups and k steps. */
#define DN_WG_WALK()                                                                             \
  uint32_t lane_ = LANE_ID(ctx);                                                                 \
  (void)lane_, (void)ctx;                                                                        \
  const uint32_t wi = w % 4, wg = w / 4, nwg = nw / 4;                                           \
  const uint32_t mtiles = HSHARD_EVEN ? DN_MTILES : rows->mtiles;                                \
  const uint32_t groups = (mtiles + 4 * MW - 1) / (4 * MW);                                      \
  const uint32_t passes = wg < groups ? (groups - wg + nwg - 1) / nwg : 0;                       \
  const uint32_t nsteps = passes * DN_KSTEPS
#define DOWN_WG(NT)                                                                              \
  static inline __attribute__((always_inline)) void down_wg_##NT(                                \
      const df_ctx *ctx, const uint16_t *wd, const uint16_t *const parts[MOE_CS],                \
      const out_rows *rows, sm_ptr ring, uint32_t w, uint32_t nw) {                              \
    enum { MW = MOE_WG_MW, D = MOE_WG_DN_STAGES - WG_BULK_PROBE, KC = MOE_WG_KC };               \
    DN_WG_WALK();                                                                                \
    const sm_ptr bars_ = ring + D * WG_DN_STAGE_BYTES;                                           \
    const uint32_t lead_ = LANE_ID(ctx) == 0;                                                    \
    (void)bars_, (void)lead_;                                                                    \
    WGB_OPEN(bars_, D);                                                                          \
    float acc[LANES][MW][NT][4];                                                                 \
    FOR_LANES(L, Li)                                                                             \
    UNROLL for (int q = 0; q < MW; q++) UNROLL for (int j = 0; j < NT; j++)                      \
        UNROLL for (int i = 0; i < 4; i++) acc[Li][q][j][i] = 0.0f;                              \
    UNROLL for (int p = 0; p + KC < D; p += KC) {                                                \
      UNROLL for (int u = 0; u < KC; u++) DN_WG_ISSUE(p + u);                                    \
      WG_CP_COMMIT();                                                                            \
    }                                                                                            \
    for (uint32_t pass = 0; pass < passes; pass++) {                                             \
      for (uint32_t k0 = 0; k0 < DN_KSTEPS; k0 += KC) { /* as in gate_up_wg: no branch */       \
        uint32_t s0 = pass * DN_KSTEPS + k0;                                                     \
        if (WG_BULK_PROBE) {                                                                     \
          bk_wait(bars_ + 8 * (s0 % D), (s0 / D) & 1);                                          \
        } else {                                                                                 \
          WG_CP_WAIT(D / KC - 2);                                                                \
          WG_PROXY_FENCE();                                                                      \
          WG_BAR(wg);                                                                            \
        }                                                                                        \
        WG_FENCE();                                                                              \
        UNROLL for (int u = 0; u < KC; u++) {                                                    \
          uint32_t kk = k0 + u;                                                                  \
          const uint16_t *b_ = part_of(parts, kk / ICHUNKS) + (kk % ICHUNKS) * MOE_TT * 32;      \
          sm_ptr st = ring + ((s0 + u) % D) * WG_DN_STAGE_BYTES;                                 \
          WG_MMAS(NT, MW, &acc[0][0][0][0], MW * NT * 4, st, sm_of((uint8_t *)(uintptr_t)b_),    \
                  WG_UP_LBO);                                                                    \
        }                                                                                        \
        WG_COMMIT();                                                                             \
        WG_WAIT(1);                                                                              \
        UNROLL for (int u = 0; u < KC; u++) DN_WG_ISSUE(s0 + D - KC + u);                        \
        WG_CP_COMMIT();                                                                          \
      }                                                                                          \
      WG_WAIT(0);                                                                                \
      DN_WG_EPILOGUE(NT, wg + nwg * pass);                                                       \
    }                                                                                            \
    WG_CP_WAIT(0);                                                                               \
    WGB_CLOSE(bars_, D);                                                                         \
  }
/* Output[token][col] += weight * y for block group mg_expr, accumulators
   cleared. */
#define DN_WG_EPILOGUE(NT, mg_expr)                                                              \
  do {                                                                                           \
    uint32_t mg = (mg_expr);                                                                     \
    FOR_LANES(L, Li) {                                                                           \
      uint32_t g = L >> 2, t = L & 3;                                                            \
      UNROLL for (int q = 0; q < MW; q++) UNROLL for (int j = 0; j < NT; j++)                    \
          UNROLL for (int i = 0; i < 4; i++) {                                                   \
        uint32_t mt = (mg * MW + q) * 4 + wi, m = mt * 16 + g + 8 * (i >> 1),                    \
                 n = 8 * j + 2 * t + (i & 1);                                                    \
        float y_ = wg_read(acc[Li][q][j][i]); /* on every lane, before the branch */            \
        if (mt < mtiles && n < rows->count)                                                      \
          add_output(rows->out + (uint64_t)rows->tokens[n] * MOE_HIDDEN + m,                     \
                     rows->weights[n] * y_);                                                     \
        acc[Li][q][j][i] = 0.0f;                                                                 \
      }                                                                                          \
    }                                                                                            \
  } while (0)
/* This warp's A pieces of step `step` into its stage (zero fills past the
   last step). */
#define DN_WG_ISSUE(step)                                                                        \
  do {                                                                                           \
    uint32_t sp_ = (step), mg_ = wg + nwg * (sp_ / DN_KSTEPS);                                   \
    sm_ptr st_ = ring + (sp_ % D) * WG_DN_STAGE_BYTES;                                           \
    if (WG_BULK_PROBE) {                                                                         \
      sm_ptr b_ = bars_ + 8 * (sp_ % D);                                                         \
      uint32_t on_ = lead_ && sp_ < nsteps;                                                      \
      wgb_expect(on_, b_, MW * 1024);                                                            \
      UNROLL for (int q_ = 0; q_ < MW; q_++)                                                     \
          wgb_copy(on_, st_ + q_ * WG_A_BYTES + wi * 1024,                                       \
                   DN_WG_PTR((mg_ * MW + q_) * 4 + wi, sp_ % DN_KSTEPS, 0), 1024, b_);           \
    } else                                                                                       \
      WG_COPY_A(MW, st_, sp_ % DN_KSTEPS, (mg_ * MW + q_) * 4 + wi, DN_WG_PTR, DN_A_HALF,        \
                sp_ < nsteps);                                                                   \
  } while (0)
#if MOE_WG_REG
/* The register-ring form, as gate_up_wr. */
#define DN_WR(slot, step, st, STORE)                                                             \
  do {                                                                                           \
    uint32_t sp_ = (step);                                                                       \
    sp_ = sp_ < nsteps ? sp_ : nsteps - 1;                                                       \
    uint32_t mg_ = wg + nwg * (sp_ / DN_KSTEPS);                                                 \
    WR_A(MW, slot, st, sp_ % DN_KSTEPS, (mg_ * MW + q_) * 4 + wi, DN_WG_PTR, DN_A_HALF, STORE);  \
  } while (0)
#define DOWN_WR(NT)                                                                              \
  static inline __attribute__((always_inline)) void down_wr_##NT(                                \
      const df_ctx *ctx, const uint16_t *wd, const uint16_t *const parts[MOE_CS],                \
      const out_rows *rows, sm_ptr ring, uint32_t w, uint32_t nw) {                              \
    enum { MW = MOE_WG_MW, D = MOE_WG_DN_STAGES, R = MOE_WG_RR };                                \
    _Static_assert(DN_KSTEPS % R == 0 && D >= 2, "wgmma down (registers): R divides the k steps"); \
    DN_WG_WALK();                                                                                \
    if (nsteps == 0)                                                                             \
      return;                                                                                    \
    float acc[LANES][MW][NT][4];                                                                 \
    u32x4 ra[LANES][R][MW][2];                                                                   \
    (void)ra;                                                                                    \
    FOR_LANES(L, Li)                                                                             \
    UNROLL for (int q = 0; q < MW; q++) UNROLL for (int j = 0; j < NT; j++)                      \
        UNROLL for (int i = 0; i < 4; i++) acc[Li][q][j][i] = 0.0f;                              \
    UNROLL for (int u = 0; u < R; u++) DN_WR(u, u, ring, 0);                                     \
    for (uint32_t pass = 0; pass < passes; pass++) {                                             \
      for (uint32_t k0 = 0; k0 < DN_KSTEPS; k0 += R) {                                           \
        UNROLL for (int u = 0; u < R; u++) {                                                     \
          uint32_t kk = k0 + u, s = pass * DN_KSTEPS + kk;                                       \
          const uint16_t *b_ = part_of(parts, kk / ICHUNKS) + (kk % ICHUNKS) * MOE_TT * 32;      \
          sm_ptr st = ring + (s % D) * WG_DN_STAGE_BYTES;                                        \
          DN_WR(u, s, st, 1);                                                                    \
          DN_WR(u, s + R, st, 0);                                                                \
          WG_PROXY_FENCE();                                                                      \
          WG_BAR(wg);                                                                            \
          WG_FENCE();                                                                            \
          WG_MMAS(NT, MW, &acc[0][0][0][0], MW * NT * 4, st, sm_of((uint8_t *)(uintptr_t)b_),    \
                  WG_UP_LBO);                                                                    \
          WG_COMMIT();                                                                           \
          WG_WAIT(1);                                                                            \
        }                                                                                        \
      }                                                                                          \
      WG_WAIT(0);                                                                                \
      DN_WG_EPILOGUE(NT, wg + nwg * pass);                                                       \
    }                                                                                            \
  }
#define DN_WG_FN(NT) down_wr_##NT
#define DN_WG_DEF(NT) DOWN_WR(NT)
#else
#define DN_WG_FN(NT) down_wg_##NT
#define DN_WG_DEF(NT) DOWN_WG(NT)
#endif
DN_WG_DEF(1)
DN_WG_DEF(2)
DN_WG_DEF(3)
DN_WG_DEF(4)
DN_WG_DEF(5)
DN_WG_DEF(6)
DN_WG_DEF(7)
DN_WG_DEF(8)
#define DN_WG_BYTES (MOE_WG_DN_STAGES * WG_DN_STAGE_BYTES) /* per warpgroup */
static inline __attribute__((always_inline)) void down_wg(uint32_t nt, const df_ctx *ctx,
                                                          const uint16_t *wd,
                                                          const uint16_t *const parts[MOE_CS],
                                                          const out_rows *rows, sm_ptr ring,
                                                          uint32_t w, uint32_t nw) {
  switch (nt) {
#define DN_WG_CASE(NT)                                                                           \
  case NT: DN_WG_FN(NT)(ctx, wd, parts, rows, ring, w, nw); break;
    DN_WG_CASE(1)
    DN_WG_CASE(2)
    DN_WG_CASE(3)
    DN_WG_CASE(4)
    DN_WG_CASE(5)
    DN_WG_CASE(6)
    DN_WG_CASE(7)
    default: DN_WG_CASE(8)
  }
}
#endif

void moe_down(const df_ctx *ctx) {
  moe_task tk = task_of(ctx);
  uint32_t col0 = df_ctx_range_begin(ctx); /* first output column of this shard */
  if (MOE_ZERO_OUTPUT)
    zero_wait(ctx);
  int32_t *done = df_ctx_output(ctx);
  if (df_ctx_thread(ctx) == 0)
    UNROLL for (int i = 0; i < 4; i++)
      done[i] = i == 0 ? (int32_t)tk.count : i == 1 ? (int32_t)col0 : 0;
  if (tk.count == 0 || df_ctx_input_count(ctx) != MOE_CS || (MOE_PROBE & 1) != 0)
    return;
  const uint16_t *wd = (const uint16_t *)df_ctx_tensor(ctx, T_WD) +
                       ((uint64_t)tk.expert * MOE_HIDDEN + col0) * MOE_INTER;
  const uint16_t *parts[MOE_CS];
  UNROLL for (uint32_t p = 0; p < MOE_CS; p++)
    parts[p] = df_ctx_input(ctx, p);
  out_rows rows = {(const int32_t *)df_ctx_tensor(ctx, T_TOKENS) + tk.start,
                   (const float *)df_ctx_tensor(ctx, T_WEIGHTS) + tk.start,
                   (float *)df_ctx_tensor(ctx, T_OUTPUT) + col0, tk.count,
                   HSHARD_EVEN || col0 + HSHARD <= MOE_HIDDEN ? DN_MTILES
                   : col0 < MOE_HIDDEN                        ? (MOE_HIDDEN - col0) / 16
                                                              : 0};
  uint32_t nt = ntiles(tk.count);
#if WGMMA
  if (nt >= MOE_WG_MIN_NT && wg_usable(ctx, DN_WG_BYTES)) {
    /* the gathered h (the peers' copies and this CTA's own stores), to the
       tensor cores' reads */
    WG_PROXY_FENCE();
    df_ctx_barrier(ctx);
#if defined(__NVPTX__)
    uint8_t *ring = df_ctx_workspace(ctx);
    FOR_WARPS(ctx, w, nw)
    down_wg(nt, ctx, wd, parts, &rows, sm_of(ring) + w / 4 * DN_WG_BYTES, w, nw);
#else
    FOR_WARPS(ctx, w, nw) {
      uint8_t ring[DN_WG_BYTES] __attribute__((aligned(16)));
      down_wg(nt, ctx, wd, parts, &rows, ring, w, nw);
    }
#endif
    df_ctx_barrier(ctx); /* the workspace is free for the next handler */
    return;
  }
#endif
  uint8_t *ws = bk_workspace(ctx);
  FOR_WARPS(ctx, w, nw)
  switch (nt) {
  case 1: down_run_1(ctx, wd, parts, &rows, ws, w, nw); break;
  case 2: down_run_2(ctx, wd, parts, &rows, ws, w, nw); break;
  case 4: down_run_4(ctx, wd, parts, &rows, ws, w, nw); break;
#ifdef MOE_NT3
  case 3: down_run_3(ctx, wd, parts, &rows, ws, w, nw); break;
#endif
#ifdef MOE_NT6
  case 6: down_run_6(ctx, wd, parts, &rows, ws, w, nw); break;
#endif
#ifdef MOE_NT_FINE
  case 5: down_run_5(ctx, wd, parts, &rows, ws, w, nw); break;
  case 7: down_run_7(ctx, wd, parts, &rows, ws, w, nw); break;
#endif
  default: down_run_8(ctx, wd, parts, &rows, ws, w, nw); break;
  }
}
