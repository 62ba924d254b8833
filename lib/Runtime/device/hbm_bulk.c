/* HBM receives through the copy engine (REFERENCE 6 steps 3 and 5): the
   leader waits for the published flag, posts expect_tx for the bytes on
   the receive barrier and a global -> shared bulk copy completing on it.
   Used for kinds 6/7 and segmented receives whose target is in shared
   memory; everything else takes the thread-copy path in comm_recv.c.
   A segmented (tiled) transfer is loaded one tile at a time, so at most
   one tile of it is in flight on the receiving CTA (issue 8). */
#include "runtime.h"

/* The leader: acquire-poll until the flag reaches `epoch`. A tight spin:
   each poll is an L2 round trip already, and one polling thread per CTA
   adds little traffic; a sleep between polls would only add to the
   latency of the edge. */
void df_rt_poll_flag(const df_rt *rt, uint32_t flag, uint32_t epoch) {
  uint64_t a = df_gaddr(&rt->flags[flag]);
  /* Acquire loads (each invalidates L1, SASS CCTL.IVALL): polling with
     relaxed loads and one acquire fence after measured 0.3 us slower per
     HBM edge on the H200 (bench/overhead/HISTORY.md, run H). */
  for (uint32_t n = 1; df_ptx_ld_acquire_gpu(a) < epoch; n++) {
    df_rt_check_abort(rt, n);
#ifdef DF_RT_POLL_SLEEP_NS
    /* A/B build switch: back off between polls, to see whether spinning
       CTAs slow the SMs still streaming (bench/attention CASES_RT_AB). */
    df_ptx_nanosleep(DF_RT_POLL_SLEEP_NS);
#endif
  }
  DF_RT_TRACE_AT(rt, DF_RT_TRACE_HBM_FLAG);
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

/* Leader only, a tiled transfer c[0..g), g > 1: waits for the last
   segment's flag, then loads segment j only after segment j-1 landed.
   Each segment is one phase of the transfer's barrier; the planned phase
   p = barrier_phase & 1 is the parity of the transfer's one planned phase
   (REFERENCE 3.7: segments share a phase), so the transfer completes an
   odd number of phases, k = g | 1 (an even g adds one plain arrive), the
   last with parity p: every later use of the barrier still finds the
   parity the plan gave it. Returns with the last phase (parity p) posted;
   the caller waits for it. */
void df_rt_hbm_bulk_tiled(const df_rt *rt, const df_abi_comm *c, uint32_t g) {
  const df_abi_comm *last = &c[g - 1];
  df_rt_mark(rt, DF_PHASE_HBM_RECV, df_rt_comm_index(rt, last), last->flag_epoch);
  df_rt_poll_flag(rt, df_comm_flag(last, df_rt_slot(rt, last->dst_slot_id)), last->flag_epoch);
  df_ptx_fence_proxy_async_global();
  df_ptx_fence_proxy_async_shared();
  uint32_t p = c->barrier_phase & 1u;
  uint32_t bar = df_rt_bar_addr(rt, df_comm_barrier(c, df_rt_slot(rt, c->dst_slot_id)));
  uint32_t k = g | 1u;
  for (uint32_t j = 0; j < k; j++) {
    if (j) {
      df_rt_mark(rt, DF_PHASE_HBM_BULK, df_rt_comm_index(rt, &c[j - 1]), (p + j - 1) & 1u);
      df_rt_bar_wait(rt, bar, (p + j - 1) & 1u, false);
    }
    if (j == g) {
      df_ptx_mbar_arrive(bar); /* the pad phase: no bytes, completes at once */
      continue;
    }
    const df_abi_slot *dst = df_rt_slot(rt, c[j].dst_slot_id);
    uint32_t bytes = df_comm_bytes(&c[j], df_rt_slot(rt, c[j].src_slot_id), dst);
    uint32_t off = c[j].byte_offset;
    df_ptx_mbar_arrive_expect_tx(bar, bytes);
    if (bytes)
      df_ptx_bulk_g2s(rt->smem_addr + df_rt_slot_smem(rt, dst) + off,
                      df_gaddr(rt->staging + dst->global_offset + off), bytes, bar);
  }
}

/* Kind 6, after the handler: non-blocking; the kind-7 wait completes it.
   A target that is not bulk-capable (direct-global) makes it a no-op, and
   so does a tiled transfer: posting its first tile early would put it in
   flight beside the CTA's other loads; the kind-7 wait loads it tile by
   tile. */
void df_rt_hbm_issue(const df_rt *rt, const df_abi_comm *c, uint32_t n) {
  if (!df_rt_leader(rt))
    return;
  for (uint32_t i = 0; i < n; i++) {
    if (c[i].kind != DF_COMM_HBM_RECV_ISSUE || c[i].segment_count > 1)
      continue;
    uint32_t g = df_comm_group(&c[i], i, n);
    if (!df_rt_hbm_bulk_ok(rt, &c[i], g))
      continue;
    uint32_t b = df_comm_barrier(&c[i], df_rt_slot(rt, c[i].dst_slot_id));
    if (!df_rt_bit(rt, rt->issued_bits, b) && df_rt_hbm_bulk_post(rt, &c[i], g, false))
      df_rt_bit_put(rt, rt->issued_bits, b, true);
  }
}
