/* Tensor arguments and TMA descriptors on an executable: records from raw
   pointers and descriptions, binding by the program's argument order,
   structural spec checks, tiled encoding with the driver's arguments,
   descriptors passed by value after the u32 parameters, rebuilds through
   full bindings (validated first, state untouched on failure). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "df/blob.h"
#include "rt_fixture.h"
#include "seed_plans.h"

static void packs_records(void **state) {
  (void)state;
  df_abi_tensor_arg r;
  df_rt_tensor raw = df_rt_tensor_raw(0xabc0);
  fx_ok(df_rt_tensor_pack(&raw, &r));
  assert_int_equal(r.data_ptr, 0xabc0);
  assert_int_equal(r.ndim, 0);
  assert_int_equal(r.dtype_code, 0);
  assert_int_equal(r.dtype_bits, 0);
  assert_int_equal(r.flags, DF_TENSOR_ARG_RAW_POINTER);
  assert_int_equal(r.reserved, 0);
  assert_string_equal(raw.source, "raw_pointer");
  df_rt_tensor miss = df_rt_tensor_missing();
  fx_ok(df_rt_tensor_pack(&miss, &r));
  df_abi_tensor_arg zero;
  memset(&zero, 0, sizeof zero);
  assert_memory_equal(&r, &zero, sizeof r);
  const int64_t shape[2] = {4, 16};
  df_rt_tensor t;
  fx_ok(df_rt_tensor_contiguous(0x1000, DF_DTYPE_FLOAT16, 2, shape, 0, &t));
  assert_int_equal(t.strides_bytes[0], 32);
  assert_int_equal(t.strides_bytes[1], 2);
  assert_int_equal(t.device_type, DF_RT_DEVICE_CUDA);
  assert_true(t.has_device_index);
  fx_ok(df_rt_tensor_pack(&t, &r));
  assert_int_equal(r.data_ptr, 0x1000);
  assert_int_equal(r.ndim, 2);
  assert_int_equal(r.dtype_code, DF_TENSOR_DTYPE_FLOAT);
  assert_int_equal(r.dtype_bits, 16);
  assert_int_equal(r.flags, DF_TENSOR_ARG_ARRAY_INTERFACE);
  df_rt_tensor b;
  fx_ok(df_rt_tensor_contiguous(0x2000, DF_DTYPE_BFLOAT16, 0, NULL, -1, &b));
  assert_false(b.has_device_index);
  fx_ok(df_rt_tensor_pack(&b, &r));
  assert_int_equal(r.dtype_code, DF_TENSOR_DTYPE_BFLOAT);
  /* bad inputs */
  const int64_t neg[2] = {4, -1};
  fx_fails(df_rt_tensor_contiguous(0, DF_DTYPE_FLOAT16, 2, neg, 0, &t), DF_EINVAL,
           "dimension 1 has negative extent -1");
  fx_fails(df_rt_tensor_contiguous(0, DF_DTYPE_INVALID, 2, shape, 0, &t), DF_EINVAL,
           "is not a valid df dtype");
  fx_fails(df_rt_tensor_contiguous(0, DF_DTYPE_FLOAT16, 9, shape, 0, &t), DF_EINVAL,
           "rank 9 exceeds the maximum of 8");
  fx_fails(df_rt_tensor_contiguous(0, DF_DTYPE_FLOAT16, 2, NULL, 0, &t), DF_EINVAL, "NULL");
  fx_ok(df_rt_tensor_contiguous(0x1000, DF_DTYPE_FLOAT16, 2, shape, 0, &t));
  df_rt_tensor bad = t;
  bad.ndim = 9;
  fx_fails(df_rt_tensor_pack(&bad, &r), DF_EINVAL, "rank 9 exceeds");
  bad = t;
  bad.dtype_code = 6;
  fx_fails(df_rt_tensor_pack(&bad, &r), DF_EINVAL, "dtype code 6 is not a tensor dtype code");
  bad = t;
  bad.dtype_bits = 0;
  fx_fails(df_rt_tensor_pack(&bad, &r), DF_EINVAL, "dtype code 3 needs non-zero dtype_bits");
  bad = t;
  bad.shape[0] = -2;
  fx_fails(df_rt_tensor_pack(&bad, &r), DF_EINVAL, "dimension 0 has negative extent -2");
  fx_fails(df_rt_tensor_pack(NULL, &r), DF_EINVAL, "NULL argument");
}

static df_rt_tma_spec spec_for(const char *name, const char *tensor) {
  df_rt_tma_spec s;
  memset(&s, 0, sizeof s);
  strcpy(s.name, name);
  strcpy(s.tensor_name, tensor);
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
  s.swizzle = 1;
  return s;
}

static void spec_edit(int which, df_rt_tma_spec *s) {
  switch (which) {
  case 0: s->name[0] = 0; break;
  case 1: s->tensor_name[0] = 0; break;
  case 2: s->is_im2col = true; break;
  case 3: s->rank = 0; break;
  case 4: s->rank = 6; break;
  case 5: s->dtype = 16; break;
  case 6: s->interleave = 3; break;
  case 7: s->swizzle = 7; break;
  case 8: s->l2_promotion = 4; break;
  case 9: s->oob_fill = 2; break;
  case 10: s->global_dim[1] = 0; break;
  case 11: s->global_stride[0] = 0; break;
  case 12: s->box_dim[0] = 0; break;
  case 13: s->box_dim[1] = 257; break;
  case 14: s->element_strides[0] = 0; break;
  case 15: s->element_strides[1] = 9; break;
  }
}

static void spec_checks(void **state) {
  (void)state;
  df_rt_tma_spec good = spec_for("A_desc", "A");
  fx_ok(df_rt_tma_spec_check(&good));
  static const struct {
    df_code code;
    const char *fragment;
  } cases[] = {
      {DF_EINVAL, "spec has no name"},
      {DF_EINVAL, "'A_desc' names no tensor"},
      {DF_EUNSUPPORTED, "im2col descriptors are not supported"},
      {DF_EINVAL, "rank 0 is not in 1..5"},
      {DF_EINVAL, "rank 6 is not in 1..5"},
      {DF_EINVAL, "dtype 16 is not in 0..15"},
      {DF_EINVAL, "interleave 3 is not in 0..2"},
      {DF_EINVAL, "swizzle 7 is not in 0..6"},
      {DF_EINVAL, "l2_promotion 4 is not in 0..3"},
      {DF_EINVAL, "oob_fill 2 is not in 0..1"},
      {DF_EINVAL, "global_dim[1] is 0"},
      {DF_EINVAL, "global_stride[0] is 0"},
      {DF_EINVAL, "box_dim[0] 0 is not in 1..256"},
      {DF_EINVAL, "box_dim[1] 257 is not in 1..256"},
      {DF_EINVAL, "element_strides[0] 0 is not in 1..8"},
      {DF_EINVAL, "element_strides[1] 9 is not in 1..8"},
  };
  for (int i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
    df_rt_tma_spec s = good;
    spec_edit(i, &s);
    fx_fails(df_rt_tma_spec_check(&s), cases[i].code, cases[i].fragment);
  }
  fx_fails(df_rt_tma_spec_check(NULL), DF_EINVAL, "NULL spec");
}

/* A plan whose program names its tensors Q, K, V, O (REFERENCE 7.1). */
static df_rt_plan *plan_with_program(df_rt *rt) {
  df_plan *plan = seed_make_plan();
  df_pack_options po;
  memset(&po, 0, sizeof po);
  df_packed *k;
  fx_ok(df_pack(plan, &po, NULL, &k));
  df_plan_destroy(plan);
  df_rt_plan *p;
  fx_ok(df_rt_plan_from_packed(rt, k, seed_attention_program(), 128, &p));
  return p;
}

static void binds_by_program_order(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = plan_with_program(f.rt);
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f.mod, p, NULL, &e));
  const int64_t shape[1] = {64};
  df_rt_tensor t[4];
  t[0] = df_rt_tensor_raw(0x1000);
  fx_ok(df_rt_tensor_contiguous(0x2000, DF_DTYPE_FLOAT16, 1, shape, 0, &t[1]));
  t[2] = df_rt_tensor_missing();
  t[3] = df_rt_tensor_raw(0x4000);
  fx_fails(df_rt_executable_bind_tensors(e, NULL, t, 3), DF_EINVAL,
           "3 tensors bound, the plan's program takes 4");
  fake_clear_calls();
  fx_ok(df_rt_executable_bind_tensors(e, NULL, t, 4));
  assert_int_equal(fake_count("cuMemcpyHtoDAsync"), 1);
  const fake_call *c = fake_nth("cuMemcpyHtoDAsync", 0);
  assert_int_equal(c->bytes, 128);
  df_abi_tensor_arg rec[4];
  memcpy(rec, c->data, sizeof rec);
  assert_int_equal(rec[0].data_ptr, 0x1000);
  assert_int_equal(rec[0].flags, DF_TENSOR_ARG_RAW_POINTER);
  assert_int_equal(rec[1].data_ptr, 0x2000);
  assert_int_equal(rec[1].ndim, 1);
  assert_int_equal(rec[1].dtype_bits, 16);
  assert_int_equal(rec[2].data_ptr, 0);
  assert_int_equal(rec[2].flags, 0);
  assert_int_equal(rec[3].data_ptr, 0x4000);
  /* The launch passes the same buffer and copies nothing again. */
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake_count("cuMemcpyHtoDAsync"), 1);
  assert_memory_equal(fake_host(fake.last_ptrs[9]), rec, sizeof rec);
  /* A bad record names its tensor. */
  t[1].dtype_code = 9;
  fx_fails(df_rt_executable_bind_tensors(e, NULL, t, 4), DF_EINVAL,
           "executable: tensor 1 'K': tensor: dtype code 9");
  fx_fails(df_rt_executable_bind_tensors(e, NULL, NULL, 4), DF_EINVAL, "NULL argument");
  df_rt_tensor deep = df_rt_tensor_raw(0);
  deep.ndim = 12;
  deep.has_shape = true;
  fx_fails(df_rt_executable_set_tensor_metadata(e, &deep, 1), DF_EINVAL,
           "tensor 0 has rank 12, over the maximum of 8");
  fx_fails(df_rt_executable_set_tensor_metadata(e, NULL, 1), DF_EINVAL, "NULL argument");
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

static df_rt_executable *tma_exe(rt_fixture *f, df_rt_plan *p, const df_rt_tma_spec *specs,
                                 uint32_t n) {
  df_rt_executable_options o;
  memset(&o, 0, sizeof o);
  o.tma_count = n;
  o.tma_specs = specs;
  df_rt_executable *e;
  fx_ok(df_rt_executable_create(f->mod, p, &o, &e));
  return e;
}

static void fp16_tensor(uint64_t ptr, df_rt_tensor *t) {
  const int64_t shape[2] = {4, 16};
  fx_ok(df_rt_tensor_contiguous(ptr, DF_DTYPE_FLOAT16, 2, shape, 0, t));
}

/* Binds Q, K (fp16 at 0x2000), V, O (fp16 at 0x4000) into t and e. */
static void bind_k_and_o(df_rt_executable *e, df_rt_tensor t[4]) {
  t[0] = df_rt_tensor_raw(0x1000);
  fp16_tensor(0x2000, &t[1]);
  t[2] = df_rt_tensor_raw(0x3000);
  fp16_tensor(0x4000, &t[3]);
  fx_ok(df_rt_executable_bind_tensors(e, NULL, t, 4));
}

/* A kernel of ABI 2 takes its descriptors after parameters 21-22 (the
   fake reads them from 23 then): the same descriptors arrive. */
static void descriptors_follow_the_flag_parameters(void **state) {
  (void)state;
  fake_reset();
  fake.module_kernel_abi = 2;
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = plan_with_program(f.rt);
  df_rt_tma_spec specs[2] = {spec_for("K_desc", "K"), spec_for("O_desc", "O")};
  df_rt_executable *e = tma_exe(&f, p, specs, 2);
  df_rt_launch_info info;
  fx_ok(df_rt_executable_launch_info(e, &info));
  assert_int_equal(info.param_count, 25); /* 23 + two descriptors */
  df_rt_tensor t[4];
  bind_k_and_o(e, t);
  fake.launch_tma_count = 2;
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.last_maps[0].opaque[1], 0x2000);
  assert_int_equal(fake.last_maps[1].opaque[1], 0x4000);
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

static void encodes_and_passes_descriptors(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = plan_with_program(f.rt);
  df_rt_tma_spec specs[2] = {spec_for("K_desc", "K"), spec_for("O_desc", "O")};
  specs[1].oob_fill = 1;
  df_rt_executable *e = tma_exe(&f, p, specs, 2);
  df_rt_launch_info info;
  fx_ok(df_rt_executable_launch_info(e, &info));
  assert_int_equal(info.param_count, 23); /* ABI 1: 21 + two descriptors */
  /* Nothing bound yet: the launch says why there are no descriptors. */
  fx_fails(df_rt_executable_launch(e, NULL), DF_EINVAL,
           "launch: TMA descriptor 'K_desc' has a null tensor pointer for tensor 'K'");
  df_rt_tensor t[4];
  bind_k_and_o(e, t);
  assert_int_equal(fake.encode_count, 2);
  const fake_encode *k = &fake.encodes[0];
  assert_int_equal(k->dtype, 6);
  assert_int_equal(k->rank, 2);
  assert_int_equal(k->address, 0x2000);
  assert_int_equal(k->dims[0], 16);
  assert_int_equal(k->dims[1], 4);
  assert_int_equal(k->strides[0], 32); /* global_stride without its first entry */
  assert_int_equal(k->box[0], 16);
  assert_int_equal(k->box[1], 4);
  assert_int_equal(k->elem[0], 1);
  assert_int_equal(k->swizzle, 1);
  assert_int_equal(k->l2, 2);
  assert_int_equal(k->oob, 0);
  assert_int_equal(fake.encodes[1].address, 0x4000);
  assert_int_equal(fake.encodes[1].oob, 1);
  fake.launch_tma_count = 2;
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.last_maps[0].opaque[1], 0x2000);
  assert_int_equal(fake.last_maps[1].opaque[1], 0x4000);
  assert_int_equal(fake.last_maps[0].opaque[0], 0xDF7AA0000000ull | 1);
  assert_int_equal(df_rt_executable_tma_builds(e), 1);
  /* Binding again with moved tensors rebuilds (not pointer-only). */
  fp16_tensor(0x6000, &t[1]);
  fx_ok(df_rt_executable_bind_tensors(e, NULL, t, 4));
  assert_int_equal(df_rt_executable_tma_builds(e), 2);
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.last_maps[0].opaque[1], 0x6000);
  /* A binding that fails validation changes nothing. */
  const uint8_t *before;
  size_t before_len;
  df_rt_executable_tensor_args(e, &before, &before_len);
  uint8_t saved[128];
  memcpy(saved, before, sizeof saved);
  df_rt_tensor moved[4];
  memcpy(moved, t, sizeof moved);
  moved[3] = df_rt_tensor_raw(0x8000);
  fx_fails(df_rt_executable_bind_tensors(e, NULL, moved, 4), DF_EINVAL,
           "TMA descriptor 'O_desc' cannot validate tensor 'O' from raw_pointer");
  assert_int_equal(df_rt_executable_tma_builds(e), 2);
  const uint8_t *after;
  size_t after_len;
  df_rt_executable_tensor_args(e, &after, &after_len);
  assert_int_equal(after_len, 128);
  assert_memory_equal(after, saved, sizeof saved);
  fx_ok(df_rt_executable_launch(e, NULL));
  assert_int_equal(fake.last_maps[1].opaque[1], 0x4000);
  /* A pointer-only update that moves a TMA tensor is refused... */
  df_abi_tensor_arg rec[4];
  memcpy(rec, saved, sizeof rec);
  rec[1].data_ptr = 0x7000;
  fx_fails(df_rt_executable_update_tensor_args(e, NULL, rec, sizeof rec), DF_EINVAL,
           "tensor 'K' of TMA descriptor 'K_desc' moved from 0x6000 to 0x7000");
  /* ... one that moves only other tensors is fine. */
  memcpy(rec, saved, sizeof rec);
  rec[0].data_ptr = 0x9000;
  fx_ok(df_rt_executable_update_tensor_args(e, NULL, rec, sizeof rec));
  /* Re-binding the same tensors rebuilds and records the pointers even
     when the bytes need no copy, so a later pointer-only move is still
     refused. */
  fx_ok(df_rt_executable_bind_tensors(e, NULL, t, 4));
  int copies = fake_count("cuMemcpyHtoDAsync");
  fx_ok(df_rt_executable_bind_tensors(e, NULL, t, 4));
  assert_int_equal(fake_count("cuMemcpyHtoDAsync"), copies);
  assert_int_equal(df_rt_executable_tma_builds(e), 4);
  memcpy(rec, saved, sizeof rec);
  rec[1].data_ptr = 0x7000;
  fx_fails(df_rt_executable_update_tensor_args(e, NULL, rec, sizeof rec), DF_EINVAL,
           "pointer-only tensor_args_bytes");
  /* The driver's encoder failing. */
  fake.fail_name = "cuTensorMapEncodeTiled";
  fake.fail_result = CUDA_ERROR_INVALID_VALUE;
  fx_fails(df_rt_executable_bind_tensors(e, NULL, t, 4), DF_EINVAL,
           "TMA descriptor 'K_desc': cuTensorMapEncodeTiled failed: CUDA_ERROR_INVALID_VALUE");
  fake.fail_name = NULL;
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

static void tma_option_errors(void **state) {
  (void)state;
  fake_reset();
  rt_fixture f;
  fx_open(&f);
  df_rt_plan *p = plan_with_program(f.rt);
  df_rt_plan *bare = fx_seed_plan(f.rt);
  df_rt_tma_spec specs[2] = {spec_for("A_desc", "Q"), spec_for("A_desc", "K")};
  df_rt_executable_options o;
  memset(&o, 0, sizeof o);
  df_rt_executable *e;
  o.tma_count = 2;
  o.tma_specs = specs;
  fx_fails(df_rt_executable_create(f.mod, p, &o, &e), DF_EINVAL,
           "TMA descriptor 'A_desc' is given twice");
  specs[1] = spec_for("B_desc", "X");
  fx_fails(df_rt_executable_create(f.mod, p, &o, &e), DF_EINVAL,
           "TMA descriptor 'B_desc' references missing tensor argument 'X' (4 tensor argument "
           "names known)");
  specs[1].rank = 0;
  fx_fails(df_rt_executable_create(f.mod, p, &o, &e), DF_EINVAL, "rank 0 is not in 1..5");
  /* A plan without a program has no tensor names unless given. */
  o.tma_count = 1;
  fx_fails(df_rt_executable_create(f.mod, bare, &o, &e), DF_EINVAL,
           "references missing tensor argument 'Q' (0 tensor argument names known)");
  const char *names[2] = {"Q", NULL};
  o.tensor_names = names;
  o.tensor_name_count = 2;
  fx_fails(df_rt_executable_create(f.mod, bare, &o, &e), DF_EINVAL,
           "tensor name 1 must have 1 to 63 bytes");
  o.tensor_name_count = 1;
  fx_ok(df_rt_executable_create(f.mod, bare, &o, &e));
  df_rt_executable_destroy(e);
  o.tensor_names = NULL;
  fx_fails(df_rt_executable_create(f.mod, bare, &o, &e), DF_EINVAL,
           "tensor_name_count 1 without tensor_names");
  o.tensor_name_count = 0;
  o.tma_specs = NULL;
  fx_fails(df_rt_executable_create(f.mod, p, &o, &e), DF_EINVAL, "tma_count 1 without tma_specs");
  df_rt_plan_destroy(p);
  df_rt_plan_destroy(bare);
  fx_close(&f);
}

static void encoder_missing_from_driver(void **state) {
  (void)state;
  fake_reset();
  df_cuda_driver d = fake_driver();
  d.cuTensorMapEncodeTiled = NULL;
  df_rt_options ro;
  memset(&ro, 0, sizeof ro);
  ro.driver = &d;
  rt_fixture f;
  memset(&f, 0, sizeof f);
  fx_ok(df_rt_create(&ro, &f.rt));
  fx_ok(df_rt_device_open(f.rt, 0, &f.dev));
  fx_ok(df_rt_module_load(f.dev, FX_PTX, strlen(FX_PTX), NULL, &f.mod));
  df_rt_plan *p = plan_with_program(f.rt);
  df_rt_tma_spec spec = spec_for("K_desc", "K");
  df_rt_executable *e = tma_exe(&f, p, &spec, 1);
  df_rt_tensor t[4];
  t[0] = df_rt_tensor_raw(0x1000);
  fp16_tensor(0x2000, &t[1]);
  t[2] = df_rt_tensor_raw(0x3000);
  t[3] = df_rt_tensor_raw(0x4000);
  fx_fails(df_rt_executable_bind_tensors(e, NULL, t, 4), DF_EUNSUPPORTED,
           "TMA descriptor 'K_desc': the CUDA driver has no cuTensorMapEncodeTiled");
  df_rt_executable_destroy(e);
  df_rt_plan_destroy(p);
  fx_close(&f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(packs_records),
      cmocka_unit_test(spec_checks),
      cmocka_unit_test(binds_by_program_order),
      cmocka_unit_test(encodes_and_passes_descriptors),
      cmocka_unit_test(descriptors_follow_the_flag_parameters),
      cmocka_unit_test(tma_option_errors),
      cmocka_unit_test(encoder_missing_from_driver),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
