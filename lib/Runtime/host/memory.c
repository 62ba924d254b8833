/* Memory of the virtual machine: slot regions in the CTA arenas, scratch
   arenas and global staging, their shadow ("written") bytes, copies, and
   the guard zones that catch handler accesses outside an arena. */
#include <stdio.h>
#include <string.h>

#include "host_internal.h"

uint32_t hb_comm_barrier(const df_packed *k, const df_abi_comm *c) {
  return hb_select(c->barrier_index, k->slots[c->dst_slot_id].barrier_index);
}

uint32_t hb_comm_flag(const df_packed *k, const df_abi_comm *c) {
  return hb_select(c->flag_index, k->slots[c->dst_slot_id].flag_index);
}

uint32_t hb_peer_cta(const hb_run *r, uint32_t cta, const df_abi_comm *c) {
  return cta / r->cluster_size * r->cluster_size + c->peer_cta_rank;
}

uint32_t hb_comm_span(const df_packed *k, const df_abi_comm *c, uint32_t *off) {
  uint32_t a = k->slots[c->src_slot_id].bytes, b = k->slots[c->dst_slot_id].bytes;
  uint32_t cap = a < b ? a : b;
  *off = c->byte_offset;
  if (c->byte_count)
    return c->byte_count;
  return cap > c->byte_offset ? cap - c->byte_offset : 0;
}

bool hb_comm_signal_only(const df_packed *k, const df_abi_comm *c) {
  if (!df_comm_kind_is_hbm((df_comm_kind)c->kind))
    return false;
  const df_abi_slot *s = &k->slots[c->src_slot_id], *d = &k->slots[c->dst_slot_id];
  return (s->flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL) && (d->flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL) &&
         s->global_offset == d->global_offset;
}

hb_region hb_slot_region(const hb_run *r, uint32_t cta, uint32_t slot, uint32_t off,
                         uint32_t len) {
  const df_abi_slot *s = &r->k->slots[slot];
  hb_region g;
  g.cta = cta;
  g.len = len;
  if (s->flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL) {
    g.space = HB_SPACE_STAGING;
    g.cta = HB_S;
    g.off = s->global_offset + off;
  } else if (s->flags & DF_SLOT_FLAG_SCRATCH_BACKED) {
    g.space = HB_SPACE_SCRATCH;
    g.off = s->shared_offset + off;
  } else {
    g.space = HB_SPACE_ARENA;
    g.off = s->shared_offset + off;
  }
  return g;
}

hb_region hb_staging_region(uint32_t off, uint32_t len) {
  hb_region g = {HB_SPACE_STAGING, HB_S, off, len};
  return g;
}

uint8_t *hb_region_ptr(const hb_run *r, hb_region g) {
  switch (g.space) {
  case HB_SPACE_ARENA: return r->ctas[g.cta].arena + g.off;
  case HB_SPACE_SCRATCH: return r->ctas[g.cta].scratch + g.off;
  case HB_SPACE_STAGING: return r->staging + g.off;
  }
  return NULL;
}

uint32_t *hb_region_owner(const hb_run *r, hb_region g) {
  switch (g.space) {
  case HB_SPACE_ARENA: return r->ctas[g.cta].arena_owner + g.off;
  case HB_SPACE_SCRATCH: return r->ctas[g.cta].scratch_owner + g.off;
  case HB_SPACE_STAGING: return r->staging_owner + g.off;
  }
  return NULL;
}

bool hb_regions_overlap(hb_region a, hb_region b) {
  if (a.space != b.space || a.len == 0 || b.len == 0)
    return false;
  if (a.space != HB_SPACE_STAGING && a.cta != b.cta)
    return false;
  return a.off < b.off + b.len && b.off < a.off + a.len;
}

static uint32_t *writer_of(const hb_run *r, hb_region g, uint32_t slot) {
  uint32_t row = g.space == HB_SPACE_STAGING ? r->cta_count : g.cta;
  return &r->slot_writer[(size_t)row * r->k->slot_count + slot];
}

uint32_t hb_slot_writer(const hb_run *r, hb_region g, uint32_t slot) {
  return *writer_of(r, g, slot);
}

void hb_copy(hb_run *r, hb_region dst, hb_region src, uint32_t dst_slot, uint32_t instr) {
  uint32_t n = dst.len < src.len ? dst.len : src.len;
  if (n == 0)
    return;
  uint8_t *d = hb_region_ptr(r, dst), *s = hb_region_ptr(r, src);
  uint32_t *od = hb_region_owner(r, dst), *os = hb_region_owner(r, src);
  if (d != s)
    memmove(d, s, n);
  /* bytes nobody wrote stay unwritten; the others now hold dst_slot */
  if (od <= os)
    for (uint32_t i = 0; i < n; i++)
      od[i] = os[i] == HB_S ? HB_S : dst_slot;
  else
    for (uint32_t i = n; i-- > 0;)
      od[i] = os[i] == HB_S ? HB_S : dst_slot;
  *writer_of(r, dst, dst_slot) = instr;
}

void hb_mark_written(hb_run *r, hb_region g, uint32_t slot, uint32_t instr) {
  uint32_t *o = hb_region_owner(r, g);
  for (uint32_t i = 0; i < g.len; i++)
    o[i] = slot;
  *writer_of(r, g, slot) = instr;
}

/* First run [*begin, *end) of bytes of g whose owner satisfies `bad`. */
static bool find_run(const uint32_t *o, uint32_t len, uint32_t slot, bool unwritten,
                     uint32_t *begin, uint32_t *end, uint32_t *owner) {
  uint32_t i = 0;
#define HB_BAD(v) (unwritten ? (v) == HB_S : ((v) != HB_S && (v) != slot))
  while (i < len && !HB_BAD(o[i]))
    i++;
  if (i == len)
    return false;
  uint32_t j = i;
  while (j < len && HB_BAD(o[j]) && o[j] == o[i])
    j++;
#undef HB_BAD
  *begin = i;
  *end = j;
  if (owner)
    *owner = o[i];
  return true;
}

bool hb_find_unwritten(const hb_run *r, hb_region g, uint32_t *begin, uint32_t *end) {
  return find_run(hb_region_owner(r, g), g.len, HB_S, true, begin, end, NULL);
}

bool hb_find_foreign(const hb_run *r, hb_region g, uint32_t slot, uint32_t *begin,
                     uint32_t *end, uint32_t *owner) {
  return find_run(hb_region_owner(r, g), g.len, slot, false, begin, end, owner);
}

void hb_fill_guards(uint8_t *mem, size_t inner) {
  memset(mem, HB_GUARD_BYTE, HB_GUARD_BYTES);
  memset(mem + HB_GUARD_BYTES + inner, HB_GUARD_BYTE, HB_GUARD_BYTES);
}

/* Index of the first byte of [p, p + n) that is not the guard pattern, or
   -1 when all are intact. */
static long first_touched(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != HB_GUARD_BYTE)
      return (long)i;
  return -1;
}

static df_status guard_fail(hb_run *r, uint32_t instr, const char *what, long where) {
  char at[256];
  hb_describe_instr(r, instr, at, sizeof at);
  return hb_fail(r, DF_HOST_DIAG_ARENA, hb_site_at(r, instr, HB_S),
                 "%s: the handler wrote outside its memory: %s, byte offset %ld", at, what,
                 where);
}

df_status hb_check_guards(hb_run *r, uint32_t cta, uint32_t instr) {
  const hb_cta *c = &r->ctas[cta];
  uint32_t shm = r->pkg.shared_memory_bytes, base = r->pkg.shared_slot_base_offset;
  long at;
  if ((at = first_touched(c->smem, HB_GUARD_BYTES)) >= 0)
    return guard_fail(r, instr, "before the shared-memory block (relative to the slot arena)",
                      at - (long)HB_GUARD_BYTES - (long)base);
  if ((at = first_touched(c->smem + HB_GUARD_BYTES, base)) >= 0)
    return guard_fail(r, instr,
                      "into the shared control region (barriers, ACK and issue state) "
                      "below the slot arena (relative to the slot arena)",
                      at - (long)base);
  if ((at = first_touched(c->smem + HB_GUARD_BYTES + shm, HB_GUARD_BYTES)) >= 0)
    return guard_fail(r, instr, "past the end of the shared slot arena (relative to its end)",
                      at);
  if ((at = first_touched(c->scratch_mem, HB_GUARD_BYTES)) >= 0)
    return guard_fail(r, instr, "before the scratch arena (relative to its start)",
                      at - (long)HB_GUARD_BYTES);
  if ((at = first_touched(c->scratch_mem + HB_GUARD_BYTES + r->scratch_bytes, HB_GUARD_BYTES)) >=
      0)
    return guard_fail(r, instr, "past the end of the scratch arena (relative to its end)", at);
  const uint32_t w = r->o.workspace_bytes;
  if (c->workspace && (at = first_touched(c->workspace - HB_GUARD_BYTES, HB_GUARD_BYTES)) >= 0)
    return guard_fail(r, instr, "before the handler workspace (relative to its start)",
                      at - (long)HB_GUARD_BYTES);
  if (c->workspace && (at = first_touched(c->workspace + w, HB_GUARD_BYTES)) >= 0)
    return guard_fail(r, instr, "past the end of the handler workspace (relative to its end)",
                      at);
  uint32_t stg = r->pkg.global_staging_bytes;
  if ((at = first_touched(r->staging_mem, HB_GUARD_BYTES)) >= 0)
    return guard_fail(r, instr, "before global staging (relative to its start)",
                      at - (long)HB_GUARD_BYTES);
  if ((at = first_touched(r->staging_mem + HB_GUARD_BYTES + stg, HB_GUARD_BYTES)) >= 0)
    return guard_fail(r, instr, "past the end of global staging (relative to its end)", at);
  return df_status_ok();
}
