/* Source-lifetime actions (REFERENCE 5.4, args word 14): a cluster send
   leaves a bulk copy reading its source slot after the instruction ends;
   before an instruction overwrites such a source it must wait for the
   copy. Walk each queue keeping the newest send group and the older ones:
   writing over the newest -> wait for all (1); over only older ones ->
   wait keeping the newest (2), or all (1) when the next instruction
   overwrites the newest group but not this one's own sends. */
#include <string.h>

#include "pack_internal.h"

/* A byte range in one address space: 0 shared slot arena, 1 scratch;
   direct-global slots live in global memory and are never a source of
   a cluster bulk copy, so they have no range. */
typedef struct range {
  uint32_t space;
  uint64_t lo, hi;
} range;

typedef struct ranges {
  range *r;
  uint32_t n;
} ranges;

static void add_slot(const df_packed *k, uint32_t slot, uint32_t off, uint32_t count,
                     ranges *out) {
  if (slot >= k->slot_count)
    return;
  const df_abi_slot *s = &k->slots[slot];
  if (s->flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL)
    return;
  uint64_t lo = (uint64_t)s->shared_offset + (count ? off : 0);
  uint64_t hi = count ? lo + count : (uint64_t)s->shared_offset + s->bytes;
  if (hi <= lo)
    return;
  out->r[out->n++] = (range){(s->flags & DF_SLOT_FLAG_SCRATCH_BACKED) ? 1u : 0u, lo, hi};
}

static bool overlaps(const ranges *a, const ranges *b) {
  for (uint32_t i = 0; i < a->n; i++)
    for (uint32_t j = 0; j < b->n; j++)
      if (a->r[i].space == b->r[j].space && a->r[i].lo < b->r[j].hi && b->r[j].lo < a->r[i].hi)
        return true;
  return false;
}

/* Slots packed position `pi` writes: its outputs (every part of a fused
   instruction: the guard runs once, before the first) and its receive
   targets. */
static void writes_of(const df_pack_ctx *c, uint32_t pi, ranges *w) {
  const df_packed *k = c->k;
  w->n = 0;
  for (uint32_t id = k->pack_order[pi]; id != DF_SENTINEL; id = c->next_part[id])
    if (c->p->instrs[id].output_slot != DF_SENTINEL)
      add_slot(k, c->p->instrs[id].output_slot, 0, 0, w);
  for (uint32_t j = c->comm_first[pi]; j < c->comm_first[pi + 1]; j++) {
    const df_comm *m = &c->p->comms[c->comm_order[j]];
    if (df_comm_kind_is_recv(m->kind))
      add_slot(k, m->dst_slot, m->byte_offset, m->byte_count, w);
  }
}

static void sends_of(const df_pack_ctx *c, uint32_t pi, ranges *s) {
  s->n = 0;
  for (uint32_t j = c->comm_first[pi]; j < c->comm_first[pi + 1]; j++) {
    const df_comm *m = &c->p->comms[c->comm_order[j]];
    if (m->kind == DF_COMM_CLUSTER_SEND)
      add_slot(c->k, m->src_slot, m->byte_offset, m->byte_count, s);
  }
}

df_status df_pack_source_lifetimes(df_pack_ctx *c) {
  df_packed *k = c->k;
  bool any = false; /* without cluster sends every action is 0 */
  for (uint32_t i = 0; i < c->p->comm_count && !any; i++)
    any = c->p->comms[i].kind == DF_COMM_CLUSTER_SEND;
  if (!any)
    return df_status_ok();
  uint64_t cap = (uint64_t)k->comm_count + DF_FUSE_MAX_PARTS;
  ranges w = {df_arena_array(c->a, cap, sizeof(range)), 0};
  ranges next = {df_arena_array(c->a, cap, sizeof(range)), 0};
  ranges own = {df_arena_array(c->a, cap, sizeof(range)), 0};
  ranges newest = {df_arena_array(c->a, cap, sizeof(range)), 0};
  ranges older = {df_arena_array(c->a, cap, sizeof(range)), 0};
  if (!w.r || !next.r || !own.r || !newest.r || !older.r)
    return DF_ARENA_OOM("source lifetimes");
  for (uint32_t s = 0; s < k->topology.sm_count; s++) {
    uint32_t q0 = k->queue_offsets[s], q1 = q0 + k->queue_lengths[s];
    newest.n = older.n = 0;
    for (uint32_t pi = q0; pi < q1; pi++) {
      sends_of(c, pi, &own);
      uint32_t action = DF_SOURCE_WAIT_NONE;
      if (newest.n == 0 && older.n == 0) {
        /* nothing in flight: no wait, writes need not be looked at */
      } else if (writes_of(c, pi, &w), overlaps(&w, &newest)) {
        action = DF_SOURCE_WAIT_ALL;
      } else if (overlaps(&w, &older)) {
        action = DF_SOURCE_WAIT_KEEP_NEWEST;
        if (pi + 1 < q1) {
          writes_of(c, pi + 1, &next);
          if (overlaps(&next, &newest) && !overlaps(&next, &own))
            action = DF_SOURCE_WAIT_ALL;
        }
      }
      if (action == DF_SOURCE_WAIT_ALL)
        newest.n = older.n = 0;
      else if (action == DF_SOURCE_WAIT_KEEP_NEWEST)
        older.n = 0;
      if (own.n) { /* demote the newest group, this one becomes newest */
        memcpy(older.r + older.n, newest.r, sizeof(range) * newest.n);
        older.n += newest.n;
        memcpy(newest.r, own.r, sizeof(range) * own.n);
        newest.n = own.n;
      }
      const df_abi_instr *r = &k->instrs[pi];
      if (r->arg_offset != DF_SENTINEL)
        k->args[r->arg_offset / sizeof(df_abi_args)].reserved0 = action;
    }
  }
  return df_status_ok();
}
