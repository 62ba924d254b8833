/* Validation of a packed plan's ABI records before a blob is trusted (or
   written): every index, range and enum in bounds, queues contiguous and
   covering all instructions. The tables are checked in
   blob_check_tables.c. */
#include <inttypes.h>

#include "blob_check.h"

#define S DF_SENTINEL

#define fail df_blob_fail

static df_status check_queues(const df_packed *k) {
  uint64_t next = 0;
  for (uint32_t s = 0; s < k->topology.sm_count; s++) {
    if (k->queue_offsets[s] != next)
      return fail("queue %u: queue_offset %u is not %" PRIu64
                  " (queues must be contiguous)",
                  s, k->queue_offsets[s], next);
    next += k->queue_lengths[s];
  }
  if (next > k->instr_count)
    return fail("queues cover %" PRIu64 " instructions, more than the %u packed", next,
                k->instr_count);
  /* the rest is the instruction pool (docs/pool.md) */
  df_pool_desc pool;
  df_status st = df_packed_pool_find(k, &pool);
  if (df_failed(&st))
    return fail("%s", st.message);
  return df_status_ok();
}

/* OP_POOL records and the pool's EXIT pads come from no plan
   instruction. */
static bool planless(const df_abi_instr *in) {
  return in->opcode == DF_ABI_OP_POOL || in->opcode == DF_ABI_OP_EXIT;
}

/* Each packed instruction comes from a distinct plan instruction; plan
   ids run to the plan's instruction count, which counts the later parts
   of fused instructions too (args word 15, docs/fusion.md). */
static df_status check_pack_order(const df_packed *k) {
  df_allocator a = df_allocator_or_default(&k->alloc);
  uint64_t plan_count = k->instr_count;
  for (uint32_t i = 0; i < k->arg_count; i++)
    plan_count += k->args[i].reserved1 > 1 && k->args[i].reserved1 <= DF_FUSE_MAX_PARTS
                      ? k->args[i].reserved1 - 1
                      : 0;
  uint8_t *seen = df_alloc(&a, plan_count ? plan_count : 1);
  if (!seen)
    return df_status_errorf(DF_ENOMEM, "out of memory checking pack_order");
  memset(seen, 0, plan_count ? plan_count : 1);
  df_status st = df_status_ok();
  for (uint32_t i = 0; i < k->instr_count && !df_failed(&st); i++) {
    uint32_t id = k->pack_order[i];
    if (id == S && planless(&k->instrs[i]))
      continue;
    if (id >= plan_count)
      st = fail("pack_order %u: plan instruction id %u out of range (%" PRIu64 " instructions)",
                i, id, plan_count);
    else if (seen[id]++)
      st = fail("pack_order %u: plan instruction id %u appears twice", i, id);
  }
  df_free(&a, seen);
  return st;
}

static df_status check_instr(const df_packed *k, uint32_t i) {
  const df_abi_instr *in = &k->instrs[i];
  const char *op = df_blob_abi_opcode_name(in->opcode);
  if (in->opcode > DF_ABI_OP_POOL)
    return fail("instr %u: opcode %u out of range (0..5)", i, in->opcode);
  if (in->opcode == DF_ABI_OP_POOL)
    return df_status_ok(); /* checked by df_packed_pool_find (check_queues) */
  bool handlerless = in->opcode == DF_ABI_OP_EXIT || in->opcode == DF_ABI_OP_CLUSTER_SYNC;
  if (handlerless && in->handler_id != S)
    return fail("instr %u: handler_id %u must be S for opcode %s", i, in->handler_id, op);
  if (in->handler_id != S && in->handler_id >= k->handler_count)
    return fail("instr %u: handler_id %u out of range (%u handlers)", i, in->handler_id,
                k->handler_count);
  if (in->opcode == DF_ABI_OP_EXIT) {
    if (in->arg_offset != S)
      return fail("instr %u: arg_offset %u must be S for opcode exit", i, in->arg_offset);
  } else if (in->arg_offset == S) {
    return fail("instr %u: arg_offset is S but only exit may omit args (opcode %s)", i, op);
  } else if (in->arg_offset % sizeof(df_abi_args) != 0) {
    return fail("instr %u: arg_offset %u is not a multiple of 64", i, in->arg_offset);
  } else if (in->arg_offset / sizeof(df_abi_args) >= k->arg_count) {
    return fail("instr %u: arg_offset %u out of range (%u args)", i, in->arg_offset,
                k->arg_count);
  }
  if ((uint64_t)in->comm_offset + in->comm_count > k->comm_count)
    return fail("instr %u: comm range [%u, %" PRIu64 ") out of range (%u comms)", i,
                in->comm_offset, (uint64_t)in->comm_offset + in->comm_count, k->comm_count);
  if (in->slot_id != S && in->slot_id >= k->slot_count)
    return fail("instr %u: slot_id %u out of range (%u slots)", i, in->slot_id, k->slot_count);
  return df_status_ok();
}

static df_status check_slot(const df_packed *k, uint32_t i) {
  const df_abi_slot *sl = &k->slots[i];
  const df_launch_package *l = &k->launch;
  if (sl->barrier_index != S && sl->barrier_index >= l->barrier_count)
    return fail("slot %u: barrier_index %u out of range (%u barriers)", i, sl->barrier_index,
                l->barrier_count);
  if (sl->barrier_index != k->barriers.slot_barrier[i])
    return fail("slot %u: barrier_index %u differs from the barrier allocation's %u", i,
                sl->barrier_index, k->barriers.slot_barrier[i]);
  if (sl->flag_index != S && sl->flag_index >= l->flag_count)
    return fail("slot %u: flag_index %u out of range (%u flags)", i, sl->flag_index,
                l->flag_count);
  if (sl->owner_cta != S && sl->owner_cta >= k->topology.sm_count)
    return fail("slot %u: owner_cta %u out of range (%u CTAs)", i, sl->owner_cta,
                k->topology.sm_count);
  if (sl->flags & ~DF_BLOB_SLOT_FLAGS)
    return fail("slot %u: flags 0x%x has unknown bits (known 0x%x)", i, sl->flags,
                DF_BLOB_SLOT_FLAGS);
  bool scratch = sl->flags & DF_SLOT_FLAG_SCRATCH_BACKED;
  bool direct = sl->flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL;
  if (scratch && sl->reserved != sl->shared_offset)
    return fail("slot %u: reserved %u must equal the scratch shared_offset %u", i,
                sl->reserved, sl->shared_offset);
  if (!scratch && sl->reserved != 0)
    return fail("slot %u: reserved %u must be 0 for a slot that is not scratch-backed", i,
                sl->reserved);
  uint64_t end = (uint64_t)sl->shared_offset + sl->bytes;
  if (!scratch && !direct && end > k->shared_slot_bytes)
    return fail("slot %u: shared bytes [%u, %" PRIu64 ") exceed shared_slot_bytes %u", i,
                sl->shared_offset, end, k->shared_slot_bytes);
  end = (uint64_t)sl->global_offset + sl->bytes;
  if (end > k->global_staging_bytes)
    return fail("slot %u: global bytes [%u, %" PRIu64 ") exceed global_staging_bytes %u", i,
                sl->global_offset, end, k->global_staging_bytes);
  return df_status_ok();
}

static df_status check_comm(const df_packed *k, uint32_t i) {
  const df_abi_comm *c = &k->comms[i];
  const df_launch_package *l = &k->launch;
  if (c->kind < DF_COMM_CLUSTER_SEND || c->kind > DF_COMM_HBM_RECV_WAIT)
    return fail("comm %u: kind %u out of range (1..7)", i, c->kind);
  const char *kind = df_comm_kind_name((df_comm_kind)c->kind);
  if (c->src_slot_id >= k->slot_count)
    return fail("comm %u: src_slot_id %u out of range (%u slots)", i, c->src_slot_id,
                k->slot_count);
  if (c->dst_slot_id >= k->slot_count)
    return fail("comm %u: dst_slot_id %u out of range (%u slots)", i, c->dst_slot_id,
                k->slot_count);
  if (df_comm_kind_is_cluster((df_comm_kind)c->kind)) {
    if (c->peer_cta_rank >= k->topology.cluster_size)
      return fail("comm %u: peer_cta_rank %u out of range (cluster size %u)", i,
                  c->peer_cta_rank, k->topology.cluster_size);
    if (c->flag_index != S && c->flag_index >= l->cluster_ack_count)
      return fail("comm %u: flag_index %u out of range (%u cluster ACKs)", i, c->flag_index,
                  l->cluster_ack_count);
  } else {
    if (c->peer_cta_rank != S)
      return fail("comm %u: peer_cta_rank %u must be S for %s", i, c->peer_cta_rank, kind);
    if (c->flag_index != S && c->flag_index >= l->flag_count)
      return fail("comm %u: flag_index %u out of range (%u flags)", i, c->flag_index,
                  l->flag_count);
  }
  bool hbm_recv = c->kind == DF_COMM_HBM_RECV || c->kind == DF_COMM_HBM_RECV_ISSUE ||
                  c->kind == DF_COMM_HBM_RECV_WAIT;
  if (!hbm_recv && c->barrier_index != S)
    return fail("comm %u: barrier_index %u must be S for %s", i, c->barrier_index, kind);
  if (c->barrier_index != S && c->barrier_index >= l->barrier_count)
    return fail("comm %u: barrier_index %u out of range (%u barriers)", i, c->barrier_index,
                l->barrier_count);
  if (c->segment_count == 0)
    return fail("comm %u: segment_count is 0 (must be at least 1)", i);
  if (c->segment_id >= c->segment_count)
    return fail("comm %u: segment_id %u out of range (%u segments)", i, c->segment_id,
                c->segment_count);
  uint32_t src = k->slots[c->src_slot_id].bytes, dst = k->slots[c->dst_slot_id].bytes;
  uint32_t cap = src < dst ? src : dst;
  uint64_t end = (uint64_t)c->byte_offset + (c->byte_count ? c->byte_count : cap);
  if (end > cap)
    return fail("comm %u: bytes [%u, %" PRIu64 ") exceed slot capacity %u (transfer size "
                "exceeds slot capacity)",
                i, c->byte_offset, end, cap);
  return df_status_ok();
}

static df_status check_args(const df_packed *k, uint32_t i) {
  const df_abi_args *g = &k->args[i];
  if ((uint64_t)g->task_coord_offset + g->task_coord_count > k->task_coord_count)
    return fail("args %u: task coords [%u, %" PRIu64 ") out of range (%u task_coords)", i,
                g->task_coord_offset, (uint64_t)g->task_coord_offset + g->task_coord_count,
                k->task_coord_count);
  if ((uint64_t)g->input_slot_offset + g->input_slot_count > k->input_slot_count)
    return fail("args %u: input slots [%u, %" PRIu64 ") out of range (%u input_slots)", i,
                g->input_slot_offset, (uint64_t)g->input_slot_offset + g->input_slot_count,
                k->input_slot_count);
  if (g->range_begin > g->range_end)
    return fail("args %u: range_begin %u is after range_end %u", i, g->range_begin,
                g->range_end);
  if (g->output_slot != S && g->output_slot >= k->slot_count)
    return fail("args %u: output_slot %u out of range (%u slots)", i, g->output_slot,
                k->slot_count);
  uint32_t peer = g->handoff_peer_arg_offset;
  if (peer != S && (peer % sizeof(df_abi_args) || peer / sizeof(df_abi_args) >= k->arg_count))
    return fail("args %u: handoff_peer_arg_offset %u is not S nor a 64-aligned offset below "
                "%" PRIu64,
                i, peer, (uint64_t)k->arg_count * sizeof(df_abi_args));
  if (g->handoff_arena_slot != S && g->handoff_arena_slot >= k->slot_count)
    return fail("args %u: handoff_arena_slot %u out of range (%u slots)", i,
                g->handoff_arena_slot, k->slot_count);
  if (g->handoff_flags & ~DF_BLOB_HANDOFF_FLAGS)
    return fail("args %u: handoff_flags 0x%x has unknown bits (known 0x%x)", i,
                g->handoff_flags, DF_BLOB_HANDOFF_FLAGS);
  if (g->reserved0 > DF_SOURCE_WAIT_KEEP_NEWEST)
    return fail("args %u: reserved0 (source wait action) %u out of range (0..2)", i,
                g->reserved0);
  if (g->reserved1 == 1 || g->reserved1 > DF_FUSE_MAX_PARTS)
    return fail("args %u: reserved1 (fused parts) %u must be 0 or 2..%u", i, g->reserved1,
                DF_FUSE_MAX_PARTS);
  return df_status_ok();
}

df_status df_blob_check_packed(const df_packed *k) {
  DF_TRY(df_status_wrap(df_topology_check(&k->topology), "topology"));
  if (k->abi_version != DF_ABI_VERSION)
    return fail("abi_version %u is not %u", k->abi_version, DF_ABI_VERSION);
  /* Tables and the launch package first: record checks use their counts. */
  DF_TRY(df_blob_check_tables(k));
  DF_TRY(check_queues(k));
  DF_TRY(check_pack_order(k));
  for (uint32_t i = 0; i < k->instr_count; i++)
    DF_TRY(check_instr(k, i));
  for (uint32_t i = 0; i < k->slot_count; i++)
    DF_TRY(check_slot(k, i));
  for (uint32_t i = 0; i < k->comm_count; i++)
    DF_TRY(check_comm(k, i));
  for (uint32_t i = 0; i < k->arg_count; i++)
    DF_TRY(check_args(k, i));
  for (uint32_t i = 0; i < k->input_slot_count; i++)
    if (k->input_slots[i] >= k->slot_count)
      return fail("input_slots %u: slot id %u out of range (%u slots)", i, k->input_slots[i],
                  k->slot_count);
  return df_blob_check_launch_derived(k);
}
