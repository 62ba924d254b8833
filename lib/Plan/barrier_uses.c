/* Barrier planning analysis (REFERENCE 3.1-3.6): match async receives
   with their sends, group them into live ranges, and find which live
   ranges of one consumer SM overlap in time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "barrier_internal.h"

#define KEY_FMT "(%u, %u, %u, %u, %u)"
#define KEY_ARGS(c) (c)->src_instr, (c)->dst_instr, (c)->src_slot, (c)->dst_slot, (c)->segment_id

static bool is_send(df_comm_kind k) {
  return k == DF_COMM_CLUSTER_SEND || k == DF_COMM_HBM_SEND;
}

/* Receives that own a barrier interval (not HBM_RECV_ISSUE). */
static bool is_async_recv(df_comm_kind k) {
  return k == DF_COMM_CLUSTER_RECV || k == DF_COMM_HBM_RECV || k == DF_COMM_HBM_RECV_WAIT;
}

static df_status check_comm(const df_plan *p, uint32_t i) {
  const df_comm *c = &p->comms[i];
  uint32_t n = p->instr_count;
  if (c->kind == DF_COMM_NONE || (unsigned)c->kind > DF_COMM_HBM_RECV_WAIT)
    return df_status_errorf(DF_EINVAL, "comm %u has invalid kind %u", i, (unsigned)c->kind);
  if (c->src_instr >= n || c->dst_instr >= n)
    return df_status_errorf(DF_EINVAL, "comm %u (%s) names instruction %u -> %u, plan has %u",
                            i, df_comm_kind_name(c->kind), c->src_instr, c->dst_instr, n);
  uint32_t d = df_comm_dispatch(c);
  if (d >= n)
    return df_status_errorf(DF_EINVAL,
                            "comm dispatch instruction ids are not in the instruction plan: "
                            "comm %u (%s) names instruction %u, plan has %u",
                            i, df_comm_kind_name(c->kind), d, n);
  if (c->src_slot >= p->slot_count || c->dst_slot >= p->slot_count)
    return df_status_errorf(DF_EINVAL, "comm %u (%s) names slot %u -> %u, plan has %u slots",
                            i, df_comm_kind_name(c->kind), c->src_slot, c->dst_slot,
                            p->slot_count);
  if (c->producer_sm >= p->topology.sm_count || c->consumer_sm >= p->topology.sm_count)
    return df_status_errorf(DF_EINVAL,
                            "comm %u (%s) connects SM %u -> %u, outside topology "
                            "(sm_count=%u)",
                            i, df_comm_kind_name(c->kind), c->producer_sm, c->consumer_sm,
                            p->topology.sm_count);
  return df_status_ok();
}

/* Index sends by transfer key (REFERENCE 3.1). */
static df_status index_sends(const df_plan *p, df_bar_analysis *an) {
  for (uint32_t i = 0; i < p->comm_count; i++) {
    DF_TRY(check_comm(p, i));
    const df_comm *c = &p->comms[i];
    if (!is_send(c->kind))
      continue;
    df_key5 k = df_comm_key(c);
    uint32_t prev = df_key5map_put(&an->sends, &k, i);
    if (prev != DF_SENTINEL)
      return df_status_errorf(DF_EINVAL,
                              "duplicate async send transfer " KEY_FMT
                              ": comms %u (%s) and %u (%s)",
                              KEY_ARGS(c), prev, df_comm_kind_name(p->comms[prev].kind), i,
                              df_comm_kind_name(c->kind));
  }
  return df_status_ok();
}

/* Match every async receive with its send (REFERENCE 3.2). */
static df_status match_receives(const df_plan *p, const uint8_t *skip, df_arena *a,
                                df_bar_analysis *an) {
  an->uses = df_arena_array(a, p->comm_count, sizeof *an->uses);
  if (!an->uses)
    return DF_ARENA_OOM("barrier uses");
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *r = &p->comms[i];
    if (!is_async_recv(r->kind) || (skip && skip[i]))
      continue;
    df_comm_kind want = r->kind == DF_COMM_CLUSTER_RECV ? DF_COMM_CLUSTER_SEND : DF_COMM_HBM_SEND;
    df_key5 k = df_comm_key(r);
    /* schedulers emit each send right before its receive */
    uint32_t s = i > 0 && p->comms[i - 1].kind == want &&
                         df_key5_equal(&(df_key5){{p->comms[i - 1].src_instr,
                                                   p->comms[i - 1].dst_instr,
                                                   p->comms[i - 1].src_slot,
                                                   p->comms[i - 1].dst_slot,
                                                   p->comms[i - 1].segment_id}},
                                       &k)
                     ? i - 1
                     : df_key5map_get(&an->sends, &k);
    if (s == DF_SENTINEL || p->comms[s].kind != want)
      return df_status_errorf(DF_EINVAL, "%s comm %u has no matching %s: transfer " KEY_FMT,
                              df_comm_kind_name(r->kind), i, df_comm_kind_name(want),
                              KEY_ARGS(r));
    if (an->use_of[s] != DF_SENTINEL)
      return df_status_errorf(DF_EINVAL,
                              "duplicate async receive transfer " KEY_FMT
                              ": comms %u and %u",
                              KEY_ARGS(r), an->uses[an->use_of[s]].recv, i);
    const df_comm *sc = &p->comms[s];
    uint32_t sd = df_comm_dispatch(sc), rd = df_comm_dispatch(r);
    if (p->instrs[sd].sm != sc->producer_sm)
      return df_status_errorf(DF_EINVAL,
                              "%s comm %u is dispatched by instruction %u on SM %u, but its "
                              "producer SM is %u",
                              df_comm_kind_name(sc->kind), s, sd, p->instrs[sd].sm,
                              sc->producer_sm);
    if (p->instrs[rd].sm != r->consumer_sm)
      return df_status_errorf(DF_EINVAL,
                              "%s comm %u is dispatched by instruction %u on SM %u, but its "
                              "consumer SM is %u",
                              df_comm_kind_name(r->kind), i, rd, p->instrs[rd].sm,
                              r->consumer_sm);
    df_bar_use *u = &an->uses[an->use_count];
    u->send = s;
    u->recv = i;
    u->send_node = sd;
    u->recv_node = rd;
    u->sm = r->consumer_sm;
    u->slot = r->dst_slot;
    u->lane = r->kind == DF_COMM_CLUSTER_RECV ? 0 : 1;
    an->use_of[s] = an->use_of[i] = an->use_count++;
  }
  for (uint32_t i = 0; i < p->comm_count; i++)
    if (p->comms[i].kind == DF_COMM_CLUSTER_SEND && an->use_of[i] == DF_SENTINEL)
      return df_status_errorf(DF_EINVAL,
                              "cluster sends have no matching receive intervals: comm %u "
                              "transfer " KEY_FMT,
                              i, KEY_ARGS(&p->comms[i]));
  return df_status_ok();
}

/* Stable counting sort of uses by (sm, slot, lane): live-range ids follow
   that order (REFERENCE 3.3). */
static df_status sort_uses(const df_plan *p, df_arena *a, df_bar_analysis *an) {
  uint32_t n = an->use_count;
  if (n < 2)
    return df_status_ok();
  uint64_t k1 = (uint64_t)p->slot_count * 2, k2 = p->topology.sm_count;
  uint32_t *cnt = df_arena_array(a, (k1 > k2 ? k1 : k2) + 1, sizeof(uint32_t));
  df_bar_use *tmp = df_arena_array(a, n, sizeof *tmp);
  if (!cnt || !tmp)
    return DF_ARENA_OOM("barrier use order");
  df_bar_use *src = an->uses, *dst = tmp;
  for (int pass = 0; pass < 2; pass++) {
    uint64_t range = pass == 0 ? k1 : k2;
    memset(cnt, 0, sizeof(uint32_t) * (range + 1));
    for (uint32_t i = 0; i < n; i++)
      cnt[(pass == 0 ? src[i].slot * 2 + src[i].lane : src[i].sm) + 1]++;
    for (uint64_t b = 0; b < range; b++)
      cnt[b + 1] += cnt[b];
    for (uint32_t i = 0; i < n; i++)
      dst[cnt[pass == 0 ? src[i].slot * 2 + src[i].lane : src[i].sm]++] = src[i];
    df_bar_use *t = src;
    src = dst;
    dst = t;
  }
  /* two passes: the result is back in an->uses */
  for (uint32_t i = 0; i < n; i++)
    an->use_of[an->uses[i].send] = an->use_of[an->uses[i].recv] = i;
  return df_status_ok();
}

static df_status build_live_ranges(df_arena *a, df_bar_analysis *an) {
  an->lr_first = df_arena_array(a, (uint64_t)an->use_count + 1, sizeof(uint32_t));
  if (!an->lr_first)
    return DF_ARENA_OOM("live ranges");
  an->lr_count = 0;
  for (uint32_t i = 0; i < an->use_count; i++) {
    const df_bar_use *u = &an->uses[i], *q = i ? &an->uses[i - 1] : NULL;
    if (!q || q->sm != u->sm || q->slot != u->slot || q->lane != u->lane)
      an->lr_first[an->lr_count++] = i;
  }
  an->lr_first[an->lr_count] = an->use_count;
  return df_status_ok();
}

df_status df_bar_analyse(const df_plan *p, const uint8_t *skip, df_arena *a,
                         df_bar_analysis *an) {
  memset(an, 0, sizeof *an);
  for (uint32_t i = 0; i < p->instr_count; i++)
    if (p->instrs[i].sm >= p->topology.sm_count)
      return df_status_errorf(DF_EINVAL,
                              "instruction %u is placed on SM %u, outside topology "
                              "(sm_count=%u)",
                              i, p->instrs[i].sm, p->topology.sm_count);
  uint32_t sends = 0;
  for (uint32_t i = 0; i < p->comm_count; i++)
    sends += is_send(p->comms[i].kind);
  an->use_of = df_arena_sentinels(a, p->comm_count);
  if (!an->use_of || !df_key5map_init(&an->sends, a, sends))
    return DF_ARENA_OOM("the send index");
  DF_TRY(index_sends(p, an));
  DF_TRY(match_receives(p, skip, a, an));
  DF_TRY(sort_uses(p, a, an));
  DF_TRY(build_live_ranges(a, an));
  /* send dispatch -> receive dispatch edges; receive dispatches are the
     only nodes reachability is asked from */
  uint32_t n = an->use_count;
  df_hb_edge *edges = df_arena_array(a, n, sizeof *edges);
  uint32_t *queries = df_arena_array(a, n, sizeof(uint32_t));
  df_bar_probe *pr = df_arena_array(a, n, sizeof *pr);
  if (!edges || !queries || !pr)
    return DF_ARENA_OOM("barrier use edges");
  for (uint32_t i = 0; i < n; i++) {
    edges[i].from = an->uses[i].send_node;
    edges[i].to = an->uses[i].recv_node;
    queries[i] = an->uses[i].recv_node;
  }
  /* Phases compare logical transfers that never overlap, so every send
     of one happens before every send of the other and any topological
     order ranks them alike, unless a transfer's segments are dispatched
     by different instructions: only then is the reference's exact
     min-heap order worth its cost. */
  bool exact = false;
  for (uint32_t i = 0; i < n && !exact; i++)
    exact = p->comms[an->uses[i].send].dispatch_instr != DF_SENTINEL ||
            p->comms[an->uses[i].recv].dispatch_instr != DF_SENTINEL;
  DF_TRY(df_hb_build(p, edges, n, queries, n, exact, a, &an->hb));
  const df_hb *h = &an->hb;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t s = an->uses[i].send_node, r = an->uses[i].recv_node;
    pr[i].send_row = h->clocks + (uint64_t)h->version[s] * h->col_count;
    pr[i].send_col = h->col[h->chain[s]];
    pr[i].send_pos1 = h->pos[s] + 1;
    pr[i].recv_col = h->col[h->chain[r]];
    pr[i].recv_pos1 = h->pos[r] + 1;
  }
  an->probes = pr;
  return df_status_ok();
}
