/* Part of moe_fused_handlers.c (included by it, in order, after moe_gate_up_ring.h):
   gate_up with the token rows staged in shared memory
   (-DMOE_GU_STAGE=S; gate_up_staged), empty without it. */

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
