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
  uint32_t *order;    /* nodes in topological order (min-heap on id) */
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
   on ids out of range and on instructions queued twice. */
df_status df_hb_build(const df_plan *p, const df_hb_edge *extra, uint32_t extra_count,
                      const uint32_t *query_nodes, uint32_t query_count,
                      df_arena *arena, df_hb *out);

/* Clock entry of node b for column c (ancestors-or-self of b). */
static inline uint32_t df_hb_clock(const df_hb *h, uint32_t b, uint32_t c) {
  uint32_t v = h->clocks[(uint64_t)h->version[b] * h->col_count + c];
  if (h->col[h->chain[b]] == c && v < h->pos[b] + 1)
    v = h->pos[b] + 1;
  return v;
}

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
