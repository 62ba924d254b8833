/* Part of moe_fused_handlers.c (included by it, in order, after moe_down_ring.h):
   down on warpgroup wgmma's (-DMOE_WGMMA; down_wg), empty without it. */

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
