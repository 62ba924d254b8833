/* Scheduling: the worked seed derivations of REFERENCE 2.8-2.10, the
   streaming strategies, handler attachment and every option error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "seed_plans.h"

#define S DF_SENTINEL
#define N(a) (sizeof(a) / sizeof((a)[0]))

typedef struct want_instr {
  df_instr_op op;
  uint32_t task, sm;
  uint32_t b, e; /* 0/0 and no range when e == 0 */
  uint32_t n_in;
  uint32_t in[4];
  uint32_t out;
} want_instr;

static void check_instrs(const df_plan *p, const want_instr *w, uint32_t n) {
  assert_int_equal(p->instr_count, n);
  for (uint32_t i = 0; i < n; i++) {
    const df_instr *in = &p->instrs[i];
    char what[64];
    snprintf(what, sizeof what, "instruction %u", i);
    if (in->op != w[i].op || in->task != w[i].task || in->sm != w[i].sm ||
        in->has_range != (w[i].e != 0) || in->range_begin != w[i].b ||
        in->range_end != w[i].e || in->input_count != w[i].n_in ||
        in->output_slot != w[i].out) {
      print_error("%s: got op %s task %u sm %u range %d %u-%u inputs %u out %u\n", what,
                  df_instr_op_name(in->op), in->task, in->sm, in->has_range, in->range_begin,
                  in->range_end, in->input_count, in->output_slot);
      fail();
    }
    for (uint32_t k = 0; k < w[i].n_in; k++)
      assert_int_equal(df_plan_instr_inputs(p, in)[k], w[i].in[k]);
  }
}

typedef struct want_comm {
  df_comm_kind kind;
  uint32_t src_instr, dst_instr, src_slot, dst_slot, producer, consumer, peer, epoch;
} want_comm;

static void check_comms(const df_plan *p, const want_comm *w, uint32_t n) {
  assert_int_equal(p->comm_count, n);
  for (uint32_t i = 0; i < n; i++) {
    const df_comm *c = &p->comms[i];
    if (c->kind != w[i].kind || c->src_instr != w[i].src_instr ||
        c->dst_instr != w[i].dst_instr || c->src_slot != w[i].src_slot ||
        c->dst_slot != w[i].dst_slot || c->producer_sm != w[i].producer ||
        c->consumer_sm != w[i].consumer || c->peer_cta_rank != w[i].peer ||
        c->flag_epoch != w[i].epoch) {
      print_error("comm %u: got %s I%u->I%u s%u->s%u sm %u->%u peer %u epoch %u\n", i,
                  df_comm_kind_name(c->kind), c->src_instr, c->dst_instr, c->src_slot,
                  c->dst_slot, c->producer_sm, c->consumer_sm, c->peer_cta_rank,
                  c->flag_epoch);
      fail();
    }
    assert_int_equal(c->dispatch_instr, S);
    assert_int_equal(c->barrier_phase, 0);
    assert_int_equal(c->byte_offset, 0);
    assert_int_equal(c->byte_count, 0);
    assert_int_equal(c->segment_id, 0);
    assert_int_equal(c->segment_count, 1);
  }
}

static void check_queues(const df_plan *p, const uint32_t *offsets, const uint32_t *lengths,
                         const uint32_t *ids, uint32_t n) {
  for (uint32_t s = 0; s < p->topology.sm_count; s++) {
    assert_int_equal(p->queue_offsets[s], offsets[s]);
    assert_int_equal(p->queue_lengths[s], lengths[s]);
  }
  assert_int_equal(p->queue_id_count, n);
  for (uint32_t i = 0; i < n; i++)
    assert_int_equal(p->queue_ids[i], ids[i]);
}

/* ---- REFERENCE 2.8: make_plan ------------------------------------------------- */

static void make_plan_instructions(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  static const want_instr w[] = {
      {DF_INSTR_ITER, 0, 0, 0, 128, 0, {0}, 0},
      {DF_INSTR_ITER, 0, 1, 128, 256, 0, {0}, 1},
      {DF_INSTR_ITER, 0, 2, 256, 384, 0, {0}, 2},
      {DF_INSTR_REDUCE, 0, 0, 0, 0, 3, {0, 1, 2}, 3},
      {DF_INSTR_FINALIZE, 0, 0, 0, 0, 1, {3}, S},
      {DF_INSTR_ITER, 1, 3, 0, 128, 0, {0}, 4},
      {DF_INSTR_ITER, 1, 0, 128, 256, 0, {0}, 5},
      {DF_INSTR_REDUCE, 1, 3, 0, 0, 2, {4, 5}, 6},
      {DF_INSTR_FINALIZE, 1, 3, 0, 0, 1, {6}, S},
      {DF_INSTR_EXIT, S, 0, 0, 0, 0, {0}, S},
      {DF_INSTR_EXIT, S, 1, 0, 0, 0, {0}, S},
      {DF_INSTR_EXIT, S, 2, 0, 0, 0, {0}, S},
      {DF_INSTR_EXIT, S, 3, 0, 0, 0, {0}, S},
  };
  check_instrs(p, w, N(w));
  /* stages: partial 0, reduce 1, finalize 2; EXIT none */
  static const int32_t stages[] = {0, 0, 0, 1, 2, 0, 0, 1, 2, -1, -1, -1, -1};
  for (uint32_t i = 0; i < N(stages); i++)
    assert_int_equal(p->instrs[i].stage, stages[i]);
  assert_int_equal(p->policy, DF_POLICY_ROUND_ROBIN);
  assert_int_equal(p->strategy, DF_REDUCE_ALL_AT_ONCE);
  assert_int_equal(p->block_size, 128);
  assert_string_equal(p->range_axis, "kv");
  assert_int_equal(p->task_count, 2);
  assert_int_equal(p->task_lengths[0], 384);
  assert_int_equal(p->task_lengths[1], 256);
  assert_int_equal(p->extent_count, 1);
  assert_int_equal(p->extents[0], 2);
  df_plan_destroy(p);
}

static void make_plan_slots(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  assert_int_equal(p->slot_count, 7);
  static const df_slot_role roles[] = {DF_ROLE_PARTIAL, DF_ROLE_PARTIAL, DF_ROLE_PARTIAL,
                                       DF_ROLE_REDUCED, DF_ROLE_PARTIAL, DF_ROLE_PARTIAL,
                                       DF_ROLE_REDUCED};
  static const uint32_t tasks[] = {0, 0, 0, 0, 1, 1, 1};
  static const uint32_t producers[] = {0, 1, 2, 3, 5, 6, 7};
  for (uint32_t i = 0; i < 7; i++) {
    const df_slot *s = &p->slots[i];
    assert_int_equal(s->id, i);
    assert_int_equal(s->role, roles[i]);
    assert_int_equal(s->task, tasks[i]);
    assert_int_equal(s->producer, producers[i]);
    assert_int_equal(s->type, 0);
    assert_int_equal(s->stage, -1);
    assert_int_equal(s->shared_storage, S);
    assert_int_equal(s->global_storage, S);
    assert_int_equal(s->owner, S);
    assert_false(s->private_shared || s->scratch_backed || s->gated);
  }
  assert_int_equal(p->type_count, 1);
  assert_string_equal(p->types[0].name, "AttnInter");
  assert_int_equal(p->types[0].bytes, 48);
  assert_int_equal(p->stage_count, 3);
  assert_string_equal(p->stages[0].name, "partial");
  assert_string_equal(p->stages[0].op_name, "split_kv");
  assert_int_equal(p->stages[0].op_kind, DF_OPK_ITER);
  assert_string_equal(p->stages[1].op_name, "combine");
  assert_int_equal(p->stages[2].kind, DF_STAGE_FINALIZE);
  df_plan_destroy(p);
}

static void make_plan_comms_and_queues(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  static const want_comm w[] = {
      {DF_COMM_CLUSTER_SEND, 1, 3, 1, 1, 1, 0, 0, 1},
      {DF_COMM_CLUSTER_RECV, 1, 3, 1, 1, 1, 0, 1, 1},
      {DF_COMM_HBM_SEND, 2, 3, 2, 2, 2, 0, S, 1},
      {DF_COMM_HBM_RECV, 2, 3, 2, 2, 2, 0, S, 1},
      {DF_COMM_HBM_SEND, 6, 7, 5, 5, 0, 3, S, 2},
      {DF_COMM_HBM_RECV, 6, 7, 5, 5, 0, 3, S, 2},
  };
  check_comms(p, w, N(w));
  static const uint32_t off[] = {0, 5, 7, 9}, len[] = {5, 2, 2, 4};
  static const uint32_t ids[] = {0, 3, 4, 6, 9, 1, 10, 2, 11, 5, 7, 8, 12};
  check_queues(p, off, len, ids, N(ids));
  df_plan_destroy(p);
}

/* Default options with SMS SMs in clusters of CS, blocks of BLOCK and one
   "kv" range of N lengths KV. */
static df_schedule_options options(uint32_t sms, uint32_t cs, const uint32_t *kv, uint32_t n,
                                   uint32_t block) {
  df_schedule_options o = df_schedule_options_default();
  o.topology = (df_topology){sms, cs};
  o.block_size = block;
  o.range_count = 1;
  o.ranges[0] = (df_range_lengths){"kv", n, kv, NULL};
  return o;
}

/* defer_reduces: the seed plan with every ITER before the reduces in each
   queue; instructions, comms and the other queues unchanged. */
static void defer_reduces_moves_iters_first(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  static const uint32_t kv[2] = {384, 256};
  df_schedule_options o = options(4, 2, kv, 2, 128);
  o.extent_count = 1;
  o.extents[0] = 2;
  o.defer_reduces = true;
  df_plan *p;
  assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
  df_plan *base = seed_make_plan();
  assert_int_equal(p->instr_count, base->instr_count);
  assert_int_equal(p->comm_count, base->comm_count);
  for (uint32_t i = 0; i < p->instr_count; i++) {
    assert_int_equal(p->instrs[i].op, base->instrs[i].op);
    assert_int_equal(p->instrs[i].sm, base->instrs[i].sm);
  }
  static const uint32_t off[] = {0, 5, 7, 9}, len[] = {5, 2, 2, 4};
  static const uint32_t ids[] = {0, 6, 3, 4, 9, 1, 10, 2, 11, 5, 7, 8, 12};
  check_queues(p, off, len, ids, N(ids));
  df_plan_destroy(base);
  df_plan_destroy(p);
  /* partial_only: nothing to defer, id order */
  o.partial_only = true;
  assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
  for (uint32_t q = 0; q < p->topology.sm_count; q++)
    for (uint32_t i = 1; i < p->queue_lengths[q]; i++)
      assert_true(p->queue_ids[p->queue_offsets[q] + i - 1] < p->queue_ids[p->queue_offsets[q] + i]);
  df_plan_destroy(p);
  df_program_destroy(prog);
}

/* defer_reduces keeps in place what receives nothing: on one SM every
   reduce's inputs are its own ITERs, so the queue stays in id order
   (ITER ITER REDUCE FINALIZE per task); skip_unary_reduce then drops the
   REDUCE of the one-block task, whose FINALIZE reads the partial. */
static void defer_reduces_keeps_local_reduces(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  static const uint32_t kv[2] = {256, 128};
  df_schedule_options o = options(1, 1, kv, 2, 128);
  o.defer_reduces = true;
  df_plan *p;
  assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
  static const uint32_t off[] = {0}, len[] = {8};
  static const uint32_t ids[] = {0, 1, 2, 3, 4, 5, 6, 7};
  check_queues(p, off, len, ids, N(ids));
  df_plan_destroy(p);
  o.skip_unary_reduce = true;
  assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
  assert_int_equal(p->instr_count, 7);
  assert_int_equal(p->instrs[4].op, DF_INSTR_ITER);
  assert_int_equal(p->instrs[5].op, DF_INSTR_FINALIZE);
  assert_int_equal(p->inputs[p->instrs[5].input_offset], p->instrs[4].output_slot);
  assert_int_equal(p->slots[p->instrs[4].output_slot].role, DF_ROLE_PARTIAL);
  df_plan_destroy(p);
  df_program_destroy(prog);
}

/* balance_iters: tasks longest first, each block on the least loaded SM
   (range units; ties: lower SM). Lengths 128, 512, 256 on 4 SMs, block
   128: task 1 on SMs 0-3, task 2 on SMs 0 and 1, task 0 on SM 2. */
static void balance_iters_places_by_load(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  static const uint32_t kv[3] = {128, 512, 256};
  df_schedule_options o = options(4, 2, kv, 3, 128);
  o.extent_count = 1;
  o.extents[0] = 3;
  o.balance_iters = true;
  df_plan *p;
  assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
  static const struct {
    df_instr_op op;
    uint32_t task, sm;
  } w[] = {{DF_INSTR_ITER, 1, 0},     {DF_INSTR_ITER, 1, 1},     {DF_INSTR_ITER, 1, 2},
           {DF_INSTR_ITER, 1, 3},     {DF_INSTR_REDUCE, 1, 0},   {DF_INSTR_FINALIZE, 1, 0},
           {DF_INSTR_ITER, 2, 0},     {DF_INSTR_ITER, 2, 1},     {DF_INSTR_REDUCE, 2, 0},
           {DF_INSTR_FINALIZE, 2, 0}, {DF_INSTR_ITER, 0, 2},     {DF_INSTR_REDUCE, 0, 2},
           {DF_INSTR_FINALIZE, 0, 2}};
  for (uint32_t i = 0; i < N(w); i++) {
    assert_int_equal(p->instrs[i].op, w[i].op);
    assert_int_equal(p->instrs[i].task, w[i].task);
    assert_int_equal(p->instrs[i].sm, w[i].sm);
  }
  df_plan_destroy(p);
  /* only with round_robin and all_at_once */
  o.policy = DF_POLICY_CLUSTER_LOCAL;
  df_status st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "balance_iters needs scheduler policy 'round_robin'"));
  o.balance_iters = false;
  o.defer_reduces = true;
  o.strategy = DF_REDUCE_STREAMING;
  st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "need reduce strategy 'all_at_once', got 'streaming'"));
  df_program_destroy(prog);
}

/* even_split: lengths 100, 300, 37 (total 437) on 4 SMs, granularity 16:
   cuts at 109, 218, 327 of the longest-first concatenation (300, 100, 37)
   move to 112 and 224 in task 1 and to 32 in task 0, so the SMs stream
   112, 112, 108 and 105 keys; each reduce takes one input per piece. */
static df_schedule_options even_options(const uint32_t *kv, uint32_t n) {
  df_schedule_options o = options(4, 2, kv, n, 128);
  o.even_split = true;
  o.even_split_granularity = 16;
  return o;
}

/* even_split_taper 50 on kv 1000, 600 (4 SMs, chunks of at least 64):
   batch 1 takes 800 of 1600 units (chunks of 200), batch 2 400 of the
   800 left (100), then 50-unit chunks would be under 64, so the last 400
   go in one batch of 4 (400 / 64 = 6 chunks, at most a batch). Chunk c
   runs on SM c % 4; task 0 (the longest) comes first. */
static void even_split_tapers(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  static const uint32_t kv[2] = {1000, 600};
  df_schedule_options o = even_options(kv, 2);
  o.even_split_granularity = 0;
  o.even_split_taper = 50;
  o.even_split_taper_min = 64;
  df_plan *p;
  assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
  static const struct {
    uint32_t task, b, e, sm;
  } w[] = {{0, 0, 200, 0},   {0, 200, 400, 1}, {0, 400, 600, 2}, {0, 600, 800, 3},
           {0, 800, 900, 0}, {0, 900, 1000, 1}, {1, 0, 100, 2},   {1, 100, 200, 3},
           {1, 200, 300, 0}, {1, 300, 400, 1}, {1, 400, 500, 2},  {1, 500, 600, 3}};
  uint32_t n = 0;
  for (uint32_t i = 0; i < p->instr_count; i++) {
    const df_instr *in = &p->instrs[i];
    if (in->op != DF_INSTR_ITER)
      continue;
    assert_true(n < N(w));
    if (in->task != w[n].task || in->range_begin != w[n].b || in->range_end != w[n].e ||
        in->sm != w[n].sm) {
      print_error("ITER %u: task %u sm %u %u-%u\n", n, in->task, in->sm, in->range_begin,
                  in->range_end);
      fail();
    }
    n++;
  }
  assert_int_equal(n, N(w));
  df_plan_destroy(p);
  /* the default shortest chunk (512): batch 1's 200-unit chunks are
     already under it, so 1600 units go in 3 chunks (1600 / 512) */
  o.even_split_taper_min = 0;
  assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
  n = 0;
  for (uint32_t i = 0; i < p->instr_count; i++)
    if (p->instrs[i].op == DF_INSTR_ITER && p->instrs[i].range_begin == 0 &&
        p->instrs[i].task == 0)
      assert_int_equal(p->instrs[i].range_end, 533);
  df_plan_destroy(p);
  /* a taper under 50 %: batch 1 cuts 270 of 900 units (67-68 each), and
     the last batch's 630 units go in 10 chunks, not 4 of 157 (longer
     than batch 1's): pieces never grow along the emission order */
  static const uint32_t one[1] = {900};
  df_schedule_options o1 = even_options(one, 1);
  o1.even_split_granularity = 0;
  o1.even_split_taper = 30;
  o1.even_split_taper_min = 64;
  assert_int_equal(df_schedule(prog, &o1, &p).code, DF_OK);
  uint64_t prev = UINT32_MAX, iters = 0;
  for (uint32_t i = 0; i < p->instr_count; i++) {
    const df_instr *in = &p->instrs[i];
    if (in->op != DF_INSTR_ITER)
      continue;
    uint32_t len = in->range_end - in->range_begin;
    assert_true(len <= prev + 1); /* cuts round: 67, 68, 67, 68 */
    prev = len < prev ? len : prev;
    iters++;
  }
  assert_int_equal(iters, 14);
  df_plan_destroy(p);
  df_program_destroy(prog);
}

static void even_split_cuts_total_evenly(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  static const uint32_t kv[3] = {100, 300, 37};
  df_schedule_options o = even_options(kv, 3);
  df_plan *p;
  assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
  static const want_instr w[] = {
      {DF_INSTR_ITER, 1, 0, 0, 112, 0, {0}, 0},
      {DF_INSTR_ITER, 1, 1, 112, 224, 0, {0}, 1},
      {DF_INSTR_ITER, 1, 2, 224, 300, 0, {0}, 2},
      {DF_INSTR_REDUCE, 1, 0, 0, 0, 3, {0, 1, 2}, 3},
      {DF_INSTR_FINALIZE, 1, 0, 0, 0, 1, {3}, S},
      {DF_INSTR_ITER, 0, 2, 0, 32, 0, {0}, 4},
      {DF_INSTR_ITER, 0, 3, 32, 100, 0, {0}, 5},
      {DF_INSTR_REDUCE, 0, 2, 0, 0, 2, {4, 5}, 6},
      {DF_INSTR_FINALIZE, 0, 2, 0, 0, 1, {6}, S},
      {DF_INSTR_ITER, 2, 3, 0, 37, 0, {0}, 7},
      {DF_INSTR_REDUCE, 2, 3, 0, 0, 1, {7}, 8},
      {DF_INSTR_FINALIZE, 2, 3, 0, 0, 1, {8}, S},
      {DF_INSTR_EXIT, S, 0, 0, 0, 0, {0}, S},
      {DF_INSTR_EXIT, S, 1, 0, 0, 0, {0}, S},
      {DF_INSTR_EXIT, S, 2, 0, 0, 0, {0}, S},
      {DF_INSTR_EXIT, S, 3, 0, 0, 0, {0}, S},
  };
  check_instrs(p, w, N(w));
  /* SM 1 -> 0 in cluster 0, SM 2 -> 0 over HBM, SM 3 -> 2 in cluster 1 */
  static const want_comm c[] = {
      {DF_COMM_CLUSTER_SEND, 1, 3, 1, 1, 1, 0, 0, 1}, {DF_COMM_CLUSTER_RECV, 1, 3, 1, 1, 1, 0, 1, 1},
      {DF_COMM_HBM_SEND, 2, 3, 2, 2, 2, 0, S, 2},     {DF_COMM_HBM_RECV, 2, 3, 2, 2, 2, 0, S, 2},
      {DF_COMM_CLUSTER_SEND, 6, 7, 5, 5, 3, 2, 0, 1}, {DF_COMM_CLUSTER_RECV, 6, 7, 5, 5, 3, 2, 1, 1},
  };
  check_comms(p, c, N(c));
  df_plan_destroy(p);
  /* 8 chunks on 4 SMs: two waves, chunk c on SM c % 4 (cuts 54, 109, ...) */
  o.even_split_chunks = 8;
  o.even_split_granularity = 0;
  assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
  assert_int_equal(p->instrs[0].range_end, 54);
  assert_int_equal(p->instrs[1].sm, 1);
  uint32_t found = 0;
  for (uint32_t i = 0; i < p->instr_count; i++)
    if (p->instrs[i].op == DF_INSTR_ITER && p->instrs[i].range_begin == 327 - 300 &&
        p->instrs[i].task == 0) {
      assert_int_equal(p->instrs[i].sm, 2); /* chunk 6 */
      found++;
    }
  assert_int_equal(found, 1);
  df_plan_destroy(p);
  /* task cost 200: total 1037, cuts at 259, 518, 777 of (200 + 300)(200 +
     100)(200 + 37): task 1 is split at key 64 (59 rounded), the cut at 518
     falls in task 0's cost units (chunk 1 gets no key of it), the cut at
     777 splits task 0 at key 80 (77 rounded) */
  o.even_split_chunks = 0;
  o.even_split_task_cost = 200;
  o.even_split_granularity = 16;
  assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
  static const want_instr wc[] = {
      {DF_INSTR_ITER, 1, 0, 0, 64, 0, {0}, 0},    {DF_INSTR_ITER, 1, 1, 64, 300, 0, {0}, 1},
      {DF_INSTR_REDUCE, 1, 0, 0, 0, 2, {0, 1}, 2}, {DF_INSTR_FINALIZE, 1, 0, 0, 0, 1, {2}, S},
      {DF_INSTR_ITER, 0, 2, 0, 80, 0, {0}, 3},    {DF_INSTR_ITER, 0, 3, 80, 100, 0, {0}, 4},
      {DF_INSTR_REDUCE, 0, 2, 0, 0, 2, {3, 4}, 5}, {DF_INSTR_FINALIZE, 0, 2, 0, 0, 1, {5}, S},
      {DF_INSTR_ITER, 2, 3, 0, 37, 0, {0}, 6},
  };
  for (uint32_t i = 0; i < N(wc); i++)
    if (p->instrs[i].op != wc[i].op || p->instrs[i].task != wc[i].task ||
        p->instrs[i].sm != wc[i].sm || p->instrs[i].range_begin != wc[i].b ||
        p->instrs[i].range_end != wc[i].e) {
      print_error("instruction %u: %s task %u sm %u %u-%u\n", i,
                  df_instr_op_name(p->instrs[i].op), p->instrs[i].task, p->instrs[i].sm,
                  p->instrs[i].range_begin, p->instrs[i].range_end);
      fail();
    }
  df_plan_destroy(p);
  o.even_split_task_cost = 0;
  /* 2 chunks on 4 SMs: SMs 0 and 2 */
  o.even_split_chunks = 2;
  assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
  for (uint32_t i = 0; i < p->instr_count; i++)
    if (p->instrs[i].op == DF_INSTR_ITER)
      assert_true(p->instrs[i].sm == 0 || p->instrs[i].sm == 2);
  df_plan_destroy(p);
  df_program_destroy(prog);
}

/* Every task's pieces tile its range in order, the SMs' loads stay within
   one granule (plus a task tail) of the even share, and the ITER count is
   at most tasks + chunks - 1; random lengths and chunk counts. */
static void even_split_tiles_ranges(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  uint32_t kv[40], seedv = 12345;
  for (int round = 0; round < 60; round++) {
    uint32_t n = 1 + round % 40;
    uint64_t total = 0;
    for (uint32_t t = 0; t < n; t++) {
      seedv = seedv * 1103515245u + 12345u;
      kv[t] = 1 + (seedv >> 8) % (round % 3 ? 5000 : 40);
      total += kv[t];
    }
    df_schedule_options o = even_options(kv, n);
    o.topology.sm_count = 7 + round % 5;
    o.topology.cluster_size = 1;
    o.even_split_granularity = round % 2 ? 16 : 1;
    o.even_split_chunks = round % 4 == 3 ? 2 * o.topology.sm_count + 1 : 0;
    o.even_split_task_cost = round % 5 == 4 ? 300 : 0;
    uint32_t chunks = o.even_split_chunks ? o.even_split_chunks : o.topology.sm_count;
    df_plan *p;
    assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
    uint32_t next[40] = {0}, iters = 0;
    uint64_t load[16] = {0};
    for (uint32_t i = 0; i < p->instr_count; i++) {
      const df_instr *in = &p->instrs[i];
      if (in->op != DF_INSTR_ITER)
        continue;
      iters++;
      assert_int_equal(in->range_begin, next[in->task]);
      assert_true(in->range_end > in->range_begin);
      next[in->task] = in->range_end;
      load[in->sm] += in->range_end - in->range_begin;
      if (o.even_split_granularity == 16 && in->range_begin)
        assert_int_equal(in->range_begin % 16, 0);
    }
    for (uint32_t t = 0; t < n; t++)
      assert_int_equal(next[t], kv[t]);
    assert_true(iters <= n + chunks - 1);
    if (chunks == o.topology.sm_count && o.even_split_granularity == 1 && !o.even_split_task_cost)
      for (uint32_t sm = 0; sm < o.topology.sm_count; sm++)
        assert_true(load[sm] <= total / chunks + 2 && load[sm] + 2 >= total / chunks);
    df_plan_destroy(p);
  }
  df_program_destroy(prog);
}

/* even_split: round_robin all_at_once only, not with balance_iters; its
   sub-options need it; at most DF_EVEN_SPLIT_MAX_CHUNKS chunks. */
static void even_split_errors(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  static const uint32_t kv[2] = {100, 300};
  df_schedule_options o = even_options(kv, 2);
  df_plan *p;
  o.policy = DF_POLICY_CLUSTER_LOCAL;
  df_status st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "even_split needs scheduler policy 'round_robin' and "
                                     "reduce strategy 'all_at_once', got 'cluster_local'"));
  o.strategy = DF_REDUCE_STREAMING;
  st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "got 'cluster_local' and 'streaming'"));
  o = even_options(kv, 2);
  o.balance_iters = true;
  st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "even_split and balance_iters exclude each other"));
  o = even_options(kv, 2);
  o.even_split = false;
  st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "even_split_granularity (16), even_split_chunks (0) and "
                                     "even_split_task_cost (0) need even_split"));
  o.even_split_granularity = 0;
  o.even_split_chunks = 3;
  st = df_schedule(prog, &o, &p);
  assert_non_null(strstr(st.message, "even_split_chunks (3) and"));
  o.even_split_chunks = 0;
  o.even_split_task_cost = 7;
  st = df_schedule(prog, &o, &p);
  assert_non_null(strstr(st.message, "even_split_task_cost (7) need even_split"));
  o.even_split_task_cost = 0;
  o.even_split_taper = 50;
  st = df_schedule(prog, &o, &p);
  assert_non_null(strstr(st.message, "even_split_taper (50) needs even_split"));
  o.even_split = true;
  o.even_split_taper = 100;
  st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "1 to 99 (0: off), got 100"));
  o.even_split_taper = 0;
  o.even_split_taper_min = 8;
  st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "even_split_taper_min (8) needs even_split_taper"));
  /* 1 % per batch down to 1-unit chunks: more chunks than the limit */
  static const uint32_t big[1] = {4000000000u};
  df_schedule_options ob = even_options(big, 1);
  ob.even_split_taper = 1;
  ob.even_split_taper_min = 1;
  ob.even_split_chunks = 2000;
  st = df_schedule(prog, &ob, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "cuts more than 1048576 chunks"));
  o.even_split_taper_min = 0;
  o.even_split_chunks = DF_EVEN_SPLIT_MAX_CHUNKS + 1;
  st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "even_split_chunks 1048577 exceeds 1048576"));
  df_program_destroy(prog);
}

/* reduce_fan_in = 3 on kv 100, 40 (block 16, 4 SMs, cluster 2): the plan
   of reduce_fan_in_builds_trees. */
static const want_instr fan_in3_plan[] = {
    {DF_INSTR_ITER, 0, 0, 0, 16, 0, {0}, 0},       {DF_INSTR_ITER, 0, 1, 16, 32, 0, {0}, 1},
    {DF_INSTR_ITER, 0, 2, 32, 48, 0, {0}, 2},      {DF_INSTR_ITER, 0, 3, 48, 64, 0, {0}, 3},
    {DF_INSTR_ITER, 0, 0, 64, 80, 0, {0}, 4},      {DF_INSTR_ITER, 0, 1, 80, 96, 0, {0}, 5},
    {DF_INSTR_ITER, 0, 2, 96, 100, 0, {0}, 6},     {DF_INSTR_REDUCE, 0, 0, 0, 0, 2, {0, 1}, 7},
    {DF_INSTR_REDUCE, 0, 2, 0, 0, 2, {2, 3}, 8},   {DF_INSTR_REDUCE, 0, 0, 0, 0, 3, {4, 5, 6}, 9},
    {DF_INSTR_REDUCE, 0, 0, 0, 0, 3, {7, 8, 9}, 10}, {DF_INSTR_FINALIZE, 0, 0, 0, 0, 1, {10}, S},
    {DF_INSTR_ITER, 1, 3, 0, 16, 0, {0}, 11},      {DF_INSTR_ITER, 1, 0, 16, 32, 0, {0}, 12},
    {DF_INSTR_ITER, 1, 1, 32, 40, 0, {0}, 13},     {DF_INSTR_REDUCE, 1, 3, 0, 0, 3, {11, 12, 13}, 14},
    {DF_INSTR_FINALIZE, 1, 3, 0, 0, 1, {14}, S},   {DF_INSTR_EXIT, S, 0, 0, 0, 0, {0}, S},
    {DF_INSTR_EXIT, S, 1, 0, 0, 0, {0}, S},        {DF_INSTR_EXIT, S, 2, 0, 0, 0, {0}, S},
    {DF_INSTR_EXIT, S, 3, 0, 0, 0, {0}, S},
};

/* reduce_fan_in = 3: a task of 7 blocks (100 keys, block 16) reduces its
   blocks in runs of 2, 2, 3 (on the SMs of their first blocks) and then
   the 3 results; a task of 3 blocks keeps one reduce. Fan-in 1 and other
   strategies are refused. */
static void reduce_fan_in_builds_trees(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  static const uint32_t kv[2] = {100, 40};
  df_schedule_options o = options(4, 2, kv, 2, 16);
  o.reduce_fan_in = 3;
  df_plan *p;
  assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
  check_instrs(p, fan_in3_plan, N(fan_in3_plan));
  /* instruction 8's result moves SM 2 -> 0 over HBM into instruction 10 */
  bool moved = false;
  for (uint32_t i = 0; i < p->comm_count; i++)
    if (p->comms[i].kind == DF_COMM_HBM_RECV && p->comms[i].src_instr == 8 &&
        p->comms[i].dst_instr == 10 && p->comms[i].src_slot == 8)
      moved = true;
  assert_true(moved);
  df_plan_destroy(p);
  o.reduce_fan_in = 1;
  df_status st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "reduce_fan_in must be 0 (no limit) or at least 2, got 1"));
  o.reduce_fan_in = 2;
  o.policy = DF_POLICY_CLUSTER_LOCAL;
  o.strategy = DF_REDUCE_STREAMING;
  st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "reduce_fan_in needs reduce strategy 'all_at_once', got "
                                     "'streaming'"));
  df_program_destroy(prog);
}

/* reduce_spread with reduce_fan_in = 3, the plan of the test above: each
   tree reduce goes on the first SM under it that runs no other reduce of
   the task (runs of SMs {0,1}, {2,3}, {0,1,2}: SMs 0, 2, 1), the last
   reduce and the finalize on the first one left (SM 3, not 0); task 1's
   single reduce stays on its first SM. Without reduce_fan_in the option
   is refused. */
static void reduce_spread_places_tree_reduces(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  static const uint32_t kv[2] = {100, 40};
  df_schedule_options o = options(4, 2, kv, 2, 16);
  o.reduce_fan_in = 3;
  o.reduce_spread = true;
  df_plan *p;
  assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
  want_instr w[N(fan_in3_plan)];
  memcpy(w, fan_in3_plan, sizeof w);
  w[9].sm = 1;  /* the run {4, 5, 6} on SMs {0, 1, 2}: SM 0 has a reduce */
  w[10].sm = 3; /* the last reduce: SMs 0, 2, 1 have one */
  w[11].sm = 3; /* its finalize */
  check_instrs(p, w, N(w));
  /* every input of the last reduce moves to SM 3: from SM 2 (its cluster
     peer) over DSMEM, from SMs 0 and 1 over HBM */
  uint32_t hbm = 0, cluster = 0;
  for (uint32_t i = 0; i < p->comm_count; i++)
    if (p->comms[i].dst_instr == 10) {
      hbm += p->comms[i].kind == DF_COMM_HBM_RECV;
      cluster += p->comms[i].kind == DF_COMM_CLUSTER_RECV && p->comms[i].src_instr == 8;
    }
  assert_int_equal(hbm, 2);
  assert_int_equal(cluster, 1);
  df_plan_destroy(p);
  o.reduce_fan_in = 0;
  df_status st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "reduce_spread needs reduce_fan_in"));
  df_program_destroy(prog);
}

/* reduce_sms = 2 on 6 SMs: ITERs only on SMs 0-3 (round_robin wraps at
   4, balance_iters fills 4), every task's last REDUCE and its FINALIZE on
   SM 4 + k % 2 in emission order, lower tree levels (reduce_fan_in) on
   the partials' SMs; a one-block task with skip_unary_reduce keeps its
   FINALIZE on its partial's SM. The option's rules are refused. */
static void reduce_sms_places_roots(void **state) {
  (void)state;
  df_program *prog = seed_attention_program();
  static const uint32_t kv[4] = {100, 40, 200, 16};
  for (int variant = 0; variant < 3; variant++) {
    df_schedule_options o = options(6, 2, kv, 4, 16);
    o.reduce_sms = 2;
    o.balance_iters = variant == 1;
    o.reduce_fan_in = variant == 2 ? 3 : 0;
    o.skip_unary_reduce = true;
    df_plan *p;
    df_status st = df_schedule(prog, &o, &p);
    if (st.code != DF_OK)
      fprintf(stderr, "%s\n", st.message);
    assert_int_equal(st.code, DF_OK);
    uint32_t roots[4] = {DF_SENTINEL, DF_SENTINEL, DF_SENTINEL, DF_SENTINEL}, iters = 0, lower = 0;
    for (uint32_t i = 0; i < p->instr_count; i++) {
      const df_instr *in = &p->instrs[i];
      if (in->op == DF_INSTR_ITER) {
        assert_true(in->sm < 4);
        iters++;
      } else if (in->op == DF_INSTR_FINALIZE) {
        roots[in->task] = in->sm;
        const uint32_t in0 = p->inputs[in->input_offset];
        const df_instr *prod = &p->instrs[p->slots[in0].producer];
        assert_int_equal(prod->sm, in->sm); /* the root reduce (or the partial) */
        if (in->task == 3)
          assert_int_equal(prod->op, DF_INSTR_ITER); /* one block: no REDUCE */
        else
          assert_int_equal(prod->op, DF_INSTR_REDUCE);
      } else if (in->op == DF_INSTR_REDUCE) {
        lower += in->sm < 4; /* a lower tree level stays with the partials */
      }
    }
    assert_int_equal(lower, variant == 2 ? 3 + 5 + 2 : 0);
    assert_int_equal(iters, 7 + 3 + 13 + 1);
    /* emission order: task ids, or longest first with balance_iters
       (2, 0, 1, 3); task 3 has one block */
    if (variant == 1) {
      assert_int_equal(roots[2], 4);
      assert_int_equal(roots[0], 5);
      assert_int_equal(roots[1], 4);
    } else {
      assert_int_equal(roots[0], 4);
      assert_int_equal(roots[1], 5);
      assert_int_equal(roots[2], 4);
    }
    assert_true(roots[3] < 4);
    df_plan_destroy(p);
  }
  df_schedule_options o = options(6, 2, kv, 4, 16);
  df_plan *p;
  o.reduce_sms = 6;
  df_status st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "reduce_sms 6 must leave SMs for the partials: the "
                                     "topology has 6"));
  o.reduce_sms = 1;
  o.even_split = true;
  st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "reduce_sms needs scheduler policy 'round_robin' and reduce "
                                     "strategy 'all_at_once' without even_split"));
  o.even_split = false;
  o.policy = DF_POLICY_CLUSTER_LOCAL;
  st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "got 'cluster_local' and 'all_at_once'"));
  o.policy = DF_POLICY_ROUND_ROBIN;
  o.partial_only = true;
  st = df_schedule(prog, &o, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "needs a reduce stage to place; program"));
  df_program_destroy(prog);
  df_program *moe = seed_moe_program();
  df_schedule_options m = options(6, 2, kv, 1, 128);
  m.ranges[0].axis = "tokens";
  m.reduce_sms = 1;
  st = df_schedule(moe, &m, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "reduce_sms needs a partial/reduce program"));
  df_program_destroy(moe);
}

static void make_plan_handlers(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  for (uint32_t i = 0; i < p->instr_count; i++) {
    const df_instr *in = &p->instrs[i];
    if (in->op == DF_INSTR_EXIT) {
      assert_false(in->has_identity);
      assert_false(in->has_variant);
      continue;
    }
    assert_true(in->has_identity && in->has_variant);
    assert_true(df_variant_check(&in->variant).code == DF_OK);
    assert_int_equal(in->variant.base.operator_id, in->identity.operator_id);
    assert_int_equal(in->variant.base.kind, in->identity.kind);
  }
  assert_int_equal(p->instrs[0].identity.operator_id, 0);
  assert_int_equal(p->instrs[0].identity.kind, DF_OPK_ITER);
  assert_true(p->instrs[0].variant.has_iter);
  assert_int_equal(p->instrs[0].variant.iter_mode, DF_ITER_GENERIC);
  assert_int_equal(p->instrs[3].identity.operator_id, 1);
  assert_int_equal(p->instrs[3].identity.kind, DF_OPK_REDUCE);
  assert_int_equal(p->instrs[3].variant.arity, DF_ARITY_GENERIC);
  assert_int_equal(p->instrs[7].variant.arity, DF_ARITY_BINARY);
  assert_int_equal(p->instrs[4].identity.operator_id, 2);
  assert_int_equal(p->instrs[4].identity.kind, DF_OPK_FINALIZE);
  assert_false(p->instrs[4].variant.has_iter || p->instrs[4].variant.has_arity);
  df_plan_destroy(p);
}

/* ---- REFERENCE 2.9: make_reshared_plan ---------------------------------------- */

static void reshared_plan_instructions_and_slots(void **state) {
  (void)state;
  df_plan *p = seed_make_reshared_plan();
  static const want_instr w[] = {
      {DF_INSTR_MAP, 0, 0, 0, 128, 0, {0}, 0},
      {DF_INSTR_MAP, 0, 1, 128, 256, 0, {0}, 1},
      {DF_INSTR_RESHARED, 0, 0, 0, 0, 2, {2, 3}, S},
      {DF_INSTR_RESHARED, 0, 1, 0, 0, 2, {4, 5}, S},
      {DF_INSTR_MAP, 0, 0, 0, 128, 2, {2, 3}, 6},
      {DF_INSTR_FINALIZE, 0, 0, 0, 128, 1, {6}, S},
      {DF_INSTR_MAP, 0, 1, 128, 256, 2, {4, 5}, 7},
      {DF_INSTR_FINALIZE, 0, 1, 128, 256, 1, {7}, S},
  };
  check_instrs(p, w, N(w));
  static const int32_t stages[] = {0, 0, 1, 1, 2, 3, 2, 3};
  for (uint32_t i = 0; i < N(stages); i++)
    assert_int_equal(p->instrs[i].stage, stages[i]);
  assert_int_equal(p->slot_count, 8);
  static const uint32_t shared[] = {0, 1, 0, S, S, 1, 6, 6};
  static const uint32_t global[] = {0, 1, 0, 1, 0, 1, S, S};
  static const bool priv[] = {0, 0, 0, 1, 1, 0, 0, 0};
  static const uint32_t producer[] = {0, 1, 0, S, S, 1, 4, 6};
  static const df_slot_role role[] = {DF_ROLE_STAGE_OUTPUT,  DF_ROLE_STAGE_OUTPUT,
                                      DF_ROLE_RESHARED_FULL, DF_ROLE_RESHARED_FULL,
                                      DF_ROLE_RESHARED_FULL, DF_ROLE_RESHARED_FULL,
                                      DF_ROLE_STAGE_OUTPUT,  DF_ROLE_STAGE_OUTPUT};
  static const int32_t slot_stage[] = {0, 0, -1, -1, -1, -1, 2, 2};
  int32_t up = 0, hidden = 2; /* program type indices */
  static const int type_is_up[] = {1, 1, 1, 1, 1, 1, 0, 0};
  for (uint32_t i = 0; i < 8; i++) {
    const df_slot *s = &p->slots[i];
    assert_int_equal(s->shared_storage, shared[i]);
    assert_int_equal(s->global_storage, global[i]);
    assert_int_equal(s->private_shared, priv[i]);
    assert_int_equal(s->producer, producer[i]);
    assert_int_equal(s->role, role[i]);
    assert_int_equal(s->stage, slot_stage[i]);
    assert_int_equal(s->type, type_is_up[i] ? up : hidden);
    assert_int_equal(s->task, 0);
  }
  assert_string_equal(p->types[0].name, "UpShard");
  assert_string_equal(p->types[2].name, "HiddenShard");
  assert_int_equal(p->types[0].bytes, 16);
  assert_int_equal(p->policy, DF_POLICY_STAGE_GRAPH);
  assert_int_equal(p->strategy, DF_REDUCE_NONE);
  df_plan_destroy(p);
}

static void reshared_plan_comms_queues_handlers(void **state) {
  (void)state;
  df_plan *p = seed_make_reshared_plan();
  static const want_comm w[] = {
      {DF_COMM_HBM_SEND, 1, 2, 1, 3, 1, 0, S, 1},
      {DF_COMM_HBM_RECV, 1, 2, 1, 3, 1, 0, S, 1},
      {DF_COMM_HBM_SEND, 0, 3, 0, 4, 0, 1, S, 2},
      {DF_COMM_HBM_RECV, 0, 3, 0, 4, 0, 1, S, 2},
  };
  check_comms(p, w, N(w));
  static const uint32_t off[] = {0, 4, 8, 8}, len[] = {4, 4, 0, 0};
  static const uint32_t ids[] = {0, 2, 4, 5, 1, 3, 6, 7};
  check_queues(p, off, len, ids, N(ids));
  static const uint32_t op_id[] = {0, 0, S, S, 1, 2, 1, 2};
  static const df_op_kind kind[] = {DF_OPK_MAP, DF_OPK_MAP,      DF_OPK_NONE, DF_OPK_NONE,
                                    DF_OPK_MAP, DF_OPK_FINALIZE, DF_OPK_MAP,  DF_OPK_FINALIZE};
  for (uint32_t i = 0; i < 8; i++) {
    const df_instr *in = &p->instrs[i];
    if (op_id[i] == S) {
      assert_false(in->has_identity || in->has_variant);
      continue;
    }
    assert_true(in->has_identity && in->has_variant);
    assert_int_equal(in->identity.operator_id, op_id[i]);
    assert_int_equal(in->identity.kind, kind[i]);
    assert_false(in->variant.has_iter || in->variant.has_arity);
  }
  df_plan_destroy(p);
}

/* Without force_hbm the same-cluster gather uses cluster kinds and a
   running epoch; include_exit adds one EXIT per SM. */
static void reshared_cluster_transfers(void **state) {
  (void)state;
  df_program *g = seed_moe_program();
  static const uint32_t e[2] = {256, 512}, h[2] = {128, 256};
  df_schedule_options o = df_schedule_options_default();
  o.topology = (df_topology){4, 2};
  o.block_size = 128;
  o.range_count = 2;
  o.ranges[0] = (df_range_lengths){"expert_tile", 2, e, NULL};
  o.ranges[1] = (df_range_lengths){"hidden_tile", 2, h, NULL};
  df_plan *p;
  df_status s = df_schedule(g, &o, &p);
  assert_int_equal(s.code, DF_OK);
  /* 2 tasks x (2 map1 + 2 reshared + 2 map2 + 2 finalize) + 4 exits */
  assert_int_equal(p->instr_count, 20);
  assert_int_equal(p->comm_count, 8);
  for (uint32_t i = 0; i < 8; i++)
    assert_true(df_comm_kind_is_cluster(p->comms[i].kind));
  assert_int_equal(p->comms[0].flag_epoch, 1);
  assert_int_equal(p->comms[2].flag_epoch, 2);
  assert_int_equal(p->comms[6].flag_epoch, 4);
  /* task 1 runs on cluster 1 (SMs 2, 3) */
  assert_int_equal(p->instrs[8].sm, 2);
  assert_int_equal(p->instrs[9].sm, 3);
  assert_int_equal(p->instrs[8].range_end, 256);
  assert_int_equal(p->comms[4].peer_cta_rank, 0); /* send to consumer rank 0 */
  assert_int_equal(p->comms[5].peer_cta_rank, 1); /* recv from producer rank 1 */
  for (uint32_t i = 16; i < 20; i++)
    assert_int_equal(p->instrs[i].op, DF_INSTR_EXIT);
  /* map2 outputs of task 1 share the first one's storage */
  assert_int_equal(p->slots[14].shared_storage, 14);
  assert_int_equal(p->slots[15].shared_storage, 14);
  df_plan_destroy(p);
  df_program_destroy(g);
}

/* ---- REFERENCE 2.10: other seed plans ----------------------------------------- */

static df_plan *attention(uint32_t sms, uint32_t cs, const uint32_t *kv, uint32_t n,
                          uint32_t block, df_policy policy, df_reduce_strategy strategy,
                          bool exit) {
  return seed_schedule_attention(sms, cs, kv, n, block, policy, strategy, exit);
}

static void peer_ranks_follow_cluster_rank(void **state) {
  (void)state;
  static const uint32_t kv[2] = {256, 256};
  df_plan *p = attention(4, 2, kv, 2, 128, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE, true);
  static const want_comm w[] = {
      {DF_COMM_CLUSTER_SEND, 1, 2, 1, 1, 1, 0, 0, 1},
      {DF_COMM_CLUSTER_RECV, 1, 2, 1, 1, 1, 0, 1, 1},
      {DF_COMM_CLUSTER_SEND, 5, 6, 4, 4, 3, 2, 0, 1},
      {DF_COMM_CLUSTER_RECV, 5, 6, 4, 4, 3, 2, 1, 1},
  };
  check_comms(p, w, N(w));
  df_plan_destroy(p);
  /* cluster_local: task 0 on SMs 0,1 and task 1 on SMs 2,3, cluster comms only */
  p = attention(4, 2, kv, 2, 128, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_ALL_AT_ONCE, true);
  check_comms(p, w, N(w));
  assert_int_equal(p->instrs[4].sm, 2);
  assert_int_equal(p->instrs[5].sm, 3);
  assert_int_equal(p->policy, DF_POLICY_CLUSTER_LOCAL);
  df_plan_destroy(p);
}

static void cluster_of_four_gathers_on_sm0(void **state) {
  (void)state;
  static const uint32_t kv[1] = {512};
  df_plan *p = attention(4, 4, kv, 1, 128, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_ALL_AT_ONCE, true);
  for (uint32_t i = 0; i < 4; i++) {
    assert_int_equal(p->instrs[i].op, DF_INSTR_ITER);
    assert_int_equal(p->instrs[i].sm, i);
  }
  assert_int_equal(p->instrs[4].op, DF_INSTR_REDUCE);
  assert_int_equal(p->instrs[4].sm, 0);
  assert_int_equal(p->instrs[4].input_count, 4);
  assert_int_equal(p->comm_count, 6);
  for (uint32_t i = 0; i < 3; i++) {
    assert_int_equal(p->comms[2 * i].kind, DF_COMM_CLUSTER_SEND);
    assert_int_equal(p->comms[2 * i].src_instr, i + 1);
    assert_int_equal(p->comms[2 * i].peer_cta_rank, 0);
    assert_int_equal(p->comms[2 * i + 1].kind, DF_COMM_CLUSTER_RECV);
    assert_int_equal(p->comms[2 * i + 1].peer_cta_rank, i + 1);
  }
  df_plan_destroy(p);
}

static void clusters_of_one_use_hbm_epochs(void **state) {
  (void)state;
  static const uint32_t kv[2] = {256, 256};
  df_plan *p = attention(2, 1, kv, 2, 128, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE, true);
  assert_int_equal(p->comm_count, 4);
  for (uint32_t i = 0; i < 4; i++) {
    assert_true(df_comm_kind_is_hbm(p->comms[i].kind));
    assert_int_equal(p->comms[i].flag_epoch, i / 2 + 1);
    assert_int_equal(p->comms[i].peer_cta_rank, S);
  }
  df_plan_destroy(p);
  /* 2 SMs in one cluster: four cluster comms, receives on SM0 */
  p = attention(2, 2, kv, 2, 128, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE, true);
  assert_int_equal(p->comm_count, 4);
  assert_int_equal(p->comms[1].kind, DF_COMM_CLUSTER_RECV);
  assert_int_equal(p->comms[1].dst_slot, 1);
  assert_int_equal(p->comms[3].dst_slot, 4);
  assert_int_equal(p->comms[3].consumer_sm, 0);
  df_plan_destroy(p);
}

static void streaming_splits_tasks_over_cluster(void **state) {
  (void)state;
  static const uint32_t kv[2] = {8192, 8192};
  df_plan *p = attention(4, 2, kv, 2, 64, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING, false);
  static const want_instr w[] = {
      {DF_INSTR_ITER, 0, 0, 0, 4096, 0, {0}, 0},
      {DF_INSTR_REDUCE_UPDATE, 0, 0, 0, 0, 1, {0}, 1},
      {DF_INSTR_ITER, 0, 1, 4096, 8192, 0, {0}, 2},
      {DF_INSTR_REDUCE_UPDATE, 0, 1, 0, 0, 2, {1, 2}, 3},
      {DF_INSTR_FINALIZE, 0, 1, 0, 0, 1, {3}, S},
      {DF_INSTR_ITER, 1, 2, 0, 4096, 0, {0}, 4},
      {DF_INSTR_REDUCE_UPDATE, 1, 2, 0, 0, 1, {4}, 5},
      {DF_INSTR_ITER, 1, 3, 4096, 8192, 0, {0}, 6},
      {DF_INSTR_REDUCE_UPDATE, 1, 3, 0, 0, 2, {5, 6}, 7},
      {DF_INSTR_FINALIZE, 1, 3, 0, 0, 1, {7}, S},
  };
  check_instrs(p, w, N(w));
  assert_int_equal(p->slot_count, 8);
  for (uint32_t i = 0; i < 8; i++) {
    assert_int_equal(p->slots[i].shared_storage, i % 2 ? 0 : 1);
    assert_int_equal(p->slots[i].global_storage, S);
    assert_int_equal(p->slots[i].role, i % 2 ? DF_ROLE_ACCUMULATOR : DF_ROLE_PARTIAL);
  }
  static const want_comm c[] = {
      {DF_COMM_CLUSTER_SEND, 1, 3, 1, 1, 0, 1, 1, 1},
      {DF_COMM_CLUSTER_RECV, 1, 3, 1, 1, 0, 1, 0, 1},
      {DF_COMM_CLUSTER_SEND, 6, 8, 5, 5, 2, 3, 1, 1},
      {DF_COMM_CLUSTER_RECV, 6, 8, 5, 5, 2, 3, 0, 1},
  };
  check_comms(p, c, N(c));
  static const uint32_t off[] = {0, 2, 5, 7}, len[] = {2, 3, 2, 3};
  static const uint32_t ids[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  check_queues(p, off, len, ids, N(ids));
  assert_int_equal(p->instrs[1].variant.arity, DF_ARITY_PASSTHROUGH);
  assert_int_equal(p->instrs[3].variant.arity, DF_ARITY_BINARY);
  assert_int_equal(p->instrs[3].identity.kind, DF_OPK_REDUCE);
  assert_int_equal(p->strategy, DF_REDUCE_STREAMING);
  df_plan_destroy(p);
}

/* Three equal tasks on one cluster of 2: target 3 blocks per SM, task 1
   spills; first parts of multi-part tasks are queued first, later parts
   last. */
static void streaming_orders_groups_by_priority(void **state) {
  (void)state;
  static const uint32_t kv[3] = {256, 256, 256};
  df_plan *p = attention(2, 2, kv, 3, 128, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING, true);
  static const want_instr w[] = {
      {DF_INSTR_ITER, 0, 0, 0, 256, 0, {0}, 0},
      {DF_INSTR_REDUCE_UPDATE, 0, 0, 0, 0, 1, {0}, 1},
      {DF_INSTR_FINALIZE, 0, 0, 0, 0, 1, {1}, S},
      {DF_INSTR_ITER, 1, 0, 0, 128, 0, {0}, 2},
      {DF_INSTR_REDUCE_UPDATE, 1, 0, 0, 0, 1, {2}, 3},
      {DF_INSTR_ITER, 1, 1, 128, 256, 0, {0}, 4},
      {DF_INSTR_REDUCE_UPDATE, 1, 1, 0, 0, 2, {3, 4}, 5},
      {DF_INSTR_FINALIZE, 1, 1, 0, 0, 1, {5}, S},
      {DF_INSTR_ITER, 2, 1, 0, 256, 0, {0}, 6},
      {DF_INSTR_REDUCE_UPDATE, 2, 1, 0, 0, 1, {6}, 7},
      {DF_INSTR_FINALIZE, 2, 1, 0, 0, 1, {7}, S},
      {DF_INSTR_EXIT, S, 0, 0, 0, 0, {0}, S},
      {DF_INSTR_EXIT, S, 1, 0, 0, 0, {0}, S},
  };
  check_instrs(p, w, N(w));
  static const uint32_t off[] = {0, 6}, len[] = {6, 7};
  static const uint32_t ids[] = {3, 4, 0, 1, 2, 11, 8, 9, 10, 5, 6, 7, 12};
  check_queues(p, off, len, ids, N(ids));
  df_plan_destroy(p);
}

/* Longest task first to the least-loaded cluster per SM, ties to the lower
   cluster; inside a cluster tasks keep assignment order. */
static void streaming_assigns_longest_first(void **state) {
  (void)state;
  static const uint32_t kv[4] = {128, 512, 256, 256};
  df_plan *p = attention(4, 2, kv, 4, 128, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING, false);
  /* t0: SM1 [0,128); t1: SM0 [0,384) + SM1 [384,512); t2: SM2; t3: SM3 */
  static const want_instr w[] = {
      {DF_INSTR_ITER, 0, 1, 0, 128, 0, {0}, 0},
      {DF_INSTR_REDUCE_UPDATE, 0, 1, 0, 0, 1, {0}, 1},
      {DF_INSTR_FINALIZE, 0, 1, 0, 0, 1, {1}, S},
      {DF_INSTR_ITER, 1, 0, 0, 384, 0, {0}, 2},
      {DF_INSTR_REDUCE_UPDATE, 1, 0, 0, 0, 1, {2}, 3},
      {DF_INSTR_ITER, 1, 1, 384, 512, 0, {0}, 4},
      {DF_INSTR_REDUCE_UPDATE, 1, 1, 0, 0, 2, {3, 4}, 5},
      {DF_INSTR_FINALIZE, 1, 1, 0, 0, 1, {5}, S},
      {DF_INSTR_ITER, 2, 2, 0, 256, 0, {0}, 6},
      {DF_INSTR_REDUCE_UPDATE, 2, 2, 0, 0, 1, {6}, 7},
      {DF_INSTR_FINALIZE, 2, 2, 0, 0, 1, {7}, S},
      {DF_INSTR_ITER, 3, 3, 0, 256, 0, {0}, 8},
      {DF_INSTR_REDUCE_UPDATE, 3, 3, 0, 0, 1, {8}, 9},
      {DF_INSTR_FINALIZE, 3, 3, 0, 0, 1, {9}, S},
  };
  check_instrs(p, w, N(w));
  /* SM1: task 0 (single part, priority 1) before task 1's later part */
  static const uint32_t off[] = {0, 2, 8, 11}, len[] = {2, 6, 3, 3};
  static const uint32_t ids[] = {3, 4, 0, 1, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  check_queues(p, off, len, ids, N(ids));
  df_plan_destroy(p);
}

/* ---- streaming_tree --------------------------------------------------------------- */

static df_field fld(const char *name, df_dtype t, uint32_t rank, uint32_t d0, uint32_t d1) {
  df_field f;
  memset(&f, 0, sizeof f);
  snprintf(f.name, sizeof f.name, "%s", name);
  f.dtype = t;
  f.rank = rank;
  f.shape[0] = d0;
  f.shape[1] = d1;
  return f;
}

static df_param prm(const char *name, df_param_kind kind, int32_t type) {
  df_param q;
  memset(&q, 0, sizeof q);
  snprintf(q.name, sizeof q.name, "%s", name);
  q.kind = kind;
  q.type = type;
  return q;
}

/* The attention pipeline with knobs: an associative (two-argument) reducer,
   optional reduce/finalize stages, the partial's range axis. */
static df_program *attention_variant(bool assoc, bool with_reduce, bool with_finalize,
                                     const char *axis) {
  df_program *g;
  assert_int_equal(df_program_create(NULL, "attention_variant", &g).code, DF_OK);
  assert_int_equal(df_program_add_axis(g, "batch").code, DF_OK);
  assert_int_equal(df_program_add_range(g, "kv", "seq_lens").code, DF_OK);
  df_field f[2] = {fld("lse", DF_DTYPE_FLOAT32, 0, 0, 0), fld("o", DF_DTYPE_FLOAT16, 2, 2, 8)};
  int32_t t, o_split, o_comb, o_fin;
  assert_int_equal(df_program_add_type(g, "AttnInter", 2, f, &t).code, DF_OK);
  df_param sk[1] = {prm("seq", DF_PARAM_SCALAR, -1)};
  df_param list[1] = {prm("items", DF_PARAM_INTER_LIST, t)};
  df_param pair[2] = {prm("a", DF_PARAM_INTER, t), prm("b", DF_PARAM_INTER, t)};
  df_param fz[1] = {prm("inter", DF_PARAM_INTER, t)};
  assert_int_equal(df_program_add_operator(g, "split_kv", DF_OPK_ITER, 1, sk, t, &o_split).code,
                   DF_OK);
  assert_int_equal(df_program_add_operator(g, "combine", DF_OPK_REDUCE, assoc ? 2 : 1,
                                           assoc ? pair : list, t, &o_comb)
                       .code,
                   DF_OK);
  assert_int_equal(df_program_add_operator(g, "finalize", DF_OPK_FINALIZE, 1, fz, -1, &o_fin).code,
                   DF_OK);
  df_stage st;
  memset(&st, 0, sizeof st);
  snprintf(st.name, sizeof st.name, "partial");
  st.kind = DF_STAGE_MAP;
  st.op = o_split;
  st.input = -1;
  snprintf(st.range_axis, sizeof st.range_axis, "%s", axis);
  st.type = t;
  st.logical_type = -1;
  assert_int_equal(df_program_add_stage(g, &st, NULL).code, DF_OK);
  if (with_reduce) {
    snprintf(st.name, sizeof st.name, "reduce");
    st.kind = DF_STAGE_REDUCE;
    st.op = o_comb;
    st.input = 0;
    st.range_axis[0] = '\0';
    assert_int_equal(df_program_add_stage(g, &st, NULL).code, DF_OK);
  }
  if (with_finalize) {
    snprintf(st.name, sizeof st.name, "finalize");
    st.kind = DF_STAGE_FINALIZE;
    st.op = o_fin;
    st.input = (int32_t)g->stage_count - 1;
    st.range_axis[0] = '\0';
    st.type = -1;
    assert_int_equal(df_program_add_stage(g, &st, NULL).code, DF_OK);
  }
  assert_int_equal(df_program_validate(g).code, DF_OK);
  return g;
}

static df_plan *schedule_ok(const df_program *g, const df_schedule_options *o) {
  df_plan *p = NULL;
  df_status s = df_schedule(g, o, &p);
  if (s.code != DF_OK) {
    print_error("df_schedule failed: %s\n", s.message);
    fail();
  }
  return p;
}

static void streaming_tree_pairs_leaves(void **state) {
  (void)state;
  df_program *g = attention_variant(true, true, true, "kv");
  static const uint32_t kv[1] = {512};
  df_schedule_options o = options(4, 4, kv, 1, 128);
  o.policy = DF_POLICY_CLUSTER_LOCAL;
  o.strategy = DF_REDUCE_STREAMING_TREE;
  o.include_exit = false;
  df_plan *p = schedule_ok(g, &o);
  static const want_instr w[] = {
      {DF_INSTR_ITER, 0, 0, 0, 128, 0, {0}, 0},
      {DF_INSTR_REDUCE_UPDATE, 0, 0, 0, 0, 1, {0}, 1},
      {DF_INSTR_ITER, 0, 1, 128, 256, 0, {0}, 2},
      {DF_INSTR_REDUCE_UPDATE, 0, 1, 0, 0, 1, {2}, 3},
      {DF_INSTR_ITER, 0, 2, 256, 384, 0, {0}, 4},
      {DF_INSTR_REDUCE_UPDATE, 0, 2, 0, 0, 1, {4}, 5},
      {DF_INSTR_ITER, 0, 3, 384, 512, 0, {0}, 6},
      {DF_INSTR_REDUCE_UPDATE, 0, 3, 0, 0, 1, {6}, 7},
      {DF_INSTR_REDUCE_UPDATE, 0, 0, 0, 0, 2, {1, 3}, 8},
      {DF_INSTR_REDUCE_UPDATE, 0, 2, 0, 0, 2, {5, 7}, 9},
      {DF_INSTR_REDUCE_UPDATE, 0, 0, 0, 0, 2, {8, 9}, 10},
      {DF_INSTR_FINALIZE, 0, 0, 0, 0, 1, {10}, S},
  };
  check_instrs(p, w, N(w));
  static const want_comm c[] = {
      {DF_COMM_CLUSTER_SEND, 3, 8, 3, 3, 1, 0, 0, 1},
      {DF_COMM_CLUSTER_RECV, 3, 8, 3, 3, 1, 0, 1, 1},
      {DF_COMM_CLUSTER_SEND, 7, 9, 7, 7, 3, 2, 2, 1},
      {DF_COMM_CLUSTER_RECV, 7, 9, 7, 7, 3, 2, 3, 1},
      {DF_COMM_CLUSTER_SEND, 9, 10, 9, 9, 2, 0, 0, 1},
      {DF_COMM_CLUSTER_RECV, 9, 10, 9, 9, 2, 0, 2, 1},
  };
  check_comms(p, c, N(c));
  static const uint32_t off[] = {0, 5, 7, 10}, len[] = {5, 2, 3, 2};
  static const uint32_t ids[] = {0, 1, 8, 10, 11, 2, 3, 4, 5, 9, 6, 7};
  check_queues(p, off, len, ids, N(ids));
  for (uint32_t i = 0; i < p->slot_count; i++)
    assert_int_equal(p->slots[i].shared_storage, p->slots[i].role == DF_ROLE_PARTIAL ? 0 : S);
  assert_int_equal(p->instrs[1].variant.arity, DF_ARITY_PASSTHROUGH);
  assert_int_equal(p->instrs[8].variant.arity, DF_ARITY_BINARY);
  assert_int_equal(p->strategy, DF_REDUCE_STREAMING_TREE);
  df_plan_destroy(p);
  df_program_destroy(g);
}

/* Three leaves: (0,1) pair, leaf 2 carried up to the root level. */
static void streaming_tree_carries_odd_leaf(void **state) {
  (void)state;
  df_program *g = attention_variant(true, true, true, "kv");
  static const uint32_t kv[2] = {384, 64};
  df_schedule_options o = options(4, 4, kv, 2, 128);
  o.policy = DF_POLICY_CLUSTER_LOCAL;
  o.strategy = DF_REDUCE_STREAMING_TREE;
  o.include_exit = false;
  df_plan *p = schedule_ok(g, &o);
  /* 4 blocks on 4 SMs: task 0 on SMs 0-2, task 1 on SM 3 */
  static const want_instr w[] = {
      {DF_INSTR_ITER, 0, 0, 0, 128, 0, {0}, 0},
      {DF_INSTR_REDUCE_UPDATE, 0, 0, 0, 0, 1, {0}, 1},
      {DF_INSTR_ITER, 0, 1, 128, 256, 0, {0}, 2},
      {DF_INSTR_REDUCE_UPDATE, 0, 1, 0, 0, 1, {2}, 3},
      {DF_INSTR_ITER, 0, 2, 256, 384, 0, {0}, 4},
      {DF_INSTR_REDUCE_UPDATE, 0, 2, 0, 0, 1, {4}, 5},
      {DF_INSTR_REDUCE_UPDATE, 0, 0, 0, 0, 2, {1, 3}, 6},
      {DF_INSTR_REDUCE_UPDATE, 0, 0, 0, 0, 2, {6, 5}, 7},
      {DF_INSTR_FINALIZE, 0, 0, 0, 0, 1, {7}, S},
      {DF_INSTR_ITER, 1, 3, 0, 64, 0, {0}, 8},
      {DF_INSTR_REDUCE_UPDATE, 1, 3, 0, 0, 1, {8}, 9},
      {DF_INSTR_FINALIZE, 1, 3, 0, 0, 1, {9}, S},
  };
  check_instrs(p, w, N(w));
  assert_int_equal(p->comm_count, 4);
  assert_int_equal(p->comms[2].src_instr, 5);
  assert_int_equal(p->comms[2].dst_instr, 7);
  /* SM0 queue: level 0 leaf, level 1 node, level 2 root + finalize */
  static const uint32_t off[] = {0, 5, 7, 9}, len[] = {5, 2, 2, 3};
  static const uint32_t ids[] = {0, 1, 6, 7, 8, 2, 3, 4, 5, 9, 10, 11};
  check_queues(p, off, len, ids, N(ids));
  df_plan_destroy(p);
  df_program_destroy(g);
}

/* ---- iter-range variants (seed iter specialization test) ------------------------------- */

static void iter_variants_follow_buckets_and_exact_lengths(void **state) {
  (void)state;
  df_program *g = seed_attention_program();
  /* 16..128 step 16 plus 17, 23, 47, shuffled */
  static const uint32_t kv[11] = {64, 17, 128, 32, 23, 16, 96, 47, 80, 112, 48};
  df_schedule_options o = options(4, 2, kv, 11, 128);
  o.extent_count = 1;
  o.extents[0] = 11;
  assert_int_equal(df_iter_buckets_parse("1,2,3,4,5,6,7,8,generic", &o.buckets).code, DF_OK);
  o.bucket_size = 16;
  assert_int_equal(df_exact_lengths_parse("17,23,47", &o.exact_lengths).code, DF_OK);
  df_plan *p = schedule_ok(g, &o);
  df_variant seen[16];
  uint32_t n_seen = 0;
  for (uint32_t i = 0; i < p->instr_count; i++) {
    const df_instr *in = &p->instrs[i];
    if (in->op != DF_INSTR_ITER)
      continue;
    assert_true(in->has_variant && in->has_identity);
    assert_int_equal(in->variant.base.operator_id, 0); /* one binding key */
    assert_int_equal(in->variant.base.kind, DF_OPK_ITER);
    uint32_t len = in->range_end - in->range_begin;
    bool exact = len == 17 || len == 23 || len == 47;
    assert_int_equal(in->variant.iter_mode, exact ? DF_ITER_EXACT_LENGTH : DF_ITER_TILE_COUNT);
    assert_int_equal(in->variant.iter_value, exact ? len : len / 16);
    bool dup = false;
    for (uint32_t k = 0; k < n_seen; k++)
      dup |= df_variant_equal(&seen[k], &in->variant);
    if (!dup)
      seen[n_seen++] = in->variant;
  }
  assert_int_equal(n_seen, 11);
  uint32_t tiles = 0, exacts = 0;
  for (uint32_t k = 0; k < n_seen; k++) {
    if (seen[k].iter_mode == DF_ITER_TILE_COUNT)
      tiles |= 1u << seen[k].iter_value;
    else
      exacts += seen[k].iter_value;
  }
  assert_int_equal(tiles, 0x1FE); /* tile counts 1..8 */
  assert_int_equal(exacts, 17 + 23 + 47);
  df_plan_destroy(p);
  /* without bucket options every ITER is generic */
  df_schedule_options plain = options(4, 2, kv, 11, 128);
  p = schedule_ok(g, &plain);
  for (uint32_t i = 0; i < p->instr_count; i++)
    if (p->instrs[i].op == DF_INSTR_ITER)
      assert_int_equal(p->instrs[i].variant.iter_mode, DF_ITER_GENERIC);
  df_plan_destroy(p);
  /* bucket size defaults to block_size: 64 = 1 tile of 64 */
  df_schedule_options def = options(4, 2, kv, 11, 64);
  assert_int_equal(df_iter_buckets_parse("auto", &def.buckets).code, DF_OK);
  p = schedule_ok(g, &def);
  assert_int_equal(p->instrs[0].range_end, 64);
  assert_int_equal(p->instrs[0].variant.iter_mode, DF_ITER_TILE_COUNT);
  assert_int_equal(p->instrs[0].variant.iter_value, 1);
  df_plan_destroy(p);
  df_program_destroy(g);
}

/* ---- option effects ------------------------------------------------------------------ */

static void partial_only_force_hbm_offsets_no_exit(void **state) {
  (void)state;
  df_program *g = seed_attention_program();
  static const uint32_t kv[2] = {384, 256}, off[2] = {1000, 7};
  df_schedule_options o = options(4, 2, kv, 2, 128);
  o.partial_only = true;
  df_plan *p = schedule_ok(g, &o);
  assert_int_equal(p->instr_count, 5 + 4);
  assert_int_equal(p->slot_count, 5);
  assert_int_equal(p->comm_count, 0);
  for (uint32_t i = 0; i < 5; i++)
    assert_int_equal(p->instrs[i].op, DF_INSTR_ITER);
  df_plan_destroy(p);

  o = options(4, 2, kv, 2, 128);
  o.force_hbm_comms = true;
  o.include_exit = false;
  o.ranges[0].offsets = off;
  p = schedule_ok(g, &o);
  assert_int_equal(p->instr_count, 9);
  assert_int_equal(p->comms[0].kind, DF_COMM_HBM_SEND);
  assert_int_equal(p->comms[0].peer_cta_rank, S);
  assert_int_equal(p->comms[0].flag_epoch, 1);
  assert_int_equal(p->comms[1].kind, DF_COMM_HBM_RECV);
  assert_int_equal(p->comms[4].flag_epoch, 2);
  assert_int_equal(p->instrs[0].range_begin, 1000);
  assert_int_equal(p->instrs[0].range_end, 1128);
  assert_int_equal(p->instrs[2].range_end, 1384);
  assert_int_equal(p->instrs[6].range_begin, 135);
  assert_int_equal(p->instrs[6].range_end, 263);
  assert_int_equal(p->task_lengths[0], 384); /* lengths, not offsets */
  assert_int_equal(p->queue_id_count, 9);
  df_plan_destroy(p);
  df_program_destroy(g);
}

/* A pipeline without reduce/finalize schedules its ITERs only; one
   without a range axis on the partial uses the single range given. */
static void partial_only_programs(void **state) {
  (void)state;
  static const uint32_t kv[1] = {300};
  df_program *g = attention_variant(false, false, false, "");
  df_schedule_options o = options(2, 1, kv, 1, 128);
  o.ranges[0].axis = "anything";
  df_plan *p = schedule_ok(g, &o);
  assert_int_equal(p->instr_count, 3 + 2);
  assert_int_equal(p->instrs[2].range_end, 300);
  assert_string_equal(p->range_axis, "anything");
  df_plan_destroy(p);
  df_program_destroy(g);
  g = attention_variant(false, true, false, "kv");
  o = options(2, 1, kv, 1, 128);
  p = schedule_ok(g, &o);
  assert_int_equal(p->instr_count, 3 + 1 + 2); /* no FINALIZE */
  assert_int_equal(p->instrs[3].op, DF_INSTR_REDUCE);
  df_plan_destroy(p);
  o.strategy = DF_REDUCE_STREAMING;
  o.policy = DF_POLICY_CLUSTER_LOCAL;
  p = schedule_ok(g, &o);
  assert_int_equal(p->instrs[p->instr_count - 3].op, DF_INSTR_REDUCE_UPDATE);
  df_plan_destroy(p);
  df_program_destroy(g);
}

/* ---- bad inputs ---------------------------------------------------------------------- */

static void expect_schedule_error(const df_program *g, const df_schedule_options *o,
                                  df_code code, const char *fragment) {
  df_plan *p = (df_plan *)(uintptr_t)1;
  df_status s = df_schedule(g, o, &p);
  if (s.code != code || !strstr(s.message, fragment)) {
    print_error("expected code %d with \"%s\", got %d \"%s\"\n", code, fragment, s.code,
                s.message);
    fail();
  }
  assert_null(p);
}

static void option_errors(void **state) {
  (void)state;
  df_program *g = seed_attention_program();
  static const uint32_t kv[2] = {384, 256}, zero[2] = {384, 0}, big_off[2] = {UINT32_MAX, 0};
  df_schedule_options o = options(4, 2, kv, 2, 128);
  assert_int_equal(df_schedule(g, &o, NULL).code, DF_EINVAL);
  expect_schedule_error(NULL, &o, DF_EINVAL, "program and options are required");
  expect_schedule_error(g, NULL, DF_EINVAL, "program and options are required");
  o.topology.sm_count = 0;
  expect_schedule_error(g, &o, DF_EINVAL, "sm_count must be positive");
  o = options(4, 8, kv, 2, 128);
  expect_schedule_error(g, &o, DF_EINVAL, "cluster_size 8 must not exceed sm_count 4");
  o = options(4, 2, kv, 2, 0);
  expect_schedule_error(g, &o, DF_EINVAL, "Dataflow block_size must be positive, got 0");
  o = options(4, 2, kv, 2, 128);
  o.range_count = 0;
  expect_schedule_error(g, &o, DF_EINVAL, "Dataflow range_lengths must not be empty");
  o.range_count = DF_MAX_AXES + 1;
  expect_schedule_error(g, &o, DF_EINVAL, "range_lengths has 9 axes");
  o = options(4, 2, kv, 0, 128);
  expect_schedule_error(g, &o, DF_EINVAL,
                        "Dataflow range_lengths['kv'] must contain at least one length");
  o = options(4, 2, zero, 2, 128);
  expect_schedule_error(g, &o, DF_EINVAL, "must contain positive integers, got 0 at index 1");
  o = options(4, 2, kv, 2, 128);
  o.ranges[0].axis = NULL;
  expect_schedule_error(g, &o, DF_EINVAL, "range_lengths entry 0 has no axis name");
  o = options(4, 2, kv, 2, 128);
  o.range_count = 2;
  o.ranges[1] = o.ranges[0];
  expect_schedule_error(g, &o, DF_EINVAL, "names axis 'kv' twice");
  o = options(4, 2, kv, 2, 128);
  o.ranges[0].axis = "q";
  expect_schedule_error(g, &o, DF_EINVAL, "Dataflow range_lengths must include the range axis 'kv'");
  o = options(4, 2, kv, 2, 128);
  o.ranges[0].offsets = big_off;
  expect_schedule_error(g, &o, DF_EINVAL, "range_offsets['kv'][0]");
  df_program_destroy(g);
}

static void extent_and_list_errors(void **state) {
  (void)state;
  df_program *g = seed_attention_program();
  static const uint32_t kv[2] = {384, 256};
  df_schedule_options o = options(4, 2, kv, 2, 128);
  o.extent_count = 2;
  o.extents[0] = 2;
  o.extents[1] = 2;
  expect_schedule_error(g, &o, DF_EINVAL,
                        "Dataflow task_extents product 4 must equal the task count 2");
  o.extents[1] = 0;
  expect_schedule_error(g, &o, DF_EINVAL,
                        "task_extents must contain positive integers, got 0 at index 1");
  o.extent_count = DF_MAX_AXES + 1;
  expect_schedule_error(g, &o, DF_EINVAL, "task_extents has 9 entries");
  /* the seed's (2,) extents for a 2-axis domain: only the product counts */
  o = options(4, 2, kv, 2, 128);
  o.extent_count = 2;
  o.extents[0] = 1;
  o.extents[1] = 2;
  df_plan *p = schedule_ok(g, &o);
  uint32_t coords[DF_MAX_AXES];
  assert_int_equal(df_plan_task_coords(p, 1, coords), 2);
  assert_int_equal(coords[0], 0);
  assert_int_equal(coords[1], 1);
  df_plan_destroy(p);
  o = options(4, 2, kv, 2, 128);
  o.buckets.enabled = true;
  o.buckets.count = 2;
  o.buckets.values[0] = 4;
  o.buckets.values[1] = 2;
  expect_schedule_error(g, &o, DF_EINVAL,
                        "iter_range_buckets must be sorted unique positive integers; entry 1");
  o = options(4, 2, kv, 2, 128);
  o.exact_lengths.count = 1;
  o.exact_lengths.values[0] = 0;
  expect_schedule_error(g, &o, DF_EINVAL, "iter_range_exact_lengths must be sorted unique");
  o.exact_lengths.count = 65;
  expect_schedule_error(g, &o, DF_EINVAL, "iter_range_exact_lengths has 65 entries");
  df_program_destroy(g);
}

static void policy_errors(void **state) {
  (void)state;
  df_program *g = seed_attention_program();
  static const uint32_t kv[2] = {384, 256};
  df_schedule_options o = options(4, 2, kv, 2, 128);
  o.strategy = DF_REDUCE_STREAMING;
  expect_schedule_error(g, &o, DF_EINVAL,
                        "Dataflow scheduler policy 'round_robin' supports reduce strategies "
                        "('all_at_once',), got 'streaming'");
  o.strategy = DF_REDUCE_STREAMING_TREE;
  expect_schedule_error(g, &o, DF_EINVAL, "('all_at_once',), got 'streaming_tree'");
  o.policy = DF_POLICY_STAGE_GRAPH;
  expect_schedule_error(g, &o, DF_EINVAL,
                        "Dataflow scheduler_policy must be one of ('round_robin', "
                        "'cluster_local'), got 'stage_graph'");
  o.policy = DF_POLICY_CLUSTER_LOCAL;
  o.strategy = DF_REDUCE_NONE;
  expect_schedule_error(g, &o, DF_EINVAL,
                        "Dataflow reduce_strategy must be one of ('all_at_once', 'streaming', "
                        "'streaming_tree'), got 'none'");
  o.strategy = DF_REDUCE_STREAMING_TREE;
  expect_schedule_error(g, &o, DF_EINVAL,
                        "'streaming_tree' requires an associative reducer; 'combine'");
  df_program_destroy(g);
  g = attention_variant(true, false, false, "kv");
  expect_schedule_error(g, &o, DF_EINVAL, "'streaming_tree' needs a reduce stage");
  df_program_destroy(g);
  g = attention_variant(false, false, true, "kv");
  o = options(4, 2, kv, 2, 128);
  expect_schedule_error(g, &o, DF_EUNSUPPORTED, "finalize without a reduce stage");
  o.partial_only = true; /* fine when only partials are wanted */
  df_plan *p = schedule_ok(g, &o);
  df_plan_destroy(p);
  df_program_destroy(g);
  g = attention_variant(false, true, true, "");
  o = options(4, 2, kv, 2, 128);
  o.range_count = 2;
  o.ranges[1] = (df_range_lengths){"other", 2, kv, NULL};
  expect_schedule_error(g, &o, DF_EINVAL,
                        "must have exactly one entry when the partial stage has no range_axis, "
                        "got 2");
  df_program_destroy(g);
  df_program *bad;
  assert_int_equal(df_program_create(NULL, "empty", &bad).code, DF_OK);
  o = options(4, 2, kv, 2, 128);
  expect_schedule_error(bad, &o, DF_EINVAL, "task_domain must contain at least one axis");
  df_program_destroy(bad);
}

static df_schedule_options moe_options(uint32_t sms, uint32_t cs, const uint32_t *e,
                                       uint32_t ne, const uint32_t *h, uint32_t nh) {
  df_schedule_options o = df_schedule_options_default();
  o.topology = (df_topology){sms, cs};
  o.block_size = 128;
  o.range_count = 2;
  o.ranges[0] = (df_range_lengths){"expert_tile", ne, e, NULL};
  o.ranges[1] = (df_range_lengths){"hidden_tile", nh, h, NULL};
  return o;
}

static void stage_graph_errors(void **state) {
  (void)state;
  df_program *g = seed_moe_program();
  static const uint32_t e[2] = {256, 256}, h[2] = {256, 256}, odd[1] = {255};
  df_schedule_options o = moe_options(6, 4, e, 1, h, 1);
  expect_schedule_error(g, &o, DF_EINVAL,
                        "requires sm_count 6 to be a multiple of cluster_size 4");
  o = moe_options(4, 2, odd, 1, h, 1);
  expect_schedule_error(g, &o, DF_EINVAL,
                        "stage 'map1': range length 255 of task 0 must be divisible by "
                        "cluster_size 2");
  o = moe_options(4, 2, e, 1, odd, 1);
  expect_schedule_error(g, &o, DF_EINVAL, "stage 'map2': range length 255");
  o = moe_options(4, 2, e, 2, h, 1);
  expect_schedule_error(g, &o, DF_EINVAL, "must have equal task counts, got 2 and 1");
  o = moe_options(4, 2, e, 1, h, 1);
  o.range_count = 1;
  expect_schedule_error(g, &o, DF_EINVAL, "must include the range axis 'hidden_tile'");
  o = moe_options(4, 2, e, 1, h, 1);
  o.ranges[0].axis = "x";
  expect_schedule_error(g, &o, DF_EINVAL, "must include the range axis 'expert_tile'");
  o = moe_options(4, 2, e, 1, h, 1);
  o.extent_count = 1;
  o.extents[0] = 3;
  expect_schedule_error(g, &o, DF_EINVAL, "task_extents product 3 must equal the task count 1");
  o = moe_options(4, 4, e, 1, h, 1);
  expect_schedule_error(g, &o, DF_EINVAL,
                        "Dataflow reshared stage output_arity must match the number of map1 "
                        "output tiles: stage 'gather_up' has output_arity 2, map1 produces 4");
  o = moe_options(4, 2, e, 1, h, 1);
  g->stages[1].output_arity = 2;
  /* the ring is supported since issue 8; like all_gather it is cluster-only */
  snprintf(g->stages[1].policy, DF_NAME_MAX, "cluster_shared_pull_ring");
  o.force_hbm_comms = true;
  expect_schedule_error(g, &o, DF_EINVAL,
                        "policy 'cluster_shared_pull_ring' moves shards through cluster shared "
                        "memory (DSMEM) only and cannot be combined with force_hbm_comms");
  snprintf(g->stages[1].policy, DF_NAME_MAX, "cluster_shared_all_gather");
  expect_schedule_error(g, &o, DF_EINVAL, "cannot be combined with force_hbm_comms");
  o.force_hbm_comms = false;
  df_plan *p = schedule_ok(g, &o);
  assert_int_equal(p->comm_count, 4);
  assert_int_equal(p->comms[0].kind, DF_COMM_CLUSTER_SEND);
  df_plan_destroy(p);
  /* range offsets move both maps' shards */
  static const uint32_t off[1] = {1000};
  o = moe_options(4, 2, e, 1, h, 1);
  o.ranges[1].offsets = off;
  p = schedule_ok(g, &o);
  assert_int_equal(p->instrs[0].range_begin, 0);
  assert_int_equal(p->instrs[4].range_begin, 1000);
  assert_int_equal(p->instrs[5].range_end, 1128);
  df_plan_destroy(p);
  static const uint32_t huge[1] = {UINT32_MAX};
  o.ranges[0].offsets = huge;
  expect_schedule_error(g, &o, DF_EINVAL, "range_offsets['expert_tile'][0]");
  df_program_destroy(g);
}

/* ---- handler attachment on hand-edited plans ------------------------------------------ */

static void attach_recovers_identities_by_opcode(void **state) {
  (void)state;
  df_plan *ref = seed_make_plan();
  df_plan *p;
  assert_int_equal(df_plan_clone(ref, &p).code, DF_OK);
  for (uint32_t i = 0; i < p->instr_count; i++) {
    p->instrs[i].has_identity = p->instrs[i].has_variant = false;
    p->instrs[i].stage = -1;
  }
  /* an explicit variant is kept (the packer rejects a wrong class) */
  assert_int_equal(df_variant_default((df_identity){1, DF_OPK_REDUCE}, 3, &p->instrs[7].variant)
                       .code,
                   DF_OK);
  p->instrs[7].has_variant = true;
  /* an identity without a variant gets the default of its arity */
  p->instrs[3].has_identity = true;
  p->instrs[3].identity = (df_identity){1, DF_OPK_REDUCE};
  /* EXIT never carries a handler */
  p->instrs[9].has_identity = true;
  assert_int_equal(df_plan_attach_handlers(p).code, DF_OK);
  for (uint32_t i = 0; i < p->instr_count; i++) {
    assert_int_equal(p->instrs[i].has_identity, ref->instrs[i].has_identity);
    if (!ref->instrs[i].has_identity)
      continue;
    assert_int_equal(p->instrs[i].identity.operator_id, ref->instrs[i].identity.operator_id);
    assert_int_equal(p->instrs[i].identity.kind, ref->instrs[i].identity.kind);
    if (i != 7)
      assert_true(df_variant_equal(&p->instrs[i].variant, &ref->instrs[i].variant));
  }
  assert_int_equal(p->instrs[7].variant.arity, DF_ARITY_GENERIC);
  df_plan_destroy(p);
  df_plan_destroy(ref);
}

static void attach_without_stages_leaves_legacy_instructions(void **state) {
  (void)state;
  df_plan *p;
  assert_int_equal(df_plan_create(NULL, (df_topology){2, 1}, &p).code, DF_OK);
  df_instr in = {.op = DF_INSTR_ITER, .task = 0, .sm = 0, .output_slot = S, .stage = -1};
  assert_int_equal(df_plan_add_instr(p, &in, NULL, 0, NULL).code, DF_OK);
  /* many stages: operator ids count call stages, reshared ones skipped */
  for (int i = 0; i < 20; i++) {
    df_plan_stage st;
    memset(&st, 0, sizeof st);
    snprintf(st.name, sizeof st.name, "s%d", i);
    st.kind = i == 3 ? DF_STAGE_RESHARED : DF_STAGE_MAP;
    if (i != 3)
      snprintf(st.op_name, sizeof st.op_name, "op%d", i);
    st.op_kind = i == 3 ? DF_OPK_NONE : DF_OPK_MAP;
    assert_int_equal(df_plan_add_stage(p, &st, NULL).code, DF_OK);
  }
  in.op = DF_INSTR_MAP;
  in.stage = 19;
  assert_int_equal(df_plan_add_instr(p, &in, NULL, 0, NULL).code, DF_OK);
  in.op = DF_INSTR_REDUCE; /* no reduce stage: legacy */
  in.stage = -1;
  assert_int_equal(df_plan_add_instr(p, &in, NULL, 0, NULL).code, DF_OK);
  assert_int_equal(df_plan_attach_handlers(p).code, DF_OK);
  assert_false(p->instrs[0].has_identity || p->instrs[0].has_variant);
  assert_true(p->instrs[1].has_identity && p->instrs[1].has_variant);
  assert_int_equal(p->instrs[1].identity.operator_id, 18);
  assert_int_equal(p->instrs[1].identity.kind, DF_OPK_MAP);
  assert_false(p->instrs[2].has_identity);
  /* an identity of kind none cannot get a default variant */
  p->instrs[2].has_identity = true;
  p->instrs[2].identity = (df_identity){0, DF_OPK_NONE};
  df_status s = df_plan_attach_handlers(p);
  assert_int_equal(s.code, DF_EINVAL);
  assert_non_null(strstr(s.message, "instruction 2 (reduce)"));
  df_plan_destroy(p);
}

/* ---- allocation failures ------------------------------------------------------------ */

typedef struct failing {
  long budget; /* allocations left before failing; < 0 = unlimited */
} failing;

static void *failing_realloc(void *user, void *ptr, size_t size) {
  failing *f = user;
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  if (f->budget == 0)
    return NULL;
  if (f->budget > 0)
    f->budget--;
  return realloc(ptr, size);
}

/* Fail the n-th allocation for n = 0, 1, ... until scheduling succeeds:
   every failure is DF_ENOMEM with no leak (checked under ASan). */
static void run_until_success(df_program *g, const df_schedule_options *o) {
  failing f = {-1};
  df_allocator saved = g->alloc;
  g->alloc = (df_allocator){failing_realloc, &f};
  for (long n = 0;; n++) {
    f.budget = n;
    df_plan *p = NULL;
    df_status s = df_schedule(g, o, &p);
    if (s.code == DF_OK) {
      assert_true(n > 3);
      df_plan_destroy(p);
      break;
    }
    assert_int_equal(s.code, DF_ENOMEM);
    assert_null(p);
  }
  g->alloc = saved;
}

static void allocation_failures_are_reported(void **state) {
  (void)state;
  static const uint32_t kv[3] = {384, 256, 1000};
  df_program *g = attention_variant(true, true, true, "kv");
  df_schedule_options o = options(4, 2, kv, 3, 128);
  run_until_success(g, &o);
  o.policy = DF_POLICY_CLUSTER_LOCAL;
  o.strategy = DF_REDUCE_STREAMING;
  run_until_success(g, &o);
  o.strategy = DF_REDUCE_STREAMING_TREE;
  run_until_success(g, &o);
  df_program_destroy(g);
  g = seed_moe_program();
  static const uint32_t e[1] = {256};
  df_schedule_options m = moe_options(4, 2, e, 1, e, 1);
  run_until_success(g, &m);
  df_program_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(make_plan_instructions),
      cmocka_unit_test(make_plan_slots),
      cmocka_unit_test(make_plan_comms_and_queues),
      cmocka_unit_test(defer_reduces_moves_iters_first),
      cmocka_unit_test(defer_reduces_keeps_local_reduces),
      cmocka_unit_test(balance_iters_places_by_load),
      cmocka_unit_test(even_split_cuts_total_evenly),
      cmocka_unit_test(even_split_tapers),
      cmocka_unit_test(even_split_tiles_ranges),
      cmocka_unit_test(even_split_errors),
      cmocka_unit_test(reduce_fan_in_builds_trees),
      cmocka_unit_test(reduce_spread_places_tree_reduces),
      cmocka_unit_test(reduce_sms_places_roots),
      cmocka_unit_test(make_plan_handlers),
      cmocka_unit_test(reshared_plan_instructions_and_slots),
      cmocka_unit_test(reshared_plan_comms_queues_handlers),
      cmocka_unit_test(reshared_cluster_transfers),
      cmocka_unit_test(peer_ranks_follow_cluster_rank),
      cmocka_unit_test(cluster_of_four_gathers_on_sm0),
      cmocka_unit_test(clusters_of_one_use_hbm_epochs),
      cmocka_unit_test(streaming_splits_tasks_over_cluster),
      cmocka_unit_test(streaming_orders_groups_by_priority),
      cmocka_unit_test(streaming_assigns_longest_first),
      cmocka_unit_test(streaming_tree_pairs_leaves),
      cmocka_unit_test(streaming_tree_carries_odd_leaf),
      cmocka_unit_test(iter_variants_follow_buckets_and_exact_lengths),
      cmocka_unit_test(partial_only_force_hbm_offsets_no_exit),
      cmocka_unit_test(partial_only_programs),
      cmocka_unit_test(option_errors),
      cmocka_unit_test(extent_and_list_errors),
      cmocka_unit_test(policy_errors),
      cmocka_unit_test(stage_graph_errors),
      cmocka_unit_test(attach_recovers_identities_by_opcode),
      cmocka_unit_test(attach_without_stages_leaves_legacy_instructions),
      cmocka_unit_test(allocation_failures_are_reported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
