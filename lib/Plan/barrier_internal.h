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

typedef struct df_bar_analysis {
  df_key5map sends;      /* transfer key -> send comm index */
  uint32_t *use_of_send; /* per comm: use index of a matched send, else S */
  uint32_t use_count;
  df_bar_use *uses;      /* sorted by live-range triple */
  uint32_t lr_count;
  uint32_t *lr_first;    /* lr_count + 1 offsets into uses */
  uint32_t *adj_off;     /* lr_count + 1 offsets into adj */
  uint32_t *adj;         /* interfering live ranges (both directions) */
  df_hb hb;
} df_bar_analysis;

/* skip[comm] != 0 marks signal-only receives (NULL: none). Allocates in
   `arena`; `alloc` is used for temporary growth and fully released. */
df_status df_bar_analyse(const df_plan *p, const uint8_t *skip, df_arena *arena,
                         const df_allocator *alloc, df_bar_analysis *out);

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
