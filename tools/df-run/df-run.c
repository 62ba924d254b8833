/* df-run: load a kernel image (PTX/cubin) and a plan blob, bind tensors
   from files or generated inputs, launch N times, check outputs against
   reference files with tolerances, and print timings. --backend=host runs
   the plan on the CPU instead (host_backend_run.c). Exit status: 0 ok,
   1 a check failed, 2 bad usage or a runtime error, 3 the host backend
   diagnosed the plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "df/runtime.h"
#include "host_backend_run.h"
#include "run_common.h"

typedef struct run {
  run_options o;
  df_rt *rt;
  df_rt_device *dev;
  df_rt_stream *stream;
  df_rt_module *mod;
  df_rt_plan *plan, *replanned;
  df_rt_executable *exe;
  run_tensors t;
  CUdeviceptr dptr[RUN_MAX_TENSORS];
  double *times_us;
  df_rt_event *ev_start, *ev_end;
} run;

static int fail(df_status s) {
  fprintf(stderr, "df-run: %s: %s\n", df_code_name(s.code), s.message);
  return RUN_EXIT_ERROR;
}

static df_status load_plan(run *r) {
  DF_TRY(df_rt_plan_from_file(r->rt, r->o.plan, &r->plan));
  if (!r->o.replan_axis)
    return df_status_ok();
  DF_TRY(run_replan_choices(&r->o, df_rt_plan_program(r->plan)));
  df_schedule_options so;
  run_replan_options(&r->o, &so);
  df_pack_options po;
  run_replan_pack_options(&r->o, &po);
  DF_TRY(df_rt_plan_replan(r->plan, &so, &po, &r->replanned));
  run_replan_block(&r->o, df_rt_plan_block_size(r->replanned));
  return df_status_ok();
}

static df_status bind_tensors(run *r) {
  const df_program *prog = df_rt_plan_program(r->plan);
  DF_TRY(run_tensors_load(&r->t, &r->o, prog != NULL));
  df_rt_tensor tensors[RUN_MAX_TENSORS];
  for (uint32_t i = 0; i < r->t.count; i++) {
    tensors[i] = df_rt_tensor_missing();
    if (!r->t.bound[i])
      continue; /* by index: gaps are missing (all-zero) records */
    host_tensor *h = &r->t.host[i];
    DF_TRY(df_rt_mem_alloc(r->dev, h->bytes, &r->dptr[i]));
    DF_TRY(df_rt_memcpy_htod(r->dev, r->stream, r->dptr[i], h->data, h->bytes));
    DF_TRY(df_rt_tensor_contiguous(r->dptr[i], h->dtype, h->ndim, h->shape, r->o.device,
                                   &tensors[i]));
  }
  return df_rt_executable_bind_tensors(r->exe, r->stream, tensors, r->t.count);
}

static df_status setup(run *r) {
  df_rt_options ro;
  memset(&ro, 0, sizeof ro);
  ro.library = r->o.driver;
  DF_TRY(df_rt_create(&ro, &r->rt));
  DF_TRY(load_plan(r));
  DF_TRY(df_rt_device_open(r->rt, r->o.device, &r->dev));
  const df_rt_device_info *di = df_rt_device_get_info(r->dev);
  printf("df-run: device %d: %s (sm_%d%d, %d SMs)\n", di->ordinal, di->name, di->cc_major,
         di->cc_minor, di->sm_count);
  DF_TRY(df_rt_stream_create(r->dev, &r->stream));
  static char jit_log[16384];
  df_rt_module_options mo = {r->o.kernel_name, jit_log, sizeof jit_log};
  df_status s = df_rt_module_load_file(r->dev, r->o.kernel, &mo, &r->mod);
  if (s.code != DF_OK) {
    if (jit_log[0])
      fprintf(stderr, "df-run: JIT log:\n%s\n", jit_log);
    return s;
  }
  const df_rt_kernel_info *ki = df_rt_module_kernel_info(r->mod);
  printf("df-run: kernel: %s, %d registers, %d static shared bytes, max %d threads\n",
         r->o.kernel, ki->num_regs, ki->static_shared_bytes, ki->max_threads_per_block);
  if (ki->workspace_bytes) /* docs/workspace.md */
    printf("df-run: handler workspace: %u B per CTA (added to the dynamic shared memory)\n",
           ki->workspace_bytes);
  DF_TRY(run_tensors_name(&r->t, df_rt_plan_program(r->plan), &r->o));
  df_rt_executable_options eo;
  memset(&eo, 0, sizeof eo);
  memcpy(eo.block_dim, r->o.block_dim, sizeof eo.block_dim);
  eo.block_size = r->o.block_size;
  eo.copy_back_staging = r->o.staging_out != NULL;
  eo.stream = r->stream;
  DF_TRY(df_rt_executable_create(r->mod, r->plan, &eo, &r->exe));
  if (r->replanned) {
    DF_TRY(df_rt_executable_set_plan(r->exe, r->replanned, r->stream));
    printf("df-run: re-planned %s for %u lengths (same module, plan switched in place)\n",
           r->o.replan_axis, r->o.replan_count);
  }
  if (r->o.timeout_ms) {
    DF_TRY(df_rt_executable_set_timeout(r->exe, r->o.timeout_ms));
    printf("df-run: watchdog: %u ms per launch (progress array on; launches wait)\n",
           r->o.timeout_ms);
  }
  const df_packed *k = df_rt_plan_packed(r->replanned ? r->replanned : r->plan);
  df_rt_launch_info li;
  DF_TRY(df_rt_executable_launch_info(r->exe, &li));
  printf("df-run: plan: %u SMs, cluster %u, %u instructions, %u slots, %u comms; staging %zu B, "
         "flags %zu B%s\n",
         k->topology.sm_count, k->topology.cluster_size, k->instr_count, k->slot_count,
         k->comm_count, li.staging_bytes, li.flags_bytes,
         li.needs_flag_reset ? " (reset before each launch)" : "");
  printf("df-run: launch: grid %u, block %ux%ux%u, cluster %u, dynamic shared %u B, block_size "
         "%u\n",
         li.grid[0], li.block[0], li.block[1], li.block[2], li.cluster_size,
         li.dynamic_shared_bytes, li.block_size);
  return bind_tensors(r);
}

/* One launch, timed with events (and the host clock) when asked. */
static df_status launch_once(run *r, df_rt_event *start, df_rt_event *end, double *event_us,
                             double *host_us) {
  double t0 = run_now_us();
  if (start)
    DF_TRY(df_rt_event_record(start, r->stream));
  DF_TRY(df_rt_executable_launch(r->exe, r->stream));
  if (end)
    DF_TRY(df_rt_event_record(end, r->stream));
  DF_TRY(df_rt_stream_synchronize(r->dev, r->stream));
  if (host_us)
    *host_us = run_now_us() - t0;
  if (start && end && event_us) {
    float ms = 0;
    DF_TRY(df_rt_event_synchronize(end));
    DF_TRY(df_rt_event_elapsed_ms(start, end, &ms));
    *event_us = 1e3 * ms;
  }
  return df_status_ok();
}

static df_status launch_all(run *r) {
  for (uint32_t i = 0; i < r->o.warmup; i++)
    DF_TRY(launch_once(r, NULL, NULL, NULL, NULL));
  r->times_us = calloc(2 * (size_t)r->o.iters, sizeof *r->times_us);
  if (!r->times_us)
    return df_status_errorf(DF_ENOMEM, "out of memory for %u timings", r->o.iters);
  double *events = r->times_us + r->o.iters;
  df_status s = df_rt_event_create(r->dev, &r->ev_start);
  if (s.code == DF_OK)
    s = df_rt_event_create(r->dev, &r->ev_end);
  if (s.code == DF_EUNSUPPORTED) { /* a driver table without events */
    printf("df-run: no CUDA event timing: %s\n", s.message);
    df_rt_event_destroy(r->ev_start);
    r->ev_start = NULL;
  } else {
    DF_TRY(s);
  }
  for (uint32_t i = 0; i < r->o.iters; i++)
    DF_TRY(launch_once(r, r->ev_start, r->ev_end, &events[i], &r->times_us[i]));
  if (r->ev_start)
    run_print_timings(events, r->o.iters, r->o.warmup, "launch", "launches",
                      "CUDA events around each launch");
  run_print_timings(r->times_us, r->o.iters, r->o.warmup, "launch", "launches",
                    "launch + stream sync, host clock");
  return df_status_ok();
}

/* After a watchdog timeout: every CTA that is not done, then leave without
   touching the hung context (releasing it would wait for the kernel). */
static void timeout_exit(run *r, df_status s) {
  fprintf(stderr, "df-run: %s: %s\n", df_code_name(s.code), s.message);
  const df_rt_cta_progress *p;
  uint32_t n = 0;
  if (r->exe && df_rt_executable_progress(r->exe, &p, &n).code == DF_OK && n) {
    uint32_t open = 0;
    for (uint32_t i = 0; i < n; i++)
      open += p[i].phase != DF_PHASE_DONE;
    fprintf(stderr, "df-run: watchdog dump: %u of %u CTAs not done:\n", open, n);
    for (uint32_t i = 0; i < n; i++) {
      if (p[i].phase == DF_PHASE_DONE)
        continue;
      char line[320];
      df_rt_executable_describe_progress(r->exe, &p[i], line, sizeof line);
      fprintf(stderr, "df-run:   %s\n", line);
    }
  }
  fflush(stdout);
  fflush(stderr);
  _exit(RUN_EXIT_TIMEOUT);
}

/* Copy tensor i back into its host buffer. */
static df_status fetch(void *user, uint32_t i) {
  run *r = user;
  host_tensor *h = &r->t.host[i];
  return df_rt_memcpy_dtoh(r->dev, r->stream, h->data, r->dptr[i], h->bytes);
}

static df_status outputs(run *r, int *failed) {
  DF_TRY(run_tensors_outputs(&r->t, &r->o, fetch, r, failed));
  if (r->o.staging_out) {
    const uint8_t *bytes;
    size_t len;
    DF_TRY(df_rt_executable_staging(r->exe, &bytes, &len));
    DF_TRY(write_whole_file(r->o.staging_out, bytes, len));
    printf("df-run: saved %zu staging bytes to %s\n", len, r->o.staging_out);
  }
  return df_status_ok();
}

/* --repeat-check: the checked and saved tensors hold the runs' results;
   poison them on the device (0xFF bytes, NaN for floats), launch once more
   and require the same bytes. */
static df_status repeat_check(run *r, int *failed) {
  bool pick[RUN_MAX_TENSORS] = {false};
  uint32_t count = 0;
  for (int list = 0; list < 2; list++) {
    uint32_t n = list ? r->o.save_count : r->o.check_count;
    for (uint32_t c = 0; c < n; c++) {
      uint32_t i;
      const run_binding *b = list ? &r->o.saves[c] : &r->o.checks[c];
      DF_TRY(run_tensors_find(&r->t, "--repeat-check", b->name, &i));
      count += !pick[i];
      pick[i] = true;
    }
  }
  if (!count)
    return df_status_errorf(DF_EINVAL, "--repeat-check compares the --check and --save tensors; "
                                       "none is given");
  for (uint32_t i = 0; i < r->t.count; i++)
    if (pick[i])
      DF_TRY(df_rt_memset_d8(r->dev, r->stream, r->dptr[i], 0xFF, r->t.host[i].bytes));
  DF_TRY(launch_once(r, NULL, NULL, NULL, NULL));
  for (uint32_t i = 0; i < r->t.count; i++) {
    if (!pick[i])
      continue;
    host_tensor *h = &r->t.host[i];
    uint8_t *again = malloc(h->bytes ? h->bytes : 1);
    if (!again)
      return df_status_errorf(DF_ENOMEM, "--repeat-check: out of memory");
    df_status s = df_rt_memcpy_dtoh(r->dev, r->stream, again, r->dptr[i], h->bytes);
    size_t diff = 0, first = 0;
    for (size_t b = 0; s.code == DF_OK && b < h->bytes; b++)
      if (again[b] != h->data[b] && diff++ == 0)
        first = b;
    free(again);
    DF_TRY(s);
    if (diff) {
      *failed = 1;
      printf("df-run: repeat %s: FAILED: %zu of %zu bytes differ after a relaunch into poisoned "
             "outputs (first at byte %zu)\n",
             r->t.names[i], diff, h->bytes, first);
    } else {
      printf("df-run: repeat %s: bitwise identical after a relaunch into poisoned outputs (%zu "
             "bytes)\n",
             r->t.names[i], h->bytes);
    }
  }
  return df_status_ok();
}

static void teardown(run *r) {
  for (uint32_t i = 0; i < RUN_MAX_TENSORS; i++)
    if (r->dptr[i])
      df_rt_mem_free(r->dev, r->dptr[i]);
  run_tensors_free(&r->t);
  df_rt_event_destroy(r->ev_start);
  df_rt_event_destroy(r->ev_end);
  df_rt_executable_destroy(r->exe);
  df_rt_plan_destroy(r->replanned);
  df_rt_plan_destroy(r->plan);
  df_rt_module_unload(r->mod);
  df_rt_stream_destroy(r->stream);
  df_rt_device_close(r->dev);
  df_rt_destroy(r->rt);
  free(r->times_us);
}

int main(int argc, char **argv) {
  static run r;
  df_status s = run_options_parse(argc, argv, &r.o);
  if (s.code != DF_OK) {
    fprintf(stderr, "df-run: %s\n", s.message);
    run_usage(stderr);
    return RUN_EXIT_ERROR;
  }
  if (r.o.help) {
    run_usage(stdout);
    return RUN_EXIT_OK;
  }
  if (r.o.backend == RUN_BACKEND_HOST)
    return host_backend_run(&r.o);
  int failed = 0;
  s = setup(&r);
  if (s.code == DF_OK)
    s = launch_all(&r);
  if (s.code == DF_OK)
    s = outputs(&r, &failed);
  if (s.code == DF_OK && r.o.repeat_check)
    s = repeat_check(&r, &failed);
  if (s.code == DF_ETIMEOUT)
    timeout_exit(&r, s);
  fflush(stdout);
  teardown(&r);
  if (s.code != DF_OK)
    return fail(s);
  return failed;
}
