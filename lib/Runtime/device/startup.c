/* Start-up and end of the persistent kernel (REFERENCE 6). */
#include "runtime.h"

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
  /* A cluster-wide barrier whenever the launch has clusters: whether a
     peer sends to us is a property of the whole plan, and every CTA of the
     cluster must take the same branch. */
  if (df_rt_clustered(rt))
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
  if (df_rt_clustered(rt))
    df_ptx_cluster_sync();
}
