/* A small C surface over libdfrt for bench/moe/moe_bench.py (ctypes): load
   the fused-MoE kernel and plan once, create one executable per rotation
   set of tensors (device pointers owned by PyTorch, same primary context),
   and time launches with CUDA events on libdfrt's stream. Built on the GPU
   machine by the bench script (gcc, no CUDA toolkit: libdfrt dlopens the
   driver). Every function returns 0 or writes a message to `err`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/cuda_driver.h"
#include "df/program.h"
#include "df/rt_trace.h"
#include "df/runtime.h"

#include "../bench_util.h"

/* The clock spin moe_df_time queues before each timed launch
   (bench_util.h; bench/attention and bench/overhead time the same way). */
static const char spin_ptx[] = BENCH_PTX_HEADER BENCH_SPIN_PTX("moe_spin");

/* The program's tensors (examples/moe/moe_fused_handlers.c): X, Wgu,
   Tasks, Tokens, Output, Sync, Wd, Weights. */
enum { MOE_MAX_SETS = 8, MOE_TENSORS = 8, MOE_OUTPUT = 4 };

typedef struct moe_df {
  df_rt *rt;
  df_rt_device *dev;
  df_rt_stream *stream;
  df_rt_module *mod;
  df_rt_plan *plan;
  df_rt_executable *exe[MOE_MAX_SETS];
  uint64_t out_ptr[MOE_MAX_SETS];
  size_t out_bytes[MOE_MAX_SETS];
  uint32_t sets, block_dim;
  df_rt_event *start, *end;
  CUmodule spin_mod;
  CUfunction spin;
} moe_df;

static int fail(df_status s, char *err, size_t cap) {
  snprintf(err, cap, "%s: %s", df_code_name(s.code), s.message);
  return 1;
}

#define TRY(expr)                                                                                \
  do {                                                                                           \
    df_status s_ = (expr);                                                                       \
    if (s_.code != DF_OK)                                                                        \
      return fail(s_, err, cap);                                                                 \
  } while (0)

void moe_df_close(moe_df *m) {
  if (!m)
    return;
  for (uint32_t i = 0; i < m->sets; i++)
    df_rt_executable_destroy(m->exe[i]);
  df_rt_event_destroy(m->start);
  df_rt_event_destroy(m->end);
  df_rt_plan_destroy(m->plan);
  df_rt_module_unload(m->mod);
  if (m->spin_mod)
    df_rt_driver(m->rt)->cuModuleUnload(m->spin_mod);
  df_rt_stream_destroy(m->stream);
  df_rt_device_close(m->dev);
  df_rt_destroy(m->rt);
  free(m);
}

/* Load the kernel image and the plan blob on device `ordinal`; `driver`
   NULL or "" loads libcuda.so.1 (another path: a fake driver for tests). */
int moe_df_open(const char *driver, const char *kernel, const char *plan, int ordinal,
                uint32_t block_dim, moe_df **out, char *err, size_t cap) {
  moe_df *m = calloc(1, sizeof *m);
  *out = m;
  if (!m) {
    snprintf(err, cap, "out of memory");
    return 1;
  }
  m->block_dim = block_dim;
  df_rt_options ro;
  memset(&ro, 0, sizeof ro);
  ro.library = driver && driver[0] ? driver : NULL; /* NULL: libcuda.so.1 */
  TRY(df_rt_create(&ro, &m->rt));
  TRY(df_rt_plan_from_file(m->rt, plan, &m->plan));
  TRY(df_rt_device_open(m->rt, ordinal, &m->dev));
  TRY(df_rt_stream_create(m->dev, &m->stream));
  static char jit_log[16384];
  df_rt_module_options mo = {NULL, jit_log, sizeof jit_log};
  df_status s = df_rt_module_load_file(m->dev, kernel, &mo, &m->mod);
  if (s.code != DF_OK) {
    snprintf(err, cap, "%s: %s; JIT log: %s", df_code_name(s.code), s.message, jit_log);
    return 1;
  }
  TRY(df_rt_event_create(m->dev, &m->start));
  TRY(df_rt_event_create(m->dev, &m->end));
  const df_cuda_driver *cu = df_rt_driver(m->rt);
  CUresult r = cu->cuModuleLoadDataEx(&m->spin_mod, spin_ptx, 0, NULL, NULL);
  if (r == CUDA_SUCCESS)
    r = cu->cuModuleGetFunction(&m->spin, m->spin_mod, "moe_spin");
  if (r != CUDA_SUCCESS) {
    snprintf(err, cap, "moe_spin: the driver did not load the spin kernel (CUresult %d)", (int)r);
    return 1;
  }
  return 0;
}

static int spin(moe_df *m, uint64_t cycles, char *err, size_t cap) {
  CUlaunchConfig c;
  memset(&c, 0, sizeof c);
  c.gridDimX = c.gridDimY = c.gridDimZ = 1;
  c.blockDimX = c.blockDimY = c.blockDimZ = 1;
  c.hStream = df_rt_stream_handle(m->stream);
  void *p[] = {&cycles};
  CUresult r = df_rt_driver(m->rt)->cuLaunchKernelEx(&c, m->spin, p, NULL);
  if (r != CUDA_SUCCESS) {
    snprintf(err, cap, "moe_spin: launch of %llu cycles failed (CUresult %d)",
             (unsigned long long)cycles, (int)r);
    return 1;
  }
  return 0;
}

/* Kernel and launch facts for the table's header. */
int moe_df_describe(moe_df *m, uint32_t set, char *buf, size_t bufcap, char *err, size_t cap) {
  if (set >= m->sets) {
    snprintf(err, cap, "no rotation set %u", set);
    return 1;
  }
  df_rt_launch_info li;
  TRY(df_rt_executable_launch_info(m->exe[set], &li));
  const df_rt_kernel_info *ki = df_rt_module_kernel_info(m->mod);
  const df_packed *k = df_rt_plan_packed(m->plan);
  snprintf(buf, bufcap,
           "grid %u x block %u, cluster %u, dynamic shared %u B, %d registers, %u instructions, "
           "%u comms",
           li.grid[0], li.block[0], li.cluster_size, li.dynamic_shared_bytes, ki->num_regs,
           k->instr_count, k->comm_count);
  return 0;
}

/* One executable for a set of tensors in the program's order (above).
   dtypes are df dtype names; shapes have ndim[i] entries each, packed in
   `shapes`. */
int moe_df_bind(moe_df *m, uint32_t count, const uint64_t *ptrs, const char *const *dtypes,
                const uint32_t *ndim, const int64_t *shapes, int ordinal, char *err, size_t cap) {
  if (count != MOE_TENSORS) {
    snprintf(err, cap, "%u tensors given, the MoE program takes %d (X, Wgu, Tasks, Tokens, "
             "Output, Sync, Wd, Weights)", count, MOE_TENSORS);
    return 1;
  }
  if (m->sets == MOE_MAX_SETS) {
    snprintf(err, cap, "at most %d rotation sets", MOE_MAX_SETS);
    return 1;
  }
  df_rt_tensor t[MOE_TENSORS];
  const int64_t *shape = shapes;
  size_t out_elems = 1;
  for (uint32_t i = 0; i < MOE_TENSORS; i++) {
    df_dtype dt;
    TRY(df_dtype_parse(dtypes[i], &dt));
    TRY(df_rt_tensor_contiguous(ptrs[i], dt, ndim[i], shape, ordinal, &t[i]));
    if (i == MOE_OUTPUT)
      for (uint32_t d = 0; d < ndim[i]; d++)
        out_elems *= (size_t)shape[d];
    shape += ndim[i];
  }
  df_rt_executable_options eo;
  memset(&eo, 0, sizeof eo);
  eo.block_dim[0] = m->block_dim;
  eo.block_dim[1] = eo.block_dim[2] = 1;
  eo.block_size = df_rt_plan_block_size(m->plan);
  eo.stream = m->stream;
  df_rt_executable *e;
  TRY(df_rt_executable_create(m->mod, m->plan, &eo, &e));
  m->exe[m->sets] = e;
  m->out_ptr[m->sets] = ptrs[MOE_OUTPUT];
  m->out_bytes[m->sets] = out_elems * 4; /* float32 */
  m->sets++;
  TRY(df_rt_executable_bind_tensors(e, m->stream, t, MOE_TENSORS));
  TRY(df_rt_stream_synchronize(m->dev, m->stream));
  return 0;
}

/* With `zero`, zero set `set`'s output (a kernel built with
   -DMOE_ZERO_OUTPUT=0 needs it; the others zero it themselves); launch,
   wait. With timeout_ms > 0 the launch is watched (libdfrt's watchdog): a
   kernel that does not finish in time returns DF_ETIMEOUT naming the
   blocked CTAs, and the CUDA context is then unusable (moe_df_hung). */
int moe_df_run(moe_df *m, uint32_t set, uint32_t timeout_ms, int zero, char *err, size_t cap) {
  if (set >= m->sets) {
    snprintf(err, cap, "no rotation set %u", set);
    return 1;
  }
  if (zero)
    TRY(df_rt_memset_d8(m->dev, m->stream, m->out_ptr[set], 0, m->out_bytes[set]));
  TRY(df_rt_executable_set_timeout(m->exe[set], timeout_ms));
  df_status s = df_rt_executable_launch(m->exe[set], m->stream);
  if (s.code != DF_OK)
    return fail(s, err, cap);
  TRY(df_rt_executable_set_timeout(m->exe[set], 0));
  TRY(df_rt_stream_synchronize(m->dev, m->stream));
  return 0;
}

/* One launch of set `set` (as moe_df_run, unwatched) with the device
   runtime's trace (df/rt_trace.h; a kernel linked with the traced runtime,
   bench/moe/make_moe_trace_carry.sh): zero df_rt_trace_buf, launch, wait,
   copy its `bytes` bytes to `host`. */
int moe_df_trace(moe_df *m, uint32_t set, void *host, size_t bytes, char *err, size_t cap) {
  CUdeviceptr buf;
  size_t size;
  df_status s = df_rt_module_global(m->mod, DF_RT_TRACE_SYMBOL, &buf, &size);
  if (s.code != DF_OK) {
    snprintf(err, cap, "%s: %s (kernel not linked with the traced runtime?): %s",
             DF_RT_TRACE_SYMBOL, df_code_name(s.code), s.message);
    return 1;
  }
  if (size != bytes) {
    snprintf(err, cap, "%s is %zu bytes, the caller expects %zu (df/rt_trace.h out of step?)",
             DF_RT_TRACE_SYMBOL, size, bytes);
    return 1;
  }
  /* ordered before the launch on the same stream */
  TRY(df_rt_memset_d8(m->dev, m->stream, buf, 0, size));
  if (moe_df_run(m, set, 0, 1, err, cap))
    return 1;
  TRY(df_rt_memcpy_dtoh(m->dev, m->stream, host, buf, bytes));
  return 0;
}

/* Whether a watched launch timed out (the context is then unusable). */
int moe_df_hung(const moe_df *m) { return m->dev && df_rt_device_hung(m->dev); }

/* `warmup` + `iters` launches rotating over the sets; ms[i] = CUDA-event
   time of timed launch i. With `zero` the timed region also zeroes the
   set's output first (a kernel built with -DMOE_ZERO_OUTPUT=0 adds into
   it, so its correct result needs that); without, such a kernel's output
   accumulates (timing only). */
int moe_df_time(moe_df *m, uint32_t warmup, uint32_t iters, int zero, uint64_t spin_cycles,
                float *ms, char *err, size_t cap) {
  for (uint32_t i = 0; i < warmup + iters; i++) {
    uint32_t set = i % m->sets;
    if (spin_cycles && spin(m, spin_cycles, err, cap))
      return 1;
    TRY(df_rt_event_record(m->start, m->stream));
    if (zero)
      TRY(df_rt_memset_d8(m->dev, m->stream, m->out_ptr[set], 0, m->out_bytes[set]));
    TRY(df_rt_executable_launch(m->exe[set], m->stream));
    TRY(df_rt_event_record(m->end, m->stream));
    TRY(df_rt_event_synchronize(m->end));
    if (i >= warmup)
      TRY(df_rt_event_elapsed_ms(m->start, m->end, &ms[i - warmup]));
  }
  return 0;
}
