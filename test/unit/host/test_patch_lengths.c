/* df_packed_patch_lengths (df/plan.h): a decode step's new lengths
   patched into a packed plan. Where no last block outgrows the block, the
   patched round_robin plan is byte for byte the plan a re-plan packs; a
   patched plan of any policy computes the attention of the new lengths on
   the host backend; every refusal leaves the records untouched and says
   why; bad arguments are errors. The two-step form (an index of the last
   blocks, then O(tasks) patches) gives the same blobs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "df/blob.h"
#include "df/fuse.h"
#include "hand_plan.h"
#include "host_test_support.h"
#include "seed_plans.h"

enum { TASKS = 6, BLOCK = 128 };
static const uint32_t KV[TASKS] = {300, 40, 700, 129, 64, 1000};

static df_packed *pack_plain(const df_plan *p) {
  df_pack_options po;
  memset(&po, 0, sizeof po);
  po.skip_fingerprint = true;
  return ht_pack(p, &po);
}

static df_packed *plan_for(const df_program *prog, const uint32_t *kv, int combo) {
  df_plan *p =
      ht_schedule(prog, 2, 1, kv, TASKS, BLOCK, ht_combos[combo].p, ht_combos[combo].s, true);
  df_packed *k = pack_plain(p);
  df_plan_destroy(p);
  return k;
}

static void blob_of(const df_packed *k, uint8_t **bytes, size_t *len) {
  assert_int_equal(df_blob_write(k, NULL, NULL, bytes, len).code, DF_OK);
}

/* The two plans write the same blob bytes. */
static void assert_same_blob(const df_packed *a, const df_packed *b) {
  uint8_t *x, *y;
  size_t lx, ly;
  blob_of(a, &x, &lx);
  blob_of(b, &y, &ly);
  assert_int_equal(lx, ly);
  assert_memory_equal(x, y, lx);
  free(x);
  free(y);
}

static const df_program *program_for(int combo, const df_program *nary, const df_program *assoc) {
  return ht_combos[combo].s == DF_REDUCE_STREAMING_TREE ? assoc : nary;
}

static void run_and_check(const df_packed *k, const uint32_t *kv) {
  df_host_options o = df_host_options_default();
  float *rows;
  df_status st = ht_run_attention(k, TASKS, BLOCK, &o, &rows, NULL);
  if (st.code != DF_OK)
    fprintf(stderr, "%s\n", st.message);
  assert_int_equal(st.code, DF_OK);
  ht_check_attention(rows, kv, TASKS);
  free(rows);
}

/* One token more per task, no block boundary crossed: patched in place,
   every task's last record changed; the round_robin all_at_once plan is
   the re-planned one byte for byte; every policy's patched plan computes
   the new lengths' attention. */
static void decode_step_patches(void **state) {
  (void)state;
  df_program *nary = seed_attention_program(), *assoc = ht_associative_attention_program();
  uint32_t next[TASKS];
  for (uint32_t t = 0; t < TASKS; t++)
    next[t] = KV[t] + 1;
  for (int c = 0; c < HT_COMBOS; c++) {
    const df_program *prog = program_for(c, nary, assoc);
    df_packed *k = plan_for(prog, KV, c);
    df_patch_result r;
    /* streaming ITERs take a task's whole range: no block limit there */
    const uint32_t limit = ht_combos[c].s == DF_REDUCE_ALL_AT_ONCE ? BLOCK : 0;
    assert_int_equal(df_packed_patch_lengths(k, next, TASKS, limit, &r).code, DF_OK);
    assert_true(r.patched);
    assert_int_equal(r.changed, TASKS);
    run_and_check(k, next);
    if (ht_combos[c].p == DF_POLICY_ROUND_ROBIN && ht_combos[c].s == DF_REDUCE_ALL_AT_ONCE) {
      df_packed *fresh = plan_for(prog, next, c);
      assert_same_blob(k, fresh);
      df_packed_destroy(fresh);
    }
    /* The same lengths again: patched, nothing moves. */
    assert_int_equal(df_packed_patch_lengths(k, next, TASKS, limit, &r).code, DF_OK);
    assert_true(r.patched);
    assert_int_equal(r.changed, 0);
    df_packed_destroy(k);
  }
  df_program_destroy(nary);
  df_program_destroy(assoc);
}

/* Without a block limit a last block may grow past the block size and
   shrink back (not below its start): the plan still computes and reads
   back as a blob. */
static void unlimited_growth_computes(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  df_packed *k = plan_for(prog, KV, 0);
  uint32_t grown[TASKS] = {500, 127, 900, 250, 128, 1100};
  df_patch_result r;
  assert_int_equal(df_packed_patch_lengths(k, grown, TASKS, 0, &r).code, DF_OK);
  assert_true(r.patched);
  run_and_check(k, grown);
  /* a patched plan is a valid plan blob */
  uint8_t *bytes;
  size_t len;
  blob_of(k, &bytes, &len);
  df_packed *back;
  df_status st = df_blob_read(bytes, len, NULL, &back, NULL);
  if (st.code != DF_OK)
    fprintf(stderr, "%s\n", st.message);
  assert_int_equal(st.code, DF_OK);
  assert_memory_equal(back->args, k->args, sizeof(df_abi_args) * k->arg_count);
  df_packed_destroy(back);
  free(bytes);
  uint32_t shrunk[TASKS] = {257, 1, 641, 129, 1, 897};
  assert_int_equal(df_packed_patch_lengths(k, shrunk, TASKS, 0, &r).code, DF_OK);
  assert_true(r.patched);
  run_and_check(k, shrunk);
  df_packed_destroy(k);
  df_program_destroy(prog);
}

/* Not patchable: records untouched (the blob is the same bytes), DF_OK,
   patched false and a reason that names the rule. */
static void expect_refused(df_packed *k, const uint32_t *lengths, uint32_t count,
                           uint32_t max_last_block, const char *reason) {
  uint8_t *before, *after;
  size_t lb, la;
  blob_of(k, &before, &lb);
  df_patch_result r;
  df_status st = df_packed_patch_lengths(k, lengths, count, max_last_block, &r);
  assert_int_equal(st.code, DF_OK);
  assert_false(r.patched);
  if (!strstr(r.reason, reason))
    fprintf(stderr, "reason: %s\n", r.reason);
  assert_non_null(strstr(r.reason, reason));
  blob_of(k, &after, &la);
  assert_int_equal(la, lb);
  assert_memory_equal(before, after, la);
  free(before);
  free(after);
}

static void refusals_leave_the_plan(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  df_packed *k = plan_for(prog, KV, 0);
  /* task 0's last block [256, 300) would hold 129 > 128 units */
  uint32_t crossing[TASKS] = {385, 40, 700, 129, 64, 1000};
  expect_refused(k, crossing, TASKS, BLOCK,
                 "task 0's last block would hold 129 range units, more than 128");
  /* task 2's last block starts at 640 */
  uint32_t emptied[TASKS] = {300, 40, 640, 129, 64, 1000};
  expect_refused(k, emptied, TASKS, BLOCK,
                 "task 2's length 640 leaves its last block (from 640) empty");
  df_packed_destroy(k);

  /* tile-count variants (whole blocks; task 0's last block is [128,
     256)): a fixed extent, refused even without a block limit */
  static const uint32_t whole[TASKS] = {256, 40, 700, 129, 64, 1000};
  df_schedule_options o = ht_kv_options(2, 1, whole, TASKS, BLOCK);
  o.extent_count = 1;
  o.extents[0] = TASKS;
  o.include_exit = true;
  assert_int_equal(df_iter_buckets_parse("1,2", &o.buckets).code, DF_OK);
  df_plan *p;
  assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
  k = pack_plain(p);
  uint32_t less[TASKS] = {255, 40, 700, 129, 64, 1000};
  expect_refused(k, less, TASKS, 0, "task 0's last block (instruction");
  expect_refused(k, less, TASKS, 0, ") runs a tile-count variant");
  /* the variant's own length: nothing to refuse */
  df_patch_result r;
  assert_int_equal(df_packed_patch_lengths(k, whole, TASKS, 0, &r).code, DF_OK);
  assert_true(r.patched);
  assert_int_equal(r.changed, 0);
  df_packed_destroy(k);
  df_plan_destroy(p);

  /* a fused ITER (df-fuse joins a one-block task's ITER -> FINALIZE) */
  static const uint32_t one_block[TASKS] = {100, 40, 120, 64, 64, 90};
  p = ht_schedule(prog, 2, 1, one_block, TASKS, BLOCK, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE,
                  true);
  df_fuse_report fr;
  assert_int_equal(df_plan_fuse(p, NULL, &fr).code, DF_OK);
  k = pack_plain(p);
  uint32_t next[TASKS];
  for (uint32_t t = 0; t < TASKS; t++)
    next[t] = one_block[t] + 1;
  expect_refused(k, next, TASKS, BLOCK, "a fused ITER is not patched");
  df_packed_destroy(k);
  df_plan_destroy(p);
  df_program_destroy(prog);

  /* the reshared MoE: two ranged operators */
  p = seed_make_reshared_plan();
  k = pack_plain(p);
  uint32_t moe[2] = {256, 256};
  expect_refused(k, moe, 2, 0, "only plans with one ranged operator are patched");
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* The two steps (df_packed_last_blocks once, df_packed_patch_lengths_at
   per step) give the blob df_packed_patch_lengths gives, step after
   step; the index survives its own patches; a structural refusal comes
   from the index; an index entry that is not an ITER is an error. */
static void indexed_patch_matches(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  df_packed *a = plan_for(prog, KV, 0), *b = plan_for(prog, KV, 0);
  uint32_t last[TASKS];
  df_patch_result r;
  assert_int_equal(df_packed_last_blocks(a, TASKS, last, &r).code, DF_OK);
  assert_true(r.patched);
  uint32_t lens[TASKS];
  memcpy(lens, KV, sizeof lens);
  for (int step = 0; step < 3; step++) {
    for (uint32_t t = 0; t < TASKS; t++)
      lens[t] += 7;
    df_patch_result ra, rb;
    assert_int_equal(df_packed_patch_lengths_at(a, last, lens, TASKS, 0, &ra).code, DF_OK);
    assert_int_equal(df_packed_patch_lengths(b, lens, TASKS, 0, &rb).code, DF_OK);
    assert_true(ra.patched && rb.patched);
    assert_int_equal(ra.changed, rb.changed);
    assert_same_blob(a, b);
  }
  run_and_check(a, lens);
  /* the same refusal as the one-step call, records untouched */
  uint32_t crossing[TASKS];
  memcpy(crossing, lens, sizeof crossing);
  crossing[0] = 385;
  assert_int_equal(df_packed_patch_lengths_at(a, last, crossing, TASKS, BLOCK, &r).code, DF_OK);
  assert_false(r.patched);
  assert_non_null(strstr(r.reason, "task 0's last block would hold"));
  uint32_t bad[TASKS];
  memcpy(bad, last, sizeof bad);
  bad[2] = a->instr_count;
  df_status st = df_packed_patch_lengths_at(a, bad, lens, TASKS, 0, &r);
  assert_int_equal(st.code, DF_EINVAL);
  assert_true(hand_error_has(st, "last-block index"));
  for (uint32_t i = 0; i < a->instr_count; i++)
    if (a->instrs[i].opcode != DF_ABI_OP_ITER) {
      bad[2] = i;
      break;
    }
  assert_int_equal(df_packed_patch_lengths_at(a, bad, lens, TASKS, 0, &r).code, DF_EINVAL);
  df_packed_destroy(a);
  df_packed_destroy(b);
  df_program_destroy(prog);
  /* a plan with two ranged operators is refused by the index */
  df_plan *p = seed_make_reshared_plan();
  df_packed *k = pack_plain(p);
  uint32_t moe_last[2];
  assert_int_equal(df_packed_last_blocks(k, 2, moe_last, &r).code, DF_OK);
  assert_false(r.patched);
  assert_non_null(strstr(r.reason, "only plans with one ranged operator are patched"));
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void bad_arguments(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  df_packed *k = plan_for(prog, KV, 0);
  df_patch_result r;
  assert_int_equal(df_packed_patch_lengths(NULL, KV, TASKS, 0, &r).code, DF_EINVAL);
  assert_int_equal(df_packed_patch_lengths(k, NULL, TASKS, 0, &r).code, DF_EINVAL);
  assert_int_equal(df_packed_patch_lengths(k, KV, TASKS, 0, NULL).code, DF_EINVAL);
  df_status st = df_packed_patch_lengths(k, KV, 0, 0, &r);
  assert_int_equal(st.code, DF_EINVAL);
  assert_true(hand_error_has(st, "no lengths"));
  uint32_t zero[TASKS] = {300, 0, 700, 129, 64, 1000};
  st = df_packed_patch_lengths(k, zero, TASKS, 0, &r);
  assert_int_equal(st.code, DF_EINVAL);
  assert_true(hand_error_has(st, "length 0 of task 1 must be positive"));
  st = df_packed_patch_lengths(k, KV, TASKS - 1, 0, &r);
  assert_int_equal(st.code, DF_EINVAL);
  assert_true(hand_error_has(st, "runs task 5, but 5 lengths were given"));
  uint32_t more[TASKS + 1] = {300, 40, 700, 129, 64, 1000, 50};
  st = df_packed_patch_lengths(k, more, TASKS + 1, 0, &r);
  assert_int_equal(st.code, DF_EINVAL);
  assert_true(hand_error_has(st, "task 6 has no ranged ITER"));
  assert_false(r.patched);
  uint32_t last[TASKS];
  assert_int_equal(df_packed_last_blocks(NULL, TASKS, last, &r).code, DF_EINVAL);
  assert_int_equal(df_packed_last_blocks(k, 0, last, &r).code, DF_EINVAL);
  assert_int_equal(df_packed_patch_lengths_at(k, NULL, KV, TASKS, 0, &r).code, DF_EINVAL);
  assert_int_equal(df_packed_last_blocks(k, TASKS, last, &r).code, DF_OK);
  st = df_packed_patch_lengths_at(k, last, zero, TASKS, 0, &r);
  assert_true(hand_error_has(st, "length 0 of task 1 must be positive"));
  df_packed_destroy(k);
  df_program_destroy(prog);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(decode_step_patches),
      cmocka_unit_test(unlimited_growth_computes),
      cmocka_unit_test(refusals_leave_the_plan),
      cmocka_unit_test(indexed_patch_matches),
      cmocka_unit_test(bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
