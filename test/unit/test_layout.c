/* Slot layout (REFERENCE 4): offsets with storage reuse, scratch-backed
   and direct-global slots, flags, owners, sizes and every layout error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "hand_plan.h"
#include "seed_plans.h"

#define S DF_SENTINEL

static df_slot_layout lay(const df_plan *p, const df_layout_options *o, bool barriers) {
  df_barrier_alloc b;
  memset(&b, 0, sizeof b);
  if (barriers)
    assert_int_equal(df_allocate_barriers(p, NULL, &b).code, DF_OK);
  df_slot_layout l;
  df_status s = df_layout_slots(p, barriers ? &b : NULL, o, NULL, &l);
  if (s.code != DF_OK)
    print_error("layout: %s\n", s.message);
  assert_int_equal(s.code, DF_OK);
  df_barrier_alloc_free(&b, NULL);
  return l;
}

static df_status lay_status(const df_plan *p, const df_layout_options *o) {
  df_slot_layout l;
  df_status s = df_layout_slots(p, NULL, o, NULL, &l);
  if (s.code == DF_OK)
    df_slot_layout_free(&l, NULL);
  else
    assert_null(l.slots);
  return s;
}

static void seed_plan_layout(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_slot_layout l = lay(p, NULL, true);
  static const uint32_t want[7][8] = {
      {0, 0, 48, 0, S, 0, 0, 0},     {48, 48, 48, 1, 0, 1, 0, 0},   {96, 96, 48, 2, 1, 2, 0, 0},
      {144, 144, 48, 3, S, 0, 0, 0}, {192, 192, 48, 4, S, 3, 0, 0}, {240, 240, 48, 5, 0, 0, 0, 0},
      {288, 288, 48, 6, S, 3, 0, 0}};
  assert_int_equal(l.slot_count, 7);
  for (uint32_t i = 0; i < 7; i++)
    assert_memory_equal(&l.slots[i], want[i], 32);
  assert_int_equal(l.shared_slot_bytes, 336);
  assert_int_equal(l.global_staging_bytes, 336);
  assert_int_equal(l.scratch_bytes, 0);
  assert_false(l.reuse_hbm_flags);
  df_slot_layout_free(&l, NULL);
  /* without a barrier allocation every slot has none */
  l = lay(p, NULL, false);
  for (uint32_t i = 0; i < 7; i++)
    assert_int_equal(l.slots[i].barrier_index, S);
  df_slot_layout_free(&l, NULL);
  df_slot_layout_free(NULL, NULL);
  /* reuse_hbm_flags: one flag for everything */
  df_layout_options o;
  memset(&o, 0, sizeof o);
  o.reuse_hbm_flags = true;
  l = lay(p, &o, true);
  assert_true(l.reuse_hbm_flags);
  for (uint32_t i = 0; i < 7; i++)
    assert_int_equal(l.slots[i].flag_index, 0);
  df_slot_layout_free(&l, NULL);
  df_plan_destroy(p);
}

static void reshared_layout_aliases_storage(void **state) {
  (void)state;
  df_plan *p = seed_make_reshared_plan();
  df_slot_layout l = lay(p, NULL, true);
  const uint32_t shared[8] = {0, 16, 0, 32, 48, 16, 64, 64};
  const uint32_t global[8] = {0, 16, 0, 16, 0, 16, 32, 48};
  const uint32_t owner[8] = {0, 1, 0, S, S, 1, 0, 1};
  for (uint32_t i = 0; i < 8; i++) {
    assert_int_equal(l.slots[i].shared_offset, shared[i]);
    assert_int_equal(l.slots[i].global_offset, global[i]);
    assert_int_equal(l.slots[i].owner_cta, owner[i]);
    assert_int_equal(l.slots[i].flag_index, i);
  }
  assert_int_equal(l.shared_slot_bytes, 80);
  assert_int_equal(l.global_staging_bytes, 64);
  df_slot_layout_free(&l, NULL);
  df_plan_destroy(p);
}

static void streaming_layout_keeps_two_regions(void **state) {
  (void)state;
  static const uint32_t kv[2] = {8192, 8192};
  df_plan *p = seed_schedule_attention(4, 2, kv, 2, 64, DF_POLICY_CLUSTER_LOCAL,
                                       DF_REDUCE_STREAMING, false);
  df_slot_layout l = lay(p, NULL, true);
  assert_int_equal(l.slot_count, 8);
  for (uint32_t i = 0; i < 8; i++) {
    uint32_t key = p->slots[i].shared_storage;
    assert_int_equal(l.slots[i].shared_offset, key == 1 ? 0 : 48);
    assert_int_equal(l.slots[i].global_offset, 48 * i);
  }
  assert_int_equal(l.shared_slot_bytes, 96);
  assert_int_equal(l.global_staging_bytes, 384);
  df_slot_layout_free(&l, NULL);
  /* storage ids beyond the slot ids take the same layout */
  for (uint32_t i = 0; i < 8; i++)
    p->slots[i].shared_storage += 1000;
  l = lay(p, NULL, true);
  for (uint32_t i = 0; i < 8; i++)
    assert_int_equal(l.slots[i].shared_offset, p->slots[i].shared_storage == 1001 ? 0 : 48);
  assert_int_equal(l.shared_slot_bytes, 96);
  df_slot_layout_free(&l, NULL);
  df_plan_destroy(p);
}

static void scratch_backed_slots(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  p->slots[1].scratch_backed = true;
  p->slots[1].has_scratch_offset = true;
  p->slots[1].scratch_offset = 4096;
  df_slot_layout l = lay(p, NULL, true);
  const uint32_t want[8] = {4096, 48, 48, 1, 0, 1, DF_SLOT_FLAG_SCRATCH_BACKED, 4096};
  assert_memory_equal(&l.slots[1], want, 32);
  const uint32_t shared[7] = {0, 4096, 48, 96, 144, 192, 240};
  for (uint32_t i = 0; i < 7; i++)
    assert_int_equal(l.slots[i].shared_offset, shared[i]);
  assert_int_equal(l.shared_slot_bytes, 288);
  assert_int_equal(l.scratch_bytes, 4096 + 48);
  df_slot_layout_free(&l, NULL);
  /* two scratch slots: scratch bytes cover the furthest */
  p->slots[1].scratch_offset = 64;
  p->slots[3].scratch_backed = p->slots[3].has_scratch_offset = true;
  p->slots[3].scratch_offset = 0;
  l = lay(p, NULL, true);
  assert_int_equal(l.scratch_bytes, 112);
  df_slot_layout_free(&l, NULL);

  p->slots[1].scratch_offset = 4100;
  assert_true(hand_error_has(lay_status(p, NULL),
                             "slot 1 scratch_offset must be 16-byte aligned, got 4100"));
  p->slots[1].has_scratch_offset = false;
  assert_true(hand_error_has(lay_status(p, NULL), "slot 1 requires a scratch_offset"));
  df_plan_destroy(p);
}

static void communicate_and_gated_flags(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  p->slots[4].role = DF_ROLE_CLUSTER_INBOX;
  assert_true(hand_error_has(lay_status(p, NULL),
                             "communicate slot 4 (role cluster_inbox) must be scratch-backed"));
  p->slots[4].scratch_backed = p->slots[4].has_scratch_offset = true;
  p->slots[4].scratch_offset = 256;
  p->slots[5].gated = true;
  p->slots[6].role = DF_ROLE_CLUSTER_GATED_INBOX;
  p->slots[6].scratch_backed = p->slots[6].has_scratch_offset = true;
  p->slots[6].scratch_offset = 512;
  df_slot_layout l = lay(p, NULL, true);
  assert_int_equal(l.slots[4].flags, DF_SLOT_FLAG_SCRATCH_BACKED | DF_SLOT_FLAG_COMMUNICATE);
  assert_int_equal(l.slots[5].flags, DF_SLOT_FLAG_CLUSTER_GATED_PUSH);
  assert_int_equal(l.slots[6].flags, DF_SLOT_FLAG_SCRATCH_BACKED |
                                         DF_SLOT_FLAG_CLUSTER_GATED_PUSH |
                                         DF_SLOT_FLAG_COMMUNICATE);
  df_slot_layout_free(&l, NULL);
  const df_slot_role roles[] = {DF_ROLE_HBM_SPILL_INBOX, DF_ROLE_JOINT_COMM_INBOX,
                                DF_ROLE_JOINT_COMM_OUTBOX, DF_ROLE_JOINT_PREFETCH_INBOX,
                                DF_ROLE_CLUSTER_GATED_INBOX};
  for (uint32_t i = 0; i < 5; i++) {
    p->slots[0].role = roles[i];
    assert_true(hand_error_has(lay_status(p, NULL), "communicate slot 0"));
  }
  df_plan_destroy(p);
}

static void owners(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  p->slots[0].owner = 3;
  p->slots[6].producer = S;
  df_slot_layout l = lay(p, NULL, false);
  assert_int_equal(l.slots[0].owner_cta, 3);
  assert_int_equal(l.slots[6].owner_cta, S);
  assert_int_equal(l.slots[4].owner_cta, 3);
  df_slot_layout_free(&l, NULL);
  df_plan_destroy(p);
}

static void direct_global_sets(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  uint8_t mask[7];
  df_layout_options o;
  memset(&o, 0, sizeof o);
  assert_int_equal(df_direct_global_slots(p, NULL, mask).code, DF_OK);
  for (uint32_t i = 0; i < 7; i++)
    assert_int_equal(mask[i], 0);
  /* full mode with cluster comms: slots whose comms are all HBM */
  o.hbm_direct_global = true;
  assert_int_equal(df_direct_global_slots(p, &o, mask).code, DF_OK);
  const uint8_t hbm_only[7] = {0, 0, 1, 0, 0, 1, 0};
  assert_memory_equal(mask, hbm_only, 7);
  df_slot_layout l = lay(p, &o, false);
  for (uint32_t i = 0; i < 7; i++) {
    bool d = hbm_only[i];
    assert_int_equal((l.slots[i].flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL) != 0, d);
    if (d)
      assert_int_equal(l.slots[i].shared_offset, 0);
  }
  /* direct slots take no shared cursor space */
  const uint32_t shared[7] = {0, 48, 0, 96, 144, 0, 192};
  for (uint32_t i = 0; i < 7; i++)
    assert_int_equal(l.slots[i].shared_offset, shared[i]);
  assert_int_equal(l.shared_slot_bytes, 240);
  assert_int_equal(l.global_staging_bytes, 336);
  df_slot_layout_free(&l, NULL);
  /* ... plus the slots sharing their shared or global storage */
  p->slots[3].global_storage = 2;
  p->slots[4].shared_storage = 5;
  assert_int_equal(df_direct_global_slots(p, &o, mask).code, DF_OK);
  const uint8_t sharing[7] = {0, 0, 1, 1, 1, 1, 0};
  assert_memory_equal(mask, sharing, 7);
  df_plan_destroy(p);
  /* no HBM comms: nothing is direct */
  static const uint32_t kv[2] = {256, 256};
  p = seed_schedule_attention(4, 2, kv, 2, 128, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_ALL_AT_ONCE,
                              true);
  uint8_t m2[16];
  assert_int_equal(df_direct_global_slots(p, &o, m2).code, DF_OK);
  for (uint32_t i = 0; i < p->slot_count; i++)
    assert_int_equal(m2[i], 0);
  df_plan_destroy(p);
  /* HBM comms and no cluster comms: every slot */
  p = seed_make_reshared_plan();
  assert_int_equal(df_direct_global_slots(p, &o, m2).code, DF_OK);
  for (uint32_t i = 0; i < p->slot_count; i++)
    assert_int_equal(m2[i], 1);
  df_plan_destroy(p);
}

static void direct_global_errors(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_layout_options o;
  memset(&o, 0, sizeof o);
  uint32_t ids[3] = {9, 7, 9};
  o.direct_slots = ids;
  o.direct_count = 3;
  o.hbm_direct_global = true;
  assert_true(hand_error_has(lay_status(p, &o),
                             "cannot combine full and selective HBM direct-global slots"));
  o.hbm_direct_global = false;
  assert_true(hand_error_has(lay_status(p, &o),
                             "HBM direct-global slot ids must exist in the plan; "
                             "unknown=[7, 9]"));
  uint32_t bad[3] = {2, 1, 0};
  o.direct_slots = bad;
  assert_true(hand_error_has(lay_status(p, &o),
                             "HBM direct-global slot ids must participate in HBM "
                             "communication; invalid=[0, 1]"));
  o.direct_slots = NULL;
  assert_true(hand_error_has(lay_status(p, &o), "without a list"));
  uint32_t many[20];
  for (uint32_t i = 0; i < 20; i++)
    many[i] = 100 + i;
  o.direct_slots = many;
  o.direct_count = 20;
  assert_true(hand_error_has(lay_status(p, &o), "unknown=[100, 101, 102, 103, 104, 105, 106, "
                                                "107, 108, 109, 110, 111, 112, 113, 114, 115, "
                                                "...]"));
  df_plan_destroy(p);
}

static void layout_errors(void **state) {
  (void)state;
  df_slot_layout l;
  assert_true(hand_error_has(df_layout_slots(NULL, NULL, NULL, NULL, &l), "expects a plan"));
  df_plan *p = seed_make_plan();
  df_barrier_alloc b;
  assert_int_equal(df_allocate_barriers(p, NULL, &b).code, DF_OK);
  b.slot_count = 3;
  assert_true(hand_error_has(df_layout_slots(p, &b, NULL, NULL, &l), "covers 3 slots"));
  b.slot_count = 7;
  df_barrier_alloc_free(&b, NULL);
  p->slots[2].type = 5;
  assert_true(hand_error_has(lay_status(p, NULL), "slot 2 has intermediate type index 5"));
  p->slots[2].type = 0;
  p->slots[3].id = 9;
  assert_true(hand_error_has(lay_status(p, NULL), "slot at index 3 has id 9"));
  p->slots[3].id = 3;
  p->types[0].bytes = 0x40000000u; /* offsets beyond 4 GiB */
  assert_true(hand_error_has(lay_status(p, NULL), "Dataflow ABI value must fit uint32, got"));
  df_plan_destroy(p);
}


/* The CTAs a slot's shared bytes live in (the per-CTA layout's rule). */
static void touch(const df_plan *p, uint8_t *ctas, uint32_t slot, uint32_t sm) {
  if (slot < p->slot_count && sm < p->topology.sm_count)
    ctas[(size_t)slot * p->topology.sm_count + sm] = 1;
}

/* Which CTAs each slot lives in (slot-major, sm_count columns): its
   producer's, its owner, both ends of its comms, and every reader's. */
static uint8_t *slot_ctas(const df_plan *p) {
  uint32_t n = p->slot_count;
  uint8_t *ctas = calloc((size_t)n * p->topology.sm_count + 1, 1);
  assert_non_null(ctas);
  for (uint32_t i = 0; i < n; i++) {
    if (p->slots[i].producer < p->instr_count)
      touch(p, ctas, i, p->instrs[p->slots[i].producer].sm);
    if (p->slots[i].owner != DF_SENTINEL)
      touch(p, ctas, i, p->slots[i].owner);
  }
  for (uint32_t i = 0; i < p->comm_count; i++) {
    touch(p, ctas, p->comms[i].dst_slot, p->comms[i].consumer_sm);
    touch(p, ctas, p->comms[i].src_slot, p->comms[i].producer_sm);
  }
  for (uint32_t i = 0; i < p->instr_count; i++)
    for (uint32_t j = 0; j < p->instrs[i].input_count; j++)
      touch(p, ctas, p->inputs[p->instrs[i].input_offset + j], p->instrs[i].sm);
  return ctas;
}

static void check_per_cta(const df_plan *p) {
  df_layout_options flat, per;
  memset(&flat, 0, sizeof flat);
  memset(&per, 0, sizeof per);
  per.per_cta_shared = true;
  df_slot_layout a = lay(p, &flat, true), b = lay(p, &per, true);
  uint32_t n = p->slot_count, sms = p->topology.sm_count;
  /* Only shared offsets change, and the arena shrinks (or stays). */
  for (uint32_t i = 0; i < n; i++) {
    df_abi_slot x = a.slots[i], y = b.slots[i];
    x.shared_offset = y.shared_offset = 0;
    assert_memory_equal(&x, &y, sizeof x);
  }
  assert_true(b.shared_slot_bytes <= a.shared_slot_bytes);
  assert_int_equal(b.global_staging_bytes, a.global_staging_bytes);
  uint8_t *ctas = slot_ctas(p);
  /* No two slots of one CTA overlap unless they share storage. */
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t j = i + 1; j < n; j++) {
      const df_abi_slot *x = &b.slots[i], *y = &b.slots[j];
      if (x->shared_offset == y->shared_offset && a.slots[i].shared_offset == a.slots[j].shared_offset)
        continue; /* the same storage in the reference layout too */
      bool overlap = x->shared_offset < y->shared_offset + y->bytes &&
                     y->shared_offset < x->shared_offset + x->bytes;
      for (uint32_t sm = 0; overlap && sm < sms; sm++)
        if (ctas[(size_t)i * sms + sm] && ctas[(size_t)j * sms + sm])
          fail_msg("slots %u and %u overlap in CTA %u", i, j, sm);
    }
  free(ctas);
  df_slot_layout_free(&a, NULL);
  df_slot_layout_free(&b, NULL);
}

static void per_cta_shared_layout(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  check_per_cta(p);
  df_plan_destroy(p);
  /* A bigger plan: 8 tasks on 16 SMs, cluster and HBM transfers. */
  const uint32_t kv[8] = {1024, 384, 2048, 128, 640, 1536, 256, 896};
  const df_policy pol[2] = {DF_POLICY_ROUND_ROBIN, DF_POLICY_CLUSTER_LOCAL};
  const df_reduce_strategy st[2] = {DF_REDUCE_ALL_AT_ONCE, DF_REDUCE_STREAMING};
  for (int i = 0; i < 2; i++) {
    p = seed_schedule_attention(16, 2, kv, 8, 128, pol[i], st[i], true);
    df_layout_options flat, per;
    memset(&flat, 0, sizeof flat);
    memset(&per, 0, sizeof per);
    per.per_cta_shared = true;
    df_slot_layout a = lay(p, &flat, true), b = lay(p, &per, true);
    if (i == 0) /* all-at-once: the arena is the fullest CTA's, far below the whole plan's */
      assert_true(2 * b.shared_slot_bytes < a.shared_slot_bytes);
    df_slot_layout_free(&a, NULL);
    df_slot_layout_free(&b, NULL);
    check_per_cta(p);
    df_plan_destroy(p);
  }
}

/* ---- per-CTA layout against a straightforward reference ---------------- */

static uint32_t ref_key(const df_slot *s) {
  return s->private_shared || s->shared_storage == S ? s->id : s->shared_storage;
}

static void ref_mark(const df_plan *p, uint8_t *set, uint32_t key, uint32_t slot,
                     uint32_t sm) {
  if (slot < p->slot_count && ref_key(&p->slots[slot]) == key && sm < p->topology.sm_count)
    set[sm] = 1;
}

/* The CTAs that hold storage key `key`: owners and producers' SMs of its
   slots, receivers of transfers into them, senders out of them, and the
   SMs of the instructions that read or write them. */
static void ref_ctas(const df_plan *p, uint32_t key, uint8_t *set) {
  memset(set, 0, p->topology.sm_count);
  for (uint32_t i = 0; i < p->slot_count; i++) {
    if (p->slots[i].owner != S)
      ref_mark(p, set, key, i, p->slots[i].owner);
    if (p->slots[i].producer < p->instr_count)
      ref_mark(p, set, key, i, p->instrs[p->slots[i].producer].sm);
  }
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    if (df_comm_kind_is_recv(c->kind))
      ref_mark(p, set, key, c->dst_slot, c->consumer_sm);
    else
      ref_mark(p, set, key, c->src_slot, c->producer_sm);
  }
  for (uint32_t i = 0; i < p->instr_count; i++) {
    const df_instr *in = &p->instrs[i];
    for (uint32_t j = 0; j < in->input_count; j++)
      ref_mark(p, set, key, p->inputs[in->input_offset + j], in->sm);
    ref_mark(p, set, key, in->output_slot, in->sm);
  }
}

/* Reference per-CTA shared offsets: slots in id order; a new storage key
   tries 0 and every end of a range taken in one of its CTAs, lowest
   first, and takes the first that overlaps nothing in any of them. */
static void ref_per_cta(const df_plan *p, const uint8_t *direct, uint32_t *offset,
                        uint32_t *arena) {
  uint32_t n = p->slot_count, sms = p->topology.sm_count;
  uint64_t *lo = calloc(n + 1, sizeof *lo), *hi = calloc(n + 1, sizeof *hi);
  uint8_t *in = calloc((size_t)(n + 1) * sms, 1); /* per taken range: its CTAs */
  uint32_t *key_off = malloc(sizeof *key_off * (n + 1)), ranges = 0;
  memset(key_off, 0xFF, sizeof *key_off * (n + 1));
  uint64_t end = 0;
  for (uint32_t id = 0; id < n; id++) {
    const df_slot *s = &p->slots[id];
    offset[id] = S;
    if (s->scratch_backed || direct[id])
      continue;
    uint64_t bytes = p->types[s->type].bytes;
    uint64_t adv = ((bytes > 16 ? bytes : 16) + 15) / 16 * 16;
    uint32_t key = ref_key(s);
    if (key_off[key] == S) {
      uint8_t *set = in + (size_t)ranges * sms;
      ref_ctas(p, key, set);
      uint64_t best = UINT64_MAX;
      for (uint32_t c = 0; c <= ranges; c++) {
        uint64_t at = c == ranges ? 0 : hi[c];
        bool free_here = at < best;
        for (uint32_t r = 0; free_here && r < ranges; r++) {
          bool shared_cta = false;
          for (uint32_t sm = 0; sm < sms && !shared_cta; sm++)
            shared_cta = set[sm] && in[(size_t)r * sms + sm];
          free_here = !shared_cta || hi[r] <= at || lo[r] >= at + adv;
        }
        if (free_here)
          best = at;
      }
      lo[ranges] = best;
      hi[ranges++] = best + adv;
      key_off[key] = (uint32_t)best;
    }
    offset[id] = key_off[key];
    if (offset[id] + bytes > end)
      end = offset[id] + bytes;
  }
  *arena = (uint32_t)((end + 15) / 16 * 16);
  free(lo);
  free(hi);
  free(in);
  free(key_off);
}

static uint32_t next_rand(uint32_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 17;
  *x ^= *x << 5;
  return *x;
}

/* Scheduled plans of random shape, then slots of mixed sizes, aliased
   shared storage and explicit owners: the library's per-CTA offsets are
   the reference's, slot for slot. */
static void per_cta_matches_reference(void **state) {
  (void)state;
  uint32_t x = 2463534242u;
  for (int round = 0; round < 40; round++) {
    uint32_t sms = 2 + next_rand(&x) % 30, tasks = 1 + next_rand(&x) % 24;
    sms += sms % 2;
    uint32_t kv[24];
    for (uint32_t t = 0; t < tasks; t++)
      kv[t] = 16 + next_rand(&x) % 4096;
    df_policy pol = next_rand(&x) % 2 ? DF_POLICY_ROUND_ROBIN : DF_POLICY_CLUSTER_LOCAL;
    df_reduce_strategy st = pol == DF_POLICY_CLUSTER_LOCAL && next_rand(&x) % 2
                                ? DF_REDUCE_STREAMING
                                : DF_REDUCE_ALL_AT_ONCE;
    df_plan *p = seed_schedule_attention(sms, 2, kv, tasks, 128, pol, st, round % 3 != 0);
    if (round % 2) {
      int32_t types[3];
      const uint32_t bytes[3] = {8, 100, 3000};
      for (int k = 0; k < 3; k++)
        assert_int_equal(df_plan_add_type(p, "T", bytes[k], &types[k]).code, DF_OK);
      for (uint32_t i = 0; i < p->slot_count; i++) {
        df_slot *s = &p->slots[i];
        uint32_t r = next_rand(&x) % 16;
        if (r < 4)
          s->type = types[r % 3];
        else if (r < 6 && i > 0) {
          s->shared_storage = next_rand(&x) % i;
          s->private_shared = false;
        } else if (r == 6)
          s->owner = next_rand(&x) % sms;
      }
    }
    df_layout_options o;
    memset(&o, 0, sizeof o);
    o.per_cta_shared = true;
    df_slot_layout l = lay(p, &o, false);
    uint8_t *direct = calloc(p->slot_count + 1, 1);
    uint32_t *want = malloc(sizeof *want * (p->slot_count + 1)), arena;
    assert_int_equal(df_direct_global_slots(p, &o, direct).code, DF_OK);
    ref_per_cta(p, direct, want, &arena);
    for (uint32_t i = 0; i < p->slot_count; i++)
      if (want[i] != S && l.slots[i].shared_offset != want[i])
        fail_msg("round %d slot %u: offset %u, reference %u", round, i,
                 l.slots[i].shared_offset, want[i]);
    assert_int_equal(l.shared_slot_bytes, arena);
    free(direct);
    free(want);
    df_slot_layout_free(&l, NULL);
    df_plan_destroy(p);
  }
}

/* ---- lifetime-based reuse (reuse_dead_shared) ---------------------------- */

/* The seed MoE program (map1 -> reshared -> map2 -> finalize) with `tasks`
   tasks on `sms` SMs in clusters of `cs`: several tasks per CTA. */
static df_plan *reshared_tasks(uint32_t sms, uint32_t cs, uint32_t tasks, bool hbm) {
  df_program *prog = seed_moe_program();
  uint32_t e[16], h[16];
  for (uint32_t t = 0; t < tasks; t++)
    e[t] = h[t] = 256;
  df_schedule_options o = df_schedule_options_default();
  o.topology.sm_count = sms;
  o.topology.cluster_size = cs;
  o.block_size = 128;
  o.range_count = 2;
  o.ranges[0].axis = "expert_tile";
  o.ranges[0].count = tasks;
  o.ranges[0].lengths = e;
  o.ranges[1].axis = "hidden_tile";
  o.ranges[1].count = tasks;
  o.ranges[1].lengths = h;
  o.extent_count = 1;
  o.extents[0] = tasks;
  o.include_exit = tasks % 2 == 0;
  o.force_hbm_comms = hbm;
  df_plan *plan;
  df_status st = df_schedule(prog, &o, &plan);
  if (st.code != DF_OK)
    print_error("schedule %u SMs / %u, %u tasks: %s\n", sms, cs, tasks, st.message);
  assert_int_equal(st.code, DF_OK);
  df_program_destroy(prog);
  return plan;
}

typedef struct uses {
  uint32_t n, *first, *ins; /* per storage key: instructions using it */
  uint8_t *ownerless;       /* per key: an owner no instruction stands for */
} uses;

static void use_add(const df_plan *p, uses *u, uint32_t *cnt, bool fill, uint32_t slot,
                    uint32_t ins) {
  if (slot >= p->slot_count)
    return;
  uint32_t k = ref_key(&p->slots[slot]);
  if (ins >= p->instr_count) {
    u->ownerless[k] = 1;
    return;
  }
  if (fill)
    u->ins[cnt[k]++] = ins;
  else
    cnt[k + 1]++;
}

/* Independent of the library: every instruction that produces, reads or
   writes a key's slots, and each end and dispatch of a comm touching one. */
static uses key_uses(const df_plan *p) {
  uses u;
  uint32_t n = p->slot_count;
  u.n = n;
  u.first = calloc(n + 2, sizeof(uint32_t));
  u.ownerless = calloc(n + 1, 1);
  uint32_t *cnt = calloc(n + 2, sizeof(uint32_t));
  for (int pass = 0; pass < 2; pass++) {
    bool fill = pass == 1;
    for (uint32_t i = 0; i < n; i++)
      if (p->slots[i].producer != S || p->slots[i].owner != S)
        use_add(p, &u, fill ? cnt : u.first, fill, i, p->slots[i].producer);
    for (uint32_t i = 0; i < p->comm_count; i++) {
      const df_comm *c = &p->comms[i];
      const uint32_t sl[2] = {c->src_slot, c->dst_slot};
      for (int e = 0; e < 2; e++) {
        use_add(p, &u, fill ? cnt : u.first, fill, sl[e], c->src_instr);
        use_add(p, &u, fill ? cnt : u.first, fill, sl[e], c->dst_instr);
        use_add(p, &u, fill ? cnt : u.first, fill, sl[e], df_comm_dispatch(c));
      }
    }
    for (uint32_t i = 0; i < p->instr_count; i++) {
      const df_instr *in = &p->instrs[i];
      for (uint32_t j = 0; j < in->input_count; j++)
        use_add(p, &u, fill ? cnt : u.first, fill, p->inputs[in->input_offset + j], i);
      use_add(p, &u, fill ? cnt : u.first, fill, in->output_slot, i);
    }
    if (!fill) {
      for (uint32_t k = 0; k < n; k++)
        u.first[k + 1] += u.first[k];
      memcpy(cnt, u.first, sizeof(uint32_t) * (n + 1));
      u.ins = malloc(sizeof(uint32_t) * (u.first[n] + 1));
    }
  }
  free(cnt);
  return u;
}

/* Reachability by depth-first search over REFERENCE 3.4's edges: queue
   order, comm source -> target, slot producer -> reader. reach[a*n+b]. */
static uint8_t *reach_matrix(const df_plan *p) {
  uint32_t n = p->instr_count;
  uint8_t *adj = calloc((size_t)n * n + 1, 1), *reach = calloc((size_t)n * n + 1, 1);
  for (uint32_t s = 0; s < p->topology.sm_count; s++)
    for (uint32_t q = 1; q < p->queue_lengths[s]; q++) {
      uint32_t a = p->queue_ids[p->queue_offsets[s] + q - 1], b = p->queue_ids[p->queue_offsets[s] + q];
      adj[(size_t)a * n + b] = 1;
    }
  for (uint32_t i = 0; i < p->comm_count; i++)
    if (p->comms[i].src_instr < n && p->comms[i].dst_instr < n)
      adj[(size_t)p->comms[i].src_instr * n + p->comms[i].dst_instr] = 1;
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t j = 0; j < p->instrs[i].input_count; j++) {
      uint32_t sl = p->inputs[p->instrs[i].input_offset + j];
      if (sl < p->slot_count && p->slots[sl].producer < n)
        adj[(size_t)p->slots[sl].producer * n + i] = 1;
    }
  uint32_t *stack = malloc(sizeof(uint32_t) * (n + 1));
  for (uint32_t a = 0; a < n; a++) {
    uint32_t top = 0;
    stack[top++] = a;
    while (top) {
      uint32_t x = stack[--top];
      for (uint32_t y = 0; y < n; y++)
        if (adj[(size_t)x * n + y] && !reach[(size_t)a * n + y]) {
          reach[(size_t)a * n + y] = 1;
          stack[top++] = y;
        }
    }
  }
  free(stack);
  free(adj);
  return reach;
}

static bool all_before(const df_plan *p, const uses *u, const uint8_t *reach, uint32_t j,
                       uint32_t k) {
  uint32_t n = p->instr_count;
  for (uint32_t x = u->first[j]; x < u->first[j + 1]; x++)
    for (uint32_t y = u->first[k]; y < u->first[k + 1]; y++)
      if (u->ins[x] == u->ins[y] || !reach[(size_t)u->ins[x] * n + u->ins[y]])
        return false;
  return true;
}

/* The checker: with reuse_dead_shared, two slots of different storage
   whose bytes overlap in a CTA they both live in have uses ordered one
   way or the other; every other field is the per-CTA layout's, and the
   arena is no larger. Returns the two arena sizes. */
static void check_reuse(const df_plan *p, uint32_t *without, uint32_t *with) {
  df_layout_options per, re;
  memset(&per, 0, sizeof per);
  per.per_cta_shared = true;
  re = per;
  re.reuse_dead_shared = true;
  df_slot_layout a = lay(p, &per, true), b = lay(p, &re, true);
  uint32_t n = p->slot_count, sms = p->topology.sm_count;
  for (uint32_t i = 0; i < n; i++) {
    df_abi_slot x = a.slots[i], y = b.slots[i];
    x.shared_offset = y.shared_offset = 0;
    assert_memory_equal(&x, &y, sizeof x);
  }
  assert_true(b.shared_slot_bytes <= a.shared_slot_bytes);
  assert_int_equal(b.global_staging_bytes, a.global_staging_bytes);
  uint8_t *ctas = slot_ctas(p);
  uses u = key_uses(p);
  uint8_t *reach = reach_matrix(p);
  for (uint32_t i = 0; i < n; i++)
    for (uint32_t j = i + 1; j < n; j++) {
      const df_abi_slot *x = &b.slots[i], *y = &b.slots[j];
      uint32_t ki = ref_key(&p->slots[i]), kj = ref_key(&p->slots[j]);
      if (ki == kj || (x->flags | y->flags) & (DF_SLOT_FLAG_SCRATCH_BACKED |
                                                DF_SLOT_FLAG_HBM_DIRECT_GLOBAL))
        continue;
      uint32_t xe = x->shared_offset + (x->bytes > 16 ? x->bytes : 16);
      uint32_t ye = y->shared_offset + (y->bytes > 16 ? y->bytes : 16);
      if (!(x->shared_offset < ye && y->shared_offset < xe))
        continue;
      for (uint32_t sm = 0; sm < sms; sm++)
        if (ctas[(size_t)i * sms + sm] && ctas[(size_t)j * sms + sm] &&
            (u.ownerless[ki] || u.ownerless[kj] ||
             (!all_before(p, &u, reach, ki, kj) && !all_before(p, &u, reach, kj, ki))))
          fail_msg("slots %u and %u (storage %u, %u) share bytes in CTA %u but are live "
                   "together",
                   i, j, ki, kj, sm);
    }
  *without = a.shared_slot_bytes;
  *with = b.shared_slot_bytes;
  free(reach);
  free(u.first);
  free(u.ins);
  free(u.ownerless);
  free(ctas);
  df_slot_layout_free(&a, NULL);
  df_slot_layout_free(&b, NULL);
}

static void reuse_dead_shared_layout(void **state) {
  (void)state;
  /* Needs the per-CTA layout. */
  df_plan *p = seed_make_plan();
  df_layout_options o;
  memset(&o, 0, sizeof o);
  o.reuse_dead_shared = true;
  assert_true(hand_error_has(lay_status(p, &o), "reuse_dead_shared (reuse-dead-shared) needs "
                                                "per_cta_shared"));
  df_plan_destroy(p);
  /* Two tasks per cluster of 2 (the MoE shape): the second task's own
     map1 output and map2 output take the first task's dead bytes; its
     remote gather target does not (the peer may push it while this CTA
     still reads the first task's), so 4 of 6 regions remain. */
  uint32_t without, with;
  p = reshared_tasks(4, 2, 4, false);
  check_reuse(p, &without, &with);
  assert_true(with < without);
  df_plan_destroy(p);
  /* One task per CTA: nothing is dead, the layout stays. */
  p = reshared_tasks(4, 2, 2, false);
  check_reuse(p, &without, &with);
  assert_int_equal(with, without);
  df_plan_destroy(p);
  /* Random plans: the attention plans of per_cta_matches_reference (mixed
     sizes, aliased storage, explicit owners) and reshared plans with
     cluster or HBM gathers. */
  uint32_t x = 88172645u, shrank = 0;
  for (int round = 0; round < 40; round++) {
    if (round % 4 == 3) {
      /* the seed program's gather has output_arity 2: clusters of 2 */
      p = reshared_tasks(2 * (1 + next_rand(&x) % 4), 2, 1 + next_rand(&x) % 12,
                         next_rand(&x) % 2);
    } else {
      uint32_t sms = 2 + next_rand(&x) % 14, tasks = 1 + next_rand(&x) % 12, kv[12];
      sms += sms % 2;
      for (uint32_t t = 0; t < tasks; t++)
        kv[t] = 16 + next_rand(&x) % 2048;
      df_policy pol = next_rand(&x) % 2 ? DF_POLICY_ROUND_ROBIN : DF_POLICY_CLUSTER_LOCAL;
      df_reduce_strategy st = pol == DF_POLICY_CLUSTER_LOCAL && next_rand(&x) % 2
                                  ? DF_REDUCE_STREAMING
                                  : DF_REDUCE_ALL_AT_ONCE;
      p = seed_schedule_attention(sms, 2, kv, tasks, 128, pol, st, round % 3 != 0);
      if (round % 2) {
        int32_t types[3];
        const uint32_t bytes[3] = {8, 100, 3000};
        for (int k = 0; k < 3; k++)
          assert_int_equal(df_plan_add_type(p, "T", bytes[k], &types[k]).code, DF_OK);
        for (uint32_t i = 0; i < p->slot_count; i++) {
          df_slot *s = &p->slots[i];
          uint32_t r = next_rand(&x) % 16;
          if (r < 4)
            s->type = types[r % 3];
          else if (r < 6 && i > 0) {
            /* an alias of an earlier slot, of its size as the scheduler's
               aliases are (a larger alias would outgrow its key's bytes
               in any layout) */
            s->shared_storage = next_rand(&x) % i;
            s->type = p->slots[s->shared_storage].type;
            s->private_shared = false;
          } else if (r == 6)
            s->owner = next_rand(&x) % sms;
        }
      }
    }
    check_reuse(p, &without, &with);
    shrank += with < without;
    df_plan_destroy(p);
  }
  assert_true(shrank > 0); /* the checker saw reuse, not only disjoint layouts */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(seed_plan_layout),
      cmocka_unit_test(reshared_layout_aliases_storage),
      cmocka_unit_test(streaming_layout_keeps_two_regions),
      cmocka_unit_test(scratch_backed_slots),
      cmocka_unit_test(communicate_and_gated_flags),
      cmocka_unit_test(owners),
      cmocka_unit_test(direct_global_sets),
      cmocka_unit_test(direct_global_errors),
      cmocka_unit_test(layout_errors),
      cmocka_unit_test(per_cta_shared_layout),
      cmocka_unit_test(per_cta_matches_reference),
      cmocka_unit_test(reuse_dead_shared_layout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
