/* Part of moe_fused_handlers.c (included by it, in order, after moe_output.h):
   down over register rings (DOWN_RUN, down_run_NT; -DMOE_DN_MW's
   m-tile groups), the default path. */

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
