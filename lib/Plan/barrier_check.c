/* df_barrier_alloc_check (REFERENCE 3.8 require_valid): re-derive the
   live ranges and their interference and check that an allocation
   colours them legally, completely, with count = max + 1. */
#include <string.h>

#include "barrier_internal.h"

static df_status check_live_ranges(const df_plan *p, const df_barrier_alloc *b,
                                   const df_bar_analysis *an, uint32_t *lr_colour,
                                   uint32_t *max_plus_one) {
  *max_plus_one = 0;
  for (uint32_t lr = 0; lr < an->lr_count; lr++) {
    const df_bar_use *first = &an->uses[an->lr_first[lr]];
    uint32_t c = b->comm_barrier[first->recv];
    if (c == DF_SENTINEL)
      return df_status_errorf(DF_EINVAL,
                              "barrier allocation leaves %s comm %u (target slot %u on SM %u) "
                              "without a barrier",
                              df_comm_kind_name(p->comms[first->recv].kind), first->recv,
                              first->slot, first->sm);
    if (c >= b->barrier_count)
      return df_status_errorf(DF_EINVAL,
                              "barrier allocation gives comm %u barrier %u, outside "
                              "barrier_count %u",
                              first->recv, c, b->barrier_count);
    for (uint32_t u = an->lr_first[lr] + 1; u < an->lr_first[lr + 1]; u++)
      if (b->comm_barrier[an->uses[u].recv] != c)
        return df_status_errorf(DF_EINVAL,
                                "barrier allocation splits the live range of target slot "
                                "%u on SM %u across barriers %u and %u",
                                first->slot, first->sm, c, b->comm_barrier[an->uses[u].recv]);
    lr_colour[lr] = c;
    if (c + 1 > *max_plus_one)
      *max_plus_one = c + 1;
  }
  return df_status_ok();
}

static df_status check(const df_plan *p, const df_barrier_alloc *b, df_arena *a) {
  /* receives left without a barrier between two slots of one global alias
     are taken as the signal-only receives of direct-global slots */
  uint8_t *skip = df_arena_zero(a, p->comm_count, 1);
  if (!skip)
    return DF_ARENA_OOM("barrier check");
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    if ((c->kind == DF_COMM_HBM_RECV || c->kind == DF_COMM_HBM_RECV_WAIT) &&
        b->comm_barrier[i] == DF_SENTINEL && c->src_slot < p->slot_count &&
        c->dst_slot < p->slot_count &&
        df_slot_global_alias(&p->slots[c->src_slot]) ==
            df_slot_global_alias(&p->slots[c->dst_slot]))
      skip[i] = 1;
  }
  df_bar_analysis an;
  DF_TRY(df_bar_analyse(p, skip, a, &an));
  uint32_t *lr_colour = df_arena_array(a, an.lr_count, sizeof(uint32_t));
  if (!lr_colour)
    return DF_ARENA_OOM("barrier check");
  uint32_t max_plus_one;
  DF_TRY(check_live_ranges(p, b, &an, lr_colour, &max_plus_one));
  df_bar_graph g;
  df_bar_graph_init(&g, a->alloc);
  df_status st = df_status_ok();
  for (uint32_t lr0 = 0; lr0 < an.lr_count && st.code == DF_OK;) {
    uint32_t lr1 = df_bar_sm_end(&an, lr0);
    st = df_bar_graph_build(p, &an, lr0, lr1, &g);
    for (uint32_t x = 0; x < g.n && st.code == DF_OK; x++)
      DF_BAR_FOR_NEIGHBOUR(&g, x, y, {
        if (x < y && lr_colour[lr0 + x] == lr_colour[lr0 + y] && st.code == DF_OK)
          st = df_status_errorf(DF_EINVAL,
                                "barrier allocation gives the overlapping live ranges of "
                                "slots %u and %u on SM %u the same barrier %u",
                                an.uses[an.lr_first[lr0 + x]].slot,
                                an.uses[an.lr_first[lr0 + y]].slot,
                                an.uses[an.lr_first[lr0 + x]].sm, lr_colour[lr0 + x]);
      });
    lr0 = lr1;
  }
  df_bar_graph_free(&g);
  DF_TRY(st);
  if (b->barrier_count != max_plus_one)
    return df_status_errorf(DF_EINVAL,
                            "barrier_count %u is not the largest barrier index + 1 (%u)",
                            b->barrier_count, max_plus_one);
  /* slot view: cluster-lane live range first, else the HBM one */
  uint32_t *want = df_arena_sentinels(a, p->slot_count);
  if (!want)
    return DF_ARENA_OOM("barrier check");
  for (int lane = 1; lane >= 0; lane--)
    for (uint32_t lr = an.lr_count; lr-- > 0;)
      if ((int)an.uses[an.lr_first[lr]].lane == lane)
        want[an.uses[an.lr_first[lr]].slot] = lr_colour[lr];
  for (uint32_t s = 0; s < p->slot_count; s++)
    if (b->slot_barrier[s] != want[s])
      return df_status_errorf(DF_EINVAL,
                              "barrier allocation gives slot %u barrier %u, its receives use "
                              "barrier %u",
                              s, b->slot_barrier[s], want[s]);
  return df_status_ok();
}

df_status df_barrier_alloc_check(const df_plan *p, const df_barrier_alloc *b) {
  if (!p || !b)
    return df_status_errorf(DF_EINVAL, "barrier check expects a plan and an allocation");
  if (b->slot_count != p->slot_count || b->comm_count != p->comm_count)
    return df_status_errorf(DF_EINVAL,
                            "barrier allocation covers %u slots and %u comms, the plan has "
                            "%u and %u",
                            b->slot_count, b->comm_count, p->slot_count, p->comm_count);
  if ((p->slot_count && !b->slot_barrier) ||
      (p->comm_count && (!b->comm_barrier || !b->comm_phase || !b->comm_ack)))
    return df_status_errorf(DF_EINVAL, "barrier allocation has missing arrays");
  df_allocator al = df_allocator_or_default(&p->alloc);
  df_arena a;
  df_arena_init(&a, &al);
  df_status st = check(p, b, &a);
  df_arena_release(&a);
  return st;
}
