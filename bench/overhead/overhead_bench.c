/* Runtime-overhead microbenchmarks of libdfrt on one GPU (issue 10):
   dispatch cost per instruction, cluster and HBM edge latency, launch
   overhead against an empty kernel, and re-plan + upload of a decode-step
   plan. Reads the carry folder of bench/overhead/make_carry.sh (its
   manifest.txt names every case); prints one markdown report.

   usage: overhead_bench CARRY_DIR     (env: OV_ITERS, OV_WARMUP, OV_THREADS,
                                        OV_REPLAN_ITERS)

   Device times: CUDA events around one launch, each launch preceded by a
   ~20 us spin kernel so the events bracket device time only; median of
   OV_ITERS (default 50) after OV_WARMUP (5). Slopes are least-squares fits
   of the medians, so the fixed cost of a launch drops out. Host times:
   CLOCK_MONOTONIC. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../bench_util.h"
#include "df/rt_trace.h"
#include "df/runtime.h"
#include "overhead_manifest.h"
#include "overhead_trace.h"

#define MAX_CASES OV_MAX_CASES
#define SPIN_CYCLES 40000ull /* ~20 us at 1.98 GHz */

/* An empty kernel and a clock spin, compiled by the driver's JIT. */
static const char raw_ptx[] =
    BENCH_PTX_HEADER ".visible .entry ov_empty() { ret; }\n" BENCH_SPIN_PTX("ov_spin");

typedef struct bench {
  df_rt *rt;
  const df_cuda_driver *cu;
  df_rt_device *dev;
  df_rt_stream *stream;
  CUstream hs;
  CUmodule raw;
  CUfunction empty, spin;
  df_rt_event *ev[2];
  const char *dir;
  uint32_t iters, warmup, threads, replan_iters;
  int sm_count;
} bench;

static void die(const char *what, df_status st) {
  fprintf(stderr, "overhead_bench: %s: %s\n", what, st.message);
  exit(1);
}
#define CHECK(what, expr)                                                                          \
  do {                                                                                             \
    df_status st_ = (expr);                                                                        \
    if (st_.code != DF_OK)                                                                         \
      die(what, st_);                                                                              \
  } while (0)

static void cu_check(const char *what, CUresult r) {
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "overhead_bench: %s: CUDA error %d\n", what, (int)r);
    exit(1);
  }
}

static double mean(const double *v, uint32_t n) {
  double s = 0;
  for (uint32_t i = 0; i < n; i++)
    s += v[i];
  return s / n;
}

/* Least-squares y = a + b x. */
static void fit(const double *x, const double *y, uint32_t n, double *a, double *b) {
  double mx = mean(x, n), my = mean(y, n), sxy = 0, sxx = 0;
  for (uint32_t i = 0; i < n; i++) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
  }
  *b = sxx > 0 ? sxy / sxx : 0;
  *a = my - *b * mx;
}

static void launch_raw(bench *b, CUfunction fn, uint32_t grid, uint32_t threads,
                       uint32_t cluster, void **params) {
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = cluster;
  attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
  CUlaunchConfig c = {grid, 1, 1, threads, 1, 1, 0, b->hs, &attr, cluster > 1 ? 1u : 0u};
  cu_check("cuLaunchKernelEx", b->cu->cuLaunchKernelEx(&c, fn, params, NULL));
}

static void spin(bench *b) {
  unsigned long long cycles = SPIN_CYCLES;
  void *p[] = {&cycles};
  launch_raw(b, b->spin, 1, 1, 1, p);
}

/* What one timed call launches. */
typedef struct target {
  df_rt_executable *exe; /* NULL: the empty kernel */
  uint32_t cluster;      /* empty kernel: cluster size (1 = none) */
} target;

static void fire(bench *b, const target *t) {
  if (t->exe)
    CHECK("launch", df_rt_executable_launch(t->exe, b->stream));
  else
    launch_raw(b, b->empty, (uint32_t)b->sm_count, b->threads, t->cluster, NULL);
}

/* Median device time (us) of one launch. */
static double device_us(bench *b, const target *t) {
  for (uint32_t i = 0; i < b->warmup; i++)
    fire(b, t);
  double *v = calloc(b->iters, sizeof *v);
  for (uint32_t i = 0; i < b->iters; i++) {
    spin(b);
    CHECK("event", df_rt_event_record(b->ev[0], b->stream));
    fire(b, t);
    CHECK("event", df_rt_event_record(b->ev[1], b->stream));
    CHECK("event", df_rt_event_synchronize(b->ev[1]));
    float ms = 0;
    CHECK("event", df_rt_event_elapsed_ms(b->ev[0], b->ev[1], &ms));
    v[i] = ms * 1000.0;
  }
  double m = bench_median(v, b->iters);
  free(v);
  return m;
}

/* Host time per launch call (us) over n back-to-back launches, and the
   time until all of them have finished, per launch. */
static void host_us(bench *b, const target *t, uint32_t n, double *enqueue, double *through) {
  CHECK("sync", df_rt_stream_synchronize(b->dev, b->stream));
  double t0 = bench_wall_us();
  for (uint32_t i = 0; i < n; i++)
    fire(b, t);
  double t1 = bench_wall_us();
  CHECK("sync", df_rt_stream_synchronize(b->dev, b->stream));
  double t2 = bench_wall_us();
  *enqueue = (t1 - t0) / n;
  *through = (t2 - t0) / n;
}

typedef struct loaded {
  df_rt_module *mod;
  df_rt_plan *plan;
  df_rt_executable *exe;
  CUdeviceptr out;
} loaded;

/* NAME.ptx with PLAN.dfplan (plan: NULL for NAME's own). */
static void load_case_plan(bench *b, const char *name, const char *plan, uint32_t block_size,
                           loaded *l) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.ptx", b->dir, name);
  static char log[16384];
  df_rt_module_options mo = {NULL, log, sizeof log};
  df_status st = df_rt_module_load_file(b->dev, path, &mo, &l->mod);
  if (st.code != DF_OK) {
    fprintf(stderr, "%s\n", log);
    die(path, st);
  }
  snprintf(path, sizeof path, "%s/%s.dfplan", b->dir, plan ? plan : name);
  CHECK(path, df_rt_plan_from_file(b->rt, path, &l->plan));
  df_rt_executable_options eo;
  memset(&eo, 0, sizeof eo);
  eo.block_dim[0] = b->threads;
  eo.block_dim[1] = eo.block_dim[2] = 1;
  eo.block_size = block_size;
  eo.stream = b->stream;
  CHECK(name, df_rt_executable_create(l->mod, l->plan, &eo, &l->exe));
  l->out = 0;
}

static void load_case(bench *b, const char *name, uint32_t block_size, loaded *l) {
  load_case_plan(b, name, NULL, block_size, l);
}

/* One watched launch first (5 s watchdog, docs/watchdog.md): a plan that
   deadlocks on the device is reported, naming the blocked CTAs, instead of
   hanging the run. Timed launches are unwatched. */
static void first_launch(bench *b, loaded *l, const char *name) {
  CHECK(name, df_rt_executable_set_timeout(l->exe, 5000));
  CHECK(name, df_rt_executable_launch(l->exe, b->stream));
  CHECK(name, df_rt_stream_synchronize(b->dev, b->stream));
  CHECK(name, df_rt_executable_set_timeout(l->exe, 0));
}

static void bind_out(bench *b, loaded *l, uint32_t count) {
  CHECK("alloc", df_rt_mem_alloc(b->dev, 256, &l->out));
  CHECK("memset", df_rt_memset_d8(b->dev, b->stream, l->out, 0, 256));
  df_rt_tensor t[4];
  for (uint32_t i = 0; i < count; i++)
    t[i] = df_rt_tensor_raw(l->out);
  CHECK("bind", df_rt_executable_bind_tensors(l->exe, b->stream, t, count));
  first_launch(b, l, "first launch");
}

static void unload(bench *b, loaded *l) {
  if (l->out)
    df_rt_mem_free(b->dev, l->out);
  df_rt_executable_destroy(l->exe);
  df_rt_plan_destroy(l->plan);
  df_rt_module_unload(l->mod);
}

static uint32_t instr_count(const loaded *l) {
  return df_rt_plan_packed(l->plan)->instr_count;
}

/* ---- (1) dispatch, (3) launch --------------------------------------------------- */

static void run_dispatch(bench *b, const ov_dispatch_case *c, uint32_t n, double *slope_ns) {
  printf("\n### Dispatch: N empty ITERs per SM (partial-only plans, no comms)\n\n"
         "| ITERs per SM | instructions | device us | us per ITER per SM |\n|---|---|---|---|\n");
  double x[MAX_CASES], y[MAX_CASES];
  for (uint32_t i = 0; i < n; i++) {
    loaded l;
    load_case(b, c[i].name, 128, &l);
    bind_out(b, &l, 1);
    target t = {l.exe, 0};
    x[i] = c[i].per_sm;
    y[i] = device_us(b, &t);
    printf("| %u | %u | %.2f | %.3f |\n", c[i].per_sm, instr_count(&l), y[i], y[i] / x[i]);
    unload(b, &l);
  }
  double a, s;
  fit(x, y, n, &a, &s);
  *slope_ns = s * 1000.0;
  printf("\nFit: device us = %.2f + %.4f x ITERs-per-SM -> **%.1f ns per dispatched "
         "instruction** (each SM dispatches its queue serially; all %d SMs in parallel)\n",
         a, s, s * 1000.0, b->sm_count);
}

static void run_launch(bench *b, const char *name, double *df_dev, double *raw_dev) {
  loaded l;
  load_case(b, name, 128, &l);
  bind_out(b, &l, 1);
  target df = {l.exe, 0}, e1 = {NULL, 1}, e2 = {NULL, 2};
  printf("\n### Launch overhead (%d CTAs x %u threads)\n\n"
         "| launch | device us (events) | host us per launch call | host us per launch, "
         "200 back-to-back incl. completion |\n|---|---|---|---|\n",
         b->sm_count, b->threads);
  const struct {
    const char *what;
    target *t;
  } rows[] = {{"df persistent kernel, 1 ITER + EXIT per SM", &df},
              {"empty kernel (cuLaunchKernelEx)", &e1},
              {"empty kernel, cluster 2", &e2}};
  for (uint32_t i = 0; i < 3; i++) {
    double d = device_us(b, rows[i].t), enq, thr;
    host_us(b, rows[i].t, 200, &enq, &thr);
    printf("| %s | %.2f | %.2f | %.2f |\n", rows[i].what, d, enq, thr);
    if (i == 0)
      *df_dev = d;
    if (i == 1)
      *raw_dev = d;
  }
  df_rt_launch_info li;
  CHECK("launch info", df_rt_executable_launch_info(l.exe, &li));
  printf("\ndf launch: %u B dynamic shared, %u kernel parameters, plan %zu B on the device, "
         "flag reset %s\n",
         li.dynamic_shared_bytes, li.param_count, li.plan_bytes,
         !li.needs_flag_reset ? "no" : li.flags_alternate ? "by the previous launch" : "memset");
  unload(b, &l);
}

/* ---- (2) chains -------------------------------------------------------------------- */

static void run_chains(bench *b, const ov_chain_case *c, uint32_t n, const char *kind, bool empty,
                       double *slope_us) {
  double x[MAX_CASES], y[MAX_CASES];
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (strcmp(c[i].kind, kind) || empty != (c[i].plan[0] != 0))
      continue;
    loaded l;
    load_case_plan(b, c[i].name, empty ? c[i].plan : NULL, 128, &l);
    bind_out(b, &l, 1);
    target t = {l.exe, 0};
    double us = device_us(b, &t);
    float got = 0;
    CHECK("read Out", df_rt_memcpy_dtoh(b->dev, b->stream, &got, l.out, sizeof got));
    const float want = empty ? 0.0f : (float)(c[i].length + 1);
    if (got != want) {
      fprintf(stderr, "overhead_bench: %s: Out = %g, expected %g (%s)\n", c[i].name,
              (double)got, (double)want, empty ? "empty handlers wrote Out" : "chain broken");
      exit(1);
    }
    printf("| %s | %u | %.2f | %.3f |\n", kind, c[i].length, us, us / c[i].length);
    x[m] = c[i].length;
    y[m++] = us;
    unload(b, &l);
  }
  double a = 0, s = 0;
  if (m >= 2)
    fit(x, y, m, &a, &s);
  *slope_us = m >= 2 ? s : NAN;
  printf("| **%s fit** | | %.2f + %.4f L | **%.3f us per edge** |\n", kind, a, s, s);
}

/* ---- (5) traced cases ------------------------------------------------------------------ */

/* One traced case (a kernel built on df_device_runtime_trace.bc): timed
   like the others (for the tracing's own cost), then df_rt_trace_buf is
   zeroed, one more launch fills it and its stamps are read back and
   reported phase by phase (overhead_trace.c). `untraced` is the matching
   fit of the untraced cases (NAN if not run). */
static void run_trace(bench *b, const ov_trace_case *c, double untraced) {
  loaded l;
  load_case(b, c->name, 128, &l);
  bind_out(b, &l, 1);
  CUdeviceptr buf = 0;
  size_t bytes = 0;
  CHECK(c->name, df_rt_module_global(l.mod, DF_RT_TRACE_SYMBOL, &buf, &bytes));
  if (bytes != DF_RT_TRACE_WORDS * sizeof(uint64_t)) {
    fprintf(stderr, "overhead_bench: %s: %s is %zu bytes, df/rt_trace.h says %llu (kernel built "
                    "from another runtime version?)\n",
            c->name, DF_RT_TRACE_SYMBOL, bytes,
            (unsigned long long)(DF_RT_TRACE_WORDS * sizeof(uint64_t)));
    exit(1);
  }
  target t = {l.exe, 0};
  ov_trace_ref ref = {untraced, device_us(b, &t)};
  CHECK("zero trace", df_rt_memset_d8(b->dev, b->stream, buf, 0, bytes));
  CHECK("zero Out", df_rt_memset_d8(b->dev, b->stream, l.out, 0, 256));
  CHECK(c->name, df_rt_executable_launch(l.exe, b->stream));
  CHECK("sync", df_rt_stream_synchronize(b->dev, b->stream));
  uint64_t *host = malloc(bytes);
  if (!host) {
    fprintf(stderr, "overhead_bench: out of memory (%zu-byte trace)\n", bytes);
    exit(1);
  }
  CHECK("read trace", df_rt_memcpy_dtoh(b->dev, b->stream, host, buf, bytes));
  bool dispatch = !strcmp(c->kind, "dispatch");
  if (!dispatch) {
    float got = 0;
    CHECK("read Out", df_rt_memcpy_dtoh(b->dev, b->stream, &got, l.out, sizeof got));
    if (got != (float)(c->length + 1)) {
      fprintf(stderr, "overhead_bench: %s: Out = %g, expected %u (traced chain broken)\n",
              c->name, (double)got, c->length + 1);
      exit(1);
    }
  }
  printf("\n#### %s (%s)\n", c->name, dispatch ? "dispatch" : c->kind);
  if (dispatch)
    ov_trace_dispatch(stdout, host, (uint32_t)b->sm_count, c->length, &ref);
  else
    ov_trace_chain(stdout, host, (uint32_t)b->sm_count, c->kind, c->length, &ref);
  free(host);
  unload(b, &l);
}

/* ---- (4) re-plan + upload ------------------------------------------------------------ */

static void run_replan(bench *b, const char *name, uint32_t block, uint32_t lmax) {
  loaded l;
  load_case(b, name, block, &l);
  printf("\n### Re-plan + upload of a decode-step plan (GQA attention, 8 KV heads per "
         "sequence, block %u, log-normal lengths around 2K, new lengths every step)\n\n"
         "| sequences | tasks | instructions (mean) | df_rt_plan_replan us (median / mean) | "
         "set_plan + upload us (median / mean) | total us (median) |\n|---|---|---|---|---|---|\n",
         block);
  const uint32_t batches[] = {64, 256};
  for (uint32_t bi = 0; bi < 2; bi++) {
    uint32_t seqs = batches[bi], tasks = seqs * 8;
    uint32_t *lens = calloc(tasks, sizeof *lens);
    uint32_t n = b->replan_iters, warm = 5;
    double *tr = calloc(n, sizeof *tr), *tu = calloc(n, sizeof *tu), *tt = calloc(n, sizeof *tt);
    double instrs = 0;
    bench_rng r = {1000 + seqs};
    for (uint32_t it = 0; it < n + warm; it++) {
      df_schedule_options so = bench_decode_step(&r, seqs, lmax, lens, block);
      so.topology.sm_count = 0; /* the base plan's */
      df_pack_options po;
      memset(&po, 0, sizeof po);
      po.skip_fingerprint = true;
      po.layout.per_cta_shared = true;
      df_rt_plan *p = NULL;
      double t0 = bench_wall_us();
      CHECK("replan", df_rt_plan_replan(l.plan, &so, &po, &p));
      double t1 = bench_wall_us();
      CHECK("set_plan", df_rt_executable_set_plan(l.exe, p, b->stream));
      CHECK("sync", df_rt_stream_synchronize(b->dev, b->stream));
      double t2 = bench_wall_us();
      if (it >= warm) {
        tr[it - warm] = t1 - t0;
        tu[it - warm] = t2 - t1;
        tt[it - warm] = t2 - t0;
        instrs += df_rt_plan_packed(p)->instr_count;
      }
      df_rt_plan_destroy(p);
    }
    double mr = mean(tr, n), mu = mean(tu, n);
    printf("| %u | %u | %.0f | %.1f / %.1f | %.1f / %.1f | %.1f |\n", seqs, tasks, instrs / n,
           bench_median(tr, n), mr, bench_median(tu, n), mu, bench_median(tt, n));
    free(lens);
    free(tr);
    free(tu);
    free(tt);
  }
  /* The decode loop: one draw, then a token more per sequence each step;
     the executable's plan is patched in place and only its args records
     uploaded (df_rt_executable_patch_lengths, last blocks up to the
     block), and re-planned + set only where a sequence crosses a block
     boundary; every step synchronizes. */
  printf("\n### Decode loop: patch + args upload, or re-plan + set_plan (%u steps of one more "
         "token per sequence from one draw)\n\n"
         "| sequences | steps patched | patch + args upload us (median) | step us (median / "
         "mean) | re-plans | re-plan + set_plan us (median) |\n|---|---|---|---|---|---|\n",
         b->replan_iters);
  for (uint32_t bi = 0; bi < 2; bi++) {
    uint32_t seqs = batches[bi], tasks = seqs * 8, n = b->replan_iters;
    uint32_t *lens = calloc(tasks, sizeof *lens);
    double *tp = calloc(n, sizeof *tp), *tr = calloc(n, sizeof *tr), *tt = calloc(n, sizeof *tt);
    bench_rng r = {1000 + seqs};
    df_schedule_options so = bench_decode_step(&r, seqs, lmax - n, lens, block);
    so.topology.sm_count = 0;
    df_pack_options po;
    memset(&po, 0, sizeof po);
    po.skip_fingerprint = true;
    po.layout.per_cta_shared = true;
    df_rt_plan *p = NULL;
    CHECK("replan", df_rt_plan_replan(l.plan, &so, &po, &p));
    CHECK("set_plan", df_rt_executable_set_plan(l.exe, p, b->stream));
    uint32_t np = 0, nr = 0;
    for (uint32_t it = 0; it < n; it++) {
      for (uint32_t t = 0; t < tasks; t++)
        lens[t]++;
      double t0 = bench_wall_us();
      df_patch_result pr;
      CHECK("patch", df_rt_executable_patch_lengths(l.exe, p, lens, tasks, block, b->stream, &pr));
      if (!pr.patched) {
        df_rt_plan_destroy(p);
        p = NULL;
        CHECK("replan", df_rt_plan_replan(l.plan, &so, &po, &p));
        CHECK("set_plan", df_rt_executable_set_plan(l.exe, p, b->stream));
      }
      CHECK("sync", df_rt_stream_synchronize(b->dev, b->stream));
      double t1 = bench_wall_us();
      if (pr.patched)
        tp[np++] = t1 - t0;
      else
        tr[nr++] = t1 - t0;
      tt[it] = t1 - t0;
    }
    df_rt_plan_destroy(p);
    printf("| %u | %u of %u | %.1f | %.1f / %.1f | %u | %.1f |\n", seqs, np, n,
           np ? bench_median(tp, np) : 0.0, bench_median(tt, n), mean(tt, n), nr,
           nr ? bench_median(tr, nr) : 0.0);
    free(lens);
    free(tp);
    free(tr);
    free(tt);
  }
  unload(b, &l);
}

/* ---- main -------------------------------------------------------------------------------- */

/* One row of the target table; a part that was not run shows "-". */
static void target_row(const char *what, double v, const char *unit, double limit,
                       const char *target) {
  if (isnan(v))
    printf("| %s | not measured | %s | - |\n", what, target);
  else if (isnan(limit))
    printf("| %s | %.3f%s | %s | - |\n", what, v, unit, target);
  else
    printf("| %s | %.3f%s | %s | %s |\n", what, v, unit, target, v <= limit ? "yes" : "no");
}

static uint32_t env_u32(const char *name, uint32_t def) {
  const char *v = getenv(name);
  return v && *v ? (uint32_t)strtoul(v, NULL, 10) : def;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: overhead_bench CARRY_DIR\n");
    return 2;
  }
  bench b;
  memset(&b, 0, sizeof b);
  b.dir = argv[1];
  b.iters = env_u32("OV_ITERS", 50);
  b.warmup = env_u32("OV_WARMUP", 5);
  b.threads = env_u32("OV_THREADS", 256);
  b.replan_iters = env_u32("OV_REPLAN_ITERS", 200);
  if (!b.iters || !b.replan_iters) {
    fprintf(stderr, "overhead_bench: OV_ITERS and OV_REPLAN_ITERS must be positive\n");
    return 2;
  }

  char path[4096];
  snprintf(path, sizeof path, "%s/manifest.txt", b.dir);
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "overhead_bench: cannot open %s\n", path);
    return 1;
  }
  ov_manifest *mp = calloc(1, sizeof *mp); /* ~20 KB: not on the stack */
  int bad = !mp || ov_manifest_read(f, path, mp, stderr);
  fclose(f);
  if (bad) {
    free(mp);
    return 1;
  }
  const ov_manifest *man = mp;

  CHECK("runtime", df_rt_create(NULL, &b.rt));
  b.cu = df_rt_driver(b.rt);
  CHECK("device", df_rt_device_open(b.rt, 0, &b.dev));
  const df_rt_device_info *info = df_rt_device_get_info(b.dev);
  b.sm_count = info->sm_count;
  CHECK("stream", df_rt_stream_create(b.dev, &b.stream));
  b.hs = df_rt_stream_handle(b.stream);
  cu_check("raw module", b.cu->cuModuleLoadDataEx(&b.raw, raw_ptx, 0, NULL, NULL));
  cu_check("ov_empty", b.cu->cuModuleGetFunction(&b.empty, b.raw, "ov_empty"));
  cu_check("ov_spin", b.cu->cuModuleGetFunction(&b.spin, b.raw, "ov_spin"));
  CHECK("event", df_rt_event_create(b.dev, &b.ev[0]));
  CHECK("event", df_rt_event_create(b.dev, &b.ev[1]));
  int drv = 0;
  CHECK("driver version", df_rt_driver_version(b.rt, &drv));
  printf("## df runtime overhead — %s, %d SMs, driver CUDA %d.%d, %u threads per CTA, median "
         "of %u launches after %u warm-ups\n",
         info->name, info->sm_count, drv / 1000, drv % 1000 / 10, b.threads, b.iters, b.warmup);

  double ns_instr = NAN, cl_edge = NAN, hbm_edge = NAN, hbmc_edge = NAN, hbmd_edge = NAN,
         df_dev = NAN, raw_dev = NAN;
  /* Edges with empty handlers (issue 10's definition: the runtime's cost
     of an edge) and with counting handlers (+ one input read, an add and
     an output write through the handler ABI). */
  double ecl = NAN, ehbm = NAN, ehbmc = NAN, ehbmd = NAN;
  if (man->nd)
    run_dispatch(&b, man->disp, man->nd, &ns_instr);
  if (man->nc) {
    printf("\n### Edge latency: chains of L dependent one-input REDUCEs bouncing between two "
           "CTAs (Out checked = L + 1)\n\n| edge | L | device us | us per edge (whole run / L) |\n"
           "|---|---|---|---|\n");
    run_chains(&b, man->chains, man->nc, "cluster", false, &cl_edge);
    run_chains(&b, man->chains, man->nc, "hbm", false, &hbm_edge);
    run_chains(&b, man->chains, man->nc, "hbm_in_cluster", false, &hbmc_edge);
    run_chains(&b, man->chains, man->nc, "hbm_direct", false, &hbmd_edge);
    printf("\n### Edge latency, empty handlers: the same plans, handlers that return at once "
           "(the runtime's receive, dispatch and send alone; Out checked = 0)\n\n"
           "| edge | L | device us | us per edge (whole run / L) |\n|---|---|---|---|\n");
    run_chains(&b, man->chains, man->nc, "cluster", true, &ecl);
    run_chains(&b, man->chains, man->nc, "hbm", true, &ehbm);
    run_chains(&b, man->chains, man->nc, "hbm_in_cluster", true, &ehbmc);
    run_chains(&b, man->chains, man->nc, "hbm_direct", true, &ehbmd);
  }
  if (man->launch[0])
    run_launch(&b, man->launch, &df_dev, &raw_dev);
  if (man->replan[0])
    run_replan(&b, man->replan, man->replan_block, man->replan_lmax);
  if (man->nt)
    printf("\n### Per-phase trace (df_device_runtime_trace.bc; one launch each, read from "
           "df_rt_trace_buf; not used for the fits above)\n\nPoints and phases: "
           "docs/device-runtime.md (Trace). Times in ns from %%globaltimer, cycles from "
           "%%clock64; medians over the steady state (first %u and last %u instructions or "
           "edges left out).\n",
           OV_TRACE_SKIP, OV_TRACE_TAIL);
  for (uint32_t i = 0; i < man->nt; i++) {
    const char *k = man->traces[i].kind;
    double ref = !strcmp(k, "dispatch")         ? ns_instr
                 : !strcmp(k, "cluster")        ? cl_edge
                 : !strcmp(k, "hbm")            ? hbm_edge
                 : !strcmp(k, "hbm_in_cluster") ? hbmc_edge
                 : !strcmp(k, "hbm_direct")     ? hbmd_edge
                                                : NAN;
    run_trace(&b, &man->traces[i], ref);
  }

  printf("\n### Against the targets of issue 10\n\n| quantity | measured | target | met |\n"
         "|---|---|---|---|\n");
  target_row("ns per dispatched instruction", ns_instr, "", 100, "<= 100");
  target_row("cluster edge (DSMEM), empty handlers", ecl, " us", 1.0, "<= 1 us");
  target_row("HBM edge (other cluster), empty handlers", ehbm, " us", 2.0, "<= 2 us");
  target_row("HBM edge inside a cluster (force-HBM), empty handlers", ehbmc, " us", 2.0,
             "<= 2 us");
  target_row("HBM edge, direct-global slots, empty handlers", ehbmd, " us", 2.0, "<= 2 us");
  target_row("cluster edge (DSMEM), counting handlers", cl_edge, " us", 1.0, "<= 1 us");
  target_row("HBM edge (other cluster), counting handlers", hbm_edge, " us", 2.0, "<= 2 us");
  target_row("HBM edge inside a cluster (force-HBM), counting handlers", hbmc_edge, " us", 2.0,
             "<= 2 us");
  target_row("HBM edge, direct-global slots (hbm-direct-global=true), counting handlers",
             hbmd_edge, " us", 2.0, "<= 2 us");
  target_row("launch: df near-empty plan - empty kernel (device)", df_dev - raw_dev, " us", NAN,
             "-");

  df_rt_event_destroy(b.ev[0]);
  df_rt_event_destroy(b.ev[1]);
  b.cu->cuModuleUnload(b.raw);
  df_rt_stream_destroy(b.stream);
  df_rt_device_close(b.dev);
  df_rt_destroy(b.rt);
  free(mp);
  return 0;
}
