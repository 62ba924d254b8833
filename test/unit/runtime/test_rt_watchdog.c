/* The launch watchdog and timing events on the fake driver: a watched
   launch passes a zeroed progress array in mapped host memory and waits
   for the stream; a fake stream that never completes times out with a
   dump of the blocked CTA and comm read from the progress array the fake
   "kernel" wrote; the abort request, the hung device, and the errors of
   missing entry points, failing kernels and earlier work. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "rt_fixture.h"

/* Where the seed plan's first HBM receive waits: CTA, queue position,
   comm index and epoch (found from the packed plan). */
typedef struct hbm_wait {
  uint32_t cta, pc, comm, epoch, qlen;
} hbm_wait;

static hbm_wait first_hbm_recv(const df_packed *k) {
  for (uint32_t cta = 0; cta < k->topology.sm_count; cta++)
    for (uint32_t pc = 0; pc < k->queue_lengths[cta]; pc++) {
      const df_abi_instr *in = &k->instrs[k->queue_offsets[cta] + pc];
      for (uint32_t c = in->comm_offset; c < in->comm_offset + in->comm_count; c++)
        if (k->comms[c].kind == DF_COMM_HBM_RECV && in->opcode != DF_ABI_OP_EXIT)
          return (hbm_wait){cta, pc, c, k->comms[c].flag_epoch, k->queue_lengths[cta]};
    }
  fail_msg("the seed plan has no HBM receive");
  return (hbm_wait){0, 0, 0, 0, 0};
}

static hbm_wait g_wait;
static uint32_t *g_progress;

/* The fake kernel: every CTA done except the one stuck on the receive. */
static void stuck_kernel(uint32_t *progress, uint32_t ctas) {
  g_progress = progress;
  assert_non_null(progress);
  for (uint32_t w = 0; w < DF_PROGRESS_WORDS(ctas); w++)
    assert_int_equal(progress[w], 0); /* zeroed before the launch */
  for (uint32_t i = 0; i < ctas; i++) {
    uint32_t *c = progress + DF_PROGRESS_HEADER_WORDS + DF_PROGRESS_CTA_WORDS * i;
    c[DF_PROGRESS_W_PC] = DF_PROGRESS_PC_NONE;
    c[DF_PROGRESS_W_PHASE] = DF_PHASE_DONE;
    c[DF_PROGRESS_W_COMM] = DF_PROGRESS_NONE;
  }
  uint32_t *c = progress + DF_PROGRESS_HEADER_WORDS + DF_PROGRESS_CTA_WORDS * g_wait.cta;
  c[DF_PROGRESS_W_PC] = g_wait.pc;
  c[DF_PROGRESS_W_PHASE] = DF_PHASE_HBM_RECV;
  c[DF_PROGRESS_W_COMM] = g_wait.comm;
  c[DF_PROGRESS_W_WAIT] = g_wait.epoch;
}

/* The stream is idle until the second launch, which never finishes. */
static void never_done_after_launch(int nth) {
  (void)nth;
  fake.stream_query_result = fake.launch_count >= 2 ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

/* The same, and after the abort request the kernel traps. */
static void trap_on_abort(int nth) {
  never_done_after_launch(nth);
  if (g_progress && g_progress[0])
    fake.stream_query_result = CUDA_ERROR_ILLEGAL_INSTRUCTION;
}

/* Tear down a fixture whose device hung: nothing may reach the driver. */
static void close_hung(rt_fixture *f, df_rt_executable *e, df_rt_plan *p) {
  fake_clear_calls();
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  df_rt_module_unload(f->mod);
  df_rt_device_close(f->dev);
  df_rt_destroy(f->rt);
  assert_int_equal(fake_count("cuMemFree"), 0);
  assert_int_equal(fake_count("cuMemFreeHost"), 0);
  assert_int_equal(fake_count("cuModuleUnload"), 0);
  assert_int_equal(fake_count("cuDevicePrimaryCtxRelease"), 0);
  fake_reset(); /* frees the fake's memory */
  g_progress = NULL;
}

/* The function handle of the nth cuLaunchKernelEx (fake_driver.c). */
static uint64_t launched_function(int nth) {
  const fake_call *c = fake_nth("cuLaunchKernelEx", nth);
  CUfunction fn;
  memcpy(&fn, c->data, sizeof fn);
  return (uint64_t)(uintptr_t)fn;
}

static void watched_launch_finishes(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = fx_seed_plan(f.rt);
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  /* No watchdog: NULL progress, no stream polling, the plain entry. */
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.last_progress_param, 0);
  assert_int_equal(fake_count("cuStreamQuery"), 0);
  assert_int_equal(launched_function(0), FAKE_FUNCTION);
  fx_ok(df_rt_executable_set_timeout(e, 1000));
  g_wait = (hbm_wait){0, 0, 0, 0, 0};
  fake.launch_hook = stuck_kernel; /* writes progress; the stream still completes */
  fx_ok(df_rt_executable_launch(e, NULL));
  /* Watched: the entry with the progress marks. */
  assert_int_equal(launched_function(1), FAKE_WATCHED_FUNCTION);
  assert_int_equal(fake_count("cuMemHostAlloc"), 1);
  const fake_call *alloc = fake_nth("cuMemHostAlloc", 0);
  assert_int_equal(alloc->a[0], 4 * DF_PROGRESS_WORDS(4));
  assert_true(alloc->a[1] & CU_MEMHOSTALLOC_DEVICEMAP);
  assert_int_equal(fake.last_progress_param, (uint64_t)(uintptr_t)g_progress);
  assert_true(fake_count("cuStreamQuery") >= 2); /* before and after the launch */
  /* The array is reused and zeroed again (stuck_kernel checks). */
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake_count("cuMemHostAlloc"), 1);
  const df_rt_cta_progress *pr;
  uint32_t n;
  fx_ok(df_rt_executable_progress(e, &pr, &n));
  assert_int_equal(n, 0); /* no timeout, no snapshot */
  assert_false(df_rt_device_hung(f.dev));
  /* Switching off: NULL again. */
  fake.launch_hook = NULL;
  fx_ok(df_rt_executable_set_timeout(e, 0));
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.last_progress_param, 0);
  assert_int_equal(launched_function(fake_count("cuLaunchKernelEx") - 1), FAKE_FUNCTION);
  df_rt_executable_destroy(e);
  assert_int_equal(fake_live_host(), 0);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

/* A module without the watched entry (a kernel not built by df, say):
   watched launches run its one entry, still with the progress array. */
static void watched_launch_without_the_watched_entry(void **state) {
  (void)state;
  fake_reset();
  fake.no_watched_entry = true;
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = fx_seed_plan(f.rt);
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  fx_ok(df_rt_executable_set_timeout(e, 1000));
  g_wait = (hbm_wait){0, 0, 0, 0, 0};
  fake.launch_hook = stuck_kernel;
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.last_progress_param, (uint64_t)(uintptr_t)g_progress);
  assert_int_equal(launched_function(0), FAKE_FUNCTION);
  fake.launch_hook = NULL;
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

static void timeout_names_the_blocked_cta_and_comm(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = fx_seed_plan(f.rt);
  g_wait = first_hbm_recv(df_rt_plan_packed(p));
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  fx_ok(df_rt_executable_set_timeout(e, 30));
  fake.launch_hook = stuck_kernel;
  fake.query_hook = never_done_after_launch;
  fx_ok(df_rt_executable_launch(e, NULL));
  df_status s = df_rt_executable_launch(e, NULL);
  char want[160];
  snprintf(want, sizeof want, "CTA %u: pc %u of %u", g_wait.cta, g_wait.pc, g_wait.qlen);
  fx_fails(s, DF_ETIMEOUT, want);
  snprintf(want, sizeof want, "hbm_recv: waits on comm %u (hbm_recv slot", g_wait.comm);
  fx_fails(s, DF_ETIMEOUT, want);
  snprintf(want, sizeof want, ">= epoch %u)", g_wait.epoch);
  fx_fails(s, DF_ETIMEOUT, want);
  fx_fails(s, DF_ETIMEOUT, "did not finish within 30 ms (watchdog): 1 of 4 CTAs not done");
  fx_fails(s, DF_ETIMEOUT, "abort requested: the kernel is still running");
  fx_fails(s, DF_ETIMEOUT, "the CUDA context is unusable");
  assert_int_equal(g_progress[0], 1); /* the abort word */
  /* Every CTA in the snapshot, described on demand. */
  const df_rt_cta_progress *pr;
  uint32_t n;
  fx_ok(df_rt_executable_progress(e, &pr, &n));
  assert_int_equal(n, 4);
  assert_int_equal(pr[g_wait.cta].phase, DF_PHASE_HBM_RECV);
  assert_int_equal(pr[g_wait.cta].comm, g_wait.comm);
  char line[256];
  df_rt_executable_describe_progress(e, &pr[(g_wait.cta + 1) % 4], line, sizeof line);
  assert_non_null(strstr(line, ": outside the loop: done"));
  assert_string_equal(df_rt_phase_name(DF_PHASE_CLUSTER_RECV), "cluster_recv");
  assert_string_equal(df_rt_phase_name(99), "unknown");
  /* The device is hung: every later call fails, nothing reaches the driver. */
  assert_true(df_rt_device_hung(f.dev));
  fake_clear_calls();
  fx_fails(df_rt_executable_launch(e, NULL), DF_ETIMEOUT, "unusable after a kernel that did "
                                                          "not finish");
  CUdeviceptr d;
  fx_fails(df_rt_mem_alloc(f.dev, 16, &d), DF_ETIMEOUT, "device 0: unusable");
  assert_int_equal(fake.call_count, 0);
  close_hung(&f, e, p);
}

/* A pool instruction's pc word (DF_PROGRESS_PC_POOL | its packed index)
   is described as that instruction, not as a queue position. */
static void pool_instructions_are_named(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = fx_pool_plan(f.rt);
  const df_packed *k = df_rt_plan_packed(p);
  assert_true(df_packed_has_pool(k));
  uint32_t first = k->instrs[k->queue_offsets[0]].comm_offset; /* the pool's first */
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  df_rt_cta_progress pr = {2, DF_PROGRESS_PC_POOL | first, DF_PHASE_HANDLER, 0, 1};
  char line[256], want[96];
  df_rt_executable_describe_progress(e, &pr, line, sizeof line);
  snprintf(want, sizeof want, "CTA 2: pool instruction %u (iter, task %u): handler", first,
           k->instrs[first].task_id);
  if (!strstr(line, want))
    fprintf(stderr, "line: %s\n", line);
  assert_non_null(strstr(line, want));
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

static void abort_request_traps_the_kernel(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = fx_seed_plan(f.rt);
  g_wait = first_hbm_recv(df_rt_plan_packed(p));
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  fx_ok(df_rt_executable_set_timeout(e, 20));
  fake.launch_hook = stuck_kernel;
  fake.query_hook = trap_on_abort;
  fx_ok(df_rt_executable_launch(e, NULL));
  df_status s = df_rt_executable_launch(e, NULL);
  fx_fails(s, DF_ETIMEOUT, "abort requested: the kernel aborted");
  fx_fails(s, DF_ETIMEOUT, "CUDA_ERROR_ILLEGAL_INSTRUCTION");
  assert_true(df_rt_device_hung(f.dev)); /* a trapped context is unusable too */
  close_hung(&f, e, p);
}

static void earlier_work_and_failures(void **state) {
  (void)state;
  /* Earlier work that never finishes: nothing is launched. */
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = fx_seed_plan(f.rt);
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  fx_ok(df_rt_executable_set_timeout(e, 10));
  fake.stream_query_result = CUDA_ERROR_NOT_READY;
  fx_fails(df_rt_executable_launch(e, NULL), DF_ETIMEOUT,
           "launch: earlier work on the stream did not finish within 10 ms (watchdog); "
           "nothing was launched");
  assert_int_equal(fake.launch_count, 0);
  close_hung(&f, e, p);

  /* A kernel that fails while watched: the driver's error, not a timeout. */
  fake_reset();
  fx_open(&f);
  p = fx_seed_plan(f.rt);
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  fx_ok(df_rt_executable_set_timeout(e, 1000));
  fake.fail_name = "cuStreamQuery";
  fake.fail_result = CUDA_ERROR_LAUNCH_FAILED;
  fake.fail_nth = 2; /* the query after the launch */
  fx_fails(df_rt_executable_launch(e, NULL), DF_EIO,
           "launch: kernel: cuStreamQuery failed: CUDA_ERROR_LAUNCH_FAILED");
  assert_false(df_rt_device_hung(f.dev));
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

static void missing_entry_points(void **state) {
  (void)state;
  fake_reset();
  df_cuda_driver d = fake_driver();
  d.cuStreamQuery = NULL;
  d.cuEventElapsedTime = NULL;
  df_rt_options ro;
  memset(&ro, 0, sizeof ro);
  ro.driver = &d;
  rt_fixture f;
  memset(&f, 0, sizeof f);
  fx_ok(df_rt_create(&ro, &f.rt));
  fx_ok(df_rt_device_open(f.rt, 0, &f.dev));
  fx_ok(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &f.mod));
  df_rt_plan *p = fx_seed_plan(f.rt);
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  fx_fails(df_rt_executable_set_timeout(e, 100), DF_EUNSUPPORTED,
           "watchdog: the CUDA driver table lacks cuStreamQuery");
  fx_ok(df_rt_executable_set_timeout(e, 0));
  df_rt_event *a, *b;
  fx_ok(df_rt_event_create(f.dev, &a));
  fx_ok(df_rt_event_create(f.dev, &b));
  fx_ok(df_rt_event_record(a, NULL));
  fx_ok(df_rt_event_record(b, NULL));
  float ms;
  fx_fails(df_rt_event_elapsed_ms(a, b, &ms), DF_EUNSUPPORTED,
           "event: the CUDA driver table lacks cuEventElapsedTime");
  df_rt_event_destroy(a);
  df_rt_event_destroy(b);
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

static void events_time_launches(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = fx_seed_plan(f.rt);
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  df_rt_stream *s;
  fx_ok(df_rt_stream_create(f.dev, &s));
  df_rt_event *a, *b;
  fx_ok(df_rt_event_create(f.dev, &a));
  fx_ok(df_rt_event_create(f.dev, &b));
  float ms = -1;
  fx_fails(df_rt_event_elapsed_ms(a, b, &ms), DF_EINVAL, "cuEventElapsedTime failed");
  fake.launch_ms = 0.25;
  fx_ok(df_rt_event_record(a, s));
  fx_ok(df_rt_executable_launch(e, s));
  fx_ok(df_rt_executable_launch(e, s));
  fx_ok(df_rt_event_record(b, s));
  fx_ok(df_rt_event_synchronize(b));
  fx_ok(df_rt_event_elapsed_ms(a, b, &ms));
  assert_float_equal(ms, 0.5, 1e-6);
  /* Recorded on the given stream. */
  assert_int_equal(fake_nth("cuEventRecord", 1)->a[1], (uint64_t)(uintptr_t)df_rt_stream_handle(s));
  fx_fails(df_rt_event_record(NULL, s), DF_EINVAL, "NULL event");
  df_rt_event_destroy(a);
  df_rt_event_destroy(b);
  assert_int_equal(fake_live_events(), 0);
  df_rt_stream_destroy(s);
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(watched_launch_finishes),
      cmocka_unit_test(watched_launch_without_the_watched_entry),
      cmocka_unit_test(timeout_names_the_blocked_cta_and_comm),
      cmocka_unit_test(pool_instructions_are_named),
      cmocka_unit_test(abort_request_traps_the_kernel),
      cmocka_unit_test(earlier_work_and_failures),
      cmocka_unit_test(missing_entry_points),
      cmocka_unit_test(events_time_launches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
