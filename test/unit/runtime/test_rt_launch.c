/* Launching on the fake driver: the launch configuration (grid, block,
   cluster attributes, dynamic shared memory and the function maximum,
   non-portable clusters), the kernel parameters in REFERENCE §6 order and
   the plan image behind them, the flag reset only when needed, staging
   copy-back, and every pre-check of REFERENCE 7.5 with its error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "rt_fixture.h"
#include "seed_plans.h"

static df_rt_plan *attention(df_rt *rt, uint32_t sm, uint32_t cs, df_policy policy) {
  static const uint32_t kv[2] = {256, 256};
  return fx_plan(rt, seed_schedule_attention(sm, cs, kv, 2, 128, policy, DF_REDUCE_ALL_AT_ONCE,
                                             true),
                 128);
}

static void assert_section(CUdeviceptr p, const void *expected, size_t bytes) {
  const void *host = fake_host(p);
  assert_non_null(host);
  if (bytes)
    assert_memory_equal(host, expected, bytes);
}

static void seed_launch_configuration_and_parameters(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = fx_seed_plan(f.rt);
  const df_packed *k = df_rt_plan_packed(p);
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  /* The function maximum is the launch package's dynamic shared bytes. */
  assert_int_equal(k->launch.shared_memory_bytes, 368);
  assert_int_equal(fake.func_attr[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES], 368);
  assert_int_equal(fake.func_attr[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED], -1);
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.launch_count, 1);
  const CUlaunchConfig *c = &fake.last_cfg;
  assert_int_equal(c->gridDimX, 4);
  assert_int_equal(c->gridDimY, 1);
  assert_int_equal(c->gridDimZ, 1);
  assert_int_equal(c->blockDimX, 128);
  assert_int_equal(c->blockDimY, 1);
  assert_int_equal(c->blockDimZ, 1);
  assert_int_equal(c->sharedMemBytes, 368);
  assert_null(c->hStream);
  assert_int_equal(c->numAttrs, 2);
  assert_int_equal(fake.last_attrs[0].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  assert_int_equal(fake.last_attrs[0].value.clusterDim.x, 2);
  assert_int_equal(fake.last_attrs[0].value.clusterDim.y, 1);
  assert_int_equal(fake.last_attrs[0].value.clusterDim.z, 1);
  assert_int_equal(fake.last_attrs[1].id, CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE);
  assert_int_equal(fake.last_attrs[1].value.clusterSchedulingPolicyPreference,
                   CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING);
  /* Parameters in order: the plan arrays at 256-byte aligned offsets of one
     allocation, then tensor args, staging and flags of their own. */
  const CUdeviceptr *ptr = fake.last_ptrs;
  int plan_block = fake_block_index(ptr[0]);
  assert_true(plan_block >= 0);
  const int plan_params[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11};
  for (size_t i = 0; i < sizeof plan_params / sizeof plan_params[0]; i++) {
    CUdeviceptr q = ptr[plan_params[i]];
    assert_int_equal(fake_block_index(q), plan_block);
    assert_int_equal((q - ptr[0]) % 256, 0);
    if (i)
      assert_true(q >= ptr[plan_params[i - 1]]);
  }
  assert_section(ptr[0], k->instrs, sizeof(df_abi_instr) * k->instr_count);
  assert_section(ptr[1], k->queue_offsets, 16);
  assert_section(ptr[2], k->queue_lengths, 16);
  assert_section(ptr[3], k->slots, sizeof(df_abi_slot) * k->slot_count);
  assert_section(ptr[4], k->comms, sizeof(df_abi_comm) * k->comm_count);
  assert_section(ptr[5], k->launch.barrier_init_offsets, 16);
  assert_section(ptr[6], k->launch.barrier_init_lengths, 16);
  assert_section(ptr[7], k->launch.barrier_init_indices, 4 * k->launch.barrier_init_count);
  assert_section(ptr[8], k->args, sizeof(df_abi_args) * k->arg_count);
  assert_section(ptr[10], k->input_slots, 4 * k->input_slot_count);
  assert_section(ptr[11], k->task_coords, 4 * k->task_coord_count);
  const uint32_t queue_offsets[4] = {0, 5, 7, 9};
  assert_section(ptr[1], queue_offsets, sizeof queue_offsets);
  int tensor_block = fake_block_index(ptr[9]);
  int staging_block = fake_block_index(ptr[12]);
  int flags_block = fake_block_index(ptr[13]);
  assert_true(tensor_block >= 0 && staging_block >= 0 && flags_block >= 0);
  assert_true(tensor_block != plan_block && staging_block != plan_block &&
              flags_block != plan_block && staging_block != flags_block);
  assert_int_equal(fake.blocks[staging_block].size, 336);
  assert_int_equal(fake.blocks[flags_block].size, 28);
  /* The six u32: shared_slot_base_offset, barrier_count, cluster_ack_count,
     cluster_size, block_size, scratch_offset. */
  const uint32_t u32[6] = {32, 2, 0, 2, 128, 0};
  assert_memory_equal(fake.last_u32, u32, sizeof u32);
  /* Plan arrays are uploaded once, not per launch. */
  int uploads = fake_count("cuMemcpyHtoDAsync");
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake_count("cuMemcpyHtoDAsync"), uploads);
  assert_int_equal(fake.launch_count, 2);
  df_rt_launch_info info;
  fx_ok(df_rt_executable_launch_info(e, &info));
  assert_int_equal(info.grid[0], 4);
  assert_int_equal(info.cluster_size, 2);
  assert_int_equal(info.dynamic_shared_bytes, 368);
  assert_int_equal(info.param_count, 21); /* ABI 1: + the progress array */
  assert_int_equal(fake.last_progress_param, 0); /* no watchdog: NULL */
  /* an image without df_rt_kernel_abi: its flags are reset, never cleared */
  assert_false(info.flags_alternate);
  assert_int_equal(fake.last_flags_clear, 0);
  assert_int_equal(fake.last_flags_clear_words, 0);
  assert_int_equal(info.flags_bytes, 28);
  assert_int_equal(info.staging_bytes, 336);
  assert_false(info.non_portable_cluster);
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

/* Handler ids of the module plan pass through unchanged. */
static void plan_image_keeps_handler_ids(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = fx_seed_plan(f.rt);
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  fx_ok(df_rt_executable_launch(e, NULL));
  const df_abi_instr *in = fake_host(fake.last_ptrs[0]);
  /* I7 (packed index 10) is the additional binary reduce variant, id 3. */
  assert_int_equal(in[10].handler_id, 3);
  assert_int_equal(in[4].handler_id, DF_SENTINEL);
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

static void flags_reset_only_when_needed(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *hbm = fx_seed_plan(f.rt);
  df_rt_plan *cluster = fx_cluster_plan(f.rt);
  df_rt_executable *eh, *ec;
  fx_ok(df_rt_executable_create(f.mod, hbm, NULL, &eh));
  fx_ok(df_rt_executable_create(f.mod, cluster, NULL, &ec));
  fake_clear_calls();
  fx_ok(df_rt_executable_launch(ec, NULL));
  assert_int_equal(fake_count("cuMemsetD8Async"), 0);
  fx_ok(df_rt_executable_launch(eh, NULL));
  fx_ok(df_rt_executable_launch(eh, NULL));
  assert_int_equal(fake_count("cuMemsetD8Async"), 2);
  for (int i = 0; i < 2; i++) {
    const fake_call *m = fake_nth("cuMemsetD8Async", i);
    assert_int_equal(m->a[0], fake.last_ptrs[13]);
    assert_int_equal(m->a[1], 0);
    assert_int_equal(m->bytes, 28);
  }
  /* The reset precedes its launch. */
  int memset_at = -1, launch_at = -1;
  for (int i = 0; i < fake.call_count; i++) {
    if (strcmp(fake.calls[i].name, "cuMemsetD8Async") == 0 && memset_at < 0)
      memset_at = i;
    if (strcmp(fake.calls[i].name, "cuLaunchKernelEx") == 0 && i > memset_at && launch_at < 0 &&
        memset_at >= 0)
      launch_at = i;
  }
  assert_true(memset_at >= 0 && launch_at > memset_at);
  const uint32_t *flags = fake_host(fake.last_ptrs[13]);
  for (int i = 0; i < 7; i++)
    assert_int_equal(flags[i], 0);
  df_rt_executable_destroy(eh);
  df_rt_executable_destroy(ec);
  df_rt_plan_destroy(hbm);
  df_rt_plan_destroy(cluster);
  fx_close(&f);
}

/* A kernel of ABI 2 (df_rt_kernel_abi): two copies of the flags, one
   memset of both before the first launch, then each launch runs on one
   copy and clears the other (parameters 21-22) with no memset; a new
   plan or a failed launch zeroes both again. Plans without HBM flags
   pass no copy to clear. */
static void flags_alternate_without_reset(void **state) {
  (void)state;
  fake_reset();
  fake.module_kernel_abi = 2;
  rt_fixture f;
  fx_open(&f);
  assert_int_equal(df_rt_module_kernel_info(f.mod)->kernel_abi, 2);
  df_rt_plan *hbm = fx_seed_plan(f.rt);
  df_rt_plan *cluster = fx_cluster_plan(f.rt);
  df_rt_executable *eh, *ec;
  fx_ok(df_rt_executable_create(f.mod, hbm, NULL, &eh));
  fx_ok(df_rt_executable_create(f.mod, cluster, NULL, &ec));
  df_rt_launch_info info;
  fx_ok(df_rt_executable_launch_info(eh, &info));
  assert_true(info.needs_flag_reset && info.flags_alternate);
  assert_int_equal(info.flags_bytes, 28);
  assert_int_equal(info.param_count, 23); /* + the flags to clear and their count */
  fake_clear_calls();
  fx_ok(df_rt_executable_launch(ec, NULL));
  assert_int_equal(fake_count("cuMemsetD8Async"), 0);
  assert_int_equal(fake.last_flags_clear, 0);
  fx_ok(df_rt_executable_launch(eh, NULL));
  const CUdeviceptr first = fake.last_ptrs[13];
  assert_int_equal(fake_count("cuMemsetD8Async"), 1);
  const fake_call *m = fake_nth("cuMemsetD8Async", 0);
  assert_int_equal(m->a[0], first);
  assert_int_equal(m->bytes, 56);
  assert_int_equal(fake.blocks[fake_block_index(first)].size, 56);
  assert_int_equal(fake.last_flags_clear, first + 28);
  assert_int_equal(fake.last_flags_clear_words, 7);
  /* the kernel leaves flags set; the next launch runs on the cleared copy */
  uint32_t *copy0 = fake_host(first), *copy1 = fake_host(first + 28);
  copy0[3] = 5;
  copy1[2] = 9; /* zeroed by the launch above, as the kernel does */
  for (int launch = 1; launch <= 4; launch++) {
    fx_ok(df_rt_executable_launch(eh, NULL));
    const CUdeviceptr run = launch % 2 ? first + 28 : first;
    assert_int_equal(fake.last_ptrs[13], run);
    assert_int_equal(fake.last_flags_clear, launch % 2 ? first : first + 28);
    assert_int_equal(((uint32_t *)fake_host(fake.last_flags_clear))[3], 0);
  }
  assert_int_equal(fake_count("cuMemsetD8Async"), 1);
  (void)copy0;
  (void)copy1;
  /* a failed launch: both copies are zeroed before the next one */
  fake.fail_name = "cuLaunchKernelEx";
  fake.fail_result = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  assert_int_not_equal(df_rt_executable_launch(eh, NULL).code, DF_OK);
  fake.fail_name = NULL;
  fx_ok(df_rt_executable_launch(eh, NULL));
  assert_int_equal(fake_count("cuMemsetD8Async"), 2);
  assert_int_equal(fake_nth("cuMemsetD8Async", 1)->bytes, 56);
  /* a new plan: the same */
  fx_ok(df_rt_executable_set_plan(eh, hbm, NULL));
  fx_ok(df_rt_executable_launch(eh, NULL));
  assert_int_equal(fake_count("cuMemsetD8Async"), 3);
  assert_int_equal(fake.last_ptrs[13], first);
  df_rt_executable_destroy(eh);
  df_rt_executable_destroy(ec);
  df_rt_plan_destroy(hbm);
  df_rt_plan_destroy(cluster);
  fx_close(&f);
}

static void launches_on_the_given_stream(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_stream *s;
  fx_ok(df_rt_stream_create(f.dev, &s));
  assert_int_equal(fake_nth("cuStreamCreate", 0)->a[0], CU_STREAM_NON_BLOCKING);
  df_rt_plan *p = fx_seed_plan(f.rt);
  df_rt_executable_options o;
  memset(&o, 0, sizeof o);
  o.stream = s;
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, &o, &e));
  const fake_call *upload = fake_nth("cuMemcpyHtoDAsync", 0);
  assert_int_equal(upload->a[2], (uint64_t)(uintptr_t)df_rt_stream_handle(s));
  fx_ok(df_rt_executable_update_tensor_args(e, s, "0123456789abcdef0123456789abcdef", 32));
  fx_ok(df_rt_executable_launch(e, s));
  assert_ptr_equal(fake.last_cfg.hStream, df_rt_stream_handle(s));
  assert_int_equal(fake_nth("cuMemsetD8Async", 0)->a[2], (uint64_t)(uintptr_t)df_rt_stream_handle(s));
  assert_int_equal(fake_nth("cuMemcpyHtoDAsync", 1)->a[2],
                   (uint64_t)(uintptr_t)df_rt_stream_handle(s));
  fx_ok(df_rt_stream_synchronize(f.dev, s));
  assert_int_equal(fake_nth("cuStreamSynchronize", 0)->a[0],
                   (uint64_t)(uintptr_t)df_rt_stream_handle(s));
  fx_ok(df_rt_stream_synchronize(f.dev, NULL));
  fx_fails(df_rt_stream_synchronize(NULL, s), DF_EINVAL, "NULL device");
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  df_rt_stream_destroy(s);
  assert_int_equal(fake_count("cuStreamDestroy"), 1);
  fake.fail_name = "cuStreamCreate";
  fake.fail_result = CUDA_ERROR_OUT_OF_MEMORY;
  fx_fails(df_rt_stream_create(f.dev, &s), DF_ENOMEM, "cuStreamCreate failed");
  assert_null(s);
  fx_fails(df_rt_stream_create(NULL, &s), DF_EINVAL, "NULL argument");
  fx_close(&f);
}

static void non_portable_cluster_above_eight(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p16 = attention(f.rt, 16, 16, DF_POLICY_CLUSTER_LOCAL);
  df_rt_plan *p8 = attention(f.rt, 8, 8, DF_POLICY_CLUSTER_LOCAL);
  df_rt_executable *e8, *e16;
  fx_ok(df_rt_executable_create(f.mod, p8, NULL, &e8));
  assert_int_equal(fake.func_attr[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED], -1);
  fx_ok(df_rt_executable_launch(e8, NULL));
  assert_int_equal(fake.last_attrs[0].value.clusterDim.x, 8);
  fx_ok(df_rt_executable_create(f.mod, p16, NULL, &e16));
  assert_int_equal(fake.func_attr[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED], 1);
  /* The attribute is set before the maximum cluster size is asked. */
  const fake_call *q = NULL;
  for (int i = 0; (q = fake_nth("cuOccupancyMaxPotentialClusterSize", i)); i++)
    if (q->a[1] == 16)
      break;
  assert_non_null(q);
  fx_ok(df_rt_executable_launch(e16, NULL));
  assert_int_equal(fake.last_cfg.gridDimX, 16);
  assert_int_equal(fake.last_attrs[0].value.clusterDim.x, 16);
  df_rt_launch_info info;
  fx_ok(df_rt_executable_launch_info(e16, &info));
  assert_true(info.non_portable_cluster);
  df_rt_executable_destroy(e8);
  df_rt_executable_destroy(e16);
  df_rt_plan_destroy(p8);
  df_rt_plan_destroy(p16);
  fx_close(&f);
}

/* A cluster-size-1 plan: no launch attributes, residency from the
   per-SM occupancy. */
static void cluster_one_has_no_attributes(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = attention(f.rt, 2, 1, DF_POLICY_ROUND_ROBIN);
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  assert_int_equal(fake_count("cuOccupancyMaxPotentialClusterSize"), 0);
  assert_int_equal(fake_count("cuOccupancyMaxActiveBlocksPerMultiprocessor"), 1);
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.last_cfg.numAttrs, 0);
  assert_int_equal(fake.last_cfg.gridDimX, 2);
  assert_int_equal(fake.last_u32[3], 1);
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

static void block_dim_and_block_size_options(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  /* A plan whose block size is unknown (as from a blob): option or 1. */
  df_rt_plan *p = fx_plan(f.rt, seed_make_plan(), 0);
  df_rt_executable *e;
  df_rt_executable_options o;
  memset(&o, 0, sizeof o);
  fx_ok(df_rt_executable_create(f.mod, p, &o, &e));
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.last_u32[4], 1);
  df_rt_executable_destroy(e);
  o.block_size = 64;
  o.block_dim[0] = 32;
  o.block_dim[1] = 2;
  o.block_dim[2] = 2;
  fx_ok(df_rt_executable_create(f.mod, p, &o, &e));
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.last_u32[4], 64);
  assert_int_equal(fake.last_cfg.blockDimX, 32);
  assert_int_equal(fake.last_cfg.blockDimY, 2);
  assert_int_equal(fake.last_cfg.blockDimZ, 2);
  df_rt_executable_destroy(e);
  /* Bad block_dim: not 3 positive integers. */
  o.block_dim[1] = 0;
  fx_fails(df_rt_executable_create(f.mod, p, &o, &e), DF_EINVAL,
           "block_dim (32,0,2) must be 3 positive integers");
  assert_null(e);
  /* Over the kernel's maximum threads. */
  o.block_dim[0] = 2048;
  o.block_dim[1] = 1;
  o.block_dim[2] = 1;
  fx_fails(df_rt_executable_create(f.mod, p, &o, &e), DF_EINVAL,
           "over kernel 'df_persistent_kernel''s maximum of 1024 threads per block");
  df_rt_plan_destroy(p);
  fx_fails(df_rt_executable_create(NULL, NULL, NULL, &e), DF_EINVAL, "NULL argument");
  fx_close(&f);
}

static void expect_create_fails(rt_fixture *f, df_rt_plan *p, df_code code,
                                const char *fragment) {
  df_rt_executable *e = (df_rt_executable *)(uintptr_t)1;
  fake.launch_count = 0;
  fx_fails(df_rt_executable_create(f->mod, p, NULL, &e), code, fragment);
  assert_null(e);
  assert_int_equal(fake.launch_count, 0);
}

/* Device attributes are read at open: re-open after changing the fake. */
static void reopen(rt_fixture *f) {
  df_rt_module_unload(f->mod);
  df_rt_device_close(f->dev);
  fx_ok(df_rt_device_open(f->rt, 0, &f->dev));
  fx_ok(df_rt_module_load(f->dev, FX_PTX, strlen(FX_PTX), NULL, &f->mod));
}

/* A module with a handler workspace (df_handler_workspace_bytes): the
   launch asks for the plan's bytes + the workspace + 128 alignment bytes,
   as the function maximum and in the launch; over the device's opt-in
   limit the error names the plan bytes, the workspace and the limit. */
static void workspace_adds_dynamic_shared_memory(void **state) {
  (void)state;
  fake_reset();
  fake.module_has_workspace = true;
  fake.module_workspace = 196608;
  rt_fixture f;
  fx_open(&f);
  assert_int_equal(df_rt_module_kernel_info(f.mod)->workspace_bytes, 196608);
  df_rt_plan *p = fx_seed_plan(f.rt);
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  const uint32_t want = 368 + 196608 + 128;
  assert_int_equal(fake.func_attr[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES], want);
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.last_cfg.sharedMemBytes, want);
  df_rt_launch_info info;
  fx_ok(df_rt_executable_launch_info(e, &info));
  assert_int_equal(info.dynamic_shared_bytes, want);
  df_rt_executable_destroy(e);
  /* One byte over the opt-in limit. */
  fake.optin_shared = (int)want - 1;
  reopen(&f);
  expect_create_fails(&f, p, DF_EUNSUPPORTED,
                      "launch: plan needs 368 bytes of dynamic shared memory + the handler "
                      "workspace of 196608 bytes (+128 alignment) (+0 static), over device 0's "
                      "limit of 197103 bytes per block");
  fake.optin_shared = (int)want;
  reopen(&f);
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

static void pre_checks_fail_clearly(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  /* sm_count % cluster_size: a 6-SM plan in clusters of 4. */
  df_rt_plan *uneven = attention(f.rt, 6, 4, DF_POLICY_ROUND_ROBIN);
  expect_create_fails(&f, uneven, DF_EINVAL,
                      "plan sm_count 6 is not a multiple of cluster_size 4");
  /* ... reported before any other failing check. */
  fake.cluster_launch = 0;
  fake.optin_shared = 10;
  reopen(&f);
  expect_create_fails(&f, uneven, DF_EINVAL, "not a multiple of cluster_size");
  df_rt_plan_destroy(uneven);

  df_rt_plan *p = fx_seed_plan(f.rt);
  /* Shared bytes over the device limit (checked before cluster support). */
  expect_create_fails(&f, p, DF_EUNSUPPORTED,
                      "plan needs 368 bytes of dynamic shared memory (+0 static), over device "
                      "0's limit of 10 bytes per block");
  fake.optin_shared = 400;
  fake.func_static_shared = 64;
  reopen(&f);
  expect_create_fails(&f, p, DF_EUNSUPPORTED, "(+64 static), over device 0's limit of 400");
  fake.func_static_shared = 0;
  reopen(&f);
  /* Cluster launch unsupported. */
  expect_create_fails(&f, p, DF_EUNSUPPORTED,
                      "cluster_size 2 needs thread-block cluster launch, which device 0 (Fake "
                      "H200, sm_90) does not support");
  fake.cluster_launch = 1;
  reopen(&f);
  /* Cluster size over the kernel's maximum. */
  fake.max_cluster_portable = 1;
  expect_create_fails(&f, p, DF_EUNSUPPORTED,
                      "cluster_size 2 exceeds kernel 'df_persistent_kernel''s maximum cluster "
                      "size 1");
  fake.max_cluster_portable = 8;
  /* Not every cluster resident. */
  fake.max_active_clusters = 1;
  expect_create_fails(&f, p, DF_EUNSUPPORTED,
                      "only 1 clusters of 2 CTAs (128 threads, 368 dynamic shared bytes) can be "
                      "resident on device 0, the plan needs 2");
  fake.max_active_clusters = -1;
  /* Cluster 1: not every CTA resident. */
  df_rt_plan *single = attention(f.rt, 2, 1, DF_POLICY_ROUND_ROBIN);
  uint32_t single_shared = df_rt_plan_packed(single)->launch.shared_memory_bytes;
  fake.max_active_blocks = 0;
  expect_create_fails(&f, single, DF_EUNSUPPORTED, "only 0 CTAs");
  fake.max_active_blocks = 1;
  fake.sm_count = 1;
  reopen(&f);
  char want[200];
  snprintf(want, sizeof want,
           "only 1 CTAs (128 threads, %u dynamic shared bytes) can be resident on device 0's 1 "
           "SMs, the plan needs 2",
           single_shared);
  expect_create_fails(&f, single, DF_EUNSUPPORTED, want);
  df_rt_plan_destroy(single);
  fake.sm_count = 132;
  reopen(&f);
  /* A driver failure inside the checks is reported with its call. */
  fake.fail_name = "cuOccupancyMaxPotentialClusterSize";
  fake.fail_result = CUDA_ERROR_INVALID_VALUE;
  expect_create_fails(&f, p, DF_EINVAL,
                      "launch: maximum cluster size: cuOccupancyMaxPotentialClusterSize failed: "
                      "CUDA_ERROR_INVALID_VALUE (1): invalid argument");
  fake.fail_name = "cuOccupancyMaxActiveClusters";
  expect_create_fails(&f, p, DF_EINVAL, "resident clusters: cuOccupancyMaxActiveClusters");
  reopen(&f); /* forget the shared maximum set so far */
  fake.fail_name = "cuFuncSetAttribute";
  expect_create_fails(&f, p, DF_EINVAL, "dynamic shared memory maximum: cuFuncSetAttribute");
  fake.fail_name = "cuMemAlloc";
  fake.fail_result = CUDA_ERROR_OUT_OF_MEMORY;
  expect_create_fails(&f, p, DF_ENOMEM, "executable: plan arrays: cuMemAlloc failed");
  fake.fail_nth = fake_count("cuMemAlloc") + 2;
  expect_create_fails(&f, p, DF_ENOMEM, "executable: global staging: cuMemAlloc failed");
  fake.fail_nth = fake_count("cuMemAlloc") + 3;
  expect_create_fails(&f, p, DF_ENOMEM, "executable: flags: cuMemAlloc failed");
  fake.fail_name = "cuMemcpyHtoDAsync";
  fake.fail_nth = 0;
  expect_create_fails(&f, p, DF_ENOMEM, "plan arrays: cuMemcpyHtoDAsync failed");
  fake.fail_name = NULL;
  df_rt_plan_destroy(p);
  fx_close(&f);
}

static void launch_errors(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = fx_seed_plan(f.rt);
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  /* The first launch allocates the tensor-args buffer. */
  fake.fail_name = "cuMemAlloc";
  fake.fail_result = CUDA_ERROR_OUT_OF_MEMORY;
  fake.fail_nth = fake_count("cuMemAlloc") + 1;
  fx_fails(df_rt_executable_launch(e, NULL), DF_ENOMEM, "tensor args: cuMemAlloc failed");
  fake.fail_nth = 0;
  fake.fail_name = "cuLaunchKernelEx";
  fake.fail_result = CUDA_ERROR_LAUNCH_FAILED;
  fx_fails(df_rt_executable_launch(e, NULL), DF_EIO,
           "launch: cuLaunchKernelEx failed: CUDA_ERROR_LAUNCH_FAILED (719): unspecified launch "
           "failure");
  fake.fail_name = "cuMemsetD8Async";
  fake.fail_result = CUDA_ERROR_INVALID_VALUE;
  fx_fails(df_rt_executable_launch(e, NULL), DF_EINVAL, "launch: flag reset: cuMemsetD8Async");
  fake.fail_name = NULL;
  fx_fails(df_rt_executable_launch(NULL, NULL), DF_EINVAL, "NULL argument");
  /* Another executable changed the module's shared maximum: the next
     launch sets it back first. */
  df_rt_plan *c = fx_cluster_plan(f.rt);
  df_rt_executable *e2;
  fx_ok(df_rt_executable_create(f.mod, c, NULL, &e2));
  int other = fake.func_attr[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES];
  assert_int_not_equal(other, 368);
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.func_attr[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES], 368);
  int sets = fake_count("cuFuncSetAttribute");
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake_count("cuFuncSetAttribute"), sets);
  df_rt_executable_destroy(e2);
  df_rt_plan_destroy(c);
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

static void staging_copy_back(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = fx_seed_plan(f.rt);
  df_rt_executable_options o;
  memset(&o, 0, sizeof o);
  o.copy_back_staging = true;
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, &o, &e));
  const uint8_t *bytes;
  size_t len;
  fx_ok(df_rt_executable_staging(e, &bytes, &len));
  assert_null(bytes);
  assert_int_equal(len, 0);
  fx_ok(df_rt_executable_launch(e, NULL));
  uint8_t *dev = fake_host(fake.last_ptrs[12]);
  for (int i = 0; i < 336; i++)
    dev[i] = (uint8_t)i;
  fx_ok(df_rt_executable_launch(e, NULL));
  fx_ok(df_rt_executable_staging(e, &bytes, &len));
  assert_int_equal(len, 336);
  assert_memory_equal(bytes, dev, 336);
  assert_int_equal(fake_count("cuMemcpyDtoHAsync"), 2);
  assert_true(fake_count("cuStreamSynchronize") >= 2);
  uint8_t copy[336];
  fx_ok(df_rt_executable_read_staging(e, NULL, copy, sizeof copy));
  assert_memory_equal(copy, dev, 336);
  fx_fails(df_rt_executable_read_staging(e, NULL, copy, 10), DF_EINVAL,
           "staging read of 10 bytes, the plan's staging has 336");
  fake.fail_name = "cuMemcpyDtoHAsync";
  fake.fail_result = CUDA_ERROR_INVALID_VALUE;
  fx_fails(df_rt_executable_launch(e, NULL), DF_EINVAL, "staging copy-back: cuMemcpyDtoHAsync");
  fake.fail_name = NULL;
  df_rt_executable_destroy(e);
  /* Without the option nothing is copied back. */
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  fake_clear_calls();
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake_count("cuMemcpyDtoHAsync"), 0);
  fx_ok(df_rt_executable_staging(e, &bytes, &len));
  assert_int_equal(len, 0);
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(seed_launch_configuration_and_parameters),
      cmocka_unit_test(plan_image_keeps_handler_ids),
      cmocka_unit_test(flags_reset_only_when_needed),
      cmocka_unit_test(flags_alternate_without_reset),
      cmocka_unit_test(launches_on_the_given_stream),
      cmocka_unit_test(non_portable_cluster_above_eight),
      cmocka_unit_test(cluster_one_has_no_attributes),
      cmocka_unit_test(block_dim_and_block_size_options),
      cmocka_unit_test(pre_checks_fail_clearly),
      cmocka_unit_test(workspace_adds_dynamic_shared_memory),
      cmocka_unit_test(launch_errors),
      cmocka_unit_test(staging_copy_back),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
