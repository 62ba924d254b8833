/* The instruction pool (docs/pool.md): a plan scheduled with pool
   leaves all its instructions in one region that every CTA claims items
   from at run time; each queue keeps only an OP_POOL record naming the
   region. An item is an instruction with the ones right after it on its
   queue that wait for nothing and read only the item's own outputs (a
   REDUCE's FINALIZE). Items are claimed in the order of a modelled list
   schedule (pool_order.c), which is topological: an item only ever waits
   for items claimed before it, which run on other CTAs or are done. The
   plan's placement stays the nominal one: it decided the slots, flags and
   barriers, which the rules below make independent of the CTA that runs
   an item. */
#include <string.h>

#include "df/split.h"
#include "pack_internal.h"

#define S DF_SENTINEL

typedef struct pool_state {
  df_packed *k;
  df_arena *a;
  uint32_t *group_of;      /* per packed instruction: group or S */
  uint32_t *slot_group;    /* per slot: group whose item writes it, or S */
  uint32_t *first;         /* per group: its first instruction (packed index) */
  uint32_t *size;          /* per group: instructions */
  uint32_t groups, stride, pooled;
} pool_state;

static const df_abi_args *args_of(const df_packed *k, const df_abi_instr *r) {
  return r->arg_offset == S ? NULL : &k->args[r->arg_offset / sizeof(df_abi_args)];
}

static bool fused(const df_abi_args *a) { return a && a->reserved1 > 1; }

/* A fused record's parts (docs/fusion.md): consecutive args records. */
static uint32_t parts_of(const df_packed *k, const df_abi_instr *r) {
  const df_abi_args *a = args_of(k, r);
  if (!a)
    return 0;
  uint32_t n = fused(a) ? a->reserved1 : 1, first = r->arg_offset / sizeof(df_abi_args);
  return (uint64_t)first + n <= k->arg_count ? n : 1;
}

static const df_abi_args *part_args(const df_packed *k, const df_abi_instr *r, uint32_t part) {
  return args_of(k, r) + part;
}

static bool receives(const df_packed *k, const df_abi_instr *r) {
  for (uint32_t j = r->comm_offset; j < r->comm_offset + r->comm_count; j++)
    if (df_comm_kind_is_recv((df_comm_kind)k->comms[j].kind))
      return true;
  return false;
}

/* A pooled instruction's receives only wait for flags (df_pool_receive_ok). */
static df_status check_receives(const df_packed *k, uint32_t pi) {
  const df_abi_instr *r = &k->instrs[pi];
  for (uint32_t j = r->comm_offset; j < r->comm_offset + r->comm_count; j++) {
    const df_abi_comm *c = &k->comms[j];
    if (df_comm_kind_is_recv((df_comm_kind)c->kind) && !df_pool_receive_ok(k, c))
      return df_status_errorf(DF_EINVAL,
                              "pool: instruction %u (plan %u) receives comm %u (%s) into "
                              "slot %u; a pooled instruction only waits for the flags of HBM "
                              "receives into direct-global slots, without barriers",
                              pi, k->pack_order[pi], j, df_comm_kind_name((df_comm_kind)c->kind),
                              c->dst_slot_id);
  }
  return df_status_ok();
}

/* An instruction joins the open group when it waits for nothing and reads
   only slots the group writes. */
static bool joins(const pool_state *s, const df_abi_instr *r, uint32_t g) {
  const df_abi_args *a = args_of(s->k, r);
  if (r->opcode == DF_ABI_OP_ITER || !a || fused(a) || a->input_slot_count == 0 ||
      receives(s->k, r))
    return false;
  for (uint32_t i = 0; i < a->input_slot_count; i++) {
    uint32_t slot = s->k->input_slots[a->input_slot_offset + i];
    if (slot >= s->k->slot_count || s->slot_group[slot] != g)
      return false;
  }
  return true;
}

static df_status add_member(pool_state *s, uint32_t pi, uint32_t g) {
  const df_abi_instr *r = &s->k->instrs[pi];
  s->group_of[pi] = g;
  s->size[g]++;
  s->pooled++;
  for (uint32_t part = 0; part < parts_of(s->k, r); part++) {
    const df_abi_args *a = part_args(s->k, r, part);
    if (a->output_slot == S)
      continue;
    if (a->output_slot >= s->k->slot_count)
      return df_status_errorf(DF_EINVAL, "pool: instruction %u writes slot %u of %u", pi,
                              a->output_slot, s->k->slot_count);
    s->slot_group[a->output_slot] = g;
  }
  return df_status_ok();
}

static df_status find_groups(pool_state *s) {
  df_packed *k = s->k;
  uint32_t n = k->instr_count;
  s->group_of = df_arena_sentinels(s->a, n);
  s->slot_group = df_arena_sentinels(s->a, k->slot_count ? k->slot_count : 1);
  s->first = df_arena_array(s->a, n ? n : 1, sizeof(uint32_t));
  s->size = df_arena_array(s->a, n ? n : 1, sizeof(uint32_t));
  if (!s->group_of || !s->slot_group || !s->first || !s->size)
    return DF_ARENA_OOM("the instruction pool");
  for (uint32_t q = 0; q < k->topology.sm_count; q++) {
    uint32_t open = S;
    for (uint32_t pi = k->queue_offsets[q]; pi < k->queue_offsets[q] + k->queue_lengths[q];
         pi++) {
      const df_abi_instr *r = &k->instrs[pi];
      if (r->opcode == DF_ABI_OP_EXIT)
        break; /* the queue's end */
      if (r->handler_id == S)
        return df_status_errorf(DF_EINVAL,
                                "pool: instruction %u (plan %u, opcode %u) runs no "
                                "handler; a pooled plan has handler instructions only",
                                pi, k->pack_order[pi], r->opcode);
      if (open != S && joins(s, r, open)) {
        DF_TRY(add_member(s, pi, open));
      } else {
        DF_TRY(check_receives(k, pi));
        open = s->groups++;
        s->first[open] = pi;
        s->size[open] = 0;
        DF_TRY(add_member(s, pi, open));
      }
      if (s->size[open] > s->stride)
        s->stride = s->size[open];
    }
  }
  return df_status_ok();
}

/* Whatever an item writes reaches other items through an HBM receive,
   and its flags are its own: items run anywhere, in claim order only. */
static df_status check_edges(const pool_state *s) {
  const df_packed *k = s->k;
  for (uint32_t pi = 0; pi < k->instr_count; pi++) {
    const df_abi_instr *r = &k->instrs[pi];
    for (uint32_t part = 0; part < parts_of(k, r); part++) {
      const df_abi_args *a = part_args(k, r, part);
      for (uint32_t i = 0; i < a->input_slot_count; i++) {
        uint32_t slot = k->input_slots[a->input_slot_offset + i];
        if (slot >= k->slot_count || s->slot_group[slot] == S ||
            s->slot_group[slot] == s->group_of[pi])
          continue;
        bool got = false;
        for (uint32_t j = r->comm_offset; j < r->comm_offset + r->comm_count && !got; j++)
          got = (k->comms[j].kind == DF_COMM_HBM_RECV ||
                 k->comms[j].kind == DF_COMM_HBM_RECV_WAIT) &&
                k->comms[j].dst_slot_id == slot;
        if (!got)
          return df_status_errorf(DF_EINVAL,
                                  "pool: instruction %u (plan %u) reads slot %u, written by the "
                                  "item starting at instruction %u, without an HBM receive "
                                  "(df-schedule pool=true places one)",
                                  pi, k->pack_order[pi], slot, s->first[s->slot_group[slot]]);
      }
    }
  }
  return df_status_ok();
}

static uint32_t send_flag(const df_packed *k, const df_abi_comm *c) {
  return c->flag_index != S ? c->flag_index : k->slots[c->dst_slot_id].flag_index;
}

/* An epoch orders one writer's releases; items of a pool run in any
   order, so no two instructions release the same flag. */
static df_status check_flags(const pool_state *s) {
  const df_packed *k = s->k;
  uint32_t flags = 0;
  for (uint32_t j = 0; j < k->comm_count; j++)
    if (k->comms[j].kind == DF_COMM_HBM_SEND && k->comms[j].dst_slot_id < k->slot_count) {
      uint32_t f = send_flag(k, &k->comms[j]);
      flags = f != S && f + 1 > flags ? f + 1 : flags;
    }
  uint32_t *writer = df_arena_sentinels(s->a, flags ? flags : 1);
  if (!writer)
    return DF_ARENA_OOM("the instruction pool's flags");
  for (uint32_t pi = 0; pi < k->instr_count; pi++) {
    const df_abi_instr *r = &k->instrs[pi];
    for (uint32_t j = r->comm_offset; j < r->comm_offset + r->comm_count; j++) {
      const df_abi_comm *c = &k->comms[j];
      if (c->kind != DF_COMM_HBM_SEND || c->dst_slot_id >= k->slot_count)
        continue;
      uint32_t f = send_flag(k, c);
      if (f == S)
        continue;
      if (writer[f] != S && writer[f] != pi)
        return df_status_errorf(DF_EINVAL,
                                "pool: flag %u is released by instructions %u and %u; pooled "
                                "plans need a flag per transfer (df-layout-slots "
                                "reuse-hbm-flags=false)",
                                f, writer[f], pi);
      writer[f] = pi;
    }
  }
  return df_status_ok();
}

/* The items' costs under the automatic split's model (df/split.h) and
   their producers, for df_pool_order. */
static double member_cost(const df_packed *k, uint32_t pi, const df_split_cost *m) {
  const df_abi_instr *r = &k->instrs[pi];
  double c = 0;
  for (uint32_t part = 0; part < parts_of(k, r); part++) {
    const df_abi_args *a = part_args(k, r, part);
    /* a later part's opcode is not recorded: one reading several inputs
       combines them, one reading one finalizes it */
    if (part == 0 && r->opcode == DF_ABI_OP_ITER)
      c += m->per_partial_us + (double)(a->range_end - a->range_begin) * m->per_unit_us;
    else if ((part == 0 && r->opcode == DF_ABI_OP_REDUCE) || a->input_slot_count > 1)
      c += m->reduce_us + a->input_slot_count * m->reduce_per_input_us;
    else
      c += m->finalize_us;
  }
  return c;
}

static df_status claim_order(pool_state *s, uint32_t *order) {
  const df_packed *k = s->k;
  const df_split_cost m = df_split_search_default().cost;
  double *cost = df_arena_array(s->a, s->groups, sizeof(double));
  uint32_t *off = df_arena_array(s->a, (uint64_t)s->groups + 1, sizeof(uint32_t));
  uint32_t *prods = df_arena_array(s->a, k->input_slot_count ? k->input_slot_count : 1,
                                   sizeof(uint32_t));
  if (!cost || !off || !prods)
    return DF_ARENA_OOM("the pool's order");
  uint32_t np = 0;
  for (uint32_t g = 0; g < s->groups; g++) {
    off[g] = np;
    cost[g] = 0;
    for (uint32_t m_ = 0; m_ < s->size[g]; m_++) {
      uint32_t pi = s->first[g] + m_;
      cost[g] += member_cost(k, pi, &m);
      const df_abi_instr *r = &k->instrs[pi];
      for (uint32_t part = 0; part < parts_of(k, r); part++) {
        const df_abi_args *a = part_args(k, r, part);
        for (uint32_t i = 0; i < a->input_slot_count; i++) {
          uint32_t sl = k->input_slots[a->input_slot_offset + i];
          uint32_t p = sl < k->slot_count ? s->slot_group[sl] : S;
          if (p == S || p == g)
            continue;
          if (np == k->input_slot_count) /* each input belongs to one args record */
            return df_status_errorf(DF_EINTERNAL, "pool: more producers than inputs");
          prods[np++] = p;
        }
      }
    }
  }
  off[s->groups] = np;
  df_pool_items it = {s->groups, k->topology.sm_count, cost, off, prods, m.hbm_edge_us};
  return df_pool_order(&it, s->a, order);
}

static df_status rebuild(pool_state *s, uint32_t *order) {
  df_packed *k = s->k;
  uint32_t sms = k->topology.sm_count;
  uint64_t count = (uint64_t)k->instr_count - s->pooled + sms + (uint64_t)s->groups * s->stride;
  if (count > UINT32_MAX / 2)
    return df_status_errorf(DF_EINVAL, "pool: %llu instructions do not fit the ABI",
                            (unsigned long long)count);
  df_abi_instr *in = df_alloc(&k->alloc, sizeof *in * (count ? count : 1));
  uint32_t *po = df_alloc(&k->alloc, sizeof *po * (count ? count : 1));
  if (!in || !po) {
    df_free(&k->alloc, in);
    df_free(&k->alloc, po);
    return df_status_errorf(DF_ENOMEM, "out of memory building the instruction pool");
  }
  uint32_t at = 0, counter = df_packed_data_flags(k);
  uint32_t pool_first = (uint32_t)(count - (uint64_t)s->groups * s->stride);
  for (uint32_t q = 0; q < sms; q++) {
    uint32_t q0 = k->queue_offsets[q], q1 = q0 + k->queue_lengths[q];
    k->queue_offsets[q] = at;
    in[at] = (df_abi_instr){DF_ABI_OP_POOL, S, s->stride, S, pool_first, 0, counter, s->groups};
    po[at++] = S;
    for (uint32_t pi = q0; pi < q1; pi++) {
      if (s->group_of[pi] != S)
        continue;
      in[at] = k->instrs[pi];
      po[at++] = k->pack_order[pi];
    }
    k->queue_lengths[q] = at - k->queue_offsets[q];
  }
  for (uint32_t i = 0; i < s->groups; i++) {
    uint32_t g = order[i], pi = s->first[g];
    for (uint32_t m = 0; m < s->stride; m++, pi++) {
      if (m < s->size[g]) {
        in[at] = k->instrs[pi];
        po[at++] = k->pack_order[pi];
      } else {
        in[at] = (df_abi_instr){DF_ABI_OP_EXIT, S, S, S, 0, 0, S, 0};
        po[at++] = S;
      }
    }
  }
  df_free(&k->alloc, k->instrs);
  df_free(&k->alloc, k->pack_order);
  k->instrs = in;
  k->pack_order = po;
  k->instr_count = at;
  return df_status_ok();
}

static df_status check_no_cluster(const df_packed *k) {
  for (uint32_t j = 0; j < k->comm_count; j++) {
    uint32_t kind = k->comms[j].kind;
    if (df_comm_kind_is_cluster((df_comm_kind)kind))
      return df_status_errorf(DF_EINVAL,
                              "pool: comm %u is a cluster transfer (%s); a pooled plan "
                              "moves every intermediate through HBM",
                              j, df_comm_kind_name((df_comm_kind)kind));
  }
  return df_status_ok();
}

df_status df_pack_pool(df_pack_ctx *c) {
  pool_state s = {.k = c->k, .a = c->a};
  uint64_t queued = 0;
  for (uint32_t q = 0; q < c->k->topology.sm_count; q++)
    queued += c->k->queue_lengths[q];
  if (queued != c->k->instr_count) /* the pool takes the place after the queues */
    return df_status_errorf(DF_EINVAL, "pool: %llu of %u instructions are in no queue",
                            (unsigned long long)(c->k->instr_count - queued), c->k->instr_count);
  DF_TRY(check_no_cluster(c->k));
  DF_TRY(find_groups(&s));
  if (!s.groups)
    return df_status_errorf(DF_EINVAL, "pool: the plan has no instruction to pool");
  DF_TRY(check_edges(&s));
  DF_TRY(check_flags(&s));
  uint32_t *order = df_arena_array(c->a, s.groups, sizeof(uint32_t));
  if (!order)
    return DF_ARENA_OOM("the instruction pool's order");
  DF_TRY(claim_order(&s, order));
  return rebuild(&s, order);
}
