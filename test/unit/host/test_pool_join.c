/* Joins in the instruction pool (df_schedule_options.pool_join,
   docs/pool.md "Joins"): the receiving items leave the claim order and
   run on the CTA whose producer completes their inputs. Joined plans of
   several placements compute the attention on the host backend bitwise
   as the claimed pool does, each join counter ends at its producer
   count, the layout survives a blob round trip and a length patch; the
   scheduler and df_pack refuse what joins cannot run, and the blob checks
   refuse corrupted joins with the rule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "df/blob.h"
#include "hand_plan.h"
#include "host_test_support.h"
#include "seed_plans.h"

enum { TASKS = 7, BLOCK = 128 };
static const uint32_t KV[TASKS] = {300, 40, 700, 129, 64, 1000, 128};

typedef struct variant {
  uint32_t sms;
  bool balance, defer, skip_unary;
  uint32_t fan_in, reduce_sms;
} variant;

static const variant VARIANTS[] = {
    {4, false, false, false, 0, 0}, {4, true, true, true, 4, 0}, {7, true, false, true, 2, 0},
    {3, false, true, false, 0, 1},  {5, true, true, true, 0, 2}, {1, false, false, true, 3, 0},
};
enum { NVARIANTS = sizeof VARIANTS / sizeof VARIANTS[0] };

static df_plan *schedule(const df_program *prog, const variant *v, bool join) {
  df_schedule_options o = ht_kv_options(v->sms, 1, KV, TASKS, BLOCK);
  o.extent_count = 1;
  o.extents[0] = TASKS;
  o.include_exit = true;
  o.policy = DF_POLICY_ROUND_ROBIN;
  o.strategy = DF_REDUCE_ALL_AT_ONCE;
  o.balance_iters = v->balance;
  o.defer_reduces = v->defer;
  o.skip_unary_reduce = v->skip_unary;
  o.reduce_fan_in = v->fan_in;
  o.reduce_sms = v->reduce_sms;
  o.pool = true;
  o.pool_join = join;
  df_plan *p = NULL;
  df_status st = df_schedule(prog, &o, &p);
  if (st.code != DF_OK)
    fprintf(stderr, "schedule: %s\n", st.message);
  assert_int_equal(st.code, DF_OK);
  assert_int_equal(p->pool_join, join);
  return p;
}

static df_packed *pack(const df_plan *p) {
  df_pack_options po;
  memset(&po, 0, sizeof po);
  po.skip_fingerprint = true;
  return ht_pack(p, &po);
}

static df_pool_desc pool_of(const df_packed *k) {
  df_pool_desc d;
  df_status st = df_packed_pool_find(k, &d);
  if (st.code != DF_OK)
    fprintf(stderr, "%s\n", st.message);
  assert_int_equal(st.code, DF_OK);
  assert_true(d.present);
  return d;
}

static bool item_receives(const df_packed *k, uint32_t pi) {
  const df_abi_instr *r = &k->instrs[pi];
  for (uint32_t j = r->comm_offset; j < r->comm_offset + r->comm_count; j++)
    if (df_comm_kind_is_recv((df_comm_kind)k->comms[j].kind))
      return true;
  return false;
}

/* The record ending item i: its OP_JOIN, or NULL. */
static const df_abi_instr *join_of(const df_packed *k, const df_pool_desc *d, uint32_t i) {
  for (uint32_t m = 0; m < d->stride; m++) {
    const df_abi_instr *r = &k->instrs[d->first + i * d->stride + m];
    if (r->opcode == DF_ABI_OP_JOIN)
      return r;
    if (r->opcode == DF_ABI_OP_EXIT)
      break;
  }
  return NULL;
}

/* Claimed items never receive, joined ones all do; every item but a
   task's last ends with an OP_JOIN to a later joined item, and each
   joined item is joined by as many as they count. */
static void check_layout(const df_packed *k, const df_pool_desc *d) {
  assert_true(d->joined > 0);
  assert_int_equal(df_packed_has_pool_join(k), true);
  uint32_t total = d->items + d->joined, *count = calloc(total, sizeof(uint32_t));
  for (uint32_t i = 0; i < total; i++) {
    assert_int_equal(item_receives(k, d->first + i * d->stride), i >= d->items);
    const df_abi_instr *j = join_of(k, d, i);
    if (!j)
      continue;
    assert_true(j->comm_offset > i && j->comm_offset >= d->items && j->comm_offset < total);
    assert_int_equal(j->slot_id, d->counter + 1 + (j->comm_offset - d->items));
    count[j->comm_offset]++;
  }
  for (uint32_t i = d->items; i < total; i++) {
    assert_true(count[i] > 0);
    for (uint32_t p = 0; p < total; p++) {
      const df_abi_instr *j = join_of(k, d, p);
      if (j && j->comm_offset == i)
        assert_int_equal(j->flags, count[i]);
    }
  }
  free(count);
}

/* The attention rows of two host runs (CTAs in turn; interleaved two steps
   at a time in reverse): both correct, and equal; the claim counter ends
   at the claimed items plus one failed claim per CTA, each join counter at
   its producers. */
static float *run(const df_packed *k, const df_pool_desc *d, const uint32_t *kv) {
  float *first = NULL;
  for (int order = 0; order < 2; order++) {
    df_host_options o = df_host_options_default();
    o.quantum = order ? 2 : 0;
    o.reverse = order == 1;
    float *rows;
    df_host_result res;
    df_status st = ht_run_attention(k, TASKS, BLOCK, &o, &rows, &res);
    if (st.code != DF_OK)
      fprintf(stderr, "%s\n", st.message);
    assert_int_equal(st.code, DF_OK);
    ht_check_attention(rows, kv, TASKS);
    assert_non_null(res.flags);
    assert_int_equal(res.flags[d->counter], d->items + k->topology.sm_count);
    for (uint32_t i = 0; i < d->items + d->joined; i++) {
      const df_abi_instr *j = join_of(k, d, i);
      if (j)
        assert_int_equal(res.flags[j->slot_id], j->flags);
    }
    df_host_result_free(&res);
    if (first) {
      assert_memory_equal(first, rows, sizeof(float) * TASKS * 17);
      free(rows);
    } else {
      first = rows;
    }
  }
  return first;
}

static void joined_pools_compute(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  for (int i = 0; i < NVARIANTS; i++) {
    const variant *v = &VARIANTS[i];
    df_plan *pc = schedule(prog, v, false), *pj = schedule(prog, v, true);
    df_packed *kc = pack(pc), *kj = pack(pj);
    df_pool_desc dc = pool_of(kc), dj = pool_of(kj);
    assert_int_equal(dc.joined, 0);
    assert_false(df_packed_has_pool_join(kc));
    check_layout(kj, &dj);
    assert_int_equal(dj.items + dj.joined, dc.items);
    /* the same items compute the same bits, whoever runs them */
    float *rc = run(kc, &dc, KV), *rj = run(kj, &dj, KV);
    assert_memory_equal(rc, rj, sizeof(float) * TASKS * 17);
    /* a blob round trip keeps the joins, and the checks accept them */
    uint8_t *bytes;
    size_t len;
    assert_int_equal(df_blob_write(kj, NULL, NULL, &bytes, &len).code, DF_OK);
    df_packed *back;
    df_status st = df_blob_read(bytes, len, NULL, &back, NULL);
    if (st.code != DF_OK)
      fprintf(stderr, "%s\n", st.message);
    assert_int_equal(st.code, DF_OK);
    assert_memory_equal(back->instrs, kj->instrs, sizeof(df_abi_instr) * kj->instr_count);
    assert_int_equal(back->launch.flag_count, dj.counter + 1 + dj.joined);
    free(run(back, &dj, KV));
    df_packed_destroy(back);
    free(bytes);
    free(rc);
    free(rj);
    df_packed_destroy(kc);
    df_packed_destroy(kj);
    df_plan_destroy(pc);
    df_plan_destroy(pj);
  }
  df_program_destroy(prog);
}

/* A decode step patches a joined plan as any other: the joins stay, the
   last blocks grow, and it computes the new lengths. */
static void joined_pools_patch(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  df_plan *p = schedule(prog, &VARIANTS[1], true);
  df_packed *k = pack(p);
  uint32_t next[TASKS];
  for (uint32_t t = 0; t < TASKS; t++)
    next[t] = KV[t] % BLOCK ? KV[t] + 1 : KV[t];
  df_patch_result r;
  assert_int_equal(df_packed_patch_lengths(k, next, TASKS, BLOCK, &r).code, DF_OK);
  assert_true(r.patched);
  df_pool_desc d = pool_of(k);
  check_layout(k, &d);
  free(run(k, &d, next));
  df_packed_destroy(k);
  df_plan_destroy(p);
  df_program_destroy(prog);
}

/* pool_join is part of the fingerprint. */
static void join_changes_the_fingerprint(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  df_plan *p = schedule(prog, &VARIANTS[0], true);
  char a[65], b[65];
  assert_int_equal(df_plan_fingerprint(p, a).code, DF_OK);
  p->pool_join = false;
  assert_int_equal(df_plan_fingerprint(p, b).code, DF_OK);
  assert_string_not_equal(a, b);
  df_plan_destroy(p);
  df_program_destroy(prog);
}

static void expect_error(df_status st, const char *what) {
  assert_int_equal(st.code, DF_EINVAL);
  if (!strstr(st.message, what))
    fprintf(stderr, "message: %s\n", st.message);
  assert_non_null(strstr(st.message, what));
}

/* Joins without the pool: the scheduler and df_pack refuse them. A
   producer read by two receiving items cannot join both: df_pack names
   the item and its consumers. */
static void joins_need_a_pool_and_one_consumer(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  df_schedule_options o = ht_kv_options(4, 1, KV, TASKS, BLOCK);
  o.pool_join = true;
  df_plan *p = NULL;
  expect_error(df_schedule(prog, &o, &p), "pool_join needs pool");
  assert_null(p);
  p = schedule(prog, &VARIANTS[0], true);
  p->pool = false;
  df_packed *k = NULL;
  df_pack_options po;
  memset(&po, 0, sizeof po);
  expect_error(df_pack(p, &po, NULL, &k), "pool_join without pool");
  assert_null(k);
  df_plan_destroy(p);
  df_program_destroy(prog);
  /* one map's output received by two maps on other SMs */
  p = hand_plan_new(3, 1, 64);
  uint32_t s0 = hand_slot(p), s1 = hand_slot(p), s2 = hand_slot(p);
  uint32_t a = hand_instr(p, DF_INSTR_MAP, 0, NULL, 0, s0);
  uint32_t b = hand_instr(p, DF_INSTR_MAP, 1, &s0, 1, s1);
  uint32_t c = hand_instr(p, DF_INSTR_MAP, 2, &s0, 1, s2);
  for (uint32_t sm = 0; sm < 3; sm++)
    hand_instr(p, DF_INSTR_EXIT, sm, NULL, 0, DF_SENTINEL);
  hand_transfer(p, false, a, b, s0, s0, 1);
  hand_transfer(p, false, a, c, s0, s0, 1);
  hand_finish(p);
  p->pool = true;
  p->pool_join = true;
  po.layout.hbm_direct_global = true;
  expect_error(df_pack(p, &po, NULL, &k), "a joined pool needs one consumer per item");
  assert_null(k);
  /* the same plan pools without joins */
  p->pool_join = false;
  df_status st = df_pack(p, &po, NULL, &k);
  if (st.code != DF_OK)
    fprintf(stderr, "%s\n", st.message);
  assert_int_equal(st.code, DF_OK);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static df_status write_read(const df_packed *k) {
  uint8_t *bytes;
  size_t len;
  df_status st = df_blob_write(k, NULL, NULL, &bytes, &len);
  if (st.code != DF_OK)
    return st;
  df_packed *back = NULL;
  st = df_blob_read(bytes, len, NULL, &back, NULL);
  df_packed_destroy(back);
  free(bytes);
  return st;
}

static void expect_check_error(const df_packed *k, const char *what) {
  df_status st = write_read(k);
  assert_int_not_equal(st.code, DF_OK);
  if (!strstr(st.message, what))
    fprintf(stderr, "message: %s\n", st.message);
  assert_non_null(strstr(st.message, what));
}

/* The first instruction of the pool that is an OP_JOIN to item t (or any
   when t is S). */
static uint32_t find_join(const df_packed *k, const df_pool_desc *d, uint32_t t) {
  for (uint32_t pi = d->first; pi < k->instr_count; pi++)
    if (k->instrs[pi].opcode == DF_ABI_OP_JOIN &&
        (t == DF_SENTINEL || k->instrs[pi].comm_offset == t))
      return pi;
  fail_msg("no OP_JOIN to item %u", t);
  return 0;
}

/* Corrupted joins fail the blob checks with the rule. */
static void blob_checks_reject_bad_joins(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  df_plan *p = schedule(prog, &VARIANTS[0], true);
  df_packed *k = pack(p);
  df_plan_destroy(p);
  assert_int_equal(write_read(k).code, DF_OK);
  df_pool_desc d = pool_of(k);
  uint32_t j = find_join(k, &d, DF_SENTINEL);
  df_abi_instr saved = k->instrs[j];
  /* not its item's last record */
  ht_swap_instrs(k, j, j - 1);
  expect_check_error(k, "it must follow the item's handler instructions and end it");
  ht_swap_instrs(k, j, j - 1);
  /* naming a claimed item */
  k->instrs[j].comm_offset = 0;
  expect_check_error(k, "it must name a later joined item");
  k->instrs[j] = saved;
  /* another counter */
  k->instrs[j].slot_id = d.counter;
  expect_check_error(k, "the item's counter is flag");
  k->instrs[j] = saved;
  /* a handler */
  k->instrs[j].handler_id = 0;
  expect_check_error(k, "OP_JOIN needs handler_id, arg_offset and task_id S");
  k->instrs[j] = saved;
  /* a count that is not its producers' */
  k->instrs[j].flags++;
  expect_check_error(k, "items join it");
  k->instrs[j] = saved;
  assert_int_equal(write_read(k).code, DF_OK);
  /* a joined item nobody joins: every OP_JOIN to it becomes a pad */
  uint32_t t = saved.comm_offset, n = saved.flags;
  df_abi_instr *kept = malloc(sizeof *kept * n);
  uint32_t *at = malloc(sizeof *at * n);
  for (uint32_t i = 0; i < n; i++) {
    at[i] = find_join(k, &d, t);
    kept[i] = k->instrs[at[i]];
    k->instrs[at[i]] = (df_abi_instr){DF_ABI_OP_EXIT, DF_SENTINEL, DF_SENTINEL, DF_SENTINEL,
                                      0, 0, DF_SENTINEL, 0};
  }
  expect_check_error(k, "is joined by no OP_JOIN; it would never run");
  for (uint32_t i = 0; i < n; i++)
    k->instrs[at[i]] = kept[i];
  free(kept);
  free(at);
  assert_int_equal(write_read(k).code, DF_OK);
  /* a claimed item that receives */
  uint32_t jr = d.first + t * d.stride, recv = DF_SENTINEL;
  for (uint32_t c = k->instrs[jr].comm_offset;
       c < k->instrs[jr].comm_offset + k->instrs[jr].comm_count; c++)
    if (k->comms[c].kind == DF_COMM_HBM_RECV)
      recv = c;
  assert_int_not_equal(recv, DF_SENTINEL);
  df_abi_comm c = k->comms[recv];
  ht_insert_comm(k, d.first, &c);
  df_launch_package l;
  expect_error(df_launch_package_build(k, &l), "in a pool with joins only joined items receive");
  df_packed_destroy(k);
  df_program_destroy(prog);
}

/* A joined item waiting for a flag no producer of it releases: one of
   its producers joins another item instead (counts kept equal). */
static void blob_checks_reject_foreign_inputs(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  df_plan *p = schedule(prog, &VARIANTS[0], true);
  df_packed *k = pack(p);
  df_plan_destroy(p);
  df_pool_desc d = pool_of(k);
  assert_true(d.joined >= 2);
  /* two joined items with producers: move one producer of the first to
     the second and one of the second to the first */
  uint32_t t0 = d.items, t1 = d.items + 1;
  uint32_t a = find_join(k, &d, t0), b = find_join(k, &d, t1);
  df_abi_instr ra = k->instrs[a], rb = k->instrs[b];
  k->instrs[a].comm_offset = t1;
  k->instrs[a].slot_id = rb.slot_id;
  k->instrs[a].flags = rb.flags;
  k->instrs[b].comm_offset = t0;
  k->instrs[b].slot_id = ra.slot_id;
  k->instrs[b].flags = ra.flags;
  expect_check_error(k, "which does not join it");
  df_packed_destroy(k);
  df_program_destroy(prog);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(joined_pools_compute),
      cmocka_unit_test(joined_pools_patch),
      cmocka_unit_test(join_changes_the_fingerprint),
      cmocka_unit_test(joins_need_a_pool_and_one_consumer),
      cmocka_unit_test(blob_checks_reject_bad_joins),
      cmocka_unit_test(blob_checks_reject_foreign_inputs),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
