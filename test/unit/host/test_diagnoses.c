/* Host backend diagnoses: invalid or unsafe plans stop with a precise
   report (deadlock with its wait-for chain or cycle, unwritten reads,
   overwrites, phase mismatches, arena violations, shared flags, missing
   handlers, step limits) instead of producing numbers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "df/kernel_plan.h"
#include "hand_plan.h"
#include "host_test_support.h"
#include "seed_plans.h"

static bool has(const df_host_result *r, const char *needle) {
  if (r->diag.report && strstr(r->diag.report, needle))
    return true;
  fprintf(stderr, "report lacks '%s':\n%s\n", needle, r->diag.report ? r->diag.report : "(none)");
  return false;
}

/* Run attention handlers on k and expect a failure of `kind`. */
static void expect(const df_packed *k, const df_host_options *o, df_host_diag_kind kind,
                   df_host_result *res) {
  float *rows;
  df_status st = ht_run_attention(k, 2, 128, o, &rows, res);
  free(rows);
  if (res->diag.kind != kind)
    fprintf(stderr, "expected %s, got %s: %s\n", df_host_diag_kind_name(kind),
            df_host_diag_kind_name(res->diag.kind), st.message);
  assert_int_equal(st.code, DF_EINVAL);
  assert_int_equal(res->diag.kind, kind);
  assert_false(res->completed);
  /* the status message is the start of the report */
  assert_int_equal(strncmp(st.message, res->diag.report, strlen(st.message) - 1), 0);
}

/* ---- deadlock ------------------------------------------------------------ */

static void deadlock_when_a_send_is_removed(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = ht_pack(p, NULL);
  uint32_t i2 = ht_packed_index(k, 2), i3 = ht_packed_index(k, 3), i7 = ht_packed_index(k, 7);
  ht_delete_comm(k, ht_find_comm(k, DF_COMM_HBM_SEND, i2));
  uint32_t recv3 = ht_find_comm(k, DF_COMM_HBM_RECV, i3);
  uint32_t recv7 = ht_find_comm(k, DF_COMM_HBM_RECV, i7);
  df_host_result res;
  expect(k, NULL, DF_HOST_DIAG_DEADLOCK, &res);
  assert_int_equal(res.diag.wait_count, 2);
  const df_host_wait *w = &res.diag.waits[0];
  assert_int_equal(w->kind, DF_HOST_WAIT_FLAG);
  assert_int_equal(w->cta, 0);
  assert_int_equal(w->queue_pos, 1);
  assert_int_equal(w->instr, i3);
  assert_int_equal(w->comm, recv3);
  assert_int_equal(w->slot, 2);
  assert_int_equal(w->index, 2); /* flag of slot 2 */
  assert_int_equal(w->awaited, 1);
  assert_int_equal(w->current, 0);
  assert_int_equal(w->waits_for, DF_SENTINEL);
  w = &res.diag.waits[1];
  assert_int_equal(w->cta, 3);
  assert_int_equal(w->instr, i7);
  assert_int_equal(w->comm, recv7);
  assert_int_equal(w->slot, 5);
  assert_int_equal(w->awaited, 2);
  assert_int_equal(w->waits_for, 0);
  assert_int_equal(res.diag.cycle_length, 0);
  assert_true(has(&res, "deadlock: 2 of 4 CTAs blocked"));
  assert_true(has(&res, "CTA 0 queue position 1 (packed instruction 1, reduce, handler 1 "
                        "'combine'): comm 1 hbm_recv into slot 2 waits for flag 2 >= epoch 1 "
                        "(flag is 0); no unfinished CTA will ever unblock it (no matching send "
                        "exists)"));
  assert_true(has(&res, "would be unblocked by CTA 0, itself blocked at queue position 1"));
  assert_true(has(&res, "no wait-for cycle"));
  df_host_result_free(&res);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void work(const df_ctx *c) {
  uint8_t *out = df_ctx_output(c);
  if (!out)
    return;
  uint8_t v = 1;
  for (uint32_t i = 0; i < df_ctx_input_count(c); i++)
    v = (uint8_t)(v + ((uint8_t *)df_ctx_input(c, i))[0]);
  memset(out, v, 16);
}

static df_status run_work(const df_packed *k, const df_host_options *o, df_host_result *res) {
  df_handler_fn h[4] = {work, work, work, work};
  return df_host_run(k, h, k->handler_count, NULL, 0, 1, o, res);
}

/* SM0: I0 -> s0 (to SM1), I2 reads s3; SM1: I1 -> s1 (to SM0), I3 reads s2. */
static df_plan *exchange_plan(uint32_t cluster_size) {
  df_plan *p = hand_plan_new(2, cluster_size, 16);
  uint32_t s[6];
  for (int i = 0; i < 6; i++)
    s[i] = hand_slot(p);
  uint32_t i0 = hand_instr(p, DF_INSTR_MAP, 0, NULL, 0, s[0]);
  uint32_t i1 = hand_instr(p, DF_INSTR_MAP, 1, NULL, 0, s[1]);
  uint32_t i2 = hand_instr(p, DF_INSTR_MAP, 0, &s[3], 1, s[4]);
  uint32_t i3 = hand_instr(p, DF_INSTR_MAP, 1, &s[2], 1, s[5]);
  hand_transfer(p, cluster_size > 1, i0, i3, s[0], s[2], 1);
  hand_transfer(p, cluster_size > 1, i1, i2, s[1], s[3], 2);
  hand_finish(p);
  return p;
}

static void deadlock_cycle(void **state) {
  (void)state;
  for (uint32_t cs = 1; cs <= 2; cs++) {
    df_plan *p = exchange_plan(cs);
    df_packed *k = ht_pack(p, NULL);
    df_host_result res;
    assert_int_equal(run_work(k, NULL, &res).code, DF_OK);
    assert_true(res.completed);
    df_host_result_free(&res);
    /* each CTA now receives before it sends */
    ht_swap_instrs(k, 0, 1);
    ht_swap_instrs(k, 2, 3);
    df_status st = run_work(k, NULL, &res);
    assert_int_equal(st.code, DF_EINVAL);
    assert_int_equal(res.diag.kind, DF_HOST_DIAG_DEADLOCK);
    assert_int_equal(res.diag.wait_count, 2);
    assert_int_equal(res.diag.waits[0].kind, cs > 1 ? DF_HOST_WAIT_BARRIER : DF_HOST_WAIT_FLAG);
    assert_int_equal(res.diag.waits[0].waits_for, 1);
    assert_int_equal(res.diag.waits[1].waits_for, 0);
    assert_int_equal(res.diag.cycle_length, 2);
    assert_int_equal(res.diag.cycle[0], 0);
    assert_int_equal(res.diag.cycle[1], 1);
    assert_true(has(&res, "wait-for cycle: CTA 0 -> CTA 1 -> CTA 0"));
    assert_true(has(&res, cs > 1 ? "waits on barrier" : "waits for flag"));
    df_host_result_free(&res);
    df_packed_destroy(k);
    df_plan_destroy(p);
  }
}

/* A gated push waits for the consumer's release; released after the
   receive it can never go: CTA 1 waits for CTA 0's release, CTA 0 for
   CTA 1's data. Released up front (at I0) it runs. */
static void gated_push(void **state) {
  (void)state;
  static const uint32_t kv[2] = {384, 256};
  for (int early = 0; early < 2; early++) {
    df_plan *p = seed_make_plan();
    p->slots[1].gated = true;
    hand_append_release(p);
    if (early)
      p->comms[p->comm_count - 1].dispatch_instr = 0;
    df_packed *k = ht_pack(p, NULL);
    assert_true(k->slots[1].flags & DF_SLOT_FLAG_CLUSTER_GATED_PUSH);
    float *rows;
    df_host_result res;
    df_status st = ht_run_attention(k, 2, 128, NULL, &rows, &res);
    if (early) {
      assert_int_equal(st.code, DF_OK);
      ht_check_attention(rows, kv, 2);
    } else {
      assert_int_equal(res.diag.kind, DF_HOST_DIAG_DEADLOCK);
      assert_int_equal(res.diag.cycle_length, 2);
      assert_true(has(&res, "into gated slot 1 waits on ACK barrier 0 for release #0"));
      assert_true(has(&res, "wait-for cycle: CTA 0 -> CTA 1 -> CTA 0"));
    }
    free(rows);
    df_host_result_free(&res);
    df_packed_destroy(k);
    df_plan_destroy(p);
  }
}

/* An ACKed cluster send keeps its CTA alive until the consumer's release
   arrives (here at the end of a queue without EXIT); without the release
   that wait can never end. */
static void ack_at_queue_end(void **state) {
  (void)state;
  static const uint32_t kv[2] = {384, 256};
  df_plan *p = seed_schedule_attention(4, 2, kv, 2, 128, DF_POLICY_ROUND_ROBIN,
                                       DF_REDUCE_ALL_AT_ONCE, false);
  hand_append_release(p);
  df_packed *k = ht_pack(p, NULL);
  float *rows;
  df_host_result res;
  assert_int_equal(ht_run_attention(k, 2, 128, NULL, &rows, &res).code, DF_OK);
  ht_check_attention(rows, kv, 2);
  free(rows);
  df_host_result_free(&res);
  ht_delete_comm(k, ht_find_comm(k, DF_COMM_CLUSTER_RELEASE, DF_SENTINEL));
  expect(k, NULL, DF_HOST_DIAG_DEADLOCK, &res);
  assert_int_equal(res.diag.wait_count, 1);
  assert_int_equal(res.diag.waits[0].cta, 1);
  assert_int_equal(res.diag.waits[0].kind, DF_HOST_WAIT_ACK);
  assert_int_equal(res.diag.waits[0].instr, DF_SENTINEL);
  assert_int_equal(res.diag.waits[0].comm, DF_SENTINEL);
  assert_true(has(&res, "CTA 1 at the end of its queue: kernel exit waits on ACK barrier 0 for "
                        "the release of its cluster send (0 of 1 arrived); no unfinished CTA "
                        "will ever unblock it"));
  df_host_result_free(&res);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void cluster_sync(void **state) {
  (void)state;
  for (int both = 0; both < 2; both++) {
    df_plan *p = hand_plan_new(2, 2, 16);
    uint32_t s0 = hand_slot(p);
    hand_instr(p, DF_INSTR_MAP, 0, NULL, 0, s0);
    hand_instr(p, DF_INSTR_CLUSTER_SYNC, 0, NULL, 0, DF_SENTINEL);
    if (both)
      hand_instr(p, DF_INSTR_CLUSTER_SYNC, 1, NULL, 0, DF_SENTINEL);
    hand_finish(p);
    df_packed *k = ht_pack(p, NULL);
    df_host_result res;
    df_status st = run_work(k, NULL, &res);
    if (both) {
      assert_int_equal(st.code, DF_OK);
    } else {
      assert_int_equal(res.diag.kind, DF_HOST_DIAG_DEADLOCK);
      assert_int_equal(res.diag.waits[0].kind, DF_HOST_WAIT_CLUSTER);
      assert_int_equal(res.diag.waits[0].waits_for, 1);
      assert_true(has(&res, "cluster_sync waits for every CTA of cluster 0 to reach cluster "
                            "sync #1 (slowest has reached 0); would be unblocked by CTA 1, "
                            "which has finished"));
    }
    df_host_result_free(&res);
    df_packed_destroy(k);
    df_plan_destroy(p);
  }
}

/* ---- data hazards ---------------------------------------------------------- */

static void unwritten_read_when_a_transfer_is_deleted(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_comm keep[8];
  uint32_t n = 0;
  for (uint32_t i = 0; i < p->comm_count; i++)
    if (!df_comm_kind_is_cluster(p->comms[i].kind))
      keep[n++] = p->comms[i];
  hand_set_comms(p, keep, n);
  df_packed *k = ht_pack(p, NULL);
  df_host_result res;
  expect(k, NULL, DF_HOST_DIAG_UNWRITTEN_READ, &res);
  assert_int_equal(res.diag.cta, 0);
  assert_int_equal(res.diag.queue_pos, 1);
  assert_int_equal(res.diag.instr, ht_packed_index(k, 3));
  assert_int_equal(res.diag.input, 1);
  assert_int_equal(res.diag.slot, 1);
  assert_true(has(&res, "read of a slot nobody wrote: CTA 0 queue position 1 (packed instruction "
                        "1, reduce, handler 1 'combine') reads input 1, slot 1 (shared arena "
                        "bytes [48, 96)), but bytes [0, 48) of it were never written"));
  df_host_result_free(&res);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* Slot 1 moved onto slot 0's bytes: the cluster transfer into CTA 0 lands
   on data I3 still reads (or that I0 will overwrite). */
static void transfer_overwrites_unconsumed_slot(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = ht_pack(p, NULL);
  k->slots[1].shared_offset = 0;
  df_host_result res;
  expect(k, NULL, DF_HOST_DIAG_OVERWRITE, &res);
  assert_int_equal(res.diag.cta, 1);
  assert_true(has(&res, "comm 3 cluster_send (CTA 1) writes slot 1 of CTA 0 (shared arena bytes "
                        "[0, 48)) before its receive (comm 0 at queue position 1)"));
  assert_true(has(&res, "still has to read the old contents as input 0 (slot 0)"));
  df_host_result_free(&res);
  df_host_options o = df_host_options_default();
  o.reverse = true;
  expect(k, &o, DF_HOST_DIAG_OVERWRITE, &res);
  assert_true(has(&res, "CTA 0 queue position 0 (packed instruction 0, iter, handler 0 "
                        "'split_kv') writes its output slot 0 over those bytes before the "
                        "receive"));
  df_host_result_free(&res);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* 2 SMs, cluster 1: CTA 1 sends both tasks' second partials over HBM back
   to back. With the second transfer's staging moved onto the first's, it
   lands before CTA 0's reduce of task 0 read the first. */
static void hbm_send_overwrites_unread_staging(void **state) {
  (void)state;
  static const uint32_t kv[2] = {256, 256};
  df_plan *p = seed_schedule_attention(2, 1, kv, 2, 128, DF_POLICY_ROUND_ROBIN,
                                       DF_REDUCE_ALL_AT_ONCE, true);
  df_packed *k = ht_pack(p, NULL);
  uint32_t sends[2], n = 0;
  for (uint32_t j = 0; j < k->comm_count && n < 2; j++)
    if (k->comms[j].kind == DF_COMM_HBM_SEND)
      sends[n++] = j;
  assert_int_equal(n, 2);
  uint32_t first = k->comms[sends[0]].dst_slot_id, second = k->comms[sends[1]].dst_slot_id;
  k->slots[second].global_offset = k->slots[first].global_offset;
  df_host_result res;
  expect(k, NULL, DF_HOST_DIAG_OVERWRITE, &res);
  assert_int_equal(res.diag.cta, 1);
  assert_true(has(&res, "hbm_send (CTA 1) overwrites global staging bytes"));
  assert_true(has(&res, "before their receive read them"));
  df_host_result_free(&res);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* With reuse_hbm_flags every HBM transfer shares flag 0. Swapping the
   epochs lets SM3's receive (epoch 1) pass on SM2's unrelated store of 2
   before its own send ran. */
static void shared_flag_passes_early(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_pack_options po;
  memset(&po, 0, sizeof po);
  po.layout.reuse_hbm_flags = true;
  df_packed *k = ht_pack(p, &po);
  for (uint32_t j = 0; j < k->comm_count; j++)
    if (df_comm_kind_is_hbm(k->comms[j].kind))
      k->comms[j].flag_epoch = 3 - k->comms[j].flag_epoch;
  df_host_result res;
  expect(k, NULL, DF_HOST_DIAG_STALE_FLAG, &res);
  assert_int_equal(res.diag.cta, 3);
  assert_true(has(&res, "passes on flag 0 = 2 >= epoch 1 stored by CTA 2"));
  assert_true(has(&res, "its own hbm_send (comm 2 on CTA 0) has not run: the flag is shared "
                        "with another transfer"));
  df_host_result_free(&res);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* ---- checks before running --------------------------------------------------- */

static void arena_overflow(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = ht_pack(p, NULL);
  k->slots[3].shared_offset = 320;
  df_host_result res;
  expect(k, NULL, DF_HOST_DIAG_ARENA, &res);
  assert_int_equal(res.diag.slot, 3);
  assert_int_equal(res.op_count, 0);
  assert_true(has(&res, "slot 3 lies outside the shared slot arena: bytes [320, 368) but the "
                        "shared slot arena has 336 bytes"));
  df_host_result_free(&res);
  k->slots[3].shared_offset = 144;
  k->slots[6].global_offset = 300;
  expect(k, NULL, DF_HOST_DIAG_ARENA, &res);
  assert_true(has(&res, "slot 6 lies outside the global staging"));
  df_host_result_free(&res);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void rogue(const df_ctx *c) {
  ht_split_kv(c);
  c->shared_slots[-4] = 0; /* into the control region below the slot arena */
}

static void handler_writes_outside_the_arena(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = ht_pack(p, NULL);
  df_handler_fn *h = ht_handlers(k);
  h[0] = rogue;
  float rows[2 * HT_ATTN_ROW];
  df_abi_tensor_arg t[4];
  memset(t, 0, sizeof t);
  t[3].data_ptr = (uint64_t)(uintptr_t)rows;
  df_host_result res;
  df_status st = df_host_run(k, h, k->handler_count, t, 4, 128, NULL, &res);
  assert_int_equal(st.code, DF_EINVAL);
  assert_int_equal(res.diag.kind, DF_HOST_DIAG_ARENA);
  assert_int_equal(res.diag.instr, 0);
  assert_true(has(&res, "CTA 0 queue position 0 (packed instruction 0, iter, handler 0 "
                        "'split_kv'): the handler wrote outside its memory: into the shared "
                        "control region"));
  assert_true(has(&res, "byte offset -4"));
  df_host_result_free(&res);
  free(h);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* The handler workspace (docs/workspace.md): every handler call gets the
   CTA's 128-byte aligned buffer of workspace_bytes, poisoned at entry
   (what an earlier instruction left does not survive); the partial here
   checks that and fills all of it, so the run fails when the workspace
   is missing or short. */
static uint32_t g_ws_calls, g_ws_bad;

static void ws_split_kv(const df_ctx *c) {
  uint8_t *w = df_ctx_workspace(c);
  uint32_t n = df_ctx_workspace_bytes(c);
  g_ws_calls++;
  if (!w || n != 1000 || (uintptr_t)w % DF_WORKSPACE_ALIGN != 0) {
    g_ws_bad++;
  } else {
    for (uint32_t i = 0; i < n; i++)
      g_ws_bad += w[i] != 0xA5u;
    memset(w, 0x3C, n);
  }
  ht_split_kv(c);
}

static void ws_before(const df_ctx *c) {
  ht_split_kv(c);
  ((uint8_t *)df_ctx_workspace(c))[-1] = 0;
}

static void handler_workspace(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = ht_pack(p, NULL);
  df_handler_fn *h = ht_handlers(k);
  h[0] = ws_split_kv;
  df_host_options o = df_host_options_default();
  o.workspace_bytes = 1000;
  float *rows = NULL;
  g_ws_calls = g_ws_bad = 0;
  df_status st = ht_run_attention_with(k, h, 2, 128, &o, &rows, NULL);
  assert_int_equal(st.code, DF_OK);
  assert_true(g_ws_calls >= 2); /* iters on the same CTAs: the poison is renewed */
  assert_int_equal(g_ws_bad, 0);
  static const uint32_t kv[2] = {384, 256};
  ht_check_attention(rows, kv, 2);
  free(rows);
  /* no workspace option: the handler sees none */
  o.workspace_bytes = 0;
  g_ws_calls = g_ws_bad = 0;
  st = ht_run_attention_with(k, h, 2, 128, &o, &rows, NULL);
  assert_int_equal(st.code, DF_OK);
  assert_int_equal(g_ws_bad, g_ws_calls);
  free(rows);
  /* a write below the workspace is caught by its guard */
  h[0] = ws_before;
  o.workspace_bytes = 1000;
  df_host_result res;
  st = ht_run_attention_with(k, h, 2, 128, &o, &rows, &res);
  assert_int_equal(st.code, DF_EINVAL);
  assert_int_equal(res.diag.kind, DF_HOST_DIAG_ARENA);
  assert_true(has(&res, "the handler wrote outside its memory: before the handler workspace "
                        "(relative to its start), byte offset -1"));
  df_host_result_free(&res);
  free(rows);
  /* over the largest workspace a handler may declare */
  o.workspace_bytes = DF_WORKSPACE_MAX_BYTES + 1;
  st = df_host_run(k, h, k->handler_count, NULL, 0, 128, &o, &res);
  assert_true(hand_error_has(st, "host option workspace_bytes must be at most 232448 (227 "
                                 "KiB), got 232449"));
  df_host_result_free(&res);
  free(h);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void phase_mismatch(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = ht_pack(p, NULL);
  uint32_t r = ht_find_comm(k, DF_COMM_CLUSTER_RECV, DF_SENTINEL);
  k->comms[r].flag_epoch = k->comms[r].barrier_phase = 1;
  df_host_result res;
  expect(k, NULL, DF_HOST_DIAG_PHASE_MISMATCH, &res);
  assert_int_equal(res.diag.comm, r);
  assert_int_equal(res.op_count, 0);
  assert_true(has(&res, "barrier phase mismatch: CTA 0 queue position 1 (packed instruction 1, "
                        "reduce, handler 1 'combine'): comm 0 cluster_recv into slot 1 waits on "
                        "barrier 0 for parity 1, but it is receive #0 on that barrier of CTA 0, "
                        "whose transfer completes phase 0 (parity 0)"));
  df_host_result_free(&res);
  /* bulk path: the segmented HBM receive's barrier parity */
  df_plan_destroy(p);
  df_packed_destroy(k);
  p = seed_make_plan();
  hand_segment_first_hbm(p, 3, 16);
  k = ht_pack(p, NULL);
  for (uint32_t j = 0; j < k->comm_count; j++)
    if (k->comms[j].kind == DF_COMM_HBM_RECV && k->comms[j].src_slot_id == 5)
      k->comms[j].barrier_phase = 1;
  expect(k, NULL, DF_HOST_DIAG_PHASE_MISMATCH, &res);
  assert_int_equal(res.diag.cta, 3);
  assert_true(has(&res, "hbm_recv into slot 5 waits on barrier 0 for parity 1"));
  df_host_result_free(&res);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void invalid_records(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = ht_pack(p, NULL);
  df_host_result res;
  uint32_t flags = k->instrs[1].flags;
  k->instrs[1].flags = 0;
  expect(k, NULL, DF_HOST_DIAG_INVALID_PLAN, &res);
  assert_true(has(&res, "instruction flags 0x00000000 announce 0 cluster receives and 0 cluster "
                        "sends/releases, its comm block has 1 and 0"));
  df_host_result_free(&res);
  k->instrs[1].flags = flags;
  uint32_t send = ht_find_comm(k, DF_COMM_CLUSTER_SEND, DF_SENTINEL);
  k->comms[send].peer_cta_rank = 2;
  expect(k, NULL, DF_HOST_DIAG_INVALID_PLAN, &res);
  assert_true(has(&res, "peer_cta_rank 2 is outside the cluster of 2 CTAs"));
  df_host_result_free(&res);
  k->comms[send].peer_cta_rank = 0;
  k->comm_count = 0; /* comm ranges now exceed the records */
  expect(k, NULL, DF_HOST_DIAG_INVALID_PLAN, &res);
  assert_true(has(&res, "launch package: packed instruction 1 comm range"));
  df_host_result_free(&res);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void missing_handler(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = ht_pack(p, NULL);
  df_handler_fn *h = ht_handlers(k);
  h[1] = NULL;
  df_host_result res;
  df_status st = df_host_run(k, h, k->handler_count, NULL, 0, 128, NULL, &res);
  assert_int_equal(st.code, DF_EINVAL);
  assert_int_equal(res.diag.kind, DF_HOST_DIAG_MISSING_HANDLER);
  assert_true(has(&res, "needs handler 1 'combine' (dataflow_handler_1_combine), which was not "
                        "provided (4 handler functions given)"));
  df_host_result_free(&res);
  st = df_host_run(k, h, 1, NULL, 0, 128, NULL, &res);
  assert_int_equal(res.diag.kind, DF_HOST_DIAG_MISSING_HANDLER);
  df_host_result_free(&res);
  free(h);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void step_limit(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = ht_pack(p, NULL);
  df_host_options o = df_host_options_default();
  o.max_steps = 5;
  df_host_result res;
  expect(k, &o, DF_HOST_DIAG_STEP_LIMIT, &res);
  assert_int_equal(res.steps, 5);
  assert_true(has(&res, "max_steps = 5"));
  df_host_result_free(&res);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void bad_arguments(void **state) {
  (void)state;
  df_host_result res;
  assert_int_equal(df_host_run(NULL, NULL, 0, NULL, 0, 1, NULL, &res).code, DF_EINVAL);
  df_host_result_free(&res);
  df_plan *p = seed_make_plan();
  df_packed *k = ht_pack(p, NULL);
  df_host_options o = df_host_options_default();
  o.threads = 0;
  df_status st = df_host_run(k, NULL, 0, NULL, 0, 1, &o, &res);
  assert_true(hand_error_has(st, "threads must be in 1..1024, got 0"));
  df_host_result_free(&res);
  o = df_host_options_default();
  o.cost.byte_cycles = -1;
  st = df_host_run(k, NULL, 0, NULL, 0, 1, &o, &res);
  assert_true(hand_error_has(st, "host cost parameter byte_cycles must be finite and >= 0"));
  df_host_result_free(&res);
  assert_int_equal(df_host_run(k, NULL, 2, NULL, 0, 1, NULL, &res).code, DF_EINVAL);
  df_host_result_free(&res);
  assert_int_equal(df_host_run(k, NULL, 0, NULL, 0, 1, NULL, NULL).code, DF_EINVAL);
  df_host_result_free(NULL);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(deadlock_when_a_send_is_removed),
      cmocka_unit_test(deadlock_cycle),
      cmocka_unit_test(gated_push),
      cmocka_unit_test(ack_at_queue_end),
      cmocka_unit_test(cluster_sync),
      cmocka_unit_test(unwritten_read_when_a_transfer_is_deleted),
      cmocka_unit_test(transfer_overwrites_unconsumed_slot),
      cmocka_unit_test(shared_flag_passes_early),
      cmocka_unit_test(hbm_send_overwrites_unread_staging),
      cmocka_unit_test(arena_overflow),
      cmocka_unit_test(handler_writes_outside_the_arena),
      cmocka_unit_test(handler_workspace),
      cmocka_unit_test(phase_mismatch),
      cmocka_unit_test(invalid_records),
      cmocka_unit_test(missing_handler),
      cmocka_unit_test(step_limit),
      cmocka_unit_test(bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
