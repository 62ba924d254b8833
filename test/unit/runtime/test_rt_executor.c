/* The executor and TMA tests of ../shared/seeds/test_dataflow_runtime.py,
   ported to libdfrt on the fake driver: unchanged tensor args skip the
   copy, pointer-only TMA rebuilds are refused with state untouched, TMA
   runtime validation is fail-closed in the reference's order, and the
   flag reset is needed exactly for plans with HBM comms. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "rt_fixture.h"

static df_rt_executable *make_exe(rt_fixture *f, const df_rt_executable_options *o) {
  df_rt_plan *p = fx_seed_plan(f->rt);
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f->mod, p, o, &e));
  df_rt_plan_destroy(p);
  return e;
}

/* test_persistent_executable_skips_unchanged_tensor_args_h2d */
static void skips_unchanged_tensor_args_h2d(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_executable *e = make_exe(&f, NULL);
  fake_clear_calls();
  fx_ok(df_rt_executable_update_tensor_args(e, NULL, "abc", 3));
  fx_ok(df_rt_executable_update_tensor_args(e, NULL, "abc", 3));
  fx_ok(df_rt_executable_update_tensor_args(e, NULL, "xyz", 3));
  /* allocations == [("ptr0", 3)] */
  assert_int_equal(fake_count("cuMemAlloc"), 1);
  const fake_call *alloc = fake_nth("cuMemAlloc", 0);
  assert_int_equal(alloc->bytes, 3);
  /* copies == [("ptr0", b"abc"), ("ptr0", b"xyz")] */
  assert_int_equal(fake_count("cuMemcpyHtoDAsync"), 2);
  const fake_call *c0 = fake_nth("cuMemcpyHtoDAsync", 0), *c1 = fake_nth("cuMemcpyHtoDAsync", 1);
  assert_int_equal(c0->a[1], alloc->a[1]);
  assert_int_equal(c1->a[1], alloc->a[1]);
  assert_int_equal(c0->bytes, 3);
  assert_memory_equal(c0->data, "abc", 3);
  assert_int_equal(c1->bytes, 3);
  assert_memory_equal(c1->data, "xyz", 3);
  assert_int_equal(fake_count("cuMemFree"), 0);
  df_rt_executable_destroy(e);
  fx_close(&f);
}

/* Growing: a longer byte string frees the buffer and allocates `len`; a
   shorter one reuses it (but copies, since the bytes differ). */
static void tensor_args_grow_only(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_executable *e = make_exe(&f, NULL);
  fake_clear_calls();
  fx_ok(df_rt_executable_update_tensor_args(e, NULL, "ab", 2));
  fx_ok(df_rt_executable_update_tensor_args(e, NULL, "abcdef", 6));
  fx_ok(df_rt_executable_update_tensor_args(e, NULL, "abc", 3));
  fx_ok(df_rt_executable_update_tensor_args(e, NULL, "", 0));
  assert_int_equal(fake_count("cuMemAlloc"), 2);
  assert_int_equal(fake_nth("cuMemAlloc", 0)->bytes, 2);
  assert_int_equal(fake_nth("cuMemAlloc", 1)->bytes, 6);
  assert_int_equal(fake_count("cuMemFree"), 1);
  /* ab, abcdef, abc copied; the empty update copies nothing. */
  assert_int_equal(fake_count("cuMemcpyHtoDAsync"), 3);
  const uint8_t *bytes;
  size_t len;
  df_rt_executable_tensor_args(e, &bytes, &len);
  assert_int_equal(len, 0);
  fx_fails(df_rt_executable_update_tensor_args(e, NULL, NULL, 4), DF_EINVAL, "NULL argument");
  df_rt_executable_destroy(e);
  fx_close(&f);
}

static df_rt_tma_spec seed_spec(void) {
  df_rt_tma_spec s;
  memset(&s, 0, sizeof s);
  strcpy(s.name, "A_desc");
  strcpy(s.tensor_name, "A");
  s.dtype = 6;
  s.rank = 2;
  s.global_dim[0] = 16;
  s.global_dim[1] = 4;
  s.global_stride[0] = 2;
  s.global_stride[1] = 32;
  s.box_dim[0] = 16;
  s.box_dim[1] = 4;
  s.element_strides[0] = s.element_strides[1] = 1;
  s.l2_promotion = 2;
  return s;
}

static df_rt_tensor seed_valid(void) {
  df_rt_tensor t;
  memset(&t, 0, sizeof t);
  t.source = "test";
  t.has_shape = t.has_strides = true;
  t.ndim = 2;
  t.shape[0] = 4;
  t.shape[1] = 16;
  t.strides_bytes[0] = 32;
  t.strides_bytes[1] = 2;
  t.device_type = DF_RT_DEVICE_CUDA;
  t.has_device_index = true;
  t.device_index = 0;
  t.dtype_code = DF_TENSOR_DTYPE_FLOAT;
  t.dtype_bits = 16;
  return t;
}

static void record_bytes(uint64_t ptr, uint8_t out[32]) {
  df_abi_tensor_arg r;
  memset(&r, 0, sizeof r);
  r.data_ptr = ptr;
  memcpy(out, &r, 32);
}

/* test_persistent_executable_rejects_pointer_only_tma_descriptor_rebuild.
   The prototype's pointers 123/456 are not 16-byte aligned; here the
   real validation runs, so the pointers are 0x1230/0x4560. */
static void rejects_pointer_only_tma_rebuild(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_tma_spec spec = seed_spec();
  const char *names[1] = {"A"};
  df_rt_executable_options o;
  memset(&o, 0, sizeof o);
  o.tma_count = 1;
  o.tma_specs = &spec;
  o.tensor_name_count = 1;
  o.tensor_names = names;
  df_rt_executable *e = make_exe(&f, &o);
  df_rt_tensor meta = seed_valid();
  fx_ok(df_rt_executable_set_tensor_metadata(e, &meta, 1));
  fake_clear_calls();
  uint8_t first[32], second[32];
  record_bytes(0x1230, first);
  record_bytes(0x4560, second);
  fx_ok(df_rt_executable_update_tensor_args(e, NULL, first, 32));
  fx_ok(df_rt_executable_update_tensor_args(e, NULL, first, 32));
  fx_fails(df_rt_executable_update_tensor_args(e, NULL, second, 32), DF_EINVAL,
           "pointer-only tensor_args_bytes");
  /* rebuilds == [(("desc",), {"A": 123})] */
  assert_int_equal(df_rt_executable_tma_builds(e), 1);
  assert_int_equal(fake.encode_count, 1);
  assert_int_equal(fake.encodes[0].address, 0x1230);
  /* tensor_args_bytes == first; _tensor_args_uploaded_bytes == first */
  const uint8_t *bytes;
  size_t len;
  df_rt_executable_tensor_args(e, &bytes, &len);
  assert_int_equal(len, 32);
  assert_memory_equal(bytes, first, 32);
  assert_int_equal(fake_count("cuMemcpyHtoDAsync"), 1);
  assert_memory_equal(fake_nth("cuMemcpyHtoDAsync", 0)->data, first, 32);
  fx_ok(df_rt_executable_update_tensor_args(e, NULL, first, 32)); /* still uploaded: no copy */
  assert_int_equal(fake_count("cuMemcpyHtoDAsync"), 1);
  assert_int_equal(fake_count("cuMemAlloc"), 1);
  df_rt_executable_destroy(e);
  fx_close(&f);
}

static void expect_invalid(const df_rt_tma_spec *spec, bool has_ptr, uint64_t ptr,
                           const df_rt_tensor *meta, const char *fragment) {
  df_rt_tma_binding b = {"A", has_ptr, ptr, meta};
  fx_fails(df_rt_tma_validate(spec, 1, &b, 1, 0), DF_EINVAL, fragment);
}

/* test_tma_descriptor_runtime_tensor_validation_is_fail_closed, plus the
   rest of REFERENCE 7.3's rules, in order. */
static void tma_validation_is_fail_closed(void **state) {
  (void)state;
  df_rt_tma_spec spec = seed_spec();
  df_rt_tensor valid = seed_valid();
  df_rt_tma_binding ok = {"A", true, 0x1000, &valid};
  fx_ok(df_rt_tma_validate(&spec, 1, &ok, 1, 0));
  fx_ok(df_rt_tma_validate(&spec, 1, &ok, 1, -1)); /* no expected ordinal */

  /* the seed's cases */
  expect_invalid(&spec, true, 0x1001, &valid, "16-byte aligned");
  df_rt_tensor t = valid;
  t.shape[0] = 8;
  t.shape[1] = 8;
  expect_invalid(&spec, true, 0x1000, &t, "shape mismatch");
  t = valid;
  t.strides_bytes[0] = 64;
  expect_invalid(&spec, true, 0x1000, &t, "byte-stride mismatch");
  t = valid;
  t.dtype_code = DF_TENSOR_DTYPE_BFLOAT;
  expect_invalid(&spec, true, 0x1000, &t, "dtype mismatch");
  t = valid;
  t.device_index = 1;
  expect_invalid(&spec, true, 0x1000, &t, "device mismatch");
  df_rt_tensor raw = df_rt_tensor_raw(0x1000);
  expect_invalid(&spec, true, 0x1000, &raw, "raw pointer");

  /* every rule of 7.3, in its order */
  df_rt_tma_binding other = {"B", true, 0x1000, &valid};
  fx_fails(df_rt_tma_validate(&spec, 1, &other, 1, 0), DF_EINVAL,
           "references missing tensor argument");
  expect_invalid(&spec, false, 0x1000, &valid, "references missing tensor argument");
  expect_invalid(&spec, true, 0, &valid, "null tensor pointer");
  expect_invalid(&spec, true, 0x1008, &valid, "16-byte aligned tensor pointer, got 0x1008");
  expect_invalid(&spec, true, 0x1000, NULL, "has no runtime shape, stride, and device metadata");
  t = valid;
  t.has_strides = false;
  expect_invalid(&spec, true, 0x1000, &t, "cannot validate tensor 'A' from test");
  t = valid;
  t.dtype_bits = 32;
  expect_invalid(&spec, true, 0x1000, &t, "runtime dtype mismatch");
  t = valid;
  t.ndim = 3;
  expect_invalid(&spec, true, 0x1000, &t, "expects rank 2");
  t = valid;
  t.shape[1] = 17;
  expect_invalid(&spec, true, 0x1000, &t, "expected (4, 16), got (4, 17)");
  t = valid;
  t.strides_bytes[1] = 4;
  expect_invalid(&spec, true, 0x1000, &t, "expected (32, 2), got (32, 4)");
  t = valid;
  t.device_type = DF_RT_DEVICE_CPU;
  expect_invalid(&spec, true, 0x1000, &t, "requires explicit CUDA device metadata");
  t = valid;
  t.has_device_index = false;
  expect_invalid(&spec, true, 0x1000, &t, "requires explicit CUDA device metadata");
  t = valid;
  t.device_index = 3;
  expect_invalid(&spec, true, 0x1000, &t, "device mismatch: expected cuda:0, got cuda:3");

  /* Order: when several rules fail, the earliest is reported. */
  expect_invalid(&spec, true, 0x1001, NULL, "16-byte aligned");
  t = valid;
  t.dtype_code = DF_TENSOR_DTYPE_INT;
  t.ndim = 1;
  expect_invalid(&spec, true, 0x1000, &t, "dtype mismatch");
  t = valid;
  t.ndim = 1;
  t.device_index = 2;
  expect_invalid(&spec, true, 0x1000, &t, "expects rank");
  t = valid;
  t.shape[0] = 5;
  t.strides_bytes[0] = 7;
  expect_invalid(&spec, true, 0x1000, &t, "shape mismatch");
  t = valid;
  t.strides_bytes[0] = 7;
  t.device_type = DF_RT_DEVICE_UNKNOWN;
  expect_invalid(&spec, true, 0x1000, &t, "byte-stride mismatch");

  /* Map dtypes: 0 takes any 8-bit int/uint/float; 1 any 16-bit int/uint;
     dtypes beyond 9 (e.g. tf32) are not checked. */
  df_rt_tma_spec s8 = spec;
  s8.dtype = 0;
  df_rt_tensor u8 = valid;
  u8.dtype_code = DF_TENSOR_DTYPE_UINT;
  u8.dtype_bits = 8;
  u8.strides_bytes[0] = 32;
  df_rt_tma_binding b8 = {"A", true, 0x1000, &u8};
  fx_ok(df_rt_tma_validate(&s8, 1, &b8, 1, 0));
  u8.dtype_code = DF_TENSOR_DTYPE_BOOL;
  fx_fails(df_rt_tma_validate(&s8, 1, &b8, 1, 0), DF_EINVAL, "dtype mismatch");
  df_rt_tma_spec s16 = spec;
  s16.dtype = 1;
  t = valid;
  t.dtype_code = DF_TENSOR_DTYPE_INT;
  df_rt_tma_binding b16 = {"A", true, 0x1000, &t};
  fx_ok(df_rt_tma_validate(&s16, 1, &b16, 1, 0));
  t.dtype_code = DF_TENSOR_DTYPE_FLOAT;
  fx_fails(df_rt_tma_validate(&s16, 1, &b16, 1, 0), DF_EINVAL, "dtype mismatch");
  df_rt_tma_spec s11 = spec;
  s11.dtype = 11;
  fx_ok(df_rt_tma_validate(&s11, 1, &b16, 1, 0));
  /* Several specs: the first failing spec is reported. */
  df_rt_tma_spec two[2] = {spec, spec};
  strcpy(two[1].name, "B_desc");
  strcpy(two[1].tensor_name, "B");
  df_rt_tma_binding bs[2] = {{"A", true, 0x1000, &valid}, {"B", true, 0, &valid}};
  fx_fails(df_rt_tma_validate(two, 2, bs, 2, 0), DF_EINVAL, "'B_desc' has a null tensor pointer");
  fx_fails(df_rt_tma_validate(NULL, 1, bs, 2, 0), DF_EINVAL, "NULL");
}

/* test_executor_detects_when_launch_package_needs_hbm_flags */
static void detects_when_plan_needs_hbm_flags(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *cluster = fx_cluster_plan(f.rt);
  df_rt_plan *hbm = fx_seed_plan(f.rt);
  assert_false(df_rt_plan_packed(cluster)->launch.needs_flag_reset);
  assert_true(df_rt_plan_packed(hbm)->launch.needs_flag_reset);
  df_rt_executable *ec, *eh;
  fx_ok(df_rt_executable_create(f.mod, cluster, NULL, &ec));
  fx_ok(df_rt_executable_create(f.mod, hbm, NULL, &eh));
  df_rt_launch_info ic, ih;
  fx_ok(df_rt_executable_launch_info(ec, &ic));
  fx_ok(df_rt_executable_launch_info(eh, &ih));
  assert_false(ic.needs_flag_reset);
  assert_true(ih.needs_flag_reset);
  df_rt_executable_destroy(ec);
  df_rt_executable_destroy(eh);
  df_rt_plan_destroy(cluster);
  df_rt_plan_destroy(hbm);
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(skips_unchanged_tensor_args_h2d),
      cmocka_unit_test(tensor_args_grow_only),
      cmocka_unit_test(rejects_pointer_only_tma_rebuild),
      cmocka_unit_test(tma_validation_is_fail_closed),
      cmocka_unit_test(detects_when_plan_needs_hbm_flags),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
