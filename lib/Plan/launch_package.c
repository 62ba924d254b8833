/* The launch package of a packed plan (REFERENCE 5.5): checks the records
   the device will trust, and derives shared-memory layout, flag and
   barrier counts and per-queue barrier-init lists. */
#include <string.h>

#include "df/plan.h"

static uint32_t ceil_div(uint32_t x, uint32_t d) { return (uint32_t)(((uint64_t)x + d - 1) / d); }

static df_status check_queues(const df_packed *k, df_pool_desc *pool) {
  uint64_t at = 0;
  for (uint32_t s = 0; s < k->topology.sm_count; s++) {
    if (k->queue_offsets[s] != at)
      return df_status_errorf(DF_EINVAL,
                              "launch package queues must be contiguous: queue %u starts at "
                              "%u, expected %llu",
                              s, k->queue_offsets[s], (unsigned long long)at);
    at += k->queue_lengths[s];
  }
  if (at > k->instr_count)
    return df_status_errorf(DF_EINVAL,
                            "launch package queues cover %llu of %u packed instructions",
                            (unsigned long long)at, k->instr_count);
  df_status st = df_packed_pool_find(k, pool);
  return df_failed(&st) ? df_status_wrap(st, "launch package") : st;
}

static df_status check_instr(const df_packed *k, uint32_t i) {
  const df_abi_instr *r = &k->instrs[i];
  if (r->opcode == DF_ABI_OP_POOL)
    return df_status_ok(); /* df_packed_pool_find */
  if ((uint64_t)r->comm_offset + r->comm_count > k->comm_count)
    return df_status_errorf(DF_EINVAL,
                            "packed instruction %u comm range [%u, +%u) exceeds %u comms", i,
                            r->comm_offset, r->comm_count, k->comm_count);
  if (r->slot_id != DF_SENTINEL && r->slot_id >= k->slot_count)
    return df_status_errorf(DF_EINVAL, "packed instruction %u names slot %u of %u", i,
                            r->slot_id, k->slot_count);
  if (r->opcode == DF_ABI_OP_EXIT) {
    if (r->arg_offset != DF_SENTINEL)
      return df_status_errorf(DF_EINVAL,
                              "packed EXIT instruction %u must have a sentinel arg_offset, "
                              "got %u",
                              i, r->arg_offset);
    return df_status_ok();
  }
  if (r->arg_offset == DF_SENTINEL || r->arg_offset % sizeof(df_abi_args) ||
      r->arg_offset / sizeof(df_abi_args) >= k->arg_count)
    return df_status_errorf(DF_EINVAL,
                            "packed instruction %u arg_offset %u must be a 64-byte aligned "
                            "offset inside %u args records",
                            i, r->arg_offset, k->arg_count);
  uint32_t first = r->arg_offset / sizeof(df_abi_args);
  uint32_t parts = k->args[first].reserved1 ? k->args[first].reserved1 : 1;
  if (parts == 1 && k->args[first].reserved1)
    return df_status_errorf(DF_EINVAL, "packed instruction %u args word 15 (fused parts) is 1; "
                                       "an unfused instruction has 0", i);
  if (parts > DF_FUSE_MAX_PARTS || (uint64_t)first + parts > k->arg_count)
    return df_status_errorf(DF_EINVAL,
                            "packed instruction %u fuses %u parts from args record %u: more "
                            "than %u parts or past %u args records",
                            i, parts, first, DF_FUSE_MAX_PARTS, k->arg_count);
  for (uint32_t part = 0; part < parts; part++) {
    const df_abi_args *a = &k->args[first + part];
    if (part && a->reserved1)
      return df_status_errorf(DF_EINVAL,
                              "packed instruction %u part %u args word 15 must be 0", i, part);
    if ((uint64_t)a->task_coord_offset + a->task_coord_count > k->task_coord_count)
      return df_status_errorf(DF_EINVAL,
                              "packed instruction %u task coordinates [%u, +%u) exceed %u", i,
                              a->task_coord_offset, a->task_coord_count, k->task_coord_count);
    if ((uint64_t)a->input_slot_offset + a->input_slot_count > k->input_slot_count)
      return df_status_errorf(DF_EINVAL,
                              "packed instruction %u input slots [%u, +%u) exceed %u", i,
                              a->input_slot_offset, a->input_slot_count, k->input_slot_count);
    for (uint32_t j = 0; j < a->input_slot_count; j++)
      if (k->input_slots[a->input_slot_offset + j] >= k->slot_count)
        return df_status_errorf(DF_EINVAL, "packed instruction %u reads slot %u of %u", i,
                                k->input_slots[a->input_slot_offset + j], k->slot_count);
  }
  return df_status_ok();
}

/* Each comm record belongs to one instruction's block: the barrier-init
   lists (at most one entry per comm) and the runtimes rely on it. */
static df_status check_comm_blocks(const df_packed *k) {
  df_allocator a = df_allocator_or_default(&k->alloc);
  uint32_t *owner = df_alloc(&a, sizeof(uint32_t) * (k->comm_count ? k->comm_count : 1));
  if (!owner)
    return df_status_errorf(DF_ENOMEM, "out of memory checking %u comm blocks", k->comm_count);
  memset(owner, 0xFF, sizeof(uint32_t) * k->comm_count);
  df_status st = df_status_ok();
  for (uint32_t i = 0; i < k->instr_count && !df_failed(&st); i++) {
    const df_abi_instr *r = &k->instrs[i];
    if (r->opcode == DF_ABI_OP_POOL)
      continue;
    for (uint32_t j = r->comm_offset; j < r->comm_offset + r->comm_count; j++) {
      if (owner[j] != DF_SENTINEL) {
        st = df_status_errorf(DF_EINVAL,
                              "packed comm %u is in the comm blocks of instructions %u and %u; "
                              "each comm belongs to one instruction",
                              j, owner[j], i);
        break;
      }
      owner[j] = i;
    }
  }
  df_free(&a, owner);
  return st;
}

static df_status check_comm(const df_packed *k, uint32_t i) {
  const df_abi_comm *c = &k->comms[i];
  if (c->src_slot_id >= k->slot_count || c->dst_slot_id >= k->slot_count)
    return df_status_errorf(DF_EINVAL, "packed comm %u names slot %u -> %u of %u", i,
                            c->src_slot_id, c->dst_slot_id, k->slot_count);
  uint32_t cap = k->slots[c->src_slot_id].bytes < k->slots[c->dst_slot_id].bytes
                     ? k->slots[c->src_slot_id].bytes
                     : k->slots[c->dst_slot_id].bytes;
  uint64_t end = (uint64_t)c->byte_offset + c->byte_count;
  if (end > cap)
    return df_status_errorf(DF_EINVAL,
                            "packed comm %u transfer size exceeds slot capacity: bytes [%u, "
                            "+%u) of slots %u (%u B) -> %u (%u B)",
                            i, c->byte_offset, c->byte_count, c->src_slot_id,
                            k->slots[c->src_slot_id].bytes, c->dst_slot_id,
                            k->slots[c->dst_slot_id].bytes);
  return df_status_ok();
}

static df_status check(const df_packed *k, df_pool_desc *pool) {
  if (k->abi_version != DF_ABI_VERSION)
    return df_status_errorf(DF_EINVAL,
                            "packed plan ABI version %u does not match the runtime's %u",
                            k->abi_version, DF_ABI_VERSION);
  if ((k->instr_count && !k->instrs) || (k->slot_count && !k->slots) ||
      (k->comm_count && !k->comms) || (k->arg_count && !k->args) ||
      (k->input_slot_count && !k->input_slots) || (k->task_coord_count && !k->task_coords) ||
      !k->queue_offsets || !k->queue_lengths)
    return df_status_errorf(DF_EINVAL, "packed plan buffers are missing for its record counts");
  DF_TRY(check_queues(k, pool));
  for (uint32_t i = 0; i < k->instr_count; i++)
    DF_TRY(check_instr(k, i));
  DF_TRY(check_comm_blocks(k));
  for (uint32_t i = 0; i < k->comm_count; i++)
    DF_TRY(check_comm(k, i));
  return df_status_ok();
}

static uint32_t max_plus_one(uint32_t cur, uint32_t v) {
  return v != DF_SENTINEL && v + 1 > cur ? v + 1 : cur;
}

/* Per queue up to its first EXIT: barriers of receive comms (their own
   index, else the target slot's), first occurrence each. */
static df_status barrier_inits(const df_packed *k, const df_allocator *al,
                               df_launch_package *l) {
  uint32_t sms = k->topology.sm_count;
  l->barrier_init_offsets = df_alloc(al, sizeof(uint32_t) * sms);
  l->barrier_init_lengths = df_alloc(al, sizeof(uint32_t) * sms);
  l->barrier_init_indices = df_alloc(al, sizeof(uint32_t) * k->comm_count);
  uint32_t *seen = df_alloc(al, sizeof(uint32_t) * l->barrier_count);
  if (!l->barrier_init_offsets || !l->barrier_init_lengths || !l->barrier_init_indices ||
      !seen) {
    df_free(al, seen);
    return df_status_errorf(DF_ENOMEM, "out of memory building barrier-init lists");
  }
  memset(seen, 0xFF, sizeof(uint32_t) * l->barrier_count);
  uint32_t n = 0;
  for (uint32_t s = 0; s < sms; s++) {
    l->barrier_init_offsets[s] = n;
    uint32_t q0 = k->queue_offsets[s], q1 = q0 + k->queue_lengths[s];
    for (uint32_t pi = q0; pi < q1 && k->instrs[pi].opcode != DF_ABI_OP_EXIT; pi++) {
      const df_abi_instr *r = &k->instrs[pi];
      for (uint32_t j = r->comm_offset; j < r->comm_offset + r->comm_count; j++) {
        const df_abi_comm *c = &k->comms[j];
        if (!df_comm_kind_is_recv((df_comm_kind)c->kind))
          continue;
        uint32_t b = c->barrier_index != DF_SENTINEL ? c->barrier_index
                                                     : k->slots[c->dst_slot_id].barrier_index;
        if (b == DF_SENTINEL || seen[b] == s)
          continue;
        seen[b] = s;
        l->barrier_init_indices[n++] = b;
      }
    }
    l->barrier_init_lengths[s] = n - l->barrier_init_offsets[s];
  }
  l->barrier_init_count = n;
  df_free(al, seen);
  return df_status_ok();
}

static df_status build(const df_packed *k, const df_allocator *al, df_launch_package *l) {
  df_pool_desc pool;
  DF_TRY(check(k, &pool));
  l->abi_version = k->abi_version;
  l->sm_count = k->topology.sm_count;
  l->cluster_size = k->topology.cluster_size;
  uint32_t flags = 0, acks = 0;
  for (uint32_t i = 0; i < k->slot_count; i++) {
    l->barrier_count = max_plus_one(l->barrier_count, k->slots[i].barrier_index);
    flags = max_plus_one(flags, k->slots[i].flag_index);
    if (k->slots[i].flags & DF_SLOT_FLAG_SCRATCH_BACKED)
      l->scratch_slot_count++;
  }
  for (uint32_t i = 0; i < k->comm_count; i++) {
    const df_abi_comm *c = &k->comms[i];
    l->barrier_count = max_plus_one(l->barrier_count, c->barrier_index);
    flags = max_plus_one(flags, c->flag_index);
    if (c->kind == DF_COMM_CLUSTER_SEND || c->kind == DF_COMM_CLUSTER_RECV)
      acks = max_plus_one(acks, c->flag_index);
    if (c->kind == DF_COMM_HBM_SEND || c->kind == DF_COMM_HBM_RECV)
      l->needs_flag_reset = true;
  }
  if (pool.present) { /* the claim counter: a flag, reset with the others */
    flags = max_plus_one(flags, pool.counter);
    l->needs_flag_reset = true;
  }
  uint64_t bytes = (uint64_t)l->barrier_count * DF_BARRIER_BYTES;
  l->barrier_bytes = (uint32_t)bytes;
  l->cluster_ack_count = acks;
  l->cluster_ack_barrier_bytes = acks * DF_BARRIER_BYTES;
  l->cluster_ack_pending_bytes = 4 * ceil_div(acks, 32);
  l->hbm_recv_state_bytes = 4 * ceil_div(l->barrier_count, 32);
  uint64_t control = bytes + l->cluster_ack_barrier_bytes + l->cluster_ack_pending_bytes +
                     l->hbm_recv_state_bytes;
  uint64_t base = (control + DF_SHARED_ALIGN - 1) / DF_SHARED_ALIGN * DF_SHARED_ALIGN;
  uint64_t shared = base + k->shared_slot_bytes;
  if (shared > UINT32_MAX)
    return df_status_errorf(DF_EINVAL, "Dataflow ABI value must fit uint32, got %llu",
                            (unsigned long long)shared);
  l->shared_control_bytes = (uint32_t)control;
  l->shared_slot_base_offset = (uint32_t)base;
  l->shared_slot_bytes = k->shared_slot_bytes;
  l->shared_memory_bytes = (uint32_t)shared;
  if (flags > UINT32_MAX / 4)
    return df_status_errorf(DF_EINVAL,
                            "launch package: flag index %u makes the flags %llu bytes, past "
                            "uint32",
                            flags - 1, 4ull * flags);
  l->flag_count = flags;
  l->flags_bytes = 4 * flags;
  l->global_staging_bytes = k->global_staging_bytes;
  l->slot_count = k->slot_count;
  l->comm_count = k->comm_count;
  l->arg_count = k->arg_count;
  l->instruction_count = k->instr_count;
  l->scratch_bytes = k->scratch_bytes;
  l->cluster_inbox_offset = 0;
  l->cluster_inbox_bytes = 0;
  return barrier_inits(k, al, l);
}

df_status df_launch_package_build(const df_packed *k, df_launch_package *out) {
  memset(out, 0, sizeof *out);
  if (!k)
    return df_status_errorf(DF_EINVAL, "launch package expects a packed plan, got NULL");
  df_allocator al = df_allocator_or_default(&k->alloc);
  df_status st = build(k, &al, out);
  if (st.code != DF_OK)
    df_launch_package_free(out, &al);
  return st;
}

void df_launch_package_free(df_launch_package *l, const df_allocator *alloc) {
  if (!l)
    return;
  df_allocator al = df_allocator_or_default(alloc);
  df_free(&al, l->barrier_init_offsets);
  df_free(&al, l->barrier_init_lengths);
  df_free(&al, l->barrier_init_indices);
  memset(l, 0, sizeof *l);
}
