/* Part of moe_fused_handlers.c (included by it after its common
   definitions: u32x4, LANES, FOR_LANES, MOE_TT, sm_ptr): the opt-in
   warpgroup GEMMs (-DMOE_WGMMA, sm_90a wgmma.mma_async; examples/moe/
   README.md, "Warpgroup GEMMs").

   mma.sync issues one 16x8x16 product per instruction, so a task of 8
   n-tiles costs a warp 48 of them per k step and its loads wait behind
   them. wgmma multiplies a warpgroup's 64 weight rows by all N = 8 NT
   token rows of a 16-wide k slice in one asynchronous instruction: the A
   operand (weights) stays in registers, fed by the same register ring
   and the same 16-byte loads as before, the B operand (token rows, or
   the gathered intermediate) is read by the tensor cores from shared
   memory through a matrix descriptor. Warp i of a warpgroup supplies A
   rows 16 i .. 16 i + 15 (its m-tile); its accumulators are the mma.sync
   C fragments of those rows for each n-tile, so the epilogues do not
   change.

   What it needs from the layouts:
   * B in the canonical no-swizzle K-major layout: 8x8 "core matrices"
     of 8 token rows x 16 bytes, contiguous (128 bytes). The staged token
     ring and the UpShard slots become [4 k chunks of 8][rows][8 k] per
     32-wide k step (the chunk stride is the descriptor's leading byte
     offset: 64 rows x 16 bytes in the ring, MOE_TT x 16 in an UpShard;
     8-row groups are 128 bytes apart). No alignment beyond 16 bytes,
     so the gather's byte copies between slots keep it.
   * A in natural k order: the register ring holds what each lane loads,
     k 8t .. 8t + 7 of rows g and g + 8 (the mma.sync paths' permuted k
     order), while wgmma's A fragment wants k 2t, 2t + 1 / 2t + 8, 2t + 9
     of each 16-wide slice. Those words are spread over the 4 lanes of a
     quad: a 4x4 transpose of 32-bit words among them (two butterfly
     exchanges of two words each) turns one into the other. */
#ifndef MOE_WGMMA_H
#define MOE_WGMMA_H

#ifdef MOE_WGMMA
#define WGMMA 1
#else
#define WGMMA 0
#endif

/* Byte offset of (token row n, 8-k chunk c) inside one k step of the
   staged ring (GS_COPY_CI: of copy ci, row ci / 4, chunk ci % 4); element
   offsets of token row n and of 8-k chunk c inside a 32-column chunk of an
   UpShard (added to a pointer one after the other, as the mma.sync path
   always did); the UpShard element of token n, intermediate column m of
   the shard. */
#if WGMMA
#define GS_COPY_OFF(n, c) ((c) * (64 * 16) + (n) * 16)
#define GS_COPY_CI(ci) GS_COPY_OFF((ci) >> 2, (ci) & 3)
#define UP_ROW_OFF(n) ((n) * 8)
#define UP_K_OFF(c) ((c) * (MOE_TT * 8))
#define UP_INDEX(n, m) ((m) / 32 * (MOE_TT * 32) + UP_K_OFF((m) % 32 / 8) + UP_ROW_OFF(n) + (m) % 8)
#else
#define GS_COPY_OFF(n, c) (((n) * 4 + (c)) * 16)
#define GS_COPY_CI(ci) ((ci) * 16)
#define UP_ROW_OFF(n) ((n) * 32)
#define UP_K_OFF(c) (8 * (c))
#define UP_INDEX(n, m) (((m) / 32 * MOE_TT + (n)) * 32 + (m) % 32)
#endif

#if WGMMA
/* The CTA's warps make whole warpgroups (else the mma.sync paths run). */
static inline int wg_whole(const df_ctx *ctx) {
#if defined(__NVPTX__)
  return df_ctx_threads(ctx) % 128 == 0;
#else
  (void)ctx;
  return MOE_NWARPS % 4 == 0;
#endif
}

#define WG_SBO 128u            /* 8-row groups of a core-matrix column */
#define WG_RING_LBO (64u * 16) /* k chunks of a staged step */
#define WG_UP_LBO (MOE_TT * 16u)

#if defined(__NVPTX__)
static inline __attribute__((always_inline)) uint32_t wg_shfl_xor(uint32_t v, uint32_t m) {
  uint32_t r;
  __asm__ volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=r"(r) : "r"(v), "r"(m));
  return r;
}
/* Lane t of a quad gets y[j] = lane j's x[t]. Stage 1 swaps the 2x2
   blocks across lanes t ^ 2 (words 2, 3 of the low lanes <-> words 0, 1
   of the high ones), stage 2 transposes each block across lanes t ^ 1. */
static inline __attribute__((always_inline)) u32x4 wg_quad_transpose(u32x4 x, uint32_t t) {
  uint32_t hi = t & 2, lo = t & 1;
  uint32_t s0 = wg_shfl_xor(hi ? x[0] : x[2], 2), s1 = wg_shfl_xor(hi ? x[1] : x[3], 2);
  x[0] = hi ? s0 : x[0];
  x[1] = hi ? s1 : x[1];
  x[2] = hi ? x[2] : s0;
  x[3] = hi ? x[3] : s1;
  s0 = wg_shfl_xor(lo ? x[0] : x[1], 1);
  s1 = wg_shfl_xor(lo ? x[2] : x[3], 1);
  x[0] = lo ? s0 : x[0];
  x[2] = lo ? s1 : x[2];
  x[1] = lo ? x[1] : s0;
  x[3] = lo ? x[3] : s1;
  return x;
}

/* Matrix descriptor of a no-swizzle K-major B operand at shared address
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
/* d += A (4 registers: this warp's 16 rows x 16 k) x B (descriptor,
   16 k x N tokens), N = 8 NT; d holds NT C fragments of 4. */
#define WG_MMA_DEF(NT, N, C)                                                                     \
  static inline __attribute__((always_inline)) void wg_mma_##NT(float *d, const uint32_t *r,    \
                                                                uint64_t desc) {                 \
    __asm__ volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                  \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 {" WG_D##NT       \
                     "}, {%[a0], %[a1], %[a2], %[a3]}, %[b], p, 1, 1, 0;\n}"                     \
                     : C(d)                                                                      \
                     : [a0] "r"(r[0]), [a1] "r"(r[1]), [a2] "r"(r[2]), [a3] "r"(r[3]),           \
                       [b] "l"(desc)                                                             \
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
#define WG_FENCE() __asm__ volatile("wgmma.fence.sync.aligned;" ::: "memory")
#define WG_COMMIT_WAIT()                                                                         \
  __asm__ volatile("wgmma.commit_group.sync.aligned;\n\twgmma.wait_group.sync.aligned 0;" :::    \
                       "memory")
/* Shared memory written through the generic proxy (stores, cp.async)
   becomes visible to wgmma's reads (the async proxy). */
#define WG_PROXY_FENCE() __asm__ volatile("fence.proxy.async.shared::cta;" ::: "memory")

/* The A registers of k slice `half` (0, 1) of a ring slot a = {row g,
   row g + 8}: after the transpose lane t holds words 4j + t (k 8j + 2t,
   +1) of its rows in y[j]. */
static inline __attribute__((always_inline)) void wg_frag(const u32x4 *a, uint32_t t,
                                                          uint32_t r[2][4]) {
  u32x4 y0 = wg_quad_transpose(a[0], t), y1 = wg_quad_transpose(a[1], t);
  UNROLL for (int h = 0; h < 2; h++) {
    r[h][0] = y0[2 * h];
    r[h][1] = y1[2 * h];
    r[h][2] = y0[2 * h + 1];
    r[h][3] = y1[2 * h + 1];
  }
}
/* One 32-wide k step for MW m-tiles of this warp against the B step at
   shared address b (k chunk stride lbo). accp: the lane's MW x NT C
   fragments (accs floats per lane), ap: its ring slot, MW pairs of 16-byte
   loads (as u32x4 per lane); the strides are the host's. The wait leaves
   the A registers and the B bytes free. */
#define WG_STEP(NT, MW, accp, accs, ap, as, b, lbo)                                              \
  do {                                                                                           \
    uint32_t r_[MW][2][4];                                                                       \
    UNROLL for (int q_ = 0; q_ < MW; q_++) wg_frag((ap) + 2 * q_, lane_ & 3, r_[q_]);            \
    WG_FENCE();                                                                                  \
    UNROLL for (int q_ = 0; q_ < MW; q_++) UNROLL for (int h_ = 0; h_ < 2; h_++)                 \
        wg_mma_##NT((accp) + q_ * NT * 4, r_[q_][h_], wg_desc((b) + 2 * h_ * (lbo), (lbo)));     \
    WG_COMMIT_WAIT();                                                                            \
  } while (0)
#else
#define WG_FENCE() ((void)0)
#define WG_PROXY_FENCE() ((void)0)
/* The host emulates a warp's share of the warpgroup product: its 16 rows
   from the transposed registers in wgmma's A fragment layout, B read
   through the descriptor's addressing (k chunk c at c * lbo, row n at
   16 n). acc: lane-strided (as floats), a: lane-strided (as u32x4). */
static void wg_step_host(uint32_t nt, uint32_t mw, float *acc, uint32_t accs, const u32x4 *a,
                         uint32_t as, const uint8_t *b, uint32_t lbo) {
  for (uint32_t q = 0; q < mw; q++) {
    u32x4 y[32][2];
    for (uint32_t L = 0; L < 32; L++)
      for (uint32_t i = 0; i < 2; i++)
        for (uint32_t j = 0; j < 4; j++)
          y[L][i][j] = a[((L & ~3u) | j) * as + 2 * q + i][L & 3];
    for (uint32_t h = 0; h < 2; h++) {
      float A[16][16];
      for (uint32_t L = 0; L < 32; L++) {
        uint32_t g = L >> 2, t = L & 3;
        uint32_t r[4] = {y[L][0][2 * h], y[L][1][2 * h], y[L][0][2 * h + 1], y[L][1][2 * h + 1]};
        uint32_t rows[4] = {g, g + 8, g, g + 8}, cols[4] = {2 * t, 2 * t, 2 * t + 8, 2 * t + 8};
        for (int i = 0; i < 4; i++) {
          A[rows[i]][cols[i]] = bf16_to_f32((uint16_t)r[i]);
          A[rows[i]][cols[i] + 1] = bf16_to_f32((uint16_t)(r[i] >> 16));
        }
      }
      const uint8_t *bh = b + 2 * h * lbo;
      for (uint32_t L = 0; L < 32; L++) {
        uint32_t g = L >> 2, t = L & 3;
        float *d = acc + L * accs + q * nt * 4;
        for (uint32_t j = 0; j < nt; j++)
          for (uint32_t i = 0; i < 4; i++) {
            uint32_t m = g + 8 * (i >> 1), n = 8 * j + 2 * t + (i & 1);
            float s = 0.0f;
            for (uint32_t k = 0; k < 16; k++) {
              uint16_t v;
              memcpy(&v, bh + (k / 8) * lbo + n * 16 + (k % 8) * 2, 2);
              s += A[m][k] * bf16_to_f32(v);
            }
            d[4 * j + i] += s;
          }
      }
    }
  }
}
#define WG_STEP(NT, MW, accp, accs, ap, as, b, lbo)                                              \
  wg_step_host(NT, MW, (accp), (accs), (ap), (as), (b), (lbo))
#endif
#endif /* WGMMA */

#endif
