/* Instruction fusion (df_plan_fuse, packing of fused instructions,
   composite handlers) and the structural dispatch-cost model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "df/cost.h"
#include "df/fuse.h"
#include "hand_plan.h"
#include "seed_plans.h"

static df_packed *pack(const df_plan *p) {
  df_packed *k = NULL;
  df_status st = df_pack(p, NULL, NULL, &k);
  if (st.code != DF_OK)
    fprintf(stderr, "%s\n", st.message);
  assert_int_equal(st.code, DF_OK);
  return k;
}

static df_plan *fused_copy(const df_plan *p, df_fuse_report *r) {
  df_plan *q;
  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  assert_int_equal(df_plan_fuse(q, NULL, r).code, DF_OK);
  return q;
}

static double total_cycles(const df_plan *p, double F, double R) {
  df_packed *k = pack(p);
  df_cost_params prm = df_cost_params_default();
  prm.instr_cycles = F;
  prm.byte_cycles = R;
  df_cost c;
  assert_int_equal(df_plan_cost(k, &prm, NULL, &c).code, DF_OK);
  double t = c.total.cycles;
  df_cost_free(&c, NULL);
  df_packed_destroy(k);
  return t;
}

/* A decode step with short ranges: 64 (batch, head) tasks whose kv
   lengths (1..64) fit one block of 64, round robin over 16 SMs in
   clusters of 2. */
static df_plan *decode_plan(void) {
  uint32_t kv[64];
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int t = 0; t < 64; t++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    kv[t] = 1 + (uint32_t)(x % 64);
  }
  return seed_schedule_attention(16, 2, kv, 64, 64, DF_POLICY_ROUND_ROBIN,
                                 DF_REDUCE_ALL_AT_ONCE, true);
}

/* Seed make_plan(): SM0 [I0 I3 I4 I6 I9], SM3 [I5 I7 I8 I12]. REDUCE I3
   receives s1, s2, so I0 -> I3 stays apart; I3 + I4 and I7 + I8 fuse. */
static void seed_reduce_finalize(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_fuse_report r;
  df_plan *q = fused_copy(p, &r);
  assert_int_equal(r.dispatches_before, 9);
  assert_int_equal(r.dispatches_after, 7);
  assert_int_equal(r.groups, 2);
  assert_int_equal(r.reduce_finalize, 2);
  assert_int_equal(r.reduce_chains, 0);
  assert_int_equal(r.refused_transfer, 2); /* I0 -> I3 and I5 -> I7 */
  for (uint32_t i = 0; i < q->instr_count; i++)
    assert_int_equal(q->instrs[i].fused, i == 4 || i == 8);
  /* SM 0 [I0 I3 I4 I6 I9]: I3 at position 1 runs 2 parts; SM 3 [I5 I7 I8
     I12]: I7 at position 1 too; unfused entries 1 */
  assert_int_equal(df_plan_fused_parts(q, 0, 0), 1);
  assert_int_equal(df_plan_fused_parts(q, 0, 1), 2);
  assert_int_equal(df_plan_fused_parts(q, 3, 1), 2);
  assert_int_equal(df_plan_fused_parts(q, 3, 3), 1);
  df_packed *u = pack(p), *k = pack(q);
  assert_int_equal(k->instr_count, 11);
  assert_int_equal(k->arg_count, u->arg_count); /* one args record per part */
  const uint32_t ql[4] = {4, 2, 2, 3};
  for (int s = 0; s < 4; s++)
    assert_int_equal(k->queue_lengths[s], ql[s]);
  /* composites follow the 4 ordinary handlers: one key (combine, finalize)
     for arity 3 and one for arity 2 */
  assert_int_equal(k->handler_count, 6);
  assert_string_equal(k->handlers[4].name, "combine+finalize");
  assert_string_equal(k->handlers[4].symbol, "dataflow_handler_4_combine_finalize");
  assert_int_equal(k->handlers[4].part_count, 2);
  assert_int_equal(k->handlers[4].parts[0], 1);
  assert_int_equal(k->handlers[4].parts[1], 2);
  assert_int_equal(k->handlers[5].parts[0], 3);
  for (uint32_t h = 0; h < 4; h++)
    assert_string_equal(k->handlers[h].symbol, u->handlers[h].symbol);
  assert_int_equal(k->operator_count, u->operator_count); /* composites not operators */
  /* packed I3 (index 1): reduce's comms, composite handler, 2 parts */
  const df_abi_instr *in = &k->instrs[1];
  assert_int_equal(in->handler_id, 4);
  assert_int_equal(in->comm_count, 2);
  assert_int_equal(in->slot_id, 3); /* the last output a part writes */
  const df_abi_args *a = &k->args[in->arg_offset / 64];
  assert_int_equal(a[0].reserved1, 2);
  assert_int_equal(a[0].output_slot, 3);
  assert_int_equal(a[1].reserved1, 0);
  assert_int_equal(a[1].input_slot_count, 1);
  assert_int_equal(k->input_slots[a[1].input_slot_offset], 3);
  assert_int_equal(a[1].output_slot, DF_SENTINEL);
  /* data crossing CTAs is unchanged: same comm records */
  assert_int_equal(k->comm_count, u->comm_count);
  assert_memory_equal(k->comms, u->comms, sizeof(df_abi_comm) * k->comm_count);
  char f1[65], f2[65];
  assert_int_equal(df_plan_fingerprint(p, f1).code, DF_OK);
  assert_int_equal(df_plan_fingerprint(q, f2).code, DF_OK);
  assert_string_not_equal(f1, f2);
  /* fusing again gives the same flags; unfuse restores the plan */
  df_fuse_report r2;
  assert_int_equal(df_plan_fuse(q, NULL, &r2).code, DF_OK);
  assert_int_equal(r2.dispatches_after, 7);
  df_plan_unfuse(q);
  assert_int_equal(df_plan_fingerprint(q, f2).code, DF_OK);
  assert_string_equal(f1, f2);
  df_packed_destroy(u);
  df_packed_destroy(k);
  df_plan_destroy(q);
  df_plan_destroy(p);
}

/* Single-block tasks: ITER -> REDUCE -> FINALIZE back to back on one CTA
   with no transfer, one instruction each. */
static void decode_map_reduce_finalize(void **state) {
  (void)state;
  df_plan *p = decode_plan();
  df_fuse_report r;
  df_plan *q = fused_copy(p, &r);
  assert_true(r.groups >= 32);
  assert_true(r.dispatches_after * 2 < r.dispatches_before);
  df_packed *k = pack(q);
  uint32_t three = 0;
  for (uint32_t h = 0; h < k->handler_count; h++)
    three += k->handlers[h].part_count == 3 &&
             !strcmp(k->handlers[h].name, "split_kv+combine+finalize");
  assert_true(three >= 1);
  df_packed_destroy(k);
  df_plan_destroy(q);
  df_plan_destroy(p);
}

/* no_iter: the decode plan's ITERs stay alone; each task's REDUCE ->
   FINALIZE still fuses (one group per task, no ITER part). Without the
   option the same plan fuses its ITERs too. */
static void decode_no_iter(void **state) {
  (void)state;
  df_plan *p = decode_plan();
  df_plan *q;
  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  df_fuse_options o = {.max_parts = 0, .no_iter = true};
  df_fuse_report r;
  assert_int_equal(df_plan_fuse(q, &o, &r).code, DF_OK);
  assert_true(r.groups >= 16);
  assert_int_equal(r.groups, r.reduce_finalize);
  assert_int_equal(r.map_chains, 0);
  for (uint32_t i = 0; i < q->instr_count; i++) {
    if (q->instrs[i].op == DF_INSTR_ITER || q->instrs[i].op == DF_INSTR_REDUCE)
      assert_false(q->instrs[i].fused);
    if (q->instrs[i].op == DF_INSTR_FINALIZE)
      assert_true(q->instrs[i].fused);
  }
  df_plan *all = fused_copy(p, &r);
  bool reduce_joined = false;
  for (uint32_t i = 0; i < all->instr_count; i++)
    reduce_joined |= all->instrs[i].op == DF_INSTR_REDUCE && all->instrs[i].fused;
  assert_true(reduce_joined);
  df_plan_destroy(all);
  df_plan_destroy(q);
  df_plan_destroy(p);
}

/* A streaming chain: REDUCE_UPDATEs of one task back to back on one CTA
   (hand-built: the scheduler merges one task's ranges per SM). */
static void streaming_chain(void **state) {
  (void)state;
  df_plan *p = hand_plan_new(2, 2, 48);
  df_plan_stage st;
  memset(&st, 0, sizeof st);
  snprintf(st.name, sizeof st.name, "acc");
  snprintf(st.op_name, sizeof st.op_name, "accumulate");
  st.kind = DF_STAGE_REDUCE;
  st.op_kind = DF_OPK_REDUCE;
  assert_int_equal(df_plan_add_stage(p, &st, NULL).code, DF_OK);
  snprintf(st.name, sizeof st.name, "out");
  snprintf(st.op_name, sizeof st.op_name, "emit");
  st.kind = DF_STAGE_FINALIZE;
  st.op_kind = DF_OPK_FINALIZE;
  assert_int_equal(df_plan_add_stage(p, &st, NULL).code, DF_OK);
  uint32_t part[3], acc[3];
  for (int i = 0; i < 3; i++)
    part[i] = hand_slot(p);
  for (int i = 0; i < 3; i++)
    acc[i] = hand_slot(p);
  for (int i = 0; i < 3; i++)
    hand_instr(p, DF_INSTR_MAP, 0, NULL, 0, part[i]);
  hand_instr(p, DF_INSTR_REDUCE_UPDATE, 0, &part[0], 1, acc[0]);
  uint32_t in1[2] = {acc[0], part[1]}, in2[2] = {acc[1], part[2]};
  hand_instr(p, DF_INSTR_REDUCE_UPDATE, 0, in1, 2, acc[1]);
  uint32_t last = hand_instr(p, DF_INSTR_REDUCE_UPDATE, 0, in2, 2, acc[2]);
  uint32_t fin = hand_instr(p, DF_INSTR_FINALIZE, 1, &acc[2], 1, DF_SENTINEL);
  hand_transfer(p, true, last, fin, acc[2], acc[2], 1);
  hand_finish(p);
  df_fuse_report r;
  df_plan *q = fused_copy(p, &r);
  /* ITERs do not read each other; the three updates chain; the last one
     sends acc[2] (allowed: it is the last part) */
  assert_int_equal(r.groups, 1);
  assert_int_equal(r.reduce_chains, 1);
  assert_int_equal(r.dispatches_after, r.dispatches_before - 2);
  assert_true(q->instrs[4].fused && q->instrs[5].fused && !q->instrs[3].fused);
  df_packed *k = pack(q);
  assert_int_equal(k->queue_lengths[0], 4);
  const df_abi_instr *in = &k->instrs[3];
  assert_int_equal(k->args[in->arg_offset / 64].reserved1, 3);
  assert_int_equal(in->comm_count, 1); /* the last part's send */
  assert_int_equal(in->slot_id, acc[2]);
  df_packed_destroy(k);
  df_plan_destroy(q);
  df_plan_destroy(p);
}

/* map -> map with a same-CTA edge fuses; a map whose output is also sent
   elsewhere, or read by a later instruction, does not. */
static void map_chain_and_refusals(void **state) {
  (void)state;
  df_plan *p = hand_plan_new(2, 2, 32);
  uint32_t s[6];
  for (int i = 0; i < 6; i++)
    s[i] = hand_slot(p);
  hand_instr(p, DF_INSTR_MAP, 0, NULL, 0, s[0]);        /* I0 */
  hand_instr(p, DF_INSTR_MAP, 0, &s[0], 1, s[1]);       /* I1: fuses onto I0 */
  uint32_t i2 = hand_instr(p, DF_INSTR_MAP, 0, NULL, 0, s[2]); /* I2: sent to SM1 */
  hand_instr(p, DF_INSTR_MAP, 0, &s[2], 1, s[3]);       /* I3: refused (s2 sent) */
  hand_instr(p, DF_INSTR_MAP, 0, NULL, 0, s[4]);        /* I4 */
  hand_instr(p, DF_INSTR_MAP, 0, &s[4], 1, s[5]);       /* I5: refused (s4 read by I6) */
  hand_instr(p, DF_INSTR_MAP, 0, &s[4], 1, DF_SENTINEL); /* I6 */
  uint32_t far = hand_instr(p, DF_INSTR_MAP, 1, &s[2], 1, DF_SENTINEL);
  hand_transfer(p, true, i2, far, s[2], s[2], 1);
  hand_finish(p);
  df_fuse_report r;
  df_plan *q = fused_copy(p, &r);
  assert_true(q->instrs[1].fused);
  assert_false(q->instrs[3].fused);
  assert_false(q->instrs[5].fused);
  assert_int_equal(r.map_chains, 1);
  assert_int_equal(r.refused_shared, 2);
  df_fuse_options o = {.max_parts = 1};
  assert_true(hand_error_has(df_plan_fuse(q, &o, NULL), "max_parts must be 2..8, got 1"));
  o.max_parts = 9;
  assert_true(hand_error_has(df_plan_fuse(q, &o, NULL), "max_parts must be 2..8, got 9"));
  assert_true(hand_error_has(df_plan_fuse(NULL, NULL, NULL), "expects a plan"));
  df_plan_destroy(q);
  df_plan_destroy(p);
}

/* Packing refuses fused flags that would change execution. */
static void pack_rejects_bad_fusion(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = NULL;
  p->instrs[0].fused = true; /* first of SM 0's queue */
  assert_true(hand_error_has(df_pack(p, NULL, NULL, &k), "is fused but is the first of SM 0"));
  p->instrs[0].fused = false;
  p->instrs[3].fused = true; /* REDUCE receives s1, s2 */
  assert_true(hand_error_has(df_pack(p, NULL, NULL, &k),
                             "fused instruction 3 receives comm"));
  p->instrs[3].fused = false;
  p->instrs[6].fused = true; /* I6 after I4 on SM0; fine, but I9 EXIT: */
  p->instrs[9].fused = true;
  assert_true(hand_error_has(df_pack(p, NULL, NULL, &k), "instruction 9 (exit) cannot be fused"));
  p->instrs[9].fused = false;
  p->instrs[6].fused = false;
  p->instrs[1].fused = true; /* SM1 [I1 I10]: I1 first */
  assert_true(hand_error_has(df_pack(p, NULL, NULL, &k), "is fused but is the first of SM 1"));
  p->instrs[1].fused = false;
  /* I4 (finalize) fused after I3 is fine; fusing I6 after it makes I4 a
     middle part, and I6 sends s5: allowed (last part). Fusing I3 after I0
     would need I0's... I0 sends nothing: the refusal is I3's receives. */
  df_plan_destroy(p);
  /* a non-last part that sends */
  df_plan *h = hand_plan_new(2, 2, 32);
  uint32_t a = hand_slot(h), b = hand_slot(h);
  uint32_t i0 = hand_instr(h, DF_INSTR_MAP, 0, NULL, 0, a);
  hand_instr(h, DF_INSTR_MAP, 0, &a, 1, b);
  uint32_t far = hand_instr(h, DF_INSTR_MAP, 1, &a, 1, DF_SENTINEL);
  hand_transfer(h, false, i0, far, a, a, 1);
  hand_finish(h);
  h->instrs[1].fused = true;
  assert_true(hand_error_has(df_pack(h, NULL, NULL, &k),
                             "only the last part of a fused instruction may send"));
  /* unqueued fused instruction */
  h->instrs[1].fused = false;
  df_plan_destroy(h);
  assert_null(k);
}

/* Issue 9's acceptance numbers: unfused total dispatch cycles over fused. */
static void cost_ratios(void **state) {
  (void)state;
  df_plan *plans[2] = {seed_make_plan(), decode_plan()};
  for (int i = 0; i < 2; i++) {
    df_fuse_report r;
    df_plan *q = fused_copy(plans[i], &r);
    double dflt = total_cycles(plans[i], 40, 0.0625) / total_cycles(q, 40, 0.0625);
    fprintf(stderr, "%s: unfused/fused default %.3f\n", i ? "decode" : "seed", dflt);
    if (i == 1)
      assert_true(dflt > 2.0);
    const double R[3] = {0.25, 0.0625, 0.03125};
    double prev = 0;
    for (int j = 0; j < 3; j++) {
      double u = total_cycles(plans[i], 40, R[j]), f = total_cycles(q, 40, R[j]);
      fprintf(stderr, "  F=40 R=%g: unfused %.2f fused %.2f ratio %.4f\n", R[j], u, f, u / f);
      assert_true(f < u);
      assert_true(u / f > prev);
      prev = u / f;
    }
    df_plan_destroy(q);
    df_plan_destroy(plans[i]);
  }
}

/* Seed plan, defaults, by hand. Records per dispatch: 32 + 64/part +
   48/comm + 4/input slot + 4/coordinate; payload 48 B per comm half.
   CTA 1: I1 = 32+64+48+4 (coord) + 48 = 196 B -> 40 + 12.25 = 52.25.
   CTA 0: I0 100 B -> 46.25; I3 (3 inputs, 2 recvs) 32+64+96+12+4+96 =
   304 -> 59; I4 (1 input) 104 -> 46.5; I6 (1 send) 196 -> 52.25.
   Edges: I1 (CTA1, 0..52.25) +200 -> I3; I2 (CTA2, 0..52.25) +1000 -> I3
   => I3 1052.25..1111.25, I4 ..1157.75, I6 ..1210; I7 on CTA3 waits
   I6 + 1000 = 2210, runs 59-12+... see the assertions. */
static void cost_seed_by_hand(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = pack(p);
  df_cost c;
  assert_int_equal(df_plan_cost(k, NULL, NULL, &c).code, DF_OK);
  assert_int_equal(c.ctas[1].instructions, 1);
  assert_int_equal(c.ctas[1].record_bytes, 148);
  assert_int_equal(c.ctas[1].payload_bytes, 48);
  assert_true(c.ctas[1].cycles == 52.25);
  assert_int_equal(c.ctas[0].instructions, 4);
  assert_int_equal(c.ctas[0].record_bytes, 100 + 208 + 104 + 148);
  assert_int_equal(c.ctas[0].payload_bytes, 3 * 48);
  assert_true(c.ctas[0].cycles == 46.25 + 59 + 46.5 + 52.25);
  assert_true(c.ctas[0].finish == 1210);
  /* CTA 3: I5 0..46.25; I7 (2 inputs, 1 recv) 32+64+48+8+4+48 = 204 ->
     52.75 from 2210 -> 2262.75; I8 104 B -> 46.5 -> 2309.25 */
  assert_true(c.critical_path == 2309.25);
  assert_int_equal(c.critical_cta, 3);
  /* path: I0? no: I6 follows I4 <- I3 <- I2 (HBM) */
  assert_int_equal(c.critical_count, 6);
  const uint32_t path[6] = {7, 1, 2, 3, 10, 11}; /* I2 I3 I4 I6 I7 I8 packed */
  assert_memory_equal(c.critical, path, sizeof path);
  assert_true(c.total.cycles == c.ctas[0].cycles + c.ctas[1].cycles + c.ctas[2].cycles +
                                    c.ctas[3].cycles);
  df_cost_free(&c, NULL);
  df_cost_params bad = df_cost_params_default();
  bad.byte_cycles = -1;
  assert_true(hand_error_has(df_plan_cost(k, &bad, NULL, &c), "byte_cycles (R) must be finite"));
  bad = df_cost_params_default();
  bad.hbm_latency = 1.0 / 0.0;
  assert_true(hand_error_has(df_plan_cost(k, &bad, NULL, &c), "hbm_latency must be finite"));
  assert_true(hand_error_has(df_plan_cost(NULL, NULL, NULL, &c), "expects a packed plan"));
  /* a receive dispatched before its own send on one CTA: a cycle */
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* Two CTAs that each receive before they send to the other. */
static void cost_cycle(void **state) {
  (void)state;
  df_plan *h = hand_plan_new(2, 1, 32);
  uint32_t a = hand_slot(h), b = hand_slot(h);
  uint32_t i0 = hand_instr(h, DF_INSTR_MAP, 0, &b, 1, DF_SENTINEL);
  uint32_t i1 = hand_instr(h, DF_INSTR_MAP, 0, NULL, 0, a);
  uint32_t i2 = hand_instr(h, DF_INSTR_MAP, 1, &a, 1, DF_SENTINEL);
  uint32_t i3 = hand_instr(h, DF_INSTR_MAP, 1, NULL, 0, b);
  hand_transfer(h, false, i1, i2, a, a, 1);
  hand_transfer(h, false, i3, i0, b, b, 2);
  hand_finish(h);
  df_packed *k = NULL;
  df_status st = df_pack(h, NULL, NULL, &k);
  if (st.code == DF_OK) {
    df_cost c;
    assert_true(hand_error_has(df_plan_cost(k, NULL, NULL, &c), "form a cycle"));
    df_packed_destroy(k);
  } else {
    /* barrier allocation may already refuse the cyclic plan */
    assert_true(hand_error_has(st, "cycle"));
  }
  df_plan_destroy(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(seed_reduce_finalize),   cmocka_unit_test(decode_map_reduce_finalize),
      cmocka_unit_test(decode_no_iter),
      cmocka_unit_test(streaming_chain),        cmocka_unit_test(map_chain_and_refusals),
      cmocka_unit_test(pack_rejects_bad_fusion), cmocka_unit_test(cost_ratios),
      cmocka_unit_test(cost_seed_by_hand),      cmocka_unit_test(cost_cycle),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
