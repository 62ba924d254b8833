/* Sends after the handler (REFERENCE 6 step 6). The caller has already
   run the block barrier (with each thread's async-proxy fence) that makes
   the handler's output complete. */
#include "runtime.h"

/* A gated destination takes the push only after the consumer's
   CLUSTER_RELEASE has completed phase 0 of our ACK barrier. The ACK
   bit-word remembers that it has, so later sends of a gate skip the wait. */
static void wait_ack(const df_rt *rt, const df_abi_comm *c, const df_abi_slot *dst) {
  if (!DF_HAS(DF_FEATURE_GATED) || !(dst->flags & DF_SLOT_FLAG_CLUSTER_GATED_PUSH) ||
      c->flag_index == DF_SENTINEL ||
      df_rt_bit(rt, rt->ack_bits, c->flag_index))
    return;
  df_rt_mark(rt, DF_PHASE_CLUSTER_SEND, df_rt_comm_index(rt, c), 0);
  df_rt_bar_wait(rt, df_rt_ack_addr(rt, c->flag_index), 0, true);
  df_rt_bit_put(rt, rt->ack_bits, c->flag_index, true);
}

/* One cluster send: expect the bytes on the peer's receive barrier, then
   one bulk copy shared::cta -> shared::cluster completing on it. Only a
   transfer's last segment arrives; earlier ones just add their bytes, so
   the phase completes once, after every segment has landed. */
static void cluster_send(const df_rt *rt, const df_abi_comm *c) {
  const df_abi_slot *src = df_rt_slot(rt, c->src_slot_id);
  const df_abi_slot *dst = df_rt_slot(rt, c->dst_slot_id);
  uint32_t b = df_comm_barrier(c, dst);
  if (b == DF_SENTINEL)
    __builtin_trap(); /* packer invariant: cluster targets have barriers */
  wait_ack(rt, c, dst);
  uint32_t bytes = df_comm_bytes(c, src, dst);
  uint32_t off = c->byte_offset;
  uint32_t rbar = df_ptx_mapa(df_rt_bar_addr(rt, b), c->peer_cta_rank);
  uint32_t rdst = df_ptx_mapa(rt->smem_addr + df_rt_slot_smem(rt, dst) + off, c->peer_cta_rank);
  /* The copy first, then the remote (expect_tx and) arrive, so that the
     arrive's round trip to the peer overlaps the copy. The peer's phase
     cannot complete before the arrive, and the tx count is signed, so a
     complete_tx landing before its expect_tx is counted right. The source
     was fenced for the async proxy by every writer before the block
     barrier (kernel.c): no proxy fence here. */
  if (bytes)
    df_ptx_bulk_s2c(rdst, rt->smem_addr + df_rt_slot_smem(rt, src) + off, bytes, rbar);
  DF_RT_TRACE_AT(rt, DF_RT_TRACE_SEND_MID);
  if (c->segment_count > 1 && c->segment_id + 1 < c->segment_count)
    df_ptx_mbar_remote_expect_tx(rbar, bytes);
  else
    df_ptx_mbar_remote_arrive_expect_tx(rbar, bytes);
}

/* The consumer's ACK: arrive on the producer's ACK barrier. */
static void cluster_release(const df_rt *rt, const df_abi_comm *c) {
  if (c->flag_index == DF_SENTINEL)
    __builtin_trap(); /* packer invariant: releases carry an ACK index */
  df_ptx_mbar_remote_arrive(df_ptx_mapa(df_rt_ack_addr(rt, c->flag_index), c->peer_cta_rank));
}

/* Cluster sends and releases, in record order, by the leader; one bulk
   group per instruction for the source-lifetime guard. A segment of a
   tiled transfer (segment_count > 1) first waits until every earlier copy
   has read its source, so at most one tile of this CTA is in flight;
   waiting for more than the guard needs is always safe. */
void df_rt_cluster_send(const df_rt *rt, const df_abi_comm *c, uint32_t n) {
  if (!df_rt_leader(rt))
    return;
  for (uint32_t i = 0; i < n; i++) {
    if (DF_HAS(DF_FEATURE_CLUSTER_SEND) && c[i].kind == DF_COMM_CLUSTER_SEND) {
      if (c[i].segment_count > 1) {
        df_ptx_bulk_commit();
        df_ptx_bulk_wait_read_all();
      }
      cluster_send(rt, &c[i]);
    }
    else if (DF_HAS(DF_FEATURE_RELEASE) && c[i].kind == DF_COMM_CLUSTER_RELEASE)
      cluster_release(rt, &c[i]);
  }
  df_ptx_bulk_commit();
}

/* Whether HBM send c (one segment of a tiled transfer) goes through the
   bulk path: segmented plan, shared source, 16-byte granules. */
static bool send_bulk(const df_rt *rt, const df_abi_comm *c) {
  if (!DF_HAS(DF_FEATURE_HBM_BULK) || c->segment_count <= 1)
    return false;
  const df_abi_slot *src = df_rt_slot(rt, c->src_slot_id);
  const df_abi_slot *dst = df_rt_slot(rt, c->dst_slot_id);
  return df_slot_in_shared(src) &&
         ((df_rt_slot_smem(rt, src) | dst->global_offset | c->byte_offset |
           df_comm_bytes(c, src, dst)) & 15u) == 0;
}

/* Bulk path, leader: one bulk store per segment, each completed (writes
   included) before the next is issued — one tile in flight — then made
   visible to the generic proxy and published with its epoch. */
static void send_segment_bulk(const df_rt *rt, const df_abi_comm *c) {
  const df_abi_slot *src = df_rt_slot(rt, c->src_slot_id);
  const df_abi_slot *dst = df_rt_slot(rt, c->dst_slot_id);
  uint32_t bytes = df_comm_bytes(c, src, dst), off = c->byte_offset;
  if (bytes) {
    df_ptx_bulk_s2g(df_gaddr(rt->staging + dst->global_offset + off),
                    rt->smem_addr + df_rt_slot_smem(rt, src) + off, bytes);
    df_ptx_bulk_commit();
    df_ptx_bulk_wait_all();
  }
  df_ptx_fence_proxy_async_global();
  df_ptx_fence_gpu();
  df_ptx_st_release_gpu(df_gaddr(&rt->flags[df_comm_flag(c, dst)]), c->flag_epoch);
}

/* HBM sends of an instruction that also receives over HBM, prepared
   before its flag polls (df_rt_hbm_send_prepare): the polls' acquires
   empty L1, after which reading the send's comm and slot records cost two
   dependent L2 round trips before the staging copy could start
   (bench/overhead trace). Lane i of warp 0 writes send i's description;
   the receive's block barriers publish it, every thread reads it after
   the handler, and the next instruction's lanes overwrite it only after
   the send's own block barrier. */
#define DF_HBM_SEND_PRE 4u
typedef struct hbm_send_desc {
  uint64_t to, from, flag; /* generic staging and source pointers, flag address */
  uint32_t bytes, epoch;
} hbm_send_desc;
static __attribute__((address_space(3))) hbm_send_desc hbm_desc[DF_HBM_SEND_PRE];

/* The number of HBM sends when they can be prepared, else 0. The count
   travels to df_rt_hbm_send in a register: after the polls, counting them
   again from the comm records would cost an L2 round trip. */
uint32_t df_rt_hbm_send_preparable(const df_rt *rt, const df_abi_comm *c, uint32_t n) {
  uint32_t sends = 0;
  for (uint32_t i = 0; i < n; i++)
    if (c[i].kind == DF_COMM_HBM_SEND) {
      if (send_bulk(rt, &c[i]))
        return 0;
      sends++;
    }
  /* Lane j describes send j. */
  return sends <= DF_HBM_SEND_PRE && sends <= rt->threads ? sends : 0;
}

void df_rt_hbm_send_prepare(const df_rt *rt, const df_abi_comm *c, uint32_t n) {
  for (uint32_t i = 0, j = 0; i < n; i++) {
    if (c[i].kind != DF_COMM_HBM_SEND)
      continue;
    if (rt->tid == j) {
      const df_abi_slot *src = df_rt_slot(rt, c[i].src_slot_id);
      const df_abi_slot *dst = df_rt_slot(rt, c[i].dst_slot_id);
      const uint32_t off = c[i].byte_offset;
      hbm_desc[j].to = (uint64_t)(uintptr_t)(rt->staging + dst->global_offset + off);
      hbm_desc[j].from = (uint64_t)(uintptr_t)(df_rt_slot_ptr(rt, src) + off);
      hbm_desc[j].flag = df_gaddr(&rt->flags[df_comm_flag(&c[i], dst)]);
      hbm_desc[j].bytes = df_comm_bytes(&c[i], src, dst);
      hbm_desc[j].epoch = c[i].flag_epoch;
    }
    j++;
  }
}

/* The prepared sends: the copies, the barrier, the leader's releases;
   nothing read from the records. */
static void hbm_send_prepared(const df_rt *rt, uint32_t sends) {
  /* Everything read from the descriptions before the barrier: after it,
     warp 0's lanes may already prepare the next instruction's. */
  uint64_t flag[DF_HBM_SEND_PRE];
  uint32_t epoch[DF_HBM_SEND_PRE];
  _Pragma("unroll") for (uint32_t j = 0; j < DF_HBM_SEND_PRE; j++) {
    if (j >= sends)
      break;
    flag[j] = hbm_desc[j].flag;
    epoch[j] = hbm_desc[j].epoch;
    df_rt_copy(rt, (uint8_t *)(uintptr_t)hbm_desc[j].to,
               (const uint8_t *)(uintptr_t)hbm_desc[j].from, hbm_desc[j].bytes);
  }
  df_ptx_bar_sync();
  DF_RT_TRACE_AT(rt, DF_RT_TRACE_SEND_MID);
  if (df_rt_leader(rt))
    _Pragma("unroll") for (uint32_t j = 0; j < DF_HBM_SEND_PRE; j++) {
      if (j >= sends)
        break;
      df_ptx_st_release_gpu(flag[j], epoch[j]);
    }
}

/* HBM sends: all threads copy each source to its staging bytes (nothing to
   copy for direct-global slots already there), barrier; then the leader
   publishes each epoch with a release store. Segments of tiled
   transfers take the bulk path instead; the CTA waits for it at a block
   barrier so that no later handler overwrites a source still being read.
   prepared: the count of sends df_rt_hbm_send_prepare described, or 0. */
void df_rt_hbm_send(const df_rt *rt, const df_abi_comm *c, uint32_t n, uint32_t prepared) {
  df_rt_mark(rt, DF_PHASE_HBM_SEND, df_rt_comm_index(rt, c), 0);
  if (prepared) {
    hbm_send_prepared(rt, prepared);
    return;
  }
  bool bulk = false;
  for (uint32_t i = 0; i < n; i++) {
    if (c[i].kind != DF_COMM_HBM_SEND)
      continue;
    if (send_bulk(rt, &c[i])) {
      bulk = true;
      continue;
    }
    const df_abi_slot *src = df_rt_slot(rt, c[i].src_slot_id);
    const df_abi_slot *dst = df_rt_slot(rt, c[i].dst_slot_id);
    uint32_t off = c[i].byte_offset;
    df_rt_copy(rt, rt->staging + dst->global_offset + off, df_rt_slot_ptr(rt, src) + off,
               df_comm_bytes(&c[i], src, dst));
  }
  /* The block barrier orders every thread's staging writes before the
     leader's release stores, which are cumulative: no per-thread gpu
     fence is needed. */
  df_ptx_bar_sync();
  DF_RT_TRACE_AT(rt, DF_RT_TRACE_SEND_MID);
  if (df_rt_leader(rt))
    for (uint32_t i = 0; i < n; i++) {
      if (c[i].kind != DF_COMM_HBM_SEND)
        continue;
      if (bulk && send_bulk(rt, &c[i])) {
        send_segment_bulk(rt, &c[i]);
        continue;
      }
      const df_abi_slot *dst = df_rt_slot(rt, c[i].dst_slot_id);
      df_ptx_st_release_gpu(df_gaddr(&rt->flags[df_comm_flag(&c[i], dst)]), c[i].flag_epoch);
    }
  if (bulk)
    df_ptx_bar_sync();
}
