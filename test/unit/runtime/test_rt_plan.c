/* Plans: from blobs (with their program), files and programs; re-planned
   in process for new range lengths and switched into an executable
   without reloading the module, with handler ids mapped onto the module
   plan's table; and every way that fails. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "df/blob.h"
#include "rt_fixture.h"
#include "seed_plans.h"

static uint8_t *seed_blob_with(size_t *len, uint32_t tile, uint32_t auto_limit);

/* The seed plan as a blob that embeds its program. */
static uint8_t *seed_blob(size_t *len) { return seed_blob_with(len, 0, 0); }

/* The seed blob read as a plan of `rt`. */
static df_rt_plan *seed_plan(df_rt *rt) {
  size_t len;
  uint8_t *bytes = seed_blob(&len);
  df_rt_plan *p;
  fx_ok(df_rt_plan_from_blob(rt, bytes, len, &p));
  free(bytes);
  return p;
}

/* ... with the re-plan choices of a plan compiled with
   transfer-tile-bytes=`tile` and, when auto_limit is not 0,
   reduce-strategy=auto under that shared-memory limit. */
static uint8_t *seed_blob_with(size_t *len, uint32_t tile, uint32_t auto_limit) {
  df_plan *plan = seed_make_plan();
  df_pack_options po;
  memset(&po, 0, sizeof po);
  df_packed *k;
  fx_ok(df_pack(plan, &po, NULL, &k));
  df_program *prog = seed_attention_program();
  prog->transfer_tile_bytes = tile;
  prog->memory_auto = auto_limit != 0;
  prog->shared_memory_limit = auto_limit;
  uint8_t *bytes;
  fx_ok(df_blob_write(k, prog, NULL, &bytes, len));
  df_program_destroy(prog);
  df_packed_destroy(k);
  df_plan_destroy(plan);
  return bytes;
}

static df_schedule_options lengths(const uint32_t *kv, uint32_t n, uint32_t block) {
  df_schedule_options o = df_schedule_options_default();
  o.block_size = block;
  o.range_count = 1;
  o.ranges[0].axis = "kv";
  o.ranges[0].count = n;
  o.ranges[0].lengths = kv;
  o.extent_count = 1;
  o.extents[0] = n;
  return o;
}

static void from_blob_and_file(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  size_t len;
  uint8_t *bytes = seed_blob(&len);
  df_rt_plan *p;
  fx_ok(df_rt_plan_from_blob(f.rt, bytes, len, &p));
  const df_packed *k = df_rt_plan_packed(p);
  assert_int_equal(k->instr_count, 13);
  assert_int_equal(k->topology.sm_count, 4);
  assert_non_null(df_rt_plan_program(p));
  assert_string_equal(df_rt_plan_program(p)->name, "attention");
  assert_int_equal(df_rt_plan_block_size(p), 0);
  df_rt_plan_destroy(p);
  char path[] = "/tmp/dfrt_plan_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *out = fdopen(fd, "wb");
  fwrite(bytes, 1, len, out);
  fclose(out);
  fx_ok(df_rt_plan_from_file(f.rt, path, &p));
  assert_int_equal(df_rt_plan_packed(p)->comm_count, 6);
  df_rt_plan_destroy(p);
  /* Bad blobs: the reader's message. */
  bytes[0] = 'X';
  fx_fails(df_rt_plan_from_blob(f.rt, bytes, len, &p), DF_EFORMAT, "plan blob");
  assert_null(p);
  out = fopen(path, "wb");
  fwrite(bytes, 1, 20, out);
  fclose(out);
  fx_fails(df_rt_plan_from_file(f.rt, path, &p), DF_EFORMAT, "plan blob");
  remove(path);
  fx_fails(df_rt_plan_from_file(f.rt, "/nonexistent/plan.dfplan", &p), DF_EIO,
           "plan: cannot open '/nonexistent/plan.dfplan'");
  fx_fails(df_rt_plan_from_blob(NULL, bytes, len, &p), DF_EINVAL, "NULL argument");
  fx_fails(df_rt_plan_from_file(f.rt, NULL, &p), DF_EINVAL, "plan: NULL path");
  free(bytes);
  assert_null(df_rt_plan_packed(NULL));
  assert_null(df_rt_plan_program(NULL));
  assert_int_equal(df_rt_plan_block_size(NULL), 0);
  df_rt_plan_destroy(NULL);
  fx_close(&f);
}

static void from_packed_checks(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_pack_options po;
  memset(&po, 0, sizeof po);
  df_plan *plan = seed_make_plan();
  df_packed *k;
  df_rt_plan *p;
  fx_ok(df_pack(plan, &po, NULL, &k));
  k->abi_version = 6;
  fx_fails(df_rt_plan_from_packed(f.rt, k, NULL, 0, &p), DF_EINVAL,
           "plan: ABI version 6 (launch package 8) is not the runtime's 8");
  fx_ok(df_pack(plan, &po, NULL, &k));
  k->launch.cluster_size = 4;
  fx_fails(df_rt_plan_from_packed(f.rt, k, NULL, 0, &p), DF_EINVAL,
           "launch package topology 4/4 differs from the plan's 4/2");
  fx_ok(df_pack(plan, &po, NULL, &k));
  k->launch.slot_count = 1;
  fx_fails(df_rt_plan_from_packed(f.rt, k, NULL, 0, &p), DF_EINVAL,
           "launch package counts (13 instructions, 1 slots");
  fx_ok(df_pack(plan, &po, NULL, &k));
  k->topology.sm_count = 0;
  fx_fails(df_rt_plan_from_packed(f.rt, k, NULL, 0, &p), DF_EINVAL, "is empty");
  fx_ok(df_pack(plan, &po, NULL, &k));
  df_free(&k->alloc, k->launch.barrier_init_offsets);
  k->launch.barrier_init_offsets = NULL;
  fx_fails(df_rt_plan_from_packed(f.rt, k, NULL, 0, &p), DF_EINVAL, "no barrier-init lists");
  /* NULL arguments: ownership is still taken. */
  fx_ok(df_pack(plan, &po, NULL, &k));
  fx_fails(df_rt_plan_from_packed(NULL, k, seed_attention_program(), 0, &p), DF_EINVAL,
           "NULL argument");
  df_plan_destroy(plan);
  /* From a program, in process. */
  df_program *prog = seed_attention_program();
  const uint32_t kv[2] = {384, 256};
  df_schedule_options so = lengths(kv, 2, 128);
  so.topology.sm_count = 4;
  so.topology.cluster_size = 2;
  fx_ok(df_rt_plan_from_program(f.rt, prog, &so, NULL, &p));
  assert_int_equal(df_rt_plan_block_size(p), 128);
  assert_int_equal(df_rt_plan_packed(p)->instr_count, 13);
  assert_non_null(df_rt_plan_program(p));
  df_rt_plan_destroy(p);
  so.block_size = 0;
  fx_fails(df_rt_plan_from_program(f.rt, prog, &so, NULL, &p), DF_EINVAL, "block_size");
  fx_fails(df_rt_plan_from_program(f.rt, NULL, &so, NULL, &p), DF_EINVAL, "NULL argument");
  df_program_destroy(prog);
  fx_close(&f);
}

/* Re-plan the blob's program for new lengths and switch the executable to
   it: the module is loaded once. */
static void replans_with_the_same_module(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *base = seed_plan(f.rt);
  df_rt_executable_options o;
  memset(&o, 0, sizeof o);
  o.block_size = 128;
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, base, &o, &e));
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.last_u32[4], 128);

  /* Same variants (3 blocks -> generic, 2 -> binary): ids unchanged. */
  const uint32_t kv1[2] = {300, 200};
  df_schedule_options so = lengths(kv1, 2, 128);
  df_rt_plan *p1;
  fx_ok(df_rt_plan_replan(base, &so, NULL, &p1));
  assert_int_equal(df_rt_plan_block_size(p1), 128);
  assert_int_equal(df_rt_plan_packed(p1)->topology.sm_count, 4);
  /* Run-time re-plans skip the fingerprint unless pack options ask. */
  assert_string_equal(df_rt_plan_packed(p1)->fingerprint, "");
  df_pack_options with_hash;
  memset(&with_hash, 0, sizeof with_hash);
  df_rt_plan *hashed;
  fx_ok(df_rt_plan_replan(base, &so, &with_hash, &hashed));
  assert_int_equal(strlen(df_rt_plan_packed(hashed)->fingerprint), 64);
  df_rt_plan_destroy(hashed);
  fx_ok(df_rt_executable_set_plan(e, p1, NULL));
  fx_ok(df_rt_executable_launch(e, NULL));
  const df_packed *k1 = df_rt_plan_packed(p1);
  const df_abi_args *args = fake_host(fake.last_ptrs[8]);
  assert_memory_equal(args, k1->args, sizeof(df_abi_args) * k1->arg_count);
  assert_int_equal(args[0].range_end, 128);
  assert_int_equal(fake_count("cuModuleLoadDataEx"), 1);

  /* Variants in another order (task 0 binary, task 1 generic): the
     plan's ids are mapped onto the module plan's. */
  const uint32_t kv2[2] = {256, 384};
  so = lengths(kv2, 2, 128);
  df_rt_plan *p2;
  fx_ok(df_rt_plan_replan(base, &so, NULL, &p2));
  const df_packed *k2 = df_rt_plan_packed(p2);
  assert_int_equal(k2->handlers[1].variant.arity, DF_ARITY_BINARY);
  fx_ok(df_rt_executable_set_plan(e, p2, NULL));
  fx_ok(df_rt_executable_launch(e, NULL));
  const df_abi_instr *in = fake_host(fake.last_ptrs[0]);
  const df_packed *kb = df_rt_plan_packed(base);
  for (uint32_t i = 0; i < k2->instr_count; i++) {
    uint32_t h = k2->instrs[i].handler_id;
    if (h == DF_SENTINEL) {
      assert_int_equal(in[i].handler_id, DF_SENTINEL);
      continue;
    }
    const df_handler *want = &k2->handlers[h], *got = &kb->handlers[in[i].handler_id];
    assert_true(df_variant_equal(&want->variant, &got->variant));
  }
  /* The binary reduce is handler 1 in the new plan, 3 in the module's. */
  bool remapped = false;
  for (uint32_t i = 0; i < k2->instr_count; i++)
    if (k2->instrs[i].handler_id == 1) {
      assert_int_equal(in[i].handler_id, 3);
      remapped = true;
    }
  assert_true(remapped);
  assert_int_equal(fake_count("cuModuleLoadDataEx"), 1);

  /* A variant the module's plan lacks (one block: passthrough reduce). */
  const uint32_t kv3[2] = {512, 128};
  so = lengths(kv3, 2, 128);
  df_rt_plan *p3;
  fx_ok(df_rt_plan_replan(base, &so, NULL, &p3));
  fake_clear_calls();
  fx_fails(df_rt_executable_set_plan(e, p3, NULL), DF_EINVAL,
           "executable: plan handler 3, combine (1,reduce) arity passthrough, is not among the "
           "4 handlers of the module's plan");
  assert_int_equal(fake_count("cuMemcpyHtoDAsync"), 0); /* nothing uploaded */
  fx_ok(df_rt_executable_launch(e, NULL));              /* the previous plan still runs */
  assert_int_equal(fake.last_cfg.gridDimX, 4);

  /* More SMs: the grid follows, staging and flags grow. */
  so = lengths(kv1, 2, 128);
  so.topology.sm_count = 8;
  so.topology.cluster_size = 2;
  df_rt_plan *p4;
  fx_ok(df_rt_plan_replan(base, &so, NULL, &p4));
  fx_ok(df_rt_executable_set_plan(e, p4, NULL));
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.last_cfg.gridDimX, 8);
  assert_int_equal(fake.last_attrs[0].value.clusterDim.x, 2);
  const uint32_t *q = fake_host(fake.last_ptrs[2]);
  assert_memory_equal(q, df_rt_plan_packed(p4)->queue_lengths, 8 * 4);

  /* A plan failing a pre-check leaves the executable as it was. */
  so.topology.sm_count = 6;
  so.topology.cluster_size = 4;
  df_rt_plan *p5;
  fx_ok(df_rt_plan_replan(base, &so, NULL, &p5));
  fx_fails(df_rt_executable_set_plan(e, p5, NULL), DF_EINVAL, "not a multiple of cluster_size");
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.last_cfg.gridDimX, 8);
  fx_fails(df_rt_executable_set_plan(e, NULL, NULL), DF_EINVAL, "NULL argument");

  /* Re-planning errors. */
  df_rt_plan *bad;
  so = lengths(kv1, 2, 0);
  fx_fails(df_rt_plan_replan(base, &so, NULL, &bad), DF_EINVAL, "plan: re-planning: ");
  fx_fails(df_rt_plan_replan(base, NULL, NULL, &bad), DF_EINVAL, "NULL argument");
  df_rt_plan *no_program = fx_seed_plan(f.rt);
  so = lengths(kv1, 2, 128);
  fx_fails(df_rt_plan_replan(no_program, &so, NULL, &bad), DF_EINVAL,
           "plan: cannot re-plan: the plan carries no program");
  df_rt_plan_destroy(no_program);

  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p1);
  df_rt_plan_destroy(p2);
  df_rt_plan_destroy(p3);
  df_rt_plan_destroy(p4);
  df_rt_plan_destroy(p5);
  df_rt_plan_destroy(base);
  fx_close(&f);
}

static uint32_t max_comm_bytes(const df_packed *k) {
  uint32_t m = 0;
  for (uint32_t i = 0; i < k->comm_count; i++)
    if (k->comms[i].byte_count > m)
      m = k->comms[i].byte_count;
  return m;
}

/* The seed program scheduled with `policy` / `strategy` and packed. */
static df_packed *scheduled(const df_schedule_options *o, df_policy policy,
                            df_reduce_strategy strategy) {
  df_schedule_options so = *o;
  so.topology.sm_count = 4;
  so.topology.cluster_size = 2;
  so.policy = policy;
  so.strategy = strategy;
  df_program *g = seed_attention_program();
  df_plan *plan;
  fx_ok(df_schedule(g, &so, &plan));
  df_pack_options po;
  memset(&po, 0, sizeof po);
  po.skip_fingerprint = true;
  df_packed *k;
  fx_ok(df_pack(plan, &po, NULL, &k));
  df_plan_destroy(plan);
  df_program_destroy(g);
  return k;
}

static bool same_records(const df_packed *a, const df_packed *b) {
  return a->instr_count == b->instr_count && a->comm_count == b->comm_count &&
         !memcmp(a->instrs, b->instrs, sizeof *a->instrs * a->instr_count) &&
         !memcmp(a->comms, b->comms, sizeof *a->comms * a->comm_count);
}

/* Re-plans repeat the compiled plan's choices recorded in the blob: its
   transfer tile (unless the options give one) and its `auto` memory
   choice (all_at_once needs 368 bytes for kv 300,200 on 4 SMs, streaming
   112: under 200 bytes the re-plan streams whatever the options say). */
/* A decode step patched into the plan (df_rt_plan_patch_lengths) reaches
   the device with set_plan; a boundary crossing is refused and leaves the
   plan as it was; a NULL plan is an error. */
static void patches_lengths(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = seed_plan(f.rt);
  const uint32_t kv1[2] = {300, 200};
  df_schedule_options so = lengths(kv1, 2, 128);
  df_rt_plan *q;
  fx_ok(df_rt_plan_replan(p, &so, NULL, &q));
  df_rt_plan_destroy(p);
  df_rt_executable_options o;
  memset(&o, 0, sizeof o);
  o.block_size = 128;
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, q, &o, &e));
  const uint32_t kv2[2] = {301, 201};
  df_patch_result r;
  fx_ok(df_rt_plan_patch_lengths(q, kv2, 2, 128, &r));
  assert_true(r.patched);
  assert_int_equal(r.changed, 2);
  fx_ok(df_rt_executable_set_plan(e, q, NULL));
  fx_ok(df_rt_executable_launch(e, NULL));
  const df_packed *k = df_rt_plan_packed(q);
  const df_abi_args *args = fake_host(fake.last_ptrs[8]);
  assert_memory_equal(args, k->args, sizeof(df_abi_args) * k->arg_count);
  uint32_t ends[2] = {0, 0};
  for (uint32_t i = 0; i < k->instr_count; i++)
    if (k->instrs[i].opcode == DF_ABI_OP_ITER) {
      const df_abi_args *a = &args[k->instrs[i].arg_offset / sizeof(df_abi_args)];
      if (a->range_end > ends[a->task_id])
        ends[a->task_id] = a->range_end;
    }
  assert_int_equal(ends[0], 301);
  assert_int_equal(ends[1], 201);
  const uint32_t kv3[2] = {385, 201}; /* task 0's last block [256, 385) */
  fx_ok(df_rt_plan_patch_lengths(q, kv3, 2, 128, &r));
  assert_false(r.patched);
  assert_non_null(strstr(r.reason, "task 0's last block would hold 129 range units"));
  fx_fails(df_rt_plan_patch_lengths(NULL, kv3, 2, 128, &r), DF_EINVAL, "NULL argument");
  fx_fails(df_rt_plan_patch_lengths(q, kv3, 0, 128, &r), DF_EINVAL, "no lengths");
  fx_fails(df_rt_plan_patch_lengths(q, NULL, 2, 128, &r), DF_EINVAL, "NULL argument");
  fx_fails(df_rt_plan_patch_lengths(q, kv3, 1, 128, &r), DF_EINVAL,
           "plan: patching range lengths: patch lengths: instruction");

  /* Through the executable: one copy of the args section alone, which the
     next launch reads; lengths that do not move copy nothing; a refused
     patch copies nothing and changes nothing. */
  const uint32_t kv4[2] = {310, 205};
  fake_clear_calls();
  fx_ok(df_rt_executable_patch_lengths(e, q, kv4, 2, 128, NULL, &r));
  assert_true(r.patched);
  assert_int_equal(r.changed, 2);
  assert_int_equal(fake_count("cuMemcpyHtoDAsync"), 1);
  assert_int_equal(fake_nth("cuMemcpyHtoDAsync", 0)->bytes, sizeof(df_abi_args) * k->arg_count);
  fx_ok(df_rt_executable_launch(e, NULL));
  args = fake_host(fake.last_ptrs[8]);
  assert_ptr_equal(fake_host(fake_nth("cuMemcpyHtoDAsync", 0)->a[0]), args);
  assert_memory_equal(args, k->args, sizeof(df_abi_args) * k->arg_count);
  fake_clear_calls();
  fx_ok(df_rt_executable_patch_lengths(e, q, kv4, 2, 128, NULL, &r));
  assert_true(r.patched);
  assert_int_equal(r.changed, 0);
  fx_ok(df_rt_executable_patch_lengths(e, q, kv3, 2, 128, NULL, &r));
  assert_false(r.patched);
  assert_int_equal(fake_count("cuMemcpyHtoDAsync"), 0);
  assert_memory_equal(args, k->args, sizeof(df_abi_args) * k->arg_count);
  /* Only the plan the executable runs. */
  df_rt_plan *other;
  fx_ok(df_rt_plan_replan(q, &so, NULL, &other));
  fx_fails(df_rt_executable_patch_lengths(e, other, kv4, 2, 128, NULL, &r), DF_EINVAL,
           "needs the plan the executable runs");
  fx_ok(df_rt_executable_set_plan(e, other, NULL));
  fx_fails(df_rt_executable_patch_lengths(e, q, kv4, 2, 128, NULL, &r), DF_EINVAL,
           "needs the plan the executable runs");
  fx_ok(df_rt_executable_patch_lengths(e, other, kv4, 2, 128, NULL, &r));
  assert_true(r.patched);
  fx_fails(df_rt_executable_patch_lengths(NULL, other, kv4, 2, 128, NULL, &r), DF_EINVAL,
           "NULL argument");
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(other);
  df_rt_plan_destroy(q);
  fx_close(&f);
}

/* A plan with an instruction pool (docs/pool.md) re-plans with one even
   when the options leave pool off: its kernel has the pool's paths and
   may lack a static plan's cluster ones. */
static void replans_keep_the_pool(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *base = fx_pool_plan(f.rt), *p;
  assert_true(df_packed_has_pool(df_rt_plan_packed(base)));
  const uint32_t kv2[2] = {500, 100};
  df_schedule_options again = lengths(kv2, 2, 128);
  assert_false(again.pool);
  fx_ok(df_rt_plan_replan(base, &again, NULL, &p));
  assert_true(df_packed_has_pool(df_rt_plan_packed(p)));
  df_rt_plan_destroy(p);
  df_rt_plan_destroy(base);
  /* a plan without a pool re-plans without one */
  base = seed_plan(f.rt);
  assert_false(df_packed_has_pool(df_rt_plan_packed(base)));
  fx_ok(df_rt_plan_replan(base, &again, NULL, &p));
  assert_false(df_packed_has_pool(df_rt_plan_packed(p)));
  df_rt_plan_destroy(p);
  df_rt_plan_destroy(base);
  fx_close(&f);
}

static void replans_repeat_recorded_choices(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  const uint32_t kv[2] = {300, 200};
  df_schedule_options so = lengths(kv, 2, 128);
  size_t len;
  uint8_t *bytes = seed_blob_with(&len, 16, 0);
  df_rt_plan *base, *p;
  fx_ok(df_rt_plan_from_blob(f.rt, bytes, len, &base));
  free(bytes);
  assert_int_equal(df_rt_plan_program(base)->transfer_tile_bytes, 16);
  fx_ok(df_rt_plan_replan(base, &so, NULL, &p));
  const df_packed *k = df_rt_plan_packed(p);
  assert_int_equal(max_comm_bytes(k), 16);
  assert_int_equal(k->comms[0].segment_count, 3); /* 48-byte AttnInter */
  df_rt_plan_destroy(p);
  so.transfer_tile_bytes = 32; /* the options' tile wins */
  fx_ok(df_rt_plan_replan(base, &so, NULL, &p));
  assert_int_equal(max_comm_bytes(df_rt_plan_packed(p)), 32);
  df_rt_plan_destroy(p);
  df_rt_plan_destroy(base);

  so = lengths(kv, 2, 128);
  bytes = seed_blob_with(&len, 0, 200);
  fx_ok(df_rt_plan_from_blob(f.rt, bytes, len, &base));
  free(bytes);
  fx_ok(df_rt_plan_replan(base, &so, NULL, &p));
  k = df_rt_plan_packed(p);
  /* the options ask for round_robin / all_at_once; auto streams */
  df_packed *streaming = scheduled(&so, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING);
  df_packed *at_once = scheduled(&so, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE);
  assert_true(same_records(k, streaming));
  assert_false(same_records(k, at_once));
  df_packed_destroy(streaming);
  df_packed_destroy(at_once);
  df_rt_plan_destroy(p);
  df_rt_plan_destroy(base);
  fx_close(&f);
}

/* A blob recording block-size=auto: re-plans (and re-plans of those,
   whose program is a clone) choose the block for their lengths, and the
   plan's block size is the chosen one, not the options'. */
static void replans_repeat_split_choice(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_plan *plan = seed_make_plan();
  df_pack_options po;
  memset(&po, 0, sizeof po);
  df_packed *k;
  fx_ok(df_pack(plan, &po, NULL, &k));
  df_plan_destroy(plan);
  df_program *prog = seed_attention_program();
  prog->split_auto = 1;
  size_t len;
  uint8_t *bytes;
  fx_ok(df_blob_write(k, prog, NULL, &bytes, &len));
  df_program_destroy(prog);
  df_packed_destroy(k);
  df_rt_plan *base, *p, *q;
  fx_ok(df_rt_plan_from_blob(f.rt, bytes, len, &base));
  free(bytes);
  assert_int_equal(df_rt_plan_program(base)->split_auto, 1);
  const uint32_t kv1[2] = {2000, 2000}, kv2[2] = {1000, 1000};
  df_schedule_options so = lengths(kv1, 2, 128);
  fx_ok(df_rt_plan_replan(base, &so, NULL, &p));
  assert_int_equal(df_rt_plan_block_size(p), 1024);
  assert_int_equal(df_rt_plan_program(p)->split_auto, 1);
  so = lengths(kv2, 2, 128);
  fx_ok(df_rt_plan_replan(p, &so, NULL, &q));
  assert_int_equal(df_rt_plan_block_size(q), 512);
  df_rt_plan_destroy(q);
  df_rt_plan_destroy(p);
  df_rt_plan_destroy(base);
  fx_close(&f);
}

/* Shrinking plans reuse the device buffers. */
static void set_plan_reuses_buffers(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *big = fx_seed_plan(f.rt);
  df_rt_plan *small = fx_cluster_plan(f.rt);
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, big, NULL, &e));
  fake_clear_calls();
  fx_ok(df_rt_executable_set_plan(e, small, NULL));
  assert_int_equal(fake_count("cuMemAlloc"), 0);
  assert_int_equal(fake_count("cuMemcpyHtoDAsync"), 1);
  df_rt_launch_info info;
  fx_ok(df_rt_executable_launch_info(e, &info));
  assert_false(info.needs_flag_reset);
  fx_ok(df_rt_executable_set_plan(e, big, NULL));
  assert_int_equal(fake_count("cuMemAlloc"), 0);
  fx_ok(df_rt_executable_launch_info(e, &info));
  assert_true(info.needs_flag_reset);
  fx_fails(df_rt_executable_launch_info(NULL, &info), DF_EINVAL, "NULL argument");
  /* An upload failure leaves no complete plan: launches are refused until
     a plan is set again. */
  fake.fail_name = "cuMemcpyHtoDAsync";
  fake.fail_result = CUDA_ERROR_INVALID_VALUE;
  fx_fails(df_rt_executable_set_plan(e, small, NULL), DF_EINVAL, "plan arrays: cuMemcpyHtoDAsync");
  fake.fail_name = NULL;
  fx_fails(df_rt_executable_launch(e, NULL), DF_EINVAL,
           "launch: the executable holds no complete plan");
  fx_ok(df_rt_executable_set_plan(e, small, NULL));
  fx_ok(df_rt_executable_launch(e, NULL));
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(big);
  df_rt_plan_destroy(small);
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(from_blob_and_file),
      cmocka_unit_test(from_packed_checks),
      cmocka_unit_test(replans_with_the_same_module),
      cmocka_unit_test(patches_lengths),
      cmocka_unit_test(replans_repeat_recorded_choices),
      cmocka_unit_test(replans_keep_the_pool),
      cmocka_unit_test(replans_repeat_split_choice),
      cmocka_unit_test(set_plan_reuses_buffers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
