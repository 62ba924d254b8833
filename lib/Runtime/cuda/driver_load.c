/* The driver symbol table: which entry points libdfrt resolves, with the
   versioned name tried first, and the default dlopen loader. */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#include "internal.h"

_Static_assert(sizeof(void *) == sizeof(void (*)(void)),
               "function and data pointers have the same size");

typedef struct dfrt_symbol {
  const char *name;      /* plain name */
  const char *versioned; /* tried first; NULL if none */
  size_t offset;         /* member of df_cuda_driver */
  bool required;
} dfrt_symbol;

#define SYM(member, versioned, required)                                          \
  { #member, versioned, offsetof(df_cuda_driver, member), required }

static const dfrt_symbol symbols[] = {
    SYM(cuInit, NULL, true),
    SYM(cuDriverGetVersion, NULL, true),
    SYM(cuGetErrorName, NULL, false),
    SYM(cuGetErrorString, NULL, false),
    SYM(cuDeviceGetCount, NULL, true),
    SYM(cuDeviceGet, NULL, true),
    SYM(cuDeviceGetName, NULL, true),
    SYM(cuDeviceGetAttribute, NULL, true),
    SYM(cuDevicePrimaryCtxRetain, NULL, true),
    SYM(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", true),
    SYM(cuCtxSetCurrent, NULL, true),
    SYM(cuModuleLoadDataEx, NULL, true),
    SYM(cuModuleUnload, NULL, true),
    SYM(cuModuleGetFunction, NULL, true),
    SYM(cuModuleGetGlobal, "cuModuleGetGlobal_v2", false),
    SYM(cuFuncGetAttribute, NULL, true),
    SYM(cuFuncSetAttribute, NULL, true),
    SYM(cuOccupancyMaxPotentialClusterSize, NULL, true),
    SYM(cuOccupancyMaxActiveClusters, NULL, true),
    SYM(cuOccupancyMaxActiveBlocksPerMultiprocessor, NULL, true),
    SYM(cuMemAlloc, "cuMemAlloc_v2", true),
    SYM(cuMemFree, "cuMemFree_v2", true),
    SYM(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", true),
    SYM(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", true),
    SYM(cuMemsetD8Async, NULL, true),
    SYM(cuStreamCreate, NULL, true),
    SYM(cuStreamDestroy, "cuStreamDestroy_v2", true),
    SYM(cuStreamSynchronize, NULL, true),
    SYM(cuLaunchKernelEx, NULL, true),
    SYM(cuTensorMapEncodeTiled, NULL, false),
    SYM(cuStreamQuery, NULL, false),
    SYM(cuMemHostAlloc, NULL, false),
    SYM(cuMemFreeHost, NULL, false),
    SYM(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2", false),
    SYM(cuEventCreate, NULL, false),
    SYM(cuEventRecord, NULL, false),
    SYM(cuEventSynchronize, NULL, false),
    SYM(cuEventElapsedTime, "cuEventElapsedTime_v2", false),
    SYM(cuEventDestroy, "cuEventDestroy_v2", false),
};

static void *get_member(const df_cuda_driver *t, size_t offset) {
  void *p;
  memcpy(&p, (const char *)t + offset, sizeof p);
  return p;
}

static void set_member(df_cuda_driver *t, size_t offset, void *p) {
  memcpy((char *)t + offset, &p, sizeof p);
}

df_status dfrt_driver_check_table(const df_cuda_driver *t) {
  for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++)
    if (symbols[i].required && !get_member(t, symbols[i].offset))
      return df_status_errorf(DF_EINVAL, "runtime: injected driver table lacks %s",
                              symbols[i].name);
  return df_status_ok();
}

df_status dfrt_driver_resolve(const df_rt_loader *l, void *handle, const char *library,
                              df_cuda_driver *out) {
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < sizeof symbols / sizeof symbols[0]; i++) {
    const dfrt_symbol *s = &symbols[i];
    void *p = s->versioned ? l->symbol(l->user, handle, s->versioned) : NULL;
    if (!p)
      p = l->symbol(l->user, handle, s->name);
    if (!p && s->required)
      return df_status_errorf(DF_EUNSUPPORTED,
                              "runtime: CUDA driver %s lacks %s%s%s (a CUDA 12 or newer "
                              "driver is needed)",
                              library, s->versioned ? s->versioned : s->name,
                              s->versioned ? " and " : "", s->versioned ? s->name : "");
    set_member(out, s->offset, p);
  }
  return df_status_ok();
}

static void *dl_open(void *user, const char *library) {
  (void)user;
  return dlopen(library, RTLD_NOW | RTLD_LOCAL);
}

static void *dl_symbol(void *user, void *handle, const char *name) {
  (void)user;
  return dlsym(handle, name);
}

static void dl_close(void *user, void *handle) {
  (void)user;
  dlclose(handle);
}

static const char *dl_error(void *user) {
  (void)user;
  return dlerror();
}

df_rt_loader dfrt_default_loader(void) {
  df_rt_loader l = {dl_open, dl_symbol, dl_close, dl_error, NULL};
  return l;
}
