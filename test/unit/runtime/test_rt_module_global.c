/* df_rt_module_global: a module's global by name through the driver's
   cuModuleGetGlobal (this test installs its own fake of it in the fake
   driver's table): the address and size it reports, the name and module
   it asks for, a missing symbol named in the error, a driver error, a
   driver table without cuModuleGetGlobal, NULL arguments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "df/rt_trace.h"
#include "rt_fixture.h"

/* The fake's one global and what it was last asked. */
static struct {
  CUresult result; /* answered for the known name */
  unsigned calls;
  CUmodule module;
  char name[128];
} g;

#define TRACE_ADDR ((CUdeviceptr)0x7000)

static CUresult f_get_global(CUdeviceptr *ptr, size_t *bytes, CUmodule m, const char *name) {
  g.calls++;
  g.module = m;
  snprintf(g.name, sizeof g.name, "%s", name);
  if (strcmp(name, DF_RT_TRACE_SYMBOL) != 0)
    return CUDA_ERROR_NOT_FOUND;
  if (g.result != CUDA_SUCCESS)
    return g.result;
  *ptr = TRACE_ADDR;
  *bytes = DF_RT_TRACE_WORDS * sizeof(uint64_t);
  return CUDA_SUCCESS;
}

/* Device 0 with FX_PTX loaded, on the fake driver with or without the
   global lookup. */
static void open_with(rt_fixture *f, bool lookup) {
  fake_reset();
  memset(&g, 0, sizeof g);
  memset(f, 0, sizeof *f);
  df_cuda_driver d = fake_driver();
  d.cuModuleGetGlobal = lookup ? f_get_global : NULL;
  df_rt_options o;
  memset(&o, 0, sizeof o);
  o.driver = &d;
  fx_ok(df_rt_create(&o, &f->rt));
  fx_ok(df_rt_device_open(f->rt, 0, &f->dev));
  fx_ok(df_rt_module_load(f->dev, FX_PTX, strlen(FX_PTX), NULL, &f->mod));
  /* The load itself looks up df_handler_workspace_bytes (docs/workspace.md);
     count only the lookups df_rt_module_global makes. */
  memset(&g, 0, sizeof g);
}

static void finds_the_trace_buffer(void **state) {
  (void)state;
  rt_fixture f;
  open_with(&f, true);
  CUdeviceptr p = 0;
  size_t n = 0;
  fx_ok(df_rt_module_global(f.mod, DF_RT_TRACE_SYMBOL, &p, &n));
  assert_int_equal(p, TRACE_ADDR);
  assert_int_equal(n, 132 * 64 * 10 * 2 * 8);
  assert_int_equal(g.calls, 1);
  assert_string_equal(g.name, "df_rt_trace_buf");
  assert_ptr_equal(g.module, (CUmodule)(uintptr_t)0x2000); /* the fake's loaded module */
  fx_close(&f);
}

static void missing_symbol_is_named(void **state) {
  (void)state;
  rt_fixture f;
  open_with(&f, true);
  CUdeviceptr p = 1;
  size_t n = 1;
  fx_fails(df_rt_module_global(f.mod, "df_no_such_global", &p, &n), DF_EINVAL,
           "module: the image of kernel 'df_persistent_kernel' has no global "
           "'df_no_such_global' (for df_rt_trace_buf: compile the kernel with the traced "
           "device runtime, df-translate --df-runtime=df_device_runtime_trace.bc)");
  /* Outputs untouched on failure. */
  assert_int_equal(p, 1);
  assert_int_equal(n, 1);
  fx_close(&f);
}

static void driver_errors_name_the_symbol(void **state) {
  (void)state;
  rt_fixture f;
  open_with(&f, true);
  g.result = CUDA_ERROR_INVALID_HANDLE;
  CUdeviceptr p = 0;
  size_t n = 0;
  fx_fails(df_rt_module_global(f.mod, DF_RT_TRACE_SYMBOL, &p, &n), DF_EINVAL,
           "module: global 'df_rt_trace_buf': cuModuleGetGlobal failed: CUDA error (400)");
  g.result = CUDA_ERROR_OUT_OF_MEMORY;
  fx_fails(df_rt_module_global(f.mod, DF_RT_TRACE_SYMBOL, &p, &n), DF_ENOMEM,
           "module: global 'df_rt_trace_buf': cuModuleGetGlobal failed");
  fx_close(&f);
}

static void driver_without_lookup(void **state) {
  (void)state;
  rt_fixture f;
  open_with(&f, false);
  CUdeviceptr p = 0;
  size_t n = 0;
  fx_fails(df_rt_module_global(f.mod, DF_RT_TRACE_SYMBOL, &p, &n), DF_EUNSUPPORTED,
           "module: global 'df_rt_trace_buf': the CUDA driver has no cuModuleGetGlobal");
  fx_close(&f);
}

static void null_arguments(void **state) {
  (void)state;
  rt_fixture f;
  open_with(&f, true);
  CUdeviceptr p = 0;
  size_t n = 0;
  const char *msg = "module: NULL argument to df_rt_module_global";
  fx_fails(df_rt_module_global(NULL, DF_RT_TRACE_SYMBOL, &p, &n), DF_EINVAL, msg);
  fx_fails(df_rt_module_global(f.mod, NULL, &p, &n), DF_EINVAL, msg);
  fx_fails(df_rt_module_global(f.mod, DF_RT_TRACE_SYMBOL, NULL, &n), DF_EINVAL, msg);
  fx_fails(df_rt_module_global(f.mod, DF_RT_TRACE_SYMBOL, &p, NULL), DF_EINVAL, msg);
  assert_int_equal(g.calls, 0);
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(finds_the_trace_buffer),
      cmocka_unit_test(missing_symbol_is_named),
      cmocka_unit_test(driver_errors_name_the_symbol),
      cmocka_unit_test(driver_without_lookup),
      cmocka_unit_test(null_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
