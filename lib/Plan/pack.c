/* df_pack (REFERENCE 5.4): barriers, slot layout, handler table, comm,
   instruction and args records, launch package and fingerprint. */
#include <string.h>

#include "pack_internal.h"

static bool fusable_op(df_instr_op op) {
  return op == DF_INSTR_ITER || op == DF_INSTR_MAP || op == DF_INSTR_REDUCE ||
         op == DF_INSTR_REDUCE_UPDATE || op == DF_INSTR_FINALIZE;
}

/* A fused instruction (docs/fusion.md) joins the dispatch of its queue
   predecessor: it gets that packed position. Execution stays as unfused
   only if later parts receive nothing and earlier parts send nothing. */
static df_status check_fused_comms(const df_pack_ctx *c) {
  const df_plan *p = c->p;
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *m = &p->comms[i];
    uint32_t d = df_comm_dispatch(m);
    if (d >= p->instr_count)
      continue; /* reported by the comm order */
    bool recv = df_comm_kind_is_recv(m->kind);
    if (recv && p->instrs[d].fused)
      return df_status_errorf(DF_EINVAL,
                              "fused instruction %u receives comm %u (%s): only the first part "
                              "of a fused instruction may receive",
                              d, i, df_comm_kind_name(m->kind));
    if (!recv && c->next_part[d] != DF_SENTINEL)
      return df_status_errorf(DF_EINVAL,
                              "instruction %u dispatches comm %u (%s) but instruction %u is "
                              "fused after it: only the last part of a fused instruction may "
                              "send",
                              d, i, df_comm_kind_name(m->kind), c->next_part[d]);
  }
  return df_status_ok();
}

df_status df_pack_order(df_pack_ctx *c) {
  const df_plan *p = c->p;
  df_packed *k = c->k;
  uint32_t n = p->instr_count, at = 0;
  c->pack_index = df_arena_sentinels(c->a, n);
  c->next_part = df_arena_sentinels(c->a, n);
  if (!c->pack_index || !c->next_part)
    return DF_ARENA_OOM("the pack order");
  for (uint32_t s = 0; s < p->topology.sm_count; s++) {
    uint64_t off = p->queue_offsets[s], len = p->queue_lengths[s];
    DF_TRY(df_plan_check_queue(p, s));
    k->queue_offsets[s] = at;
    uint32_t prev = DF_SENTINEL, parts = 0;
    for (uint64_t i = 0; i < len; i++) {
      uint32_t id = p->queue_ids[off + i];
      if (id >= n)
        return df_status_errorf(DF_EINVAL, "queue of SM %u names instruction %u, plan has %u",
                                s, id, n);
      if (c->pack_index[id] != DF_SENTINEL)
        return df_status_errorf(DF_EINVAL, "instruction %u appears more than once in the queues",
                                id);
      const df_instr *in = &p->instrs[id];
      if (in->fused) {
        if (prev == DF_SENTINEL)
          return df_status_errorf(DF_EINVAL,
                                  "instruction %u is fused but is the first of SM %u's queue",
                                  id, s);
        if (!fusable_op(in->op) || !fusable_op(p->instrs[prev].op))
          return df_status_errorf(DF_EINVAL,
                                  "instruction %u (%s) cannot be fused after instruction %u "
                                  "(%s): only handler instructions fuse",
                                  id, df_instr_op_name(in->op), prev,
                                  df_instr_op_name(p->instrs[prev].op));
        if (++parts > DF_FUSE_MAX_PARTS)
          return df_status_errorf(DF_EINVAL,
                                  "fused instruction ending at %u has more than %u parts", id,
                                  DF_FUSE_MAX_PARTS);
        c->pack_index[id] = c->pack_index[prev];
        c->next_part[prev] = id;
        prev = id;
        continue;
      }
      c->pack_index[id] = at;
      k->pack_order[at++] = id;
      prev = id;
      parts = 1;
    }
    k->queue_lengths[s] = at - k->queue_offsets[s];
  }
  for (uint32_t id = 0; id < n; id++)
    if (c->pack_index[id] == DF_SENTINEL) {
      if (p->instrs[id].fused)
        return df_status_errorf(DF_EINVAL, "fused instruction %u is in no queue", id);
      c->pack_index[id] = at;
      k->pack_order[at++] = id;
    }
  k->instr_count = at;
  return check_fused_comms(c);
}

uint32_t df_pack_parts(const df_pack_ctx *c, uint32_t pi) {
  uint32_t n = 1;
  for (uint32_t id = c->k->pack_order[pi]; c->next_part[id] != DF_SENTINEL;
       id = c->next_part[id])
    n++;
  return n;
}

/* Cluster receive count (low half) and send + release count (high);
   false when either passes the 16-bit ABI limit. */
static bool instr_flags(const df_pack_ctx *c, uint32_t first, uint32_t end, uint32_t *flags,
                        uint64_t *recv, uint64_t *send) {
  *recv = *send = 0;
  for (uint32_t j = first; j < end; j++) {
    df_comm_kind kd = c->p->comms[c->comm_order[j]].kind;
    *recv += kd == DF_COMM_CLUSTER_RECV;
    *send += kd == DF_COMM_CLUSTER_SEND || kd == DF_COMM_CLUSTER_RELEASE;
  }
  *flags = (uint32_t)*recv | (uint32_t)*send << DF_INSTR_FLAGS_SEND_SHIFT;
  return *recv <= DF_INSTR_FLAGS_MAX_COUNT && *send <= DF_INSTR_FLAGS_MAX_COUNT;
}

/* Coordinates of the previous task, reused by the runs of instructions of
   one task. */
typedef struct coord_cache {
  uint32_t task, count;
  uint32_t coords[DF_MAX_AXES];
} coord_cache;

static void fill_args(df_pack_ctx *c, const df_instr *in, coord_cache *cc, df_abi_args *a) {
  const df_plan *p = c->p;
  df_packed *k = c->k;
  uint32_t nc = 0;
  if (in->task != DF_SENTINEL) {
    if (in->task != cc->task) {
      cc->task = in->task;
      cc->count = df_plan_task_coords(p, in->task, cc->coords);
    }
    nc = cc->count;
  }
  a->task_id = in->task;
  a->task_coord_offset = k->task_coord_count;
  a->task_coord_count = nc;
  memcpy(k->task_coords + k->task_coord_count, cc->coords, sizeof(uint32_t) * nc);
  k->task_coord_count += nc;
  a->range_begin = in->has_range ? in->range_begin : 0;
  a->range_end = in->has_range ? in->range_end : 0;
  a->input_slot_offset = k->input_slot_count;
  a->input_slot_count = in->input_count;
  if (in->input_count)
    memcpy(k->input_slots + k->input_slot_count, df_plan_instr_inputs(p, in),
           sizeof(uint32_t) * in->input_count);
  k->input_slot_count += in->input_count;
  a->output_slot = in->output_slot;
  a->handoff_peer_arg_offset = DF_SENTINEL;
  a->handoff_plan_index = DF_SENTINEL;
  a->handoff_binding_index = DF_SENTINEL;
  a->handoff_stage_count = 0;
  a->handoff_arena_slot = DF_SENTINEL;
  a->handoff_flags = 0;
  a->reserved0 = DF_SOURCE_WAIT_NONE; /* set by the source-lifetime pass */
  a->reserved1 = 0;
}

df_status df_pack_records(df_pack_ctx *c) {
  const df_plan *p = c->p;
  df_packed *k = c->k;
  uint64_t inputs = 0, coords = 0;
  for (uint32_t i = 0; i < p->instr_count; i++) {
    const df_instr *in = &p->instrs[i];
    if (in->op == DF_INSTR_EXIT)
      continue;
    inputs += in->input_count;
    coords += in->task == DF_SENTINEL ? 0 : (p->extent_count ? p->extent_count : 1);
  }
  DF_TRY(df_abi_u32(inputs, &k->input_slot_count));
  DF_TRY(df_abi_u32(coords, &k->task_coord_count));
  uint32_t last_arg;
  DF_TRY(df_abi_u32(k->arg_count ? ((uint64_t)k->arg_count - 1) * sizeof(df_abi_args) : 0,
                    &last_arg));
  k->input_slots = df_alloc(&k->alloc, sizeof(uint32_t) * inputs);
  k->task_coords = df_alloc(&k->alloc, sizeof(uint32_t) * coords);
  if (!k->input_slots || !k->task_coords)
    return df_status_errorf(DF_ENOMEM, "out of memory packing input slots and task coords");
  k->input_slot_count = k->task_coord_count = 0;
  coord_cache cc = {DF_SENTINEL, 0, {0}};
  uint32_t arg = 0;
  for (uint32_t pi = 0; pi < k->instr_count; pi++) {
    uint32_t id = k->pack_order[pi];
    const df_instr *in = &p->instrs[id];
    df_abi_instr *r = &k->instrs[pi];
    /* slot_id of a fused instruction: the last output any part writes */
    uint32_t last = id, out = DF_SENTINEL;
    for (uint32_t part = id; part != DF_SENTINEL; part = c->next_part[part]) {
      const df_instr *pt = &p->instrs[part];
      if (pt->output_slot != DF_SENTINEL && pt->output_slot >= p->slot_count)
        return df_status_errorf(DF_EINVAL, "instruction %u writes slot %u, plan has %u slots",
                                part, pt->output_slot, p->slot_count);
      last = part;
      out = pt->output_slot != DF_SENTINEL ? pt->output_slot : out;
    }
    uint32_t first = c->comm_first[pi], end = c->comm_first[pi + 1];
    r->opcode = (uint32_t)df_instr_op_abi(in->op);
    r->handler_id = last != id ? c->composite_of[pi] : c->handler_of[id];
    r->task_id = in->task;
    r->comm_offset = end > first ? first : 0;
    r->comm_count = end - first;
    r->slot_id = out != DF_SENTINEL   ? out
                 : in->input_count    ? df_plan_instr_inputs(p, in)[0]
                                      : DF_SENTINEL;
    uint64_t recv, send;
    if (!instr_flags(c, first, end, &r->flags, &recv, &send))
      return df_status_errorf(DF_EINVAL,
                              "instruction %u cluster communication count exceeds the packed "
                              "ABI limit: %llu receives, %llu sends and releases, limit %u",
                              id, (unsigned long long)recv, (unsigned long long)send,
                              DF_INSTR_FLAGS_MAX_COUNT);
    if (in->op == DF_INSTR_EXIT) {
      r->arg_offset = DF_SENTINEL;
      continue;
    }
    r->arg_offset = arg * (uint32_t)sizeof(df_abi_args); /* fits: checked above */
    /* a fused instruction's parts have consecutive args records; the
       first says how many (args word 15) */
    df_abi_args *head = &k->args[arg];
    uint32_t parts = 0;
    for (uint32_t part = id; part != DF_SENTINEL; part = c->next_part[part], parts++)
      fill_args(c, &p->instrs[part], &cc, &k->args[arg++]);
    head->reserved1 = parts > 1 ? parts : 0;
  }
  return df_status_ok();
}

static df_status alloc_records(df_packed *k, const df_plan *p) {
  uint32_t args = 0;
  for (uint32_t i = 0; i < p->instr_count; i++)
    args += p->instrs[i].op != DF_INSTR_EXIT;
  k->instr_count = p->instr_count;
  k->comm_count = p->comm_count;
  k->arg_count = args;
  k->instrs = df_alloc(&k->alloc, sizeof(df_abi_instr) * p->instr_count);
  k->pack_order = df_alloc(&k->alloc, sizeof(uint32_t) * p->instr_count);
  k->comms = df_alloc(&k->alloc, sizeof(df_abi_comm) * p->comm_count);
  k->args = df_alloc(&k->alloc, sizeof(df_abi_args) * args);
  k->queue_offsets = df_alloc(&k->alloc, sizeof(uint32_t) * p->topology.sm_count);
  k->queue_lengths = df_alloc(&k->alloc, sizeof(uint32_t) * p->topology.sm_count);
  if (!k->instrs || !k->pack_order || !k->comms || !k->args || !k->queue_offsets ||
      !k->queue_lengths)
    return df_status_errorf(DF_ENOMEM, "out of memory packing %u instructions",
                            p->instr_count);
  return df_status_ok();
}

static df_status pack_all(df_pack_ctx *c) {
  const df_plan *p = c->p;
  df_packed *k = c->k;
  const df_layout_options *lo = c->o ? &c->o->layout : NULL;
  df_layout_options pooled;
  if (p->pool) { /* pooled items wait for flags only: every HBM slot direct-global */
    memset(&pooled, 0, sizeof pooled);
    if (lo)
      pooled = *lo;
    if (!pooled.direct_count)
      pooled.hbm_direct_global = true;
    lo = &pooled;
  }
  DF_TRY(alloc_records(k, p));
  DF_TRY(df_pack_order(c));
  uint8_t *direct = df_arena_array(c->a, p->slot_count, 1);
  if (!direct)
    return DF_ARENA_OOM("direct-global slots");
  DF_TRY(df_direct_global_slots(p, lo, direct));
  DF_TRY(df_allocate_barriers_ex(p, direct, &k->alloc, &k->barriers));
  df_slot_layout lay;
  DF_TRY(df_layout_slots(p, &k->barriers, lo, &k->alloc, &lay));
  k->slots = lay.slots;
  k->slot_count = lay.slot_count;
  k->shared_slot_bytes = lay.shared_slot_bytes;
  k->global_staging_bytes = lay.global_staging_bytes;
  k->scratch_bytes = lay.scratch_bytes;
  DF_TRY(df_pack_handlers(c));
  DF_TRY(df_pack_composites(c));
  DF_TRY(df_pack_comms(c));
  DF_TRY(df_pack_records(c));
  DF_TRY(df_pack_source_lifetimes(c));
  if (p->pool)
    DF_TRY(df_pack_pool(c));
  DF_TRY(df_launch_package_build(k, &k->launch));
  /* Run-time re-plans skip the hash; compiled artefacts carry it. */
  if (c->o && c->o->skip_fingerprint) {
    k->fingerprint[0] = '\0';
    return df_status_ok();
  }
  return df_plan_fingerprint(p, k->fingerprint);
}

df_status df_pack(const df_plan *p, const df_pack_options *o, const df_allocator *alloc,
                  df_packed **out) {
  *out = NULL;
  if (!p)
    return df_status_errorf(DF_EINVAL, "df_pack expects a plan, got NULL");
  df_allocator al = df_allocator_or_default(alloc);
  df_packed *k = df_alloc(&al, sizeof *k);
  if (!k)
    return df_status_errorf(DF_ENOMEM, "out of memory packing a plan");
  memset(k, 0, sizeof *k);
  k->alloc = al;
  k->abi_version = DF_ABI_VERSION;
  k->topology = p->topology;
  df_arena a;
  df_arena_init(&a, &k->alloc);
  df_pack_ctx c = {.p = p, .o = o, .k = k, .a = &a};
  df_status st = pack_all(&c);
  df_arena_release(&a);
  if (st.code != DF_OK) {
    df_packed_destroy(k);
    return st;
  }
  *out = k;
  return df_status_ok();
}

void df_packed_destroy(df_packed *k) {
  if (!k)
    return;
  df_allocator a = k->alloc;
  df_free(&a, k->instrs);
  df_free(&a, k->pack_order);
  df_free(&a, k->slots);
  df_free(&a, k->comms);
  df_free(&a, k->args);
  df_free(&a, k->queue_offsets);
  df_free(&a, k->queue_lengths);
  df_free(&a, k->input_slots);
  df_free(&a, k->task_coords);
  df_free(&a, k->handlers);
  df_free(&a, k->operators);
  df_free(&a, k->types);
  df_barrier_alloc_free(&k->barriers, &a);
  df_launch_package_free(&k->launch, &a);
  df_free(&a, k);
}
