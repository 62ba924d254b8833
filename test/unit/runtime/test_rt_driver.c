/* The runtime context and the driver table: "no CUDA driver" when the
   library cannot be loaded, versioned (_v2) symbols preferred, required
   and optional entry points, injected tables, cuInit failures; devices
   (ordinals, attributes, primary context) and the memory helpers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "rt_fixture.h"

/* ---- a loader over the fake table ---------------------------------------------- */

typedef struct fake_loader {
  bool fail_open;
  const char *hide;        /* symbol name the library lacks */
  bool no_versioned;       /* the library has no _v2 names */
  int opens, closes;
  char looked_up[64][48];
  int lookups;
  df_cuda_driver table;
} fake_loader;

#define MEMBER(m) {#m, offsetof(df_cuda_driver, m)}
static const struct {
  const char *name;
  size_t offset;
} members[] = {
    MEMBER(cuInit), MEMBER(cuDriverGetVersion), MEMBER(cuGetErrorName),
    MEMBER(cuGetErrorString), MEMBER(cuDeviceGetCount), MEMBER(cuDeviceGet),
    MEMBER(cuDeviceGetName), MEMBER(cuDeviceGetAttribute), MEMBER(cuDevicePrimaryCtxRetain),
    MEMBER(cuDevicePrimaryCtxRelease), MEMBER(cuCtxSetCurrent), MEMBER(cuModuleLoadDataEx),
    MEMBER(cuModuleUnload), MEMBER(cuModuleGetFunction), MEMBER(cuFuncGetAttribute),
    MEMBER(cuFuncSetAttribute), MEMBER(cuOccupancyMaxPotentialClusterSize),
    MEMBER(cuOccupancyMaxActiveClusters), MEMBER(cuOccupancyMaxActiveBlocksPerMultiprocessor),
    MEMBER(cuMemAlloc), MEMBER(cuMemFree), MEMBER(cuMemcpyHtoDAsync), MEMBER(cuMemcpyDtoHAsync),
    MEMBER(cuMemsetD8Async), MEMBER(cuStreamCreate), MEMBER(cuStreamDestroy),
    MEMBER(cuStreamSynchronize), MEMBER(cuLaunchKernelEx), MEMBER(cuTensorMapEncodeTiled),
};

static CUresult unversioned_alloc(CUdeviceptr *p, size_t n) {
  (void)p;
  (void)n;
  return CUDA_ERROR_NOT_SUPPORTED;
}

static int library_handle;

static void *l_open(void *user, const char *library) {
  fake_loader *l = user;
  (void)library;
  l->opens++;
  return l->fail_open ? NULL : &library_handle;
}

static void *l_symbol(void *user, void *handle, const char *name) {
  fake_loader *l = user;
  assert_ptr_equal(handle, &library_handle);
  if (l->lookups < 64)
    snprintf(l->looked_up[l->lookups++], 48, "%s", name);
  if (l->hide && strcmp(name, l->hide) == 0)
    return NULL;
  char base[48];
  snprintf(base, sizeof base, "%s", name);
  size_t n = strlen(base);
  bool versioned = n > 3 && strcmp(base + n - 3, "_v2") == 0;
  if (versioned) {
    if (l->no_versioned)
      return NULL;
    base[n - 3] = '\0';
  } else if (strcmp(name, "cuMemAlloc") == 0 && !l->no_versioned) {
    /* The old entry point exists too, but must not be chosen. */
    void *p;
    CUresult (*fn)(CUdeviceptr *, size_t) = unversioned_alloc;
    memcpy(&p, &fn, sizeof p);
    return p;
  }
  for (size_t i = 0; i < sizeof members / sizeof members[0]; i++)
    if (strcmp(members[i].name, base) == 0) {
      void *p;
      memcpy(&p, (const char *)&l->table + members[i].offset, sizeof p);
      return p;
    }
  return NULL;
}

static void l_close(void *user, void *handle) {
  fake_loader *l = user;
  assert_ptr_equal(handle, &library_handle);
  l->closes++;
}

static const char *l_error(void *user) {
  (void)user;
  return "libcuda.so.1: cannot open shared object file: No such file or directory";
}

static df_status create_with(fake_loader *l, df_rt **rt) {
  l->table = fake_driver();
  df_rt_loader loader = {l_open, l_symbol, l_close, l_error, l};
  df_rt_options o;
  memset(&o, 0, sizeof o);
  o.loader = &loader;
  return df_rt_create(&o, rt);
}

static bool looked_up(const fake_loader *l, const char *name) {
  for (int i = 0; i < l->lookups; i++)
    if (strcmp(l->looked_up[i], name) == 0)
      return true;
  return false;
}

/* ---- tests ------------------------------------------------------------------------- */

static void no_driver_is_reported_clearly(void **state) {
  (void)state;
  fake_reset();
  fake_loader l;
  memset(&l, 0, sizeof l);
  l.fail_open = true;
  df_rt *rt = (df_rt *)(uintptr_t)1;
  df_status s = create_with(&l, &rt);
  fx_fails(s, DF_EUNSUPPORTED, "no CUDA driver: cannot load libcuda.so.1: libcuda.so.1: cannot "
                               "open shared object file");
  assert_true(strncmp(s.message, "no CUDA driver", 14) == 0);
  assert_null(rt);
  assert_int_equal(l.opens, 1);
  assert_int_equal(l.closes, 0);
  /* The real dlopen path, with a library that does not exist. */
  df_rt_options o;
  memset(&o, 0, sizeof o);
  o.library = "/nonexistent/df/libcuda.so.1";
  fx_fails(df_rt_create(&o, &rt), DF_EUNSUPPORTED, "no CUDA driver: cannot load "
                                                   "/nonexistent/df/libcuda.so.1");
  assert_null(rt);
}

static void versioned_symbols_are_preferred(void **state) {
  (void)state;
  fake_reset();
  fake_loader l;
  memset(&l, 0, sizeof l);
  df_rt *rt;
  fx_ok(create_with(&l, &rt));
  assert_int_equal(fake_count("cuInit"), 1);
  assert_true(looked_up(&l, "cuMemAlloc_v2"));
  assert_false(looked_up(&l, "cuMemAlloc"));
  assert_true(looked_up(&l, "cuMemFree_v2"));
  assert_true(looked_up(&l, "cuMemcpyHtoDAsync_v2"));
  assert_true(looked_up(&l, "cuMemcpyDtoHAsync_v2"));
  assert_true(looked_up(&l, "cuStreamDestroy_v2"));
  assert_true(looked_up(&l, "cuDevicePrimaryCtxRelease_v2"));
  assert_true(looked_up(&l, "cuLaunchKernelEx"));
  df_rt_device *dev;
  fx_ok(df_rt_device_open(rt, 0, &dev));
  CUdeviceptr p;
  fx_ok(df_rt_mem_alloc(dev, 64, &p)); /* the unversioned one would fail */
  fx_ok(df_rt_mem_free(dev, p));
  df_rt_device_close(dev);
  df_rt_destroy(rt);
  assert_int_equal(l.closes, 1);
  assert_int_equal(fake_live_blocks(), 0);
}

static void plain_names_are_the_fallback(void **state) {
  (void)state;
  fake_reset();
  fake_loader l;
  memset(&l, 0, sizeof l);
  l.no_versioned = true;
  df_rt *rt;
  fx_ok(create_with(&l, &rt));
  assert_true(looked_up(&l, "cuMemAlloc_v2"));
  assert_true(looked_up(&l, "cuMemAlloc"));
  assert_ptr_equal(df_rt_driver(rt)->cuMemAlloc, fake_driver().cuMemAlloc);
  df_rt_destroy(rt);
}

static void missing_entry_points(void **state) {
  (void)state;
  fake_reset();
  fake_loader l;
  memset(&l, 0, sizeof l);
  l.hide = "cuLaunchKernelEx";
  df_rt *rt;
  fx_fails(create_with(&l, &rt), DF_EUNSUPPORTED,
           "runtime: CUDA driver libcuda.so.1 lacks cuLaunchKernelEx (a CUDA 12 or newer driver "
           "is needed)");
  assert_int_equal(l.closes, 1);
  memset(&l, 0, sizeof l);
  l.hide = "cuMemFree";
  l.no_versioned = true;
  fx_fails(create_with(&l, &rt), DF_EUNSUPPORTED, "lacks cuMemFree_v2 and cuMemFree");
  /* cuTensorMapEncodeTiled is optional: only TMA descriptors need it. */
  memset(&l, 0, sizeof l);
  l.hide = "cuTensorMapEncodeTiled";
  fx_ok(create_with(&l, &rt));
  assert_null(df_rt_driver(rt)->cuTensorMapEncodeTiled);
  df_rt_destroy(rt);
  /* A loader without its hooks. */
  df_rt_loader bad = {NULL, NULL, NULL, NULL, NULL};
  df_rt_options o;
  memset(&o, 0, sizeof o);
  o.loader = &bad;
  fx_fails(df_rt_create(&o, &rt), DF_EINVAL, "loader lacks open, symbol or close");
  fx_fails(df_rt_create(NULL, NULL), DF_EINVAL, "NULL output pointer");
}

static void injected_tables(void **state) {
  (void)state;
  fake_reset();
  df_cuda_driver d = fake_driver();
  d.cuMemAlloc = NULL;
  df_rt_options o;
  memset(&o, 0, sizeof o);
  o.driver = &d;
  df_rt *rt;
  fx_fails(df_rt_create(&o, &rt), DF_EINVAL, "runtime: injected driver table lacks cuMemAlloc");
  d = fake_driver();
  d.cuGetErrorName = NULL;
  d.cuGetErrorString = NULL;
  fake.fail_name = "cuInit";
  fake.fail_result = CUDA_ERROR_NO_DEVICE;
  fx_fails(df_rt_create(&o, &rt), DF_EUNSUPPORTED, "runtime: cuInit failed: CUDA error (100)");
  assert_null(rt);
  d = fake_driver();
  fx_fails(df_rt_create(&o, &rt), DF_EUNSUPPORTED,
           "runtime: cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is "
           "detected");
  fake.fail_name = NULL;
  fx_ok(df_rt_create(&o, &rt));
  int version = 0, count = 0;
  fx_ok(df_rt_driver_version(rt, &version));
  assert_int_equal(version, 13000);
  fx_ok(df_rt_device_count(rt, &count));
  assert_int_equal(count, 1);
  fx_fails(df_rt_driver_version(rt, NULL), DF_EINVAL, "NULL argument");
  fx_fails(df_rt_device_count(NULL, &count), DF_EINVAL, "NULL argument");
  fake.fail_name = "cuDeviceGetCount";
  fake.fail_result = CUDA_ERROR_NOT_INITIALIZED;
  fx_fails(df_rt_device_count(rt, &count), DF_EIO, "cuDeviceGetCount failed");
  fake.fail_name = NULL;
  assert_null(df_rt_driver(NULL));
  df_rt_destroy(rt);
  df_rt_destroy(NULL);
}

static void devices(void **state) {
  (void)state;
  fake_reset();
  fake.device_count = 2;
  fake.sm_count = 78;
  fake.cluster_launch = 0;
  rt_fixture f;
  fx_open(&f);
  const df_rt_device_info *in = df_rt_device_get_info(f.dev);
  assert_int_equal(in->ordinal, 0);
  assert_string_equal(in->name, "Fake H200");
  assert_int_equal(in->sm_count, 78);
  assert_int_equal(in->cc_major, 9);
  assert_int_equal(in->cc_minor, 0);
  assert_int_equal(in->max_threads_per_block, 1024);
  assert_int_equal(in->max_shared_per_block_optin, 232448);
  assert_false(in->cluster_launch);
  assert_int_equal(fake_count("cuDevicePrimaryCtxRetain"), 1);
  assert_true(fake.ctx_set_count > 0);
  df_rt_device *d1;
  fx_ok(df_rt_device_open(f.rt, 1, &d1));
  assert_int_equal(df_rt_device_get_info(d1)->ordinal, 1);
  df_rt_device_close(d1);
  df_rt_device *bad = (df_rt_device *)(uintptr_t)1;
  fx_fails(df_rt_device_open(f.rt, 2, &bad), DF_EINVAL,
           "device 2: no such CUDA device (2 devices present)");
  assert_null(bad);
  fx_fails(df_rt_device_open(f.rt, -1, &bad), DF_EINVAL, "device -1: no such CUDA device");
  fx_fails(df_rt_device_open(NULL, 0, &bad), DF_EINVAL, "NULL argument");
  fake.fail_name = "cuDeviceGetAttribute";
  fake.fail_result = CUDA_ERROR_INVALID_VALUE;
  fake.fail_nth = fake_count("cuDeviceGetAttribute") + 6;
  fx_fails(df_rt_device_open(f.rt, 1, &bad), DF_EINVAL,
           "device 1: attribute cluster launch: cuDeviceGetAttribute failed");
  assert_int_equal(fake_count("cuDevicePrimaryCtxRelease"), 2); /* d1 and the failed open */
  fake.fail_name = "cuDevicePrimaryCtxRetain";
  fake.fail_nth = 0;
  fx_fails(df_rt_device_open(f.rt, 1, &bad), DF_EINVAL, "device 1: cuDevicePrimaryCtxRetain");
  assert_int_equal(fake_count("cuDevicePrimaryCtxRelease"), 2);
  fake.fail_name = "cuDeviceGet";
  fx_fails(df_rt_device_open(f.rt, 1, &bad), DF_EINVAL, "device 1: cuDeviceGet failed");
  fake.fail_name = "cuDeviceGetName";
  fx_fails(df_rt_device_open(f.rt, 1, &bad), DF_EINVAL, "cuDeviceGetName failed");
  fake.fail_name = NULL;
  assert_null(df_rt_device_get_info(NULL));
  df_rt_device_close(NULL);
  fx_close(&f);
}

static void memory_helpers(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  CUdeviceptr p;
  fx_ok(df_rt_mem_alloc(f.dev, 16, &p));
  fx_ok(df_rt_memcpy_htod(f.dev, NULL, p, "0123456789abcdef", 16));
  char back[17] = {0};
  fx_ok(df_rt_memcpy_dtoh(f.dev, NULL, back, p, 16));
  assert_string_equal(back, "0123456789abcdef");
  fx_ok(df_rt_memcpy_htod(f.dev, NULL, p, NULL, 0));
  fx_ok(df_rt_memcpy_dtoh(f.dev, NULL, NULL, p, 0));
  char wide[32] = {0};
  fx_fails(df_rt_memcpy_htod(f.dev, NULL, p, wide, sizeof wide), DF_EINVAL,
           "memory: cuMemcpyHtoDAsync failed: CUDA_ERROR_INVALID_VALUE");
  fx_fails(df_rt_memcpy_dtoh(f.dev, NULL, back, p + 8, 16), DF_EINVAL, "cuMemcpyDtoHAsync");
  fx_fails(df_rt_memcpy_htod(NULL, NULL, p, "x", 1), DF_EINVAL, "NULL argument");
  fx_fails(df_rt_memcpy_dtoh(f.dev, NULL, NULL, p, 1), DF_EINVAL, "NULL argument");
  fx_ok(df_rt_mem_free(f.dev, p));
  fx_ok(df_rt_mem_free(f.dev, 0));
  fx_fails(df_rt_mem_free(f.dev, p), DF_EINVAL, "memory: cuMemFree failed");
  fx_fails(df_rt_mem_free(NULL, p), DF_EINVAL, "NULL device");
  fx_fails(df_rt_mem_alloc(f.dev, 8, NULL), DF_EINVAL, "NULL argument");
  fake.fail_name = "cuMemAlloc";
  fake.fail_result = CUDA_ERROR_OUT_OF_MEMORY;
  fx_fails(df_rt_mem_alloc(f.dev, 8, &p), DF_ENOMEM,
           "memory: cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory");
  fake.fail_name = "cuStreamSynchronize";
  fake.fail_result = CUDA_ERROR_ILLEGAL_ADDRESS;
  fx_fails(df_rt_stream_synchronize(f.dev, NULL), DF_EIO, "cuStreamSynchronize failed: CUDA "
                                                          "error (700)");
  fake.fail_name = NULL;
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(no_driver_is_reported_clearly),
      cmocka_unit_test(versioned_symbols_are_preferred),
      cmocka_unit_test(plain_names_are_the_fallback),
      cmocka_unit_test(missing_entry_points),
      cmocka_unit_test(injected_tables),
      cmocka_unit_test(devices),
      cmocka_unit_test(memory_helpers),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
