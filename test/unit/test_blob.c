/* Plan blobs: write -> read -> write round trips (hand-built and seed
   plans, with and without a program), every container and record rule
   of the reader with its message, allocation failures, and the text and
   JSON dumps. With DF_BLOB_CORPUS_DIR set it also writes the fuzzer's
   seed corpus there. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "df/blob.h"
#include "df/impl.h"
#include "seed_plans.h"

#define S DF_SENTINEL

/* ---- helpers ---------------------------------------------------------------- */

static void ok(df_status s) {
  if (s.code != DF_OK)
    fail_msg("unexpected failure: %s", s.message);
}

static void *dup_words(const df_allocator *a, const void *src, size_t bytes) {
  void *p = df_alloc(a, bytes);
  assert_non_null(p);
  if (bytes)
    memcpy(p, src, bytes);
  return p;
}
#define DUP(k, arr) dup_words(&(k)->alloc, (arr), sizeof(arr))

static df_handler handler(uint32_t id, const char *name, df_op_kind kind, bool primary) {
  df_handler h;
  memset(&h, 0, sizeof h);
  h.id = id;
  snprintf(h.name, sizeof h.name, "%s", name);
  h.kind = kind;
  h.has_identity = true;
  h.identity.operator_id = id;
  h.identity.kind = kind;
  h.has_variant = true;
  h.variant.base = h.identity;
  h.variant.schema_version = DF_VARIANT_SCHEMA_VERSION;
  h.variant.has_iter = kind == DF_OPK_ITER;
  h.variant.has_arity = kind == DF_OPK_REDUCE;
  h.variant.arity = DF_ARITY_GENERIC;
  h.primary = primary;
  snprintf(h.symbol, sizeof h.symbol, "dataflow_handler_%u_%s", id, name);
  return h;
}

/* A small valid packed plan on 2 SMs / cluster 2: SM 0 runs an iter that
   cluster-sends its partial to SM 1, which reduces and finalizes. */
static df_packed *hand_packed(void) {
  df_allocator a = df_allocator_default();
  df_packed *k = df_alloc(&a, sizeof *k);
  assert_non_null(k);
  memset(k, 0, sizeof *k);
  k->alloc = a;
  k->abi_version = DF_ABI_VERSION;
  k->topology = (df_topology){2, 2};
  const df_abi_instr instrs[5] = {
      {DF_ABI_OP_ITER, 0, 0, 0, 0, 1, 0, 1u << 16},
      {DF_ABI_OP_EXIT, S, S, S, 1, 0, S, 0},
      {DF_ABI_OP_REDUCE, 1, 0, 64, 1, 1, 1, 1},
      {DF_ABI_OP_FINALIZE, 2, 0, 128, 2, 0, 1, 0},
      {DF_ABI_OP_EXIT, S, S, S, 2, 0, S, 0},
  };
  const uint32_t pack_order[5] = {0, 3, 1, 2, 4};
  const df_abi_slot slots[2] = {{0, 0, 48, 0, S, 0, 0, 0}, {48, 48, 48, 1, 0, 1, 0, 0}};
  const df_abi_comm comms[2] = {
      {DF_COMM_CLUSTER_SEND, 0, 1, 1, 0, S, 0, S, 0, 48, 0, 1},
      {DF_COMM_CLUSTER_RECV, 0, 1, 0, 0, S, 0, S, 0, 0, 0, 1},
  };
  const df_abi_args args[3] = {
      {0, 0, 2, 0, 128, 0, 0, 0, S, S, S, 0, S, 0, 0, 0},
      {0, 0, 2, 0, 0, 0, 1, 1, S, S, S, 0, S, 0, 0, 0},
      {0, 0, 2, 0, 0, 1, 1, S, S, S, S, 0, S, 0, 0, 0},
  };
  const uint32_t qoff[2] = {0, 2}, qlen[2] = {2, 3};
  const uint32_t inputs[2] = {0, 1}, coords[2] = {0, 0};
  df_handler handlers[3] = {handler(0, "split_kv", DF_OPK_ITER, true),
                            handler(1, "combine", DF_OPK_REDUCE, true),
                            handler(2, "finalize", DF_OPK_FINALIZE, true)};
  snprintf(handlers[2].symbol, sizeof handlers[2].symbol, "%s",
           "dataflow_handler_2_finalize_with_a_symbol_long_enough_to_overflow_a_name_field");
  df_named_index ops[3] = {{"split_kv", 0, DF_OPK_ITER},
                           {"combine", 1, DF_OPK_REDUCE},
                           {"finalize", 2, DF_OPK_FINALIZE}};
  df_named_index types[1] = {{"AttnInter", 0, DF_OPK_ITER}};
  k->instr_count = 5;
  k->instrs = DUP(k, instrs);
  k->pack_order = DUP(k, pack_order);
  k->slot_count = 2;
  k->slots = DUP(k, slots);
  k->comm_count = 2;
  k->comms = DUP(k, comms);
  k->arg_count = 3;
  k->args = DUP(k, args);
  k->queue_offsets = DUP(k, qoff);
  k->queue_lengths = DUP(k, qlen);
  k->input_slot_count = 2;
  k->input_slots = DUP(k, inputs);
  k->task_coord_count = 2;
  k->task_coords = DUP(k, coords);
  k->handler_count = 3;
  k->primary_handler_count = 3;
  k->handlers = DUP(k, handlers);
  k->operator_count = 3;
  k->operators = DUP(k, ops);
  k->type_count = 1;
  k->types = DUP(k, types);
  const uint32_t sb[2] = {S, 0}, cb[2] = {S, S}, cp[2] = {0, 0}, ca[2] = {S, S};
  k->barriers = (df_barrier_alloc){1, 2, 2, NULL, NULL, NULL, NULL, 0};
  k->barriers.slot_barrier = DUP(k, sb);
  k->barriers.comm_barrier = DUP(k, cb);
  k->barriers.comm_phase = DUP(k, cp);
  k->barriers.comm_ack = DUP(k, ca);
  k->shared_slot_bytes = 96;
  k->global_staging_bytes = 96;
  df_launch_package *l = &k->launch;
  l->abi_version = DF_ABI_VERSION;
  l->sm_count = 2;
  l->cluster_size = 2;
  l->barrier_count = 1;
  l->barrier_bytes = 8;
  l->hbm_recv_state_bytes = 4;
  l->shared_control_bytes = 12;
  l->shared_slot_base_offset = 16;
  l->shared_slot_bytes = 96;
  l->shared_memory_bytes = 112;
  l->flag_count = 2;
  l->flags_bytes = 8;
  l->global_staging_bytes = 96;
  l->slot_count = 2;
  l->comm_count = 2;
  l->arg_count = 3;
  l->instruction_count = 5;
  const uint32_t bio[2] = {0, 0}, bil[2] = {0, 1}, bii[1] = {0};
  l->barrier_init_offsets = DUP(k, bio);
  l->barrier_init_lengths = DUP(k, bil);
  l->barrier_init_count = 1;
  l->barrier_init_indices = DUP(k, bii);
  memset(k->fingerprint, 'a', 64);
  return k;
}

static void expect_packed_equal(const df_packed *x, const df_packed *y) {
  assert_int_equal(x->abi_version, y->abi_version);
  assert_memory_equal(&x->topology, &y->topology, sizeof x->topology);
#define SAME(f) assert_int_equal(x->f, y->f)
#define SAME_ARRAY(f, n)                                                       \
  do {                                                                         \
    if ((n) > 0)                                                               \
      assert_memory_equal(x->f, y->f, sizeof(*x->f) * (n));                    \
  } while (0)
  SAME(instr_count);
  SAME(slot_count);
  SAME(comm_count);
  SAME(arg_count);
  SAME_ARRAY(instrs, x->instr_count);
  SAME_ARRAY(pack_order, x->instr_count);
  SAME_ARRAY(slots, x->slot_count);
  SAME_ARRAY(comms, x->comm_count);
  SAME_ARRAY(args, x->arg_count);
  SAME_ARRAY(queue_offsets, x->topology.sm_count);
  SAME_ARRAY(queue_lengths, x->topology.sm_count);
  SAME(input_slot_count);
  SAME(task_coord_count);
  SAME_ARRAY(input_slots, x->input_slot_count);
  SAME_ARRAY(task_coords, x->task_coord_count);
  SAME(handler_count);
  SAME(primary_handler_count);
  for (uint32_t i = 0; i < x->handler_count; i++) {
    const df_handler *a = &x->handlers[i], *b = &y->handlers[i];
    assert_int_equal(a->id, b->id);
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->has_identity, b->has_identity);
    if (a->has_identity)
      assert_memory_equal(&a->identity, &b->identity, sizeof a->identity);
    assert_int_equal(a->has_variant, b->has_variant);
    if (a->has_variant)
      assert_true(df_variant_equal(&a->variant, &b->variant));
    assert_int_equal(a->primary, b->primary);
    assert_string_equal(a->symbol, b->symbol);
  }
  SAME(operator_count);
  SAME(type_count);
  for (uint32_t i = 0; i < x->operator_count; i++) {
    assert_string_equal(x->operators[i].name, y->operators[i].name);
    assert_int_equal(x->operators[i].index, y->operators[i].index);
    assert_int_equal(x->operators[i].kind, y->operators[i].kind);
  }
  for (uint32_t i = 0; i < x->type_count; i++) {
    assert_string_equal(x->types[i].name, y->types[i].name);
    assert_int_equal(x->types[i].index, y->types[i].index);
  }
  SAME(barriers.barrier_count);
  SAME(barriers.slot_count);
  SAME(barriers.comm_count);
  SAME(barriers.ack_count);
  SAME_ARRAY(barriers.slot_barrier, x->barriers.slot_count);
  SAME_ARRAY(barriers.comm_barrier, x->barriers.comm_count);
  SAME_ARRAY(barriers.comm_phase, x->barriers.comm_count);
  SAME_ARRAY(barriers.comm_ack, x->barriers.comm_count);
  SAME(shared_slot_bytes);
  SAME(global_staging_bytes);
  SAME(scratch_bytes);
  const df_launch_package *la = &x->launch, *lb = &y->launch;
  assert_memory_equal(la, lb, offsetof(df_launch_package, needs_flag_reset));
  assert_int_equal(la->needs_flag_reset, lb->needs_flag_reset);
  assert_int_equal(la->barrier_init_count, lb->barrier_init_count);
  SAME_ARRAY(launch.barrier_init_offsets, x->topology.sm_count);
  SAME_ARRAY(launch.barrier_init_lengths, x->topology.sm_count);
  SAME_ARRAY(launch.barrier_init_indices, x->launch.barrier_init_count);
  assert_string_equal(x->fingerprint, y->fingerprint);
#undef SAME
#undef SAME_ARRAY
}

static void expect_program_equal(const df_program *x, const df_program *y) {
  assert_string_equal(x->name, y->name);
  assert_int_equal(x->axis_count, y->axis_count);
  for (uint32_t i = 0; i < x->axis_count; i++)
    assert_string_equal(x->axes[i], y->axes[i]);
  assert_int_equal(x->range_count, y->range_count);
  for (uint32_t i = 0; i < x->range_count; i++) {
    assert_string_equal(x->ranges[i].axis, y->ranges[i].axis);
    assert_string_equal(x->ranges[i].source, y->ranges[i].source);
  }
  assert_int_equal(x->type_count, y->type_count);
  for (uint32_t i = 0; i < x->type_count; i++) {
    assert_string_equal(x->types[i].name, y->types[i].name);
    assert_int_equal(x->types[i].field_count, y->types[i].field_count);
    for (uint32_t f = 0; f < x->types[i].field_count; f++) {
      const df_field *a = &x->types[i].fields[f], *b = &y->types[i].fields[f];
      assert_string_equal(a->name, b->name);
      assert_int_equal(a->dtype, b->dtype);
      assert_int_equal(a->rank, b->rank);
      assert_memory_equal(a->shape, b->shape, sizeof a->shape);
    }
  }
  assert_int_equal(x->op_count, y->op_count);
  for (uint32_t i = 0; i < x->op_count; i++) {
    const df_operator *a = &x->ops[i], *b = &y->ops[i];
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->result_type, b->result_type);
    assert_int_equal(a->workspace_bytes, b->workspace_bytes);
    assert_int_equal(a->param_count, b->param_count);
    for (uint32_t j = 0; j < a->param_count; j++) {
      assert_string_equal(a->params[j].name, b->params[j].name);
      assert_int_equal(a->params[j].kind, b->params[j].kind);
      assert_int_equal(a->params[j].type, b->params[j].type);
    }
  }
  assert_int_equal(x->stage_count, y->stage_count);
  for (uint32_t i = 0; i < x->stage_count; i++) {
    const df_stage *a = &x->stages[i], *b = &y->stages[i];
    assert_string_equal(a->name, b->name);
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->op, b->op);
    assert_int_equal(a->input, b->input);
    assert_string_equal(a->range_axis, b->range_axis);
    assert_int_equal(a->task_arg_count, b->task_arg_count);
    for (uint32_t j = 0; j < a->task_arg_count; j++)
      assert_string_equal(a->task_args[j], b->task_args[j]);
    assert_int_equal(a->binding_count, b->binding_count);
    for (uint32_t j = 0; j < a->binding_count; j++) {
      assert_string_equal(a->bindings[j].param, b->bindings[j].param);
      assert_string_equal(a->bindings[j].tensor, b->bindings[j].tensor);
    }
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->logical_type, b->logical_type);
    assert_int_equal(a->output_arity, b->output_arity);
    assert_string_equal(a->policy, b->policy);
  }
  assert_int_equal(x->select_arch, y->select_arch);
  assert_int_equal(x->transfer_tile_bytes, y->transfer_tile_bytes);
  assert_int_equal(x->memory_auto, y->memory_auto);
  assert_int_equal(x->shared_memory_limit, y->shared_memory_limit);
  assert_int_equal(x->auto_policy, y->auto_policy);
  assert_int_equal(x->split_auto, y->split_auto);
}

/* write -> read -> write: identical bytes, equal fields, equal program. */
static void round_trip(const df_packed *k, const df_program *prog) {
  uint8_t *b1, *b2;
  size_t n1, n2;
  ok(df_blob_write(k, prog, NULL, &b1, &n1));
  assert_int_equal(n1 % 16, 8); /* sections padded to 16, then the checksum */
  df_packed *r;
  df_program *rp;
  ok(df_blob_read(b1, n1, NULL, &r, &rp));
  expect_packed_equal(k, r);
  if (prog) {
    assert_non_null(rp);
    expect_program_equal(prog, rp);
    ok(df_program_validate(rp));
  } else {
    assert_null(rp);
  }
  ok(df_blob_write(r, rp, NULL, &b2, &n2));
  assert_int_equal(n1, n2);
  assert_memory_equal(b1, b2, n1);
  free(b1);
  free(b2);
  df_packed_destroy(r);
  df_program_destroy(rp);
}

static uint8_t *write_blob(const df_packed *k, const df_program *prog, size_t *n) {
  uint8_t *b;
  ok(df_blob_write(k, prog, NULL, &b, n));
  return b;
}

/* Offset of a section's data, from the table. */
static size_t sec_off(const uint8_t *b, uint32_t id) {
  uint32_t nsec;
  memcpy(&nsec, b + 20, 4);
  for (uint32_t i = 0; i < nsec; i++) {
    const uint8_t *e = b + 32 + 16 * i;
    uint32_t eid, off;
    memcpy(&eid, e, 4);
    memcpy(&off, e + 8, 4);
    if (eid == id)
      return off;
  }
  fail_msg("no section %u", id);
  return 0;
}

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }

/* Read must fail with DF_EFORMAT and a message containing `frag`. */
static void expect_reject(const uint8_t *b, size_t n, const char *frag) {
  df_packed *k = (df_packed *)1;
  df_program *p = (df_program *)1;
  df_status s = df_blob_read(b, n, NULL, &k, &p);
  if (s.code != DF_EFORMAT || !strstr(s.message, frag))
    fail_msg("expected DF_EFORMAT with \"%s\", got %d \"%s\"", frag, s.code, s.message);
  assert_null(k);
  assert_null(p);
  assert_non_null(strstr(s.message, "plan blob"));
}

/* Patch word `field` of record `rec` (record_bytes each) of a section,
   reseal, and expect a rejection naming `frag`. */
static void expect_patch_reject(const uint8_t *orig, size_t n, uint32_t id, size_t rec_bytes,
                                uint32_t rec, uint32_t field, uint32_t value,
                                const char *frag) {
  uint8_t *b = malloc(n);
  memcpy(b, orig, n);
  put32(b + sec_off(b, id) + rec * rec_bytes + 4 * field, value);
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, frag);
  free(b);
}

/* ---- round trips -------------------------------------------------------------- */

static void hand_plan_round_trips(void **state) {
  (void)state;
  df_packed *k = hand_packed();
  df_program *prog = seed_attention_program();
  round_trip(k, NULL);
  round_trip(k, prog);
  k->fingerprint[0] = '\0'; /* no fingerprint is allowed */
  round_trip(k, prog);
  df_program_destroy(prog);
  df_packed_destroy(k);
}

static void seed_plans_round_trip(void **state) {
  (void)state;
  df_plan *plans[2] = {seed_make_plan(), seed_make_reshared_plan()};
  df_program *progs[2] = {seed_attention_program(), seed_moe_program()};
  for (int i = 0; i < 2; i++) {
    df_packed *k;
    ok(df_pack(plans[i], NULL, NULL, &k));
    round_trip(k, progs[i]);
    round_trip(k, NULL);
    df_packed_destroy(k);
    df_plan_destroy(plans[i]);
    df_program_destroy(progs[i]);
  }
}

/* ---- corruption ---------------------------------------------------------------- */

static void every_truncation_is_rejected(void **state) {
  (void)state;
  df_packed *k = hand_packed();
  df_program *prog = seed_attention_program();
  size_t n;
  uint8_t *b = write_blob(k, prog, &n);
  for (size_t len = 0; len < n; len++) {
    uint8_t *t = malloc(len ? len : 1); /* exact size so ASan sees over-reads */
    memcpy(t, b, len);
    df_packed *r;
    df_status s = df_blob_read(t, len, NULL, &r, NULL);
    assert_int_equal(s.code, DF_EFORMAT);
    /* Also with the total length and checksum patched to fit. */
    if (len >= 40) {
      uint64_t total = len;
      memcpy(t + 24, &total, 8);
      ok(df_blob_reseal(t, len));
      s = df_blob_read(t, len, NULL, &r, NULL);
      assert_int_equal(s.code, DF_EFORMAT);
    }
    free(t);
  }
  expect_reject(NULL, 0, "shorter than the 40-byte minimum");
  free(b);
  df_program_destroy(prog);
  df_packed_destroy(k);
}

static void header_fields_are_checked(void **state) {
  (void)state;
  df_packed *k = hand_packed();
  size_t n;
  uint8_t *orig = write_blob(k, NULL, &n);
  uint8_t *b = malloc(n);
  struct {
    size_t at;
    uint32_t value;
    const char *frag;
  } cases[] = {
      {0, 0x4c504645u, "magic is not"},
      {8, 2, "format version 2 is not supported"},
      {12, 6, "ABI version 6 does not match"},
      {16, 48, "header size 48 is not 32"},
      {20, 3, "section count 3 out of range (17..18)"},
      {20, 18, "does not match the contents"}, /* the checksum covers the header */
      {24, 12, "total length 12 does not match"},
      {28, 1, "total length"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memcpy(b, orig, n);
    put32(b + cases[i].at, cases[i].value);
    expect_reject(b, n, cases[i].frag);
  }
  /* A flipped payload byte or checksum byte fails the checksum. */
  memcpy(b, orig, n);
  b[n / 2] ^= 1;
  expect_reject(b, n, "checksum 0x");
  memcpy(b, orig, n);
  b[n - 1] ^= 0x80;
  expect_reject(b, n, "does not match the contents");
  /* Section count 18 without the program section (resealed). */
  memcpy(b, orig, n);
  put32(b + 20, 18);
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "section instructions: offset 304 overlaps");
  free(b);
  free(orig);
  df_packed_destroy(k);
}

static void section_table_is_checked(void **state) {
  (void)state;
  df_packed *k = hand_packed();
  size_t n;
  uint8_t *orig = write_blob(k, NULL, &n);
  uint8_t *b = malloc(n);
  uint32_t slots_off = (uint32_t)sec_off(orig, DF_BLOB_SEC_SLOTS);
  struct {
    uint32_t entry, word, value;
    const char *frag;
  } cases[] = {
      {2, 0, 9, "section table entry 2: id 9, expected 3 (comms)"},
      {1, 2, slots_off + 4, "section slots: offset"},
      {1, 2, slots_off + 16, "leaves a gap"},
      {1, 2, slots_off - 16, "overlaps the bytes before it"},
      {1, 3, 0x7fffffff, "extend past the checksum"},
      {1, 1, 3, "section slots: length 64 is not 3 records x 32 bytes"},
      {0, 1, 0, "section instructions: length 160 is not 0 records x 32 bytes"},
      {12, 1, 2, "section barriers: record count 2 is not 1"},
      {15, 3, 66, "fingerprint: length 66"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memcpy(b, orig, n);
    put32(b + 32 + 16 * cases[i].entry + 4 * cases[i].word, cases[i].value);
    ok(df_blob_reseal(b, n));
    expect_reject(b, n, cases[i].frag);
  }
  /* Non-zero padding after a section. */
  memcpy(b, orig, n);
  size_t fp = sec_off(b, DF_BLOB_SEC_FINGERPRINT);
  b[fp + 65] = 1;
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "padding byte at");
  free(b);
  free(orig);
  df_packed_destroy(k);
}

static void record_indices_are_checked(void **state) {
  (void)state;
  df_packed *k = hand_packed();
  size_t n;
  uint8_t *b = write_blob(k, NULL, &n);
  enum { I = 32, SL = 32, C = 48, A = 64, W = 4, H = 72, NM = 12 };
  struct {
    uint32_t id;
    size_t rec_bytes;
    uint32_t rec, field, value;
    const char *frag;
  } cases[] = {
      {DF_BLOB_SEC_INSTRUCTIONS, I, 0, 0, 6, "instr 0: opcode 6 out of range (0..5)"},
      {DF_BLOB_SEC_INSTRUCTIONS, I, 1, 1, 0, "instr 1: handler_id 0 must be S for opcode exit"},
      {DF_BLOB_SEC_INSTRUCTIONS, I, 2, 1, 3, "instr 2: handler_id 3 out of range (3 handlers)"},
      {DF_BLOB_SEC_INSTRUCTIONS, I, 1, 3, 0, "instr 1: arg_offset 0 must be S for opcode exit"},
      {DF_BLOB_SEC_INSTRUCTIONS, I, 2, 3, 65, "instr 2: arg_offset 65 is not a multiple of 64"},
      {DF_BLOB_SEC_INSTRUCTIONS, I, 2, 3, 192, "instr 2: arg_offset 192 out of range (3 args)"},
      {DF_BLOB_SEC_INSTRUCTIONS, I, 2, 3, S, "instr 2: arg_offset is S"},
      {DF_BLOB_SEC_INSTRUCTIONS, I, 2, 5, 2, "instr 2: comm range [1, 3) out of range (2 comms)"},
      {DF_BLOB_SEC_INSTRUCTIONS, I, 2, 4, S, "instr 2: comm range"},
      {DF_BLOB_SEC_INSTRUCTIONS, I, 3, 6, 2, "instr 3: slot_id 2 out of range (2 slots)"},
      {DF_BLOB_SEC_SLOTS, SL, 0, 4, 1, "slot 0: barrier_index 1 out of range (1 barriers)"},
      {DF_BLOB_SEC_SLOTS, SL, 0, 4, 0, "slot 0: barrier_index 0 differs from the barrier"},
      {DF_BLOB_SEC_SLOTS, SL, 1, 3, 2, "slot 1: flag_index 2 out of range (2 flags)"},
      {DF_BLOB_SEC_SLOTS, SL, 1, 5, 2, "slot 1: owner_cta 2 out of range (2 CTAs)"},
      {DF_BLOB_SEC_SLOTS, SL, 1, 6, 16, "slot 1: flags 0x10 has unknown bits"},
      {DF_BLOB_SEC_SLOTS, SL, 1, 7, 16, "slot 1: reserved 16 must be 0"},
      {DF_BLOB_SEC_SLOTS, SL, 1, 0, 64, "slot 1: shared bytes [64, 112) exceed shared_slot_bytes 96"},
      {DF_BLOB_SEC_SLOTS, SL, 1, 1, S, "slot 1: global bytes"},
      {DF_BLOB_SEC_COMMS, C, 1, 0, 0, "comm 1: kind 0 out of range (1..7)"},
      {DF_BLOB_SEC_COMMS, C, 1, 0, 8, "comm 1: kind 8 out of range (1..7)"},
      {DF_BLOB_SEC_COMMS, C, 0, 1, 2, "comm 0: src_slot_id 2 out of range (2 slots)"},
      {DF_BLOB_SEC_COMMS, C, 1, 2, 9, "comm 1: dst_slot_id 9 out of range (2 slots)"},
      {DF_BLOB_SEC_COMMS, C, 1, 3, 2, "comm 1: peer_cta_rank 2 out of range (cluster size 2)"},
      {DF_BLOB_SEC_COMMS, C, 1, 5, 0, "comm 1: flag_index 0 out of range (0 cluster ACKs)"},
      {DF_BLOB_SEC_COMMS, C, 1, 7, 0, "comm 1: barrier_index 0 must be S for cluster_recv"},
      {DF_BLOB_SEC_COMMS, C, 1, 9, 49, "comm 1: bytes [0, 49) exceed slot capacity 48"},
      {DF_BLOB_SEC_COMMS, C, 0, 8, 8, "comm 0: bytes [8, 56) exceed slot capacity 48"},
      {DF_BLOB_SEC_COMMS, C, 1, 11, 0, "comm 1: segment_count is 0"},
      {DF_BLOB_SEC_COMMS, C, 1, 10, 1, "comm 1: segment_id 1 out of range (1 segments)"},
      {DF_BLOB_SEC_ARGS, A, 0, 2, 3, "args 0: task coords [0, 3) out of range (2 task_coords)"},
      {DF_BLOB_SEC_ARGS, A, 2, 5, 2, "args 2: input slots [2, 3) out of range (2 input_slots)"},
      {DF_BLOB_SEC_ARGS, A, 0, 3, 200, "args 0: range_begin 200 is after range_end 128"},
      {DF_BLOB_SEC_ARGS, A, 1, 7, 5, "args 1: output_slot 5 out of range (2 slots)"},
      {DF_BLOB_SEC_ARGS, A, 1, 8, 64 * 3, "args 1: handoff_peer_arg_offset 192"},
      {DF_BLOB_SEC_ARGS, A, 1, 8, 1, "args 1: handoff_peer_arg_offset 1"},
      {DF_BLOB_SEC_ARGS, A, 1, 12, 2, "args 1: handoff_arena_slot 2 out of range"},
      {DF_BLOB_SEC_ARGS, A, 1, 13, 16, "args 1: handoff_flags 0x10 has unknown bits"},
      {DF_BLOB_SEC_ARGS, A, 1, 14, 3, "args 1: reserved0 (source wait action) 3 out of range"},
      {DF_BLOB_SEC_ARGS, A, 1, 15, 1, "args 1: reserved1 (fused parts) 1 must be 0 or 2..8"},
      {DF_BLOB_SEC_QUEUE_OFFSETS, W, 1, 0, 3, "queue 1: queue_offset 3 is not 2"},
      {DF_BLOB_SEC_QUEUE_LENGTHS, W, 1, 0, 2, "queues cover 4 of 5 packed instructions"},
      {DF_BLOB_SEC_INPUT_SLOTS, W, 1, 0, 2, "input_slots 1: slot id 2 out of range (2 slots)"},
      {DF_BLOB_SEC_PACK_ORDER, W, 1, 0, 5, "pack_order 1: plan instruction id 5 out of range"},
      {DF_BLOB_SEC_PACK_ORDER, W, 1, 0, 0, "pack_order 1: plan instruction id 0 appears twice"},
      {DF_BLOB_SEC_HANDLERS, H, 1, 0, 2, "handler 1: id 2 is not its position"},
      {DF_BLOB_SEC_HANDLERS, H, 1, 1, 5, "handler 1: kind 5 out of range (0..4)"},
      {DF_BLOB_SEC_HANDLERS, H, 1, 2, 2, "handler 1: has_identity 2 is not 0 or 1"},
      {DF_BLOB_SEC_HANDLERS, H, 1, 4, 4, "handler 1: identity operator_kind 4 out of range"},
      {DF_BLOB_SEC_HANDLERS, H, 1, 3, 7, "handler 1: variant base (1, reduce) differs"},
      {DF_BLOB_SEC_HANDLERS, H, 0, 8, 2, "handler 0: variant schema_version 2 is not 1"},
      {DF_BLOB_SEC_HANDLERS, H, 0, 10, 3, "handler 0: variant iter_mode 3 out of range"},
      {DF_BLOB_SEC_HANDLERS, H, 0, 11, 4, "handler 0: variant iter_value 4 does not suit"},
      {DF_BLOB_SEC_HANDLERS, H, 1, 13, 3, "handler 1: variant arity 3 out of range"},
      {DF_BLOB_SEC_HANDLERS, H, 2, 9, 1, "handler 2: variant with base kind finalize has an iter"},
      {DF_BLOB_SEC_HANDLERS, H, 0, 9, 0, "handler 0: variant with base kind iter lacks an iter"},
      {DF_BLOB_SEC_HANDLERS, H, 1, 12, 0, "handler 1: arity set but has_arity is 0"},
      {DF_BLOB_SEC_HANDLERS, H, 1, 2, 0, "handler 1: identity fields set but has_identity is 0"},
      {DF_BLOB_SEC_HANDLERS, H, 1, 5, 0, "handler 1: variant fields set but has_variant is 0"},
      {DF_BLOB_SEC_HANDLERS, H, 2, 14, 0, "primary_handler_count 3 but 2 handlers"},
      {DF_BLOB_SEC_HANDLERS, H, 2, 15, 0x7fffffff, "handler 2: implementation: string offset 2147483646 out of range"},
      {DF_BLOB_SEC_OPERATORS, NM, 1, 1, 3, "operator 1 ('combine'): index 3 out of range (3 handlers)"},
      {DF_BLOB_SEC_OPERATORS, NM, 1, 2, 5, "operator 1 ('combine'): kind 5 out of range"},
      {DF_BLOB_SEC_TYPES, NM, 0, 1, 1, "type 0 ('AttnInter'): index 1 out of range (1 types)"},
      {DF_BLOB_SEC_BARRIERS, W, 0, 0, 2, "barriers: barrier_count 2 differs from the launch"},
      {DF_BLOB_SEC_BARRIERS, W, 0, 3, 1, "barriers: ack_count 1 differs"},
      {DF_BLOB_SEC_BARRIERS, W, 0, 1, 3, "barriers: length 48 is not 52 for 3 slots and 2 comms"},
      {DF_BLOB_SEC_BARRIERS, W, 4, 0, 1, "slot 0: barrier index 1 out of range (1 barriers)"},
      {DF_BLOB_SEC_BARRIERS, W, 6, 0, 1, "barriers: comm 0: barrier index 1 out of range"},
      {DF_BLOB_SEC_BARRIERS, W, 10, 0, 0, "barriers: comm 0: ack index 0 out of range (0 ACKs)"},
      {DF_BLOB_SEC_LAUNCH, W, 0, 0, 6, "launch: abi_version 6 is not the ABI version 8"},
      {DF_BLOB_SEC_LAUNCH, W, 1, 0, 3, "launch: sm_count 3 is not the topology's 2"},
      {DF_BLOB_SEC_LAUNCH, W, 19, 0, 4, "launch: instruction_count 4 is not the instruction"},
      {DF_BLOB_SEC_LAUNCH, W, 4, 0, 16, "launch: barrier_bytes 16 is not 8 (derived from the"},
      {DF_BLOB_SEC_LAUNCH, W, 12, 0, 100, "launch: shared_memory_bytes 100 is not 112"},
      {DF_BLOB_SEC_LAUNCH, W, 13, 0, 3, "launch: flag_count 3 is not 2"},
      {DF_BLOB_SEC_LAUNCH, W, 20, 0, 1, "launch: scratch_slot_count 1 is not 0"},
      {DF_BLOB_SEC_LAUNCH, W, 24, 0, 1, "launch: needs_flag_reset 1 is not 0"},
      {DF_BLOB_SEC_LAUNCH, W, 24, 0, 2, "launch: needs_flag_reset 2 is not 0 or 1"},
      {DF_BLOB_SEC_LAUNCH, W, 25, 0, 0, "launch: length 124 is not 120 for 2 queues and 0"},
      {DF_BLOB_SEC_LAUNCH, W, 27, 0, 1, "launch: barrier_init_offsets[1] 1 is not 0"},
      {DF_BLOB_SEC_LAUNCH, W, 29, 0, 0, "launch: barrier-init lists cover 0 entries"},
      {DF_BLOB_SEC_LAUNCH, W, 30, 0, 1, "launch: barrier_init_indices[0] 1 out of range"},
      {DF_BLOB_SEC_TOPOLOGY, W, 0, 0, 0, "topology: GPUTopology sm_count must be positive"},
      {DF_BLOB_SEC_TOPOLOGY, W, 1, 0, 3, "cluster_size 3 must not exceed sm_count 2"},
      {DF_BLOB_SEC_TOPOLOGY, W, 5, 0, 4, "primary_handler_count 4 exceeds the 3 handlers"},
      {DF_BLOB_SEC_TOPOLOGY, W, 6, 0, 1, "topology: reserved words 1, 0 are not 0"},
      {DF_BLOB_SEC_FINGERPRINT, W, 0, 0, 0x67676767, "fingerprint character 0 is not lower-case hex"},
      {DF_BLOB_SEC_FINGERPRINT, W, 3, 0, 0, "fingerprint has 12 characters"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_patch_reject(b, n, cases[i].id, cases[i].rec_bytes, cases[i].rec, cases[i].field,
                        cases[i].value, cases[i].frag);
  free(b);
  df_packed_destroy(k);
}

static uint32_t get32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

/* String references must point into the string table at a terminated
   string that fits its C field. */
static void string_references_are_checked(void **state) {
  (void)state;
  df_packed *k = hand_packed();
  df_program *prog = seed_attention_program();
  size_t n;
  uint8_t *orig = write_blob(k, prog, &n);
  uint8_t *b = malloc(n);
  size_t hs = sec_off(orig, DF_BLOB_SEC_HANDLERS), ops = sec_off(orig, DF_BLOB_SEC_OPERATORS);
  uint32_t long_symbol = get32(orig + hs + 2 * 72 + 17 * 4);
  struct {
    size_t at;
    uint32_t value;
    const char *frag;
  } cases[] = {
      {hs + 72 + 16 * 4, 100000, "handler 1: name: string offset 100000 out of range"},
      {hs + 16 * 4, long_symbol, "handler 0: name: string at offset"},
      {ops + 12, get32(orig + ops), "operator 1: name 'split_kv' repeats entry 0"},
      {sec_off(orig, DF_BLOB_SEC_TYPES), 99999, "type 0: name: string offset 99999"},
      {sec_off(orig, DF_BLOB_SEC_PROGRAM), 77777, "program: name: string offset 77777"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memcpy(b, orig, n);
    put32(b + cases[i].at, cases[i].value);
    ok(df_blob_reseal(b, n));
    expect_reject(b, n, cases[i].frag);
  }
  memcpy(b, orig, n);
  put32(b + hs + 16 * 4, long_symbol);
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "is longer than 63 bytes");
  /* The last string loses its NUL. */
  memcpy(b, orig, n);
  size_t st = sec_off(b, DF_BLOB_SEC_STRINGS);
  uint32_t st_len = get32(b + 32 + 16 * (DF_BLOB_SEC_STRINGS - 1) + 12);
  b[st + st_len - 1] = 'A';
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "is not NUL-terminated within the string table");
  /* The fingerprint is a fixed-width field. */
  memcpy(b, orig, n);
  memset(b + sec_off(b, DF_BLOB_SEC_FINGERPRINT), 'A', 65);
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "fingerprint is not NUL-terminated");
  free(b);
  free(orig);
  df_program_destroy(prog);
  df_packed_destroy(k);
}

static void program_section_is_checked(void **state) {
  (void)state;
  df_packed *k = hand_packed();
  df_program *prog = seed_attention_program();
  size_t n;
  uint8_t *orig = write_blob(k, prog, &n);
  uint8_t *b = malloc(n);
  size_t p = sec_off(orig, DF_BLOB_SEC_PROGRAM);
  /* name, 5 counts, 2 axes, 1 range (2 words), then types: name,
     field_count, fields of 11 words; operators: 4 words + 3 per param. */
  size_t type0 = p + 24 + 8 + 8;
  size_t field0 = type0 + 8;
  size_t op0 = field0 + 2 * 44;
  size_t stage0 = op0 + (16 + 5 * 12) + (16 + 12) + (16 + 4 * 12);
  struct {
    size_t at;
    uint32_t value;
    const char *frag;
  } cases[] = {
      {p + 4, 9, "program: axis_count 9 exceeds 8"},
      {p + 8, 9, "program: range_count 9 exceeds 8"},
      {p + 12, 1000, "program: types count 1000 does not fit"},
      {p + 20, 0x10000, "program: stages count 65536 does not fit"},
      {p + 20, 4, "program: stages count 4 does not fit the 172 bytes left"},
      {type0 + 4, 1000, "program: type 0: fields count 1000 does not fit"},
      {field0 + 4, 0, "program: type 0 field 0: dtype 0 out of range"},
      {field0 + 4, DF_DTYPE_COUNT, "out of range (1..18)"},
      {field0 + 8, 9, "program: type 0 field 0: rank 9 exceeds 8"},
      {op0 + 4, 4, "program: operator 0: kind 4 out of range (0..3)"},
      {op0 + 12, 1, "program: operator 0: result_type 1 out of range (-1..1)"},
      {op0 + 16 + 4, 7, "program: operator 0 param 0: kind 7 out of range"},
      {op0 + 16 + 8, (uint32_t)-2, "program: operator 0 param 0: type -2 out of range"},
      {stage0 + 4, 4, "program: stage 0: kind 4 out of range"},
      {stage0 + 8, 3, "program: stage 0: op 3 out of range (-1..3)"},
      {stage0 + 12, 5, "program: stage 0: input 5 out of range (-1..3)"},
      {stage0 + 20, 1, "program: stage 0: type 1 out of range"},
      {stage0 + 24, 1, "program: stage 0: logical_type 1 out of range"},
      {stage0 + 36, 9, "program: stage 0: task_arg_count 9 exceeds 8"},
      {stage0 + 40, 1000, "program: stage 0: bindings count 1000 does not fit"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memcpy(b, orig, n);
    put32(b + cases[i].at, cases[i].value);
    ok(df_blob_reseal(b, n));
    expect_reject(b, n, cases[i].frag);
  }
  /* The model's own rules run too: a stage reading itself. */
  memcpy(b, orig, n);
  put32(b + stage0 + 12, 0);
  ok(df_blob_reseal(b, n));
  df_packed *r;
  df_status s = df_blob_read(b, n, NULL, &r, NULL);
  assert_int_equal(s.code, DF_EFORMAT);
  assert_non_null(strstr(s.message, "plan blob: program: "));
  free(b);
  free(orig);
  df_program_destroy(prog);
  df_packed_destroy(k);
}

static uint32_t sec_len(const uint8_t *b, uint32_t id) {
  uint32_t nsec;
  memcpy(&nsec, b + 20, 4);
  for (uint32_t i = 0; i < nsec; i++) {
    uint32_t eid, len;
    memcpy(&eid, b + 32 + 16 * i, 4);
    memcpy(&len, b + 32 + 16 * i + 12, 4);
    if (eid == id)
      return len;
  }
  fail_msg("no section %u", id);
  return 0;
}

/* The compiled plan's re-plan choices (transfer tile, `auto` memory
   choice) travel in a program-section trailer of 5 words after the
   implementations; programs without choices write (and read) the bytes
   they always did; every word is checked. */
static void plan_choices_are_carried_and_checked(void **state) {
  (void)state;
  df_packed *k = hand_packed();
  df_program *prog = seed_attention_program();
  size_t n0;
  uint8_t *plain = write_blob(k, prog, &n0);
  df_packed *r;
  df_program *rp;
  ok(df_blob_read(plain, n0, NULL, &r, &rp));
  assert_int_equal(rp->transfer_tile_bytes, 0);
  assert_int_equal(rp->memory_auto, 0);
  df_packed_destroy(r);
  df_program_destroy(rp);
  prog->transfer_tile_bytes = 1024;
  round_trip(k, prog);
  prog->memory_auto = 1;
  prog->shared_memory_limit = 65536;
  prog->auto_policy = DF_POLICY_CLUSTER_LOCAL;
  round_trip(k, prog);
  size_t n;
  uint8_t *orig = write_blob(k, prog, &n);
  assert_int_equal(sec_len(orig, DF_BLOB_SEC_PROGRAM), sec_len(plain, DF_BLOB_SEC_PROGRAM) + 20);
  /* after the implementations trailer */
  prog->select_arch = DF_ARCH_SM80;
  round_trip(k, prog);
  prog->select_arch = 0;
  size_t end = sec_off(orig, DF_BLOB_SEC_PROGRAM) + sec_len(orig, DF_BLOB_SEC_PROGRAM);
  struct {
    size_t at;
    uint32_t value;
    const char *frag;
  } cases[] = {
      {end - 20, 0x12345678, "program: 20 bytes left over after the last stage"},
      {end - 16, 24, "program: transfer_tile_bytes 24 is not a multiple of 16"},
      {end - 12, 2, "program: memory_auto 2 is not 0 or 1"},
      {end - 4, DF_POLICY_STAGE_GRAPH, "auto_policy 2 is not round_robin (0) or cluster_local"},
  };
  uint8_t *b = malloc(n);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    memcpy(b, orig, n);
    put32(b + cases[i].at, cases[i].value);
    ok(df_blob_reseal(b, n));
    expect_reject(b, n, cases[i].frag);
  }
  memcpy(b, orig, n); /* a limit without auto */
  put32(b + end - 12, 0);
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "shared_memory_limit 65536 / auto_policy 1 without memory_auto");
  memcpy(b, orig, n); /* a trailer choosing nothing */
  put32(b + end - 16, 0);
  put32(b + end - 12, 0);
  put32(b + end - 8, 0);
  put32(b + end - 4, 0);
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "plan choices trailer records no choice");
  /* the writer refuses what the reader would */
  prog->transfer_tile_bytes = 8;
  uint8_t *w;
  size_t wn;
  df_status s = df_blob_write(k, prog, NULL, &w, &wn);
  assert_int_equal(s.code, DF_EINVAL);
  assert_non_null(strstr(s.message, "transfer_tile_bytes 8 is not a multiple of 16"));
  free(b);
  free(orig);
  free(plain);
  df_program_destroy(prog);
  df_packed_destroy(k);
}

/* Handler workspaces travel as the last trailer, {operator, bytes} per
   handler that has one (docs/workspace.md); blobs without are unchanged;
   each entry is checked by the program model's rule. */
static void workspace_is_carried_and_checked(void **state) {
  (void)state;
  df_packed *k = hand_packed();
  df_program *prog = seed_attention_program();
  size_t n0;
  uint8_t *plain = write_blob(k, prog, &n0);
  ok(df_program_set_handler_workspace(prog, "split_kv", 8192));
  ok(df_program_set_handler_workspace(prog, "finalize", 196608));
  round_trip(k, prog);
  prog->split_auto = 1; /* after the split choice */
  round_trip(k, prog);
  prog->split_auto = 0;
  size_t n;
  uint8_t *orig = write_blob(k, prog, &n);
  assert_int_equal(sec_len(orig, DF_BLOB_SEC_PROGRAM), sec_len(plain, DF_BLOB_SEC_PROGRAM) + 24);
  df_packed *r;
  df_program *rp;
  ok(df_blob_read(orig, n, NULL, &r, &rp));
  assert_int_equal(df_program_workspace_bytes(rp), 196608);
  df_packed_destroy(r);
  df_program_destroy(rp);
  /* WKSP 2 {0 8192} {2 196608} */
  size_t end = sec_off(orig, DF_BLOB_SEC_PROGRAM) + sec_len(orig, DF_BLOB_SEC_PROGRAM);
  uint8_t *b = malloc(n);
  memcpy(b, orig, n);
  put32(b + end - 4, 232449);
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "program: workspace 1: handler 'finalize': df.workspace_bytes 232449 "
                      "must be 0 to 232448");
  memcpy(b, orig, n);
  put32(b + end - 8, 7);
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "program: workspace 1: operator 7 out of range (3 operators)");
  memcpy(b, orig, n);
  put32(b + end - 8, 0);
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "program: workspace 1: operator 'split_kv' has bytes 0 or a second entry");
  memcpy(b, orig, n);
  put32(b + end - 20, 0);
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "program: workspace trailer: count 0 is not 1 to the 3 operators");
  free(b);
  free(orig);
  free(plain);
  df_program_destroy(prog);
  df_packed_destroy(k);
}

/* block-size=auto travels as its own 2-word trailer after the plan
   choices (alone or with a tile); blobs without it are unchanged; the
   flag must be 1, once, last, and not with memory_auto. */
static void split_choice_is_carried_and_checked(void **state) {
  (void)state;
  df_packed *k = hand_packed();
  df_program *prog = seed_attention_program();
  size_t n0;
  uint8_t *plain = write_blob(k, prog, &n0);
  prog->split_auto = 1;
  round_trip(k, prog);
  size_t n;
  uint8_t *orig = write_blob(k, prog, &n);
  assert_int_equal(sec_len(orig, DF_BLOB_SEC_PROGRAM), sec_len(plain, DF_BLOB_SEC_PROGRAM) + 8);
  df_packed *r;
  df_program *rp;
  ok(df_blob_read(orig, n, NULL, &r, &rp));
  assert_int_equal(rp->split_auto, 1);
  assert_int_equal(rp->memory_auto, 0);
  assert_int_equal(rp->transfer_tile_bytes, 0);
  df_packed_destroy(r);
  df_program_destroy(rp);
  prog->transfer_tile_bytes = 256; /* after the plan choices */
  round_trip(k, prog);
  prog->select_arch = DF_ARCH_SM80; /* and the implementations */
  round_trip(k, prog);
  prog->select_arch = 0;
  prog->transfer_tile_bytes = 0;
  size_t end = sec_off(orig, DF_BLOB_SEC_PROGRAM) + sec_len(orig, DF_BLOB_SEC_PROGRAM);
  uint8_t *b = malloc(n);
  memcpy(b, orig, n);
  put32(b + end - 4, 2);
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "program: split choice trailer: split_auto 2 is not 1");
  memcpy(b, orig, n);
  put32(b + end - 4, 0);
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "program: split choice trailer: split_auto 0 is not 1");
  memcpy(b, orig, n); /* an unknown trailer */
  put32(b + end - 8, 0x12345678);
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "program: 8 bytes left over after the last stage");
  free(b);
  /* with memory_auto: the writer refuses, and so does the reader */
  prog->memory_auto = 1;
  uint8_t *w;
  size_t wn;
  df_status s = df_blob_write(k, prog, NULL, &w, &wn);
  assert_int_equal(s.code, DF_EINVAL);
  assert_non_null(strstr(s.message, "split_auto and memory_auto exclude each other"));
  prog->memory_auto = 0;
  prog->transfer_tile_bytes = 256; /* tile + split, then memory_auto set in the bytes */
  free(orig);
  orig = write_blob(k, prog, &n);
  end = sec_off(orig, DF_BLOB_SEC_PROGRAM) + sec_len(orig, DF_BLOB_SEC_PROGRAM);
  b = malloc(n);
  memcpy(b, orig, n);
  put32(b + end - 20, 1); /* RPLN tile memory_auto limit policy | ASPL flag */
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "program: split_auto and memory_auto exclude each other");
  memcpy(b, orig, n); /* the split trailer before the plan choices */
  uint8_t t[28];
  memcpy(t, b + end - 28, 20);
  memcpy(t + 20, b + end - 8, 8);
  memcpy(b + end - 28, t + 20, 8);
  memcpy(b + end - 20, t, 20);
  ok(df_blob_reseal(b, n));
  expect_reject(b, n, "program: 20 bytes left over after the last split choice");
  free(b);
  free(orig);
  free(plain);
  df_program_destroy(prog);
  df_packed_destroy(k);
}

/* The writer refuses plans the reader would reject. */
static void writer_rejects_bad_plans(void **state) {
  (void)state;
  df_packed *k = hand_packed();
  uint8_t *b = (uint8_t *)1;
  size_t n = 1;
  k->comms[1].dst_slot_id = 9;
  df_status s = df_blob_write(k, NULL, NULL, &b, &n);
  assert_int_equal(s.code, DF_EINVAL);
  assert_string_equal(s.message,
                      "plan blob write: comm 1: dst_slot_id 9 out of range (2 slots)");
  assert_null(b);
  assert_int_equal(n, 0);
  k->comms[1].dst_slot_id = 1;
  uint32_t *saved = k->input_slots;
  k->input_slots = NULL;
  s = df_blob_write(k, NULL, NULL, &b, &n);
  assert_non_null(strstr(s.message, "input_slots is NULL but has 2 entries"));
  k->input_slots = saved;
  df_program *prog = seed_attention_program();
  prog->stages[0].op = 7;
  s = df_blob_write(k, prog, NULL, &b, &n);
  assert_int_equal(s.code, DF_EINVAL);
  assert_non_null(strstr(s.message, "plan blob write: program: stage 0: op 7 out of range"));
  df_program_destroy(prog);
  df_packed_destroy(k);
}

/* ---- allocation failures ---------------------------------------------------- */

typedef struct counting {
  int budget; /* allocations left before failing; -1 = unlimited */
  int live;
} counting;

static void *counting_realloc(void *user, void *ptr, size_t size) {
  counting *c = user;
  if (size == 0) {
    if (ptr)
      c->live--;
    free(ptr);
    return NULL;
  }
  if (c->budget == 0)
    return NULL;
  if (c->budget > 0)
    c->budget--;
  void *p = realloc(ptr, size);
  if (p && !ptr)
    c->live++;
  return p;
}

static void allocation_failures_are_clean(void **state) {
  (void)state;
  df_packed *k = hand_packed();
  df_program *prog = seed_moe_program();
  size_t n;
  uint8_t *b = write_blob(k, prog, &n);
  bool succeeded = false;
  for (int budget = 0; budget < 200 && !succeeded; budget++) {
    counting c = {budget, 0};
    df_allocator a = {counting_realloc, &c};
    df_packed *r;
    df_program *rp;
    df_status s = df_blob_read(b, n, &a, &r, &rp);
    if (s.code == DF_OK) {
      succeeded = true;
      df_packed_destroy(r);
      df_program_destroy(rp);
    } else {
      assert_int_equal(s.code, DF_ENOMEM);
    }
    assert_int_equal(c.live, 0);
    c.budget = budget;
    uint8_t *w;
    size_t wn;
    s = df_blob_write(k, prog, &a, &w, &wn);
    if (s.code == DF_OK)
      df_free(&a, w);
    else
      assert_int_equal(s.code, DF_ENOMEM);
    assert_int_equal(c.live, 0);
  }
  assert_true(succeeded);
  free(b);
  df_program_destroy(prog);
  df_packed_destroy(k);
}

/* ---- dumps ------------------------------------------------------------------- */

static char *dump(df_status (*fn)(const df_packed *, FILE *), const df_packed *k) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  ok(fn(k, f));
  fclose(f);
  return text;
}

static void has(const char *text, const char *frag) {
  if (!strstr(text, frag))
    fail_msg("dump lacks \"%s\":\n%s", frag, text);
}

static void text_dump_names_every_field(void **state) {
  (void)state;
  df_packed *k = hand_packed();
  char *t = dump(df_packed_dump_text, k);
  has(t, "plan: abi_version=8 sm_count=2 cluster_size=2\n");
  has(t, "instr 0: opcode=1 handler_id=0 task_id=0 arg_offset=0 comm_offset=0 comm_count=1 "
         "slot_id=0 flags=0x10000\n");
  has(t, "instr 1: opcode=0 handler_id=S task_id=S arg_offset=S comm_offset=1 comm_count=0 "
         "slot_id=S flags=0x0\n");
  has(t, "slot 1: shared_offset=48 global_offset=48 bytes=48 flag_index=1 barrier_index=0 "
         "owner_cta=1 flags=0x0 reserved=0\n");
  has(t, "comm 0: kind=1 src_slot_id=0 dst_slot_id=1 peer_cta_rank=1 barrier_phase=0 "
         "flag_index=S flag_epoch=0 barrier_index=S byte_offset=0 byte_count=48 "
         "segment_id=0 segment_count=1\n");
  has(t, "args 2: task_id=0 task_coord_offset=0 task_coord_count=2 range_begin=0 range_end=0 "
         "input_slot_offset=1 input_slot_count=1 output_slot=S handoff_peer_arg_offset=S "
         "handoff_plan_index=S handoff_binding_index=S handoff_stage_count=0 "
         "handoff_arena_slot=S handoff_flags=0x0 reserved0=0 reserved1=0\n");
  has(t, "queue 1: offset=2 length=3\n");
  has(t, "input_slots: 0 1\n");
  has(t, "task_coords: 0 0\n");
  has(t, "pack_order: 0 3 1 2 4\n");
  has(t, "handler 0: name=split_kv kind=iter primary=1 symbol=dataflow_handler_0_split_kv "
         "identity=0:iter variant=0:iter,schema_version=1,iter_range=generic\n");
  has(t, "handler 1: name=combine kind=reduce primary=1 symbol=dataflow_handler_1_combine "
         "identity=1:reduce variant=1:reduce,schema_version=1,reduce_arity=generic\n");
  has(t, "operator 2: name=finalize handler_id=2 kind=finalize\n");
  has(t, "type 0: name=AttnInter index=0\n");
  has(t, "barriers: barrier_count=1 ack_count=0 slot_count=2 comm_count=2\n");
  has(t, "barrier_slot 0: barrier_index=S\n");
  has(t, "barrier_comm 1: barrier_index=S barrier_phase=0 ack_index=S\n");
  has(t, "launch_package:\n  abi_version=8\n  sm_count=2\n  cluster_size=2\n"
         "  barrier_count=1\n  barrier_bytes=8\n");
  has(t, "  shared_memory_bytes=112\n");
  has(t, "  needs_flag_reset=0\n  barrier_init_count=1\n");
  has(t, "  barrier_init 1: offset=0 length=1 indices=0\n");
  has(t, "fingerprint=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n");
  free(t);
  df_packed_destroy(k);
}

/* A tiny JSON well-formedness check: strings terminated, brackets
   balanced and matched, nothing after the top-level value. */
static void expect_json(const char *s) {
  char stack[64];
  int depth = 0;
  bool in_str = false, done = false;
  for (const char *p = s; *p; p++) {
    if (in_str) {
      if (*p == '\\')
        p++;
      else if (*p == '"')
        in_str = false;
      else
        assert_true((unsigned char)*p >= 0x20);
      continue;
    }
    assert_false(done && *p != '\n');
    if (*p == '"') {
      in_str = true;
    } else if (*p == '{' || *p == '[') {
      assert_true(depth < 64);
      stack[depth++] = *p;
    } else if (*p == '}' || *p == ']') {
      assert_true(depth > 0);
      assert_int_equal(stack[--depth], *p == '}' ? '{' : '[');
      done = depth == 0;
    }
  }
  assert_false(in_str);
  assert_int_equal(depth, 0);
  assert_true(done);
}

static void json_dump_uses_reference_keys(void **state) {
  (void)state;
  df_packed *k = hand_packed();
  strcpy(k->types[0].name, "Attn\"Inter\\");
  char *j = dump(df_packed_dump_json, k);
  expect_json(j);
  has(j, "{\"abi_version\":8,");
  has(j, "\"operator_table\":{\"split_kv\":0,\"combine\":1,\"finalize\":2}");
  has(j, "\"operator_kinds\":{\"split_kv\":\"iter\",\"combine\":\"reduce\","
         "\"finalize\":\"finalize\"}");
  has(j, "\"handler_identities\":[{\"operator_id\":0,\"operator_kind\":\"iter\"},");
  has(j, "\"handler_variant_keys\":[{\"schema_version\":1,\"base_identity\":"
         "{\"operator_id\":0,\"operator_kind\":\"iter\"}");
  has(j, "\"intermediate_type_table\":{\"Attn\\\"Inter\\\\\":0}");
  has(j, "\"queue_offsets\":[0,2],\"queue_lengths\":[2,3]");
  has(j, "\"input_slots\":[0,1]");
  has(j, "\"task_coords\":[0,0]");
  has(j, "\"instructions\":[{\"opcode\":1,\"handler_id\":0,\"task_id\":0,\"arg_offset\":0,"
         "\"comm_offset\":0,\"comm_count\":1,\"slot_id\":0,\"flags\":65536},"
         "{\"opcode\":0,\"handler_id\":4294967295,");
  has(j, "\"slots\":[{\"shared_offset\":0,\"global_offset\":0,\"bytes\":48,\"flag_index\":0,"
         "\"barrier_index\":4294967295,\"owner_cta\":0,\"flags\":0,\"reserved\":0}");
  has(j, "\"segment_id\":0,\"segment_count\":1}");
  has(j, "\"handoff_flags\":0,\"reserved0\":0,\"reserved1\":0}");
  has(j, "\"barrier_allocation\":{\"barrier_count\":1,\"slot_barrier_indices\":[4294967295,0],"
         "\"comm_barrier_indices\":[4294967295,4294967295],\"comm_barrier_phases\":[0,0],"
         "\"comm_ack_indices\":[4294967295,4294967295],\"ack_count\":0}");
  has(j, "\"launch_package\":{\"abi_version\":8,\"sm_count\":2,");
  has(j, "\"needs_flag_reset\":false,\"barrier_init_offsets\":[0,0],"
         "\"barrier_init_lengths\":[0,1],\"barrier_init_count\":1,\"barrier_init_indices\":[0]}");
  has(j, "\"fingerprint\":\"aaaa");
  free(j);
  /* Absent identities and variants are null. */
  k->handlers[2].has_identity = false;
  k->handlers[2].has_variant = false;
  j = dump(df_packed_dump_json, k);
  expect_json(j);
  has(j, "\"handler_identities\":[{\"operator_id\":0,\"operator_kind\":\"iter\"},"
         "{\"operator_id\":1,\"operator_kind\":\"reduce\"},null]");
  free(j);
  df_packed_destroy(k);
}

static void seed_dumps_are_well_formed(void **state) {
  (void)state;
  df_plan *plan = seed_make_plan();
  df_packed *k;
  ok(df_pack(plan, NULL, NULL, &k));
  char *j = dump(df_packed_dump_json, k);
  expect_json(j);
  has(j, "\"operator_table\":{\"split_kv\":0,\"combine\":1,\"finalize\":2}");
  has(j, "\"intermediate_type_table\":{\"AttnInter\":0}");
  has(j, "\"queue_offsets\":[0,5,7,9],\"queue_lengths\":[5,2,2,4]");
  has(j, "\"input_slots\":[0,1,2,3,4,5,6]");
  has(j, "\"task_coords\":[0,0,0,1,0,0,1,1,1]");
  free(j);
  char *t = dump(df_packed_dump_text, k);
  has(t, "instr 0: opcode=1 handler_id=0 task_id=0 arg_offset=0 comm_offset=0 comm_count=0 "
         "slot_id=0 flags=0x0\n");
  free(t);
  df_packed_destroy(k);
  df_plan_destroy(plan);
}

/* ---- fuzz corpus ------------------------------------------------------------- */

static void save(const char *dir, const char *name, const uint8_t *b, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(b, 1, n, f), n);
  fclose(f);
}

/* Writes the fuzzer's seed blobs when DF_BLOB_CORPUS_DIR is set. */
static void write_fuzz_corpus(void **state) {
  (void)state;
  const char *dir = getenv("DF_BLOB_CORPUS_DIR");
  if (!dir)
    skip();
  /* A hand-built plan, alone and with the attention program. */
  df_packed *hk = hand_packed();
  df_program *hp = seed_attention_program();
  size_t hn;
  uint8_t *hb = write_blob(hk, NULL, &hn);
  save(dir, "hand.blob", hb, hn);
  free(hb);
  hb = write_blob(hk, hp, &hn);
  save(dir, "hand_program.blob", hb, hn);
  free(hb);
  hp->transfer_tile_bytes = 1024; /* with the re-plan choices trailer */
  hp->memory_auto = 1;
  hp->shared_memory_limit = 232448;
  hb = write_blob(hk, hp, &hn);
  save(dir, "hand_program_choices.blob", hb, hn);
  free(hb);
  hp->memory_auto = 0; /* a tile and the split choice trailer */
  hp->shared_memory_limit = 0;
  hp->split_auto = 1;
  hb = write_blob(hk, hp, &hn);
  save(dir, "hand_program_split.blob", hb, hn);
  free(hb);
  df_program_destroy(hp);
  df_packed_destroy(hk);
  df_plan *plans[2] = {seed_make_plan(), seed_make_reshared_plan()};
  df_program *progs[2] = {seed_attention_program(), seed_moe_program()};
  const char *names[2][2] = {{"make_plan.blob", "make_plan_program.blob"},
                             {"make_reshared_plan.blob", "make_reshared_plan_program.blob"}};
  for (int i = 0; i < 2; i++) {
    df_packed *k;
    ok(df_pack(plans[i], NULL, NULL, &k));
    for (int with = 0; with < 2; with++) {
      size_t n;
      uint8_t *b = write_blob(k, with ? progs[i] : NULL, &n);
      save(dir, names[i][with], b, n);
      free(b);
    }
    df_packed_destroy(k);
    df_plan_destroy(plans[i]);
    df_program_destroy(progs[i]);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(hand_plan_round_trips),
      cmocka_unit_test(seed_plans_round_trip),
      cmocka_unit_test(every_truncation_is_rejected),
      cmocka_unit_test(header_fields_are_checked),
      cmocka_unit_test(section_table_is_checked),
      cmocka_unit_test(record_indices_are_checked),
      cmocka_unit_test(string_references_are_checked),
      cmocka_unit_test(program_section_is_checked),
      cmocka_unit_test(plan_choices_are_carried_and_checked),
      cmocka_unit_test(split_choice_is_carried_and_checked),
      cmocka_unit_test(workspace_is_carried_and_checked),
      cmocka_unit_test(writer_rejects_bad_plans),
      cmocka_unit_test(allocation_failures_are_clean),
      cmocka_unit_test(text_dump_names_every_field),
      cmocka_unit_test(json_dump_uses_reference_keys),
      cmocka_unit_test(seed_dumps_are_well_formed),
      cmocka_unit_test(write_fuzz_corpus),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
