/* Part of moe_fused_handlers.c (included by it after its common
   definitions: u32x4, LANES, FOR_LANES, MOE_TT, MOE_GU_STAGE, PACKED):
   shared memory by 32-bit address, and the opt-in bulk-copied weight ring
   (-DMOE_BULK=KB; examples/moe/README.md, "Bulk-copied weights"). Builds
   without MOE_BULK get only sm_ptr / sm_of / sm_read and the no-op ring
   hooks. */
#ifndef MOE_BULK_RING_H
#define MOE_BULK_RING_H

/* Shared memory by its 32-bit shared-window address on the GPU (one
   register, not a 64-bit generic pointer per access); a plain pointer on
   the host. */
#if defined(__NVPTX__)
#define SHARED __attribute__((address_space(3)))
typedef uint32_t sm_ptr;
__attribute__((unused)) static inline sm_ptr sm_of(uint8_t *p) {
  return (uint32_t)(uint64_t)(SHARED void *)p;
}
__attribute__((unused)) static inline u32x4 sm_read(sm_ptr p) {
  uint32_t a_, b_, c_, d_;
  __asm__ volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(a_), "=r"(b_), "=r"(c_), "=r"(d_)
                   : "r"(p)
                   : "memory");
  return (u32x4){a_, b_, c_, d_};
}
#else
typedef uint8_t *sm_ptr;
__attribute__((unused)) static inline sm_ptr sm_of(uint8_t *p) { return p; }
__attribute__((unused)) static inline u32x4 sm_read(sm_ptr p) {
  u32x4 v;
  memcpy(&v, p, sizeof v);
  return v;
}
#endif

/* -DMOE_BULK=KB (packed weights only): both GEMMs stream their weights
   through a ring of KB KiB per warp in the handler workspace, filled by
   bulk copies (cp.async.bulk, completion on an mbarrier per stage)
   instead of 16-byte loads into registers. The bytes in flight then take
   no registers and no LSU load slots, and a copy is a whole run of
   packed blocks: chunk c of a warp's flat step sequence is CH k steps of
   its MW m-tiles (MW copies of CH contiguous KB; CH divides the k steps,
   so a chunk never crosses a group), held in stage c % NB, NB = the
   stages that fit the ring. Lane 0 issues; every lane waits on the
   stage's mbarrier before its chunk's first step, reads its fragments
   (16 bytes at 16 L of each 512-byte half: conflict-free) into the
   register ring DW steps ahead, and after the mma's of the chunk's last
   step the warp syncs and lane 0 refills the stage with chunk c + NB.
   Declare df.workspace_bytes = warps x BK_WARP_BYTES on both handlers
   (bench/moe/make_moe_carry.sh MOE_BULK=KB); without that workspace the
   same loops load the weights into registers (correct, shallow). */
#ifdef MOE_BULK
#if !HSHARD_EVEN
#error "MOE_BULK needs a cluster size that divides hidden into whole m-tiles"
#endif
#ifndef MOE_PACKED
#error "MOE_BULK copies packed weight blocks: build with -DMOE_PACKED"
#endif
#if defined(MOE_GU_RING) || defined(MOE_GU_RING_FINE) || defined(MOE_GU_STAGED_RING)
#error "MOE_BULK builds take their gate_up rings from MOE_GU_BULK, MOE_GU_BULK_FINE, MOE_GU_STAGED_BULK"
#endif
#define BULK 1
#define BK_RING_BYTES (MOE_BULK * 1024)
#else
#define BULK 0
#define BK_RING_BYTES 16384
#endif
/* Staged builds keep their token ring at the workspace's start; the bulk
   rings follow it. */
#ifdef MOE_GU_STAGE
#define BK_OFFSET (MOE_GU_STAGE * MOE_TT * 64)
#else
#define BK_OFFSET 0
#endif
/* The smallest n-tile count whose gate_up streams through the bulk ring
   (fewer run the register ring: their token rows stay in L1, which the
   rings' shared memory would take; the staged walk too); down uses the
   ring at every n-tile count with -DMOE_BULK_DOWN. */
#ifndef MOE_BULK_MIN_NT
#define MOE_BULK_MIN_NT 1
#endif
/* Whether gate_up's NT-n-tile variants use the ring. */
#define BK_FOR(NT) (BULK && (NT) >= MOE_BULK_MIN_NT)
#ifdef MOE_BULK_DOWN
#define DN_BULK_ON BULK
#else
#define DN_BULK_ON 0
#endif
/* Steps a ring loop unrolls: both rings' slots are constants in it. */
#define RING_U(DW, DX) ((DW) > (DX) ? (DW) : (DX))
#define BK_MAX_STAGES 16 /* mbarriers after each warp's ring */
#define BK_WARP_BYTES (BK_RING_BYTES + 8 * BK_MAX_STAGES)
/* Stages of MW m-tiles x CH steps in the ring; BK_NB: at least 1 for the
   index arithmetic of variants the static asserts let run without it. */
#define BK_NB(MW, CH) (BK_STAGES(MW, CH) ? BK_STAGES(MW, CH) : 1)
#define BK_STAGES(MW, CH)                                                                        \
  (BK_RING_BYTES / ((MW) * (CH) * 1024) < BK_MAX_STAGES ? BK_RING_BYTES / ((MW) * (CH) * 1024)   \
                                                         : BK_MAX_STAGES)

/* mbarrier and bulk-copy helpers (also the wgmma probes', moe_wgmma.h) */
#if defined(__NVPTX__)
static inline void warp_sync(void) { __asm__ volatile("bar.warp.sync -1;" ::: "memory"); }
static inline void bk_init(sm_ptr bar) {
  __asm__ volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar) : "memory");
}
/* The inits visible to the copy engine's complete_tx. */
static inline void bk_init_fence(void) {
  __asm__ volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
static inline void bk_inval(sm_ptr bar) {
  __asm__ volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
static inline void bk_expect(sm_ptr bar, uint32_t bytes) {
  __asm__ volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes)
                   : "memory");
}
static inline void bk_copy(sm_ptr dst, const uint16_t *src, uint32_t bytes, sm_ptr bar) {
  __asm__ volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], "
                   "%2, [%3];" ::"r"(dst),
                   "l"(src), "r"(bytes), "r"(bar)
                   : "memory");
}
static inline void bk_wait(sm_ptr bar, uint32_t parity) {
  uint32_t done;
  do
    __asm__ volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
  while (!done);
}
#else
/* The host copies at once: the ring's layout and indexing are the GPU's,
   its synchronisation is not exercised. */
static inline void warp_sync(void) {}
static inline void bk_init(sm_ptr bar) { (void)bar; }
static inline void bk_init_fence(void) {}
static inline void bk_inval(sm_ptr bar) { (void)bar; }
static inline void bk_expect(sm_ptr bar, uint32_t bytes) { (void)bar, (void)bytes; }
static inline void bk_copy(sm_ptr dst, const uint16_t *src, uint32_t bytes, sm_ptr bar) {
  (void)bar;
  memcpy(dst, src, bytes);
}
static inline void bk_wait(sm_ptr bar, uint32_t parity) { (void)bar, (void)parity; }
#endif

#if BULK
/* A warp's weight stream: `w` the shard's packed blocks (block b of
   m-tile m at k step k: b = m KSTEPS + k, 512 elements), `on` whether the
   ring is there. */
typedef struct bk_stream {
  sm_ptr ring, bars;
  const uint16_t *w;
  uint32_t nchunks, groups, on, leader;
} bk_stream;

/* Chunk c -> its stage: MW copies of CH blocks (m-tiles g MW + q of group
   g = w + nw (c CH / KSTEPS), the last group again past the last). */
static inline __attribute__((always_inline)) void bk_issue(const bk_stream *b, uint32_t c,
                                                          uint32_t ksteps, uint32_t mw,
                                                          uint32_t ch, uint32_t nb, uint32_t w,
                                                          uint32_t nw) {
  if (!b->leader || c >= b->nchunks)
    return;
  uint32_t st = c % nb, s = c * ch, g = w + nw * (s / ksteps);
  g = g < b->groups ? g : b->groups - 1;
  sm_ptr bar = b->bars + 8 * st;
  bk_expect(bar, mw * ch * 1024);
  for (uint32_t q = 0; q < mw; q++)
    bk_copy(b->ring + (st * mw + q) * ch * 1024,
            b->w + ((uint64_t)(g * mw + q) * ksteps + s % ksteps) * 512, ch * 1024, bar);
}

/* The warp's stream over `nsteps` steps: the ring at `mem` (NULL: off),
   the barriers initialised, the first NB chunks issued. */
static inline __attribute__((always_inline)) bk_stream
bk_open(uint8_t *mem, const uint16_t *w, uint32_t nsteps, uint32_t groups, uint32_t ksteps,
        uint32_t mw, uint32_t ch, uint32_t nb, uint32_t warp, uint32_t nw, uint32_t leader) {
  bk_stream b = {0, 0, w, nsteps / ch, groups, mem != 0 && BULK, leader};
  if (!b.on)
    return b;
  b.ring = sm_of(mem);
  b.bars = b.ring + BK_RING_BYTES;
  if (leader)
    for (uint32_t i = 0; i < nb; i++)
      bk_init(b.bars + 8 * i);
  bk_init_fence();
  warp_sync();
  for (uint32_t c = 0; c < nb; c++)
    bk_issue(&b, c, ksteps, mw, ch, nb, warp, nw);
  return b;
}

/* Every chunk was consumed (no copy in flight): the barriers are freed
   for the workspace's next user. */
static inline void bk_close(const bk_stream *b, uint32_t nb) {
  if (!b->on)
    return;
  warp_sync();
  if (b->leader)
    for (uint32_t i = 0; i < nb; i++)
      bk_inval(b->bars + 8 * i);
}

/* Before reading step s: its chunk's first step waits for the stage. */
#define BK_WAIT_STEP(bk, s, CH, NB)                                                              \
  do {                                                                                           \
    if ((s) % (CH) == 0)                                                                         \
      bk_wait((bk).bars + 8 * ((s) / (CH) % (NB)), (s) / (CH) / (NB) & 1u);                      \
  } while (0)
/* Lane L's 16 bytes of half h of m-tile q's block at step s. */
#define BK_AT(bk, s, q, h, L, MW, CH, NB)                                                        \
  ((bk).ring + ((((s) / (CH) % (NB)) * (MW) + (q)) * (CH) + (s) % (CH)) * 1024 + (h) * 512 +     \
   16 * (L))
/* In a ring loop: every lane's fragments of step sb (after its chunk's
   wait) into LV, an lvalue of Li, q_ (m-tile of MW) and h_ (half). */
#define BK_READ_STEP(sb, MW, LV)                                                                 \
  do {                                                                                           \
    BK_WAIT_STEP(bk, sb, CH_, NB_);                                                              \
    FOR_LANES(L, Li) UNROLL for (int q_ = 0; q_ < (MW); q_++)                                    \
        UNROLL for (int h_ = 0; h_ < 2; h_++)                                                    \
            LV = sm_read(BK_AT(bk, sb, q_, h_, L, MW, CH_, NB_));                                \
  } while (0)
/* Host: each virtual warp's ring on its own stack; GPU: warp w's part of
   the workspace, when the kernel has one large enough. */
#if defined(__NVPTX__)
#define BK_MEM(ws, w) ((ws) ? (ws) + (w) * BK_WARP_BYTES : (uint8_t *)0)
#define BK_HOST_RING
#else
#define BK_MEM(ws, w) ((ws) ? bk_host_ : (uint8_t *)0)
#define BK_HOST_RING _Alignas(16) uint8_t bk_host_[BK_WARP_BYTES];
#endif
/* In a ring loop (names CH_, NB_, w, nw, lane_ in scope): open the
   warp's stream `bk`; after the mma's of step s, a finished chunk's stage
   takes chunk + NB; close. Builds without MOE_BULK compile none of it. */
/* A warp without steps (fewer groups than warps) leaves at once: its
   first loads would wait for a chunk nobody issues. */
#define BK_OPEN(ws, wts, nsteps, groups, KSTEPS, MW)                                             \
  if (!(nsteps))                                                                                 \
    return;                                                                                      \
  BK_HOST_RING                                                                                   \
  bk_stream bk =                                                                                 \
      bk_open(BK_MEM(ws, w), wts, nsteps, groups, KSTEPS, MW, CH_, NB_, w, nw, lane_ == 0)
#define BK_RELEASE(s, KSTEPS, MW)                                                                \
  do {                                                                                           \
    if (bk.on && ((s) + 1) % CH_ == 0) {                                                         \
      warp_sync();                                                                               \
      bk_issue(&bk, (s) / CH_ + NB_, KSTEPS, MW, CH_, NB_, w, nw);                               \
    }                                                                                            \
  } while (0)
#define BK_CLOSE() bk_close(&bk, NB_)
#else /* !BULK */
#define BK_OPEN(ws, wts, nsteps, groups, KSTEPS, MW) (void)(ws)
#define BK_RELEASE(s, KSTEPS, MW) ((void)0)
#define BK_CLOSE() ((void)0)
#endif

#endif /* MOE_BULK_RING_H */
