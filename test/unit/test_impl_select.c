/* Implementations by capability region (df/impl.h): one table row per
   region and rule, resolved without compiling kernels; the replacement
   spec syntax; declarations on programs; built-in library checks and
   descriptors; selection over scheduled plans and through plan blobs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "df/blob.h"
#include "df/impl.h"
#include "seed_plans.h"

static void expect_error(df_status s, const char *fragment) {
  if (s.code == DF_OK || !strstr(s.message, fragment)) {
    print_error("expected an error containing \"%s\", got code %d \"%s\"\n", fragment, s.code,
                s.message);
    fail();
  }
}

static void expect_ok(df_status s) {
  if (s.code != DF_OK) {
    print_error("unexpected error: %s\n", s.message);
    fail();
  }
}

/* An implementation from a spec; origin as given. */
static df_impl impl(const char *spec, df_impl_origin origin) {
  df_impl im;
  df_status s = df_impl_parse(spec, &im);
  if (s.code != DF_OK) {
    print_error("bad spec %s: %s\n", spec, s.message);
    fail();
  }
  im.origin = origin;
  return im;
}

#define P DF_IMPL_PROGRAM
#define B DF_IMPL_BUILTIN
#define R DF_IMPL_REPLACEMENT

typedef struct row {
  const char *what;
  struct {
    const char *spec;
    df_impl_origin origin;
  } impls[4];
  /* the call */
  uint32_t length, tiles, arity; /* arity 0: no arity (not a reduce) */
  df_arch arch;
  df_dtype dtype;
  /* expected: the chosen symbol, or an error fragment */
  const char *chosen;
  const char *error;
} row;

static const row rows[] = {
    {"tile-count hit",
     {{"attn=attn_t4:tiles=4", P}, {"attn=attn_t8:tiles=8", P}, {"attn=attn_any:general", P}},
     512, 4, 0, DF_ARCH_SM90A, DF_DTYPE_FLOAT16, "attn_t4", NULL},
    {"exact-length hit",
     {{"attn=attn_l300:length=300", P}, {"attn=attn_t3:tiles=2", P}, {"attn=attn_any:general", P}},
     300, 3, 0, DF_ARCH_SM90A, DF_DTYPE_FLOAT16, "attn_l300", NULL},
    {"generic fallback",
     {{"attn=attn_t4:tiles=4", P}, {"attn=attn_any:general", P}},
     700, 6, 0, DF_ARCH_SM90A, DF_DTYPE_FLOAT16, "attn_any", NULL},
    {"sm_80 call lands on the sm_80-capable implementation",
     {{"attn=attn_tma:tiles=4,arch=90", P}, {"attn=attn_80:tiles=4,arch=80", P}},
     512, 4, 0, DF_ARCH_SM80, DF_DTYPE_FLOAT16, "attn_80", NULL},
    {"sm_90a call: both apply, ambiguous",
     {{"attn=attn_tma:tiles=4,arch=90a", P}, {"attn=attn_80:tiles=4,arch=80", P}},
     512, 4, 0, DF_ARCH_SM90A, DF_DTYPE_FLOAT16, NULL, "dispatch is ambiguous"},
    {"architecture missing everywhere",
     {{"attn=attn_tma:tiles=4,arch=90", P}, {"attn=attn_any:general,arch=90a", P}},
     512, 4, 0, DF_ARCH_SM80, DF_DTYPE_FLOAT16, NULL, "no implementation serves this call"},
    {"ambiguous specialised pair",
     {{"attn=attn_t4:tiles=4", P}, {"attn=attn_l512:length=512", P}, {"attn=attn_any:general", P}},
     512, 4, 0, DF_ARCH_SM90A, DF_DTYPE_FLOAT16, NULL, "dispatch is ambiguous"},
    {"general yields to specialised",
     {{"attn=attn_any:general", P}, {"attn=attn_t2:tiles=2", P}},
     256, 2, 0, DF_ARCH_SM90A, DF_DTYPE_FLOAT16, "attn_t2", NULL},
    {"declining specialised -> general",
     {{"attn=attn_t2:tiles=2", P}, {"attn=attn_any:general", P}},
     384, 3, 0, DF_ARCH_SM90A, DF_DTYPE_FLOAT16, "attn_any", NULL},
    {"two generals are ambiguous",
     {{"attn=attn_a:general", P}, {"attn=attn_b:general", B}},
     384, 3, 0, DF_ARCH_SM90A, DF_DTYPE_FLOAT16, NULL, "dispatch is ambiguous"},
    {"dtype narrows",
     {{"attn=attn_h:tiles=4,dtype=float16", P}, {"attn=attn_b:tiles=4,dtype=bfloat16", P}},
     512, 4, 0, DF_ARCH_SM90A, DF_DTYPE_BFLOAT16, "attn_b", NULL},
    {"arity classes",
     {{"comb=c1:arity=passthrough", B}, {"comb=c2:arity=binary", B}, {"comb=cn:general", B}},
     0, 0, 2, DF_ARCH_SM90A, DF_DTYPE_FLOAT16, "c2", NULL},
    {"generic arity falls to the general one",
     {{"comb=c1:arity=passthrough", B}, {"comb=c2:arity=binary", B}, {"comb=cn:general", B}},
     0, 0, 5, DF_ARCH_SM90A, DF_DTYPE_FLOAT16, "cn", NULL},
    {"refused replacement is not stood in for",
     {{"attn=mine_t4:tiles=4", R}, {"attn=attn_any:general", P}, {"attn=lib_any:general", B}},
     700, 6, 0, DF_ARCH_SM90A, DF_DTYPE_FLOAT16, NULL, "the kernel supplied for operator 'attn'"},
    {"replacement shadows the program's implementations",
     {{"attn=mine_t4:tiles=4", R}, {"attn=attn_t4:tiles=4", P}},
     512, 4, 0, DF_ARCH_SM90A, DF_DTYPE_FLOAT16, "mine_t4", NULL},
    {"both replacements: general serves where specialised declines",
     {{"attn=mine_t4:tiles=4", R}, {"attn=mine_any:general", R}, {"attn=attn_t8:tiles=8", P}},
     1024, 8, 0, DF_ARCH_SM90A, DF_DTYPE_FLOAT16, "mine_any", NULL},
    {"both replacements: specialised wins where it applies",
     {{"attn=mine_t4:tiles=4", R}, {"attn=mine_any:general", R}},
     512, 4, 0, DF_ARCH_SM90A, DF_DTYPE_FLOAT16, "mine_t4", NULL},
    {"replacement needing a newer architecture declines",
     {{"attn=mine_any:general,arch=90a", R}, {"attn=attn_any:general", P}},
     512, 4, 0, DF_ARCH_SM90, DF_DTYPE_FLOAT16, NULL, "the kernel supplied for operator 'attn'"},
    {"implementations of other operators do not count",
     {{"other=o_any:general", P}, {"attn=attn_t4:tiles=4", P}},
     512, 4, 0, DF_ARCH_SM90A, DF_DTYPE_FLOAT16, "attn_t4", NULL},
};

static void test_table(void **state) {
  (void)state;
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    const row *w = &rows[r];
    df_impl impls[4];
    uint32_t n = 0;
    for (; n < 4 && w->impls[n].spec; n++)
      impls[n] = impl(w->impls[n].spec, w->impls[n].origin);
    df_call_facts f;
    memset(&f, 0, sizeof f);
    f.op = w->arity ? "comb" : "attn";
    f.instr = (uint32_t)r;
    f.has_range = w->arity == 0;
    f.length = w->length;
    f.tiles = w->tiles;
    f.has_arity = w->arity != 0;
    f.arity = w->arity;
    f.dtype = w->dtype;
    f.arch = w->arch;
    uint32_t chosen = 12345;
    df_status s = df_impl_select(impls, n, &f, &chosen);
    if (w->chosen) {
      if (s.code != DF_OK || chosen >= n || strcmp(impls[chosen].name, w->chosen) != 0) {
        print_error("row '%s': expected %s, got %s (%s)\n", w->what, w->chosen,
                    s.code == DF_OK && chosen < n ? impls[chosen].name : "nothing", s.message);
        fail();
      }
    } else {
      if (s.code == DF_OK || !strstr(s.message, w->error)) {
        print_error("row '%s': expected error \"%s\", got \"%s\"\n", w->what, w->error,
                    s.code == DF_OK ? impls[chosen].name : s.message);
        fail();
      }
      assert_int_equal(chosen, DF_SENTINEL);
    }
  }
}

/* Error messages name both implementations and the call's facts. */
static void test_messages(void **state) {
  (void)state;
  df_impl v[2] = {impl("attn=attn_t4:tiles=4", P), impl("attn=attn_l512:length=512", P)};
  df_call_facts f = {.op = "attn", .instr = 7, .has_range = true, .length = 512, .tiles = 4,
                     .dtype = DF_DTYPE_FLOAT16, .arch = DF_ARCH_SM90};
  uint32_t c;
  df_status s = df_impl_select(v, 2, &f, &c);
  expect_error(s, "dispatch is ambiguous for operator 'attn' (instruction 7: range length 512, "
                  "4 tiles, dtype float16, arch sm_90)");
  expect_error(s, "'attn_t4' [tiles=4] (program), 'attn_l512' [length=512] (program)");
  f.length = 100;
  f.tiles = 1;
  f.arch = DF_ARCH_SM80;
  v[1] = impl("attn=attn_g:general,arch=90", P);
  s = df_impl_select(v, 2, &f, &c);
  expect_error(s, "no implementation serves this call to operator 'attn' (instruction 7: range "
                  "length 100, 1 tiles, dtype float16, arch sm_80)");
  expect_error(s, "'attn_g' [general,arch=sm_90] (program, needs a newer architecture)");
  /* no implementations of the operator: the default binding stays */
  f.op = "other";
  expect_ok(df_impl_select(v, 2, &f, &c));
  assert_int_equal(c, DF_SENTINEL);
}

static void test_parse(void **state) {
  (void)state;
  df_impl im;
  expect_ok(df_impl_parse("combine=my_comb:arity=binary,dtype=bf16,arch=sm_80", &im));
  assert_string_equal(im.op, "combine");
  assert_string_equal(im.name, "my_comb");
  assert_int_equal(im.origin, DF_IMPL_REPLACEMENT);
  assert_true(im.has_arity);
  assert_int_equal(im.arity, DF_ARITY_BINARY);
  assert_int_equal(im.dtype, DF_DTYPE_BFLOAT16);
  assert_int_equal(im.min_arch, DF_ARCH_SM80);
  char buf[128];
  df_impl_region(&im, buf, sizeof buf);
  assert_string_equal(buf, "arity=binary,dtype=bfloat16,arch=sm_80");
  expect_ok(df_impl_parse("a=b", &im));
  df_impl_region(&im, buf, sizeof buf);
  assert_string_equal(buf, "any");
  static const struct {
    const char *spec, *error;
  } bad[] = {
      {"a", "must read OPERATOR=SYMBOL"},
      {"=b", "must read OPERATOR=SYMBOL"},
      {"a=", "must read OPERATOR=SYMBOL"},
      {"a=b:tiles=0", "tiles must be a positive integer, got '0'"},
      {"a=b:tiles=-3", "tiles must be a positive integer"},
      {"a=b:length=x", "length must be a positive integer"},
      {"a=b:tiles=2,length=4", "give one of tiles= and length=, once"},
      {"a=b:arity=ternary", "arity must be passthrough, binary or generic, got 'ternary'"},
      {"a=b:dtype=float7", "float7"},
      {"a=b:arch=75", "unknown architecture '75'"},
      {"a=b:general=1", "'general' takes no value"},
      {"a=b:tiles", "'tiles' needs a value"},
      {"a=b:speed=9", "unknown key 'speed'"},
      {"a=b:general,tiles=4", "is general but narrows the iter range"},
      {"a=b:general,arity=binary", "is general but narrows the arity"},
      {"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=b",
       "names are at most 63 bytes"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    expect_error(df_impl_parse(bad[i].spec, &im), bad[i].error);
  df_arch a;
  expect_ok(df_arch_parse("90a", &a));
  assert_int_equal(a, DF_ARCH_SM90A);
  expect_ok(df_arch_parse("sm_90", &a));
  assert_int_equal(a, DF_ARCH_SM90);
  expect_error(df_arch_parse("sm_100", &a), "expected one of sm_80, sm_90, sm_90a");
}

static void test_program_rules(void **state) {
  (void)state;
  df_program *p = seed_attention_program();
  df_impl im = impl("split_kv=split_kv_t1:tiles=1", P);
  expect_ok(df_program_add_impl(p, &im));
  expect_error(df_program_add_impl(p, &im), "implementation 'split_kv_t1' is declared twice");
  df_impl bad = impl("nosuch=x:general", P);
  expect_error(df_program_add_impl(p, &bad), "implements 'nosuch', which is not an operator");
  bad = impl("split_kv=combine:general", P);
  expect_error(df_program_add_impl(p, &bad), "has the name of another operator");
  bad = im;
  bad.iter_value = 0;
  snprintf(bad.name, sizeof bad.name, "zero");
  expect_error(df_program_add_impl(p, &bad), "tiles must be a positive integer");
  /* built-in handlers: name, kind and the intermediate's fields */
  expect_error(df_program_set_library(p, "combine", "softmax"),
               "names built-in handler 'softmax', which df does not have (built-in handlers: "
               "lse_combine, copy)");
  expect_error(df_program_set_library(p, "combine", "copy"),
               "operator 'combine' is a reduce but built-in handler 'copy' implements a finalize");
  expect_error(df_program_set_library(p, "nope", "copy"), "has no operator 'nope'");
  expect_ok(df_program_set_library(p, "combine", "lse_combine"));
  expect_ok(df_program_set_library(p, "finalize", "copy"));
  assert_true(df_program_has_impls(p));
  uint32_t w[8], n;
  expect_ok(df_library_descriptor("lse_combine", p, "combine", w, &n));
  assert_int_equal(n, 5);
  /* AttnInter {lse f32; o f16[2,8]}: lse at 0, one head, o at 4, f16, 16 per head */
  assert_int_equal(w[0], 0);
  assert_int_equal(w[1], 1);
  assert_int_equal(w[2], 4);
  assert_int_equal(w[3], 0);
  assert_int_equal(w[4], 16);
  expect_ok(df_library_descriptor("copy", p, "finalize", w, &n));
  assert_int_equal(n, 4);
  assert_int_equal(w[0], 4);
  assert_int_equal(w[2], 16);
  assert_int_equal(w[3], 3); /* O is the fourth tensor argument (Q, K, V, O) */
  /* a type without the fields */
  df_field f = {.name = "x", .dtype = DF_DTYPE_FLOAT32};
  df_itype t = {.name = "Bare", .field_count = 1, .fields = &f};
  expect_error(df_library_check("lse_combine", "c", DF_OPK_REDUCE, &t),
               "needs intermediate 'Bare' to have fields 'lse' (float32) and 'o'");
  expect_error(df_library_check("copy", "c", DF_OPK_FINALIZE, &t),
               "needs intermediate 'Bare' to have a field 'o'");
  df_field g[2] = {{.name = "lse", .dtype = DF_DTYPE_FLOAT32, .rank = 1, .shape = {3}},
                   {.name = "o", .dtype = DF_DTYPE_FLOAT16, .rank = 1, .shape = {16}}};
  df_itype u = {.name = "Odd", .field_count = 2, .fields = g};
  expect_error(df_library_check("lse_combine", "c", DF_OPK_REDUCE, &u),
               "has 16 elements, not a multiple of the 3 heads");
  g[1].dtype = DF_DTYPE_INT32;
  expect_error(df_library_check("lse_combine", "c", DF_OPK_REDUCE, &u),
               "field 'Odd.o' must be float16, bfloat16 or float32, not int32");
  g[1].dtype = DF_DTYPE_FLOAT16;
  g[0].dtype = DF_DTYPE_FLOAT16;
  expect_error(df_library_check("lse_combine", "c", DF_OPK_REDUCE, &u),
               "field 'Odd.lse' must be a float32 scalar or vector");
  df_program_destroy(p);
}

/* The chosen implementation of every handler instruction of a plan. */
static const char *chosen(const df_plan *plan, uint32_t i) {
  const df_instr *in = &plan->instrs[i];
  return in->impl ? plan->impl_names[in->impl - 1].name : "";
}

static void test_plan_selection(void **state) {
  (void)state;
  df_program *p = seed_attention_program();
  df_impl im = impl("split_kv=split_kv_t1:tiles=1", P);
  expect_ok(df_program_add_impl(p, &im));
  im = impl("split_kv=split_kv_any:general", P);
  expect_ok(df_program_add_impl(p, &im));
  expect_ok(df_program_set_library(p, "combine", "lse_combine"));
  df_schedule_options o = df_schedule_options_default();
  o.topology = (df_topology){4, 2};
  o.block_size = 128;
  uint32_t kv[2] = {384, 200};
  o.range_count = 1;
  o.ranges[0] = (df_range_lengths){"kv", 2, kv, NULL};
  df_plan *plan;
  expect_ok(df_schedule(p, &o, &plan));
  uint32_t iters = 0, reduces = 0, finals = 0;
  for (uint32_t i = 0; i < plan->instr_count; i++) {
    const df_instr *in = &plan->instrs[i];
    if (in->op == DF_INSTR_ITER) {
      /* every partial covers one block of 128 (or the 72 tail) */
      assert_string_equal(chosen(plan, i), "split_kv_t1");
      iters++;
    } else if (in->op == DF_INSTR_REDUCE) {
      assert_string_equal(chosen(plan, i), in->input_count == 3 ? "df_lib_lse_combine_generic"
                                                                : "df_lib_lse_combine_binary");
      reduces++;
    } else if (in->op == DF_INSTR_FINALIZE) {
      assert_string_equal(chosen(plan, i), ""); /* finalize keeps its default binding */
      finals++;
    }
  }
  assert_int_equal(iters, 5);
  assert_int_equal(reduces, 2);
  assert_int_equal(finals, 2);
  /* the handler table lists exactly the implementations in use */
  df_packed *k;
  expect_ok(df_pack(plan, NULL, NULL, &k));
  uint32_t with_impl = 0;
  for (uint32_t h = 0; h < k->handler_count; h++) {
    const char *n = k->handlers[h].impl;
    with_impl += n[0] != 0;
    assert_true(!n[0] || !strcmp(n, "split_kv_t1") || !strcmp(n, "df_lib_lse_combine_generic") ||
                !strcmp(n, "df_lib_lse_combine_binary"));
  }
  assert_int_equal(with_impl, 3);
  /* the blob carries the implementations and the choices: a re-plan from
     it selects the same way */
  uint8_t *bytes;
  size_t len;
  expect_ok(df_blob_write(k, p, NULL, &bytes, &len));
  df_packed *k2;
  df_program *p2;
  expect_ok(df_blob_read(bytes, len, NULL, &k2, &p2));
  assert_int_equal(k2->handler_count, k->handler_count);
  for (uint32_t h = 0; h < k->handler_count; h++)
    assert_string_equal(k2->handlers[h].impl, k->handlers[h].impl);
  assert_int_equal(p2->impl_count, 2);
  assert_string_equal(p2->ops[1].library, "lse_combine");
  df_plan *plan2;
  expect_ok(df_schedule(p2, &o, &plan2));
  assert_int_equal(plan2->instr_count, plan->instr_count);
  for (uint32_t i = 0; i < plan->instr_count; i++)
    assert_string_equal(chosen(plan2, i), chosen(plan, i));
  /* the fingerprint covers the choice: the same schedule with other
     implementations hashes differently */
  char fp1[65], fp2[65];
  expect_ok(df_plan_fingerprint(plan, fp1));
  df_impl general_only = impl("split_kv=split_kv_any:general", R);
  df_select_options g = {.replacements = &general_only, .replacement_count = 1};
  df_plan *plan_g;
  expect_ok(df_plan_clone(plan, &plan_g));
  expect_ok(df_plan_select_impls(plan_g, p, &g));
  expect_ok(df_plan_fingerprint(plan_g, fp2));
  assert_string_not_equal(fp1, fp2);
  df_plan_destroy(plan_g);
  /* a caller replacement shadows the program's implementations; an sm_80
     target with an sm_90 replacement is refused, naming the operator */
  df_impl rep = impl("split_kv=mine:general,arch=90", R);
  df_select_options so = {.arch = DF_ARCH_SM80, .replacements = &rep, .replacement_count = 1};
  expect_error(df_plan_select_impls(plan, p, &so), "the kernel supplied for operator 'split_kv'");
  so.arch = DF_ARCH_SM90;
  expect_ok(df_plan_select_impls(plan, p, &so));
  for (uint32_t i = 0; i < plan->instr_count; i++)
    if (plan->instrs[i].op == DF_INSTR_ITER)
      assert_string_equal(chosen(plan, i), "mine");
  rep = impl("nosuch=mine:general", R);
  expect_error(df_plan_select_impls(plan, p, &so), "replaces nothing: program 'attention' has "
                                                   "no such operator");
  /* deferring leaves the default bindings */
  o.defer_select = true;
  df_plan *plan3;
  expect_ok(df_schedule(p, &o, &plan3));
  for (uint32_t i = 0; i < plan3->instr_count; i++)
    assert_int_equal(plan3->instrs[i].impl, 0);
  df_plan_destroy(plan3);
  df_plan_destroy(plan2);
  df_program_destroy(p2);
  df_packed_destroy(k2);
  free(bytes);
  df_packed_destroy(k);
  df_plan_destroy(plan);
  df_program_destroy(p);
}

/* The implementations trailer is written only for programs that have
   implementations, so other blobs keep their bytes. */
static void test_blob_trailer(void **state) {
  (void)state;
  df_program *p = seed_attention_program();
  df_impl im = impl("split_kv=split_kv_t1:tiles=1", P);
  expect_ok(df_program_add_impl(p, &im));
  df_plan *plan = seed_make_plan();
  df_packed *k;
  expect_ok(df_pack(plan, NULL, NULL, &k));
  uint8_t *with, *without;
  size_t wlen, olen;
  expect_ok(df_blob_write(k, p, NULL, &with, &wlen));
  p->impl_count = 0;
  expect_ok(df_blob_write(k, p, NULL, &without, &olen));
  /* magic, arch, count, one implementation (2 + 8 words), library count,
     and the two new strings */
  assert_true(wlen > olen + 4 * 14);
  df_program_destroy(p);
  free(without);
  free(with);
  df_packed_destroy(k);
  df_plan_destroy(plan);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_table),        cmocka_unit_test(test_messages),
      cmocka_unit_test(test_parse),        cmocka_unit_test(test_program_rules),
      cmocka_unit_test(test_plan_selection), cmocka_unit_test(test_blob_trailer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
