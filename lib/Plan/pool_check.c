/* The rules a packed instruction pool keeps (docs/pool.md), for the launch
   package, the blob checks and the runtimes. */
#include <string.h>

#include "df/alloc.h"
#include "df/plan.h"

#define S DF_SENTINEL

#define fail(...) df_status_errorf(DF_EINVAL, __VA_ARGS__)

bool df_pool_receive_ok(const df_packed *k, const df_abi_comm *c) {
  const df_abi_slot *dst = c->dst_slot_id < k->slot_count ? &k->slots[c->dst_slot_id] : NULL;
  return c->kind == DF_COMM_HBM_RECV && dst && (dst->flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL) &&
         c->barrier_index == S && dst->barrier_index == S;
}

/* A TRIGGER (the item's last record before its pads) names a later,
   triggered item and counts into that item's own flag. */
static df_status check_trigger(const df_pool_desc *d, const df_abi_instr *r, uint32_t pi,
                               uint32_t item) {
  if (r->handler_id != S || r->arg_offset != S || r->comm_count != 0 || r->flags != 0)
    return fail("pool instruction %u: TRIGGER needs handler_id and arg_offset S, no comms "
                "and flags 0 (item %u)",
                pi, item);
  if (r->comm_offset < d->items || r->comm_offset >= d->total || r->comm_offset <= item)
    return fail("pool instruction %u: TRIGGER of item %u names item %u; it must name a later "
                "triggered item in [%u, %u)",
                pi, item, r->comm_offset, d->items, d->total);
  if (r->task_id == 0)
    return fail("pool instruction %u: TRIGGER of item %u counts 0 producers", pi, item);
  uint64_t flag = (uint64_t)d->counter + 1 + (r->comm_offset - d->items);
  if (r->slot_id != flag)
    return fail("pool instruction %u: TRIGGER of item %u counts in flag %u; item %u's "
                "counter is flag %llu",
                pi, item, r->slot_id, r->comm_offset, (unsigned long long)flag);
  return df_status_ok();
}

static df_status check_record(const df_packed *k, const df_pool_desc *d, uint32_t pi) {
  const df_abi_instr *r = &k->instrs[pi];
  uint32_t m = (pi - d->first) % d->stride, item = (pi - d->first) / d->stride;
  uint32_t prev = m ? k->instrs[pi - 1].opcode : DF_ABI_OP_EXIT;
  bool pad = m && (prev == DF_ABI_OP_EXIT || prev == DF_ABI_OP_TRIGGER);
  if (m == 0 && (r->opcode == DF_ABI_OP_EXIT || r->opcode == DF_ABI_OP_TRIGGER))
    return fail("pool instruction %u: item %u has no instruction before opcode %u", pi, item,
                r->opcode);
  if (pad && r->opcode != DF_ABI_OP_EXIT)
    return fail("pool instruction %u: opcode %u after the end of item %u", pi, r->opcode,
                item);
  if (r->opcode == DF_ABI_OP_EXIT)
    return df_status_ok();
  if (r->opcode == DF_ABI_OP_TRIGGER)
    return check_trigger(d, r, pi, item);
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

/* The flag a comm waits for or releases (its own, else its slot's). */
static uint32_t comm_flag(const df_packed *k, const df_abi_comm *c) {
  return c->flag_index != S                ? c->flag_index
         : c->dst_slot_id < k->slot_count ? k->slots[c->dst_slot_id].flag_index
                                           : S;
}

typedef struct trigger_tables {
  uint32_t *target;   /* per item: the item its TRIGGER names, or S */
  uint32_t *count;    /* per triggered item: the producers each TRIGGER counts */
  uint32_t *named;    /* per triggered item: TRIGGERs naming it */
  uint32_t *released; /* per data flag: the item whose sends release it, or S */
} trigger_tables;

static df_status tables_of(const df_packed *k, const df_pool_desc *d, trigger_tables *t) {
  uint32_t flags = df_packed_data_flags(k);
  for (uint32_t pi = d->first; pi < k->instr_count; pi++) {
    const df_abi_instr *r = &k->instrs[pi];
    uint32_t item = (pi - d->first) / d->stride;
    if (r->opcode == DF_ABI_OP_TRIGGER) {
      uint32_t j = r->comm_offset - d->items;
      if (t->named[j] && t->count[j] != r->task_id)
        return fail("pool instruction %u: TRIGGER of item %u counts %u producers of item %u; "
                    "another TRIGGER of it counts %u",
                    pi, item, r->task_id, r->comm_offset, t->count[j]);
      t->count[j] = r->task_id;
      t->named[j]++;
      t->target[item] = r->comm_offset;
      continue;
    }
    if (r->opcode == DF_ABI_OP_EXIT)
      continue;
    for (uint32_t c = r->comm_offset; c < r->comm_offset + r->comm_count; c++) {
      uint32_t f = k->comms[c].kind == DF_COMM_HBM_SEND ? comm_flag(k, &k->comms[c]) : S;
      if (f < flags)
        t->released[f] = item;
    }
  }
  return df_status_ok();
}

/* A triggered item runs once its TRIGGERs are all in and skips its
   receives' polls: every flag it receives must be released by an item
   that triggers it, and exactly as many TRIGGERs must name it as each
   one counts. */
static df_status check_triggers(const df_packed *k, const df_pool_desc *d, trigger_tables *t) {
  DF_TRY(tables_of(k, d, t));
  uint32_t flags = df_packed_data_flags(k);
  for (uint32_t i = d->items; i < d->total; i++) {
    uint32_t j = i - d->items;
    if (t->named[j] == 0 || t->named[j] != t->count[j])
      return fail("pool item %u is triggered after %u producers but %u TRIGGERs name it", i,
                  t->count[j], t->named[j]);
    for (uint32_t pi = d->first + i * d->stride; pi < d->first + (i + 1) * d->stride; pi++) {
      const df_abi_instr *r = &k->instrs[pi];
      if (r->opcode == DF_ABI_OP_EXIT || r->opcode == DF_ABI_OP_TRIGGER)
        break;
      for (uint32_t c = r->comm_offset; c < r->comm_offset + r->comm_count; c++) {
        if (!df_comm_kind_is_recv((df_comm_kind)k->comms[c].kind))
          continue;
        uint32_t f = comm_flag(k, &k->comms[c]);
        uint32_t w = f < flags ? t->released[f] : S;
        if (w == S || t->target[w] != i)
          return fail("pool instruction %u of triggered item %u receives flag %u, which no "
                      "item triggering it releases",
                      pi, i, f);
      }
    }
  }
  return df_status_ok();
}

static df_status check_region(const df_packed *k, const df_pool_desc *d) {
  for (uint32_t j = 0; j < k->comm_count; j++) {
    uint32_t kind = k->comms[j].kind;
    if (df_comm_kind_is_cluster((df_comm_kind)kind))
      return fail("comm %u is a cluster transfer (kind %u) in a plan with a pool of %u "
                  "items; pooled plans move every intermediate through HBM",
                  j, kind, d->total);
  }
  for (uint32_t pi = d->first; pi < k->instr_count; pi++)
    DF_TRY(check_record(k, d, pi));
  df_allocator a = df_allocator_or_default(&k->alloc);
  uint32_t flags = df_packed_data_flags(k), triggered = d->total - d->items;
  trigger_tables t = {
      df_alloc(&a, sizeof(uint32_t) * d->total), df_alloc(&a, sizeof(uint32_t) * (triggered + 1)),
      df_alloc(&a, sizeof(uint32_t) * (triggered + 1)),
      df_alloc(&a, sizeof(uint32_t) * (flags + 1))};
  df_status st = df_status_ok();
  if (!t.target || !t.count || !t.named || !t.released) {
    st = df_status_errorf(DF_ENOMEM, "out of memory checking a pool of %u items", d->total);
  } else {
    memset(t.target, 0xFF, sizeof(uint32_t) * d->total);
    memset(t.count, 0, sizeof(uint32_t) * (triggered + 1));
    memset(t.named, 0, sizeof(uint32_t) * (triggered + 1));
    memset(t.released, 0xFF, sizeof(uint32_t) * (flags + 1));
    st = check_triggers(k, d, &t);
  }
  df_free(&a, t.target);
  df_free(&a, t.count);
  df_free(&a, t.named);
  df_free(&a, t.released);
  return st;
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
  *out = (df_pool_desc){false, 0, 0, 0, 0, 0};
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
  uint64_t rest = k->instr_count - queue_end, total = r->task_id ? rest / r->task_id : 0;
  if (r->task_id == 0 || r->flags == 0 || r->comm_offset != queue_end ||
      rest % r->task_id != 0 || r->flags > total)
    return fail("OP_POOL region of %u claimed items of %u instructions must start where the "
                "queues end (%llu) and fill the rest of the instructions (%llu) with whole "
                "items, at least one claimed",
                r->flags, r->task_id, (unsigned long long)queue_end, (unsigned long long)rest);
  if (r->slot_id > UINT32_MAX - 1 - (total - r->flags))
    return fail("OP_POOL counter flag %u leaves no room for %llu triggered items' flags",
                r->slot_id, (unsigned long long)(total - r->flags));
  df_pool_desc d = {true, r->comm_offset, r->flags, r->task_id, r->slot_id, (uint32_t)total};
  DF_TRY(check_counter(k, &d));
  DF_TRY(check_region(k, &d));
  *out = d;
  return df_status_ok();
}
