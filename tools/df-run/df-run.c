/* df-run: load a kernel image (PTX/cubin) and a plan blob, bind tensors
   from files or generated inputs, launch N times, check outputs against
   reference files with tolerances, and print timings. Exit status: 0 ok,
   1 a check failed, 2 bad usage or a runtime error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "df/runtime.h"
#include "host_tensor.h"
#include "options.h"

typedef struct run {
  run_options o;
  df_rt *rt;
  df_rt_device *dev;
  df_rt_stream *stream;
  df_rt_module *mod;
  df_rt_plan *plan, *replanned;
  df_rt_executable *exe;
  uint32_t tensor_count;
  const char *names[RUN_MAX_TENSORS];
  char index_names[RUN_MAX_TENSORS][12];
  host_tensor host[RUN_MAX_TENSORS];
  bool bound[RUN_MAX_TENSORS];
  CUdeviceptr dptr[RUN_MAX_TENSORS];
  double *times_us;
} run;

static int fail(df_status s) {
  fprintf(stderr, "df-run: %s: %s\n", df_code_name(s.code), s.message);
  return 2;
}

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Index of a tensor argument named by program name or decimal index. */
static df_status find_tensor(run *r, const char *opt, const char *name, uint32_t *out) {
  for (uint32_t i = 0; i < r->tensor_count; i++)
    if (strcmp(r->names[i], name) == 0) {
      *out = i;
      return df_status_ok();
    }
  char *end;
  errno = 0;
  unsigned long v = strtoul(name, &end, 10);
  if (end != name && !*end && !errno && v < r->tensor_count) {
    *out = (uint32_t)v;
    return df_status_ok();
  }
  char list[512] = "";
  size_t used = 0;
  for (uint32_t i = 0; i < r->tensor_count && used < sizeof list; i++)
    used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                             r->names[i]);
  return df_status_errorf(DF_EINVAL, "%s: no tensor argument '%s' (the plan's tensors: %s)", opt,
                          name, r->tensor_count ? list : "none");
}

/* Tensor argument names: the program's, else indices up to the highest
   index bound. */
static df_status tensor_names(run *r) {
  const df_program *prog = df_rt_plan_program(r->plan);
  if (prog) {
    uint32_t n = df_program_tensor_args(prog, r->names, RUN_MAX_TENSORS);
    if (n > RUN_MAX_TENSORS)
      return df_status_errorf(DF_EUNSUPPORTED, "the program has %u tensor arguments, df-run "
                                               "binds at most %d",
                              n, RUN_MAX_TENSORS);
    r->tensor_count = n;
    return df_status_ok();
  }
  uint32_t n = 0;
  for (uint32_t i = 0; i < r->o.tensor_count; i++) {
    char *end;
    unsigned long v = strtoul(r->o.tensors[i].name, &end, 10);
    if (end == r->o.tensors[i].name || *end || v >= RUN_MAX_TENSORS)
      return df_status_errorf(DF_EINVAL,
                              "--tensor %s: the plan has no program, name tensors by index "
                              "(0..%d)",
                              r->o.tensors[i].name, RUN_MAX_TENSORS - 1);
    if (v + 1 > n)
      n = (uint32_t)v + 1;
  }
  r->tensor_count = n;
  for (uint32_t i = 0; i < n; i++) {
    snprintf(r->index_names[i], sizeof r->index_names[i], "%u", i);
    r->names[i] = r->index_names[i];
  }
  return df_status_ok();
}

static df_status load_plan(run *r) {
  DF_TRY(df_rt_plan_from_file(r->rt, r->o.plan, &r->plan));
  if (!r->o.replan_axis)
    return df_status_ok();
  df_schedule_options so = df_schedule_options_default();
  so.block_size = r->o.block_size;
  so.range_count = 1;
  so.ranges[0].axis = r->o.replan_axis;
  so.ranges[0].count = r->o.replan_count;
  so.ranges[0].lengths = r->o.replan_lengths;
  so.extent_count = r->o.extent_count;
  memcpy(so.extents, r->o.extents, sizeof so.extents);
  so.policy = r->o.policy;
  so.strategy = r->o.strategy;
  DF_TRY(df_rt_plan_replan(r->plan, &so, NULL, &r->replanned));
  return df_status_ok();
}

static df_status bind_tensors(run *r) {
  df_rt_tensor tensors[RUN_MAX_TENSORS];
  for (uint32_t i = 0; i < r->tensor_count; i++)
    tensors[i] = df_rt_tensor_missing();
  for (uint32_t b = 0; b < r->o.tensor_count; b++) {
    uint32_t i;
    DF_TRY(find_tensor(r, "--tensor", r->o.tensors[b].name, &i));
    if (r->bound[i])
      return df_status_errorf(DF_EINVAL, "--tensor: tensor '%s' is bound twice", r->names[i]);
    host_tensor *h = &r->host[i];
    DF_TRY(host_tensor_parse(r->names[i], r->o.tensors[b].spec, r->o.seed, h));
    r->bound[i] = true;
    DF_TRY(host_tensor_fill(h));
    DF_TRY(df_rt_mem_alloc(r->dev, h->bytes, &r->dptr[i]));
    DF_TRY(df_rt_memcpy_htod(r->dev, r->stream, r->dptr[i], h->data, h->bytes));
    DF_TRY(df_rt_tensor_contiguous(r->dptr[i], h->dtype, h->ndim, h->shape, r->o.device,
                                   &tensors[i]));
    char what[1200];
    host_tensor_describe(h, what, sizeof what);
    printf("df-run: tensor %s: %s\n", r->names[i], what);
  }
  /* With a program every argument is required; by index, gaps are
     missing (all-zero) records. */
  for (uint32_t i = 0; i < r->tensor_count && df_rt_plan_program(r->plan); i++)
    if (!r->bound[i])
      return df_status_errorf(DF_EINVAL, "tensor '%s' is not bound (use --tensor %s=SPEC)",
                              r->names[i], r->names[i]);
  return df_rt_executable_bind_tensors(r->exe, r->stream, tensors, r->tensor_count);
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
  DF_TRY(tensor_names(r));
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

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
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
    double t0 = now_us();
    DF_TRY(df_rt_executable_launch(r->exe, r->stream));
    DF_TRY(df_rt_stream_synchronize(r->dev, r->stream));
    r->times_us[i] = now_us() - t0;
  }
  double *sorted = malloc(sizeof *sorted * r->o.iters);
  if (!sorted)
    return df_status_errorf(DF_ENOMEM, "out of memory for %u timings", r->o.iters);
  memcpy(sorted, r->times_us, sizeof *sorted * r->o.iters);
  qsort(sorted, r->o.iters, sizeof *sorted, compare_doubles);
  double sum = 0;
  for (uint32_t i = 0; i < r->o.iters; i++)
    sum += sorted[i];
  uint32_t n = r->o.iters;
  double median = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  printf("df-run: %u launch%s (%u warm-up, launch + stream sync, host clock): min %.1f us, "
         "median %.1f us, mean %.1f us, max %.1f us\n",
         n, n == 1 ? "" : "es", r->o.warmup, sorted[0], median, sum / n, sorted[n - 1]);
  free(sorted);
  return df_status_ok();
}

/* Copy tensor i back into its host buffer (once). */
static df_status fetch(run *r, uint32_t i, bool *fetched) {
  if (fetched[i])
    return df_status_ok();
  host_tensor *h = &r->host[i];
  DF_TRY(df_rt_memcpy_dtoh(r->dev, r->stream, h->data, r->dptr[i], h->bytes));
  fetched[i] = true;
  return df_status_ok();
}

static df_status outputs(run *r, int *failed) {
  bool fetched[RUN_MAX_TENSORS] = {false};
  for (uint32_t c = 0; c < r->o.check_count; c++) {
    const run_binding *b = &r->o.checks[c];
    uint32_t i;
    DF_TRY(find_tensor(r, "--check", b->name, &i));
    DF_TRY(fetch(r, i, fetched));
    host_tensor *h = &r->host[i];
    uint8_t *ref;
    size_t len;
    df_status s = read_whole_file(b->spec, &ref, &len);
    if (s.code != DF_OK)
      return df_status_wrap(s, "--check");
    if (len != h->bytes) {
      free(ref);
      return df_status_errorf(DF_EINVAL, "--check %s: reference '%s' has %zu bytes, the tensor "
                                         "%zu",
                              b->name, b->spec, len, h->bytes);
    }
    compare_result cr;
    s = host_tensor_compare(h, h->data, ref, b->rtol, b->atol, &cr);
    free(ref);
    DF_TRY(s);
    if (cr.mismatches) {
      *failed = 1;
      printf("df-run: check %s: FAILED: %zu of %zu elements outside rtol %g atol %g (first at "
             "%zu; max abs err %g, max rel err %g)\n",
             b->name, cr.mismatches, cr.elements, b->rtol, b->atol, cr.first_mismatch,
             cr.max_abs, cr.max_rel);
    } else {
      printf("df-run: check %s: ok (%zu elements, max abs err %g, max rel err %g)\n", b->name,
             cr.elements, cr.max_abs, cr.max_rel);
    }
  }
  for (uint32_t c = 0; c < r->o.save_count; c++) {
    uint32_t i;
    DF_TRY(find_tensor(r, "--save", r->o.saves[c].name, &i));
    DF_TRY(fetch(r, i, fetched));
    DF_TRY(write_whole_file(r->o.saves[c].spec, r->host[i].data, r->host[i].bytes));
    printf("df-run: saved %s to %s\n", r->names[i], r->o.saves[c].spec);
  }
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
  for (uint32_t i = 0; i < RUN_MAX_TENSORS; i++) {
    if (r->dptr[i])
      df_rt_mem_free(r->dev, r->dptr[i]);
    host_tensor_free(&r->host[i]);
  }
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
    return 2;
  }
  if (r.o.help) {
    run_usage(stdout);
    return 0;
  }
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
