/* The ITER pool (docs/pool.md): a plan scheduled with pool_iters leaves
   its ITERs, each with the instructions right after it on its queue that
   read only the item's own outputs (a one-block task's FINALIZE), in one
   region that every CTA claims items from at run time; each queue starts
   with an OP_POOL record naming the region. The plan's placement stays
   the nominal one: it decided the slots, flags and barriers, which the
   rules below make independent of the CTA that runs an item. */
#include <string.h>

#include "pack_internal.h"
#include "sort_idx.h"

#define S DF_SENTINEL

typedef struct pool_state {
  df_packed *k;
  df_arena *a;
  uint32_t *group_of;      /* per packed instruction: group or S */
  uint32_t *slot_group;    /* per slot: group whose item writes it, or S */
  uint32_t *first;         /* per group: its ITER (packed index) */
  uint32_t *size;          /* per group: instructions */
  uint32_t *rank;          /* per group: position among its queue's groups */
  uint32_t groups, stride, pooled;
} pool_state;

static const df_abi_args *args_of(const df_packed *k, const df_abi_instr *r) {
  return r->arg_offset == S ? NULL : &k->args[r->arg_offset / sizeof(df_abi_args)];
}

static bool fused(const df_abi_args *a) { return a && a->reserved1 > 1; }

static bool receives(const df_packed *k, const df_abi_instr *r) {
  for (uint32_t j = r->comm_offset; j < r->comm_offset + r->comm_count; j++)
    if (df_comm_kind_is_recv((df_comm_kind)k->comms[j].kind))
      return true;
  return false;
}

/* An instruction joins the open group when it waits for nothing and reads
   only slots the group writes. */
static bool joins(const pool_state *s, const df_abi_instr *r, uint32_t g) {
  const df_abi_args *a = args_of(s->k, r);
  if (r->opcode == DF_ABI_OP_ITER || r->opcode == DF_ABI_OP_EXIT || !a || fused(a) ||
      a->input_slot_count == 0 || receives(s->k, r))
    return false;
  for (uint32_t i = 0; i < a->input_slot_count; i++) {
    uint32_t slot = s->k->input_slots[a->input_slot_offset + i];
    if (slot >= s->k->slot_count || s->slot_group[slot] != g)
      return false;
  }
  return true;
}

static df_status add_member(pool_state *s, uint32_t pi, uint32_t g) {
  const df_abi_args *a = args_of(s->k, &s->k->instrs[pi]);
  s->group_of[pi] = g;
  s->size[g]++;
  s->pooled++;
  if (a && a->output_slot != S) {
    if (a->output_slot >= s->k->slot_count)
      return df_status_errorf(DF_EINVAL, "pool-iters: instruction %u writes slot %u of %u", pi,
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
  s->rank = df_arena_array(s->a, n ? n : 1, sizeof(uint32_t));
  if (!s->group_of || !s->slot_group || !s->first || !s->size || !s->rank)
    return DF_ARENA_OOM("the ITER pool");
  for (uint32_t q = 0; q < k->topology.sm_count; q++) {
    uint32_t open = S, in_queue = 0;
    for (uint32_t pi = k->queue_offsets[q]; pi < k->queue_offsets[q] + k->queue_lengths[q];
         pi++) {
      const df_abi_instr *r = &k->instrs[pi];
      if (r->opcode == DF_ABI_OP_ITER) {
        if (fused(args_of(k, r)))
          return df_status_errorf(DF_EINVAL,
                                  "pool-iters: instruction %u (plan %u) is a fused ITER; a "
                                  "pooled ITER is one instruction (df-fuse no-iter=true)",
                                  pi, k->pack_order[pi]);
        if (receives(k, r))
          return df_status_errorf(DF_EINVAL,
                                  "pool-iters: ITER %u (plan %u) receives; a pooled "
                                  "instruction must not wait for another",
                                  pi, k->pack_order[pi]);
        open = s->groups++;
        s->first[open] = pi;
        s->size[open] = 0;
        s->rank[open] = in_queue++;
        DF_TRY(add_member(s, pi, open));
      } else if (open != S && joins(s, r, open)) {
        DF_TRY(add_member(s, pi, open));
      } else {
        open = S;
      }
      if (open != S && s->size[open] > s->stride)
        s->stride = s->size[open];
    }
  }
  return df_status_ok();
}

/* Whatever an item writes reaches the rest of the plan through an HBM
   receive, and its flags are its own: items run in any order, anywhere. */
static df_status check_edges(const pool_state *s) {
  const df_packed *k = s->k;
  for (uint32_t j = 0; j < k->comm_count; j++) {
    uint32_t kind = k->comms[j].kind;
    if (kind == DF_COMM_CLUSTER_SEND || kind == DF_COMM_CLUSTER_RECV ||
        kind == DF_COMM_CLUSTER_RELEASE)
      return df_status_errorf(DF_EINVAL,
                              "pool-iters: comm %u is a cluster transfer (%s); a pooled plan "
                              "moves every intermediate through HBM",
                              j, df_comm_kind_name((df_comm_kind)kind));
  }
  for (uint32_t pi = 0; pi < k->instr_count; pi++) {
    const df_abi_instr *r = &k->instrs[pi];
    const df_abi_args *a = args_of(k, r);
    if (!a || s->group_of[pi] != S)
      continue;
    for (uint32_t i = 0; i < a->input_slot_count; i++) {
      uint32_t slot = k->input_slots[a->input_slot_offset + i];
      if (slot >= k->slot_count || s->slot_group[slot] == S)
        continue;
      bool got = false;
      for (uint32_t j = r->comm_offset; j < r->comm_offset + r->comm_count && !got; j++)
        got = (k->comms[j].kind == DF_COMM_HBM_RECV ||
               k->comms[j].kind == DF_COMM_HBM_RECV_WAIT) &&
              k->comms[j].dst_slot_id == slot;
      if (!got)
        return df_status_errorf(DF_EINVAL,
                                "pool-iters: instruction %u (plan %u) reads slot %u of pooled "
                                "instruction %u without an HBM receive (df-schedule "
                                "pool-iters=true places one)",
                                pi, k->pack_order[pi], slot, s->first[s->slot_group[slot]]);
    }
  }
  return df_status_ok();
}

static uint32_t send_flag(const df_packed *k, const df_abi_comm *c) {
  return c->flag_index != S ? c->flag_index : k->slots[c->dst_slot_id].flag_index;
}

/* An epoch orders one writer's releases; items of a pool run in any
   order, so none shares a flag with another sender. */
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
    return DF_ARENA_OOM("the ITER pool's flags");
  for (uint32_t pi = 0; pi < k->instr_count; pi++) {
    const df_abi_instr *r = &k->instrs[pi];
    for (uint32_t j = r->comm_offset; j < r->comm_offset + r->comm_count; j++) {
      const df_abi_comm *c = &k->comms[j];
      if (c->kind != DF_COMM_HBM_SEND || c->dst_slot_id >= k->slot_count)
        continue;
      uint32_t f = send_flag(k, c);
      if (f == S)
        continue;
      if (writer[f] != S && writer[f] != pi &&
          (s->group_of[pi] != S || s->group_of[writer[f]] != S))
        return df_status_errorf(DF_EINVAL,
                                "pool-iters: flag %u is released by instructions %u and %u, "
                                "one of them pooled; pooled plans need a flag per transfer "
                                "(df-layout-slots reuse-hbm-flags=false)",
                                f, writer[f], pi);
      writer[f] = pi;
    }
  }
  return df_status_ok();
}

/* Longest range first: the last items claimed are the shortest, so the
   CTAs finish close together. Ties in the static plan's wave order. */
static bool longer_item(const void *ctx, uint32_t a, uint32_t b) {
  const pool_state *s = ctx;
  const df_abi_args *x = args_of(s->k, &s->k->instrs[s->first[a]]);
  const df_abi_args *y = args_of(s->k, &s->k->instrs[s->first[b]]);
  uint32_t lx = x->range_end - x->range_begin, ly = y->range_end - y->range_begin;
  if (lx != ly)
    return lx > ly;
  if (s->rank[a] != s->rank[b])
    return s->rank[a] < s->rank[b];
  return s->first[a] < s->first[b];
}

static uint32_t counter_flag(const df_packed *k) {
  uint32_t flags = 0;
  for (uint32_t i = 0; i < k->slot_count; i++)
    if (k->slots[i].flag_index != S && k->slots[i].flag_index + 1 > flags)
      flags = k->slots[i].flag_index + 1;
  for (uint32_t j = 0; j < k->comm_count; j++)
    if (k->comms[j].flag_index != S && k->comms[j].flag_index + 1 > flags)
      flags = k->comms[j].flag_index + 1;
  return flags;
}

static df_status rebuild(pool_state *s, uint32_t *order) {
  df_packed *k = s->k;
  uint32_t sms = k->topology.sm_count;
  uint64_t count = (uint64_t)k->instr_count - s->pooled + sms + (uint64_t)s->groups * s->stride;
  if (count > UINT32_MAX / 2)
    return df_status_errorf(DF_EINVAL, "pool-iters: %llu instructions do not fit the ABI",
                            (unsigned long long)count);
  df_abi_instr *in = df_alloc(&k->alloc, sizeof *in * (count ? count : 1));
  uint32_t *po = df_alloc(&k->alloc, sizeof *po * (count ? count : 1));
  if (!in || !po) {
    df_free(&k->alloc, in);
    df_free(&k->alloc, po);
    return df_status_errorf(DF_ENOMEM, "out of memory building the ITER pool");
  }
  uint32_t at = 0, counter = counter_flag(k);
  uint32_t pool_first = (uint32_t)(count - (uint64_t)s->groups * s->stride);
  uint8_t *queued = df_arena_array(s->a, k->instr_count ? k->instr_count : 1, 1);
  if (!queued) {
    df_free(&k->alloc, in);
    df_free(&k->alloc, po);
    return DF_ARENA_OOM("the ITER pool");
  }
  memset(queued, 0, k->instr_count ? k->instr_count : 1);
  for (uint32_t q = 0; q < sms; q++) {
    uint32_t q0 = k->queue_offsets[q], q1 = q0 + k->queue_lengths[q];
    k->queue_offsets[q] = at;
    in[at] = (df_abi_instr){DF_ABI_OP_POOL, S, s->stride, S, pool_first, 0, counter, s->groups};
    po[at++] = S;
    for (uint32_t pi = q0; pi < q1; pi++) {
      queued[pi] = 1;
      if (s->group_of[pi] != S)
        continue;
      in[at] = k->instrs[pi];
      po[at++] = k->pack_order[pi];
    }
    k->queue_lengths[q] = at - k->queue_offsets[q];
  }
  for (uint32_t pi = 0; pi < k->instr_count; pi++) /* in no queue (5.4) */
    if (!queued[pi]) {
      in[at] = k->instrs[pi];
      po[at++] = k->pack_order[pi];
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

df_status df_pack_pool(df_pack_ctx *c) {
  pool_state s = {.k = c->k, .a = c->a};
  DF_TRY(find_groups(&s));
  if (!s.groups)
    return df_status_errorf(DF_EINVAL, "pool-iters: the plan has no ITER to pool");
  DF_TRY(check_edges(&s));
  DF_TRY(check_flags(&s));
  uint32_t *order = df_arena_array(c->a, 2 * (uint64_t)s.groups, sizeof(uint32_t));
  if (!order)
    return DF_ARENA_OOM("the ITER pool's order");
  for (uint32_t g = 0; g < s.groups; g++)
    order[g] = g;
  df_sort_idx(order, s.groups, order + s.groups, longer_item, &s);
  return rebuild(&s, order);
}
