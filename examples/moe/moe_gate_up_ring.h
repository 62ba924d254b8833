/* Part of moe_fused_handlers.c (included by it, in order, after moe_common.h, moe_bulk_ring.h and
   moe_wgmma.h):
   gate_up over register rings (GATE_UP_RUN, gate_up_run_NT), the
   default path at every n-tile count a build does not stage. */

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
