/* The rules a packed instruction pool keeps (docs/pool.md), for the launch
   package, the blob checks and the runtimes. */
#include "df/plan.h"

#define S DF_SENTINEL

#define fail(...) df_status_errorf(DF_EINVAL, __VA_ARGS__)

bool df_pool_receive_ok(const df_packed *k, const df_abi_comm *c) {
  const df_abi_slot *dst = c->dst_slot_id < k->slot_count ? &k->slots[c->dst_slot_id] : NULL;
  return c->kind == DF_COMM_HBM_RECV && dst && (dst->flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL) &&
         c->barrier_index == S && dst->barrier_index == S;
}

static df_status check_record(const df_packed *k, const df_pool_desc *d, uint32_t pi) {
  const df_abi_instr *r = &k->instrs[pi];
  uint32_t m = (pi - d->first) % d->stride, item = (pi - d->first) / d->stride;
  bool pad = m && k->instrs[pi - 1].opcode == DF_ABI_OP_EXIT;
  if (m == 0 && r->opcode == DF_ABI_OP_EXIT)
    return fail("pool instruction %u: item %u is empty", pi, item);
  if (pad && r->opcode != DF_ABI_OP_EXIT)
    return fail("pool instruction %u: opcode %u after an EXIT pad of item %u", pi, r->opcode,
                item);
  if (r->opcode == DF_ABI_OP_EXIT)
    return df_status_ok();
  if (r->opcode != DF_ABI_OP_ITER && r->opcode != DF_ABI_OP_REDUCE &&
      r->opcode != DF_ABI_OP_FINALIZE)
    return fail("pool instruction %u: opcode %u is not a handler instruction (item %u)", pi,
                r->opcode, item);
  if (r->handler_id == S)
    return fail("pool instruction %u: opcode %u has no handler (item %u)", pi, r->opcode, item);
  if ((uint64_t)r->comm_offset + r->comm_count > k->comm_count)
    return fail("pool instruction %u: comm range [%u, +%u) exceeds %u comms (item %u)", pi,
                r->comm_offset, r->comm_count, k->comm_count, item);
  for (uint32_t j = r->comm_offset; j < r->comm_offset + r->comm_count; j++) {
    const df_abi_comm *c = &k->comms[j];
    if (!df_comm_kind_is_recv((df_comm_kind)c->kind))
      continue;
    if (!df_pool_receive_ok(k, c))
      return fail("pool instruction %u: comm %u (kind %u) must be an HBM receive of a "
                  "direct-global slot without a barrier (item %u)",
                  pi, j, c->kind, item);
  }
  return df_status_ok();
}

static df_status check_region(const df_packed *k, const df_pool_desc *d) {
  for (uint32_t j = 0; j < k->comm_count; j++) {
    uint32_t kind = k->comms[j].kind;
    if (df_comm_kind_is_cluster((df_comm_kind)kind))
      return fail("comm %u is a cluster transfer (kind %u) in a plan with a pool of %u "
                  "items; pooled plans move every intermediate through HBM",
                  j, kind, d->items);
  }
  for (uint32_t pi = d->first; pi < k->instr_count; pi++)
    DF_TRY(check_record(k, d, pi));
  return df_status_ok();
}

bool df_packed_has_pool(const df_packed *k) {
  return k && k->instr_count && k->topology.sm_count && k->queue_lengths[0] &&
         k->queue_offsets[0] < k->instr_count &&
         k->instrs[k->queue_offsets[0]].opcode == DF_ABI_OP_POOL;
}

/* The counter is a flag of its own, right after the data flags: a claim
   must never move a data flag's epoch, nor a release the counter. */
uint32_t df_packed_data_flags(const df_packed *k) {
  uint32_t flags = 0;
  for (uint32_t i = 0; i < k->slot_count; i++)
    if (k->slots[i].flag_index != S && k->slots[i].flag_index + 1 > flags)
      flags = k->slots[i].flag_index + 1;
  for (uint32_t j = 0; j < k->comm_count; j++)
    if (k->comms[j].flag_index != S && k->comms[j].flag_index + 1 > flags)
      flags = k->comms[j].flag_index + 1;
  return flags;
}

static df_status check_counter(const df_packed *k, const df_pool_desc *d) {
  uint32_t flags = df_packed_data_flags(k);
  if (d->counter != flags)
    return fail("OP_POOL of %u items claims through flag %u; the counter must be the flag "
                "after the plan's data flags (%u)",
                d->items, d->counter, flags);
  return df_status_ok();
}

df_status df_packed_pool_find(const df_packed *k, df_pool_desc *out) {
  *out = (df_pool_desc){false, 0, 0, 0, 0};
  uint32_t sms = k->topology.sm_count, with = 0;
  uint64_t queue_end = 0;
  for (uint32_t q = 0; q < sms; q++)
    queue_end += k->queue_lengths[q];
  const df_abi_instr *first = NULL;
  for (uint32_t q = 0; q < sms; q++) {
    uint32_t q0 = k->queue_offsets[q], q1 = q0 + k->queue_lengths[q];
    for (uint32_t pi = q0; pi < q1; pi++) {
      const df_abi_instr *r = &k->instrs[pi];
      if (r->opcode != DF_ABI_OP_POOL)
        continue;
      if (pi != q0)
        return fail("instruction %u: OP_POOL at position %u of queue %u; it must come first",
                    pi, pi - q0, q);
      if (r->handler_id != S || r->arg_offset != S || r->comm_count != 0)
        return fail("instruction %u: OP_POOL needs handler_id and arg_offset S and no comms "
                    "(got handler %u, %u comms)",
                    pi, r->handler_id, r->comm_count);
      if (first && (r->comm_offset != first->comm_offset || r->task_id != first->task_id ||
                    r->flags != first->flags || r->slot_id != first->slot_id))
        return fail("instruction %u: queue %u's OP_POOL differs from instruction %u's", pi, q,
                    (uint32_t)(first - k->instrs));
      first = first ? first : r;
      with++;
    }
  }
  if (!with)
    return queue_end == k->instr_count
               ? df_status_ok()
               : fail("queues cover %llu of %u packed instructions",
                      (unsigned long long)queue_end, k->instr_count);
  if (with != sms)
    return fail("%u of %u queues start with OP_POOL; all or none must", with, sms);
  const df_abi_instr *r = first;
  uint64_t end = (uint64_t)r->comm_offset + (uint64_t)r->flags * r->task_id;
  if (r->task_id == 0 || r->flags == 0 || r->comm_offset != queue_end || end != k->instr_count)
    return fail("OP_POOL region [%u, +%u items) must start where the queues end (%llu) and "
                "fill the rest of the instructions, with items of at least one",
                r->comm_offset, r->flags, (unsigned long long)queue_end);
  df_pool_desc d = {true, r->comm_offset, r->flags, r->task_id, r->slot_id};
  DF_TRY(check_counter(k, &d));
  DF_TRY(check_region(k, &d));
  *out = d;
  return df_status_ok();
}
