/* Part of moe_fused_handlers.c (included by it after its common
   definitions: u32x4, LANES, FOR_LANES, MOE_TT, sm_ptr): the opt-in
   warpgroup GEMMs (-DMOE_WGMMA, sm_90a wgmma.mma_async; examples/moe/
   README.md, "Warpgroup GEMMs").

   mma.sync issues one 16x8x16 product per instruction, so a task of 8
   n-tiles costs a warp 48 of them per k step and its loads wait behind
   them. wgmma multiplies a warpgroup's 64 weight rows by all N = 8 NT
   token rows of a 16-wide k slice in one asynchronous instruction, both
   operands read by the tensor cores from shared memory through matrix
   descriptors. Each warpgroup streams its weights through its own ring of
   stages in the handler workspace: warp i copies its m-tile's 16 rows of a
   k step (the same 16-byte pieces the register rings load; cp.async) into
   rows 16 i .. 16 i + 15 of the stage's A tile, and gate_up's warpgroups
   also copy the step's token rows into the stage. Per step: this thread's
   copies done, proxy fence, the warpgroup's named barrier, the wgmma's
   committed as one group; after waiting for the previous step's group
   the freed stage is refilled D - 1 steps ahead. Accumulators are read
   only after a full wait and on every lane (a read in a divergent branch
   makes ptxas serialise every wgmma). Warp i's accumulators are the
   mma.sync C fragments of its 16 rows for each n-tile, so the epilogues
   do not change. (A first version kept A in registers, fed by the
   register ring through a quad transpose: ptxas reused the fragment
   registers at once and serialised every wgmma behind a full wait;
   bench/moe/HISTORY.md, run W.)

   Every B operand and A tile is in the canonical no-swizzle K-major
   layout: 8x8 "core matrices" of 8 rows x 16 bytes, contiguous (128
   bytes), [4 k chunks of 8][rows][8 k] per 32-wide k step; the chunk
   stride is the descriptor's leading byte offset (64 rows x 16 bytes in
   the stages, MOE_TT x 16 in an UpShard), 8-row groups are 128 bytes
   apart. No alignment beyond 16 bytes, so the gather's byte copies
   between slots keep it. */
#ifndef MOE_WGMMA_H
#define MOE_WGMMA_H

#ifdef MOE_WGMMA
#define WGMMA 1
#else
#define WGMMA 0
#endif

/* Element offsets of token row n and of 8-k chunk c inside a 32-column
   chunk of an UpShard (added to a pointer one after the other, as the
   mma.sync path always did), and the UpShard element of token n,
   intermediate column m of the shard: [token][32] per chunk, or with
   MOE_WGMMA wgmma's core-matrix layout [4 k chunks][MOE_TT tokens][8]
   (down's mma.sync reads of it then conflict 4-way; the slot's size, the
   program's shape, leaves no room for padding). */
#if WGMMA
#define UP_ROW_OFF(n) ((n) * 8)
#define UP_K_OFF(c) ((c) * (MOE_TT * 8))
#define UP_INDEX(n, m) ((m) / 32 * (MOE_TT * 32) + UP_K_OFF((m) % 32 / 8) + UP_ROW_OFF(n) + (m) % 8)
#else
#define UP_ROW_OFF(n) ((n) * 32)
#define UP_K_OFF(c) (8 * (c))
#define UP_INDEX(n, m) (((m) / 32 * MOE_TT + (n)) * 32 + (m) % 32)
#endif

#if !WGMMA
#define wg_read(v) (v) /* moe_fused_handlers.c's epilogues read accumulators through it */
#endif

#if WGMMA
#ifndef MOE_WG_MW /* m64 blocks per step of a warpgroup */
#define MOE_WG_MW 1
#endif
#ifndef MOE_WG_GU_STAGES /* gate_up's stages per warpgroup */
#define MOE_WG_GU_STAGES 6
#endif
#ifndef MOE_WG_DN_STAGES /* down's stages per warpgroup */
#define MOE_WG_DN_STAGES 8
#endif
#ifndef MOE_WG_L2_256 /* the copies ask L2 for 256-byte fetches (as the register rings) */
#define MOE_WG_L2_256 0
#endif
#ifndef MOE_WG_MIN_NT /* tasks of fewer n-tiles take the mma.sync paths */
#define MOE_WG_MIN_NT 1
#endif
#ifndef MOE_WG_KC /* k steps per chunk: one wait, fence, barrier and group */
#define MOE_WG_KC 1
#endif
/* Timing probes (wrong results): MOE_WG_PROBE bit 2 skips the wgmma
   instructions, bit 8 the proxy fences, bit 16 uses cp.async without the
   source size (no zero fills), bit 32 skips the named barriers, bit 64
   the wgmma fences. */
#ifndef MOE_WG_PROBE
#define MOE_WG_PROBE 0
#endif
#define WG_A_BYTES 4096u    /* a 64-row A tile of one 32-wide k step */
#define WG_B_BYTES 4096u    /* 64 token rows of one k step */
#define WG_SBO 128u         /* 8-row groups of a core-matrix column */
#define WG_PLANE (64u * 16) /* k chunk stride of a stage tile */
#define WG_UP_LBO (MOE_TT * 16u)
/* Stage bytes of the two handlers' rings (per warpgroup: times stages). */
#define WG_GU_STAGE_BYTES (MOE_WG_MW * WG_A_BYTES + WG_B_BYTES)
#define WG_DN_STAGE_BYTES (MOE_WG_MW * WG_A_BYTES)
_Static_assert(MOE_WG_GU_STAGES % MOE_WG_KC == 0 && MOE_WG_DN_STAGES % MOE_WG_KC == 0 &&
                   MOE_WG_GU_STAGES / MOE_WG_KC >= 2 && MOE_WG_DN_STAGES / MOE_WG_KC >= 2,
               "wgmma rings: whole chunks of MOE_WG_KC steps, 2+ of them");
_Static_assert((MOE_HIDDEN / 32) % MOE_WG_KC == 0 && (MOE_INTER / 32) % MOE_WG_KC == 0,
               "wgmma: chunks of MOE_WG_KC steps must divide both GEMMs' k steps");

/* The CTA's warps make whole warpgroups and the workspace holds their
   rings of per_wg bytes each (else the mma.sync paths run). */
static inline int wg_usable(const df_ctx *ctx, uint32_t per_wg) {
#if defined(__NVPTX__)
  uint32_t nw = df_ctx_threads(ctx) / 32;
  return nw % 4 == 0 && df_ctx_workspace(ctx) && df_ctx_workspace_bytes(ctx) >= nw / 4 * per_wg;
#else
  (void)ctx, (void)per_wg;
  return MOE_NWARPS % 4 == 0; /* the host's rings are on its stack */
#endif
}

/* One 16-byte piece of a stage tile: row r (of 64), 8-k chunk c. */
#define WG_TILE_OFF(r, c) ((c) * WG_PLANE + (r) * 16u)

#if defined(__NVPTX__)
/* Matrix descriptor of a no-swizzle K-major operand at shared address
   `addr` (bits 0-13: address / 16, 16-29: leading byte offset / 16 (the k
   chunks), 32-45: stride byte offset / 16 (8-row groups), layout type 0). */
static inline __attribute__((always_inline)) uint64_t wg_desc(uint32_t addr, uint32_t lbo) {
  return (uint64_t)((addr & 0x3FFFFu) >> 4) | (uint64_t)(lbo >> 4) << 16 |
         (uint64_t)(WG_SBO >> 4) << 32;
}

#define WG_D1 "%0, %1, %2, %3"
#define WG_D2 WG_D1 ", %4, %5, %6, %7"
#define WG_D3 WG_D2 ", %8, %9, %10, %11"
#define WG_D4 WG_D3 ", %12, %13, %14, %15"
#define WG_D5 WG_D4 ", %16, %17, %18, %19"
#define WG_D6 WG_D5 ", %20, %21, %22, %23"
#define WG_D7 WG_D6 ", %24, %25, %26, %27"
#define WG_D8 WG_D7 ", %28, %29, %30, %31"
#define WG_C4(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define WG_C1(d) WG_C4(d, 0)
#define WG_C2(d) WG_C1(d), WG_C4(d, 4)
#define WG_C3(d) WG_C2(d), WG_C4(d, 8)
#define WG_C4_(d) WG_C3(d), WG_C4(d, 12)
#define WG_C5(d) WG_C4_(d), WG_C4(d, 16)
#define WG_C6(d) WG_C5(d), WG_C4(d, 20)
#define WG_C7(d) WG_C6(d), WG_C4(d, 24)
#define WG_C8(d) WG_C7(d), WG_C4(d, 28)
/* d += A (descriptor: 64 rows x 16 k) x B (descriptor: 16 k x N tokens),
   N = 8 NT; d holds this warp's NT C fragments of 4. */
#define WG_MMA_DEF(NT, N, C)                                                                     \
  static inline __attribute__((always_inline)) void wg_mma_##NT(float *d, uint64_t da,          \
                                                                uint64_t db) {                   \
    __asm__ volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                  \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 {" WG_D##NT       \
                     "}, %[a], %[b], p, 1, 1, 0, 0;\n}"                                          \
                     : C(d)                                                                      \
                     : [a] "l"(da), [b] "l"(db)                                                  \
                     : "memory");                                                                \
  }
WG_MMA_DEF(1, 8, WG_C1)
WG_MMA_DEF(2, 16, WG_C2)
WG_MMA_DEF(3, 24, WG_C3)
WG_MMA_DEF(4, 32, WG_C4_)
WG_MMA_DEF(5, 40, WG_C5)
WG_MMA_DEF(6, 48, WG_C6)
WG_MMA_DEF(7, 56, WG_C7)
WG_MMA_DEF(8, 64, WG_C8)
#define WG_FENCE()                                                                               \
  do {                                                                                           \
    if (!(MOE_WG_PROBE & 64))                                                                    \
      __asm__ volatile("wgmma.fence.sync.aligned;" ::: "memory");                                \
  } while (0)
#define WG_COMMIT() __asm__ volatile("wgmma.commit_group.sync.aligned;" ::: "memory")
#define WG_WAIT(n) __asm__ volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(n) : "memory")
/* Shared memory written through the generic proxy (stores, cp.async)
   becomes visible to wgmma's reads (the async proxy). */
#define WG_PROXY_FENCE()                                                                         \
  do {                                                                                           \
    if (!(MOE_WG_PROBE & 8))                                                                     \
      __asm__ volatile("fence.proxy.async.shared::cta;" ::: "memory");                           \
  } while (0)
/* The 128 threads of warpgroup wg (named barriers 1 and up; the runtime
   uses 0). */
#define WG_BAR(wg)                                                                               \
  do {                                                                                           \
    if (!(MOE_WG_PROBE & 32))                                                                    \
      __asm__ volatile("bar.sync %0, 128;" ::"r"(1 + (wg)) : "memory");                          \
  } while (0)
/* A 16-byte copy, or (on = 0) 16 zero bytes without reading src: a
   predicate, not a branch, inside the wgmma pipeline. */
static inline void wg_copy(sm_ptr dst, const uint16_t *src, uint32_t on) {
  if (MOE_WG_PROBE & 16) /* probe: the plain form (copies past the last step read too) */
    __asm__ volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
  else if (MOE_WG_L2_256)
    __asm__ volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst),
                     "l"(src), "r"(on ? 16u : 0u)
                     : "memory");
  else
    __asm__ volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
                     "r"(on ? 16u : 0u)
                     : "memory");
}
#define WG_CP_COMMIT() __asm__ volatile("cp.async.commit_group;" ::: "memory")
#define WG_CP_WAIT(n) __asm__ volatile("cp.async.wait_group %0;" ::"n"(n) : "memory")
/* An accumulator copied where the code runs (not sunk by the optimiser
   into a following branch). */
static inline __attribute__((always_inline)) float wg_read(float v) {
  float r;
  __asm__ volatile("mov.b32 %0, %1;" : "=f"(r) : "f"(v));
  return r;
}
/* The wgmma's of one k step: MW A tiles at `a` (WG_A_BYTES apart) against
   the B step at `b` (k chunk stride lbo), accumulating into accp (this
   lane's MW x NT C fragments); the caller fences before and commits
   after a chunk's steps. */
#define WG_MMAS(NT, MW, accp, accs, a, b, lbo)                                                   \
  do {                                                                                           \
    UNROLL for (int q_ = 0; q_ < MW; q_++) UNROLL for (int h_ = 0; h_ < 2; h_++) if (           \
        !(MOE_WG_PROBE & 2)) wg_mma_##NT((accp) + q_ * NT * 4,                                   \
                                         wg_desc((a) + q_ * WG_A_BYTES + 2 * h_ * WG_PLANE,      \
                                                 WG_PLANE),                                      \
                                         wg_desc((b) + 2 * h_ * (lbo), (lbo)));                  \
  } while (0)
#else
#define WG_FENCE() ((void)0)
#define WG_COMMIT() ((void)0)
#define WG_WAIT(n) ((void)0)
#define WG_PROXY_FENCE() ((void)0)
#define WG_BAR(wg) ((void)0)
static inline void wg_copy(sm_ptr dst, const uint16_t *src, uint32_t on) {
  if (on)
    memcpy(dst, src, 16);
  else
    memset(dst, 0, 16);
}
#define WG_CP_COMMIT() ((void)0)
#define WG_CP_WAIT(n) ((void)0)
#define wg_read(v) (v)
/* The host emulates a warp's share of the warpgroup product: its 16 rows
   (wi) of each A tile against B, both read through the descriptors'
   addressing (k chunk c at c * lbo, row n at 16 n). acc: lane-strided. */
static void wg_mmas_host(uint32_t nt, uint32_t mw, float *acc, uint32_t accs, const uint8_t *a,
                         uint32_t wi, const uint8_t *b, uint32_t lbo) {
  for (uint32_t q = 0; q < mw; q++)
    for (uint32_t L = 0; L < 32; L++) {
      uint32_t g = L >> 2, t = L & 3;
      float *d = acc + L * accs + q * nt * 4;
      for (uint32_t j = 0; j < nt; j++)
        for (uint32_t i = 0; i < 4; i++) {
          uint32_t m = 16 * wi + g + 8 * (i >> 1), n = 8 * j + 2 * t + (i & 1);
          float s = 0.0f;
          for (uint32_t k = 0; k < 32; k++) {
            uint16_t va, vb;
            memcpy(&va, a + q * WG_A_BYTES + WG_TILE_OFF(m, k / 8) + (k % 8) * 2, 2);
            memcpy(&vb, b + (k / 8) * lbo + n * 16 + (k % 8) * 2, 2);
            s += bf16_to_f32(va) * bf16_to_f32(vb);
          }
          d[4 * j + i] += s;
        }
    }
}
#define WG_MMAS(NT, MW, accp, accs, a, b, lbo)                                                   \
  wg_mmas_host(NT, MW, (accp), (accs), (a), wi, (b), (lbo))
#endif

/* This warp's copies of k step ks of its m-tiles into the stage's A tiles
   at `a`: lane (g, t) copies the 16-byte pieces the register rings load
   (rows g and g + 8, k chunk t) to rows 16 wi + g, 16 wi + g + 8. MTQ:
   block q_'s m-tile (an expression of q_), PTR(mt, ks, L): the lane's
   source, HALF: the second row's offset, on: copy (else zero-fill). */
#define WG_COPY_A(MW, a, ks, MTQ, PTR, HALF, on)                                                 \
  do {                                                                                           \
    FOR_LANES(L, Li) UNROLL for (int q_ = 0; q_ < MW; q_++) {                                    \
      (void)Li;                                                                                  \
      const uint16_t *p_ = PTR(MTQ, ks, L);                                                      \
      sm_ptr d_ = (a) + q_ * WG_A_BYTES + WG_TILE_OFF(16 * wi + (L >> 2), L & 3);                \
      wg_copy(d_, p_, on);                                                                       \
      wg_copy(d_ + 8 * 16, p_ + (HALF), on);                                                     \
    }                                                                                            \
  } while (0)

/* Timing probe MOE_WG_PROBE bit 128 (wrong results): each warp's packed
   1 KB block of a k step comes in by one cp.async.bulk from lane 0 (in
   the packed order, not the core-matrix layout), completion on an
   mbarrier per stage (the last stage's space holds them) instead of
   cp.async, its wait, the proxy fence and the named barrier; with bit
   256 too, gate_up copies no token rows and its stages hold A only (twice
   as many in the same space). bench/moe/HISTORY.md, run X calls 5-7. */
#define WG_BULK_PROBE ((MOE_WG_PROBE & 128) != 0)
#if defined(__NVPTX__)
static inline void wgb_init(sm_ptr bar, uint32_t n) {
  __asm__ volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(n) : "memory");
  bk_init_fence();
}
static inline void wgb_expect(uint32_t on, sm_ptr bar, uint32_t bytes) {
  __asm__ volatile("{\n.reg .pred p;\nsetp.ne.u32 p, %2, 0;\n"
                   "@p mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n}" ::"r"(bar),
                   "r"(bytes), "r"(on)
                   : "memory");
}
static inline void wgb_copy(uint32_t on, sm_ptr dst, const uint16_t *src, uint32_t bytes,
                            sm_ptr bar) {
  __asm__ volatile("{\n.reg .pred p;\nsetp.ne.u32 p, %4, 0;\n@p cp.async.bulk.shared::cluster."
                   "global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n}" ::"r"(dst),
                   "l"(src), "r"(bytes), "r"(bar), "r"(on)
                   : "memory");
}
#else
static inline void wgb_init(sm_ptr bar, uint32_t n) { (void)bar, (void)n; }
static inline void wgb_expect(uint32_t on, sm_ptr bar, uint32_t bytes) {
  (void)on, (void)bar, (void)bytes;
}
static inline void wgb_copy(uint32_t on, sm_ptr dst, const uint16_t *src, uint32_t bytes,
                            sm_ptr bar) {
  (void)bar;
  if (on)
    memcpy(dst, src, bytes);
}
#endif
/* The probe's mbarriers: D of them after the stages, 4 arrivals (the
   warps' lane 0) a phase; initialised before and invalidated after the
   walk by the warpgroup's first thread. */
#define WGB_OPEN(bars, D)                                                                        \
  do {                                                                                           \
    if (WG_BULK_PROBE) {                                                                         \
      if (lead_ && wi == 0)                                                                      \
        for (uint32_t j_ = 0; j_ < (D); j_++)                                                    \
          wgb_init((bars) + 8 * j_, 4);                                                          \
      WG_BAR(wg);                                                                                \
    }                                                                                            \
  } while (0)
#define WGB_CLOSE(bars, D)                                                                       \
  do {                                                                                           \
    if (WG_BULK_PROBE) {                                                                         \
      WG_BAR(wg);                                                                                \
      if (lead_ && wi == 0)                                                                      \
        for (uint32_t j_ = 0; j_ < (D); j_++)                                                    \
          bk_inval((bars) + 8 * j_);                                                             \
    }                                                                                            \
  } while (0)

/* -DMOE_WG_REG=1: the copies reach the stages through registers instead
   of cp.async: each 16-byte piece is loaded MOE_WG_RR steps ahead (the
   mma.sync paths' loads: ld_stream for weights, ld_cached for token rows)
   and stored into its stage (st.shared) in its step, before the
   warpgroup's barrier. The wgmma of a step is waited for one step later,
   so a stage is rewritten D >= 2 steps after its last reader. The host
   copies at the store (WR_ST's src); its loads are no-ops. */
#ifndef MOE_WG_REG
#define MOE_WG_REG 0
#endif
#ifndef MOE_WG_RR /* steps of the register ring */
#define MOE_WG_RR 4
#endif
#if defined(__NVPTX__)
static inline void wg_sts(sm_ptr dst, u32x4 v) {
  __asm__ volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(dst), "r"(v[0]), "r"(v[1]),
                   "r"(v[2]), "r"(v[3])
                   : "memory");
}
/* volatile keeps the PTX order (R steps ahead); ptxas still moves most
   of a block's loads to its last steps (bench/moe/HISTORY.md, run X) */
#define WR_LD(reg, src, ld)                                                                      \
  do {                                                                                           \
    uint32_t a_, b_, c_, d_;                                                                     \
    __asm__ volatile("ld.global.nc" WR_Q_##ld ".v4.u32 {%0, %1, %2, %3}, [%4];"                  \
                     : "=r"(a_), "=r"(b_), "=r"(c_), "=r"(d_)                                    \
                     : "l"(src));                                                                \
    (reg) = (u32x4){a_, b_, c_, d_};                                                             \
  } while (0)
#define WR_Q_ld_stream ".L1::no_allocate.L2::256B"
#define WR_Q_ld_cached ""
#define WR_ST(dst, reg, src) wg_sts((dst), (reg))
#else
#define WR_LD(reg, src, ld) ((void)0)
#define WR_ST(dst, reg, src) memcpy((dst), (src), 16)
#endif
/* This warp's A pieces of k step ks of block group mg (MW blocks): load
   into ra[..][slot], or store from there into the stage at `a`. */
#define WR_A(MW, slot, a, ks, MTQ, PTR, HALF, STORE)                                             \
  do {                                                                                           \
    FOR_LANES(L, Li) UNROLL for (int q_ = 0; q_ < MW; q_++) {                                    \
      const uint16_t *p_ = PTR(MTQ, ks, L);                                                      \
      (void)Li, (void)p_;                                                                        \
      if (STORE) {                                                                               \
        sm_ptr d_ = (a) + q_ * WG_A_BYTES + WG_TILE_OFF(16 * wi + (L >> 2), L & 3);              \
        WR_ST(d_, ra[Li][slot][q_][0], p_);                                                      \
        WR_ST(d_ + 8 * 16, ra[Li][slot][q_][1], p_ + (HALF));                                    \
      } else {                                                                                   \
        WR_LD(ra[Li][slot][q_][0], p_, ld_stream);                                               \
        WR_LD(ra[Li][slot][q_][1], p_ + (HALF), ld_stream);                                      \
      }                                                                                          \
    }                                                                                            \
  } while (0)
#endif /* WGMMA */

#endif
