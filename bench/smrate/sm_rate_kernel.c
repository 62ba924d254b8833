/* Device side of the per-SM read-rate probe (bench/smrate/README.md):
   every CTA streams its share of a K/V-shaped pair of tensors with
   16-byte non-caching loads and records the SM it ran on and when it
   started and ended. Built for nvptx64 by make_carry.sh.

   Layout as the GQA bench: K, V f16[ROWS][8][128], one 256-byte row per
   (row, head). Work is a flat range of units u in [0, 8 * ROWS): unit u is
   head u / ROWS, row u % ROWS (a head's rows 2 KB apart, as a GQA partial
   reads them; sm_rate_stats.h), or with mode bit 1 in memory order (a
   CTA's range contiguous). A CTA's range comes from table[idx] = {begin,
   count}, where idx is its block index (mode bit 0 clear) or its %smid
   (set): the plan of an SM-indexed launch can give a slow SM less.
   Each CTA records its SM, its start and end (%globaltimer) and the bytes
   it read; the end is stamped after the loads were consumed. */
#include <stdint.h>

#include "sm_rate_device.h"
#include "sm_rate_stats.h"

#define ROWS SMR_ROWS
#define HEADS SMR_HEADS
#define CHUNKS 16u /* 16-byte chunks per 256-byte row */

typedef uint32_t v4u __attribute__((ext_vector_type(4)));

static inline v4u ldg(const v4u *p) {
  v4u r;
  __asm__ volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                   : "l"(p));
  return r;
}
/* Unit u's 16-byte chunk c: head-major units (u = head ROWS + row, a
   head's rows 2 KB apart) or, with ROW_MAJOR, units in memory order
   (u = row HEADS + head: a CTA's range is contiguous). */
static inline const v4u *chunk(const v4u *base, uint32_t u, uint32_t c, uint32_t row_major) {
  if (row_major)
    return base + (uint64_t)u * CHUNKS + c;
  uint32_t h = u / ROWS, row = u % ROWS;
  return base + ((uint64_t)row * HEADS + h) * CHUNKS + c;
}

/* DEPTH chunk pairs (K and V) per thread in flight. */
#define SM_RATE_KERNEL(name, DEPTH)                                                                \
  __attribute__((nvptx_kernel)) void name(const v4u *K, const v4u *V, const uint32_t *table,      \
                                          uint32_t mode, uint64_t *rec, uint32_t *sink,             \
                                          uint32_t spin) {                                         \
    const uint32_t tid = __nvvm_read_ptx_sreg_tid_x(), nt = __nvvm_read_ptx_sreg_ntid_x();         \
    const uint32_t sm = smr_smid(), idx = mode & 1u ? sm : __nvvm_read_ptx_sreg_ctaid_x();                  \
    const uint32_t begin = table[2 * idx], count = table[2 * idx + 1];                             \
    __syncthreads();                                                                               \
    const uint64_t t0 = smr_now();                                                                     \
    const uint32_t total = count * CHUNKS; /* this CTA's chunks */                                 \
    uint32_t acc = 0;                                                                              \
    for (uint32_t f = tid; f < total; f += nt * DEPTH) {                                           \
      v4u k[DEPTH], v[DEPTH];                                                                      \
      _Pragma("unroll") for (uint32_t d = 0; d < DEPTH; d++) {                                     \
        uint32_t g = f + d * nt;                                                                   \
        g = g < total ? g : total - 1;                                                             \
        k[d] = ldg(chunk(K, begin + g / CHUNKS, g % CHUNKS, mode >> 1));                                      \
        v[d] = ldg(chunk(V, begin + g / CHUNKS, g % CHUNKS, mode >> 1));                                      \
      }                                                                                            \
      _Pragma("unroll") for (uint32_t d = 0; d < DEPTH; d++) acc ^= k[d].x ^ v[d].w;               \
    }                                                                                              \
    /* the test reads acc, so each thread waits here for its last loads */                     \
    if (acc == 0x9e3779b9u + spin)                                                                 \
      sink[0] = acc;                                                                               \
    smr_record(rec, sm, t0, (uint64_t)count * CHUNKS * 32u);                                       \
  }

SM_RATE_KERNEL(sm_rate_d4, 4)
SM_RATE_KERNEL(sm_rate_d8, 8)
SM_RATE_KERNEL(sm_rate_d16, 16)

/* The loop of examples/attention_gqa's gqa_partial without its math: warp
   w takes 16-key steps w, w + warps, ... of the CTA's range, the next
   step's loads issued before this one's are consumed (two register
   buffers), then SPIN clock cycles per step in place of the step's
   tensor-core work. ROWS_MAP 0: the handler's lane mapping (load_step:
   a load instruction covers 64 bytes of each of 8 K rows, 128 bytes of
   each of 4 V rows); 1: 16 lanes per 256-byte row (two whole rows per
   instruction), the same bytes per lane and step. */
static inline void step_loads(uint32_t *k, uint32_t *v, const v4u *K, const v4u *V, uint32_t pos,
                              uint32_t last, uint32_t lane, int rows_map, uint32_t rm) {
  const uint32_t g = lane >> 2, t = lane & 3;
  if (rows_map) {
    _Pragma("unroll") for (int i = 0; i < 8; i++) {
      uint32_t key = pos + 2 * i + (lane >> 4);
      key = key < last ? key : last;
      v4u a = ldg(chunk(K, key, lane & 15, rm)), b = ldg(chunk(V, key, lane & 15, rm));
      k[4 * i] = a.x, k[4 * i + 1] = a.y, k[4 * i + 2] = a.z, k[4 * i + 3] = a.w;
      v[4 * i] = b.x, v[4 * i + 1] = b.y, v[4 * i + 2] = b.z, v[4 * i + 3] = b.w;
    }
    return;
  }
  _Pragma("unroll") for (int u = 0; u < 2; u++) {
    uint32_t key = pos + 8 * u + g;
    key = key < last ? key : last;
    _Pragma("unroll") for (int j = 0; j < 4; j++) {
      v4u a = ldg(chunk(K, key, 4 * j + t, rm));
      uint32_t *d = k + 16 * u + 4 * j;
      d[0] = a.x, d[1] = a.y, d[2] = a.z, d[3] = a.w;
    }
  }
  _Pragma("unroll") for (int i = 0; i < 4; i++) {
    uint32_t key = pos + 2 * t + (i & 1) + 8 * (i >> 1);
    key = key < last ? key : last;
    v4u a = ldg(chunk(V, key, g, rm)), b = ldg(chunk(V, key, g + 8, rm));
    uint32_t *d = v + 8 * i;
    d[0] = a.x, d[1] = a.y, d[2] = a.z, d[3] = a.w;
    d[4] = b.x, d[5] = b.y, d[6] = b.z, d[7] = b.w;
  }
}

static inline uint32_t consume(const uint32_t *k, const uint32_t *v, uint32_t spin) {
  uint32_t x = 0;
  _Pragma("unroll") for (int i = 0; i < 32; i++) x ^= k[i] ^ v[i];
  if (spin) {
    uint64_t c0, c1;
    __asm__ volatile("mov.u64 %0, %%clock64;" : "=l"(c0) : "r"(x));
    do
      __asm__ volatile("mov.u64 %0, %%clock64;" : "=l"(c1));
    while (c1 - c0 < spin);
  }
  return x;
}

#define SM_RATE_DF_KERNEL(name, ROWS_MAP)                                                          \
  __attribute__((nvptx_kernel)) void name(const v4u *K, const v4u *V, const uint32_t *table,      \
                                          uint32_t mode, uint64_t *rec, uint32_t *sink,             \
                                          uint32_t spin) {                                         \
    const uint32_t tid = __nvvm_read_ptx_sreg_tid_x(), nt = __nvvm_read_ptx_sreg_ntid_x();         \
    const uint32_t sm = smr_smid(), idx = mode & 1u ? sm : __nvvm_read_ptx_sreg_ctaid_x();                  \
    const uint32_t begin = table[2 * idx], count = table[2 * idx + 1], end = begin + count;        \
    const uint32_t warp = tid >> 5, lane = tid & 31, stride = 16u * (nt >> 5), last = end - 1;     \
    __syncthreads();                                                                               \
    const uint64_t t0 = smr_now();                                                                     \
    uint32_t acc = 0, ka[32], va[32], kb[32], vb[32];                                              \
    uint32_t pos = begin + 16u * warp;                                                             \
    if (count && pos < end)                                                                        \
      step_loads(ka, va, K, V, pos, last, lane, ROWS_MAP, mode >> 1);                                         \
    while (count && pos < end) {                                                                   \
      uint32_t p1 = pos + stride;                                                                  \
      if (p1 < end)                                                                                \
        step_loads(kb, vb, K, V, p1, last, lane, ROWS_MAP, mode >> 1);                                        \
      acc ^= consume(ka, va, spin);                                                                \
      if (p1 >= end)                                                                               \
        break;                                                                                     \
      uint32_t p2 = p1 + stride;                                                                   \
      if (p2 < end)                                                                                \
        step_loads(ka, va, K, V, p2, last, lane, ROWS_MAP, mode >> 1);                                        \
      acc ^= consume(kb, vb, spin);                                                                \
      pos = p2;                                                                                    \
    }                                                                                              \
    if (acc == 0x9e3779b9u) /* waits for the last loads, as above */                              \
      sink[0] = acc;                                                                               \
    smr_record(rec, sm, t0, (uint64_t)count * CHUNKS * 32u);                                       \
  }

SM_RATE_DF_KERNEL(sm_rate_df, 0)
SM_RATE_DF_KERNEL(sm_rate_rows, 1)
