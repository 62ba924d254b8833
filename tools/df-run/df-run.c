/* df-run: load a kernel image (PTX/cubin) and a plan blob, bind tensors
   from files or generated inputs, launch N times, check outputs against
   reference files with tolerances, and print timings. --backend=host runs
   the plan on the CPU instead (host_backend_run.c). Exit status: 0 ok,
   1 a check failed, 2 bad usage or a runtime error, 3 the host backend
   diagnosed the plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
} run;

static int fail(df_status s) {
  fprintf(stderr, "df-run: %s: %s\n", df_code_name(s.code), s.message);
  return RUN_EXIT_ERROR;
}

static df_status load_plan(run *r) {
  DF_TRY(df_rt_plan_from_file(r->rt, r->o.plan, &r->plan));
  if (!r->o.replan_axis)
    return df_status_ok();
  df_schedule_options so;
  run_replan_options(&r->o, &so);
  DF_TRY(df_rt_plan_replan(r->plan, &so, NULL, &r->replanned));
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
    printf("df-run: re-planned %s for %u lengths\n", r->o.replan_axis, r->o.replan_count);
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

static df_status launch_all(run *r) {
  for (uint32_t i = 0; i < r->o.warmup; i++) {
    DF_TRY(df_rt_executable_launch(r->exe, r->stream));
    DF_TRY(df_rt_stream_synchronize(r->dev, r->stream));
  }
  r->times_us = calloc(r->o.iters, sizeof *r->times_us);
  if (!r->times_us)
    return df_status_errorf(DF_ENOMEM, "out of memory for %u timings", r->o.iters);
  for (uint32_t i = 0; i < r->o.iters; i++) {
    double t0 = run_now_us();
    DF_TRY(df_rt_executable_launch(r->exe, r->stream));
    DF_TRY(df_rt_stream_synchronize(r->dev, r->stream));
    r->times_us[i] = run_now_us() - t0;
  }
  run_print_timings(r->times_us, r->o.iters, r->o.warmup, "launch", "launches",
                    "launch + stream sync, host clock");
  return df_status_ok();
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

static void teardown(run *r) {
  for (uint32_t i = 0; i < RUN_MAX_TENSORS; i++)
    if (r->dptr[i])
      df_rt_mem_free(r->dev, r->dptr[i]);
  run_tensors_free(&r->t);
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
  fflush(stdout);
  teardown(&r);
  if (s.code != DF_OK)
    return fail(s);
  return failed;
}
