/* The instruction pool (df_schedule_options.pool, docs/pool.md): pooled
   plans of several placements compute the attention on the host backend,
   whose CTAs claim the items from the shared counter as the device does;
   the pool's layout (OP_POOL first in every queue, items in a
   topological claim order, one-block tasks' FINALIZE inside their item)
   survives a blob round trip; plans that break a pool rule are refused
   by df_pack with the rule, and corrupted pools by the blob checks. */
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

enum { TASKS = 7, BLOCK = 128 };
static const uint32_t KV[TASKS] = {300, 40, 700, 129, 64, 1000, 128};

typedef struct variant {
  uint32_t sms, cluster;
  bool balance, defer, skip_unary, direct;
  uint32_t fan_in, reduce_sms;
} variant;

static const variant VARIANTS[] = {
    {4, 1, false, false, false, false, 0, 0}, {4, 2, true, true, true, true, 4, 0},
    {7, 1, true, false, true, false, 2, 0},   {3, 1, false, true, false, true, 0, 1},
    {5, 1, true, true, true, true, 0, 2},     {1, 1, false, false, true, false, 3, 0},
};
enum { NVARIANTS = sizeof VARIANTS / sizeof VARIANTS[0] };

/* Options over the test's lengths on `sms` CTAs: one task per length. */
static df_schedule_options kv_options(uint32_t sms, uint32_t cluster) {
  df_schedule_options o = ht_kv_options(sms, cluster, KV, TASKS, BLOCK);
  o.extent_count = 1;
  o.extents[0] = TASKS;
  o.include_exit = true;
  return o;
}

static df_plan *schedule_ok(const df_program *prog, const df_schedule_options *o) {
  df_plan *p = NULL;
  df_status st = df_schedule(prog, o, &p);
  if (st.code != DF_OK)
    fprintf(stderr, "schedule: %s\n", st.message);
  assert_int_equal(st.code, DF_OK);
  return p;
}

static df_plan *schedule(const df_program *prog, const variant *v, bool pool) {
  df_schedule_options o = kv_options(v->sms, v->cluster);
  o.policy = DF_POLICY_ROUND_ROBIN;
  o.strategy = DF_REDUCE_ALL_AT_ONCE;
  o.balance_iters = v->balance;
  o.defer_reduces = v->defer;
  o.skip_unary_reduce = v->skip_unary;
  o.reduce_fan_in = v->fan_in;
  o.reduce_sms = v->reduce_sms;
  o.pool = pool;
  return schedule_ok(prog, &o);
}

static df_pack_options pack_options(const variant *v) {
  df_pack_options po;
  memset(&po, 0, sizeof po);
  po.skip_fingerprint = true;
  po.layout.hbm_direct_global = v->direct;
  return po;
}

static df_pool_desc pool_of(const df_packed *k) {
  df_pool_desc d;
  assert_int_equal(df_packed_pool_find(k, &d).code, DF_OK);
  return d;
}

static const df_abi_args *args_at(const df_packed *k, uint32_t pi) {
  return &k->args[k->instrs[pi].arg_offset / sizeof(df_abi_args)];
}

/* Every queue is OP_POOL (and its EXIT); the items come in a topological
   order that starts with a full block of a task that still needs a
   reduce (the longest chain); each one-block task's ITER carries its
   FINALIZE when skip_unary_reduce leaves one, and every other FINALIZE
   rides with its REDUCE. */
static void check_layout(const df_packed *k, const variant *v) {
  df_pool_desc d = pool_of(k);
  assert_true(d.present);
  for (uint32_t q = 0; q < k->topology.sm_count; q++) {
    assert_int_equal(k->instrs[k->queue_offsets[q]].opcode, DF_ABI_OP_POOL);
    for (uint32_t p = 1; p < k->queue_lengths[q]; p++)
      assert_int_equal(k->instrs[k->queue_offsets[q] + p].opcode, DF_ABI_OP_EXIT);
  }
  const df_abi_args *a0 = args_at(k, d.first);
  assert_int_equal(k->instrs[d.first].opcode, DF_ABI_OP_ITER);
  assert_int_equal(a0->range_end - a0->range_begin, BLOCK);
  assert_true(KV[a0->task_id] > BLOCK);
  uint32_t *writer = malloc(sizeof(uint32_t) * k->slot_count);
  memset(writer, 0xFF, sizeof(uint32_t) * k->slot_count);
  uint32_t iters = 0, with_finalize = 0, reduces = 0;
  for (uint32_t i = 0; i < d.items; i++) {
    uint32_t pi = d.first + i * d.stride;
    uint32_t op = k->instrs[pi].opcode;
    if (op == DF_ABI_OP_ITER) {
      iters++;
      if (d.stride > 1 && k->instrs[pi + 1].opcode == DF_ABI_OP_FINALIZE)
        with_finalize++;
    } else {
      assert_int_equal(op, DF_ABI_OP_REDUCE);
      reduces++;
    }
    /* an item reads what earlier items wrote, or its own members */
    for (uint32_t m = 0; m < d.stride && k->instrs[pi + m].opcode != DF_ABI_OP_EXIT; m++) {
      const df_abi_args *a = args_at(k, pi + m);
      for (uint32_t j = 0; j < a->input_slot_count; j++) {
        uint32_t w = writer[k->input_slots[a->input_slot_offset + j]];
        assert_true(w == i || (w != UINT32_MAX && w < i));
      }
      if (a->output_slot != DF_SENTINEL)
        writer[a->output_slot] = i;
    }
  }
  free(writer);
  uint32_t blocks = 0, one_block = 0;
  for (uint32_t t = 0; t < TASKS; t++) {
    blocks += (KV[t] + BLOCK - 1) / BLOCK;
    one_block += KV[t] <= BLOCK;
  }
  assert_int_equal(iters, blocks);
  assert_int_equal(with_finalize, v->skip_unary ? one_block : 0);
  assert_true(reduces >= TASKS - (v->skip_unary ? one_block : 0));
}

/* Runs the plan twice: CTAs in turn as far as each can go, and
   interleaved two steps at a time in reverse order, where the items
   spread over the CTAs (the CTAs that ran pool items are counted). */
static void run_lengths(const df_packed *k, const df_pool_desc *d, const uint32_t *kv) {
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
    /* every CTA claimed until one claim found the pool empty */
    assert_non_null(res.flags);
    assert_int_equal(res.flags[d->counter], d->items + k->topology.sm_count);
    uint32_t ran = 0, seen = 0;
    for (uint64_t i = 0; i < res.op_count; i++) {
      const df_host_op *op = &res.ops[i];
      if (op->kind == DF_HOST_OP_INSTR && op->instr >= d->first && !(seen >> op->cta & 1u)) {
        seen |= 1u << op->cta;
        ran++;
      }
    }
    if (order && d->items > 1 && k->topology.sm_count > 1)
      assert_true(ran > 1);
    free(rows);
    df_host_result_free(&res);
  }
}

static void run_and_check(const df_packed *k, const df_pool_desc *d) { run_lengths(k, d, KV); }

/* A decode step patches a pooled plan as any other (df/plan.h): the
   items keep their order, the last blocks grow, and it computes the new
   lengths. */
static void pooled_plans_patch(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  const variant *v = &VARIANTS[1];
  df_plan *p = schedule(prog, v, true);
  df_pack_options po = pack_options(v);
  df_packed *k = ht_pack(p, &po);
  uint32_t next[TASKS];
  for (uint32_t t = 0; t < TASKS; t++)
    next[t] = KV[t] % BLOCK ? KV[t] + 1 : KV[t];
  df_patch_result r;
  assert_int_equal(df_packed_patch_lengths(k, next, TASKS, BLOCK, &r).code, DF_OK);
  assert_true(r.patched);
  df_pool_desc d = pool_of(k);
  run_lengths(k, &d, next);
  df_packed_destroy(k);
  df_plan_destroy(p);
  df_program_destroy(prog);
}

static void pooled_plans_compute(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  for (int i = 0; i < NVARIANTS; i++) {
    const variant *v = &VARIANTS[i];
    df_plan *p = schedule(prog, v, true);
    assert_true(p->pool);
    for (uint32_t c = 0; c < p->comm_count; c++)
      assert_false(df_comm_kind_is_cluster(p->comms[c].kind));
    df_pack_options po = pack_options(v);
    df_packed *k = ht_pack(p, &po);
    check_layout(k, v);
    df_pool_desc d = pool_of(k);
    run_and_check(k, &d);
    /* a blob round trip keeps the pool, and the checks accept it */
    uint8_t *bytes;
    size_t len;
    assert_int_equal(df_blob_write(k, NULL, NULL, &bytes, &len).code, DF_OK);
    df_packed *back;
    df_status st = df_blob_read(bytes, len, NULL, &back, NULL);
    if (st.code != DF_OK)
      fprintf(stderr, "%s\n", st.message);
    assert_int_equal(st.code, DF_OK);
    assert_int_equal(back->instr_count, k->instr_count);
    assert_memory_equal(back->instrs, k->instrs, sizeof(df_abi_instr) * k->instr_count);
    run_and_check(back, &d);
    df_packed_destroy(back);
    free(bytes);
    df_packed_destroy(k);
    df_plan_destroy(p);
  }
  df_program_destroy(prog);
}

/* The pool is part of the fingerprint: the same records without it hash
   differently, and a clone keeps it. */
static void pool_changes_the_fingerprint(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  df_plan *a = schedule(prog, &VARIANTS[1], true);
  df_plan *c;
  assert_int_equal(df_plan_clone(a, &c).code, DF_OK);
  assert_true(c->pool);
  char fa[65], fc[65];
  assert_int_equal(df_plan_fingerprint(a, fa).code, DF_OK);
  assert_int_equal(df_plan_fingerprint(c, fc).code, DF_OK);
  assert_string_equal(fa, fc);
  c->pool = false;
  assert_int_equal(df_plan_fingerprint(c, fc).code, DF_OK);
  assert_string_not_equal(fa, fc);
  df_plan_destroy(a);
  df_plan_destroy(c);
  df_program_destroy(prog);
}

static void expect_pack_error(const df_plan *p, const df_pack_options *po, const char *what) {
  df_packed *k = NULL;
  df_status st = df_pack(p, po, NULL, &k);
  assert_int_equal(st.code, DF_EINVAL);
  if (!strstr(st.message, what))
    fprintf(stderr, "message: %s\n", st.message);
  assert_non_null(strstr(st.message, what));
  assert_null(k);
}

/* Plans that break a pool rule: df_pack names the rule. */
static void pack_refuses_unpoolable_plans(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  /* scheduled without the pool: a REDUCE reads its own SM's partial with
     no receive, and cluster pairs push partials */
  variant v = {4, 1, false, false, false, false, 0, 0};
  df_plan *p = schedule(prog, &v, false);
  p->pool = true;
  df_pack_options po = pack_options(&v);
  expect_pack_error(p, &po, "without an HBM receive");
  df_plan_destroy(p);
  v.cluster = 2;
  p = schedule(prog, &v, false);
  p->pool = true;
  expect_pack_error(p, &po, "cluster transfer");
  df_plan_destroy(p);
  /* one flag shared by every transfer */
  v.cluster = 1;
  p = schedule(prog, &v, true);
  po.layout.reuse_hbm_flags = true;
  expect_pack_error(p, &po, "flag per transfer");
  df_plan_destroy(p);
  df_program_destroy(prog);
  /* an instruction without a handler (a cluster barrier) */
  p = hand_plan_new(2, 1, 64);
  uint32_t out = hand_slot(p);
  hand_instr(p, DF_INSTR_MAP, 0, NULL, 0, out);
  hand_instr(p, DF_INSTR_CLUSTER_SYNC, 1, NULL, 0, DF_SENTINEL);
  hand_finish(p);
  p->pool = true;
  df_pack_options plain;
  memset(&plain, 0, sizeof plain);
  expect_pack_error(p, &plain, "runs no handler");
  df_plan_destroy(p);
  /* a reader of a fused record's last part without a receive, fused or
     not: every part's output belongs to its item */
  for (int fuse = 0; fuse < 2; fuse++) {
    p = hand_plan_new(2, 1, 64);
    uint32_t s0 = hand_slot(p), s1 = hand_slot(p), s2 = hand_slot(p);
    hand_instr(p, DF_INSTR_MAP, 0, NULL, 0, s0);
    uint32_t i1 = hand_instr(p, DF_INSTR_MAP, 0, &s0, 1, s1);
    hand_instr(p, DF_INSTR_MAP, 0, &s1, 1, s2);
    for (uint32_t sm = 0; sm < 2; sm++)
      hand_instr(p, DF_INSTR_EXIT, sm, NULL, 0, DF_SENTINEL);
    hand_finish(p);
    p->instrs[i1].fused = fuse;
    p->pool = true;
    expect_pack_error(p, &plain, "without an HBM receive");
    df_plan_destroy(p);
  }
}

/* A fused plan pools too: each fused record (here one-block tasks' ITER
   -> FINALIZE and REDUCE -> FINALIZE composites) is one item, and the
   host backend runs the composites' parts. */
static void fused_plans_pool(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  variant v = {4, 1, true, true, true, true, 0, 0};
  df_plan *p = schedule(prog, &v, true);
  df_fuse_options fo = {0, false};
  df_fuse_report fr;
  assert_int_equal(df_plan_fuse(p, &fo, &fr).code, DF_OK);
  assert_true(fr.groups > 0);
  df_pack_options po = pack_options(&v);
  df_packed *k = ht_pack(p, &po);
  df_pool_desc d = pool_of(k);
  assert_true(d.present);
  run_and_check(k, &d);
  df_packed_destroy(k);
  df_plan_destroy(p);
  df_program_destroy(prog);
}

/* pool needs round_robin all_at_once without even_split and a
   partial/reduce program. */
static void schedule_refuses_other_placements(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  df_schedule_options o = ht_kv_options(4, 1, KV, TASKS, BLOCK);
  o.pool = true;
  struct {
    df_policy p;
    df_reduce_strategy s;
    bool autosplit;
    const char *what;
  } bad[] = {
      {DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_ALL_AT_ONCE, false, "'round_robin'"},
      {DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING, false, "'all_at_once'"},
      {DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE, true, "with block-size=auto"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    o.policy = bad[i].p;
    o.strategy = bad[i].s;
    o.auto_split = bad[i].autosplit;
    o.split = df_split_search_default();
    df_plan *p = NULL;
    df_status st = df_schedule(prog, &o, &p);
    assert_int_equal(st.code, DF_EINVAL);
    if (!strstr(st.message, "pool"))
      fprintf(stderr, "message: %s\n", st.message);
    assert_non_null(strstr(st.message, "pool"));
    if (!strstr(st.message, bad[i].what))
      fprintf(stderr, "message: %s\n", st.message);
    assert_non_null(strstr(st.message, bad[i].what));
    assert_null(p);
  }
  df_program_destroy(prog);
}

/* Even-split pieces pool too, tapered or not: a stream-K split's pieces
   and tapered batches (long pieces claimed first) compute the attention
   on the host backend, and the first claimed ITER is a longest one. The
   taper's batches add at least a batch of pieces. */
static void even_split_pools(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  uint32_t pieces[2][6] = {{0}};
  for (int taper = 0; taper < 2; taper++)
    for (uint32_t sms = 2; sms <= 5; sms += 3) {
      df_schedule_options o = kv_options(sms, 1);
      o.pool = true;
      o.even_split = true;
      o.even_split_granularity = 16;
      o.even_split_taper = taper ? 60 : 0;
      o.even_split_taper_min = taper ? 32 : 0;
      o.reduce_fan_in = 3;
      o.skip_unary_reduce = true;
      df_plan *p = schedule_ok(prog, &o);
      df_pack_options po;
      memset(&po, 0, sizeof po);
      po.skip_fingerprint = true;
      df_packed *k = ht_pack(p, &po);
      df_pool_desc d = pool_of(k);
      uint32_t longest = 0, sizes = 0, last = 0;
      for (uint32_t i = 0; i < d.items; i++) {
        const df_abi_args *a = args_at(k, d.first + i * d.stride);
        uint32_t len = a->range_end - a->range_begin;
        longest = len > longest ? len : longest;
        sizes += len != last;
        last = len;
      }
      const df_abi_args *a0 = args_at(k, d.first);
      assert_int_equal(a0->range_end - a0->range_begin, longest);
      assert_true(sizes > 1);
      for (uint32_t i = 0; i < d.items; i++)
        pieces[taper][sms] += k->instrs[d.first + i * d.stride].opcode == DF_ABI_OP_ITER;
      if (taper)
        assert_true(pieces[1][sms] >= pieces[0][sms] + sms);
      run_and_check(k, &d);
      df_packed_destroy(k);
      df_plan_destroy(p);
    }
  df_program_destroy(prog);
}

static df_packed *pooled(const df_program *prog) {
  variant v = {4, 1, true, true, true, true, 0, 0};
  df_plan *p = schedule(prog, &v, true);
  df_pack_options po = pack_options(&v);
  df_packed *k = ht_pack(p, &po);
  df_plan_destroy(p);
  return k;
}

/* Written (when the writer accepts the records) and read back: one of
   the two names the rule. */
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

/* Corrupted pools fail the blob checks with the rule. */
static void blob_checks_reject_bad_pools(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  df_packed *k = pooled(prog);
  assert_int_equal(write_read(k).code, DF_OK);
  df_pool_desc d = pool_of(k);
  df_abi_instr saved;
  /* OP_POOL not first in its queue */
  uint32_t q1 = k->queue_offsets[1];
  ht_swap_instrs(k, q1, q1 + 1);
  expect_check_error(k, "it must come first");
  ht_swap_instrs(k, q1, q1 + 1);
  /* queues disagree */
  k->instrs[q1].flags++;
  expect_check_error(k, "differs");
  k->instrs[q1].flags--;
  /* a queue without OP_POOL */
  saved = k->instrs[q1];
  k->instrs[q1] = (df_abi_instr){DF_ABI_OP_EXIT, DF_SENTINEL, DF_SENTINEL, DF_SENTINEL,
                                 0, 0, DF_SENTINEL, 0};
  expect_check_error(k, "all or none");
  k->instrs[q1] = saved;
  /* a region that does not fill the rest */
  for (uint32_t q = 0; q < k->topology.sm_count; q++)
    k->instrs[k->queue_offsets[q]].flags = d.items - 1;
  expect_check_error(k, "fill the rest");
  for (uint32_t q = 0; q < k->topology.sm_count; q++)
    k->instrs[k->queue_offsets[q]].flags = d.items;
  /* a counter past the data flags' end, or one of them: a claim would
     move a data flag's epoch */
  uint32_t counters[2] = {k->launch.flag_count, 0};
  for (int i = 0; i < 2; i++) {
    for (uint32_t q = 0; q < k->topology.sm_count; q++)
      k->instrs[k->queue_offsets[q]].slot_id = counters[i];
    expect_check_error(k, "the counter must be the flag after the plan's data flags");
  }
  for (uint32_t q = 0; q < k->topology.sm_count; q++)
    k->instrs[k->queue_offsets[q]].slot_id = d.counter;
  /* a later queue's OP_POOL with comms (only the first was checked) */
  k->instrs[q1].comm_count = 1;
  expect_check_error(k, "OP_POOL needs handler_id and arg_offset S and no comms");
  k->instrs[q1].comm_count = 0;
  /* a pool instruction whose comm range leaves the comms */
  uint32_t off = k->instrs[d.first].comm_offset;
  k->instrs[d.first].comm_offset = k->comm_count;
  expect_check_error(k, "exceeds");
  k->instrs[d.first].comm_offset = off;
  /* an empty item */
  saved = k->instrs[d.first];
  k->instrs[d.first] = (df_abi_instr){DF_ABI_OP_EXIT, DF_SENTINEL, DF_SENTINEL, DF_SENTINEL,
                                      0, 0, DF_SENTINEL, 0};
  expect_check_error(k, "is empty");
  k->instrs[d.first] = saved;
  assert_int_equal(write_read(k).code, DF_OK);
  /* a pooled instruction that waits for a bulk receive */
  df_abi_comm c = k->comms[0];
  c.kind = DF_COMM_HBM_RECV_WAIT;
  ht_insert_comm(k, d.first, &c);
  df_launch_package l;
  df_status st = df_launch_package_build(k, &l);
  assert_int_equal(st.code, DF_EINVAL);
  if (!strstr(st.message, "must be an HBM receive of a direct-global slot"))
    fprintf(stderr, "message: %s\n", st.message);
  assert_non_null(strstr(st.message, "must be an HBM receive of a direct-global slot"));
  df_packed_destroy(k);
  df_program_destroy(prog);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pooled_plans_compute),
      cmocka_unit_test(pooled_plans_patch),
      cmocka_unit_test(pool_changes_the_fingerprint),
      cmocka_unit_test(pack_refuses_unpoolable_plans),
      cmocka_unit_test(fused_plans_pool),
      cmocka_unit_test(schedule_refuses_other_placements),
      cmocka_unit_test(even_split_pools),
      cmocka_unit_test(blob_checks_reject_bad_pools),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
