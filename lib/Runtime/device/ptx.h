/* Inline-PTX wrappers for the persistent kernel (sm_90, PTX ISA >= 8.0).
   Shared-memory operands are 32-bit shared-window addresses (shared::cta,
   or shared::cluster after mapa); global operands are global-space
   addresses. Every wrapper that orders memory is volatile with a "memory"
   clobber so the compiler neither drops nor reorders it. */
#ifndef DF_DEVICE_PTX_H
#define DF_DEVICE_PTX_H

#include <stdbool.h>
#include <stdint.h>

#define DF_PTX static inline __attribute__((always_inline))

/* Four 32-bit words: one 16-byte vector load or store. */
typedef uint32_t df_v4u32 __attribute__((ext_vector_type(4)));

/* ---- thread identity --------------------------------------------------- */

DF_PTX uint32_t df_ptx_thread_linear(void) {
  uint32_t x = __nvvm_read_ptx_sreg_tid_x(), y = __nvvm_read_ptx_sreg_tid_y();
  uint32_t z = __nvvm_read_ptx_sreg_tid_z();
  uint32_t nx = __nvvm_read_ptx_sreg_ntid_x(), ny = __nvvm_read_ptx_sreg_ntid_y();
  return x + nx * (y + ny * z);
}
DF_PTX uint32_t df_ptx_threads(void) {
  return __nvvm_read_ptx_sreg_ntid_x() * __nvvm_read_ptx_sreg_ntid_y() *
         __nvvm_read_ptx_sreg_ntid_z();
}
/* Bytes of dynamic shared memory this launch gave the CTA. */
DF_PTX uint32_t df_ptx_dynamic_smem_size(void) {
  uint32_t n;
  __asm__("mov.u32 %0, %%dynamic_smem_size;" : "=r"(n));
  return n;
}
/* Queue index: the linear block index (grid is 1-D, one CTA per queue). */
DF_PTX uint32_t df_ptx_block(void) { return __nvvm_read_ptx_sreg_ctaid_x(); }

/* ---- CTA and cluster barriers ------------------------------------------ */

DF_PTX void df_ptx_bar_sync(void) { __nvvm_barrier_sync(0); }

/* Relaxed GPU-scope fetch-and-add: a claim on a counter whose value
   orders nothing else (the instruction pool's, docs/pool.md). Not volatile: the
   result is waited for only where it is read. */
DF_PTX uint32_t df_ptx_atom_add_relaxed_gpu(uint32_t *p, uint32_t v) {
  uint32_t old;
  __asm__("atom.relaxed.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
/* bar.warp.sync over the whole warp: orders memory among its lanes. */
DF_PTX void df_ptx_warp_sync(void) { __nvvm_bar_warp_sync(0xffffffffu); }

/* Full cluster barrier; release/acquire so shared-memory writes before it
   (barrier inits included) are visible to every CTA of the cluster after. */
DF_PTX void df_ptx_cluster_sync(void) {
  __asm__ __volatile__("barrier.cluster.arrive.release;\n\t"
                       "barrier.cluster.wait.acquire;" ::: "memory");
}

/* ---- fences -------------------------------------------------------------- */

/* Makes mbarrier.init visible to the cluster and to the async proxy. */
DF_PTX void df_ptx_fence_mbarrier_init(void) {
  __asm__ __volatile__("fence.mbarrier_init.release.cluster;" ::: "memory");
}
/* Orders this thread's generic shared accesses with later/earlier bulk
   copies (the async proxy) touching the same bytes. */
DF_PTX void df_ptx_fence_proxy_async_shared(void) {
  __asm__ __volatile__("fence.proxy.async.shared::cta;" ::: "memory");
}
/* After an acquire of a flag, before a bulk copy reads the published
   global bytes through the async proxy. */
DF_PTX void df_ptx_fence_proxy_async_global(void) {
  __asm__ __volatile__("fence.proxy.async.global;" ::: "memory");
}
/* __threadfence: this thread's global writes before a later release. */
DF_PTX void df_ptx_fence_gpu(void) { __asm__ __volatile__("fence.acq_rel.gpu;" ::: "memory"); }

/* ---- flags (global u32, release/acquire at gpu scope) ------------------- */

DF_PTX uint32_t df_ptx_ld_acquire_gpu(uint64_t gaddr) {
  uint32_t v;
  __asm__ __volatile__("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(gaddr) : "memory");
  return v;
}
DF_PTX void df_ptx_st_release_gpu(uint64_t gaddr, uint32_t v) {
  __asm__ __volatile__("st.release.gpu.global.u32 [%0], %1;" ::"l"(gaddr), "r"(v) : "memory");
}
DF_PTX void df_ptx_nanosleep(uint32_t ns) {
  __asm__ __volatile__("nanosleep.u32 %0;" ::"r"(ns) : "memory");
}

/* ---- mbarrier ------------------------------------------------------------ */

DF_PTX void df_ptx_mbar_init(uint32_t bar, uint32_t count) {
  __asm__ __volatile__("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count)
                       : "memory");
}
/* Local arrive (count 1). */
DF_PTX void df_ptx_mbar_arrive(uint32_t bar) {
  __asm__ __volatile__("{\n\t.reg .b64 st;\n\t"
                       "mbarrier.arrive.shared::cta.b64 st, [%0];\n\t}" ::"r"(bar)
                       : "memory");
}
/* Local arrive that also expects `tx` bytes from bulk copies. */
DF_PTX void df_ptx_mbar_arrive_expect_tx(uint32_t bar, uint32_t tx) {
  __asm__ __volatile__("{\n\t.reg .b64 st;\n\t"
                       "mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n\t}" ::"r"(bar),
                       "r"(tx)
                       : "memory");
}
/* The same on a peer CTA's barrier (address from mapa). Relaxed (PTX ISA
   8.6): the bytes travel by the copy's complete_tx, which needs no
   release; a release arrive cost ~0.3 us per cluster edge (bench/overhead). */
DF_PTX void df_ptx_mbar_remote_arrive_expect_tx(uint32_t rbar, uint32_t tx) {
  __asm__ __volatile__(
      "mbarrier.arrive.expect_tx.relaxed.cluster.shared::cluster.b64 _, [%0], %1;" ::"r"(rbar),
      "r"(tx)
      : "memory");
}
/* Raise a peer barrier's expected bytes without arriving (non-final
   segments of one transfer: the phase still needs the final arrive). */
DF_PTX void df_ptx_mbar_remote_expect_tx(uint32_t rbar, uint32_t tx) {
  __asm__ __volatile__("mbarrier.expect_tx.relaxed.cluster.shared::cluster.b64 [%0], %1;" ::"r"(
                           rbar),
                       "r"(tx)
                       : "memory");
}
/* Arrive (count 1) on a peer CTA's barrier: the cluster ACK. */
DF_PTX void df_ptx_mbar_remote_arrive(uint32_t rbar) {
  __asm__ __volatile__("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(rbar)
                       : "memory");
}
/* One try_wait (the hardware may suspend briefly): whether the phase with
   parity `parity` has completed; CTA scope, and cluster-scope acquire. */
DF_PTX bool df_ptx_mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  __asm__ __volatile__("{\n\t.reg .pred p;\n\t"
                       "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                       "selp.b32 %0, 1, 0, p;\n\t}"
                       : "=r"(done)
                       : "r"(bar), "r"(parity)
                       : "memory");
  return done != 0;
}
DF_PTX bool df_ptx_mbar_try_wait_cluster(uint32_t bar, uint32_t parity) {
  uint32_t done;
  __asm__ __volatile__("{\n\t.reg .pred p;\n\t"
                       "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
                       "selp.b32 %0, 1, 0, p;\n\t}"
                       : "=r"(done)
                       : "r"(bar), "r"(parity)
                       : "memory");
  return done != 0;
}
/* Spin until the phase with parity `parity` has completed (CTA scope:
   completions come from local arrives and bulk-copy complete_tx). */
DF_PTX void df_ptx_mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    __asm__ __volatile__("{\n\t.reg .pred p;\n\t"
                         "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                         "selp.b32 %0, 1, 0, p;\n\t}"
                         : "=r"(done)
                         : "r"(bar), "r"(parity)
                         : "memory");
  } while (!done);
}
/* The same with cluster-scope acquire: phases completed by peer CTAs. */
DF_PTX void df_ptx_mbar_wait_cluster(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    __asm__ __volatile__("{\n\t.reg .pred p;\n\t"
                         "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
                         "selp.b32 %0, 1, 0, p;\n\t}"
                         : "=r"(done)
                         : "r"(bar), "r"(parity)
                         : "memory");
  } while (!done);
}

/* ---- cluster addressing --------------------------------------------------- */

/* This CTA's shared address `addr` as seen in CTA `rank` of the cluster. */
DF_PTX uint32_t df_ptx_mapa(uint32_t addr, uint32_t rank) {
  uint32_t r;
  __asm__("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}

/* ---- bulk copies ------------------------------------------------------------ */

/* global -> own shared memory, completing `bytes` on local barrier `bar`. */
DF_PTX void df_ptx_bulk_g2s(uint32_t dst, uint64_t gsrc, uint32_t bytes, uint32_t bar) {
  __asm__ __volatile__(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(dst),
      "l"(gsrc), "r"(bytes), "r"(bar)
      : "memory");
}
/* own shared -> peer shared (rdst, rbar from mapa), completing on the
   peer's barrier. */
DF_PTX void df_ptx_bulk_s2c(uint32_t rdst, uint32_t src, uint32_t bytes, uint32_t rbar) {
  __asm__ __volatile__("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes "
                       "[%0], [%1], %2, [%3];" ::"r"(rdst),
                       "r"(src), "r"(bytes), "r"(rbar)
                       : "memory");
}
/* own shared -> global (bulk group, L2 evict-last hint omitted). */
DF_PTX void df_ptx_bulk_s2g(uint64_t gdst, uint32_t src, uint32_t bytes) {
  __asm__ __volatile__("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gdst),
                       "r"(src), "r"(bytes)
                       : "memory");
}
DF_PTX void df_ptx_bulk_commit(void) {
  __asm__ __volatile__("cp.async.bulk.commit_group;" ::: "memory");
}
/* Wait until the bulk groups' source reads are done: all, or all but the
   newest group. */
DF_PTX void df_ptx_bulk_wait_read_all(void) {
  __asm__ __volatile__("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
/* Wait until every bulk group has completed, writes included. */
DF_PTX void df_ptx_bulk_wait_all(void) {
  __asm__ __volatile__("cp.async.bulk.wait_group 0;" ::: "memory");
}
DF_PTX void df_ptx_bulk_wait_read_but_newest(void) {
  __asm__ __volatile__("cp.async.bulk.wait_group.read 1;" ::: "memory");
}

/* ---- per-thread async copies ------------------------------------------------ */

/* Whether a generic address is in shared memory. */
DF_PTX bool df_ptx_is_shared(const void *p) { return __nvvm_isspacep_shared(p); }
/* 16 bytes global -> shared (shared-window address `dst`), through L2
   only; no register holds them. Complete after df_ptx_cp_async_wait_all
   in the issuing thread. */
DF_PTX void df_ptx_cp_async16(uint32_t dst, const void *gsrc) {
  __asm__ __volatile__("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(gsrc)
                       : "memory");
}
DF_PTX void df_ptx_cp_async_wait_all(void) {
  __asm__ __volatile__("cp.async.wait_all;" ::: "memory");
}

#endif
