/* Barrier planning (REFERENCE 3): happens-before, live ranges,
   interference colouring, phases, cluster ACKs, the allocation check and
   every barrier error; random plans are cross-checked against a naive
   re-implementation of the rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../lib/Plan/barrier_internal.h"
#include "../../lib/Plan/happens_before.h"
#include "hand_plan.h"
#include "seed_plans.h"

#define S DF_SENTINEL

static df_barrier_alloc alloc_ok(const df_plan *p, const uint8_t *direct) {
  df_barrier_alloc b;
  df_status s = df_allocate_barriers_ex(p, direct, NULL, &b);
  if (s.code != DF_OK)
    print_error("barriers: %s\n", s.message);
  assert_int_equal(s.code, DF_OK);
  if (!direct) {
    df_status c = df_barrier_alloc_check(p, &b);
    if (c.code != DF_OK)
      print_error("check: %s\n", c.message);
    assert_int_equal(c.code, DF_OK);
  }
  return b;
}

static void expect_u32(const char *what, const uint32_t *got, const uint32_t *want, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (got[i] != want[i]) {
      print_error("%s[%u]: got %d, want %d\n", what, i, (int)got[i], (int)want[i]);
      fail();
    }
}

static df_plan *clone(const df_plan *p) {
  df_plan *q;
  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  return q;
}

static df_status alloc_status(const df_plan *p) {
  df_barrier_alloc b;
  df_status s = df_allocate_barriers(p, NULL, &b);
  if (s.code == DF_OK)
    df_barrier_alloc_free(&b, NULL);
  else
    assert_null(b.slot_barrier);
  return s;
}

/* ---- REFERENCE 2.8 -------------------------------------------------------- */

static void seed_plan_barriers(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_barrier_alloc b = alloc_ok(p, NULL);
  assert_int_equal(b.barrier_count, 2);
  const uint32_t slots[7] = {S, 0, 1, S, S, 0, S};
  expect_u32("slot_barrier", b.slot_barrier, slots, 7);
  /* plan comm order: cluster send/recv I1->I3, HBM I2->I3, HBM I6->I7 */
  const uint32_t comms[6] = {0, 0, 1, 1, 0, 0}, zero[6] = {0, 0, 0, 0, 0, 0};
  const uint32_t none[6] = {S, S, S, S, S, S};
  expect_u32("comm_barrier", b.comm_barrier, comms, 6);
  expect_u32("comm_phase", b.comm_phase, zero, 6);
  expect_u32("comm_ack", b.comm_ack, none, 6);
  assert_int_equal(b.ack_count, 0);
  df_barrier_alloc_free(&b, NULL);
  df_barrier_alloc_free(NULL, NULL);
  df_plan_destroy(p);
}

static void reshared_plan_barriers(void **state) {
  (void)state;
  df_plan *p = seed_make_reshared_plan();
  df_barrier_alloc b = alloc_ok(p, NULL);
  assert_int_equal(b.barrier_count, 1); /* receives on different SMs reuse 0 */
  const uint32_t slots[8] = {S, S, S, 0, 0, S, S, S};
  expect_u32("slot_barrier", b.slot_barrier, slots, 8);
  df_barrier_alloc_free(&b, NULL);
  /* all slots direct-global: both receives are signal-only */
  uint8_t all[8];
  memset(all, 1, sizeof all);
  b = alloc_ok(p, all);
  assert_int_equal(b.barrier_count, 0);
  for (uint32_t i = 0; i < 8; i++)
    assert_int_equal(b.slot_barrier[i], S);
  assert_int_equal(df_barrier_alloc_check(p, &b).code, DF_OK);
  df_barrier_alloc_free(&b, NULL);
  df_plan_destroy(p);
}

static void selective_direct_receive_is_signal_only(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  uint8_t direct[7] = {0, 0, 1, 0, 0, 0, 0};
  df_barrier_alloc b = alloc_ok(p, direct);
  const uint32_t slots[7] = {S, 0, S, S, S, 0, S};
  expect_u32("slot_barrier", b.slot_barrier, slots, 7);
  assert_int_equal(b.barrier_count, 1);
  assert_int_equal(b.comm_barrier[3], S);
  assert_int_equal(df_barrier_alloc_check(p, &b).code, DF_OK);
  df_barrier_alloc_free(&b, NULL);
  /* the layout options give the same mask */
  df_layout_options o;
  memset(&o, 0, sizeof o);
  uint32_t two = 2;
  o.direct_count = 1;
  o.direct_slots = &two;
  uint8_t mask[7];
  assert_int_equal(df_direct_global_slots(p, &o, mask).code, DF_OK);
  assert_memory_equal(mask, direct, 7);
  df_plan_destroy(p);
}

static void one_shot_overlapping_cluster_receives(void **state) {
  (void)state;
  static const uint32_t kv[2] = {256, 256};
  df_plan *p = seed_schedule_attention(2, 2, kv, 2, 128, DF_POLICY_ROUND_ROBIN,
                                       DF_REDUCE_ALL_AT_ONCE, true);
  df_barrier_alloc b = alloc_ok(p, NULL);
  assert_int_equal(b.barrier_count, 2);
  assert_int_not_equal(b.slot_barrier[1], b.slot_barrier[4]);
  for (uint32_t i = 0; i < p->comm_count; i++)
    assert_int_equal(b.comm_phase[i], 0);
  df_barrier_alloc_free(&b, NULL);
  df_plan_destroy(p);
}

static void segments_share_barrier_and_phase(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  hand_segment_first_hbm(p, 3, 16);
  df_barrier_alloc b = alloc_ok(p, NULL);
  uint32_t n = 0;
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    if (c->src_instr == 2 && c->dst_instr == 3) {
      assert_int_equal(b.comm_barrier[i], b.slot_barrier[2]);
      assert_int_equal(b.comm_phase[i], 0);
      n++;
    }
  }
  assert_int_equal(n, 6);
  assert_int_equal(b.barrier_count, 2);
  df_barrier_alloc_free(&b, NULL);
  df_plan_destroy(p);
}

/* ---- happens-before -------------------------------------------------- */

static void happens_before_edges(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_arena a;
  df_allocator al = df_allocator_default();
  df_arena_init(&a, &al);
  uint32_t all[13];
  for (uint32_t i = 0; i < 13; i++)
    all[i] = i;
  df_hb h;
  assert_int_equal(df_hb_build(p, NULL, 0, all, 13, true, &a, &h).code, DF_OK);
  assert_true(df_hb_le(&h, 0, 0));
  assert_true(df_hb_le(&h, 0, 9));  /* queue order */
  assert_true(df_hb_le(&h, 1, 3));  /* comm source -> target */
  assert_true(df_hb_le(&h, 2, 7));  /* I2 -> I3 -> I4 -> I6 -> I7 */
  assert_true(df_hb_le(&h, 5, 8));
  assert_false(df_hb_le(&h, 7, 0));
  assert_false(df_hb_le(&h, 5, 6));
  assert_false(df_hb_le(&h, 3, 1));
  assert_false(df_hb_le(&h, 10, 11));
  for (uint32_t i = 0; i < 13; i++)
    assert_int_equal(h.topo_pos[i], i);
  df_arena_release(&a);
  df_plan_destroy(p);
}

/* B (SM1, id 1) produces the slot A (SM0, id 0) reads: the min-heap order
   is 1, 0, 2; instruction 3 is in no queue. */
static void happens_before_order_and_unqueued(void **state) {
  (void)state;
  df_plan *p = hand_plan_new(2, 1, 16);
  uint32_t s = hand_slot(p), t = hand_slot(p);
  uint32_t a = hand_instr(p, DF_INSTR_MAP, 0, &s, 1, S);
  uint32_t b = hand_instr(p, DF_INSTR_MAP, 1, NULL, 0, s);
  uint32_t c = hand_instr(p, DF_INSTR_MAP, 0, NULL, 0, t);
  uint32_t d = hand_instr(p, DF_INSTR_MAP, 1, &t, 1, S);
  const uint32_t order[3] = {a, b, c};
  assert_int_equal(df_plan_build_queues(p, order, 3).code, DF_OK);
  df_allocator al = df_allocator_default();
  df_arena ar;
  df_arena_init(&ar, &al);
  const uint32_t all[4] = {a, b, c, d};
  df_hb h;
  assert_int_equal(df_hb_build(p, NULL, 0, all, 4, true, &ar, &h).code, DF_OK);
  assert_int_equal(h.topo_pos[b], 0);
  assert_int_equal(h.topo_pos[a], 1);
  assert_int_equal(h.topo_pos[c], 2);
  assert_int_equal(h.topo_pos[d], 3);
  assert_true(df_hb_le(&h, b, c)); /* b -> a -> c */
  assert_true(df_hb_le(&h, b, d));
  assert_true(df_hb_le(&h, c, d));
  assert_false(df_hb_le(&h, d, a));
  assert_false(df_hb_le(&h, a, b));
  /* a node outside the query set only answers a == b */
  df_hb h2;
  assert_int_equal(df_hb_build(p, NULL, 0, &d, 1, true, &ar, &h2).code, DF_OK);
  assert_false(df_hb_le(&h2, b, c));
  assert_true(df_hb_le(&h2, b, b));
  /* extra edges count */
  df_hb_edge e = {d, a};
  assert_true(hand_error_has(df_hb_build(p, &e, 1, all, 4, true, &ar, &h2), "cycle"));
  e.from = 9;
  assert_int_equal(df_hb_build(p, &e, 1, all, 4, true, &ar, &h2).code, DF_EINTERNAL);
  const uint32_t bad = 9;
  assert_int_equal(df_hb_build(p, NULL, 0, &bad, 1, true, &ar, &h2).code, DF_EINTERNAL);
  df_arena_release(&ar);
  df_plan_destroy(p);
}

static void happens_before_cycle(void **state) {
  (void)state;
  df_plan *p = hand_plan_new(1, 1, 16);
  uint32_t s = hand_slot(p);
  hand_instr(p, DF_INSTR_MAP, 0, &s, 1, S); /* reads s before ... */
  hand_instr(p, DF_INSTR_MAP, 0, NULL, 0, s); /* ... its producer runs */
  hand_finish(p);
  assert_true(hand_error_has(alloc_status(p), "happens-before graph has a cycle"));
  assert_true(hand_error_has(alloc_status(p), "the first is instruction 0"));
  p->queue_ids[1] = 0;
  assert_true(hand_error_has(alloc_status(p), "more than once in the queues"));
  p->queue_ids[1] = 7;
  assert_true(hand_error_has(alloc_status(p), "names instruction 7"));
  p->queue_lengths[0] = 5;
  assert_true(hand_error_has(alloc_status(p), "exceeds the 2 queued"));
  df_plan_destroy(p);
}

/* ---- colouring order and phases ------------------------------------- */

/* Three receives on SM0: u0 (A0 -> R0, slot 0), u1 (C -> R2, slot 1),
   u2 (B -> R2, slot 2). R0 feeds B, so u0 ends before u2 starts; u1
   overlaps both. Visiting by (-degree, id) colours u1 first:
   u1 = 0, u0 = 1, u2 = 1 (id order would give 0, 1, 0). u0 and u2 share
   barrier 1 and alternate phases 0, 1. */
static df_plan *colour_plan(bool cluster) {
  df_plan *p = hand_plan_new(3, cluster ? 3 : 1, 16);
  uint32_t a = hand_slot(p), b = hand_slot(p), c = hand_slot(p);
  uint32_t sa0 = hand_slot(p), x = hand_slot(p), y = hand_slot(p), sb = hand_slot(p),
           sc = hand_slot(p);
  uint32_t A0 = hand_instr(p, DF_INSTR_MAP, 1, NULL, 0, sa0);
  uint32_t R0 = hand_instr(p, DF_INSTR_MAP, 0, &a, 1, x);
  uint32_t B = hand_instr(p, DF_INSTR_MAP, 1, &y, 1, sb);
  uint32_t C = hand_instr(p, DF_INSTR_MAP, 2, NULL, 0, sc);
  uint32_t R2 = hand_instr(p, DF_INSTR_MAP, 0, (uint32_t[]){b, c}, 2, S);
  hand_transfer(p, cluster, A0, R0, sa0, a, 1);
  hand_transfer(p, cluster, R0, B, x, y, 2);
  hand_transfer(p, cluster, B, R2, sb, c, 3);
  hand_transfer(p, cluster, C, R2, sc, b, 4);
  hand_finish(p);
  return p;
}

static void colouring_visits_by_degree_and_phases_alternate(void **state) {
  (void)state;
  for (int cluster = 0; cluster < 2; cluster++) {
    df_plan *p = colour_plan(cluster);
    df_barrier_alloc b = alloc_ok(p, NULL);
    assert_int_equal(b.barrier_count, 2);
    const uint32_t slots[8] = {1, 0, 1, S, S, 0, S, S};
    expect_u32("slot_barrier", b.slot_barrier, slots, 8);
    const uint32_t barrier[8] = {1, 1, 0, 0, 1, 1, 0, 0};
    const uint32_t phase[8] = {0, 0, 0, 0, 1, 1, 0, 0};
    expect_u32("comm_barrier", b.comm_barrier, barrier, 8);
    expect_u32("comm_phase", b.comm_phase, phase, 8);
    df_barrier_alloc_free(&b, NULL);
    df_packed *k;
    df_status s = df_pack(p, NULL, NULL, &k);
    assert_int_equal(s.code, DF_OK);
    /* R2 (packed 1) receives u1 then u2 after sorting by source instr */
    const df_abi_instr *r2 = &k->instrs[1];
    assert_int_equal(r2->comm_count, 2);
    const df_abi_comm *u2 = &k->comms[r2->comm_offset];
    const df_abi_comm *u1 = &k->comms[r2->comm_offset + 1];
    assert_int_equal(u2->dst_slot_id, 2);
    assert_int_equal(u1->dst_slot_id, 1);
    assert_int_equal(u2->barrier_phase, 1);
    assert_int_equal(u1->barrier_phase, 0);
    if (cluster) {
      assert_int_equal(u2->flag_epoch, 1); /* cluster epoch = phase */
      assert_int_equal(u2->barrier_index, S);
      assert_int_equal(r2->flags, 2);
    } else {
      assert_int_equal(u2->flag_epoch, 3);
      assert_int_equal(u2->barrier_index, 1);
      assert_int_equal(u1->barrier_index, 0);
    }
    /* SM0 initialises barriers 1 (u0 at R0) and 0 (R2) */
    assert_int_equal(k->launch.barrier_init_lengths[0], 2);
    assert_int_equal(k->launch.barrier_init_indices[0], 1);
    assert_int_equal(k->launch.barrier_init_indices[1], 0);
    df_packed_destroy(k);
    df_plan_destroy(p);
  }
}

/* A slot received over both lanes on one SM takes its cluster barrier. */
static void slot_barrier_prefers_cluster_lane(void **state) {
  (void)state;
  df_plan *p = colour_plan(true);
  /* retarget u1 (C -> R2) into slot c = 2, as an HBM transfer */
  p->comms[6].kind = DF_COMM_HBM_SEND;
  p->comms[7].kind = DF_COMM_HBM_RECV;
  p->comms[6].dst_slot = p->comms[7].dst_slot = 2;
  df_barrier_alloc b = alloc_ok(p, NULL);
  /* live ranges (0,0,cl) (0,2,cl) (0,2,hbm) (1,5,cl): the HBM range
     overlaps both cluster ones on SM0 and is coloured first (0) */
  assert_int_equal(b.comm_barrier[7], 0);
  assert_int_equal(b.comm_barrier[5], 1);
  assert_int_equal(b.slot_barrier[2], 1);
  df_barrier_alloc_free(&b, NULL);
  df_plan_destroy(p);
}

/* More live ranges on one SM than the bit-row form holds: a chain of
   4100 transfers SM1 -> SM0, each receive feeding the next send, so none
   overlap: one barrier, phases alternating along the chain. */
static df_plan *chain_plan(uint32_t n, bool extra) {
  df_plan *p = hand_plan_new(2, 2, 16);
  uint32_t prev_q = S, first_t = S, last_send = S, last_src = S, last_recv = S;
  for (uint32_t i = 0; i < n; i++) {
    uint32_t ps = hand_slot(p), t = hand_slot(p), q = hand_slot(p);
    uint32_t send = hand_instr(p, DF_INSTR_MAP, 1, &prev_q, prev_q == S ? 0 : 1, ps);
    uint32_t recv = hand_instr(p, DF_INSTR_MAP, 0, &t, 1, q);
    hand_transfer(p, true, send, recv, ps, t, 1);
    prev_q = q;
    if (i == 0)
      first_t = t;
    last_send = send;
    last_src = ps;
    last_recv = recv;
  }
  if (extra) /* a second, later transfer into the first target */
    hand_transfer(p, true, last_send, last_recv, last_src, first_t, 1);
  hand_finish(p);
  return p;
}

static void many_live_ranges_on_one_sm(void **state) {
  (void)state;
  const uint32_t n = DF_BAR_DENSE_MAX + 4;
  df_plan *p = chain_plan(n, false);
  df_barrier_alloc b = alloc_ok(p, NULL);
  assert_int_equal(b.barrier_count, 1);
  for (uint32_t i = 0; i < n; i++) {
    assert_int_equal(b.comm_barrier[2 * i + 1], 0);
    assert_int_equal(b.comm_phase[2 * i + 1], i & 1);
  }
  df_barrier_alloc_free(&b, NULL);
  df_plan_destroy(p);
  /* the first live range now holds two transfers at different times:
     not an interval graph any more, so pairs are tested */
  p = chain_plan(n, true);
  b = alloc_ok(p, NULL);
  assert_int_equal(b.barrier_count, 2);
  assert_int_equal(b.comm_barrier[1], 0);                 /* u0 */
  assert_int_equal(b.comm_barrier[2 * n + 1], 0);         /* the extra one */
  assert_int_equal(b.comm_barrier[2 * (n - 1) + 1], 1);   /* overlaps it */
  assert_int_equal(b.comm_phase[2 * n + 1], (n - 1) & 1);
  assert_int_equal(b.comm_phase[2 * (n - 1) + 1], 0);
  for (uint32_t i = 0; i + 1 < n; i++)
    assert_int_equal(b.comm_phase[2 * i + 1], i & 1);
  df_barrier_alloc_free(&b, NULL);
  df_plan_destroy(p);
}

/* ---- cluster ACKs ------------------------------------------------------- */

static void release_allocates_ack(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  hand_append_release(p);
  df_barrier_alloc b = alloc_ok(p, NULL);
  const uint32_t ack[7] = {0, 0, S, S, S, S, 0};
  expect_u32("comm_ack", b.comm_ack, ack, 7);
  assert_int_equal(b.ack_count, 1);
  assert_int_equal(b.comm_barrier[6], 0); /* the release shares its key */
  df_barrier_alloc_free(&b, NULL);
  df_plan_destroy(p);
}

static void acks_count_per_producer_sm(void **state) {
  (void)state;
  static const uint32_t kv2[2] = {256, 256};
  /* 2 SMs / cluster 2: both transfers come from SM1 -> indices 0, 1 */
  df_plan *p = seed_schedule_attention(2, 2, kv2, 2, 128, DF_POLICY_ROUND_ROBIN,
                                       DF_REDUCE_ALL_AT_ONCE, true);
  uint32_t sends[2], n = 0;
  for (uint32_t i = 0; i < p->comm_count; i++)
    if (p->comms[i].kind == DF_COMM_CLUSTER_SEND)
      sends[n++] = i;
  assert_int_equal(n, 2);
  assert_int_equal(p->comms[sends[0]].producer_sm, p->comms[sends[1]].producer_sm);
  for (uint32_t j = 0; j < 2; j++) {
    df_comm r = p->comms[sends[j]];
    r.kind = DF_COMM_CLUSTER_RELEASE;
    assert_int_equal(df_plan_add_comm(p, &r).code, DF_OK);
  }
  df_barrier_alloc b = alloc_ok(p, NULL);
  assert_int_equal(b.comm_ack[sends[0]], 0);
  assert_int_equal(b.comm_ack[sends[1]], 1);
  assert_int_equal(b.ack_count, 2);
  df_barrier_alloc_free(&b, NULL);
  df_plan_destroy(p);

  /* 4 SMs / cluster 4: three producers, one release each -> all 0 */
  static const uint32_t kv1[1] = {512};
  p = seed_schedule_attention(4, 4, kv1, 1, 128, DF_POLICY_CLUSTER_LOCAL,
                              DF_REDUCE_ALL_AT_ONCE, true);
  uint32_t m = p->comm_count;
  for (uint32_t i = 0; i < m; i++)
    if (p->comms[i].kind == DF_COMM_CLUSTER_SEND) {
      df_comm r = p->comms[i];
      r.kind = DF_COMM_CLUSTER_RELEASE;
      assert_int_equal(df_plan_add_comm(p, &r).code, DF_OK);
    }
  b = alloc_ok(p, NULL);
  for (uint32_t i = 0; i < p->comm_count; i++)
    assert_int_equal(b.comm_ack[i], 0);
  assert_int_equal(b.ack_count, 1);
  df_barrier_alloc_free(&b, NULL);
  df_plan_destroy(p);
}

static void gate_groups_share_one_ack(void **state) {
  (void)state;
  static const uint32_t kv2[2] = {256, 256};
  df_plan *p = seed_schedule_attention(2, 2, kv2, 2, 128, DF_POLICY_ROUND_ROBIN,
                                       DF_REDUCE_ALL_AT_ONCE, true);
  for (uint32_t i = 0; i < p->comm_count; i++)
    p->comms[i].gate_id = 7;
  df_comm r = p->comms[hand_find_comm(p, DF_COMM_CLUSTER_SEND)];
  r.kind = DF_COMM_CLUSTER_RELEASE;
  r.src_instr = r.dst_instr = 0; /* no transfer key: matched by gate */
  assert_int_equal(df_plan_add_comm(p, &r).code, DF_OK);
  df_barrier_alloc b = alloc_ok(p, NULL);
  for (uint32_t i = 0; i < p->comm_count; i++)
    assert_int_equal(b.comm_ack[i], 0);
  df_barrier_alloc_free(&b, NULL);
  /* without a cluster send of that gate the release is unmatched */
  for (uint32_t i = 0; i + 1 < p->comm_count; i++)
    p->comms[i].gate_id = S;
  assert_true(hand_error_has(alloc_status(p), "cluster release comm 4 has no matching "
                                              "cluster send"));
  df_plan_destroy(p);
}

/* ---- errors ---------------------------------------------------------- */

static void barrier_errors(void **state) {
  (void)state;
  df_barrier_alloc b;
  assert_true(hand_error_has(df_allocate_barriers(NULL, NULL, &b), "expects a plan"));
  df_plan *p = seed_make_plan();
  df_plan *q;

  q = clone(p);
  df_comm dup = q->comms[0];
  assert_int_equal(df_plan_add_comm(q, &dup).code, DF_OK);
  assert_true(hand_error_has(alloc_status(q), "duplicate async send transfer (1, 3, 1, 1, 0)"));
  df_plan_destroy(q);

  q = clone(p);
  dup = q->comms[3];
  assert_int_equal(df_plan_add_comm(q, &dup).code, DF_OK);
  assert_true(hand_error_has(alloc_status(q), "duplicate async receive transfer (2, 3, 2, 2, 0)"));
  df_plan_destroy(q);

  q = clone(p); /* HBM recv I2->I3 without its send */
  q->comms[2].dst_slot = 3;
  assert_true(hand_error_has(alloc_status(q), "hbm_recv comm 3 has no matching hbm_send: "
                                              "transfer (2, 3, 2, 2, 0)"));
  df_plan_destroy(q);

  q = clone(p); /* the cluster recv's key belongs to an HBM send */
  q->comms[0].kind = DF_COMM_HBM_SEND;
  assert_true(hand_error_has(alloc_status(q), "cluster_recv comm 1 has no matching cluster_send"));
  df_plan_destroy(q);

  q = clone(p); /* the cluster receive turned into a release */
  q->comms[1].kind = DF_COMM_CLUSTER_RELEASE;
  assert_true(hand_error_has(alloc_status(q), "cluster sends have no matching receive "
                                              "intervals: comm 0"));
  q->comms[0].kind = DF_COMM_HBM_SEND; /* the release's key is now an HBM send */
  assert_true(hand_error_has(alloc_status(q), "cluster release comm 1 has no matching "
                                              "cluster send"));
  df_plan_destroy(q);

  q = clone(p);
  q->comms[2].producer_sm = 3;
  assert_true(hand_error_has(alloc_status(q), "hbm_send comm 2 is dispatched by instruction 2 "
                                              "on SM 2, but its producer SM is 3"));
  df_plan_destroy(q);

  q = clone(p);
  q->comms[3].consumer_sm = 1;
  assert_true(hand_error_has(alloc_status(q), "but its consumer SM is 1"));
  df_plan_destroy(q);

  q = clone(p); /* both I1->I3 and I2->I3 into s1 on the cluster lane */
  for (uint32_t i = 2; i < 4; i++) {
    q->comms[i].kind = i == 2 ? DF_COMM_CLUSTER_SEND : DF_COMM_CLUSTER_RECV;
    q->comms[i].dst_slot = 1;
  }
  assert_true(hand_error_has(alloc_status(q), "target slot 1 has overlapping async receive "
                                              "intervals on SM 0"));
  df_plan_destroy(q);

  q = clone(p);
  q->comms[0].kind = DF_COMM_NONE;
  assert_true(hand_error_has(alloc_status(q), "comm 0 has invalid kind 0"));
  q->comms[0].kind = DF_COMM_CLUSTER_SEND;
  q->comms[0].dst_instr = 50;
  assert_true(hand_error_has(alloc_status(q), "names instruction 1 -> 50"));
  q->comms[0].dst_instr = 3;
  q->comms[0].dispatch_instr = 50;
  assert_true(hand_error_has(alloc_status(q), "comm dispatch instruction ids are not in the "
                                              "instruction plan"));
  q->comms[0].dispatch_instr = S;
  q->comms[0].dst_slot = 50;
  assert_true(hand_error_has(alloc_status(q), "names slot 1 -> 50"));
  q->comms[0].dst_slot = 1;
  q->comms[0].consumer_sm = 9;
  assert_true(hand_error_has(alloc_status(q), "outside topology"));
  q->comms[0].consumer_sm = 0;
  q->instrs[0].sm = 4;
  assert_true(hand_error_has(alloc_status(q), "instruction 0 is placed on SM 4"));
  q->instrs[0].sm = 0;
  q->inputs[0] = 70;
  assert_true(hand_error_has(alloc_status(q), "reads slot 70"));
  q->inputs[0] = 0;
  q->slots[0].producer = 70;
  assert_true(hand_error_has(alloc_status(q), "names producer instruction 70"));
  q->slots[0].producer = 0;
  assert_int_equal(alloc_status(q).code, DF_OK);
  df_plan_destroy(q);
  df_plan_destroy(p);
}

static void check_rejects_bad_allocations(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_barrier_alloc b = alloc_ok(p, NULL);
  assert_true(hand_error_has(df_barrier_alloc_check(NULL, &b), "expects"));
  b.comm_barrier[2] = b.comm_barrier[3] = 0; /* s2 onto s1's barrier */
  b.slot_barrier[2] = 0;
  assert_true(hand_error_has(df_barrier_alloc_check(p, &b), "the same barrier 0"));
  b.comm_barrier[2] = b.comm_barrier[3] = b.slot_barrier[2] = 1;
  b.barrier_count = 3;
  assert_true(hand_error_has(df_barrier_alloc_check(p, &b), "largest barrier index + 1 (2)"));
  b.barrier_count = 2;
  b.comm_barrier[1] = S;
  assert_true(hand_error_has(df_barrier_alloc_check(p, &b), "without a barrier"));
  b.comm_barrier[1] = 5;
  assert_true(hand_error_has(df_barrier_alloc_check(p, &b), "outside barrier_count"));
  b.comm_barrier[1] = 0;
  b.slot_barrier[6] = 1;
  assert_true(hand_error_has(df_barrier_alloc_check(p, &b), "gives slot 6 barrier 1"));
  b.slot_barrier[6] = S;
  assert_int_equal(df_barrier_alloc_check(p, &b).code, DF_OK);
  b.slot_count = 6;
  assert_true(hand_error_has(df_barrier_alloc_check(p, &b), "covers 6 slots"));
  b.slot_count = 7;
  df_barrier_alloc_free(&b, NULL);
  /* a live range split across barriers */
  hand_segment_first_hbm(p, 2, 16);
  b = alloc_ok(p, NULL);
  for (uint32_t i = 0; i < p->comm_count; i++)
    if (p->comms[i].kind == DF_COMM_HBM_RECV && p->comms[i].segment_id == 1 &&
        p->comms[i].dst_slot == 2)
      b.comm_barrier[i] = 0;
  assert_true(hand_error_has(df_barrier_alloc_check(p, &b), "splits the live range"));
  df_barrier_alloc_free(&b, NULL);
  df_plan_destroy(p);
}

/* ---- random plans against a naive model ------------------------------ */

enum { MAXN = 24, MAXC = 64 };

typedef struct model {
  uint32_t n;
  bool reach[MAXN][MAXN];
  uint32_t topo[MAXN];
} model;

static void model_reach(const df_plan *p, model *m) {
  m->n = p->instr_count;
  memset(m->reach, 0, sizeof m->reach);
  bool edge[MAXN][MAXN];
  memset(edge, 0, sizeof edge);
  for (uint32_t s = 0; s < p->topology.sm_count; s++)
    for (uint32_t i = 1; i < p->queue_lengths[s]; i++)
      edge[p->queue_ids[p->queue_offsets[s] + i - 1]][p->queue_ids[p->queue_offsets[s] + i]] = 1;
  for (uint32_t i = 0; i < p->comm_count; i++) /* source -> target, dispatch edges */
    edge[p->comms[i].src_instr][p->comms[i].dst_instr] = 1;
  for (uint32_t i = 0; i < p->instr_count; i++)
    for (uint32_t k = 0; k < p->instrs[i].input_count; k++) {
      uint32_t pr = p->slots[df_plan_instr_inputs(p, &p->instrs[i])[k]].producer;
      if (pr != S)
        edge[pr][i] = 1;
    }
  for (uint32_t i = 0; i < m->n; i++) {
    edge[i][i] = 0;
    m->reach[i][i] = 1;
  }
  for (uint32_t i = 0; i < m->n; i++)
    for (uint32_t j = 0; j < m->n; j++)
      m->reach[i][j] |= edge[i][j];
  for (uint32_t k = 0; k < m->n; k++)
    for (uint32_t i = 0; i < m->n; i++)
      for (uint32_t j = 0; j < m->n; j++)
        m->reach[i][j] |= m->reach[i][k] && m->reach[k][j];
  bool done[MAXN] = {0};
  for (uint32_t t = 0; t < m->n; t++)
    for (uint32_t v = 0; v < m->n; v++) {
      if (done[v])
        continue;
      bool ready = true;
      for (uint32_t u = 0; u < m->n && ready; u++)
        ready = done[u] || !edge[u][v];
      if (ready) {
        m->topo[v] = t;
        done[v] = true;
        break;
      }
    }
}

typedef struct muse {
  uint32_t send, recv, sm, slot, lr;
} muse;

/* REFERENCE 3 spelled out naively. Returns false when the rules reject
   the plan (overlap inside a live range). */
static bool model_alloc(const df_plan *p, const model *m, uint32_t *count, uint32_t *slot_bar,
                        uint32_t *comm_bar, uint32_t *comm_phase) {
  muse u[MAXC];
  uint32_t nu = 0;
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *r = &p->comms[i];
    if (r->kind != DF_COMM_CLUSTER_RECV)
      continue;
    for (uint32_t j = 0; j < p->comm_count; j++) {
      const df_comm *s = &p->comms[j];
      if (s->kind == DF_COMM_CLUSTER_SEND && s->src_instr == r->src_instr &&
          s->dst_instr == r->dst_instr && s->src_slot == r->src_slot &&
          s->dst_slot == r->dst_slot)
        u[nu++] = (muse){j, i, r->consumer_sm, r->dst_slot, 0};
    }
  }
  /* live ranges by sorted (sm, slot) */
  uint32_t lr_sm[MAXC], lr_slot[MAXC], nl = 0;
  for (uint32_t sm = 0; sm < p->topology.sm_count; sm++)
    for (uint32_t sl = 0; sl < p->slot_count; sl++) {
      bool any = false;
      for (uint32_t i = 0; i < nu; i++)
        if (u[i].sm == sm && u[i].slot == sl) {
          u[i].lr = nl;
          any = true;
        }
      if (any) {
        lr_sm[nl] = sm;
        lr_slot[nl++] = sl;
      }
    }
  bool ov[MAXC][MAXC];
  for (uint32_t i = 0; i < nu; i++)
    for (uint32_t j = 0; j < nu; j++) {
      uint32_t ri = p->comms[u[i].recv].dst_instr, si = p->comms[u[i].send].src_instr;
      uint32_t rj = p->comms[u[j].recv].dst_instr, sj = p->comms[u[j].send].src_instr;
      ov[i][j] = !m->reach[ri][sj] && !m->reach[rj][si];
      if (i != j && u[i].lr == u[j].lr && ov[i][j])
        return false;
    }
  bool adj[MAXC][MAXC];
  memset(adj, 0, sizeof adj);
  uint32_t deg[MAXC] = {0};
  for (uint32_t i = 0; i < nu; i++)
    for (uint32_t j = 0; j < nu; j++) {
      uint32_t a = u[i].lr, b = u[j].lr;
      if (a != b && lr_sm[a] == lr_sm[b] && ov[i][j] && !adj[a][b]) {
        adj[a][b] = adj[b][a] = 1;
        deg[a]++;
        deg[b]++;
      }
    }
  uint32_t colour[MAXC];
  bool coloured[MAXC] = {0};
  *count = 0;
  for (uint32_t k = 0; k < nl; k++) {
    uint32_t best = S;
    for (uint32_t x = 0; x < nl; x++)
      if (!coloured[x] && (best == S || deg[x] > deg[best]))
        best = x;
    uint32_t c = 0;
    for (bool clash = true; clash; c += clash) {
      clash = false;
      for (uint32_t y = 0; y < nl; y++)
        clash |= coloured[y] && adj[best][y] && colour[y] == c;
    }
    colour[best] = c;
    coloured[best] = true;
    if (c + 1 > *count)
      *count = c + 1;
  }
  for (uint32_t s = 0; s < p->slot_count; s++)
    slot_bar[s] = S;
  for (uint32_t l = nl; l-- > 0;)
    slot_bar[lr_slot[l]] = colour[l];
  for (uint32_t i = 0; i < p->comm_count; i++) {
    comm_bar[i] = S;
    comm_phase[i] = 0;
  }
  /* phases: per (sm, colour), transfers by (send topo, recv topo, key) */
  for (uint32_t i = 0; i < nu; i++) {
    uint32_t before = 0;
    const df_comm *ci = &p->comms[u[i].recv];
    for (uint32_t j = 0; j < nu; j++) {
      const df_comm *cj = &p->comms[u[j].recv];
      if (j == i || u[j].sm != u[i].sm || colour[u[j].lr] != colour[u[i].lr])
        continue;
      uint32_t ki[6] = {m->topo[ci->src_instr], m->topo[ci->dst_instr], ci->src_instr,
                        ci->dst_instr, ci->src_slot, ci->dst_slot};
      uint32_t kj[6] = {m->topo[cj->src_instr], m->topo[cj->dst_instr], cj->src_instr,
                        cj->dst_instr, cj->src_slot, cj->dst_slot};
      int cmp = 0;
      for (int w = 0; w < 6 && !cmp; w++)
        cmp = kj[w] < ki[w] ? -1 : kj[w] > ki[w];
      before += cmp < 0;
    }
    comm_bar[u[i].recv] = comm_bar[u[i].send] = colour[u[i].lr];
    comm_phase[u[i].recv] = comm_phase[u[i].send] = before & 1;
  }
  return true;
}

static uint32_t rng(uint32_t *x) {
  *x ^= *x << 13;
  *x ^= *x >> 17;
  *x ^= *x << 5;
  return *x;
}

/* Random cluster plans: instructions in id order per SM, transfers from
   lower to higher ids between SMs, some into a reused target slot. */
static df_plan *random_plan(uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  uint32_t sms = 2 + rng(&x) % 3, n = 6 + rng(&x) % (MAXN - 6);
  df_plan *p = hand_plan_new(sms, sms, 16);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t out = hand_slot(p);
    uint32_t in = S;
    if (i > 0 && rng(&x) % 3 == 0)
      in = p->instrs[rng(&x) % i].output_slot;
    hand_instr(p, DF_INSTR_MAP, rng(&x) % sms, &in, in == S ? 0 : 1, out);
  }
  uint32_t transfers = rng(&x) % 10, last_target = S;
  for (uint32_t t = 0; t < transfers && p->comm_count + 2 <= MAXC; t++) {
    uint32_t a = rng(&x) % n, b = rng(&x) % n;
    if (a >= b || p->instrs[a].sm == p->instrs[b].sm)
      continue;
    uint32_t dst = hand_slot(p);
    bool fresh = true; /* no duplicate transfer keys */
    for (uint32_t i = 0; i < p->comm_count; i++)
      fresh &= !(p->comms[i].src_instr == a && p->comms[i].dst_instr == b &&
                 p->comms[i].dst_slot == last_target);
    if (last_target != S && rng(&x) % 4 == 0 && fresh)
      dst = last_target; /* a second transfer into the same target */
    hand_transfer(p, true, a, b, p->instrs[a].output_slot, dst, 1);
    last_target = dst;
  }
  hand_finish(p);
  return p;
}

static void random_plans_match_the_model(void **state) {
  (void)state;
  uint32_t accepted = 0, rejected = 0, interfering = 0, odd_phase = 0;
  for (uint32_t seed = 1; seed <= 1000; seed++) {
    df_plan *p = random_plan(seed);
    model m;
    model_reach(p, &m);
    /* reachability of every pair */
    df_allocator al = df_allocator_default();
    df_arena ar;
    df_arena_init(&ar, &al);
    uint32_t all[MAXN];
    for (uint32_t i = 0; i < p->instr_count; i++)
      all[i] = i;
    df_hb h;
    assert_int_equal(df_hb_build(p, NULL, 0, all, p->instr_count, true, &ar, &h).code, DF_OK);
    for (uint32_t i = 0; i < m.n; i++) {
      assert_int_equal(h.topo_pos[i], m.topo[i]);
      for (uint32_t j = 0; j < m.n; j++)
        if (df_hb_le(&h, i, j) != m.reach[i][j]) {
          print_error("seed %u: %u <=hb %u: got %d\n", seed, i, j, df_hb_le(&h, i, j));
          fail();
        }
    }
    df_arena_release(&ar);
    uint32_t count, slot_bar[MAXN + MAXC], comm_bar[MAXC], comm_phase[MAXC];
    bool ok = model_alloc(p, &m, &count, slot_bar, comm_bar, comm_phase);
    df_barrier_alloc b;
    df_status s = df_allocate_barriers(p, NULL, &b);
    if (!ok) {
      assert_true(hand_error_has(s, "overlapping async receive intervals"));
      rejected++;
    } else {
      if (s.code != DF_OK)
        print_error("seed %u: %s\n", seed, s.message);
      assert_int_equal(s.code, DF_OK);
      assert_int_equal(b.barrier_count, count);
      expect_u32("slot_barrier", b.slot_barrier, slot_bar, p->slot_count);
      expect_u32("comm_barrier", b.comm_barrier, comm_bar, p->comm_count);
      expect_u32("comm_phase", b.comm_phase, comm_phase, p->comm_count);
      assert_int_equal(df_barrier_alloc_check(p, &b).code, DF_OK);
      df_barrier_alloc_free(&b, NULL);
      accepted++;
      interfering += count > 1;
      for (uint32_t i = 0; i < p->comm_count; i++)
        odd_phase += comm_phase[i] == 1;
    }
    df_plan_destroy(p);
  }
  /* the generator exercises all three outcomes */
  assert_true(accepted > 250 && rejected > 10 && interfering > 50 && odd_phase > 10);
}

/* Scheduled plans of every policy pass the check. */
static void scheduled_plans_pass_the_check(void **state) {
  (void)state;
  uint32_t kv[64];
  uint32_t x = 99;
  for (uint32_t i = 0; i < 64; i++)
    kv[i] = 64 + rng(&x) % 2048;
  const struct {
    uint32_t sms, cs, tasks;
    df_policy pol;
    df_reduce_strategy st;
  } cases[] = {
      {16, 2, 64, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE},
      {16, 4, 64, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_ALL_AT_ONCE},
      {16, 2, 64, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING},
      {8, 2, 32, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING},
  };
  for (uint32_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    df_plan *p = seed_schedule_attention(cases[c].sms, cases[c].cs, kv, cases[c].tasks, 128,
                                         cases[c].pol, cases[c].st, true);
    df_barrier_alloc b = alloc_ok(p, NULL);
    uint32_t max = 0;
    for (uint32_t i = 0; i < p->slot_count; i++)
      if (b.slot_barrier[i] != S && b.slot_barrier[i] + 1 > max)
        max = b.slot_barrier[i] + 1;
    assert_int_equal(b.barrier_count, max);
    df_barrier_alloc_free(&b, NULL);
    df_plan_destroy(p);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(seed_plan_barriers),
      cmocka_unit_test(reshared_plan_barriers),
      cmocka_unit_test(selective_direct_receive_is_signal_only),
      cmocka_unit_test(one_shot_overlapping_cluster_receives),
      cmocka_unit_test(segments_share_barrier_and_phase),
      cmocka_unit_test(happens_before_edges),
      cmocka_unit_test(happens_before_order_and_unqueued),
      cmocka_unit_test(happens_before_cycle),
      cmocka_unit_test(colouring_visits_by_degree_and_phases_alternate),
      cmocka_unit_test(slot_barrier_prefers_cluster_lane),
      cmocka_unit_test(many_live_ranges_on_one_sm),
      cmocka_unit_test(release_allocates_ack),
      cmocka_unit_test(acks_count_per_producer_sm),
      cmocka_unit_test(gate_groups_share_one_ack),
      cmocka_unit_test(barrier_errors),
      cmocka_unit_test(check_rejects_bad_allocations),
      cmocka_unit_test(random_plans_match_the_model),
      cmocka_unit_test(scheduled_plans_pass_the_check),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
