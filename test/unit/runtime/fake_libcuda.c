/* A fake libcuda.so for df-run's end-to-end test: exports the driver entry
   points libdfrt resolves (the _v2 names where the driver has them) and
   forwards them to the fake driver. The unversioned cuMemAlloc/cuMemFree
   fail, so a run that works proves the loader prefers the _v2 symbols.
   FAKE_CUDA_SM_COUNT, FAKE_CUDA_NO_DEVICE, FAKE_CUDA_JIT_FAIL and
   FAKE_CUDA_LAUNCH_FAIL adjust the fake; FAKE_CUDA_HANG makes every launch a
   kernel that never finishes, with CTA 0 reporting (progress array) that it
   waits at pc 1 on comm 1 for epoch 1 (the seed plan's first HBM receive)
   and the other CTAs done. */
#include <stdlib.h>

#include "df/progress.h"
#include "fake_driver.h"

static df_cuda_driver table;
static int ready;

static void hung_kernel(uint32_t *progress, uint32_t ctas) {
  fake.stream_query_result = CUDA_ERROR_NOT_READY;
  if (!progress)
    return;
  for (uint32_t i = 0; i < ctas; i++) {
    uint32_t *c = progress + DF_PROGRESS_HEADER_WORDS + DF_PROGRESS_CTA_WORDS * i;
    c[DF_PROGRESS_W_PC] = i == 0 ? 1 : DF_PROGRESS_PC_NONE;
    c[DF_PROGRESS_W_PHASE] = i == 0 ? DF_PHASE_HBM_RECV : DF_PHASE_DONE;
    c[DF_PROGRESS_W_COMM] = i == 0 ? 1 : DF_PROGRESS_NONE;
    c[DF_PROGRESS_W_WAIT] = i == 0 ? 1 : 0;
  }
}

static const df_cuda_driver *t(void) {
  if (!ready) {
    fake_reset();
    const char *sm = getenv("FAKE_CUDA_SM_COUNT");
    if (sm)
      fake.sm_count = atoi(sm);
    if (getenv("FAKE_CUDA_NO_DEVICE"))
      fake.device_count = 0;
    if (getenv("FAKE_CUDA_JIT_FAIL")) {
      fake.module_load_result = CUDA_ERROR_INVALID_PTX;
      fake.jit_error_log = "ptxas fatal   : Unresolved extern function 'df_handler_0'";
    }
    if (getenv("FAKE_CUDA_HANG"))
      fake.launch_hook = hung_kernel;
    if (getenv("FAKE_CUDA_LAUNCH_FAIL")) {
      fake.fail_name = "cuLaunchKernelEx";
      fake.fail_result = CUDA_ERROR_LAUNCH_FAILED;
    }
    fake.max_active_blocks = 4;
    table = fake_driver();
    ready = 1;
  }
  return &table;
}

#define EXPORT __attribute__((visibility("default")))

EXPORT CUresult cuInit(unsigned int f) { return t()->cuInit(f); }
EXPORT CUresult cuDriverGetVersion(int *v) { return t()->cuDriverGetVersion(v); }
EXPORT CUresult cuGetErrorName(CUresult e, const char **s) { return t()->cuGetErrorName(e, s); }
EXPORT CUresult cuGetErrorString(CUresult e, const char **s) {
  return t()->cuGetErrorString(e, s);
}
EXPORT CUresult cuDeviceGetCount(int *n) { return t()->cuDeviceGetCount(n); }
EXPORT CUresult cuDeviceGet(CUdevice *d, int o) { return t()->cuDeviceGet(d, o); }
EXPORT CUresult cuDeviceGetName(char *n, int l, CUdevice d) {
  return t()->cuDeviceGetName(n, l, d);
}
EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
  return t()->cuDeviceGetAttribute(v, a, d);
}
EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
  return t()->cuDevicePrimaryCtxRetain(c, d);
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  return t()->cuDevicePrimaryCtxRelease(d);
}
EXPORT CUresult cuCtxSetCurrent(CUcontext c) { return t()->cuCtxSetCurrent(c); }
EXPORT CUresult cuModuleLoadDataEx(CUmodule *m, const void *i, unsigned n, CUjit_option *o,
                                   void **v) {
  return t()->cuModuleLoadDataEx(m, i, n, o, v);
}
EXPORT CUresult cuModuleUnload(CUmodule m) { return t()->cuModuleUnload(m); }
EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *n) {
  return t()->cuModuleGetFunction(f, m, n);
}
EXPORT CUresult cuFuncGetAttribute(int *v, CUfunction_attribute a, CUfunction f) {
  return t()->cuFuncGetAttribute(v, a, f);
}
EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  return t()->cuFuncSetAttribute(f, a, v);
}
EXPORT CUresult cuOccupancyMaxPotentialClusterSize(int *n, CUfunction f,
                                                   const CUlaunchConfig *c) {
  return t()->cuOccupancyMaxPotentialClusterSize(n, f, c);
}
EXPORT CUresult cuOccupancyMaxActiveClusters(int *n, CUfunction f, const CUlaunchConfig *c) {
  return t()->cuOccupancyMaxActiveClusters(n, f, c);
}
EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, CUfunction f, int b,
                                                            size_t s) {
  return t()->cuOccupancyMaxActiveBlocksPerMultiprocessor(n, f, b, s);
}
EXPORT CUresult cuMemAlloc(CUdeviceptr *p, size_t b) {
  (void)p;
  (void)b;
  return CUDA_ERROR_NOT_SUPPORTED; /* the 32-bit-era entry point */
}
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t b) { return t()->cuMemAlloc(p, b); }
EXPORT CUresult cuMemFree(CUdeviceptr p) {
  (void)p;
  return CUDA_ERROR_NOT_SUPPORTED;
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) { return t()->cuMemFree(p); }
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t b, CUstream st) {
  return t()->cuMemcpyHtoDAsync(d, s, b, st);
}
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t b, CUstream st) {
  return t()->cuMemcpyDtoHAsync(d, s, b, st);
}
EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
  return t()->cuMemsetD8Async(d, v, n, s);
}
EXPORT CUresult cuStreamCreate(CUstream *s, unsigned f) { return t()->cuStreamCreate(s, f); }
EXPORT CUresult cuStreamDestroy_v2(CUstream s) { return t()->cuStreamDestroy(s); }
EXPORT CUresult cuStreamSynchronize(CUstream s) { return t()->cuStreamSynchronize(s); }
EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **p, void **e) {
  return t()->cuLaunchKernelEx(c, f, p, e);
}
EXPORT CUresult cuTensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType d, cuuint32_t r,
                                       void *a, const cuuint64_t *g, const cuuint64_t *s,
                                       const cuuint32_t *b, const cuuint32_t *e,
                                       CUtensorMapInterleave i, CUtensorMapSwizzle w,
                                       CUtensorMapL2promotion l, CUtensorMapFloatOOBfill o) {
  return t()->cuTensorMapEncodeTiled(m, d, r, a, g, s, b, e, i, w, l, o);
}
EXPORT CUresult cuStreamQuery(CUstream s) { return t()->cuStreamQuery(s); }
EXPORT CUresult cuMemHostAlloc(void **p, size_t b, unsigned f) {
  return t()->cuMemHostAlloc(p, b, f);
}
EXPORT CUresult cuMemFreeHost(void *p) { return t()->cuMemFreeHost(p); }
EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned f) {
  return t()->cuMemHostGetDevicePointer(d, p, f);
}
EXPORT CUresult cuEventCreate(CUevent *e, unsigned f) { return t()->cuEventCreate(e, f); }
EXPORT CUresult cuEventRecord(CUevent e, CUstream s) { return t()->cuEventRecord(e, s); }
EXPORT CUresult cuEventSynchronize(CUevent e) { return t()->cuEventSynchronize(e); }
EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) {
  return t()->cuEventElapsedTime(ms, a, b);
}
EXPORT CUresult cuEventDestroy_v2(CUevent e) { return t()->cuEventDestroy(e); }
