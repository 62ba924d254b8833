/* Host backend numerics: scheduled and hand-edited plans run on the CPU
   with C handlers and match a direct reference computation, in every
   scheduling order and with multi-threaded CTAs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hand_plan.h"
#include "host_test_support.h"
#include "seed_plans.h"

/* Run with the default order, reversed, lockstep (quantum 1) and with 4
   threads per CTA; every run must complete and match the reference. */
static void run_all_orders(const df_packed *k, const uint32_t *kv, uint32_t tasks,
                           uint32_t block) {
  for (int v = 0; v < 4; v++) {
    df_host_options o = df_host_options_default();
    o.reverse = v == 1;
    o.quantum = v == 2 ? 1 : 0;
    o.threads = v == 3 ? 4 : 1;
    float *rows;
    df_host_result res;
    df_status st = ht_run_attention(k, tasks, block, &o, &rows, &res);
    if (st.code != DF_OK)
      fprintf(stderr, "variant %d: %s\n", v, res.diag.report ? res.diag.report : st.message);
    assert_int_equal(st.code, DF_OK);
    assert_true(res.completed);
    ht_check_attention(rows, kv, tasks);
    df_host_result_free(&res);
    free(rows);
  }
}

static void run_plan(df_plan *p, const df_pack_options *po, const uint32_t *kv, uint32_t tasks,
                     uint32_t block) {
  df_packed *k = ht_pack(p, po);
  run_all_orders(k, kv, tasks, block);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void seed_plan(void **state) {
  (void)state;
  static const uint32_t kv[2] = {384, 256};
  run_plan(seed_make_plan(), NULL, kv, 2, 128);
}

static void cluster_local(void **state) {
  (void)state;
  static const uint32_t kv[2] = {256, 256};
  run_plan(seed_schedule_attention(4, 2, kv, 2, 128, DF_POLICY_CLUSTER_LOCAL,
                                   DF_REDUCE_ALL_AT_ONCE, true),
           NULL, kv, 2, 128);
}

static void cluster_of_four(void **state) {
  (void)state;
  static const uint32_t kv[1] = {512};
  run_plan(seed_schedule_attention(4, 4, kv, 1, 128, DF_POLICY_CLUSTER_LOCAL,
                                   DF_REDUCE_ALL_AT_ONCE, true),
           NULL, kv, 1, 128);
}

static void hbm_only(void **state) {
  (void)state;
  static const uint32_t kv[2] = {256, 256};
  run_plan(seed_schedule_attention(2, 1, kv, 2, 128, DF_POLICY_ROUND_ROBIN,
                                   DF_REDUCE_ALL_AT_ONCE, true),
           NULL, kv, 2, 128);
}

static void streaming(void **state) {
  (void)state;
  static const uint32_t kv[2] = {8192, 8192};
  run_plan(seed_schedule_attention(4, 2, kv, 2, 64, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING,
                                   false),
           NULL, kv, 2, 64);
}

static void streaming_tree(void **state) {
  (void)state;
  static const uint32_t kv[2] = {8192, 8192};
  df_program *prog = ht_associative_attention_program();
  run_plan(ht_schedule(prog, 4, 2, kv, 2, 64, DF_POLICY_CLUSTER_LOCAL,
                       DF_REDUCE_STREAMING_TREE, false),
           NULL, kv, 2, 64);
  df_program_destroy(prog);
}

static void all_at_once_long(void **state) {
  (void)state;
  static const uint32_t kv[2] = {8192, 8192};
  run_plan(seed_schedule_attention(4, 2, kv, 2, 64, DF_POLICY_CLUSTER_LOCAL,
                                   DF_REDUCE_ALL_AT_ONCE, true),
           NULL, kv, 2, 64);
}

/* Skewed random lengths on 8 SMs, clusters of 2 and 4, every policy and
   strategy, three execution orders: every run must finish with the right
   numbers (streaming plans whose CTAs serve several tasks included). */
/* Barriers are shared by the HBM and cluster receives of one CTA (phases
   are assigned over both, REFERENCE 3.7): in this round_robin plan a CTA
   receives over HBM and later over the cluster on the same barrier, so a
   default-path HBM receive must complete its barrier phase too (as the
   device's leader does), else the cluster receive waits for the wrong
   parity. (Found on a full-chip decode plan; this is a small one.) */
static void hbm_then_cluster_on_one_barrier(void **state) {
  (void)state;
  static const uint32_t kv[11] = {320, 512, 704, 128, 64, 768, 704, 128, 320, 512, 192};
  df_plan *p = seed_schedule_attention(4, 2, kv, 11, 64, DF_POLICY_ROUND_ROBIN,
                                       DF_REDUCE_ALL_AT_ONCE, true);
  df_packed *k = ht_pack(p, NULL);
  /* the plan really mixes the two kinds of receive on one barrier */
  bool mixed = false;
  for (uint32_t s = 0; s < k->topology.sm_count && !mixed; s++) {
    uint32_t q0 = k->queue_offsets[s], n = k->queue_lengths[s];
    uint8_t seen[1024] = {0};
    for (uint32_t q = q0; q < q0 + n && !mixed; q++)
      for (uint32_t j = k->instrs[q].comm_offset;
           j < k->instrs[q].comm_offset + k->instrs[q].comm_count; j++) {
        const df_abi_comm *c = &k->comms[j];
        uint32_t b = c->kind == DF_COMM_HBM_RECV ? c->barrier_index
                     : c->kind == DF_COMM_CLUSTER_RECV ? k->slots[c->dst_slot_id].barrier_index
                                                       : DF_SENTINEL;
        if (b == DF_SENTINEL || b >= 1024)
          continue;
        if (c->kind == DF_COMM_HBM_RECV)
          seen[b] = 1;
        else
          mixed |= seen[b];
      }
  }
  assert_true(mixed);
  float *rows;
  df_host_result res;
  df_status st = ht_run_attention(k, 11, 64, NULL, &rows, &res);
  if (st.code != DF_OK)
    fprintf(stderr, "%s\n", st.message);
  assert_int_equal(st.code, DF_OK);
  ht_check_attention(rows, kv, 11);
  df_host_result_free(&res);
  free(rows);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void random_skewed(void **state) {
  (void)state;
  df_program *assoc = ht_associative_attention_program();
  df_program *nary = seed_attention_program();
  uint64_t seed = 0x5eed;
  uint32_t passed = 0;
  for (int round = 0; round < 8; round++) {
    uint32_t tasks = ht_rand(&seed, 1, 6), kv[6];
    for (uint32_t t = 0; t < tasks; t++)
      kv[t] = ht_rand(&seed, 0, 3) == 0 ? ht_rand(&seed, 1000, 6000) : ht_rand(&seed, 1, 700);
    uint32_t cs = round % 2 ? 4 : 2;
    const ht_combo *combos = ht_combos;
    for (int c = 0; c < HT_COMBOS; c++) {
      const df_program *prog = combos[c].s == DF_REDUCE_STREAMING_TREE ? assoc : nary;
      df_plan *p = ht_schedule(prog, 8, cs, kv, tasks, 64, combos[c].p, combos[c].s, c % 2 == 0);
      df_packed *k = ht_pack(p, NULL);
      for (int v = 0; v < 3; v++) {
        df_host_options o = df_host_options_default();
        o.reverse = v == 1;
        o.quantum = v == 2 ? 1 : 0;
        float *rows;
        df_host_result res;
        df_status st = ht_run_attention(k, tasks, 64, &o, &rows, &res);
        if (st.code != DF_OK)
          fprintf(stderr, "round %d combo %d variant %d: %s\n", round, c, v, st.message);
        assert_int_equal(st.code, DF_OK);
        ht_check_attention(rows, kv, tasks);
        passed++;
        df_host_result_free(&res);
        free(rows);
      }
      df_packed_destroy(k);
      df_plan_destroy(p);
    }
  }
  assert_int_equal(passed, 8 * 4 * 3);
  /* tasks <= clusters: every CTA serves one task and every plan is safe */
  for (int round = 0; round < 6; round++) {
    uint32_t cs = round % 2 ? 4 : 2, tasks = ht_rand(&seed, 1, 8 / cs), kv[4];
    for (uint32_t t = 0; t < tasks; t++)
      kv[t] = ht_rand(&seed, 1, 2) == 1 ? ht_rand(&seed, 2000, 9000) : ht_rand(&seed, 1, 300);
    run_plan(ht_schedule(nary, 8, cs, kv, tasks, 64, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING,
                         true),
             NULL, kv, tasks, 64);
    run_plan(ht_schedule(assoc, 8, cs, kv, tasks, 64, DF_POLICY_CLUSTER_LOCAL,
                         DF_REDUCE_STREAMING_TREE, false),
             NULL, kv, tasks, 64);
  }
  df_program_destroy(assoc);
  df_program_destroy(nary);
}

/* The streaming layout keeps one accumulator region per CTA. In this plan
   CTA 7 runs chunks of several tasks, so a cluster push of task 4's
   accumulator from CTA 6 could land in CTA 7's region while another chain
   still uses it (the backend once caught exactly that). The scheduler now
   pulls such transfers through HBM: every execution order gives the right
   numbers. */
static void streaming_layout_race(void **state) {
  (void)state;
  static const uint32_t kv[5] = {581, 549, 99, 579, 488};
  df_plan *p = seed_schedule_attention(8, 2, kv, 5, 64, DF_POLICY_CLUSTER_LOCAL,
                                       DF_REDUCE_STREAMING, true);
  for (uint32_t i = 0; i < p->comm_count; i++)
    if (p->comms[i].consumer_sm == 7 && p->comms[i].producer_sm == 6)
      assert_true(df_comm_kind_is_hbm(p->comms[i].kind));
  df_packed *k = ht_pack(p, NULL);
  for (int v = 0; v < 2; v++) {
    df_host_options o = df_host_options_default();
    o.reverse = v == 1;
    float *rows;
    df_host_result res;
    assert_int_equal(ht_run_attention(k, 5, 64, &o, &rows, &res).code, DF_OK);
    ht_check_attention(rows, kv, 5);
    df_host_result_free(&res);
    free(rows);
  }
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* streaming_tree partials share one region keyed by a slot id, so a leaf
   accumulator (keyed by its own id) can no longer land on the partials'
   region (slot 1 used to alias storage 1 and be overwritten by slot 25). */
static void streaming_tree_slot_alias(void **state) {
  (void)state;
  static const uint32_t kv[5] = {580, 320, 494, 4990, 689};
  df_program *prog = ht_associative_attention_program();
  df_plan *p = ht_schedule(prog, 8, 4, kv, 5, 64, DF_POLICY_CLUSTER_LOCAL,
                           DF_REDUCE_STREAMING_TREE, false);
  df_packed *k = ht_pack(p, NULL);
  assert_int_not_equal(k->slots[1].shared_offset, k->slots[25].shared_offset);
  for (int v = 0; v < 2; v++) {
    df_host_options o = df_host_options_default();
    o.reverse = v == 1;
    float *rows;
    df_host_result res;
    assert_int_equal(ht_run_attention(k, 5, 64, &o, &rows, &res).code, DF_OK);
    ht_check_attention(rows, kv, 5);
    df_host_result_free(&res);
    free(rows);
  }
  df_packed_destroy(k);
  df_plan_destroy(p);
  df_program_destroy(prog);
}

/* ---- hand-edited plans through df_pack ------------------------------------ */

static void segmented_hbm(void **state) {
  (void)state;
  static const uint32_t kv[2] = {384, 256};
  df_plan *p = seed_make_plan();
  hand_segment_first_hbm(p, 3, 16);
  run_plan(p, NULL, kv, 2, 128);
}

static void reuse_hbm_flags(void **state) {
  (void)state;
  static const uint32_t kv[2] = {384, 256};
  df_pack_options o;
  memset(&o, 0, sizeof o);
  o.layout.reuse_hbm_flags = true;
  run_plan(seed_make_plan(), &o, kv, 2, 128);
}

static void selective_direct_global(void **state) {
  (void)state;
  static const uint32_t kv[2] = {384, 256};
  df_pack_options o;
  memset(&o, 0, sizeof o);
  static const uint32_t s2 = 2;
  o.layout.direct_count = 1;
  o.layout.direct_slots = &s2;
  df_plan *p = seed_make_plan();
  df_packed *k = ht_pack(p, &o);
  assert_true(k->slots[2].flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL);
  run_all_orders(k, kv, 2, 128);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void full_direct_global(void **state) {
  (void)state;
  static const uint32_t kv[2] = {256, 256};
  df_pack_options o;
  memset(&o, 0, sizeof o);
  o.layout.hbm_direct_global = true;
  run_plan(seed_schedule_attention(2, 1, kv, 2, 128, DF_POLICY_ROUND_ROBIN,
                                   DF_REDUCE_ALL_AT_ONCE, true),
           &o, kv, 2, 128);
}

static void cluster_release(void **state) {
  (void)state;
  static const uint32_t kv[2] = {384, 256};
  df_plan *p = seed_make_plan();
  hand_append_release(p);
  df_packed *k = ht_pack(p, NULL);
  run_all_orders(k, kv, 2, 128);
  float *rows;
  df_host_result res;
  assert_int_equal(ht_run_attention(k, 2, 128, NULL, &rows, &res).code, DF_OK);
  /* the release is logged once, from CTA 0 to CTA 1 */
  uint32_t releases = 0;
  for (uint32_t i = 0; i < res.op_count; i++)
    if (res.ops[i].kind == DF_HOST_OP_COMM && res.ops[i].comm_kind == DF_COMM_CLUSTER_RELEASE) {
      assert_int_equal(res.ops[i].cta, 0);
      assert_int_equal(res.ops[i].peer_cta, 1);
      releases++;
    }
  assert_int_equal(releases, 1);
  df_host_result_free(&res);
  free(rows);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* Slot 1 (the cluster transfer's target) lives in the scratch arena. */
static void scratch_backed_slot(void **state) {
  (void)state;
  static const uint32_t kv[2] = {384, 256};
  df_plan *p = seed_make_plan();
  p->slots[1].scratch_backed = true;
  p->slots[1].has_scratch_offset = true;
  p->slots[1].scratch_offset = 4096;
  df_packed *k = ht_pack(p, NULL);
  assert_true(k->slots[1].flags & DF_SLOT_FLAG_SCRATCH_BACKED);
  run_all_orders(k, kv, 2, 128);
  /* a scratch arena too small for it is refused before running */
  df_host_options o = df_host_options_default();
  o.scratch_bytes = 4100;
  float *rows;
  df_host_result res;
  assert_int_equal(ht_run_attention(k, 2, 128, &o, &rows, &res).code, DF_EINVAL);
  assert_int_equal(res.diag.kind, DF_HOST_DIAG_ARENA);
  assert_non_null(strstr(res.diag.report, "slot 1 lies outside the scratch arena: bytes [4096, "
                                          "4144) but the scratch arena has 4100 bytes"));
  df_host_result_free(&res);
  free(rows);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* HBM_RECV of I2 -> I3 turned into an issue at I0 plus a wait at I3. */
static void hbm_issue_and_wait(void **state) {
  (void)state;
  static const uint32_t kv[2] = {384, 256};
  df_plan *p = seed_make_plan();
  df_packed *k = ht_pack(p, NULL);
  uint32_t i0 = ht_packed_index(k, 0), i3 = ht_packed_index(k, 3);
  uint32_t recv = ht_find_comm(k, DF_COMM_HBM_RECV, i3);
  df_abi_comm issue = k->comms[recv];
  k->comms[recv].kind = DF_COMM_HBM_RECV_WAIT;
  issue.kind = DF_COMM_HBM_RECV_ISSUE;
  ht_insert_comm(k, i0, &issue);
  run_all_orders(k, kv, 2, 128);
  /* reversed order: SM2 sends before SM0 reaches I0, so the issue copies */
  df_host_options o = df_host_options_default();
  o.reverse = true;
  float *rows;
  df_host_result res;
  assert_int_equal(ht_run_attention(k, 2, 128, &o, &rows, &res).code, DF_OK);
  uint32_t issued = 0;
  for (uint32_t i = 0; i < res.op_count; i++)
    issued += res.ops[i].kind == DF_HOST_OP_COMM &&
              res.ops[i].comm_kind == DF_COMM_HBM_RECV_ISSUE;
  assert_int_equal(issued, 1);
  df_host_result_free(&res);
  free(rows);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* ---- reshared MoE ------------------------------------------------------------ */

static void run_moe(const df_pack_options *po) {
  df_plan *p = seed_make_reshared_plan();
  df_packed *k = ht_pack(p, po);
  for (int v = 0; v < 3; v++) {
    df_host_options o = df_host_options_default();
    o.reverse = v == 1;
    o.threads = v == 2 ? 3 : 1;
    float out[2][HT_MOE_VALUES];
    memset(out, 0, sizeof out);
    df_abi_tensor_arg tensors[4];
    memset(tensors, 0, sizeof tensors);
    tensors[3].data_ptr = (uint64_t)(uintptr_t)out;
    df_handler_fn *h = ht_handlers(k);
    df_host_result res;
    df_status st = df_host_run(k, h, k->handler_count, tensors, 4, 128, &o, &res);
    if (st.code != DF_OK)
      fprintf(stderr, "%s\n", st.message);
    assert_int_equal(st.code, DF_OK);
    for (uint32_t r = 0; r < 2; r++) {
      float want[HT_MOE_VALUES];
      ht_moe_reference(0, 128 * r, 128, 2, want);
      assert_memory_equal(out[r], want, sizeof want);
    }
    df_host_result_free(&res);
    free(h);
  }
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void reshared_moe(void **state) {
  (void)state;
  run_moe(NULL);
}

static void reshared_moe_direct_global(void **state) {
  (void)state;
  df_pack_options o;
  memset(&o, 0, sizeof o);
  o.layout.hbm_direct_global = true;
  run_moe(&o);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(seed_plan),
      cmocka_unit_test(cluster_local),
      cmocka_unit_test(cluster_of_four),
      cmocka_unit_test(hbm_only),
      cmocka_unit_test(streaming),
      cmocka_unit_test(streaming_tree),
      cmocka_unit_test(all_at_once_long),
      cmocka_unit_test(random_skewed),
      cmocka_unit_test(hbm_then_cluster_on_one_barrier),
      cmocka_unit_test(streaming_layout_race),
      cmocka_unit_test(streaming_tree_slot_alias),
      cmocka_unit_test(segmented_hbm),
      cmocka_unit_test(reuse_hbm_flags),
      cmocka_unit_test(selective_direct_global),
      cmocka_unit_test(full_direct_global),
      cmocka_unit_test(cluster_release),
      cmocka_unit_test(hbm_issue_and_wait),
      cmocka_unit_test(scratch_backed_slot),
      cmocka_unit_test(reshared_moe),
      cmocka_unit_test(reshared_moe_direct_global),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
