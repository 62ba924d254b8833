/* What the per-SM read-rate probe's kernels share (sm_rate_kernel.c, the
   load loops; sm_rate_gqa.c, the partial's harness): the SM, the clock,
   and each CTA's record. Device code (nvptx64). */
#ifndef SMR_DEVICE_H
#define SMR_DEVICE_H

#include <stdint.h>

static inline uint32_t smr_smid(void) {
  uint32_t r;
  __asm__ volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}

static inline uint64_t smr_now(void) {
  uint64_t t;
  __asm__ volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* After the CTA's work (every thread's last loads consumed): a block
   barrier, then thread 0 writes the CTA's record rec[4 b ..]: its SM, T0,
   its end, BYTES read. */
static inline void smr_record(uint64_t *rec, uint32_t sm, uint64_t t0, uint64_t bytes) {
  __nvvm_bar_sync(0);
  if (__nvvm_read_ptx_sreg_tid_x() == 0) {
    const uint32_t b = __nvvm_read_ptx_sreg_ctaid_x();
    rec[4 * b] = sm;
    rec[4 * b + 1] = t0;
    rec[4 * b + 2] = smr_now();
    rec[4 * b + 3] = bytes;
  }
}

#endif
