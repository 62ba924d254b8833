/* The happens-before relation of a plan (REFERENCE 3.4), internal to
   lib/Plan. Nodes are instruction ids; edges are consecutive queue
   entries, every comm's source -> target instruction, caller-given edges
   (send dispatch -> receive dispatch of each transfer) and each slot's
   producer -> every instruction reading it. Self edges are ignored.

   Reachability is answered with vector clocks over chains: every queue
   is a chain (queue order is a total order), every instruction in no
   queue is a chain of its own. Only the chains holding a "query node"
   get a clock column, and only instructions with a cross-chain in-edge
   store a clock, so memory is (such instructions) x (query chains) words
   rather than n^2 bits. */
#ifndef DF_PLAN_HAPPENS_BEFORE_H
#define DF_PLAN_HAPPENS_BEFORE_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "df/plan.h"

typedef struct df_hb_edge {
  uint32_t from, to;
} df_hb_edge;

typedef struct df_hb {
  uint32_t node_count;
  uint32_t *topo_pos; /* position of each node in the topological order */
  uint32_t *order;    /* nodes in that order */
  uint32_t *chain;    /* chain of each node */
  uint32_t *pos;      /* position in its chain */
  uint32_t *version;  /* clock row of each node (0 = empty clock) */
  uint32_t *col;      /* per chain: clock column or DF_SENTINEL */
  uint32_t chain_count, col_count;
  uint32_t *clocks;   /* rows of col_count words: 1 + latest position on
                         the column's chain among the ancestors, 0 none */
} df_hb;

/* Builds the relation in `arena` (released by the caller); query_nodes
   are the nodes `a` that df_hb_le will be asked about. Fails on a cycle,
   on ids out of range and on instructions queued twice. `exact` asks for
   the reference's topological order (Kahn, smallest ready id first);
   otherwise any topological order may be used, which is cheaper. */
df_status df_hb_build(const df_plan *p, const df_hb_edge *extra, uint32_t extra_count,
                      const uint32_t *query_nodes, uint32_t query_count, bool exact,
                      df_arena *arena, df_hb *out);

/* Clock entry of node b for column c (ancestors-or-self of b). */
static inline uint32_t df_hb_clock(const df_hb *h, uint32_t b, uint32_t c) {
  uint32_t v = h->clocks[(uint64_t)h->version[b] * h->col_count + c];
  if (h->col[h->chain[b]] == c && v < h->pos[b] + 1)
    v = h->pos[b] + 1;
  return v;
}

/* Queue neighbours of a node (DF_SENTINEL at the ends / off queue). */
static inline uint32_t df_hb_queue_prev(const df_plan *p, const df_hb *h, uint32_t z) {
  uint32_t ch = h->chain[z];
  return ch < p->topology.sm_count && h->pos[z] > 0
             ? p->queue_ids[p->queue_offsets[ch] + h->pos[z] - 1]
             : DF_SENTINEL;
}

static inline uint32_t df_hb_queue_next(const df_plan *p, const df_hb *h, uint32_t z) {
  uint32_t ch = h->chain[z];
  return ch < p->topology.sm_count && h->pos[z] + 1 < p->queue_lengths[ch]
             ? p->queue_ids[p->queue_offsets[ch] + h->pos[z] + 1]
             : DF_SENTINEL;
}

/* Topological orders into h->order / h->topo_pos over the in-edge CSR
   (in_src holes are DF_SENTINEL); both fail on a cycle. The exact one is
   the reference's Kahn order popping the smallest ready id; the chain
   order walks the queues and is linear. */
df_status df_hb_min_heap_order(const df_plan *p, const uint32_t *in_off,
                               const uint32_t *in_src, df_arena *a, df_hb *h);
df_status df_hb_chain_order(const df_plan *p, const uint32_t *in_off, const uint32_t *in_src,
                            df_arena *a, df_hb *h);

/* a <=hb b: a == b or b is reachable from a. `a` must lie on the chain of
   a query node; otherwise only a == b is reported (the conservative
   answer: callers treat "not ordered" as overlapping). */
static inline bool df_hb_le(const df_hb *h, uint32_t a, uint32_t b) {
  if (a == b)
    return true;
  uint32_t c = h->col[h->chain[a]];
  if (c == DF_SENTINEL)
    return false;
  return df_hb_clock(h, b, c) >= h->pos[a] + 1;
}

#endif
