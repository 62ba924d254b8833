/* Part of moe_fused_handlers.c (included by it, in order, after moe_gate_up_staged.h):
   gate_up on warpgroup wgmma's (-DMOE_WGMMA; gate_up_wg), empty
   without it. */

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
   faster on its own: bench/moe/HISTORY.md, run X call 4). */
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
