/* The per-SM read-rate probe (bench/smrate/README.md): streams K/V-shaped
   tensors (537 MB, sm_rate_stats.h) from every SM with several load
   loops, and the real GQA partial, and reports how the SMs share the
   DRAM bandwidth. The driver comes from libcuda.so.1 (or $SM_RATE_LIBCUDA)
   through dlopen, so the probe builds without the CUDA toolkit.

   usage: bench_smrate DIR [WEIGHTS_IN|-] [WEIGHTS_OUT]
   DIR holds make_carry.sh's sm_rate.ptx and sm_rate_gqa.ptx (and
   sm_rate_gqa_b.ptx / _c.ptx, other builds of the partial, if made).
   For each configuration (CONFIGS below) it
     1. times REPS launches of the configuration's work table, indexed by
        block index: the span (first CTA start to last CTA end), the
        spread of the CTAs' times, and whether an SM's time repeats
        across launches (Pearson by %smid and by block index; the
        hardware maps blocks to SMs anew each launch), plus the real
        partial's phases when built with -DGQA_PROBE_TIMES;
     2. for the even layout, alternates launches of it with tables
        indexed by %smid: even, with counts proportional to this
        process's per-SM rates, and to WEIGHTS_IN's (another process's);
        a plan that could pick its queue by SM would gain that much.
   The first configuration's per-SM rates go to WEIGHTS_OUT. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/cuda_driver.h"
#include "sm_rate_stats.h"

#define MAX_SM 512u /* %smid values below this */
#define TABLE_LEN (2u * MAX_SM)
#define REPS 10
#define WARM 3
#define ROUNDS 8
#define MODULES 4 /* sm_rate.ptx, sm_rate_gqa.ptx, _gqa_b, _gqa_c */

/* The driver entry points the probe calls. */
typedef struct smr_driver {
  CUresult (*cuInit)(unsigned int);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuModuleLoadDataEx)(CUmodule *, const void *, unsigned int, CUjit_option *,
                                 void **);
  CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
  CUresult (*cuModuleGetGlobal)(CUdeviceptr *, size_t *, CUmodule, const char *);
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
  CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*cuStreamCreate)(CUstream *, unsigned int);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
} smr_driver;

static void fail(const char *fmt, ...) {
  fflush(stdout); /* the report so far first */
  va_list ap;
  va_start(ap, fmt);
  fputs("sm_rate: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

static const smr_driver *drv;

static void check(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS)
    return;
  const char *s = "unknown error";
  if (drv->cuGetErrorString)
    drv->cuGetErrorString(r, &s);
  fail("%s: CUDA error %d (%s)", what, (int)r, s);
}

static void load_driver(smr_driver *d) {
  const char *lib = getenv("SM_RATE_LIBCUDA");
  lib = lib && *lib ? lib : "libcuda.so.1";
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h)
    fail("cannot load the CUDA driver %s: %s", lib, dlerror());
  /* the _v2 names where the driver has them */
  static const struct {
    const char *name;
    size_t offset;
    int optional;
  } syms[] = {
#define SYM(field, name, opt) {name, offsetof(smr_driver, field), opt}
      SYM(cuInit, "cuInit", 0),
      SYM(cuGetErrorString, "cuGetErrorString", 1),
      SYM(cuDeviceGet, "cuDeviceGet", 0),
      SYM(cuDeviceGetAttribute, "cuDeviceGetAttribute", 0),
      SYM(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 0),
      SYM(cuCtxSetCurrent, "cuCtxSetCurrent", 0),
      SYM(cuModuleLoadDataEx, "cuModuleLoadDataEx", 0),
      SYM(cuModuleGetFunction, "cuModuleGetFunction", 0),
      SYM(cuModuleGetGlobal, "cuModuleGetGlobal_v2", 1),
      SYM(cuFuncSetAttribute, "cuFuncSetAttribute", 0),
      SYM(cuMemAlloc, "cuMemAlloc_v2", 0),
      SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", 0),
      SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", 0),
      SYM(cuMemsetD8Async, "cuMemsetD8Async", 0),
      SYM(cuStreamCreate, "cuStreamCreate", 0),
      SYM(cuStreamSynchronize, "cuStreamSynchronize", 0),
      SYM(cuLaunchKernelEx, "cuLaunchKernelEx", 0),
#undef SYM
  };
  memset(d, 0, sizeof *d);
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    void *f = dlsym(h, syms[i].name);
    if (!f && !syms[i].optional)
      fail("the CUDA driver %s has no %s", lib, syms[i].name);
    memcpy((char *)d + syms[i].offset, &f, sizeof f);
  }
}

/* A PTX file as a NUL-terminated string, or NULL when it does not exist
   and MAY_MISS. */
static char *read_ptx(const char *dir, const char *name, int may_miss) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) {
    if (may_miss)
      return NULL;
    fail("cannot open %s (make it with bench/smrate/make_carry.sh)", path);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  if (!s || n < 0 || fread(s, 1, (size_t)n, f) != (size_t)n)
    fail("cannot read %s", path);
  s[n] = 0;
  fclose(f);
  return s;
}

typedef struct probe {
  CUstream stream;
  CUdeviceptr K, V, table, rec, sink;
  CUfunction fn;
  uint32_t ctas, threads, dyn, spin, cluster;
  uint64_t rec_host[4 * MAX_SM]; /* per CTA: smid, start, end, bytes */
} probe;

/* One launch of TABLE in MODE (0 by block index, 1 by %smid); the span
   in us. */
static double launch(probe *p, const uint32_t *table, uint32_t mode, const char *what) {
  check(drv->cuMemcpyHtoDAsync(p->table, table, TABLE_LEN * sizeof *table, p->stream),
        "table upload");
  void *args[] = {&p->K, &p->V, &p->table, &mode, &p->rec, &p->sink, &p->spin};
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = p->ctas;
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = p->threads;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = p->dyn;
  cfg.hStream = p->stream;
  CUlaunchAttribute attr;
  if (p->cluster > 1) { /* as libdfrt launches a clustered plan */
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = p->cluster;
    attr.value.clusterDim.y = attr.value.clusterDim.z = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  char where[160];
  snprintf(where, sizeof where, "launch of %s", what);
  check(drv->cuMemsetD8Async(p->rec, 0, 4 * sizeof(uint64_t) * p->ctas, p->stream), "records");
  check(drv->cuLaunchKernelEx(&cfg, p->fn, args, NULL), where);
  check(drv->cuMemcpyDtoHAsync(p->rec_host, p->rec, 4 * sizeof(uint64_t) * p->ctas, p->stream),
        "records");
  check(drv->cuStreamSynchronize(p->stream), where);
  uint64_t lo = UINT64_MAX, hi = 0;
  for (uint32_t b = 0; b < p->ctas; b++) {
    if (!p->rec_host[4 * b + 2]) /* every CTA stamps its end */
      fail("%s: CTA %u left no record: the kernel did not run", what, b);
    lo = p->rec_host[4 * b + 1] < lo ? p->rec_host[4 * b + 1] : lo;
    hi = p->rec_host[4 * b + 2] > hi ? p->rec_host[4 * b + 2] : hi;
  }
  return hi > lo ? (double)(hi - lo) / 1000.0 : 0.0;
}

/* kernel, module, threads, spin cycles per step, dynamic shared KB,
   shared memory carve-out preference (% of the unified L1 and shared
   array; -1 the driver's choice), layout (smr_layout, or S >= 2), unit
   order (0 head-major: a head's rows 2 KB apart; 1 memory order, the
   probe loops only), cluster size (0 or 1: none), what. */
typedef struct config {
  const char *fn;
  int module, threads, spin, dyn_kb, carveout, layout, order, cluster;
  const char *what;
} config;

static const config CONFIGS[] = {
    {"sm_rate_d8", 0, 512, 0, 160, -1, SMR_EVEN, 0, 0, "8 chunk pairs per thread in flight"},
    {"sm_rate_df", 0, 256, 0, 200, -1, SMR_EVEN, 0, 0, "gqa_partial's loop and lanes, no math"},
    {"sm_rate_df", 0, 256, 0, 0, -1, SMR_EVEN, 0, 0, "gqa_partial's loop and lanes, no math"},
    {"sm_rate_df", 0, 256, 400, 0, -1, SMR_EVEN, 0, 0, "the same, 400 clocks per step"},
    {"sm_rate_rows", 0, 256, 0, 200, -1, SMR_EVEN, 0, 0, "gqa_partial's loop, whole rows per load"},
    {"sm_rate_rows", 0, 256, 0, 0, -1, SMR_EVEN, 0, 0, "gqa_partial's loop, whole rows per load"},
    {"sm_rate_df", 0, 256, 0, 0, -1, SMR_EVEN, 1, 0, "gqa_partial's loop and lanes, no math"},
    {"sm_rate_rows", 0, 256, 0, 0, -1, SMR_EVEN, 1, 0, "gqa_partial's loop, whole rows per load"},
    {"sm_rate_gqa", 1, 256, 0, 0, -1, SMR_EVEN, 0, 0, "the real gqa_partial"},
    {"sm_rate_gqa", 1, 256, 0, 0, 100, SMR_EVEN, 0, 0, "the real gqa_partial"},
    {"sm_rate_gqa", 2, 256, 0, 0, -1, SMR_EVEN, 0, 0, "the real gqa_partial, build b"},
    {"sm_rate_gqa", 3, 256, 0, 0, -1, SMR_EVEN, 0, 0, "the real gqa_partial, build c"},
    {"sm_rate_df", 0, 256, 0, 0, -1, SMR_HEADS16, 0, 0, "gqa_partial's loop and lanes, no math"},
    {"sm_rate_rows", 0, 256, 0, 0, -1, SMR_HEADS16, 0, 0, "gqa_partial's loop, whole rows per load"},
    {"sm_rate_gqa", 1, 256, 0, 0, -1, SMR_HEADS16, 0, 0, "the real gqa_partial"},
    {"sm_rate_df", 0, 256, 0, 0, -1, SMR_HEADS16, 0, 2, "gqa_partial's loop and lanes, no math"},
    {"sm_rate_gqa", 1, 256, 0, 0, -1, SMR_HEADS16, 0, 2, "the real gqa_partial"},
    {"sm_rate_gqa", 2, 256, 0, 0, -1, SMR_HEADS16, 0, 0, "the real gqa_partial, build b"},
    {"sm_rate_gqa", 3, 256, 0, 0, -1, SMR_HEADS16, 0, 0, "the real gqa_partial, build c"},
    {"sm_rate_rows", 0, 256, 0, 0, -1, 2, 0, 0, "gqa_partial's loop, whole rows per load"},
    {"sm_rate_rows", 0, 256, 0, 0, -1, 4, 0, 0, "gqa_partial's loop, whole rows per load"},
    {"sm_rate_rows", 0, 256, 0, 0, -1, 132, 0, 0, "gqa_partial's loop, whole rows per load"},
};

static const char *layout_name(int layout) {
  static char buf[64];
  if (layout == SMR_EVEN)
    return "even split";
  if (layout == SMR_HEADS16)
    return "16 CTAs x 8192 keys per head";
  snprintf(buf, sizeof buf, "even split, each range read by %d CTAs", layout);
  return buf;
}

/* The last launch's phases of the real partial (-DGQA_PROBE_TIMES): start
   to the Q loads, the loop's issue (warp 0), the barrier after it, the
   drain and merge; medians and maxima over the working CTAs. */
static void report_phases(probe *p, CUmodule m) {
  CUdeviceptr times;
  size_t bytes;
  if (!drv->cuModuleGetGlobal ||
      drv->cuModuleGetGlobal(&times, &bytes, m, "gqa_probe_times") != CUDA_SUCCESS)
    return;
  static uint64_t t4[4 * MAX_SM];
  check(drv->cuMemcpyDtoHAsync(t4, times, 4 * sizeof(uint64_t) * p->ctas, p->stream),
        "probe times");
  check(drv->cuStreamSynchronize(p->stream), "probe times");
  static double ph[4][MAX_SM];
  uint32_t w = 0;
  for (uint32_t b = 0; b < p->ctas; b++) {
    if (!p->rec_host[4 * b + 3])
      continue;
    const uint64_t *t = &t4[4 * b];
    const uint64_t at[5] = {p->rec_host[4 * b + 1], t[0], t[1], t[2], t[3]};
    for (int i = 0; i < 4; i++)
      ph[i][w] = (double)(at[i + 1] - at[i]) / 1000.0;
    w++;
  }
  if (!w)
    return;
  static const char *names[] = {"start", "loop issued (warp 0)", "barrier", "drain + merge"};
  printf("phases of the last launch (median / max over %u CTAs, us):", w);
  for (int i = 0; i < 4; i++) {
    double mx = 0.0;
    for (uint32_t j = 0; j < w; j++)
      mx = ph[i][j] > mx ? ph[i][j] : mx;
    printf(" %s %.2f / %.2f%s", names[i], smr_median(ph[i], w), mx, i < 3 ? ";" : "\n");
  }
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: bench_smrate DIR [WEIGHTS_IN|-] [WEIGHTS_OUT]\n");
    return 2;
  }
  const char *dir = argv[1];
  const char *ptx_names[MODULES] = {"sm_rate.ptx", "sm_rate_gqa.ptx", "sm_rate_gqa_b.ptx",
                                    "sm_rate_gqa_c.ptx"};
  char *ptx[MODULES];
  for (int m = 0; m < MODULES; m++)
    ptx[m] = read_ptx(dir, ptx_names[m], m >= 2);
  static double ext_w[MAX_SM];
  int have_ext = 0;
  if (argc > 2 && strcmp(argv[2], "-") != 0) {
    FILE *f = fopen(argv[2], "r");
    if (!f)
      fail("cannot open the weights %s", argv[2]);
    /* lines "SMID RATE" as WEIGHTS_OUT writes them */
    char line[128];
    for (unsigned n = 1; fgets(line, sizeof line, f); n++) {
      unsigned s;
      double r;
      char extra;
      if (sscanf(line, "%u %lf %c", &s, &r, &extra) != 2 || s >= MAX_SM || !(r > 0.0))
        fail("the weights %s, line %u: not \"SMID RATE\" with SMID below %u and RATE > 0",
             argv[2], n, MAX_SM);
      ext_w[s] = r;
      have_ext = 1;
    }
    fclose(f);
    if (!have_ext)
      fail("the weights %s hold no \"SMID RATE\" line", argv[2]);
  }

  static smr_driver d;
  load_driver(&d);
  drv = &d;
  check(drv->cuInit(0), "cuInit");
  CUdevice dev;
  check(drv->cuDeviceGet(&dev, 0), "device 0");
  CUcontext ctx;
  check(drv->cuDevicePrimaryCtxRetain(&ctx, dev), "context");
  check(drv->cuCtxSetCurrent(ctx), "context");
  int sms = 0;
  check(drv->cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev),
        "SM count");
  if (sms <= 0 || (uint32_t)sms > MAX_SM)
    fail("device 0 reports %d SMs; the probe takes 1 to %u", sms, MAX_SM);
  CUmodule mods[MODULES] = {0};
  for (int m = 0; m < MODULES; m++)
    if (ptx[m]) {
      char what[160];
      snprintf(what, sizeof what, "module %s", ptx_names[m]);
      check(drv->cuModuleLoadDataEx(&mods[m], ptx[m], 0, NULL, NULL), what);
    }

  static probe p;
  p.ctas = (uint32_t)sms;
  const size_t tensor = (size_t)SMR_UNITS * 256u;
  check(drv->cuStreamCreate(&p.stream, 0), "stream");
  check(drv->cuMemAlloc(&p.K, tensor), "K");
  check(drv->cuMemAlloc(&p.V, tensor), "V");
  /* K and V: random f16 in [-1, 1) like the bench's inputs (the default),
     or SM_RATE_FILL=const, every byte 0x3c (the run-Z calls before
     z17): the DRAM's time may depend on the bits it moves. */
  const char *fill = getenv("SM_RATE_FILL");
  const int random_fill = !(fill && strcmp(fill, "const") == 0);
  if (random_fill) {
    uint16_t *h = malloc(tensor);
    if (!h)
      fail("no host memory for the %zu-byte K/V fill", tensor);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (CUdeviceptr t = 0; t < 2; t++) {
      for (size_t i = 0; i < tensor / 2; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
        /* sign, exponent 0..14 (|v| < 1), mantissa: random f16 in (-1, 1) */
        h[i] = (uint16_t)((x >> 48 & 0x8000u) | (uint16_t)((x >> 20) % 15u) << 10 |
                          (x & 0x3ffu));
      }
      check(drv->cuMemcpyHtoDAsync(t ? p.V : p.K, h, tensor, p.stream), "K/V fill");
      check(drv->cuStreamSynchronize(p.stream), "K/V fill");
    }
    free(h);
  } else {
    check(drv->cuMemsetD8Async(p.K, 0x3c, tensor, p.stream), "K fill"); /* finite f16 */
    check(drv->cuMemsetD8Async(p.V, 0x3c, tensor, p.stream), "V fill");
  }
  check(drv->cuMemAlloc(&p.table, TABLE_LEN * sizeof(uint32_t)), "table");
  check(drv->cuMemAlloc(&p.rec, 4 * sizeof(uint64_t) * MAX_SM), "records");
  check(drv->cuMemAlloc(&p.sink, 1u << 20), "sink");
  printf("# sm_rate: %d SMs, %.0f MB per launch (K and V f16[%u][%u][128], a head's rows "
         "2 KB apart; %s values)\n\n",
         sms, 2.0 * (double)tensor / 1e6, SMR_ROWS, SMR_HEADS,
         random_fill ? "random" : "constant");

  for (size_t k = 0; k < sizeof CONFIGS / sizeof CONFIGS[0]; k++) {
    const config *c = &CONFIGS[k];
    if (!mods[c->module])
      continue;
    check(drv->cuModuleGetFunction(&p.fn, mods[c->module], c->fn), c->fn);
    p.threads = (uint32_t)c->threads;
    p.spin = (uint32_t)c->spin;
    p.dyn = (uint32_t)c->dyn_kb * 1024u;
    p.cluster = c->cluster > 1 ? (uint32_t)c->cluster : 1u;
    check(drv->cuFuncSetAttribute(p.fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  (int)p.dyn),
          "dynamic shared size");
    check(drv->cuFuncSetAttribute(p.fn, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                                  c->carveout),
          "carve-out");
    printf("## %s %s (%s; %d threads, %d KB dynamic shared, carve-out %d; %s%s%s)\n\n", c->fn,
           ptx_names[c->module], c->what, c->threads, c->dyn_kb, c->carveout,
           layout_name(c->layout), c->order ? ", units in memory order" : "",
           p.cluster > 1 ? ", clusters of 2" : "");
    const uint32_t order = (uint32_t)c->order << 1; /* the kernels' mode bit 1 */
    static uint32_t table[TABLE_LEN];
    if (smr_layout_table(table, TABLE_LEN, p.ctas, c->layout))
      fail("layout %d of %u CTAs", c->layout, p.ctas);

    /* 1. the layout by block index */
    static double dur_sm[REPS][MAX_SM], dur_cta[REPS][MAX_SM], rate[3][MAX_SM];
    static int seen[MAX_SM];
    double span[REPS], lo_r[REPS], hi_r[REPS];
    memset(rate, 0, sizeof rate);
    memset(seen, 0, sizeof seen);
    for (int r = -WARM; r < REPS; r++) {
      const double s = launch(&p, table, order, c->fn);
      if (r < 0)
        continue;
      span[r] = s;
      lo_r[r] = 1e30;
      hi_r[r] = 0.0;
      for (uint32_t b = 0; b < p.ctas; b++) {
        const uint64_t *e = &p.rec_host[4 * b];
        if (e[0] >= MAX_SM)
          fail("%s: CTA %u ran on SM %llu, past %u", c->fn, b, (unsigned long long)e[0], MAX_SM);
        const double us = e[2] > e[1] ? (double)(e[2] - e[1]) / 1000.0 : 0.0;
        dur_sm[r][e[0]] = us;
        dur_cta[r][b] = us;
        seen[e[0]] = 1;
        if (!e[3] || us <= 0.0)
          continue;
        const double gbs = (double)e[3] / (us * 1000.0);
        rate[r < REPS / 2][e[0]] += gbs / (REPS / 2); /* [1]: launches 0..4 */
        rate[2][e[0]] += gbs / REPS;
        lo_r[r] = us < lo_r[r] ? us : lo_r[r];
        hi_r[r] = us > hi_r[r] ? us : hi_r[r];
      }
    }
    uint32_t smids[MAX_SM], nsm = 0;
    for (uint32_t s = 0; s < MAX_SM; s++)
      if (seen[s])
        smids[nsm++] = s;
    if (nsm != p.ctas) {
      printf("the CTAs ran on %u distinct SMs, not %u (not one per SM): skipped\n\n", nsm,
             p.ctas);
      continue;
    }
    double c_sm = 0.0, c_cta = 0.0;
    int pairs = 0;
    for (int a = 0; a < REPS; a++)
      for (int b = a + 1; b < REPS; b++) {
        double xs[MAX_SM], ys[MAX_SM];
        for (uint32_t i = 0; i < nsm; i++) {
          xs[i] = dur_sm[a][smids[i]];
          ys[i] = dur_sm[b][smids[i]];
        }
        c_sm += smr_pearson(xs, ys, nsm);
        c_cta += smr_pearson(dur_cta[a], dur_cta[b], p.ctas);
        pairs++;
      }
    double ra[MAX_SM], rb[MAX_SM];
    for (uint32_t i = 0; i < nsm; i++) {
      ra[i] = rate[1][smids[i]];
      rb[i] = rate[0][smids[i]];
    }
    const double sp = smr_median(span, REPS), lo = smr_median(lo_r, REPS),
                 hi = smr_median(hi_r, REPS);
    uint64_t read = 0;
    for (uint32_t b = 0; b < p.ctas; b++)
      read += p.rec_host[4 * b + 3];
    printf("%d launches: span median %.1f us (%.2f TB/s read by the SMs); a working CTA's "
           "time median min %.1f, max %.1f us (max/min %.3f)\n",
           REPS, sp, (double)read / (sp * 1e6), lo, hi, hi / lo);
    printf("per-SM times repeat (mean Pearson over launch pairs): by %%smid %.3f, by block "
           "index %.3f; rates of launches 0-4 against 5-9, by %%smid: %.3f\n",
           c_sm / pairs, c_cta / pairs, smr_pearson(ra, rb, nsm));
    if (!c->order && c->layout <= SMR_HEADS16) {
      /* a working CTA's mean time by the head of its first unit */
      double sum[SMR_HEADS] = {0};
      int n[SMR_HEADS] = {0};
      for (int r = 0; r < REPS; r++)
        for (uint32_t b = 0; b < p.ctas; b++)
          if (table[2 * b + 1]) {
            sum[table[2 * b] / SMR_ROWS] += dur_cta[r][b];
            n[table[2 * b] / SMR_ROWS]++;
          }
      printf("a CTA's mean time by its head (us):");
      for (uint32_t h = 0; h < SMR_HEADS; h++)
        printf(" %.1f", n[h] ? sum[h] / n[h] : 0.0);
      printf("\n");
    }
    report_phases(&p, mods[c->module]);
    if (k == 0 && argc > 3) {
      FILE *f = fopen(argv[3], "w");
      if (!f)
        fail("cannot write the weights %s", argv[3]);
      for (uint32_t i = 0; i < nsm; i++)
        fprintf(f, "%u %.4f\n", smids[i], rate[2][smids[i]]);
      fclose(f);
    }
    if (c->layout != SMR_EVEN) {
      printf("\n");
      continue;
    }

    /* 2. by %smid: even, and weighted by this process's and WEIGHTS_IN's rates */
    static uint32_t by_sm[3][TABLE_LEN];
    static double ones[MAX_SM];
    for (uint32_t s = 0; s < MAX_SM; s++)
      ones[s] = 1.0;
    const double *w[3] = {ones, rate[2], ext_w};
    int usable[3] = {1, 1, have_ext};
    for (int v = 0; v < 3; v++)
      if (usable[v] && smr_split_weighted(by_sm[v], TABLE_LEN, smids, w[v], nsm))
        usable[v] = 0; /* a weight missing for one of these SMs */
    double t[4][ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
      t[0][r] = launch(&p, table, order, c->fn);
      for (int v = 0; v < 3; v++)
        t[v + 1][r] = usable[v] ? launch(&p, by_sm[v], 1u | order, c->fn) : 0.0;
    }
    static const char *rows[] = {"even, by block index", "even, by %smid",
                                 "by %smid, counts proportional to this process's rates",
                                 "by %smid, counts proportional to WEIGHTS_IN's rates"};
    printf("\n| table (%d launches each, alternating) | span median us | against the first |\n"
           "|---|---|---|\n",
           ROUNDS);
    const double base = smr_median(t[0], ROUNDS);
    for (int v = 0; v < 4; v++)
      if (v == 0 || usable[v - 1]) {
        const double m = smr_median(t[v], ROUNDS);
        printf("| %s | %.1f | %.3f |\n", rows[v], m, m / base);
      }
    printf("\n");
  }
  return 0;
}
