/* Modules: image classification, PTX handed over NUL-terminated with the
   JIT log options, the JIT error log returned on failure (in the status
   and in full through the options), the info log on success, a missing
   kernel, kernel attributes, loading from files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "df/kernel_plan.h"
#include "rt_fixture.h"

static void open_rt(rt_fixture *f) {
  memset(f, 0, sizeof *f);
  df_cuda_driver d = fake_driver();
  df_rt_options o;
  memset(&o, 0, sizeof o);
  o.driver = &d;
  fx_ok(df_rt_create(&o, &f->rt));
  fx_ok(df_rt_device_open(f->rt, 0, &f->dev));
}

static void classify_images(void **state) {
  (void)state;
  df_rt_image_kind k;
  const uint8_t elf[] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  fx_ok(df_rt_image_classify(elf, sizeof elf, &k));
  assert_int_equal(k, DF_RT_IMAGE_CUBIN);
  const uint8_t fat[] = {0x50, 0xed, 0x55, 0xba, 1, 0};
  fx_ok(df_rt_image_classify(fat, sizeof fat, &k));
  assert_int_equal(k, DF_RT_IMAGE_FATBIN);
  fx_ok(df_rt_image_classify(FX_PTX, strlen(FX_PTX), &k));
  assert_int_equal(k, DF_RT_IMAGE_PTX);
  fx_fails(df_rt_image_classify("hello world", 11, &k), DF_EFORMAT,
           "module: image of 11 bytes is neither a cubin (ELF), a fatbin nor PTX text (no "
           "'.version' directive)");
  fx_fails(df_rt_image_classify(".vers", 5, &k), DF_EFORMAT, "no '.version' directive");
  /* A .version after a NUL byte does not count. */
  const char hidden[] = "abc\0.version 8.7";
  fx_fails(df_rt_image_classify(hidden, sizeof hidden - 1, &k), DF_EFORMAT, "neither");
  fx_fails(df_rt_image_classify(elf, 3, &k), DF_EFORMAT, "neither");
  fx_fails(df_rt_image_classify(NULL, 3, &k), DF_EINVAL, "NULL argument");
}

static void loads_ptx_with_logs(void **state) {
  (void)state;
  fake_reset();
  fake.jit_info_log = "ptxas info    : Used 40 registers";
  fake.func_static_shared = 1024;
  rt_fixture f;
  open_rt(&f);
  /* Not NUL-terminated: the runtime terminates its copy. */
  size_t n = strlen(FX_PTX);
  char *ptx = malloc(n);
  memcpy(ptx, FX_PTX, n);
  char log[256];
  df_rt_module_options o = {NULL, log, sizeof log};
  fx_ok(df_rt_module_load(f.dev, ptx, n, &o, &f.mod));
  free(ptx);
  const fake_call *load = fake_nth("cuModuleLoadDataEx", 0);
  assert_int_equal(load->bytes, n + 1);
  assert_memory_equal(load->data, FX_PTX, 64);
  assert_int_equal(fake.last_jit_options, 5);
  assert_string_equal(log, "ptxas info    : Used 40 registers");
  assert_string_equal(df_rt_module_info_log(f.mod), "ptxas info    : Used 40 registers");
  assert_string_equal((const char *)fake_nth("cuModuleGetFunction", 0)->data,
                      "df_persistent_kernel");
  /* and its watched twin (DF_RT_WATCHED_SUFFIX) */
  assert_string_equal((const char *)fake_nth("cuModuleGetFunction", 1)->data,
                      "df_persistent_kernel" DF_RT_WATCHED_SUFFIX);
  const df_rt_kernel_info *k = df_rt_module_kernel_info(f.mod);
  assert_int_equal(k->image_kind, DF_RT_IMAGE_PTX);
  assert_int_equal(k->max_threads_per_block, 1024);
  assert_int_equal(k->static_shared_bytes, 1024);
  assert_int_equal(k->num_regs, 40);
  assert_null(df_rt_module_kernel_info(NULL));
  assert_string_equal(df_rt_module_info_log(NULL), "");
  df_rt_module_unload(f.mod);
  assert_int_equal(fake_count("cuModuleUnload"), 1);
  /* Another kernel name. */
  df_rt_module_options named = {"my_kernel", NULL, 0};
  fx_ok(df_rt_module_load(f.dev, FX_PTX, n, &named, &f.mod));
  assert_string_equal((const char *)fake_nth("cuModuleGetFunction", 2)->data, "my_kernel");
  assert_string_equal((const char *)fake_nth("cuModuleGetFunction", 3)->data,
                      "my_kernel_watched");
  fx_close(&f);
}

static void jit_failure_returns_the_log(void **state) {
  (void)state;
  fake_reset();
  fake.module_load_result = CUDA_ERROR_INVALID_PTX;
  fake.jit_error_log = "ptxas application ptx input, line 7; error   : Unknown symbol 'x'";
  rt_fixture f;
  open_rt(&f);
  char log[256] = "stale";
  df_rt_module_options o = {NULL, log, sizeof log};
  df_rt_module *m = (df_rt_module *)(uintptr_t)1;
  fx_fails(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), &o, &m), DF_EFORMAT,
           "module: PTX image: cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (218): a PTX "
           "JIT compilation failed; JIT log: ptxas application ptx input, line 7; error   : "
           "Unknown symbol 'x'");
  assert_null(m);
  assert_string_equal(log, fake.jit_error_log);
  assert_int_equal(fake_count("cuModuleUnload"), 0);
  /* A long log: the status carries its start, the buffer all of it. */
  static char big[4000];
  memset(big, 'e', sizeof big - 1);
  big[0] = 'S';
  fake.jit_error_log = big;
  static char full[8192];
  df_rt_module_options o2 = {NULL, full, sizeof full};
  df_status s = df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), &o2, &m);
  fx_fails(s, DF_EFORMAT, "JIT log: Seee");
  assert_non_null(strstr(s.message, "..."));
  assert_int_equal(strlen(full), sizeof big - 1);
  /* Without a log the status ends at the driver error. */
  fake.jit_error_log = NULL;
  s = df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &m);
  fx_fails(s, DF_EFORMAT, "CUDA_ERROR_INVALID_PTX");
  assert_null(strstr(s.message, "JIT log"));
  fx_close(&f);
}

static void missing_kernel_and_bad_inputs(void **state) {
  (void)state;
  fake_reset();
  fake.get_function_result = CUDA_ERROR_NOT_FOUND;
  rt_fixture f;
  open_rt(&f);
  df_rt_module *m;
  fx_fails(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &m), DF_EINVAL,
           "module: kernel 'df_persistent_kernel' not found in the PTX image: "
           "cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND (500)");
  assert_int_equal(fake_count("cuModuleUnload"), 1);
  fake.get_function_result = CUDA_SUCCESS;
  /* The watched entry is optional, but another failure looking it up is
     an error. */
  fake.fail_name = "cuModuleGetFunction";
  fake.fail_nth = fake_count("cuModuleGetFunction") + 2;
  fake.fail_result = CUDA_ERROR_INVALID_HANDLE;
  fx_fails(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &m), DF_EINVAL,
           "module: watched kernel entry: cuModuleGetFunction failed");
  fake.fail_nth = 0;
  fake.fail_name = "cuFuncGetAttribute";
  fake.fail_result = CUDA_ERROR_INVALID_VALUE;
  fx_fails(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &m), DF_EINVAL,
           "module: kernel 'df_persistent_kernel': cuFuncGetAttribute failed");
  fake.fail_name = NULL;
  fx_fails(df_rt_module_load(f.dev, "junk", 4, NULL, &m), DF_EFORMAT, "neither a cubin");
  char long_name[80];
  memset(long_name, 'k', sizeof long_name - 1);
  long_name[79] = 0;
  df_rt_module_options o = {long_name, NULL, 0};
  fx_fails(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), &o, &m), DF_EINVAL,
           "must have 1 to 63 bytes");
  df_rt_module_options empty = {"", NULL, 0};
  fx_fails(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), &empty, &m), DF_EINVAL,
           "must have 1 to 63 bytes");
  fx_fails(df_rt_module_load(NULL, FX_PTX, 1, NULL, &m), DF_EINVAL, "NULL argument");
  /* A cubin is passed as is. */
  const uint8_t elf[] = {0x7f, 'E', 'L', 'F', 0};
  fx_ok(df_rt_module_load(f.dev, elf, sizeof elf, NULL, &f.mod));
  assert_int_equal(df_rt_module_kernel_info(f.mod)->image_kind, DF_RT_IMAGE_CUBIN);
  fx_close(&f);
}

static void loads_files(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  open_rt(&f);
  char path[] = "/tmp/dfrt_module_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *out = fdopen(fd, "wb");
  fputs(FX_PTX, out);
  fclose(out);
  fx_ok(df_rt_module_load_file(f.dev, path, NULL, &f.mod));
  assert_int_equal(fake_nth("cuModuleLoadDataEx", 0)->bytes, strlen(FX_PTX) + 1);
  df_rt_module *m;
  fx_fails(df_rt_module_load_file(f.dev, "/nonexistent/k.ptx", NULL, &m), DF_EIO,
           "module: cannot open '/nonexistent/k.ptx'");
  out = fopen(path, "wb");
  fputs("not a kernel", out);
  fclose(out);
  char want[128];
  snprintf(want, sizeof want, "'%s': module: image of 12 bytes", path);
  fx_fails(df_rt_module_load_file(f.dev, path, NULL, &m), DF_EFORMAT, want);
  fx_fails(df_rt_module_load_file(f.dev, NULL, NULL, &m), DF_EINVAL, "module: NULL path");
  fx_fails(df_rt_module_load_file(NULL, path, NULL, &m), DF_EINVAL, "NULL argument");
  remove(path);
  fx_close(&f);
}

/* df_handler_workspace_bytes: read from the image when it has the symbol;
   an image without it (older PTX) or a driver table without
   cuModuleGetGlobal has none; a symbol of the wrong size, an
   out-of-range value or a failing query is an error. */
static void reads_the_workspace(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  open_rt(&f);
  fx_ok(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &f.mod));
  assert_int_equal(df_rt_module_kernel_info(f.mod)->workspace_bytes, 0);
  assert_string_equal((const char *)fake_nth("cuModuleGetGlobal", 0)->data,
                      "df_handler_workspace_bytes");
  df_rt_module_unload(f.mod);
  f.mod = NULL;
  fake.module_has_workspace = true;
  fake.module_workspace = 196608;
  fx_ok(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &f.mod));
  assert_int_equal(df_rt_module_kernel_info(f.mod)->workspace_bytes, 196608);
  df_rt_module_unload(f.mod);
  f.mod = NULL;
  df_rt_module *m;
  fake.module_global_bytes = 8;
  fx_fails(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &m), DF_EFORMAT,
           "module: df_handler_workspace_bytes is 8 bytes; the generated module defines a "
           "uint32_t");
  fake.module_global_bytes = 4;
  fake.module_workspace = DF_WORKSPACE_MAX_BYTES + 1;
  fx_fails(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &m), DF_EFORMAT,
           "module: df_handler_workspace_bytes is 232449, over the largest workspace a handler "
           "may declare (232448 bytes)");
  fake.module_workspace = 1024;
  fake.fail_name = "cuModuleGetGlobal";
  fake.fail_result = CUDA_ERROR_INVALID_HANDLE;
  fx_fails(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &m), DF_EINVAL,
           "module: df_handler_workspace_bytes: cuModuleGetGlobal failed");
  fake.fail_name = "cuMemcpyDtoHAsync";
  fake.fail_result = CUDA_ERROR_ILLEGAL_ADDRESS;
  fx_fails(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &m), DF_EIO,
           "module: df_handler_workspace_bytes: cuMemcpyDtoHAsync failed");
  fake.fail_name = NULL;
  fx_close(&f);
  /* A driver without cuModuleGetGlobal: no workspace, the load works. */
  memset(&f, 0, sizeof f);
  df_cuda_driver d = fake_driver();
  d.cuModuleGetGlobal = NULL;
  df_rt_options o;
  memset(&o, 0, sizeof o);
  o.driver = &d;
  fx_ok(df_rt_create(&o, &f.rt));
  fx_ok(df_rt_device_open(f.rt, 0, &f.dev));
  fx_ok(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &f.mod));
  assert_int_equal(df_rt_module_kernel_info(f.mod)->workspace_bytes, 0);
  fx_close(&f);
}

/* df_rt_kernel_abi: 1 when the image has no such symbol, else its value;
   a value this libdfrt does not know (0, or above DF_RT_KERNEL_ABI) or
   a symbol of the wrong size is an error naming it. */
static void reads_the_kernel_abi(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  open_rt(&f);
  fx_ok(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &f.mod));
  assert_int_equal(df_rt_module_kernel_info(f.mod)->kernel_abi, 1);
  df_rt_module_unload(f.mod);
  f.mod = NULL;
  fake.module_kernel_abi = DF_RT_KERNEL_ABI;
  fx_ok(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &f.mod));
  assert_int_equal(df_rt_module_kernel_info(f.mod)->kernel_abi, DF_RT_KERNEL_ABI);
  df_rt_module_unload(f.mod);
  f.mod = NULL;
  df_rt_module *m;
  fake.module_kernel_abi = DF_RT_KERNEL_ABI + 1;
  fx_fails(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &m), DF_EFORMAT,
           "module: df_rt_kernel_abi is 3; this libdfrt launches kernel ABIs 1 to 2");
  fake.module_kernel_abi = 2;
  fake.module_global_bytes = 8;
  fx_fails(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &m), DF_EFORMAT,
           "module: df_rt_kernel_abi is 8 bytes; the generated module defines a uint32_t");
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(classify_images),
      cmocka_unit_test(loads_ptx_with_logs),
      cmocka_unit_test(jit_failure_returns_the_log),
      cmocka_unit_test(reads_the_kernel_abi),
      cmocka_unit_test(missing_kernel_and_bad_inputs),
      cmocka_unit_test(loads_files),
      cmocka_unit_test(reads_the_workspace),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
