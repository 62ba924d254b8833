/* Checks before running: topology, instructions, handlers and the arena
   bounds of every slot. Everything here would make the device read or
   write the wrong bytes, so the run refuses instead. */
#include <stdio.h>

#include "host_internal.h"

df_status hb_check_topology(hb_run *r) {
  const df_topology *t = &r->k->topology;
  if (t->sm_count == 0 || t->cluster_size == 0)
    return hb_fail(r, DF_HOST_DIAG_INVALID_PLAN, hb_site_none(),
                   "packed plan topology needs sm_count > 0 and cluster_size > 0, got %u/%u",
                   t->sm_count, t->cluster_size);
  if (t->sm_count % t->cluster_size)
    return hb_fail(r, DF_HOST_DIAG_INVALID_PLAN, hb_site_none(),
                   "launch needs sm_count %% cluster_size == 0 (grid of whole clusters), got "
                   "sm_count %u, cluster_size %u",
                   t->sm_count, t->cluster_size);
  return df_status_ok();
}

static const char *handler_name(const df_packed *k, uint32_t h) {
  return k->handlers && h < k->handler_count ? k->handlers[h].name : "?";
}

static const char *handler_symbol(const df_packed *k, uint32_t h) {
  return k->handlers && h < k->handler_count ? k->handlers[h].symbol : "?";
}

/* Composite `h` lists `parts` part handlers, each provided. */
static bool parts_provided(const hb_run *r, uint32_t h, uint32_t parts) {
  const df_packed *k = r->k;
  if (!k->handlers || h >= k->handler_count || k->handlers[h].part_count != parts)
    return false;
  for (uint32_t i = 0; i < parts; i++) {
    uint32_t p = k->handlers[h].parts[i];
    if (p >= r->handler_count || !r->handlers[p])
      return false;
  }
  return true;
}

static df_status check_instr(hb_run *r, uint32_t i) {
  const df_packed *k = r->k;
  const df_abi_instr *in = &k->instrs[i];
  char at[256];
  hb_describe_instr(r, i, at, sizeof at);
  if (in->opcode > DF_ABI_OP_POOL)
    return hb_fail(r, DF_HOST_DIAG_INVALID_PLAN, hb_site_at(r, i, HB_S),
                   "%s: unknown opcode %u", at, in->opcode);
  if (in->opcode == DF_ABI_OP_EXIT || in->opcode == DF_ABI_OP_POOL)
    return df_status_ok(); /* the pool: df_packed_pool_find */
  uint32_t first = in->arg_offset / sizeof(df_abi_args), parts = hb_parts(k, i);
  if (parts > DF_FUSE_MAX_PARTS || (uint64_t)first + parts > k->arg_count)
    return hb_fail(r, DF_HOST_DIAG_INVALID_PLAN, hb_site_at(r, i, HB_S),
                   "%s: fused instruction of %u parts from args record %u exceeds %u parts or "
                   "%u args records",
                   at, parts, first, DF_FUSE_MAX_PARTS, k->arg_count);
  for (uint32_t part = 0; part < parts; part++) {
    const df_abi_args *a = hb_part_args(k, i, part);
    if (a->output_slot != HB_S && a->output_slot >= k->slot_count)
      return hb_fail(r, DF_HOST_DIAG_INVALID_PLAN, hb_site_at(r, i, HB_S),
                     "%s: output slot %u out of range (%u slots)", at, a->output_slot,
                     k->slot_count);
  }
  uint32_t h = in->handler_id;
  if (h == HB_S)
    return df_status_ok();
  if (in->opcode == DF_ABI_OP_CLUSTER_SYNC)
    return hb_fail(r, DF_HOST_DIAG_INVALID_PLAN, hb_site_at(r, i, HB_S),
                   "%s: a cluster_sync instruction cannot carry a handler", at);
  if (h >= r->handler_count || !r->handlers || !r->handlers[h]) {
    if (parts > 1 && h < r->handler_count && r->handlers && parts_provided(r, h, parts))
      return df_status_ok(); /* the backend runs the composite's parts */
    hb_site s = hb_site_at(r, i, HB_S);
    return hb_fail(r, DF_HOST_DIAG_MISSING_HANDLER, s,
                   "%s needs handler %u '%s' (%s), which was not provided (%u handler "
                   "functions given)%s",
                   at, h, handler_name(k, h), handler_symbol(k, h), r->handler_count,
                   parts > 1 ? "; a fused instruction needs its composite function or, with "
                               "a packed composite table entry, every part's function"
                             : "");
  }
  return df_status_ok();
}

static df_status arena_fail(hb_run *r, uint32_t slot, const char *arena, uint64_t off,
                            uint32_t bytes, uint32_t size) {
  hb_site s = hb_site_none();
  s.slot = slot;
  return hb_fail(r, DF_HOST_DIAG_ARENA, s,
                 "slot %u lies outside the %s: bytes [%llu, %llu) but the %s has %u bytes", slot,
                 arena, (unsigned long long)off, (unsigned long long)off + bytes, arena, size);
}

static df_status check_slots(hb_run *r) {
  const df_packed *k = r->k;
  const df_launch_package *l = &r->pkg;
  for (uint32_t i = 0; i < k->slot_count; i++) {
    const df_abi_slot *s = &k->slots[i];
    uint64_t g = (uint64_t)s->global_offset + s->bytes;
    if (g > l->global_staging_bytes)
      return arena_fail(r, i, "global staging", s->global_offset, s->bytes,
                        l->global_staging_bytes);
    if (s->flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL)
      continue;
    uint64_t end = (uint64_t)s->shared_offset + s->bytes;
    if (s->flags & DF_SLOT_FLAG_SCRATCH_BACKED) {
      if (end > r->scratch_bytes)
        return arena_fail(r, i, "scratch arena", s->shared_offset, s->bytes, r->scratch_bytes);
    } else if (end > l->shared_slot_bytes) {
      return arena_fail(r, i, "shared slot arena", s->shared_offset, s->bytes,
                        l->shared_slot_bytes);
    }
  }
  return df_status_ok();
}

df_status hb_validate(hb_run *r) {
  for (uint32_t i = 0; i < r->k->instr_count; i++)
    DF_TRY(check_instr(r, i));
  DF_TRY(check_slots(r));
  DF_TRY(hb_validate_comms(r));
  return hb_check_phases(r);
}
