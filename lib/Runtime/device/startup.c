/* Start-up and end of the persistent kernel (REFERENCE 6). */
#include "runtime.h"

/* Peers touch this CTA's shared memory only through the cluster comms
   (sends, receives' remote arrivals, releases, gated pushes), so a kernel
   built without them skips the cluster barriers at its start and end: the
   handler-join plans (partials only, no comms) start and end 0.5-1.2 us
   sooner on clusters of 2 (bench/attention run AG). A/B build switch
   -DDF_RT_CLUSTER_BARRIERS_ALWAYS puts them back in every clustered
   launch. */
#ifdef DF_RT_CLUSTER_BARRIERS_ALWAYS
#define CLUSTER_BARRIERS(rt) df_rt_clustered(rt)
#else
#define CLUSTER_BARRIERS(rt)                                                                     \
  (df_rt_clustered(rt) && DF_HAS(DF_FEATURE_CLUSTER_SEND | DF_FEATURE_CLUSTER_RECV |             \
                                 DF_FEATURE_RELEASE | DF_FEATURE_GATED))
#endif

/* Leader: init this queue's receive barriers and every ACK barrier (count
   1), clear the ACK and issued bit-words; then make the inits visible to
   the cluster before any peer may arrive on them. All ACK barriers are
   initialised (not only those of this queue's gated sends): a superset
   that costs a few stores and never leaves a released-to barrier
   uninitialised. */
void df_rt_startup(const df_rt *rt, const uint32_t *init_indices, uint32_t init_count) {
  if (df_rt_leader(rt)) {
    for (uint32_t i = 0; i < init_count; i++)
      df_ptx_mbar_init(df_rt_bar_addr(rt, init_indices[i]), 1);
    if (DF_HAS(DF_FEATURE_RELEASE | DF_FEATURE_GATED)) {
      for (uint32_t i = 0; i < rt->ack_count; i++)
        df_ptx_mbar_init(df_rt_ack_addr(rt, i), 1);
      uint32_t ack_words = (rt->ack_count + 31) / 32;
      for (uint32_t i = 0; i < ack_words; i++)
        df_rt_words(rt, rt->ack_bits)[i] = 0;
    }
    if (DF_HAS(DF_FEATURE_HBM_BULK)) {
      uint32_t issued_words = (rt->barrier_count + 31) / 32;
      for (uint32_t i = 0; i < issued_words; i++)
        df_rt_words(rt, rt->issued_bits)[i] = 0;
    }
    df_ptx_fence_mbarrier_init();
    df_ptx_fence_proxy_async_shared();
  }
  /* A cluster-wide barrier whenever the kernel has cluster comms: whether
     a peer sends to us is a property of the whole plan, and every CTA of
     the cluster takes the same branch. */
  if (CLUSTER_BARRIERS(rt))
    df_ptx_cluster_sync();
  else
    df_ptx_bar_sync();
}

/* Leader waits for the source reads of outstanding bulk copies. With
   clusters, a final cluster barrier keeps this CTA's shared memory alive
   until no peer can still arrive on or copy into it. */
void df_rt_finish(const df_rt *rt) {
  if (DF_HAS(DF_FEATURE_CLUSTER_SEND) && df_rt_leader(rt))
    df_ptx_bulk_wait_read_all();
  if (CLUSTER_BARRIERS(rt))
    df_ptx_cluster_sync();
}
