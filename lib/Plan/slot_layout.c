/* Slot layout (REFERENCE 4): shared and global offsets with storage-id
   reuse, scratch-backed and HBM direct-global slots, flag and barrier
   indices, owners and slot flags. */
#include <stdio.h>
#include <string.h>

#include "arena.h"
#include "barrier_internal.h"
#include "keymap.h"
#include "slot_reuse.h"

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static uint32_t shared_key(const df_slot *s) {
  return s->private_shared || s->shared_storage == DF_SENTINEL ? s->id : s->shared_storage;
}

static uint32_t global_key(const df_slot *s) { return df_slot_global_alias(s); }

/* Python-style sorted list "[1, 5]" of the ids in `ids` for which
   `pick` holds (duplicates once, at most 16 shown). */
static void id_list(char *buf, size_t cap, const uint32_t *ids, uint32_t n,
                    const uint8_t *pick) {
  size_t len = (size_t)snprintf(buf, cap, "[");
  uint64_t last = 0;
  for (uint32_t printed = 0; len < cap; printed++) {
    uint64_t best = UINT64_MAX;
    for (uint32_t i = 0; i < n; i++)
      if (pick[i] && (printed == 0 || ids[i] > last) && ids[i] < best)
        best = ids[i];
    if (best == UINT64_MAX)
      break;
    if (printed == 16) {
      len += (size_t)snprintf(buf + len, cap - len, ", ...");
      break;
    }
    len += (size_t)snprintf(buf + len, cap - len, "%s%llu", printed ? ", " : "",
                            (unsigned long long)best);
    last = best;
  }
  if (len < cap)
    snprintf(buf + len, cap - len, "]");
}

static df_status selective(const df_plan *p, const df_layout_options *o, uint8_t *mask,
                           df_arena *a) {
  uint8_t *bad = df_arena_zero(a, o->direct_count, 1);
  uint8_t *hbm = df_arena_zero(a, p->slot_count, 1);
  if (!bad || !hbm)
    return DF_ARENA_OOM("direct-global slots");
  bool any = false;
  for (uint32_t i = 0; i < o->direct_count; i++)
    any |= (bad[i] = o->direct_slots[i] >= p->slot_count);
  char list[160];
  if (any) {
    id_list(list, sizeof list, o->direct_slots, o->direct_count, bad);
    return df_status_errorf(DF_EINVAL,
                            "HBM direct-global slot ids must exist in the plan; unknown=%s",
                            list);
  }
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    if (!df_comm_kind_is_hbm(c->kind))
      continue;
    if (c->src_slot < p->slot_count)
      hbm[c->src_slot] = 1;
    if (c->dst_slot < p->slot_count)
      hbm[c->dst_slot] = 1;
  }
  for (uint32_t i = 0; i < o->direct_count; i++)
    any |= (bad[i] = !hbm[o->direct_slots[i]]);
  if (any) {
    id_list(list, sizeof list, o->direct_slots, o->direct_count, bad);
    return df_status_errorf(DF_EINVAL,
                            "HBM direct-global slot ids must participate in HBM "
                            "communication; invalid=%s",
                            list);
  }
  for (uint32_t i = 0; i < o->direct_count; i++)
    mask[o->direct_slots[i]] = 1;
  return df_status_ok();
}

/* Full mode: every slot when the plan has HBM comms and no cluster
   send/recv; else slots whose comms are all HBM, plus slots sharing their
   shared or global storage. */
static df_status full(const df_plan *p, uint8_t *mask, df_arena *a) {
  enum { HBM = 1, OTHER = 2 };
  uint8_t *kinds = df_arena_zero(a, p->slot_count, 1);
  if (!kinds)
    return DF_ARENA_OOM("direct-global slots");
  bool any_hbm = false, any_cluster = false;
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    bool h = df_comm_kind_is_hbm(c->kind);
    any_hbm |= h;
    any_cluster |= c->kind == DF_COMM_CLUSTER_SEND || c->kind == DF_COMM_CLUSTER_RECV;
    if (c->src_slot < p->slot_count)
      kinds[c->src_slot] |= h ? HBM : OTHER;
    if (c->dst_slot < p->slot_count)
      kinds[c->dst_slot] |= h ? HBM : OTHER;
  }
  if (!any_hbm)
    return df_status_ok();
  if (!any_cluster) {
    memset(mask, 1, p->slot_count);
    return df_status_ok();
  }
  df_u32map shared, global;
  if (!df_u32map_init(&shared, a, p->slot_count) || !df_u32map_init(&global, a, p->slot_count))
    return DF_ARENA_OOM("direct-global slots");
  for (uint32_t s = 0; s < p->slot_count; s++)
    if (kinds[s] == HBM) {
      mask[s] = 1;
      df_u32map_put(&shared, shared_key(&p->slots[s]), 1);
      df_u32map_put(&global, global_key(&p->slots[s]), 1);
    }
  for (uint32_t s = 0; s < p->slot_count; s++)
    if (df_u32map_get(&shared, shared_key(&p->slots[s])) != DF_SENTINEL ||
        df_u32map_get(&global, global_key(&p->slots[s])) != DF_SENTINEL)
      mask[s] = 1;
  return df_status_ok();
}

static df_status direct_in(const df_plan *p, const df_layout_options *o, uint8_t *mask,
                           df_arena *a) {
  memset(mask, 0, p->slot_count);
  if (!o)
    return df_status_ok();
  if (o->hbm_direct_global && o->direct_count > 0)
    return df_status_errorf(DF_EINVAL,
                            "cannot combine full and selective HBM direct-global slots "
                            "(hbm_direct_global with %u selected slot ids)",
                            o->direct_count);
  if (o->direct_count > 0) {
    if (!o->direct_slots)
      return df_status_errorf(DF_EINVAL, "%u HBM direct-global slot ids given without a list",
                              o->direct_count);
    return selective(p, o, mask, a);
  }
  return o->hbm_direct_global ? full(p, mask, a) : df_status_ok();
}

df_status df_direct_global_slots(const df_plan *p, const df_layout_options *o, uint8_t *mask) {
  df_allocator al = df_allocator_or_default(&p->alloc);
  df_arena a;
  df_arena_init(&a, &al);
  df_status st = direct_in(p, o, mask, &a);
  df_arena_release(&a);
  return st;
}

/* Offsets keyed by storage id: a direct array for ids below the slot
   count (the scheduler's ids), a hash map for any others. */
typedef struct offsets {
  uint32_t *small, n;
  df_u32map big;
  uint64_t cursor;
} offsets;

static int offsets_init(offsets *t, df_arena *a, uint32_t n) {
  t->small = df_arena_sentinels(a, n);
  t->n = n;
  t->cursor = 0;
  return t->small && df_u32map_init(&t->big, a, n);
}

/* Offset of `key`: known keys reuse theirs, new keys take the cursor,
   which then grows by `advance`. */
static uint64_t offsets_take(offsets *t, uint32_t key, uint64_t advance) {
  uint32_t have = key < t->n ? t->small[key] : df_u32map_get(&t->big, key);
  if (have != DF_SENTINEL)
    return have;
  uint64_t off = t->cursor;
  uint32_t v = off < DF_SENTINEL ? (uint32_t)off : DF_SENTINEL - 1;
  if (key < t->n)
    t->small[key] = v;
  else
    df_u32map_put(&t->big, key, v);
  t->cursor += advance;
  return off;
}

/* Shared offsets: one arena for the whole plan (REFERENCE 4), or, with
   per_cta_shared, an arena per CTA. A slot's bytes live in every CTA that
   touches it: its owner or producer's SM, the SMs that receive into it
   (a transfer's source and target may be one slot id, at one offset in
   both CTAs) and the SMs that read it. A storage key takes the lowest
   offset free in all the CTAs of all its slots (first fit, slots in id
   order), and the dynamic shared memory is the fullest CTA's.

   Per CTA the taken bytes are a sorted array of disjoint, coalesced
   ranges. The first fit of a key starts at 0 and asks each of its CTAs in
   turn for the lowest free offset >= the candidate with room for the key
   (binary search, then a walk over the gaps too small for it) until every
   CTA returns the candidate unchanged: that is the lowest offset free in
   all of them. Ranges are never freed, so neighbours coalesce and a CTA
   keeps few ranges (4-15 in decode re-plans of 64-1024 sequences), and
   the layout grows about linearly with the plan. */
typedef struct interval {
  uint64_t lo, hi;
} interval;

/* With reuse_dead_shared a CTA's entries are per key (a dead key's bytes
   may hold several later keys), unsorted and not coalesced. */
typedef struct held {
  uint64_t lo, hi;
  uint32_t key;
} held;

typedef struct shared_alloc {
  bool per_cta, reuse;
  df_slot_reuse life;
  held **held; /* reuse: per CTA, `used` entries */
  offsets flat;
  uint32_t *first;  /* per storage key (slot_count + 1): start in cta[] */
  uint32_t *cta;    /* CTAs of each key, ascending, no repeats */
  uint32_t *offset; /* per storage key: offset, DF_SENTINEL = none yet */
  interval **taken; /* per CTA: occupied byte ranges, sorted, coalesced */
  uint32_t *used;   /* per CTA: entries of taken */
  uint32_t sm_count;
} shared_alloc;

/* (key, CTA) pairs of the plan, before grouping by key. */
typedef struct cta_marks {
  uint32_t *key, *sm, n, cap;
} cta_marks;

static void mark_cta(cta_marks *m, uint32_t key, uint32_t sm, uint32_t sm_count) {
  if (sm < sm_count && m->n < m->cap) {
    m->key[m->n] = key;
    m->sm[m->n++] = sm;
  }
}

static df_status collect_marks(const df_plan *p, uint32_t sm_count, cta_marks *m,
                               df_arena *a) {
  uint64_t cap = 2ull * p->slot_count + p->comm_count + p->instr_count;
  for (uint32_t i = 0; i < p->instr_count; i++)
    cap += p->instrs[i].input_count;
  if (cap > UINT32_MAX)
    return df_status_errorf(DF_EINVAL, "per-CTA slot layout: %llu slot uses exceed uint32",
                            (unsigned long long)cap);
  m->n = 0;
  m->cap = (uint32_t)cap;
  m->key = df_arena_array(a, cap, sizeof(uint32_t));
  m->sm = df_arena_array(a, cap, sizeof(uint32_t));
  if (!m->key || !m->sm)
    return DF_ARENA_OOM("the per-CTA slot layout");
  for (uint32_t id = 0; id < p->slot_count; id++) {
    const df_slot *s = &p->slots[id];
    uint32_t key = shared_key(s);
    if (key >= p->slot_count)
      return df_status_errorf(DF_EINVAL,
                              "per-CTA slot layout: slot %u has shared storage %u, the plan has "
                              "%u slots",
                              id, key, p->slot_count);
    if (s->owner != DF_SENTINEL)
      mark_cta(m, key, s->owner, sm_count);
    if (s->producer < p->instr_count)
      mark_cta(m, key, p->instrs[s->producer].sm, sm_count);
  }
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    if (c->dst_slot < p->slot_count && df_comm_kind_is_recv(c->kind))
      mark_cta(m, shared_key(&p->slots[c->dst_slot]), c->consumer_sm, sm_count);
    if (c->src_slot < p->slot_count && !df_comm_kind_is_recv(c->kind))
      mark_cta(m, shared_key(&p->slots[c->src_slot]), c->producer_sm, sm_count);
  }
  for (uint32_t i = 0; i < p->instr_count; i++) {
    const df_instr *in = &p->instrs[i];
    for (uint32_t j = 0; j < in->input_count; j++) {
      uint32_t sl = p->inputs[in->input_offset + j];
      if (sl < p->slot_count)
        mark_cta(m, shared_key(&p->slots[sl]), in->sm, sm_count);
    }
    if (in->output_slot < p->slot_count)
      mark_cta(m, shared_key(&p->slots[in->output_slot]), in->sm, sm_count);
  }
  return df_status_ok();
}

static df_status shared_alloc_init(const df_plan *p, const df_layout_options *o, df_arena *a,
                                   shared_alloc *sa) {
  memset(sa, 0, sizeof *sa);
  sa->per_cta = o && o->per_cta_shared;
  sa->reuse = o && o->reuse_dead_shared;
  if (sa->reuse && !sa->per_cta)
    return df_status_errorf(DF_EINVAL,
                            "reuse_dead_shared (reuse-dead-shared) needs per_cta_shared: "
                            "one arena for the whole plan has no CTA to reuse bytes in");
  if (!offsets_init(&sa->flat, a, p->slot_count))
    return DF_ARENA_OOM("the slot layout");
  if (!sa->per_cta)
    return df_status_ok();
  uint32_t n = p->slot_count;
  sa->sm_count = p->topology.sm_count ? p->topology.sm_count : 1;
  cta_marks m = {NULL, NULL, 0, 0};
  DF_TRY(collect_marks(p, sa->sm_count, &m, a));
  /* Group the marks by key (counting sort: CTAs ascending within a key
     since the marks are bucketed by CTA first), dropping repeats. */
  uint32_t *by_sm = df_arena_zero(a, (uint64_t)sa->sm_count + 1, sizeof(uint32_t));
  uint32_t *order = df_arena_array(a, m.n ? m.n : 1, sizeof(uint32_t));
  uint32_t *count = df_arena_zero(a, (uint64_t)n + 1, sizeof(uint32_t));
  uint32_t *last = df_arena_sentinels(a, n ? n : 1);
  sa->first = df_arena_zero(a, (uint64_t)n + 1, sizeof(uint32_t));
  sa->cta = df_arena_array(a, m.n ? m.n : 1, sizeof(uint32_t));
  sa->offset = df_arena_sentinels(a, n ? n : 1);
  sa->taken = df_arena_zero(a, sa->sm_count, sizeof(interval *));
  sa->used = df_arena_zero(a, sa->sm_count, sizeof(uint32_t));
  uint32_t *room = df_arena_zero(a, sa->sm_count, sizeof(uint32_t));
  if (!by_sm || !order || !count || !last || !sa->first || !sa->cta || !sa->offset ||
      !sa->taken || !sa->used || !room)
    return DF_ARENA_OOM("the per-CTA slot layout");
  for (uint32_t i = 0; i < m.n; i++)
    by_sm[m.sm[i] + 1]++;
  for (uint32_t s = 0; s < sa->sm_count; s++)
    by_sm[s + 1] += by_sm[s];
  for (uint32_t i = 0; i < m.n; i++)
    order[by_sm[m.sm[i]]++] = i;
  /* order[] now lists marks by CTA; keep the first (key, CTA) of each. */
  uint32_t kept = 0;
  for (uint32_t r = 0; r < m.n; r++) {
    uint32_t i = order[r];
    if (last[m.key[i]] == m.sm[i])
      continue;
    last[m.key[i]] = m.sm[i];
    order[kept++] = i;
    count[m.key[i] + 1]++;
    room[m.sm[i]]++;
  }
  for (uint32_t k = 0; k < n; k++)
    count[k + 1] += count[k];
  memcpy(sa->first, count, sizeof(uint32_t) * ((size_t)n + 1));
  for (uint32_t r = 0; r < kept; r++) {
    uint32_t i = order[r];
    sa->cta[count[m.key[i]]++] = m.sm[i];
  }
  /* Room for one range per key in each of its CTAs. */
  if (sa->reuse) {
    DF_TRY(df_slot_reuse_init(p, shared_key, a, &sa->life));
    if (!(sa->held = df_arena_zero(a, sa->sm_count, sizeof(held *))))
      return DF_ARENA_OOM("the per-CTA slot layout");
  }
  for (uint32_t sm = 0; sm < sa->sm_count; sm++)
    if (sa->reuse ? !(sa->held[sm] = df_arena_array(a, room[sm] ? room[sm] : 1, sizeof(held)))
                  : !(sa->taken[sm] = df_arena_array(a, room[sm] ? room[sm] : 1,
                                                     sizeof(interval))))
      return DF_ARENA_OOM("the per-CTA slot layout");
  return df_status_ok();
}

/* First range of CTA `sm` that ends after `at` (binary search). */
static uint32_t first_after(const shared_alloc *sa, uint32_t sm, uint64_t at) {
  const interval *t = sa->taken[sm];
  uint32_t lo = 0, hi = sa->used[sm];
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (t[mid].hi <= at)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* Lowest offset >= `at` where `advance` bytes are free in CTA `sm`. */
static uint64_t fit_in(const shared_alloc *sa, uint32_t sm, uint64_t at, uint64_t advance) {
  const interval *t = sa->taken[sm];
  for (uint32_t i = first_after(sa, sm, at); i < sa->used[sm] && t[i].lo < at + advance; i++)
    at = t[i].hi;
  return at;
}

/* Take [lo, hi), free in CTA `sm`, keeping the ranges sorted and
   coalesced. */
static void occupy(shared_alloc *sa, uint32_t sm, uint64_t lo, uint64_t hi) {
  interval *t = sa->taken[sm];
  uint32_t n = sa->used[sm], j = first_after(sa, sm, lo);
  bool left = j > 0 && t[j - 1].hi == lo, right = j < n && t[j].lo == hi;
  if (left && right) {
    t[j - 1].hi = t[j].hi;
    memmove(t + j, t + j + 1, sizeof *t * (n - j - 1));
    sa->used[sm]--;
  } else if (left) {
    t[j - 1].hi = hi;
  } else if (right) {
    t[j].lo = lo;
  } else {
    memmove(t + j + 1, t + j, sizeof *t * (n - j));
    t[j] = (interval){lo, hi};
    sa->used[sm]++;
  }
}

/* Reuse mode: lowest offset >= `at` where `advance` bytes overlap no
   entry of CTA `sm` whose key conflicts with `key`. An offset that
   overlaps a conflicting entry e is not free, nor is any below e.hi
   (they overlap e too), so jumping to e.hi skips no free offset. */
static uint64_t fit_reuse(const shared_alloc *sa, uint32_t sm, uint64_t at, uint64_t advance,
                          uint32_t key) {
  const held *t = sa->held[sm];
  for (bool moved = true; moved;) {
    moved = false;
    for (uint32_t i = 0; i < sa->used[sm]; i++)
      if (t[i].lo < at + advance && at < t[i].hi &&
          df_slot_reuse_conflict(&sa->life, t[i].key, key)) {
        at = t[i].hi;
        moved = true;
      }
  }
  return at;
}

static uint64_t shared_take(shared_alloc *sa, uint32_t key, uint64_t advance) {
  if (!sa->per_cta)
    return offsets_take(&sa->flat, key, advance);
  if (sa->offset[key] != DF_SENTINEL)
    return sa->offset[key];
  const uint32_t *set = sa->cta + sa->first[key];
  uint32_t m = sa->first[key + 1] - sa->first[key];
  uint64_t off = 0;
  /* Cycle through the CTAs until m in a row leave the candidate alone. */
  for (uint32_t i = 0, agree = 0; agree < m; i = i + 1 < m ? i + 1 : 0) {
    uint64_t at = sa->reuse ? fit_reuse(sa, set[i], off, advance, key)
                            : fit_in(sa, set[i], off, advance);
    agree = at == off ? agree + 1 : 1;
    off = at;
  }
  for (uint32_t i = 0; i < m; i++)
    if (sa->reuse)
      sa->held[set[i]][sa->used[set[i]]++] = (held){off, off + advance, key};
    else
      occupy(sa, set[i], off, off + advance);
  sa->offset[key] = off < DF_SENTINEL ? (uint32_t)off : DF_SENTINEL - 1;
  return off;
}

static df_status fit_u32(uint64_t v, uint32_t *out) {
  if (v > UINT32_MAX)
    return df_status_errorf(DF_EINVAL, "Dataflow ABI value must fit uint32, got %llu",
                            (unsigned long long)v);
  *out = (uint32_t)v;
  return df_status_ok();
}

static df_status layout_slot(const df_plan *p, const df_barrier_alloc *b,
                             const df_layout_options *o, const uint8_t *direct,
                             shared_alloc *sh, offsets *gl, uint64_t ends[3], uint32_t id,
                             df_abi_slot *r) {
  const df_slot *s = &p->slots[id];
  if (s->type < 0 || (uint32_t)s->type >= p->type_count)
    return df_status_errorf(DF_EINVAL, "slot %u has intermediate type index %d, plan has %u",
                            id, s->type, p->type_count);
  uint64_t bytes = p->types[s->type].bytes;
  uint64_t advance = align_up(bytes > DF_SLOT_ALIGN ? bytes : DF_SLOT_ALIGN, DF_SLOT_ALIGN);
  memset(r, 0, sizeof *r);
  r->bytes = (uint32_t)bytes;
  bool communicate = df_slot_role_communicates(s->role);
  if (communicate && !s->scratch_backed)
    return df_status_errorf(DF_EINVAL, "communicate slot %u (role %s) must be scratch-backed",
                            id, df_slot_role_name(s->role));
  uint64_t shared;
  if (s->scratch_backed) {
    if (!s->has_scratch_offset)
      return df_status_errorf(DF_EINVAL, "scratch-backed slot %u requires a scratch_offset",
                              id);
    if (s->scratch_offset % DF_SLOT_ALIGN)
      return df_status_errorf(DF_EINVAL,
                              "slot %u scratch_offset must be 16-byte aligned, got %u", id,
                              s->scratch_offset);
    shared = s->scratch_offset;
    r->flags |= DF_SLOT_FLAG_SCRATCH_BACKED;
    r->reserved = s->scratch_offset;
    if (shared + bytes > ends[2])
      ends[2] = shared + bytes;
  } else if (direct[id]) {
    shared = 0;
    r->flags |= DF_SLOT_FLAG_HBM_DIRECT_GLOBAL;
  } else {
    shared = shared_take(sh, shared_key(s), advance);
    if (shared + bytes > ends[0])
      ends[0] = shared + bytes;
  }
  uint64_t global = offsets_take(gl, global_key(s), advance);
  if (global + bytes > ends[1])
    ends[1] = global + bytes;
  DF_TRY(fit_u32(shared, &r->shared_offset));
  DF_TRY(fit_u32(global, &r->global_offset));
  r->flag_index = o && o->reuse_hbm_flags ? 0 : id;
  r->barrier_index = b ? b->slot_barrier[id] : DF_SENTINEL;
  if (s->owner != DF_SENTINEL)
    r->owner_cta = s->owner;
  else if (s->producer < p->instr_count)
    r->owner_cta = p->instrs[s->producer].sm;
  else
    r->owner_cta = DF_SENTINEL;
  if (s->gated || s->role == DF_ROLE_CLUSTER_GATED_INBOX)
    r->flags |= DF_SLOT_FLAG_CLUSTER_GATED_PUSH;
  if (communicate)
    r->flags |= DF_SLOT_FLAG_COMMUNICATE;
  return df_status_ok();
}

static df_status layout(const df_plan *p, const df_barrier_alloc *b, const df_layout_options *o,
                        df_arena *a, df_slot_layout *out) {
  uint8_t *direct = df_arena_array(a, p->slot_count, 1);
  offsets gl;
  shared_alloc sh;
  if (!direct || !offsets_init(&gl, a, p->slot_count))
    return DF_ARENA_OOM("the slot layout");
  DF_TRY(shared_alloc_init(p, o, a, &sh));
  DF_TRY(direct_in(p, o, direct, a));
  uint64_t ends[3] = {0, 0, 0}; /* shared, global, scratch */
  for (uint32_t id = 0; id < p->slot_count; id++) {
    if (p->slots[id].id != id)
      return df_status_errorf(DF_EINVAL, "slot at index %u has id %u", id, p->slots[id].id);
    DF_TRY(layout_slot(p, b, o, direct, &sh, &gl, ends, id, &out->slots[id]));
  }
  DF_TRY(fit_u32(align_up(ends[0], DF_SHARED_ALIGN), &out->shared_slot_bytes));
  DF_TRY(fit_u32(align_up(ends[1], DF_SHARED_ALIGN), &out->global_staging_bytes));
  DF_TRY(fit_u32(align_up(ends[2], DF_SHARED_ALIGN), &out->scratch_bytes));
  return df_status_ok();
}

df_status df_layout_slots(const df_plan *p, const df_barrier_alloc *b,
                          const df_layout_options *o, const df_allocator *alloc,
                          df_slot_layout *out) {
  memset(out, 0, sizeof *out);
  if (!p)
    return df_status_errorf(DF_EINVAL, "slot layout expects a plan, got NULL");
  if (b && b->slot_count != p->slot_count)
    return df_status_errorf(DF_EINVAL,
                            "barrier allocation covers %u slots, the plan has %u",
                            b->slot_count, p->slot_count);
  df_allocator al = df_allocator_or_default(alloc);
  out->slot_count = p->slot_count;
  out->reuse_hbm_flags = o && o->reuse_hbm_flags;
  out->slots = df_alloc(&al, sizeof(df_abi_slot) * p->slot_count);
  if (!out->slots)
    return df_status_errorf(DF_ENOMEM, "out of memory laying out %u slots", p->slot_count);
  df_arena a;
  df_arena_init(&a, &al);
  df_status st = layout(p, b, o, &a, out);
  df_arena_release(&a);
  if (st.code != DF_OK)
    df_slot_layout_free(out, &al);
  return st;
}

void df_slot_layout_free(df_slot_layout *l, const df_allocator *alloc) {
  if (!l)
    return;
  df_allocator al = df_allocator_or_default(alloc);
  df_free(&al, l->slots);
  memset(l, 0, sizeof *l);
}
