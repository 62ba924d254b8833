#include "fake_driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fake_state fake;

static void record(const char *name, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3,
                   const void *data, size_t bytes) {
  if (fake.call_count >= FAKE_MAX_CALLS)
    return;
  fake_call *c = &fake.calls[fake.call_count++];
  memset(c, 0, sizeof *c);
  snprintf(c->name, sizeof c->name, "%s", name);
  c->a[0] = a0;
  c->a[1] = a1;
  c->a[2] = a2;
  c->a[3] = a3;
  c->bytes = bytes;
  if (data)
    memcpy(c->data, data, bytes < FAKE_CALL_DATA ? bytes : FAKE_CALL_DATA);
}

/* The injected failure for `name`, CUDA_SUCCESS otherwise. Counts calls. */
static CUresult injected(const char *name) {
  if (!fake.fail_name || strcmp(fake.fail_name, name) != 0)
    return CUDA_SUCCESS;
  int seen = fake_count(name); /* already recorded: this call included */
  if (fake.fail_nth == 0 || seen == fake.fail_nth)
    return fake.fail_result;
  return CUDA_SUCCESS;
}

void fake_reset(void) {
  for (int i = 0; i < fake.block_count; i++)
    free(fake.blocks[i].host);
  for (int i = 0; i < fake.host_count; i++)
    if (fake.host_live[i])
      free(fake.host[i]);
  memset(&fake, 0, sizeof fake);
  fake.device_count = 1;
  fake.sm_count = 132;
  fake.optin_shared = 232448;
  fake.cluster_launch = 1;
  fake.cc_major = 9;
  fake.cc_minor = 0;
  fake.max_threads = 1024;
  fake.func_max_threads = 1024;
  fake.func_static_shared = 0;
  fake.func_regs = 40;
  fake.max_cluster_portable = 8;
  fake.max_cluster_non_portable = 16;
  fake.max_active_clusters = -1;
  fake.max_active_blocks = 1;
  fake.launch_ms = 0.5;
  fake.module_global_bytes = sizeof(uint32_t);
  for (int i = 0; i < 16; i++)
    fake.func_attr[i] = -1;
}

void fake_clear_calls(void) { fake.call_count = 0; }

int fake_count(const char *name) {
  int n = 0;
  for (int i = 0; i < fake.call_count; i++)
    n += strcmp(fake.calls[i].name, name) == 0;
  return n;
}

const fake_call *fake_nth(const char *name, int n) {
  for (int i = 0; i < fake.call_count; i++)
    if (strcmp(fake.calls[i].name, name) == 0 && n-- == 0)
      return &fake.calls[i];
  return NULL;
}

static fake_block *block_of(CUdeviceptr p, size_t bytes) {
  for (int i = 0; i < fake.block_count; i++) {
    fake_block *b = &fake.blocks[i];
    uintptr_t base = (uintptr_t)b->host;
    if (b->live && p >= base && p - base + bytes <= b->size)
      return b;
  }
  return NULL;
}

void *fake_host(CUdeviceptr p) {
  fake_block *b = block_of(p, 0);
  return b ? (void *)(uintptr_t)p : NULL;
}

int fake_block_index(CUdeviceptr p) {
  fake_block *b = block_of(p, 0);
  return b ? (int)(b - fake.blocks) : -1;
}

int fake_live_blocks(void) {
  int n = 0;
  for (int i = 0; i < fake.block_count; i++)
    n += fake.blocks[i].live;
  return n;
}

int fake_live_host(void) {
  int n = 0;
  for (int i = 0; i < fake.host_count; i++)
    n += fake.host_live[i];
  return n;
}

int fake_live_events(void) {
  int n = 0;
  for (int i = 0; i < fake.event_count; i++)
    n += fake.event_live[i];
  return n;
}

/* ---- entry points ------------------------------------------------------------ */

static CUresult f_init(unsigned int flags) {
  record("cuInit", flags, 0, 0, 0, NULL, 0);
  return injected("cuInit");
}

static CUresult f_driver_version(int *v) {
  record("cuDriverGetVersion", 0, 0, 0, 0, NULL, 0);
  *v = 13000;
  return injected("cuDriverGetVersion");
}

static CUresult f_error_name(CUresult e, const char **s) {
  switch ((int)e) {
  case CUDA_ERROR_INVALID_VALUE: *s = "CUDA_ERROR_INVALID_VALUE"; break;
  case CUDA_ERROR_OUT_OF_MEMORY: *s = "CUDA_ERROR_OUT_OF_MEMORY"; break;
  case CUDA_ERROR_INVALID_PTX: *s = "CUDA_ERROR_INVALID_PTX"; break;
  case CUDA_ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
  case CUDA_ERROR_LAUNCH_FAILED: *s = "CUDA_ERROR_LAUNCH_FAILED"; break;
  case CUDA_ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; break;
  case CUDA_ERROR_ILLEGAL_INSTRUCTION: *s = "CUDA_ERROR_ILLEGAL_INSTRUCTION"; break;
  default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

static CUresult f_error_string(CUresult e, const char **s) {
  switch ((int)e) {
  case CUDA_ERROR_INVALID_VALUE: *s = "invalid argument"; break;
  case CUDA_ERROR_OUT_OF_MEMORY: *s = "out of memory"; break;
  case CUDA_ERROR_INVALID_PTX: *s = "a PTX JIT compilation failed"; break;
  case CUDA_ERROR_NOT_FOUND: *s = "named symbol not found"; break;
  case CUDA_ERROR_LAUNCH_FAILED: *s = "unspecified launch failure"; break;
  case CUDA_ERROR_NO_DEVICE: *s = "no CUDA-capable device is detected"; break;
  case CUDA_ERROR_ILLEGAL_INSTRUCTION: *s = "an illegal instruction was encountered"; break;
  default: return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

static CUresult f_device_count(int *n) {
  record("cuDeviceGetCount", 0, 0, 0, 0, NULL, 0);
  *n = fake.device_count;
  return injected("cuDeviceGetCount");
}

static CUresult f_device_get(CUdevice *d, int ordinal) {
  record("cuDeviceGet", (uint64_t)ordinal, 0, 0, 0, NULL, 0);
  *d = ordinal;
  return injected("cuDeviceGet");
}

static CUresult f_device_name(char *name, int len, CUdevice d) {
  record("cuDeviceGetName", (uint64_t)d, 0, 0, 0, NULL, 0);
  snprintf(name, (size_t)len, "Fake H200");
  return injected("cuDeviceGetName");
}

static CUresult f_device_attribute(int *v, CUdevice_attribute a, CUdevice d) {
  record("cuDeviceGetAttribute", (uint64_t)a, (uint64_t)d, 0, 0, NULL, 0);
  switch ((int)a) {
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = fake.sm_count; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = fake.cc_major; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = fake.cc_minor; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = fake.max_threads; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *v = fake.optin_shared; break;
  case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: *v = fake.cluster_launch; break;
  default: return CUDA_ERROR_INVALID_VALUE;
  }
  return injected("cuDeviceGetAttribute");
}

static CUresult f_ctx_retain(CUcontext *c, CUdevice d) {
  record("cuDevicePrimaryCtxRetain", (uint64_t)d, 0, 0, 0, NULL, 0);
  *c = (CUcontext)(uintptr_t)0x1000;
  return injected("cuDevicePrimaryCtxRetain");
}

static CUresult f_ctx_release(CUdevice d) {
  record("cuDevicePrimaryCtxRelease", (uint64_t)d, 0, 0, 0, NULL, 0);
  return injected("cuDevicePrimaryCtxRelease");
}

static CUresult f_ctx_set(CUcontext c) {
  (void)c;
  fake.ctx_set_count++;
  return CUDA_SUCCESS;
}

static void write_log(unsigned n, CUjit_option *opts, void **vals, CUjit_option buf_opt,
                      CUjit_option size_opt, const char *text) {
  char *buf = NULL;
  size_t cap = 0;
  for (unsigned i = 0; i < n; i++) {
    if (opts[i] == buf_opt)
      buf = vals[i];
    if (opts[i] == size_opt)
      cap = (size_t)(uintptr_t)vals[i];
  }
  if (buf && cap && text)
    snprintf(buf, cap, "%s", text);
}

static CUresult f_module_load(CUmodule *m, const void *image, unsigned n, CUjit_option *opts,
                              void **vals) {
  record("cuModuleLoadDataEx", n, 0, 0, 0, image, strlen(image) + 1);
  fake.last_jit_options = n;
  if (fake.module_load_result != CUDA_SUCCESS) {
    write_log(n, opts, vals, CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
              fake.jit_error_log);
    return fake.module_load_result;
  }
  write_log(n, opts, vals, CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            fake.jit_info_log);
  *m = (CUmodule)(uintptr_t)0x2000;
  return CUDA_SUCCESS;
}

/* The image's globals: df_handler_workspace_bytes only, held in the fake
   state (a device pointer f_dtoh reads from). */
static CUresult f_module_global(CUdeviceptr *ptr, size_t *bytes, CUmodule m, const char *name) {
  record("cuModuleGetGlobal", (uint64_t)(uintptr_t)m, 0, 0, 0, name, strlen(name) + 1);
  CUresult r = injected("cuModuleGetGlobal");
  if (r != CUDA_SUCCESS)
    return r;
  if (fake.module_kernel_abi && strcmp(name, "df_rt_kernel_abi") == 0) {
    *ptr = (CUdeviceptr)(uintptr_t)&fake.module_kernel_abi;
    *bytes = fake.module_global_bytes;
    return CUDA_SUCCESS;
  }
  if (!fake.module_has_workspace || strcmp(name, "df_handler_workspace_bytes") != 0)
    return CUDA_ERROR_NOT_FOUND;
  *ptr = (CUdeviceptr)(uintptr_t)&fake.module_workspace;
  *bytes = fake.module_global_bytes;
  return CUDA_SUCCESS;
}

static CUresult f_module_unload(CUmodule m) {
  record("cuModuleUnload", (uint64_t)(uintptr_t)m, 0, 0, 0, NULL, 0);
  return CUDA_SUCCESS;
}

static CUresult f_get_function(CUfunction *f, CUmodule m, const char *name) {
  record("cuModuleGetFunction", (uint64_t)(uintptr_t)m, 0, 0, 0, name, strlen(name) + 1);
  CUresult r = injected("cuModuleGetFunction");
  if (r != CUDA_SUCCESS)
    return r;
  if (fake.get_function_result != CUDA_SUCCESS)
    return fake.get_function_result;
  /* The watched twin (DF_RT_WATCHED_SUFFIX) is a different handle. */
  size_t n = strlen(name);
  bool watched = n >= 8 && strcmp(name + n - 8, "_watched") == 0;
  if (watched && fake.no_watched_entry)
    return CUDA_ERROR_NOT_FOUND;
  bool df = strncmp(name, "df_", 3) == 0;
  *f = (CUfunction)(uintptr_t)(!df ? FAKE_OTHER_FUNCTION
                               : watched ? FAKE_WATCHED_FUNCTION
                                         : FAKE_FUNCTION);
  return CUDA_SUCCESS;
}

static CUresult f_func_get(int *v, CUfunction_attribute a, CUfunction f) {
  (void)f;
  record("cuFuncGetAttribute", (uint64_t)a, 0, 0, 0, NULL, 0);
  switch ((int)a) {
  case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = fake.func_max_threads; break;
  case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: *v = fake.func_static_shared; break;
  case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = fake.func_regs; break;
  case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *v = 0; break;
  default: return CUDA_ERROR_INVALID_VALUE;
  }
  return injected("cuFuncGetAttribute");
}

static CUresult f_func_set(CUfunction f, CUfunction_attribute a, int v) {
  (void)f;
  record("cuFuncSetAttribute", (uint64_t)a, (uint64_t)v, 0, 0, NULL, 0);
  CUresult r = injected("cuFuncSetAttribute");
  if (r == CUDA_SUCCESS && (int)a >= 0 && (int)a < 16)
    fake.func_attr[a] = v;
  return r;
}

static unsigned cluster_of(const CUlaunchConfig *c) {
  for (unsigned i = 0; i < c->numAttrs; i++)
    if (c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
      return c->attrs[i].value.clusterDim.x;
  return 1;
}

static CUresult f_max_cluster(int *n, CUfunction f, const CUlaunchConfig *c) {
  (void)f;
  record("cuOccupancyMaxPotentialClusterSize", c->sharedMemBytes, cluster_of(c), 0, 0, NULL,
         0);
  *n = fake.func_attr[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED] == 1
           ? fake.max_cluster_non_portable
           : fake.max_cluster_portable;
  return injected("cuOccupancyMaxPotentialClusterSize");
}

static CUresult f_active_clusters(int *n, CUfunction f, const CUlaunchConfig *c) {
  (void)f;
  unsigned cs = cluster_of(c);
  record("cuOccupancyMaxActiveClusters", c->sharedMemBytes, cs, 0, 0, NULL, 0);
  *n = fake.max_active_clusters >= 0 ? fake.max_active_clusters : fake.sm_count / (int)cs;
  return injected("cuOccupancyMaxActiveClusters");
}

static CUresult f_active_blocks(int *n, CUfunction f, int threads, size_t shared) {
  (void)f;
  record("cuOccupancyMaxActiveBlocksPerMultiprocessor", (uint64_t)threads, shared, 0, 0, NULL,
         0);
  *n = fake.max_active_blocks;
  return injected("cuOccupancyMaxActiveBlocksPerMultiprocessor");
}

static CUresult f_alloc(CUdeviceptr *p, size_t bytes) {
  record("cuMemAlloc", bytes, (uint64_t)fake.block_count, 0, 0, NULL, bytes);
  CUresult r = injected("cuMemAlloc");
  if (r != CUDA_SUCCESS)
    return r;
  if (fake.block_count >= FAKE_MAX_BLOCKS || bytes == 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  size_t size = (bytes + 255) / 256 * 256;
  void *h = aligned_alloc(256, size);
  if (!h)
    return CUDA_ERROR_OUT_OF_MEMORY;
  memset(h, 0xA5, size); /* "uninitialised" */
  fake.blocks[fake.block_count].host = h;
  fake.blocks[fake.block_count].size = bytes;
  fake.blocks[fake.block_count].live = true;
  fake.block_count++;
  *p = (CUdeviceptr)(uintptr_t)h;
  return CUDA_SUCCESS;
}

static CUresult f_free(CUdeviceptr p) {
  record("cuMemFree", p, (uint64_t)fake_block_index(p), 0, 0, NULL, 0);
  for (int i = 0; i < fake.block_count; i++)
    if (fake.blocks[i].live && (CUdeviceptr)(uintptr_t)fake.blocks[i].host == p) {
      fake.blocks[i].live = false;
      free(fake.blocks[i].host);
      fake.blocks[i].host = NULL;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;
}

static CUresult f_htod(CUdeviceptr dst, const void *src, size_t bytes, CUstream s) {
  record("cuMemcpyHtoDAsync", dst, (uint64_t)fake_block_index(dst), (uint64_t)(uintptr_t)s, 0,
         src, bytes);
  CUresult r = injected("cuMemcpyHtoDAsync");
  if (r != CUDA_SUCCESS)
    return r;
  if (!block_of(dst, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  memcpy((void *)(uintptr_t)dst, src, bytes);
  return CUDA_SUCCESS;
}

static CUresult f_dtoh(void *dst, CUdeviceptr src, size_t bytes, CUstream s) {
  record("cuMemcpyDtoHAsync", src, (uint64_t)fake_block_index(src), (uint64_t)(uintptr_t)s, 0,
         NULL, bytes);
  CUresult r = injected("cuMemcpyDtoHAsync");
  if (r != CUDA_SUCCESS)
    return r;
  bool global = (src == (CUdeviceptr)(uintptr_t)&fake.module_workspace ||
                 src == (CUdeviceptr)(uintptr_t)&fake.module_kernel_abi) &&
                bytes <= sizeof(uint32_t);
  if (!global && !block_of(src, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  memcpy(dst, (const void *)(uintptr_t)src, bytes);
  return CUDA_SUCCESS;
}

static CUresult f_memset(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  record("cuMemsetD8Async", dst, v, (uint64_t)(uintptr_t)s, (uint64_t)fake_block_index(dst),
         NULL, n);
  CUresult r = injected("cuMemsetD8Async");
  if (r != CUDA_SUCCESS)
    return r;
  if (!block_of(dst, n))
    return CUDA_ERROR_INVALID_VALUE;
  memset((void *)(uintptr_t)dst, v, n);
  return CUDA_SUCCESS;
}

static CUresult f_stream_create(CUstream *s, unsigned flags) {
  record("cuStreamCreate", flags, 0, 0, 0, NULL, 0);
  static const uintptr_t base = 0x5000;
  *s = (CUstream)(base + (uintptr_t)fake_count("cuStreamCreate"));
  return injected("cuStreamCreate");
}

static CUresult f_stream_destroy(CUstream s) {
  record("cuStreamDestroy", (uint64_t)(uintptr_t)s, 0, 0, 0, NULL, 0);
  return CUDA_SUCCESS;
}

static CUresult f_stream_sync(CUstream s) {
  record("cuStreamSynchronize", (uint64_t)(uintptr_t)s, 0, 0, 0, NULL, 0);
  return injected("cuStreamSynchronize");
}

static CUresult f_launch(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
  /* data: the launched function's handle */
  record("cuLaunchKernelEx", c->gridDimX, c->blockDimX, c->sharedMemBytes,
         (uint64_t)(uintptr_t)c->hStream, &f, sizeof f);
  CUresult r = injected("cuLaunchKernelEx");
  if (r != CUDA_SUCCESS)
    return r;
  if (extra || c->numAttrs > 4)
    return CUDA_ERROR_INVALID_VALUE;
  /* As the driver: more than 48 KiB of dynamic shared memory needs the
     function's maximum raised first; clusters above 8 need the opt-in. */
  if (c->sharedMemBytes > 48 * 1024 &&
      (int)c->sharedMemBytes > fake.func_attr[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES])
    return CUDA_ERROR_INVALID_VALUE;
  if (cluster_of(c) > 8 && fake.func_attr[CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED] != 1)
    return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  if ((uintptr_t)f == FAKE_OTHER_FUNCTION)
    return CUDA_SUCCESS; /* not df's kernel: its parameters are not df's */
  fake.launch_count++;
  fake.last_cfg = *c;
  memset(fake.last_attrs, 0, sizeof fake.last_attrs);
  for (unsigned i = 0; i < c->numAttrs; i++)
    fake.last_attrs[i] = c->attrs[i];
  fake.last_cfg.attrs = fake.last_attrs;
  for (int i = 0; i < 14; i++)
    memcpy(&fake.last_ptrs[i], params[i], sizeof(CUdeviceptr));
  for (int i = 0; i < 6; i++)
    memcpy(&fake.last_u32[i], params[14 + i], sizeof(uint32_t));
  memcpy(&fake.last_progress_param, params[20], sizeof(CUdeviceptr));
  /* As the real kernels: ABI 2 declares parameters 21-22 and then the
     tensor maps, ABI 1 its maps right after the progress array. */
  const int maps_at = fake.module_kernel_abi >= 2 ? 23 : 21;
  fake.last_flags_clear = 0;
  fake.last_flags_clear_words = 0;
  if (maps_at == 23) {
    memcpy(&fake.last_flags_clear, params[21], sizeof(CUdeviceptr));
    memcpy(&fake.last_flags_clear_words, params[22], sizeof(uint32_t));
  }
  if (fake.last_flags_clear) {
    if (!block_of((CUdeviceptr)fake.last_flags_clear, 4u * fake.last_flags_clear_words))
      return CUDA_ERROR_INVALID_VALUE;
    memset((void *)(uintptr_t)fake.last_flags_clear, 0, 4u * fake.last_flags_clear_words);
  }
  for (uint32_t i = 0; i < fake.launch_tma_count && i < FAKE_MAX_MAPS; i++)
    memcpy(&fake.last_maps[i], params[maps_at + i], sizeof(CUtensorMap));
  fake.clock_ms += fake.launch_ms;
  if (fake.launch_hook)
    fake.launch_hook((uint32_t *)(uintptr_t)fake.last_progress_param, c->gridDimX);
  return CUDA_SUCCESS;
}

static CUresult f_stream_query(CUstream s) {
  record("cuStreamQuery", (uint64_t)(uintptr_t)s, 0, 0, 0, NULL, 0);
  fake.query_count++;
  if (fake.query_hook)
    fake.query_hook(fake.query_count);
  CUresult r = injected("cuStreamQuery");
  return r != CUDA_SUCCESS ? r : fake.stream_query_result;
}

static CUresult f_host_alloc(void **p, size_t bytes, unsigned flags) {
  record("cuMemHostAlloc", bytes, flags, 0, 0, NULL, bytes);
  CUresult r = injected("cuMemHostAlloc");
  if (r != CUDA_SUCCESS)
    return r;
  if (fake.host_count >= FAKE_MAX_HOST || bytes == 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  void *h = malloc(bytes);
  if (!h)
    return CUDA_ERROR_OUT_OF_MEMORY;
  memset(h, 0xA5, bytes);
  fake.host[fake.host_count] = h;
  fake.host_live[fake.host_count] = true;
  fake.host_flags[fake.host_count] = flags;
  fake.host_count++;
  *p = h;
  return CUDA_SUCCESS;
}

static CUresult f_host_free(void *p) {
  record("cuMemFreeHost", (uint64_t)(uintptr_t)p, 0, 0, 0, NULL, 0);
  for (int i = 0; i < fake.host_count; i++)
    if (fake.host_live[i] && fake.host[i] == p) {
      fake.host_live[i] = false;
      free(p);
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;
}

static CUresult f_host_dptr(CUdeviceptr *d, void *p, unsigned flags) {
  record("cuMemHostGetDevicePointer", (uint64_t)(uintptr_t)p, flags, 0, 0, NULL, 0);
  CUresult r = injected("cuMemHostGetDevicePointer");
  if (r != CUDA_SUCCESS)
    return r;
  for (int i = 0; i < fake.host_count; i++)
    if (fake.host_live[i] && fake.host[i] == p) {
      if (!(fake.host_flags[i] & CU_MEMHOSTALLOC_DEVICEMAP))
        return CUDA_ERROR_INVALID_VALUE;
      *d = (CUdeviceptr)(uintptr_t)p; /* unified addressing: the same address */
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_INVALID_VALUE;
}

static int event_index(CUevent e) {
  uintptr_t v = (uintptr_t)e;
  if (v < 0x7000 || v >= 0x7000 + (uintptr_t)fake.event_count)
    return -1;
  int i = (int)(v - 0x7000);
  return fake.event_live[i] ? i : -1;
}

static CUresult f_event_create(CUevent *e, unsigned flags) {
  record("cuEventCreate", flags, 0, 0, 0, NULL, 0);
  CUresult r = injected("cuEventCreate");
  if (r != CUDA_SUCCESS)
    return r;
  if (fake.event_count >= FAKE_MAX_EVENTS)
    return CUDA_ERROR_OUT_OF_MEMORY;
  int i = fake.event_count++;
  fake.event_live[i] = true;
  fake.event_recorded[i] = false;
  *e = (CUevent)(uintptr_t)(0x7000 + i);
  return CUDA_SUCCESS;
}

static CUresult f_event_record(CUevent e, CUstream s) {
  record("cuEventRecord", (uint64_t)(uintptr_t)e, (uint64_t)(uintptr_t)s, 0, 0, NULL, 0);
  int i = event_index(e);
  if (i < 0)
    return CUDA_ERROR_INVALID_HANDLE;
  fake.event_time[i] = fake.clock_ms;
  fake.event_recorded[i] = true;
  return injected("cuEventRecord");
}

static CUresult f_event_sync(CUevent e) {
  record("cuEventSynchronize", (uint64_t)(uintptr_t)e, 0, 0, 0, NULL, 0);
  return event_index(e) < 0 ? CUDA_ERROR_INVALID_HANDLE : injected("cuEventSynchronize");
}

static CUresult f_event_elapsed(float *ms, CUevent a, CUevent b) {
  record("cuEventElapsedTime", (uint64_t)(uintptr_t)a, (uint64_t)(uintptr_t)b, 0, 0, NULL, 0);
  int i = event_index(a), j = event_index(b);
  if (i < 0 || j < 0)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!fake.event_recorded[i] || !fake.event_recorded[j])
    return CUDA_ERROR_INVALID_VALUE;
  *ms = (float)(fake.event_time[j] - fake.event_time[i]);
  return injected("cuEventElapsedTime");
}

static CUresult f_event_destroy(CUevent e) {
  record("cuEventDestroy", (uint64_t)(uintptr_t)e, 0, 0, 0, NULL, 0);
  int i = event_index(e);
  if (i < 0)
    return CUDA_ERROR_INVALID_HANDLE;
  fake.event_live[i] = false;
  return CUDA_SUCCESS;
}

static CUresult f_encode(CUtensorMap *map, CUtensorMapDataType dtype, cuuint32_t rank,
                         void *addr, const cuuint64_t *dims, const cuuint64_t *strides,
                         const cuuint32_t *box, const cuuint32_t *elem,
                         CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                         CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  record("cuTensorMapEncodeTiled", (uint64_t)(uintptr_t)addr, rank, dtype, 0, NULL, 0);
  CUresult r = injected("cuTensorMapEncodeTiled");
  if (r != CUDA_SUCCESS)
    return r;
  if (((uintptr_t)map % 64) != 0 || rank == 0 || rank > 5)
    return CUDA_ERROR_INVALID_VALUE;
  if (fake.encode_count < FAKE_MAX_MAPS) {
    fake_encode *e = &fake.encodes[fake.encode_count];
    memset(e, 0, sizeof *e);
    e->dtype = dtype;
    e->rank = rank;
    e->address = (uint64_t)(uintptr_t)addr;
    for (uint32_t i = 0; i < rank; i++) {
      e->dims[i] = dims[i];
      e->box[i] = box[i];
      e->elem[i] = elem[i];
      if (i + 1 < rank)
        e->strides[i] = strides[i];
    }
    e->interleave = il;
    e->swizzle = sw;
    e->l2 = l2;
    e->oob = oob;
  }
  fake.encode_count++;
  memset(map, 0, sizeof *map);
  map->opaque[0] = 0xDF7AA0000000ull | (uint64_t)fake.encode_count;
  map->opaque[1] = (uint64_t)(uintptr_t)addr;
  map->opaque[2] = rank;
  return CUDA_SUCCESS;
}

df_cuda_driver fake_driver(void) {
  df_cuda_driver d;
  memset(&d, 0, sizeof d);
  d.cuInit = f_init;
  d.cuDriverGetVersion = f_driver_version;
  d.cuGetErrorName = f_error_name;
  d.cuGetErrorString = f_error_string;
  d.cuDeviceGetCount = f_device_count;
  d.cuDeviceGet = f_device_get;
  d.cuDeviceGetName = f_device_name;
  d.cuDeviceGetAttribute = f_device_attribute;
  d.cuDevicePrimaryCtxRetain = f_ctx_retain;
  d.cuDevicePrimaryCtxRelease = f_ctx_release;
  d.cuCtxSetCurrent = f_ctx_set;
  d.cuModuleLoadDataEx = f_module_load;
  d.cuModuleUnload = f_module_unload;
  d.cuModuleGetGlobal = f_module_global;
  d.cuModuleGetFunction = f_get_function;
  d.cuFuncGetAttribute = f_func_get;
  d.cuFuncSetAttribute = f_func_set;
  d.cuOccupancyMaxPotentialClusterSize = f_max_cluster;
  d.cuOccupancyMaxActiveClusters = f_active_clusters;
  d.cuOccupancyMaxActiveBlocksPerMultiprocessor = f_active_blocks;
  d.cuMemAlloc = f_alloc;
  d.cuMemFree = f_free;
  d.cuMemcpyHtoDAsync = f_htod;
  d.cuMemcpyDtoHAsync = f_dtoh;
  d.cuMemsetD8Async = f_memset;
  d.cuStreamCreate = f_stream_create;
  d.cuStreamDestroy = f_stream_destroy;
  d.cuStreamSynchronize = f_stream_sync;
  d.cuLaunchKernelEx = f_launch;
  d.cuTensorMapEncodeTiled = f_encode;
  d.cuStreamQuery = f_stream_query;
  d.cuMemHostAlloc = f_host_alloc;
  d.cuMemFreeHost = f_host_free;
  d.cuMemHostGetDevicePointer = f_host_dptr;
  d.cuEventCreate = f_event_create;
  d.cuEventRecord = f_event_record;
  d.cuEventSynchronize = f_event_sync;
  d.cuEventElapsedTime = f_event_elapsed;
  d.cuEventDestroy = f_event_destroy;
  return d;
}
