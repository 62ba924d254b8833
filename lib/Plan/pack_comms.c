/* Comm records of a packed plan (REFERENCE 5.3, 5.4): grouped by dispatch
   instruction in pack order, each group ordered cluster receives, then
   cluster sends and releases, then the rest, so the device finds its
   cluster batches at the front of every instruction's block. */
#include <string.h>

#include "barrier_internal.h"
#include "pack_internal.h"
#include "sort_idx.h"

static uint32_t kind_rank(df_comm_kind k) {
  switch (k) {
  case DF_COMM_CLUSTER_RECV: return 0;
  case DF_COMM_CLUSTER_SEND:
  case DF_COMM_CLUSTER_RELEASE: return 1;
  case DF_COMM_HBM_RECV:
  case DF_COMM_HBM_RECV_WAIT: return 3;
  default: return 2;
  }
}

/* Within one dispatch group: (kind rank, source instr, target instr,
   source slot, target slot, segment), then plan order. */
static bool comm_less(const void *ctx, uint32_t x, uint32_t y) {
  const df_plan *p = ctx;
  const df_comm *a = &p->comms[x], *b = &p->comms[y];
  const uint32_t ka[6] = {kind_rank(a->kind), a->src_instr, a->dst_instr,
                          a->src_slot, a->dst_slot, a->segment_id};
  const uint32_t kb[6] = {kind_rank(b->kind), b->src_instr, b->dst_instr,
                          b->src_slot, b->dst_slot, b->segment_id};
  for (int i = 0; i < 6; i++)
    if (ka[i] != kb[i])
      return ka[i] < kb[i];
  return x < y;
}

static df_status order_comms(df_pack_ctx *c) {
  const df_plan *p = c->p;
  uint32_t n = p->instr_count, m = p->comm_count;
  c->comm_order = df_arena_array(c->a, m, sizeof(uint32_t));
  c->comm_first = df_arena_zero(c->a, (uint64_t)n + 1, sizeof(uint32_t));
  uint32_t *fill = df_arena_array(c->a, (uint64_t)n + 1, sizeof(uint32_t));
  uint32_t *tmp = df_arena_array(c->a, m, sizeof(uint32_t));
  if (!c->comm_order || !c->comm_first || !fill || !tmp)
    return DF_ARENA_OOM("the comm order");
  for (uint32_t i = 0; i < m; i++) {
    uint32_t d = df_comm_dispatch(&p->comms[i]);
    if (d >= n)
      return df_status_errorf(DF_EINVAL,
                              "comm dispatch instruction ids are not in the instruction plan: "
                              "comm %u (%s) names instruction %u, plan has %u",
                              i, df_comm_kind_name(p->comms[i].kind), d, n);
    c->comm_first[c->pack_index[d] + 1]++;
  }
  for (uint32_t i = 0; i < n; i++)
    c->comm_first[i + 1] += c->comm_first[i];
  memcpy(fill, c->comm_first, sizeof(uint32_t) * (n + 1));
  for (uint32_t i = 0; i < m; i++)
    c->comm_order[fill[c->pack_index[df_comm_dispatch(&p->comms[i])]]++] = i;
  for (uint32_t g = 0; g < n; g++)
    df_sort_idx(c->comm_order + c->comm_first[g], c->comm_first[g + 1] - c->comm_first[g],
                tmp, comm_less, p);
  return df_status_ok();
}

static uint32_t peer_rank(const df_plan *p, const df_comm *c) {
  if (!df_comm_kind_is_cluster(c->kind))
    return DF_SENTINEL;
  if (c->peer_cta_rank != DF_SENTINEL)
    return c->peer_cta_rank;
  uint32_t sm = c->kind == DF_COMM_CLUSTER_SEND ? c->consumer_sm : c->producer_sm;
  return df_topology_cluster_rank(&p->topology, sm);
}

df_status df_pack_comms(df_pack_ctx *c) {
  const df_plan *p = c->p;
  df_packed *k = c->k;
  DF_TRY(order_comms(c));
  bool reuse = c->o && c->o->layout.reuse_hbm_flags;
  df_key5map epochs = {NULL, 0, 0};
  if (reuse && !df_key5map_init(&epochs, c->a, p->comm_count))
    return DF_ARENA_OOM("HBM epochs");
  uint32_t next_epoch = 1;
  const df_barrier_alloc *b = &k->barriers;
  for (uint32_t j = 0; j < p->comm_count; j++) {
    uint32_t i = c->comm_order[j];
    const df_comm *src = &p->comms[i];
    df_abi_comm *r = &k->comms[j];
    if (src->segment_count == 0 || src->segment_id >= src->segment_count)
      return df_status_errorf(DF_EINVAL,
                              "comm %u (%s) segment_id %u must be below segment_count %u "
                              "(at least 1)",
                              i, df_comm_kind_name(src->kind), src->segment_id,
                              src->segment_count);
    bool hbm = df_comm_kind_is_hbm(src->kind);
    r->kind = (uint32_t)src->kind;
    r->src_slot_id = src->src_slot;
    r->dst_slot_id = src->dst_slot;
    r->peer_cta_rank = peer_rank(p, src);
    r->barrier_phase = b->comm_phase[i];
    if (hbm) {
      r->flag_index = reuse ? 0 : DF_SENTINEL;
      r->flag_epoch = src->flag_epoch;
      if (reuse) { /* one shared flag: epochs by first appearance of a key */
        df_key5 key = df_comm_key(src);
        uint32_t e = df_key5map_put(&epochs, &key, next_epoch);
        r->flag_epoch = e == DF_SENTINEL ? next_epoch++ : e;
      }
    } else {
      r->flag_index = b->comm_ack[i];
      r->flag_epoch = r->barrier_phase;
    }
    bool hbm_recv = src->kind == DF_COMM_HBM_RECV || src->kind == DF_COMM_HBM_RECV_ISSUE ||
                    src->kind == DF_COMM_HBM_RECV_WAIT;
    r->barrier_index = hbm_recv ? b->comm_barrier[i] : DF_SENTINEL;
    r->byte_offset = src->byte_offset;
    r->byte_count = src->byte_count;
    r->segment_id = src->segment_id;
    r->segment_count = src->segment_count;
  }
  return df_status_ok();
}
