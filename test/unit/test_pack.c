/* Packing: the packed records of REFERENCE 2.8-2.10 and every packing
   expectation of the seed runtime test, plus each packing error. */
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
#define N(a) (sizeof(a) / sizeof((a)[0]))

static df_packed *pack(const df_plan *p, const df_pack_options *o) {
  df_packed *k = NULL;
  df_status s = df_pack(p, o, NULL, &k);
  if (s.code != DF_OK)
    print_error("df_pack: %s\n", s.message);
  assert_int_equal(s.code, DF_OK);
  return k;
}

static void expect_words(const char *what, uint32_t index, const uint32_t *got,
                         const uint32_t *want, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if (got[i] != want[i]) {
      print_error("%s %u word %u: got %u, want %u\n", what, index, i, got[i], want[i]);
      fail();
    }
}

static df_plan *plan_4x4_cluster_local_512(void) {
  static const uint32_t kv[1] = {512};
  return seed_schedule_attention(4, 4, kv, 1, 128, DF_POLICY_CLUSTER_LOCAL,
                                 DF_REDUCE_ALL_AT_ONCE, true);
}

static df_plan *plan_256x2(uint32_t sms, uint32_t cluster, df_policy policy) {
  static const uint32_t kv[2] = {256, 256};
  return seed_schedule_attention(sms, cluster, kv, 2, 128, policy, DF_REDUCE_ALL_AT_ONCE, true);
}

/* ---- REFERENCE 2.8: the seed plan packed -------------------------------- */

static void seed_plan_tables_and_counts(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = pack(p, NULL);
  assert_int_equal(k->abi_version, DF_ABI_VERSION);
  assert_int_equal(sizeof(df_abi_instr), 32);
  assert_int_equal(sizeof(df_abi_slot), 32);
  assert_int_equal(sizeof(df_abi_comm), 48);
  assert_int_equal(sizeof(df_abi_args), 64);
  assert_int_equal(k->instr_count, 13);
  assert_int_equal(k->slot_count, 7);
  assert_int_equal(k->comm_count, 6);
  assert_int_equal(k->arg_count, 9);
  /* operator_table {split_kv:0, combine:1, finalize:2} */
  assert_int_equal(k->operator_count, 3);
  const char *ops[3] = {"split_kv", "combine", "finalize"};
  const df_op_kind op_kinds[3] = {DF_OPK_ITER, DF_OPK_REDUCE, DF_OPK_FINALIZE};
  for (uint32_t i = 0; i < 3; i++) {
    assert_string_equal(k->operators[i].name, ops[i]);
    assert_int_equal(k->operators[i].index, i);
    assert_int_equal(k->operators[i].kind, op_kinds[i]);
  }
  /* identities (0,iter) (1,reduce) (2,finalize) (1,reduce); variants
     iter/generic, reduce/generic, none, reduce/binary */
  assert_int_equal(k->handler_count, 4);
  assert_int_equal(k->primary_handler_count, 3);
  const uint32_t ids[4] = {0, 1, 2, 1};
  const df_op_kind kinds[4] = {DF_OPK_ITER, DF_OPK_REDUCE, DF_OPK_FINALIZE, DF_OPK_REDUCE};
  for (uint32_t h = 0; h < 4; h++) {
    const df_handler *hd = &k->handlers[h];
    assert_int_equal(hd->id, h);
    assert_true(hd->has_identity && hd->has_variant);
    assert_int_equal(hd->identity.operator_id, ids[h]);
    assert_int_equal(hd->identity.kind, kinds[h]);
    assert_int_equal(hd->kind, kinds[h]);
    assert_int_equal(hd->primary, h < 3);
  }
  assert_true(k->handlers[0].variant.has_iter && !k->handlers[0].variant.has_arity);
  assert_int_equal(k->handlers[0].variant.iter_mode, DF_ITER_GENERIC);
  assert_true(k->handlers[1].variant.has_arity && !k->handlers[1].variant.has_iter);
  assert_int_equal(k->handlers[1].variant.arity, DF_ARITY_GENERIC);
  assert_false(k->handlers[2].variant.has_iter || k->handlers[2].variant.has_arity);
  assert_int_equal(k->handlers[3].variant.arity, DF_ARITY_BINARY);
  assert_string_equal(k->handlers[0].symbol, "dataflow_handler_0_split_kv");
  assert_string_equal(k->handlers[3].symbol, "dataflow_handler_3_combine");
  /* intermediate_type_table {AttnInter: 0} */
  assert_int_equal(k->type_count, 1);
  assert_string_equal(k->types[0].name, "AttnInter");
  assert_int_equal(k->types[0].index, 0);
  const uint32_t qo[4] = {0, 5, 7, 9}, ql[4] = {5, 2, 2, 4};
  expect_words("queue_offsets", 0, k->queue_offsets, qo, 4);
  expect_words("queue_lengths", 0, k->queue_lengths, ql, 4);
  const uint32_t in[7] = {0, 1, 2, 3, 4, 5, 6};
  assert_int_equal(k->input_slot_count, 7);
  expect_words("input_slots", 0, k->input_slots, in, 7);
  const uint32_t tc[9] = {0, 0, 0, 1, 0, 0, 1, 1, 1};
  assert_int_equal(k->task_coord_count, 9);
  expect_words("task_coords", 0, k->task_coords, tc, 9);
  const uint32_t order[13] = {0, 3, 4, 6, 9, 1, 10, 2, 11, 5, 7, 8, 12};
  expect_words("pack_order", 0, k->pack_order, order, 13);
  assert_int_equal(strlen(k->fingerprint), 64);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void seed_plan_instruction_records(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = pack(p, NULL);
  /* (opcode, handler, task, arg_off, comm_off, comm_cnt, slot, flags) */
  static const uint32_t want[13][8] = {
      {1, 0, 0, 0, 0, 0, 0, 0},       {2, 1, 0, 64, 0, 2, 3, 1},
      {3, 2, 0, 128, 0, 0, 3, 0},     {1, 0, 1, 192, 2, 1, 5, 0},
      {0, S, S, S, 0, 0, S, 0},       {1, 0, 0, 256, 3, 1, 1, 65536},
      {0, S, S, S, 0, 0, S, 0},       {1, 0, 0, 320, 4, 1, 2, 0},
      {0, S, S, S, 0, 0, S, 0},       {1, 0, 1, 384, 0, 0, 4, 0},
      {2, 3, 1, 448, 5, 1, 6, 0},     {3, 2, 1, 512, 0, 0, 6, 0},
      {0, S, S, S, 0, 0, S, 0}};
  for (uint32_t i = 0; i < 13; i++)
    expect_words("instruction", i, (const uint32_t *)&k->instrs[i], want[i], 8);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void seed_plan_args_records(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = pack(p, NULL);
  static const uint32_t want[9][8] = {
      {0, 0, 1, 0, 128, 0, 0, 0}, {0, 1, 1, 0, 0, 0, 3, 3},     {0, 2, 1, 0, 0, 3, 1, S},
      {1, 3, 1, 128, 256, 4, 0, 5}, {0, 4, 1, 128, 256, 4, 0, 1}, {0, 5, 1, 256, 384, 4, 0, 2},
      {1, 6, 1, 0, 128, 4, 0, 4}, {1, 7, 1, 0, 0, 4, 2, 6},     {1, 8, 1, 0, 0, 6, 1, S}};
  static const uint32_t tail[8] = {S, S, S, 0, S, 0, 0, 0};
  for (uint32_t i = 0; i < 9; i++) {
    const uint32_t *w = (const uint32_t *)&k->args[i];
    expect_words("args", i, w, want[i], 8);
    expect_words("args tail", i, w + 8, tail, 8);
  }
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void seed_plan_comm_records(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = pack(p, NULL);
  /* kind, src, dst, peer, phase, flag_idx, epoch, barrier, off, cnt, seg, segs */
  static const uint32_t want[6][12] = {
      {2, 1, 1, 1, 0, S, 0, S, 0, 0, 0, 1}, {4, 2, 2, S, 0, S, 1, 1, 0, 0, 0, 1},
      {3, 5, 5, S, 0, S, 2, S, 0, 0, 0, 1}, {1, 1, 1, 0, 0, S, 0, S, 0, 0, 0, 1},
      {3, 2, 2, S, 0, S, 1, S, 0, 0, 0, 1}, {4, 5, 5, S, 0, S, 2, 0, 0, 0, 0, 1}};
  for (uint32_t i = 0; i < 6; i++)
    expect_words("comm", i, (const uint32_t *)&k->comms[i], want[i], 12);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void seed_plan_slot_records(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = pack(p, NULL);
  static const uint32_t want[7][8] = {
      {0, 0, 48, 0, S, 0, 0, 0},       {48, 48, 48, 1, 0, 1, 0, 0},
      {96, 96, 48, 2, 1, 2, 0, 0},     {144, 144, 48, 3, S, 0, 0, 0},
      {192, 192, 48, 4, S, 3, 0, 0},   {240, 240, 48, 5, 0, 0, 0, 0},
      {288, 288, 48, 6, S, 3, 0, 0}};
  for (uint32_t i = 0; i < 7; i++)
    expect_words("slot", i, (const uint32_t *)&k->slots[i], want[i], 8);
  assert_int_equal(k->shared_slot_bytes, 336);
  assert_int_equal(k->global_staging_bytes, 336);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void seed_plan_launch_package(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = pack(p, NULL);
  const df_launch_package *l = &k->launch;
  assert_int_equal(l->abi_version, DF_ABI_VERSION);
  assert_int_equal(l->sm_count, 4);
  assert_int_equal(l->cluster_size, 2);
  assert_int_equal(l->barrier_count, 2);
  assert_int_equal(l->barrier_bytes, 16);
  assert_int_equal(l->cluster_ack_count, 0);
  assert_int_equal(l->cluster_ack_barrier_bytes, 0);
  assert_int_equal(l->cluster_ack_pending_bytes, 0);
  assert_int_equal(l->hbm_recv_state_bytes, 4);
  assert_int_equal(l->shared_control_bytes, 20);
  assert_int_equal(l->shared_slot_base_offset, 32);
  assert_int_equal(l->shared_slot_bytes, 336);
  assert_int_equal(l->shared_memory_bytes, 368);
  assert_int_equal(l->global_staging_bytes, 336);
  assert_int_equal(l->flag_count, 7);
  assert_int_equal(l->flags_bytes, 28);
  assert_int_equal(l->slot_count, 7);
  assert_int_equal(l->comm_count, 6);
  assert_int_equal(l->arg_count, 9);
  assert_int_equal(l->instruction_count, 13);
  assert_int_equal(l->scratch_slot_count, 0);
  assert_int_equal(l->scratch_bytes, 0);
  assert_int_equal(l->cluster_inbox_offset, 0);
  assert_int_equal(l->cluster_inbox_bytes, 0);
  assert_true(l->needs_flag_reset);
  const uint32_t off[4] = {0, 2, 2, 2}, len[4] = {2, 0, 0, 1}, idx[3] = {0, 1, 0};
  expect_words("barrier_init_offsets", 0, l->barrier_init_offsets, off, 4);
  expect_words("barrier_init_lengths", 0, l->barrier_init_lengths, len, 4);
  assert_int_equal(l->barrier_init_count, 3);
  expect_words("barrier_init_indices", 0, l->barrier_init_indices, idx, 3);
  /* the barrier count of the launch package is the allocation's */
  assert_int_equal(k->barriers.barrier_count, l->barrier_count);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* Records a blob could carry that would make the launch package lie:
   flags whose bytes pass uint32 (the runtime would allocate a few bytes
   and the kernel write gigabytes past them) and a comm in two
   instructions' blocks (the barrier-init lists hold one entry per comm). */
static void launch_package_refuses_overflows(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = pack(p, NULL);
  df_launch_package l;
  uint32_t saved = k->slots[0].flag_index;
  k->slots[0].flag_index = 0x40000000u;
  df_status st = df_launch_package_build(k, &l);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "past uint32"));
  k->slots[0].flag_index = saved;
  uint32_t a = DF_SENTINEL, b = DF_SENTINEL;
  for (uint32_t i = 0; i < k->instr_count; i++)
    if (k->instrs[i].comm_count)
      a == DF_SENTINEL ? (a = i) : (b = b == DF_SENTINEL ? i : b);
  assert_int_not_equal(b, DF_SENTINEL);
  uint32_t off = k->instrs[b].comm_offset, n = k->instrs[b].comm_count;
  k->instrs[b].comm_offset = k->instrs[a].comm_offset;
  k->instrs[b].comm_count = 1;
  st = df_launch_package_build(k, &l);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "each comm belongs to one instruction"));
  k->instrs[b].comm_offset = off;
  k->instrs[b].comm_count = n;
  assert_int_equal(df_launch_package_build(k, &l).code, DF_OK);
  df_launch_package_free(&l, NULL);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* ---- reuse_hbm_flags -------------------------------------------------- */

static void reuse_hbm_flags_orders_epochs_by_first_appearance(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_pack_options o;
  memset(&o, 0, sizeof o);
  o.layout.reuse_hbm_flags = true;
  df_packed *k = pack(p, &o);
  df_packed *base = pack(p, NULL);
  for (uint32_t i = 0; i < k->slot_count; i++)
    assert_int_equal(k->slots[i].flag_index, 0);
  /* packed HBM comms: #1 recv I2->I3, #2 send I6->I7, #4 send I2->I3,
     #5 recv I6->I7 */
  const uint32_t hbm[4] = {1, 2, 4, 5}, epoch[4] = {1, 2, 1, 2};
  for (uint32_t i = 0; i < 4; i++) {
    assert_int_equal(k->comms[hbm[i]].flag_index, 0);
    assert_int_equal(k->comms[hbm[i]].flag_epoch, epoch[i]);
  }
  /* barriers unchanged; cluster comms keep flag S, barrier S, epoch =
     phase as without reuse */
  assert_int_equal(k->barriers.barrier_count, base->barriers.barrier_count);
  assert_memory_equal(k->barriers.slot_barrier, base->barriers.slot_barrier,
                      sizeof(uint32_t) * 7);
  assert_memory_equal(k->barriers.comm_barrier, base->barriers.comm_barrier,
                      sizeof(uint32_t) * 6);
  assert_memory_equal(k->barriers.comm_phase, base->barriers.comm_phase, sizeof(uint32_t) * 6);
  assert_int_equal(df_barrier_alloc_check(p, &k->barriers).code, DF_OK);
  for (uint32_t i = 0; i < k->comm_count; i++) {
    if (k->comms[i].kind != DF_COMM_CLUSTER_SEND && k->comms[i].kind != DF_COMM_CLUSTER_RECV)
      continue;
    assert_int_equal(k->comms[i].flag_index, S);
    assert_int_equal(k->comms[i].barrier_index, S);
    assert_int_equal(k->comms[i].flag_epoch, base->comms[i].flag_epoch);
  }
  for (uint32_t i = 0; i < k->slot_count; i++)
    assert_int_equal(k->slots[i].barrier_index, base->slots[i].barrier_index);
  assert_int_equal(k->launch.flag_count, 1);
  df_packed_destroy(k);
  df_packed_destroy(base);
  df_plan_destroy(p);
}

static void hbm_epochs_follow_tasks(void **state) {
  (void)state;
  df_plan *p = plan_256x2(2, 1, DF_POLICY_ROUND_ROBIN);
  df_packed *k = pack(p, NULL);
  uint32_t seen[3] = {0, 0, 0}, n = 0;
  for (uint32_t i = 0; i < k->comm_count; i++)
    if (k->comms[i].kind == DF_COMM_HBM_SEND || k->comms[i].kind == DF_COMM_HBM_RECV) {
      assert_in_range(k->comms[i].flag_epoch, 1, 2);
      seen[k->comms[i].flag_epoch]++;
      n++;
    }
  assert_true(n > 0 && seen[1] > 0 && seen[2] > 0);
  assert_int_equal(k->comm_count, n); /* cluster size 1: every edge is HBM */
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* ---- REFERENCE 2.9: the reshared plan ---------------------------------- */

static void reshared_plan_packs(void **state) {
  (void)state;
  df_plan *p = seed_make_reshared_plan();
  df_packed *k = pack(p, NULL);
  assert_int_equal(k->operator_count, 3);
  const char *ops[3] = {"moe_map1", "moe_map2", "finalize_hidden"};
  const df_op_kind kinds[3] = {DF_OPK_MAP, DF_OPK_MAP, DF_OPK_FINALIZE};
  for (uint32_t i = 0; i < 3; i++) {
    assert_string_equal(k->operators[i].name, ops[i]);
    assert_int_equal(k->operators[i].index, i);
    assert_int_equal(k->operators[i].kind, kinds[i]);
  }
  assert_int_equal(k->type_count, 2);
  assert_string_equal(k->types[0].name, "UpShard");
  assert_string_equal(k->types[1].name, "HiddenShard");
  assert_int_equal(k->slot_count, 8);
  assert_int_equal(k->comm_count, 4);
  static const uint32_t want[8][8] = {
      {1, 0, 0, 0, 0, 1, 0, 0},   {1, S, 0, 64, 1, 1, 2, 0},  {1, 1, 0, 128, 0, 0, 6, 0},
      {3, 2, 0, 192, 0, 0, 6, 0}, {1, 0, 0, 256, 2, 1, 1, 0}, {1, S, 0, 320, 3, 1, 4, 0},
      {1, 1, 0, 384, 0, 0, 7, 0}, {3, 2, 0, 448, 0, 0, 7, 0}};
  for (uint32_t i = 0; i < 8; i++)
    expect_words("instruction", i, (const uint32_t *)&k->instrs[i], want[i], 8);
  uint32_t reshared = 0;
  for (uint32_t i = 0; i < k->instr_count; i++)
    if (k->instrs[i].handler_id == S && k->instrs[i].opcode == 1) {
      assert_int_equal(k->instrs[i].comm_count, 1);
      assert_int_equal(k->instrs[i].slot_id, reshared == 0 ? 2 : 4);
      reshared++;
    }
  assert_int_equal(reshared, 2);
  static const uint32_t comms[4][12] = {
      {3, 0, 4, S, 0, S, 2, S, 0, 0, 0, 1}, {4, 1, 3, S, 0, S, 1, 0, 0, 0, 0, 1},
      {3, 1, 3, S, 0, S, 1, S, 0, 0, 0, 1}, {4, 0, 4, S, 0, S, 2, 0, 0, 0, 0, 1}};
  for (uint32_t i = 0; i < 4; i++)
    expect_words("comm", i, (const uint32_t *)&k->comms[i], comms[i], 12);
  const uint32_t in[10] = {2, 3, 2, 3, 6, 4, 5, 4, 5, 7};
  expect_words("input_slots", 0, k->input_slots, in, 10);
  assert_int_equal(k->task_coord_count, 8);
  for (uint32_t i = 0; i < 8; i++)
    assert_int_equal(k->task_coords[i], 0);
  const uint32_t qo[4] = {0, 4, 8, 8}, ql[4] = {4, 4, 0, 0};
  expect_words("queue_offsets", 0, k->queue_offsets, qo, 4);
  expect_words("queue_lengths", 0, k->queue_lengths, ql, 4);
  const uint32_t shared[8] = {0, 16, 0, 32, 48, 16, 64, 64};
  const uint32_t global[8] = {0, 16, 0, 16, 0, 16, 32, 48};
  const uint32_t owner[8] = {0, 1, 0, S, S, 1, 0, 1};
  const uint32_t barrier[8] = {S, S, S, 0, 0, S, S, S};
  for (uint32_t i = 0; i < 8; i++) {
    assert_int_equal(k->slots[i].shared_offset, shared[i]);
    assert_int_equal(k->slots[i].global_offset, global[i]);
    assert_int_equal(k->slots[i].owner_cta, owner[i]);
    assert_int_equal(k->slots[i].barrier_index, barrier[i]);
    assert_int_equal(k->slots[i].bytes, 16);
  }
  const df_launch_package *l = &k->launch;
  assert_int_equal(l->barrier_count, 1);
  assert_int_equal(l->shared_control_bytes, 12);
  assert_int_equal(l->shared_slot_base_offset, 16);
  assert_int_equal(l->shared_slot_bytes, 80);
  assert_int_equal(l->shared_memory_bytes, 96);
  assert_int_equal(l->global_staging_bytes, 64);
  assert_int_equal(l->flag_count, 8);
  assert_true(l->needs_flag_reset);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void reshared_full_direct_global(void **state) {
  (void)state;
  df_plan *p = seed_make_reshared_plan();
  df_pack_options o;
  memset(&o, 0, sizeof o);
  o.layout.hbm_direct_global = true;
  df_packed *k = pack(p, &o);
  assert_int_equal(k->slot_count, 8);
  for (uint32_t i = 0; i < 8; i++) {
    assert_true(k->slots[i].flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL);
    assert_int_equal(k->slots[i].shared_offset, 0);
    assert_int_equal(k->slots[i].barrier_index, S);
  }
  for (uint32_t i = 0; i < k->comm_count; i++)
    assert_int_equal(k->comms[i].barrier_index, S); /* signal-only receives */
  const df_launch_package *l = &k->launch;
  assert_int_equal(l->barrier_count, 0);
  assert_int_equal(l->shared_slot_bytes, 0);
  assert_int_equal(l->shared_memory_bytes, l->shared_slot_base_offset);
  assert_int_equal(l->shared_memory_bytes, 0);
  assert_int_equal(l->global_staging_bytes, 64);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void selective_direct_global(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  uint32_t selected = p->comms[hand_find_comm(p, DF_COMM_HBM_RECV)].dst_slot;
  assert_int_equal(selected, 2);
  df_pack_options o;
  memset(&o, 0, sizeof o);
  o.layout.direct_count = 1;
  o.layout.direct_slots = &selected;
  df_packed *k = pack(p, &o);
  for (uint32_t i = 0; i < k->slot_count; i++)
    assert_int_equal((k->slots[i].flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL) != 0, i == 2);
  assert_int_equal(k->slots[2].shared_offset, 0);
  assert_int_equal(k->slots[2].flags, DF_SLOT_FLAG_HBM_DIRECT_GLOBAL);
  assert_int_equal(k->slots[2].flag_index, 2);
  /* its receive is signal-only: only s1 and s5 keep barriers */
  for (uint32_t i = 0; i < k->slot_count; i++)
    assert_int_equal(k->slots[i].barrier_index != S, i == 1 || i == 5);
  assert_int_equal(k->launch.barrier_count, 1);
  df_packed_destroy(k);

  df_packed *bad = NULL;
  o.layout.hbm_direct_global = true;
  assert_true(hand_error_has(df_pack(p, &o, NULL, &bad), "cannot combine full and selective"));
  assert_null(bad);
  o.layout.hbm_direct_global = false;
  uint32_t unknown = p->slot_count;
  o.layout.direct_slots = &unknown;
  assert_true(hand_error_has(df_pack(p, &o, NULL, &bad), "must exist in the plan; unknown=[7]"));
  df_plan_destroy(p);
}

/* ---- other seed plans (REFERENCE 2.10) ------------------------------------ */

static void cluster_batch_counts(void **state) {
  (void)state;
  df_plan *p = plan_4x4_cluster_local_512();
  df_packed *k = pack(p, NULL);
  uint32_t recv = 0, sends = 0;
  for (uint32_t i = 0; i < k->instr_count; i++) {
    if (k->instrs[i].comm_count == 3) {
      assert_int_equal(k->instrs[i].flags & 0xFFFF, 3);
      assert_int_equal(k->instrs[i].flags >> 16, 0);
      recv++;
    } else if (k->instrs[i].comm_count == 1) {
      assert_int_equal(k->instrs[i].flags, 1u << 16);
      sends++;
    }
  }
  assert_int_equal(recv, 1);
  assert_int_equal(sends, 3);
  const uint32_t kinds[6] = {2, 2, 2, 1, 1, 1};
  assert_int_equal(k->comm_count, 6);
  for (uint32_t i = 0; i < 6; i++)
    assert_int_equal(k->comms[i].kind, kinds[i]);
  assert_false(k->launch.needs_flag_reset);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void cluster_peer_cta_ranks(void **state) {
  (void)state;
  df_plan *p = plan_256x2(4, 2, DF_POLICY_ROUND_ROBIN);
  uint32_t n = 0;
  const uint32_t want[2][3] = {{1, 0, 0}, {3, 2, 0}};
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    if (c->kind != DF_COMM_CLUSTER_SEND)
      continue;
    assert_true(n < 2);
    assert_int_equal(c->producer_sm, want[n][0]);
    assert_int_equal(c->consumer_sm, want[n][1]);
    assert_int_equal(c->peer_cta_rank, want[n][2]);
    n++;
  }
  assert_int_equal(n, 2);
  df_packed *k = pack(p, NULL);
  n = 0;
  for (uint32_t i = 0; i < k->comm_count; i++)
    if (k->comms[i].kind == DF_COMM_CLUSTER_SEND) {
      assert_int_equal(k->comms[i].peer_cta_rank, 0);
      n++;
    } else if (k->comms[i].kind == DF_COMM_CLUSTER_RECV) {
      assert_int_equal(k->comms[i].peer_cta_rank, 1);
    }
  assert_int_equal(n, 2);
  /* derived ranks when the plan leaves them to the packer */
  for (uint32_t i = 0; i < p->comm_count; i++)
    p->comms[i].peer_cta_rank = S;
  df_packed *d = pack(p, NULL);
  assert_memory_equal(d->comms, k->comms, sizeof(df_abi_comm) * k->comm_count);
  df_packed_destroy(d);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void flag_reset_needed_only_with_hbm(void **state) {
  (void)state;
  df_plan *c = plan_256x2(4, 2, DF_POLICY_CLUSTER_LOCAL);
  df_plan *h = seed_make_plan();
  df_packed *kc = pack(c, NULL), *kh = pack(h, NULL);
  assert_false(kc->launch.needs_flag_reset);
  assert_true(kh->launch.needs_flag_reset);
  df_packed_destroy(kc);
  df_packed_destroy(kh);
  df_plan_destroy(c);
  df_plan_destroy(h);
}

static void one_shot_cluster_slots_keep_phase_zero(void **state) {
  (void)state;
  df_plan *p = plan_256x2(2, 2, DF_POLICY_ROUND_ROBIN);
  df_packed *k = pack(p, NULL);
  uint32_t n = 0;
  for (uint32_t i = 0; i < k->comm_count; i++)
    if (k->comms[i].kind == DF_COMM_CLUSTER_SEND || k->comms[i].kind == DF_COMM_CLUSTER_RECV) {
      assert_int_equal(k->comms[i].flag_epoch, 0);
      assert_int_equal(k->comms[i].barrier_phase, 0);
      n++;
    }
  assert_int_equal(n, 4);
  /* the two overlapping receives on SM0 (slots 1 and 4) get distinct
     barriers */
  assert_int_not_equal(k->slots[1].barrier_index, S);
  assert_int_not_equal(k->slots[4].barrier_index, S);
  assert_int_not_equal(k->slots[1].barrier_index, k->slots[4].barrier_index);
  assert_int_equal(k->launch.barrier_count, 2);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void streaming_plan_reuses_shared_regions(void **state) {
  (void)state;
  static const uint32_t kv[2] = {8192, 8192};
  df_plan *p = seed_schedule_attention(4, 2, kv, 2, 64, DF_POLICY_CLUSTER_LOCAL,
                                       DF_REDUCE_STREAMING, false);
  df_packed *k = pack(p, NULL);
  assert_int_equal(p->slot_count, 8);
  assert_int_equal(k->launch.slot_count, 8);
  for (uint32_t i = 0; i < k->slot_count; i++)
    assert_true(k->slots[i].shared_offset == 0 || k->slots[i].shared_offset == 48);
  assert_int_equal(k->slots[0].shared_offset, 0); /* storage 1 comes first */
  assert_int_equal(k->launch.shared_slot_bytes, 96);
  assert_int_equal(k->launch.global_staging_bytes, 8 * 48);
  uint32_t max_arity = 0;
  for (uint32_t i = 0; i < p->instr_count; i++)
    if (p->instrs[i].op == DF_INSTR_REDUCE_UPDATE && p->instrs[i].input_count > max_arity)
      max_arity = p->instrs[i].input_count;
  assert_int_equal(max_arity, 2);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* 11 single-block tasks, buckets 1..8 of 16, exact lengths 17/23/47: the
   packed iter variants are the plan's in first-appearance order. */
static void iter_variants_follow_first_appearance(void **state) {
  (void)state;
  static const uint32_t kv[11] = {48, 17, 128, 16, 96, 23, 64, 112, 47, 32, 80};
  df_program *prog = seed_attention_program();
  df_schedule_options o = df_schedule_options_default();
  o.topology.sm_count = 4;
  o.topology.cluster_size = 2;
  o.block_size = 128;
  o.range_count = 1;
  o.ranges[0].axis = "kv";
  o.ranges[0].count = 11;
  o.ranges[0].lengths = kv;
  o.extent_count = 1;
  o.extents[0] = 11;
  assert_int_equal(df_iter_buckets_parse("1,2,3,4,5,6,7,8,generic", &o.buckets).code, DF_OK);
  o.bucket_size = 16;
  assert_int_equal(df_exact_lengths_parse("17,23,47", &o.exact_lengths).code, DF_OK);
  df_plan *p;
  assert_int_equal(df_schedule(prog, &o, &p).code, DF_OK);
  df_program_destroy(prog);
  df_variant seen[16];
  uint32_t n = 0;
  for (uint32_t i = 0; i < p->instr_count; i++) {
    const df_instr *in = &p->instrs[i];
    if (!in->has_variant || in->variant.base.kind != DF_OPK_ITER)
      continue;
    uint32_t j = 0;
    while (j < n && !df_variant_equal(&seen[j], &in->variant))
      j++;
    if (j == n)
      seen[n++] = in->variant;
  }
  assert_int_equal(n, 11);
  df_packed *k = pack(p, NULL);
  uint32_t m = 0, modes = 0;
  for (uint32_t h = 0; h < k->handler_count; h++) {
    const df_handler *hd = &k->handlers[h];
    if (hd->kind != DF_OPK_ITER)
      continue;
    assert_true(m < n);
    assert_true(df_variant_equal(&hd->variant, &seen[m]));
    assert_int_equal(hd->identity.operator_id, 0);
    assert_int_equal(hd->primary, m == 0);
    if (hd->variant.iter_mode == DF_ITER_TILE_COUNT)
      modes |= 1u << hd->variant.iter_value;
    else if (hd->variant.iter_mode == DF_ITER_EXACT_LENGTH)
      modes |= hd->variant.iter_value == 17 ? 1u << 9 : hd->variant.iter_value == 23 ? 1u << 10
                                                                                     : 1u << 11;
    m++;
  }
  assert_int_equal(m, n);
  assert_int_equal(modes, 0xFFEu); /* tile_count 1..8, exact 17, 23, 47 */
  /* every ITER runs the handler of its own variant */
  for (uint32_t i = 0; i < k->instr_count; i++) {
    const df_instr *in = &p->instrs[k->pack_order[i]];
    if (in->op == DF_INSTR_ITER)
      assert_true(df_variant_equal(&k->handlers[k->instrs[i].handler_id].variant, &in->variant));
  }
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* ---- hand-edited seed plans ---------------------------------------------- */

static void renamed_operators_keep_handlers_and_fingerprint(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *base = pack(p, NULL);
  df_plan *r;
  assert_int_equal(df_plan_clone(p, &r).code, DF_OK);
  for (uint32_t i = 0; i < r->stage_count; i++) {
    snprintf(r->stages[i].op_name, DF_NAME_MAX, "diagnostic_%u", i);
    snprintf(r->stages[i].name, DF_NAME_MAX, "renamed_%u", i);
  }
  df_packed *k = pack(r, NULL);
  assert_int_equal(k->handler_count, 4);
  for (uint32_t h = 0; h < 4; h++) {
    assert_memory_equal(&k->handlers[h].identity, &base->handlers[h].identity,
                        sizeof(df_identity));
    assert_true(df_variant_equal(&k->handlers[h].variant, &base->handlers[h].variant));
    assert_int_equal(k->handlers[h].kind, base->handlers[h].kind);
  }
  assert_string_equal(k->handlers[0].name, "diagnostic_0");
  assert_string_equal(k->handlers[0].symbol, "dataflow_handler_0_diagnostic_0");
  for (uint32_t i = 0; i < k->instr_count; i++)
    assert_int_equal(k->instrs[i].handler_id, base->instrs[i].handler_id);
  /* every handler instruction runs the handler of its variant */
  for (uint32_t i = 0; i < k->instr_count; i++) {
    const df_instr *in = &r->instrs[k->pack_order[i]];
    if (!in->has_variant)
      continue;
    assert_true(df_variant_equal(&k->handlers[k->instrs[i].handler_id].variant, &in->variant));
  }
  assert_string_equal(k->fingerprint, base->fingerprint);
  char a[65], b[65];
  assert_int_equal(df_plan_fingerprint(p, a).code, DF_OK);
  assert_int_equal(df_plan_fingerprint(r, b).code, DF_OK);
  assert_string_equal(a, b);
  /* two reduce handlers: distinct ids, one binding key, classes
     generic and binary */
  uint32_t reduce = 0, classes = 0;
  for (uint32_t h = 0; h < k->handler_count; h++)
    if (k->handlers[h].kind == DF_OPK_REDUCE) {
      assert_int_equal(k->handlers[h].identity.operator_id, 1);
      classes |= 1u << k->handlers[h].variant.arity;
      reduce++;
    }
  assert_int_equal(reduce, 2);
  assert_int_equal(classes, 1u << DF_ARITY_BINARY | 1u << DF_ARITY_GENERIC);
  df_packed_destroy(k);
  df_packed_destroy(base);
  df_plan_destroy(r);
  df_plan_destroy(p);
}

static void additional_variants_do_not_renumber_primaries(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  /* move the binary reduce (I7) before the first finalize (I4) */
  const uint32_t order[13] = {0, 1, 2, 3, 7, 4, 5, 6, 8, 9, 10, 11, 12};
  df_plan *q = hand_permute(p, order);
  assert_int_equal(q->instrs[4].op, DF_INSTR_REDUCE);
  assert_int_equal(q->instrs[4].variant.arity, DF_ARITY_BINARY);
  df_packed *k = pack(q, NULL);
  const df_op_kind kinds[4] = {DF_OPK_ITER, DF_OPK_REDUCE, DF_OPK_FINALIZE, DF_OPK_REDUCE};
  assert_int_equal(k->handler_count, 4);
  for (uint32_t h = 0; h < 4; h++)
    assert_int_equal(k->handlers[h].identity.kind, kinds[h]);
  assert_int_equal(k->handlers[1].variant.arity, DF_ARITY_GENERIC);
  assert_int_equal(k->handlers[3].variant.arity, DF_ARITY_BINARY);
  assert_false(k->handlers[3].primary);
  /* the packed records are the seed's: same queues, renumbered ids */
  df_packed *base = pack(p, NULL);
  assert_memory_equal(k->instrs, base->instrs, sizeof(df_abi_instr) * 13);
  assert_memory_equal(k->comms, base->comms, sizeof(df_abi_comm) * 6);
  df_packed_destroy(k);
  /* the same walk through handler_order, without renumbering the plan */
  df_pack_options o;
  memset(&o, 0, sizeof o);
  o.handler_order = order;
  o.handler_order_count = 13;
  k = pack(p, &o);
  assert_memory_equal(k->instrs, base->instrs, sizeof(df_abi_instr) * 13);
  assert_int_equal(k->handlers[3].variant.arity, DF_ARITY_BINARY);
  df_packed_destroy(k);
  df_packed *bad = NULL;
  o.handler_order_count = 12;
  assert_true(hand_error_has(df_pack(p, &o, NULL, &bad), "handler_order names 12"));
  const uint32_t repeated[13] = {0, 1, 2, 3, 7, 4, 5, 6, 8, 9, 10, 11, 11};
  o.handler_order = repeated;
  o.handler_order_count = 13;
  assert_true(hand_error_has(df_pack(p, &o, NULL, &bad), "repeated"));
  const uint32_t outside[13] = {0, 1, 2, 3, 7, 4, 5, 6, 8, 9, 10, 11, 13};
  o.handler_order = outside;
  assert_true(hand_error_has(df_pack(p, &o, NULL, &bad), "out of range"));
  assert_null(bad);
  df_packed_destroy(base);
  df_plan_destroy(q);
  df_plan_destroy(p);
}

static void wrong_reduce_variant_arity_is_rejected(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_instr *in = &p->instrs[7];
  assert_int_equal(in->op, DF_INSTR_REDUCE);
  assert_int_equal(in->input_count, 2);
  assert_int_equal(df_variant_default(in->identity, 3, &in->variant).code, DF_OK);
  df_packed *k = NULL;
  df_status s = df_pack(p, NULL, NULL, &k);
  assert_true(hand_error_has(s, "Dataflow reduce handler variant does not match instruction "
                                "arity: instruction_id=7, input_slots=2, variant="));
  assert_null(k);
  df_plan_destroy(p);
}

static void identity_consistency_errors(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = NULL;
  df_plan *q;
  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  q->instrs[0].has_variant = false;
  assert_true(hand_error_has(df_pack(q, NULL, NULL, &k), "both be present or both absent"));
  df_plan_destroy(q);
  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  q->instrs[3].variant.base.operator_id = 2;
  assert_true(hand_error_has(df_pack(q, NULL, NULL, &k), "variant base identity"));
  df_plan_destroy(q);
  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  q->instrs[4].identity.kind = DF_OPK_MAP; /* a finalize instruction */
  q->instrs[4].variant.base.kind = DF_OPK_MAP;
  assert_true(hand_error_has(df_pack(q, NULL, NULL, &k), "does not match instruction opcode"));
  df_plan_destroy(q);
  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  q->instrs[0].variant.schema_version = 2;
  assert_true(hand_error_has(df_pack(q, NULL, NULL, &k), "instruction 0"));
  df_plan_destroy(q);
  /* a legacy instruction with no operator name at all */
  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  q->instrs[0].has_identity = q->instrs[0].has_variant = false;
  q->instrs[0].stage = -1;
  q->stage_count = 0;
  assert_true(hand_error_has(df_pack(q, NULL, NULL, &k), "no handler identity and no operator"));
  df_plan_destroy(q);
  assert_null(k);
  df_plan_destroy(p);
}

static void legacy_instructions_are_keyed_by_operator_name(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  for (uint32_t i = 0; i < p->instr_count; i++)
    p->instrs[i].has_identity = p->instrs[i].has_variant = false;
  df_packed *k = pack(p, NULL);
  /* (iter, split_kv), (reduce, combine), (finalize, finalize): one
     handler per operator, all primary */
  assert_int_equal(k->handler_count, 3);
  assert_int_equal(k->primary_handler_count, 3);
  assert_string_equal(k->handlers[1].name, "combine");
  assert_int_equal(k->handlers[1].kind, DF_OPK_REDUCE);
  assert_false(k->handlers[1].has_identity);
  assert_int_equal(k->instrs[10].handler_id, 1); /* I7 now shares combine */
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void handler_symbols_are_sanitised(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  snprintf(p->stages[0].op_name, DF_NAME_MAX, "__my-kernel.v2__");
  snprintf(p->stages[1].op_name, DF_NAME_MAX, "3way");
  snprintf(p->stages[2].op_name, DF_NAME_MAX, "--");
  df_packed *k = pack(p, NULL);
  assert_string_equal(k->handlers[0].symbol, "dataflow_handler_0_my_kernel_v2");
  assert_string_equal(k->handlers[1].symbol, "dataflow_handler_1_op_3way");
  assert_string_equal(k->handlers[2].symbol, "dataflow_handler_2_op");
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void cluster_release_gets_ack_index(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  hand_append_release(p);
  df_packed *k = pack(p, NULL);
  uint32_t n = 0;
  for (uint32_t i = 0; i < k->comm_count; i++) {
    uint32_t kind = k->comms[i].kind;
    if (kind == DF_COMM_CLUSTER_SEND || kind == DF_COMM_CLUSTER_RECV ||
        kind == DF_COMM_CLUSTER_RELEASE) {
      assert_int_equal(k->comms[i].flag_index, 0);
      n++;
    }
    if (kind == DF_COMM_CLUSTER_RELEASE)
      assert_int_equal(k->comms[i].peer_cta_rank, 1);
  }
  assert_int_equal(n, 3);
  /* the release is dispatched with the receive at I3: one cluster recv,
     one release in the high half */
  assert_int_equal(k->instrs[1].comm_count, 3);
  assert_int_equal(k->instrs[1].flags, 1u | 1u << 16);
  assert_int_equal(k->comms[1].kind, DF_COMM_CLUSTER_RELEASE);
  assert_int_equal(k->launch.cluster_ack_count, 1);
  assert_int_equal(k->launch.cluster_ack_barrier_bytes, 8);
  assert_int_equal(k->launch.cluster_ack_pending_bytes, 4);
  assert_int_equal(k->launch.shared_control_bytes, 16 + 8 + 4 + 4);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void segmented_hbm_comms_keep_byte_ranges(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  hand_segment_first_hbm(p, 3, 16);
  df_packed *k = pack(p, NULL);
  uint32_t seen[2] = {0, 0};
  for (uint32_t i = 0; i < k->comm_count; i++) {
    const df_abi_comm *c = &k->comms[i];
    if ((c->kind != DF_COMM_HBM_SEND && c->kind != DF_COMM_HBM_RECV) || c->src_slot_id != 2)
      continue;
    uint32_t s = c->segment_id;
    const uint32_t *raw = (const uint32_t *)c;
    const uint32_t want[4] = {16 * s, 16, s, 3};
    expect_words("segment", i, raw + 8, want, 4);
    assert_int_equal(c->flag_epoch, s + 1);
    assert_int_equal(c->barrier_phase, 0);
    if (c->kind == DF_COMM_HBM_RECV)
      assert_int_equal(c->barrier_index, 1);
    seen[c->kind == DF_COMM_HBM_RECV] |= 1u << s;
  }
  assert_int_equal(seen[0], 7);
  assert_int_equal(seen[1], 7);
  assert_int_equal(k->launch.barrier_count, 2);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void scratch_backed_slot_has_no_shared_extent(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  p->slots[1].scratch_backed = true;
  p->slots[1].has_scratch_offset = true;
  p->slots[1].scratch_offset = 4096;
  df_packed *k = pack(p, NULL);
  assert_int_equal(k->slots[1].shared_offset, 4096);
  assert_int_equal(k->slots[1].bytes, 48);
  assert_int_equal(k->slots[1].reserved, 4096);
  assert_true(k->slots[1].flags & DF_SLOT_FLAG_SCRATCH_BACKED);
  const uint32_t normal[6] = {0, 48, 96, 144, 192, 240};
  for (uint32_t i = 0, j = 0; i < k->slot_count; i++)
    if (!(k->slots[i].flags & DF_SLOT_FLAG_SCRATCH_BACKED))
      assert_int_equal(k->slots[i].shared_offset, normal[j++]);
  assert_int_equal(k->launch.scratch_slot_count, 1);
  assert_int_equal(k->launch.scratch_bytes, 4096 + 48);
  assert_int_equal(k->launch.shared_slot_bytes, 288);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* ---- source-lifetime actions (args word 14) --------------------------- */

/* SM0 runs A (writes s0, cluster-sends it), B (writes s1, sends it), then
   C overwriting s0 (older group) and D overwriting s1 (newest). */
static void source_lifetime_actions(void **state) {
  (void)state;
  df_plan *p = hand_plan_new(2, 2, 48);
  uint32_t s0 = hand_slot(p), s1 = hand_slot(p), r0 = hand_slot(p), r1 = hand_slot(p);
  uint32_t a = hand_instr(p, DF_INSTR_MAP, 0, NULL, 0, s0);
  uint32_t b = hand_instr(p, DF_INSTR_MAP, 0, NULL, 0, s1);
  uint32_t x = hand_instr(p, DF_INSTR_MAP, 1, (uint32_t[]){r0, r1}, 2, S);
  /* C and D reuse the regions of s0 and s1 through shared storage */
  uint32_t c0 = hand_slot(p), c1 = hand_slot(p);
  p->slots[c0].shared_storage = s0;
  p->slots[c1].shared_storage = s1;
  uint32_t c = hand_instr(p, DF_INSTR_MAP, 0, NULL, 0, c0);
  uint32_t d = hand_instr(p, DF_INSTR_MAP, 0, NULL, 0, c1);
  hand_transfer(p, true, a, x, s0, r0, 1);
  hand_transfer(p, true, b, x, s1, r1, 1);
  hand_finish(p);
  df_packed *k = pack(p, NULL);
  /* SM0 pack order: a, b, c, d; SM1: x */
  assert_int_equal(k->pack_order[2], c);
  assert_int_equal(k->args[0].reserved0, DF_SOURCE_WAIT_NONE);
  assert_int_equal(k->args[1].reserved0, DF_SOURCE_WAIT_NONE);
  /* c overwrites the older group (s0) and the next, d, overwrites the
     newest (s1) but no send of c: wait for all at once */
  assert_int_equal(k->args[2].reserved0, DF_SOURCE_WAIT_ALL);
  assert_int_equal(k->args[3].reserved0, DF_SOURCE_WAIT_NONE);
  df_packed_destroy(k);

  /* without d the wait keeps the newest group in flight */
  p->instrs[d].output_slot = S;
  k = pack(p, NULL);
  assert_int_equal(k->args[2].reserved0, DF_SOURCE_WAIT_KEEP_NEWEST);
  assert_int_equal(k->args[3].reserved0, DF_SOURCE_WAIT_NONE);
  df_packed_destroy(k);

  /* overwriting the newest group waits for everything */
  p->instrs[c].output_slot = c1;
  k = pack(p, NULL);
  assert_int_equal(k->args[2].reserved0, DF_SOURCE_WAIT_ALL);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* ---- errors ------------------------------------------------------------ */

static void pack_errors(void **state) {
  (void)state;
  df_packed *k = NULL;
  assert_true(hand_error_has(df_pack(NULL, NULL, NULL, &k), "expects a plan"));
  df_plan *p = seed_make_plan();
  df_plan *q;

  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  q->comms[0].dispatch_instr = 99;
  assert_true(hand_error_has(df_pack(q, NULL, NULL, &k),
                             "comm dispatch instruction ids are not in the instruction plan"));
  df_plan_destroy(q);

  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  q->comms[2].segment_count = 0;
  assert_true(hand_error_has(df_pack(q, NULL, NULL, &k), "segment_count"));
  df_plan_destroy(q);

  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  q->queue_ids[1] = 0; /* instruction 0 twice, instruction 3 unqueued */
  assert_true(hand_error_has(df_pack(q, NULL, NULL, &k), "more than once in the queues"));
  df_plan_destroy(q);

  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  q->queue_lengths[3] = 3; /* EXIT I12 left unqueued */
  q->queue_id_count = 12;
  assert_true(hand_error_has(df_pack(q, NULL, NULL, &k), "queues cover 12 of 13"));
  df_plan_destroy(q);

  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  q->instrs[0].output_slot = 40;
  assert_true(hand_error_has(df_pack(q, NULL, NULL, &k), "writes slot 40"));
  df_plan_destroy(q);

  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  q->instrs[0].op = DF_INSTR_OP_COUNT;
  assert_true(hand_error_has(df_pack(q, NULL, NULL, &k), "invalid opcode"));
  df_plan_destroy(q);

  /* offsets past 4 GiB do not fit the ABI */
  assert_int_equal(df_plan_clone(p, &q).code, DF_OK);
  q->types[0].bytes = 0x60000000u;
  assert_true(hand_error_has(df_pack(q, NULL, NULL, &k),
                             "Dataflow ABI value must fit uint32, got"));
  df_plan_destroy(q);
  assert_null(k);
  df_plan_destroy(p);
}

/* 65536 releases on one instruction overflow the high half of flags. */
static void cluster_count_limit(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  for (uint32_t i = 0; i < 65536; i++)
    hand_append_release(p);
  df_packed *k = NULL;
  assert_true(hand_error_has(df_pack(p, NULL, NULL, &k),
                             "cluster communication count exceeds the packed ABI limit"));
  df_plan_destroy(p);
  /* 65535 is still fine */
  p = seed_make_plan();
  for (uint32_t i = 0; i < 65534; i++)
    hand_append_release(p);
  k = pack(p, NULL);
  assert_int_equal(k->instrs[1].flags >> 16, 65534);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* 65536 segments of one cluster receive overflow the low half. */
static void cluster_receive_limit(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  uint32_t s = hand_find_comm(p, DF_COMM_CLUSTER_SEND), r = hand_find_comm(p, DF_COMM_CLUSTER_RECV);
  df_comm send = p->comms[s], recv = p->comms[r];
  for (uint32_t i = 1; i < 65536; i++) {
    send.segment_id = recv.segment_id = i;
    assert_int_equal(df_plan_add_comm(p, &send).code, DF_OK);
    assert_int_equal(df_plan_add_comm(p, &recv).code, DF_OK);
  }
  for (uint32_t i = 0; i < p->comm_count; i++)
    p->comms[i].segment_count = 65536;
  df_packed *k = NULL;
  assert_true(hand_error_has(df_pack(p, NULL, NULL, &k), "65536 receives"));
  df_plan_destroy(p);
}

/* df_launch_package_build re-checks the records the device will trust. */
static df_status relaunch(const df_packed *k) {
  df_launch_package l;
  df_status s = df_launch_package_build(k, &l);
  if (s.code == DF_OK)
    df_launch_package_free(&l, &k->alloc);
  else
    assert_null(l.barrier_init_offsets);
  return s;
}

static void launch_package_checks(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  df_packed *k = pack(p, NULL);
  assert_int_equal(relaunch(k).code, DF_OK);
  df_launch_package none;
  assert_true(hand_error_has(df_launch_package_build(NULL, &none), "expects a packed"));
#define TAMPER(field, bad, needle)                                             \
  do {                                                                         \
    __typeof__(field) keep_ = field;                                           \
    field = bad;                                                               \
    assert_true(hand_error_has(relaunch(k), needle));                          \
    field = keep_;                                                             \
  } while (0)
  TAMPER(k->abi_version, 6, "ABI version 6 does not match");
  TAMPER(k->args, NULL, "buffers are missing");
  TAMPER(k->queue_offsets[1], 4, "queues must be contiguous: queue 1 starts at 4");
  TAMPER(k->queue_lengths[3], 3, "queues cover 12 of 13");
  TAMPER(k->instrs[1].comm_count, 7, "comm range");
  TAMPER(k->instrs[0].slot_id, 7, "names slot 7 of 7");
  TAMPER(k->instrs[4].arg_offset, 0, "EXIT instruction 4 must have a sentinel arg_offset");
  TAMPER(k->instrs[0].arg_offset, S, "arg_offset 4294967295 must be a 64-byte aligned");
  TAMPER(k->instrs[0].arg_offset, 65, "arg_offset 65 must be a 64-byte aligned");
  TAMPER(k->instrs[0].arg_offset, 9 * 64, "inside 9 args records");
  TAMPER(k->args[0].task_coord_count, 10, "task coordinates");
  TAMPER(k->args[1].input_slot_count, 8, "input slots [0, +8) exceed 7");
  TAMPER(k->input_slots[0], 9, "reads slot 9 of 7");
  TAMPER(k->comms[0].dst_slot_id, 7, "names slot 1 -> 7");
  TAMPER(k->comms[0].byte_count, 49, "transfer size exceeds slot capacity");
  TAMPER(k->comms[0].byte_offset, 49, "transfer size exceeds slot capacity");
  k->comms[0].byte_count = 40; /* fits 48-byte slots, not a 32-byte one */
  assert_int_equal(relaunch(k).code, DF_OK);
  TAMPER(k->slots[1].bytes, 32, "transfer size exceeds slot capacity");
  k->comms[0].byte_count = 0; /* whole slot: the smaller capacity */
  k->slots[1].bytes = 32;
  assert_int_equal(relaunch(k).code, DF_OK);
  k->slots[1].bytes = 48;
#undef TAMPER
  /* a 48-byte slot transfers up to 48 bytes */
  k->comms[0].byte_offset = 16;
  k->comms[0].byte_count = 32;
  assert_int_equal(relaunch(k).code, DF_OK);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

/* An allocator that fails once its budget of calls is spent. */
typedef struct budget {
  int left;
} budget;

static void *failing_realloc(void *user, void *ptr, size_t size) {
  budget *b = user;
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  if (b->left-- <= 0)
    return NULL;
  return realloc(ptr, size);
}

/* Every allocation failure is reported as DF_ENOMEM and leaks nothing
   (the sanitizer build checks the latter). */
static void allocation_failures_are_reported(void **state) {
  (void)state;
  df_plan *plans[3] = {seed_make_plan(), seed_make_reshared_plan(), NULL};
  hand_append_release(plans[0]);
  df_pack_options o;
  memset(&o, 0, sizeof o);
  o.layout.reuse_hbm_flags = true;
  for (int which = 0; plans[which]; which++) {
    bool succeeded = false;
    for (int n = 0; n < 400 && !succeeded; n++) {
      budget b = {n};
      df_allocator al = {failing_realloc, &b};
      df_packed *k = NULL;
      df_status s = df_pack(plans[which], &o, &al, &k);
      if (s.code == DF_OK) {
        succeeded = true;
        df_packed_destroy(k);
      } else {
        if (s.code != DF_ENOMEM)
          print_error("budget %d: %s\n", n, s.message);
        assert_int_equal(s.code, DF_ENOMEM);
        assert_null(k);
      }
    }
    assert_true(succeeded);
    df_plan_destroy(plans[which]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(seed_plan_tables_and_counts),
      cmocka_unit_test(seed_plan_instruction_records),
      cmocka_unit_test(seed_plan_args_records),
      cmocka_unit_test(seed_plan_comm_records),
      cmocka_unit_test(seed_plan_slot_records),
      cmocka_unit_test(seed_plan_launch_package),
      cmocka_unit_test(launch_package_refuses_overflows),
      cmocka_unit_test(reuse_hbm_flags_orders_epochs_by_first_appearance),
      cmocka_unit_test(hbm_epochs_follow_tasks),
      cmocka_unit_test(reshared_plan_packs),
      cmocka_unit_test(reshared_full_direct_global),
      cmocka_unit_test(selective_direct_global),
      cmocka_unit_test(cluster_batch_counts),
      cmocka_unit_test(cluster_peer_cta_ranks),
      cmocka_unit_test(flag_reset_needed_only_with_hbm),
      cmocka_unit_test(one_shot_cluster_slots_keep_phase_zero),
      cmocka_unit_test(streaming_plan_reuses_shared_regions),
      cmocka_unit_test(iter_variants_follow_first_appearance),
      cmocka_unit_test(renamed_operators_keep_handlers_and_fingerprint),
      cmocka_unit_test(additional_variants_do_not_renumber_primaries),
      cmocka_unit_test(wrong_reduce_variant_arity_is_rejected),
      cmocka_unit_test(identity_consistency_errors),
      cmocka_unit_test(legacy_instructions_are_keyed_by_operator_name),
      cmocka_unit_test(handler_symbols_are_sanitised),
      cmocka_unit_test(cluster_release_gets_ack_index),
      cmocka_unit_test(segmented_hbm_comms_keep_byte_ranges),
      cmocka_unit_test(scratch_backed_slot_has_no_shared_extent),
      cmocka_unit_test(source_lifetime_actions),
      cmocka_unit_test(pack_errors),
      cmocka_unit_test(cluster_count_limit),
      cmocka_unit_test(cluster_receive_limit),
      cmocka_unit_test(launch_package_checks),
      cmocka_unit_test(allocation_failures_are_reported),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
