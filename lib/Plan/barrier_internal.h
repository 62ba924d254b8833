/* Shared analysis of barrier planning (REFERENCE 3.1-3.6), internal to
   lib/Plan: transfer keys, async receive uses, live ranges and their
   interference. barriers.c colours it; the checker re-derives it. */
#ifndef DF_PLAN_BARRIER_INTERNAL_H
#define DF_PLAN_BARRIER_INTERNAL_H

#include "arena.h"
#include "happens_before.h"
#include "keymap.h"

/* (source instr, target instr, source slot, target slot, segment). */
static inline df_key5 df_comm_key(const df_comm *c) {
  df_key5 k = {{c->src_instr, c->dst_instr, c->src_slot, c->dst_slot, c->segment_id}};
  return k;
}

/* Same logical transfer: the key without its segment. */
static inline int df_comm_same_logical(const df_comm *a, const df_comm *b) {
  return a->src_instr == b->src_instr && a->dst_instr == b->dst_instr &&
         a->src_slot == b->src_slot && a->dst_slot == b->dst_slot;
}

/* Global alias key of a slot: its global storage id, else its id. */
static inline uint32_t df_slot_global_alias(const df_slot *s) {
  return s->global_storage != DF_SENTINEL ? s->global_storage : s->id;
}

/* One async receive matched with its send. */
typedef struct df_bar_use {
  uint32_t send, recv;           /* comm indices */
  uint32_t send_node, recv_node; /* their dispatch instructions */
  uint32_t sm, slot, lane;       /* live-range triple; lane 0 = cluster
                                    (the reference's -1), 1 = HBM (0) */
} df_bar_use;

/* What an overlap test needs of one use, gathered once. */
typedef struct df_bar_probe {
  const uint32_t *send_row; /* clock row of the send dispatch */
  uint32_t send_col, send_pos1;
  uint32_t recv_col, recv_pos1;
} df_bar_probe;

/* recv(u) <=hb send(v) */
static inline bool df_bar_recv_before_send(const df_bar_probe *u, const df_bar_probe *v) {
  uint32_t val = v->send_row[u->recv_col];
  if (v->send_col == u->recv_col && val < v->send_pos1)
    val = v->send_pos1;
  return val >= u->recv_pos1;
}

/* REFERENCE 3.5: uses overlap unless one's receive happens before the
   other's send. */
static inline bool df_bar_overlap(const df_bar_probe *u, const df_bar_probe *v) {
  return !df_bar_recv_before_send(u, v) && !df_bar_recv_before_send(v, u);
}

typedef struct df_bar_analysis {
  df_key5map sends;      /* transfer key -> send comm index */
  uint32_t *use_of;      /* per comm: use index of a matched send or
                            receive, else S */
  uint32_t use_count;
  df_bar_use *uses;      /* sorted by live-range triple */
  df_bar_probe *probes;  /* per use */
  uint32_t lr_count;
  uint32_t *lr_first;    /* lr_count + 1 offsets into uses */
  df_hb hb;
} df_bar_analysis;

/* skip[comm] != 0 marks signal-only receives (NULL: none). Allocates in
   `arena`. Interference is built per consumer SM by df_bar_graph_build. */
df_status df_bar_analyse(const df_plan *p, const uint8_t *skip, df_arena *arena,
                         df_bar_analysis *out);

/* End of the consumer-SM group of live ranges starting at lr0. */
static inline uint32_t df_bar_sm_end(const df_bar_analysis *an, uint32_t lr0) {
  uint32_t sm = an->uses[an->lr_first[lr0]].sm, lr1 = lr0 + 1;
  while (lr1 < an->lr_count && an->uses[an->lr_first[lr1]].sm == sm)
    lr1++;
  return lr1;
}

/* Interference among the live ranges of one consumer SM (REFERENCE
   3.6): bit rows for up to DF_BAR_DENSE_MAX live ranges, adjacency lists
   beyond. Buffers are reused from SM to SM. */
#define DF_BAR_DENSE_MAX 4096u

typedef struct df_bar_graph {
  uint32_t lr0, n;   /* global id of local live range 0; count */
  uint32_t words;    /* words per bit row; 0 when lists are used */
  uint64_t *rows;    /* n x words */
  uint32_t *off;     /* lists: n + 1 offsets into adj */
  uint32_t *adj;     /* lists: local ids */
  uint32_t *deg;     /* per local live range */
  uint32_t max_deg;
  /* reusable storage */
  const df_allocator *alloc;
  void *buf[8];
  uint32_t cap[8];
} df_bar_graph;

void df_bar_graph_init(df_bar_graph *g, const df_allocator *alloc);
void df_bar_graph_free(df_bar_graph *g);
/* Builds the graph of live ranges [lr0, lr1), one consumer SM; fails
   when two transfers into one live range overlap (REFERENCE 3.5). */
df_status df_bar_graph_build(const df_plan *p, const df_bar_analysis *an, uint32_t lr0,
                             uint32_t lr1, df_bar_graph *g);

/* Runs BODY with `y` bound to each neighbour of local live range x. */
#define DF_BAR_FOR_NEIGHBOUR(g, x, y, BODY)                                    \
  do {                                                                         \
    if ((g)->words) {                                                          \
      const uint64_t *row_ = (g)->rows + (uint64_t)(x) * (g)->words;           \
      for (uint32_t w_ = 0; w_ < (g)->words; w_++)                             \
        for (uint64_t b_ = row_[w_]; b_; b_ &= b_ - 1) {                       \
          uint32_t y = w_ * 64 + (uint32_t)__builtin_ctzll(b_);                \
          BODY                                                                 \
        }                                                                      \
    } else {                                                                   \
      for (uint32_t e_ = (g)->off[x]; e_ < (g)->off[(x) + 1]; e_++) {          \
        uint32_t y = (g)->adj[e_];                                             \
        BODY                                                                   \
      }                                                                        \
    }                                                                          \
  } while (0)

/* Signal-only receives under a direct-global mask (REFERENCE 3.2). */
static inline bool df_recv_signal_only(const df_plan *p, const df_comm *c,
                                       const uint8_t *direct) {
  if (!direct || (c->kind != DF_COMM_HBM_RECV && c->kind != DF_COMM_HBM_RECV_WAIT))
    return false;
  if (c->src_slot >= p->slot_count || c->dst_slot >= p->slot_count)
    return false;
  return direct[c->src_slot] && direct[c->dst_slot] &&
         df_slot_global_alias(&p->slots[c->src_slot]) ==
             df_slot_global_alias(&p->slots[c->dst_slot]);
}

#endif
