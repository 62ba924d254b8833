/* HBM receives through the copy engine (REFERENCE 6 steps 3 and 5): the
   leader waits for the published flag, posts expect_tx for the transfer's
   bytes on the receive barrier and one global -> shared bulk copy per
   segment completing on it. Used for kinds 6/7 and segmented receives
   whose target is in shared memory; everything else takes the
   thread-copy path in comm_recv.c. */
#include "runtime.h"

/* All threads that call it: acquire-poll until the flag reaches `epoch`. */
void df_rt_poll_flag(const df_rt *rt, uint32_t flag, uint32_t epoch) {
  uint64_t a = df_gaddr(&rt->flags[flag]);
  for (uint32_t n = 1; df_ptx_ld_acquire_gpu(a) < epoch; n++) {
    df_ptx_nanosleep(DF_POLL_SLEEP_NS);
    if (df_rt_leader(rt))
      df_rt_check_abort(rt, n);
  }
}

/* Whether group c[0..g) (one transfer, its segments) can go through the
   bulk path: it needs a barrier, a shared target and 16-byte granules. */
bool df_rt_hbm_bulk_ok(const df_rt *rt, const df_abi_comm *c, uint32_t g) {
  if (!DF_HAS(DF_FEATURE_HBM_BULK))
    return false;
  if (c->kind != DF_COMM_HBM_RECV_ISSUE && c->kind != DF_COMM_HBM_RECV_WAIT &&
      c->segment_count <= 1)
    return false;
  const df_abi_slot *dst0 = df_rt_slot(rt, c->dst_slot_id);
  if (df_comm_barrier(c, dst0) == DF_SENTINEL)
    return false;
  for (uint32_t j = 0; j < g; j++) {
    const df_abi_slot *src = df_rt_slot(rt, c[j].src_slot_id);
    const df_abi_slot *dst = df_rt_slot(rt, c[j].dst_slot_id);
    uint32_t bytes = df_comm_bytes(&c[j], src, dst);
    if (!df_slot_in_shared(dst) ||
        ((df_rt_slot_smem(rt, dst) | dst->global_offset | c[j].byte_offset | bytes) & 15u))
      return false;
  }
  return true;
}

/* Leader only. Posts the group once the last segment's flag holds its
   epoch (segments are published in order, and waits test >= epoch).
   Returns false, posting nothing, when !block and the flag is not there. */
bool df_rt_hbm_bulk_post(const df_rt *rt, const df_abi_comm *c, uint32_t g, bool block) {
  const df_abi_comm *last = &c[g - 1];
  uint32_t flag = df_comm_flag(last, df_rt_slot(rt, last->dst_slot_id));
  if (block)
    df_rt_poll_flag(rt, flag, last->flag_epoch);
  else if (df_ptx_ld_acquire_gpu(df_gaddr(&rt->flags[flag])) < last->flag_epoch)
    return false;
  /* Generic-proxy view (the acquire, earlier reads of the target) before
     the async-proxy copies. */
  df_ptx_fence_proxy_async_global();
  df_ptx_fence_proxy_async_shared();
  uint32_t total = 0;
  for (uint32_t j = 0; j < g; j++)
    total += df_comm_bytes(&c[j], df_rt_slot(rt, c[j].src_slot_id),
                           df_rt_slot(rt, c[j].dst_slot_id));
  uint32_t bar = df_rt_bar_addr(rt, df_comm_barrier(c, df_rt_slot(rt, c->dst_slot_id)));
  df_ptx_mbar_arrive_expect_tx(bar, total);
  for (uint32_t j = 0; j < g; j++) {
    const df_abi_slot *dst = df_rt_slot(rt, c[j].dst_slot_id);
    uint32_t bytes = df_comm_bytes(&c[j], df_rt_slot(rt, c[j].src_slot_id), dst);
    if (!bytes)
      continue;
    uint32_t off = c[j].byte_offset;
    df_ptx_bulk_g2s(rt->smem_addr + df_rt_slot_smem(rt, dst) + off,
                    df_gaddr(rt->staging + dst->global_offset + off), bytes, bar);
  }
  return true;
}

/* Kind 6, after the handler: non-blocking; the kind-7 wait completes it.
   A target that is not bulk-capable (direct-global) makes it a no-op. */
void df_rt_hbm_issue(const df_rt *rt, const df_abi_comm *c, uint32_t n) {
  if (!df_rt_leader(rt))
    return;
  for (uint32_t i = 0; i < n; i++) {
    if (c[i].kind != DF_COMM_HBM_RECV_ISSUE || (c[i].segment_count > 1 && c[i].segment_id))
      continue;
    uint32_t g = df_comm_group(&c[i], i, n);
    if (!df_rt_hbm_bulk_ok(rt, &c[i], g))
      continue;
    uint32_t b = df_comm_barrier(&c[i], df_rt_slot(rt, c[i].dst_slot_id));
    if (!df_rt_bit(rt, rt->issued_bits, b) && df_rt_hbm_bulk_post(rt, &c[i], g, false))
      df_rt_bit_put(rt, rt->issued_bits, b, true);
  }
}
