/* Receives before the handler (REFERENCE 6 steps 2 and 3). */
#include "runtime.h"

/* Cluster receives: the leader waits each target barrier's phase (cluster
   records carry the phase in flag_epoch), then orders the async-proxy
   writes before every thread's generic reads. */
void df_rt_cluster_recv(const df_rt *rt, const df_abi_comm *c, uint32_t n) {
  if (df_rt_leader(rt)) {
    for (uint32_t i = 0; i < n; i++) {
      if (c[i].kind != DF_COMM_CLUSTER_RECV)
        continue;
      uint32_t b = df_comm_barrier(&c[i], df_rt_slot(rt, c[i].dst_slot_id));
      if (b == DF_SENTINEL)
        __builtin_trap(); /* packer invariant: cluster targets have barriers */
      df_rt_mark(rt, DF_PHASE_CLUSTER_RECV, df_rt_comm_index(rt, &c[i]), c[i].flag_epoch & 1);
      df_rt_bar_wait(rt, df_rt_bar_addr(rt, b), c[i].flag_epoch & 1, true);
    }
    df_ptx_fence_proxy_async();
  }
  df_ptx_bar_sync();
}

/* Thread-copy path for one transfer c[0..g): the leader alone
   acquire-polls each segment's flag (in segment order) while the other
   threads wait at a block barrier, which carries its acquire to them;
   then every thread copies staging -> target (nothing to copy for a
   direct-global target aliasing the staging bytes). The leader then
   arrives once on the receive barrier, so the barrier's phases advance
   exactly as when the bulk path or a cluster send completes them. */
static void recv_copy(const df_rt *rt, const df_abi_comm *c, uint32_t g) {
  if (df_rt_leader(rt))
    for (uint32_t j = 0; j < g; j++) {
      const df_abi_slot *dst = df_rt_slot(rt, c[j].dst_slot_id);
      df_rt_mark(rt, DF_PHASE_HBM_RECV, df_rt_comm_index(rt, &c[j]), c[j].flag_epoch);
      df_rt_poll_flag(rt, df_comm_flag(&c[j], dst), c[j].flag_epoch);
    }
  df_ptx_bar_sync();
  for (uint32_t j = 0; j < g; j++) {
    const df_abi_slot *src = df_rt_slot(rt, c[j].src_slot_id);
    const df_abi_slot *dst = df_rt_slot(rt, c[j].dst_slot_id);
    uint32_t off = c[j].byte_offset;
    df_rt_copy(rt, df_rt_slot_ptr(rt, dst) + off, rt->staging + dst->global_offset + off,
               df_comm_bytes(&c[j], src, dst));
  }
  uint32_t b = df_comm_barrier(c, df_rt_slot(rt, c->dst_slot_id));
  if (df_rt_leader(rt) && b != DF_SENTINEL)
    df_ptx_mbar_arrive(df_rt_bar_addr(rt, b));
}

/* Bulk path, leader: a tiled transfer tile by tile, else post unless an
   earlier kind-6 issue did; wait for the (last) phase, clear the issued
   bit. */
static void recv_bulk(const df_rt *rt, const df_abi_comm *c, uint32_t g) {
  uint32_t b = df_comm_barrier(c, df_rt_slot(rt, c->dst_slot_id));
  if (g > 1) {
    df_rt_hbm_bulk_tiled(rt, c, g);
  } else if (!df_rt_bit(rt, rt->issued_bits, b)) {
    df_rt_mark(rt, DF_PHASE_HBM_RECV, df_rt_comm_index(rt, &c[g - 1]), c[g - 1].flag_epoch);
    df_rt_hbm_bulk_post(rt, c, g, true);
  }
  df_rt_mark(rt, DF_PHASE_HBM_BULK, df_rt_comm_index(rt, c), c->barrier_phase & 1);
  df_rt_bar_wait(rt, df_rt_bar_addr(rt, b), c->barrier_phase & 1, false);
  df_rt_bit_put(rt, rt->issued_bits, b, false);
}

/* HBM receives and waits (kinds 4, 7), one transfer (segment group) at a
   time; one block barrier at the end makes every target visible. */
void df_rt_hbm_recv(const df_rt *rt, const df_abi_comm *c, uint32_t n) {
  bool bulk = false;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t k = c[i].kind;
    if ((k != DF_COMM_HBM_RECV && k != DF_COMM_HBM_RECV_WAIT) ||
        (c[i].segment_count > 1 && c[i].segment_id))
      continue;
    uint32_t g = df_comm_group(&c[i], i, n);
    if (df_rt_hbm_bulk_ok(rt, &c[i], g)) {
      bulk = true;
      if (df_rt_leader(rt))
        recv_bulk(rt, &c[i], g);
    } else {
      recv_copy(rt, &c[i], g);
    }
  }
  if (bulk && df_rt_leader(rt))
    df_ptx_fence_proxy_async_shared();
  df_ptx_bar_sync();
}
