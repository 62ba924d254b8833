/* Handler identities and variant keys: validation messages, defaults,
   ordering, option lists, selection and the canonical JSON round trip
   (REFERENCE 1.5, 1.6). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "df/plan.h"

static void expect_error(df_status s, const char *fragment) {
  if (s.code == DF_OK || !strstr(s.message, fragment)) {
    print_error("expected an error containing \"%s\", got code %d \"%s\"\n", fragment, s.code,
                s.message);
    fail();
  }
}

static df_variant iter_variant(uint32_t id, df_iter_mode mode, uint32_t value) {
  df_variant v;
  memset(&v, 0, sizeof v);
  v.base = (df_identity){id, DF_OPK_ITER};
  v.schema_version = DF_VARIANT_SCHEMA_VERSION;
  v.has_iter = true;
  v.iter_mode = mode;
  v.iter_value = value;
  return v;
}

static df_variant reduce_variant(uint32_t id, df_arity_class c) {
  df_variant v;
  memset(&v, 0, sizeof v);
  v.base = (df_identity){id, DF_OPK_REDUCE};
  v.schema_version = DF_VARIANT_SCHEMA_VERSION;
  v.has_arity = true;
  v.arity = c;
  return v;
}

/* ---- names and spec checks ----------------------------------------------------- */

static void iter_modes_parse_and_reject(void **state) {
  (void)state;
  df_iter_mode m;
  static const char *names[] = {"generic", "tile_count", "exact_length"};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(df_iter_mode_parse(names[i], &m).code, DF_OK);
    assert_int_equal(m, i);
    assert_string_equal(df_iter_mode_name(m), names[i]);
  }
  df_status s = df_iter_mode_parse("name_suffix", &m);
  assert_string_equal(s.message, "Unsupported Dataflow ITER specialization mode 'name_suffix'; "
                                 "expected one of: exact_length, generic, tile_count");
  expect_error(df_iter_mode_parse(NULL, &m), "Unsupported Dataflow ITER specialization mode");
  assert_string_equal(df_iter_mode_name((df_iter_mode)9), "invalid");
}

static void iter_spec_values(void **state) {
  (void)state;
  assert_int_equal(df_iter_spec_check(DF_ITER_GENERIC, false, 0).code, DF_OK);
  assert_int_equal(df_iter_spec_check(DF_ITER_TILE_COUNT, true, 4).code, DF_OK);
  assert_int_equal(df_iter_spec_check(DF_ITER_EXACT_LENGTH, true, 4096).code, DF_OK);
  expect_error(df_iter_spec_check(DF_ITER_GENERIC, true, 3),
               "generic Dataflow ITER specialization cannot have a value");
  df_status s = df_iter_spec_check(DF_ITER_TILE_COUNT, true, 0);
  assert_string_equal(s.message, "Dataflow ITER specialization 'tile_count' requires a "
                                 "positive integer value, got 0");
  expect_error(df_iter_spec_check(DF_ITER_EXACT_LENGTH, false, 0),
               "'exact_length' requires a positive integer value, got None");
  expect_error(df_iter_spec_check(DF_ITER_EXACT_LENGTH, true, -5),
               "requires a positive integer value, got -5");
  expect_error(df_iter_spec_check(DF_ITER_TILE_COUNT, true, (int64_t)1 << 40),
               "requires a positive integer value");
  expect_error(df_iter_spec_check((df_iter_mode)7, false, 0),
               "Unsupported Dataflow ITER specialization mode");
}

static void arity_classes(void **state) {
  (void)state;
  static const struct { int64_t arity; df_arity_class c; } cases[] = {
      {1, DF_ARITY_PASSTHROUGH}, {2, DF_ARITY_BINARY}, {3, DF_ARITY_GENERIC},
      {64, DF_ARITY_GENERIC}};
  for (size_t i = 0; i < 4; i++) {
    df_arity_class c;
    assert_int_equal(df_arity_class_for(true, cases[i].arity, &c).code, DF_OK);
    assert_int_equal(c, cases[i].c);
    df_variant v;
    assert_int_equal(df_variant_default((df_identity){0, DF_OPK_REDUCE}, cases[i].arity, &v).code,
                     DF_OK);
    assert_int_equal(v.arity, cases[i].c);
    assert_int_equal(v.base.operator_id, 0);
  }
  df_arity_class c;
  assert_int_equal(df_arity_class_for(false, 0, &c).code, DF_OK);
  assert_int_equal(c, DF_ARITY_GENERIC);
  expect_error(df_arity_class_for(true, 0, &c),
               "Dataflow reduce arity must be a positive integer or None");
  expect_error(df_arity_class_for(true, -3, &c),
               "Dataflow reduce arity must be a positive integer or None");
  assert_string_equal(df_arity_class_name(DF_ARITY_PASSTHROUGH), "passthrough");
  assert_string_equal(df_arity_class_name(DF_ARITY_BINARY), "binary");
  assert_string_equal(df_arity_class_name(DF_ARITY_GENERIC), "generic");
  assert_string_equal(df_arity_class_name((df_arity_class)5), "invalid");
}

/* ---- variant checks and defaults ------------------------------------------------ */

static void variant_kinds_must_match_identity(void **state) {
  (void)state;
  df_variant v = iter_variant(7, DF_ITER_GENERIC, 0);
  assert_int_equal(df_variant_check(&v).code, DF_OK);
  v.has_iter = false;
  assert_string_equal(df_variant_check(&v).message,
                      "Dataflow handler variant specialization kinds do not match base "
                      "identity: operator_kind=iter, expected=('iter_range',), got=()");
  df_variant r = reduce_variant(1, DF_ARITY_BINARY);
  r.has_iter = true;
  expect_error(df_variant_check(&r), "operator_kind=reduce, expected=('reduce_arity',), "
                                     "got=('iter_range', 'reduce_arity')");
  df_variant m;
  memset(&m, 0, sizeof m);
  m.base = (df_identity){2, DF_OPK_MAP};
  m.schema_version = 1;
  assert_int_equal(df_variant_check(&m).code, DF_OK);
  m.has_arity = true;
  expect_error(df_variant_check(&m), "operator_kind=map, expected=(), got=('reduce_arity',)");
  m.base.kind = DF_OPK_FINALIZE;
  expect_error(df_variant_check(&m), "operator_kind=finalize, expected=(), got=");
  m.has_arity = false;
  m.base.kind = DF_OPK_NONE;
  expect_error(df_variant_check(&m), "Unsupported Dataflow handler operator_kind 'none'");
}

static void variant_schema_and_spec_values(void **state) {
  (void)state;
  df_variant v = iter_variant(0, DF_ITER_TILE_COUNT, 4);
  v.schema_version = 2;
  expect_error(df_variant_check(&v), "schema_version must be 1, got 2");
  v = iter_variant(0, DF_ITER_TILE_COUNT, 0);
  expect_error(df_variant_check(&v), "'tile_count' requires a positive integer value, got 0");
  v = iter_variant(0, DF_ITER_GENERIC, 3);
  expect_error(df_variant_check(&v), "generic Dataflow ITER specialization cannot have a value");
  df_variant r = reduce_variant(0, (df_arity_class)9);
  expect_error(df_variant_check(&r), "Unsupported Dataflow reduce arity class");
}

static void variant_defaults(void **state) {
  (void)state;
  df_variant v;
  assert_int_equal(df_variant_default((df_identity){3, DF_OPK_ITER}, 0, &v).code, DF_OK);
  assert_true(v.has_iter && !v.has_arity);
  assert_int_equal(v.iter_mode, DF_ITER_GENERIC);
  assert_int_equal(v.schema_version, 1);
  assert_int_equal(df_variant_default((df_identity){1, DF_OPK_REDUCE}, 0, &v).code, DF_OK);
  assert_int_equal(v.arity, DF_ARITY_GENERIC); /* arity None */
  assert_int_equal(df_variant_default((df_identity){2, DF_OPK_FINALIZE}, 5, &v).code, DF_OK);
  assert_false(v.has_iter || v.has_arity);
  assert_int_equal(df_variant_default((df_identity){2, DF_OPK_MAP}, 0, &v).code, DF_OK);
  assert_false(v.has_iter || v.has_arity);
  expect_error(df_variant_default((df_identity){2, DF_OPK_NONE}, 0, &v),
               "Unsupported Dataflow handler operator_kind");
}

static void variant_order_and_equality(void **state) {
  (void)state;
  /* canonical keys: operator id, kind name, then spec (mode name, value) */
  df_variant a = iter_variant(0, DF_ITER_EXACT_LENGTH, 99);
  df_variant b = iter_variant(0, DF_ITER_GENERIC, 0);
  df_variant c = iter_variant(0, DF_ITER_TILE_COUNT, 1);
  df_variant d = iter_variant(0, DF_ITER_TILE_COUNT, 2);
  df_variant e = reduce_variant(0, DF_ARITY_BINARY); /* "iter" < "reduce" */
  df_variant f = reduce_variant(0, DF_ARITY_GENERIC);
  df_variant g = iter_variant(1, DF_ITER_EXACT_LENGTH, 1);
  const df_variant *seq[] = {&a, &b, &c, &d, &e, &f, &g};
  for (int i = 0; i < 7; i++)
    for (int j = 0; j < 7; j++) {
      int want = (i > j) - (i < j);
      assert_int_equal(df_variant_compare(seq[i], seq[j]), want);
      assert_int_equal(df_variant_equal(seq[i], seq[j]), i == j);
    }
  df_variant fin;
  memset(&fin, 0, sizeof fin);
  fin.base = (df_identity){0, DF_OPK_FINALIZE};
  fin.schema_version = 1;
  assert_true(df_variant_compare(&fin, &a) < 0); /* "finalize" < "iter" */
  df_variant v2 = a;
  v2.schema_version = 2;
  assert_true(df_variant_compare(&v2, &g) > 0);
}

static void fixed_extent_and_diag_names(void **state) {
  (void)state;
  df_variant t = iter_variant(0, DF_ITER_TILE_COUNT, 3);
  df_variant x = iter_variant(0, DF_ITER_EXACT_LENGTH, 47);
  df_variant g = iter_variant(0, DF_ITER_GENERIC, 0);
  df_variant r = reduce_variant(1, DF_ARITY_BINARY);
  assert_int_equal(df_variant_fixed_extent(&t, 16), 48);
  assert_int_equal(df_variant_fixed_extent(&x, 16), 47);
  assert_int_equal(df_variant_fixed_extent(&g, 16), 0);
  assert_int_equal(df_variant_fixed_extent(&r, 16), 0);
  char buf[96];
  assert_int_equal(df_variant_diag_name(&t, "split_kv", buf, sizeof buf),
                   (int)strlen("split_kv__dataflow_iter_tiles_3"));
  assert_string_equal(buf, "split_kv__dataflow_iter_tiles_3");
  df_variant_diag_name(&x, "split_kv", buf, sizeof buf);
  assert_string_equal(buf, "split_kv__dataflow_iter_len_47");
  df_variant_diag_name(&g, "split_kv", buf, sizeof buf);
  assert_string_equal(buf, "split_kv");
  df_variant_diag_name(&r, "combine", buf, sizeof buf);
  assert_string_equal(buf, "combine");
  char small[6];
  assert_int_equal(df_variant_diag_name(&t, "split_kv", small, sizeof small), 31);
  assert_string_equal(small, "split");
}

/* ---- option lists and selection -------------------------------------------------- */

static void bucket_lists(void **state) {
  (void)state;
  df_iter_buckets b;
  static const char *none[] = {NULL, "", "0", "false", "none", "off", " OFF ", "None"};
  for (size_t i = 0; i < sizeof none / sizeof *none; i++) {
    assert_int_equal(df_iter_buckets_parse(none[i], &b).code, DF_OK);
    assert_false(b.enabled);
    assert_int_equal(b.count, 0);
  }
  assert_int_equal(df_iter_buckets_parse("auto", &b).code, DF_OK);
  assert_true(b.enabled && b.generic);
  assert_int_equal(b.count, 3);
  assert_int_equal(b.values[0], 1);
  assert_int_equal(b.values[1], 2);
  assert_int_equal(b.values[2], 4);
  assert_int_equal(df_iter_buckets_parse("1,2,3,4,5,6,7,8,generic", &b).code, DF_OK);
  assert_int_equal(b.count, 8);
  for (uint32_t i = 0; i < 8; i++)
    assert_int_equal(b.values[i], i + 1);
  assert_int_equal(df_iter_buckets_parse(" 8, 1 ,1,4 ", &b).code, DF_OK);
  assert_true(b.enabled && b.generic); /* lists always include generic */
  assert_int_equal(b.count, 3);
  assert_int_equal(b.values[0], 1);
  assert_int_equal(b.values[2], 8);
  assert_int_equal(df_iter_buckets_parse("generic", &b).code, DF_OK);
  assert_true(b.enabled);
  assert_int_equal(b.count, 0);
  static const char *bad[] = {"0,1", "x", "1,,2", "-1", "1.5", "4294967296", "2,auto"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    expect_error(df_iter_buckets_parse(bad[i], &b),
                 "Dataflow iter_range_buckets entries must be positive integers or 'generic'");
    assert_false(b.enabled);
  }
  char many[512] = "";
  for (int i = 1; i <= 65; i++)
    snprintf(many + strlen(many), sizeof many - strlen(many), "%d,", i);
  many[strlen(many) - 1] = '\0';
  expect_error(df_iter_buckets_parse(many, &b), "more than 64 entries");
}

static void exact_length_lists(void **state) {
  (void)state;
  df_exact_lengths e;
  assert_int_equal(df_exact_lengths_parse("off", &e).code, DF_OK);
  assert_int_equal(e.count, 0);
  assert_int_equal(df_exact_lengths_parse(NULL, &e).code, DF_OK);
  assert_int_equal(e.count, 0);
  assert_int_equal(df_exact_lengths_parse("47, 17,23,17", &e).code, DF_OK);
  assert_int_equal(e.count, 3);
  assert_int_equal(e.values[0], 17);
  assert_int_equal(e.values[1], 23);
  assert_int_equal(e.values[2], 47);
  expect_error(df_exact_lengths_parse("17,generic", &e),
               "Dataflow iter_range_exact_lengths entries must be positive integers, got "
               "'generic'");
  expect_error(df_exact_lengths_parse("5,0", &e), "must be positive integers, got '0'");
}

static void selection_rules(void **state) {
  (void)state;
  df_iter_buckets b;
  df_exact_lengths e;
  assert_int_equal(df_iter_buckets_parse("1,2,3,4,5,6,7,8,generic", &b).code, DF_OK);
  assert_int_equal(df_exact_lengths_parse("17,23,47", &e).code, DF_OK);
  df_iter_mode m;
  uint32_t v;
  df_iter_select(48, &b, 16, &e, &m, &v);
  assert_int_equal(m, DF_ITER_TILE_COUNT);
  assert_int_equal(v, 3);
  df_iter_select(23, &b, 16, &e, &m, &v);
  assert_int_equal(m, DF_ITER_EXACT_LENGTH);
  assert_int_equal(v, 23);
  df_iter_select(24, &b, 16, &e, &m, &v); /* not a bucket multiple */
  assert_int_equal(m, DF_ITER_GENERIC);
  assert_int_equal(v, 0);
  df_iter_select(144, &b, 16, &e, &m, &v); /* 9 tiles: not listed */
  assert_int_equal(m, DF_ITER_GENERIC);
  df_iter_select(48, NULL, 16, NULL, &m, &v); /* no buckets */
  assert_int_equal(m, DF_ITER_GENERIC);
  df_iter_buckets off;
  assert_int_equal(df_iter_buckets_parse("none", &off).code, DF_OK);
  df_iter_select(17, &off, 16, &e, &m, &v); /* exact wins without buckets */
  assert_int_equal(m, DF_ITER_EXACT_LENGTH);
  df_iter_select(32, &b, 0, NULL, &m, &v); /* no bucket size */
  assert_int_equal(m, DF_ITER_GENERIC);
}

/* ---- JSON ------------------------------------------------------------------------- */

static void identity_json(void **state) {
  (void)state;
  df_identity id = {7, DF_OPK_ITER}, back;
  char buf[128];
  assert_int_equal(df_identity_to_json(&id, buf, sizeof buf), 40);
  assert_string_equal(buf, "{\"operator_id\":7,\"operator_kind\":\"iter\"}");
  assert_int_equal(df_identity_from_json(buf, &back).code, DF_OK);
  assert_int_equal(back.operator_id, 7);
  assert_int_equal(back.kind, DF_OPK_ITER);
  assert_int_equal(df_identity_from_json(" {\n\"operator_kind\" : \"reduce\",\t\"operator_id\""
                                         ":11 } ",
                                         &back)
                       .code,
                   DF_OK);
  assert_int_equal(back.operator_id, 11);
  assert_int_equal(back.kind, DF_OPK_REDUCE);
  char small[8];
  assert_int_equal(df_identity_to_json(&id, small, sizeof small), 40);
  assert_string_equal(small, "{\"opera");
}

static void identity_json_rejects(void **state) {
  (void)state;
  df_identity id = {99, DF_OPK_MAP};
  expect_error(df_identity_from_json("{\"operator_id\":7,\"operator_kind\":\"iter\","
                                     "\"specialization\":{\"mode\":\"generic\",\"value\":null}}",
                                     &id),
               "cannot contain specialization metadata; use DataflowHandlerVariantKey");
  assert_int_equal(id.operator_id, 99); /* untouched on failure */
  static const struct { const char *json, *msg; } bad[] = {
      {"{\"operator_id\":7,\"operator_kind\":\"iter\",\"x\":1}", "unknown key 'x'"},
      {"{\"operator_id\":7}", "missing key 'operator_kind'"},
      {"{\"operator_id\":true,\"operator_kind\":\"iter\"}", "operator_id must be an int, got bool"},
      {"{\"operator_id\":-1,\"operator_kind\":\"iter\"}", "must be a non-negative int, got -1"},
      {"{\"operator_id\":1.5,\"operator_kind\":\"iter\"}", "expected an integer"},
      {"{\"operator_id\":07,\"operator_kind\":\"iter\"}", "leading zero"},
      {"{\"operator_id\":7,\"operator_kind\":\"scan\"}",
       "Unsupported Dataflow handler operator_kind 'scan'"},
      {"{\"operator_id\":7,\"operator_kind\":3}", "operator_kind must be a string, got int"},
      {"{\"operator_id\":7,\"operator_id\":8,\"operator_kind\":\"iter\"}", "duplicate key"},
      {"{\"operator_id\":7,\"operator_kind\":\"iter\"} x", "trailing characters"},
      {"{\"operator_id\":7,\"operator_kind\":\"iter\"", "expected ',' or '}'"},
      {"{\"operator_id\":7,\"operator_kind\":\"it", "unterminated string"},
      {"[1,2]", "must be a JSON object, got list"},
      {"", "unexpected end of input"},
      {NULL, "unexpected end of input"},
      {"{\"operator_id\" 7}", "expected ':'"},
      {"{\"operator_id\":99999999999999999999,\"operator_kind\":\"iter\"}", "out of range"},
      {"{\"operator_id\":4294967296,\"operator_kind\":\"iter\"}", "non-negative int"},
      {"{\"a\\q\":1}", "bad escape"},
      {"[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]", "nesting deeper"},
      {"{\"operator_id\":nul}", "unexpected character"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    expect_error(df_identity_from_json(bad[i].json, &id), bad[i].msg);
  /* escapes decode */
  assert_int_equal(df_identity_from_json("{\"operator_id\":1,\"operator_kind\":\"m\\u0061p\"}",
                                         &id).code,
                   DF_OK);
  assert_int_equal(id.kind, DF_OPK_MAP);
  char big[1024] = "[";
  for (int i = 0; i < 70; i++)
    strcat(big, i ? ",1" : "1");
  strcat(big, "]");
  expect_error(df_identity_from_json(big, &id), "more than 64 values");
}

static void variant_json_canonical_forms(void **state) {
  (void)state;
  char buf[256];
  df_variant t = iter_variant(7, DF_ITER_TILE_COUNT, 4), back;
  df_variant_to_json(&t, buf, sizeof buf);
  assert_string_equal(buf, "{\"schema_version\":1,\"base_identity\":{\"operator_id\":7,"
                           "\"operator_kind\":\"iter\"},\"typed_specializations\":[{\"kind\":"
                           "\"iter_range\",\"value\":{\"mode\":\"tile_count\",\"value\":4}}]}");
  df_variant g = iter_variant(0, DF_ITER_GENERIC, 0);
  df_variant_to_json(&g, buf, sizeof buf);
  assert_non_null(strstr(buf, "{\"mode\":\"generic\",\"value\":null}"));
  df_variant r = reduce_variant(11, DF_ARITY_BINARY);
  int n = df_variant_to_json(&r, buf, sizeof buf);
  assert_string_equal(buf, "{\"schema_version\":1,\"base_identity\":{\"operator_id\":11,"
                           "\"operator_kind\":\"reduce\"},\"typed_specializations\":[{\"kind\":"
                           "\"reduce_arity\",\"value\":\"binary\"}]}");
  assert_int_equal(n, (int)strlen(buf));
  df_variant f;
  memset(&f, 0, sizeof f);
  f.base = (df_identity){2, DF_OPK_FINALIZE};
  f.schema_version = 1;
  df_variant_to_json(&f, buf, sizeof buf);
  assert_string_equal(buf, "{\"schema_version\":1,\"base_identity\":{\"operator_id\":2,"
                           "\"operator_kind\":\"finalize\"},\"typed_specializations\":[]}");
  assert_int_equal(df_variant_from_json(buf, &back).code, DF_OK);
  assert_true(df_variant_equal(&back, &f));
  /* whitespace and any key order */
  assert_int_equal(df_variant_from_json(
                       " { \"typed_specializations\" : [ { \"value\" : { \"value\" : 23 , "
                       "\"mode\" : \"exact_length\" } , \"kind\" : \"iter_range\" } ] ,\n"
                       "\"base_identity\":{\"operator_kind\":\"iter\",\"operator_id\":0},"
                       "\"schema_version\":1}",
                       &back).code,
                   DF_OK);
  df_variant want = iter_variant(0, DF_ITER_EXACT_LENGTH, 23);
  assert_true(df_variant_equal(&back, &want));
}

static void variant_json_rejects(void **state) {
  (void)state;
  df_variant v;
#define BASE "\"base_identity\":{\"operator_id\":7,\"operator_kind\":\"iter\"}"
#define RBASE "\"base_identity\":{\"operator_id\":1,\"operator_kind\":\"reduce\"}"
#define ITER(mode, val) "{\"kind\":\"iter_range\",\"value\":{\"mode\":" mode ",\"value\":" val "}}"
  static const struct { const char *json, *msg; } bad[] = {
      {"{\"schema_version\":1," BASE ",\"typed_specializations\":[]}",
       "specialization kinds do not match base identity: operator_kind=iter, "
       "expected=('iter_range',), got=()"},
      {"{\"schema_version\":2," BASE ",\"typed_specializations\":[" ITER("\"generic\"", "null")
       "]}",
       "schema_version must be 1, got 2"},
      {"{\"schema_version\":1," BASE ",\"typed_specializations\":[" ITER("\"name_suffix\"", "1")
       "]}",
       "Unsupported Dataflow ITER specialization mode 'name_suffix'; expected one of: "
       "exact_length, generic, tile_count"},
      {"{\"schema_version\":1," BASE ",\"typed_specializations\":[" ITER("\"tile_count\"", "0")
       "]}",
       "Dataflow ITER specialization 'tile_count' requires a positive integer value, got 0"},
      {"{\"schema_version\":1," BASE ",\"typed_specializations\":[" ITER("\"generic\"", "3") "]}",
       "generic Dataflow ITER specialization cannot have a value"},
      {"{\"schema_version\":1," BASE ",\"typed_specializations\":[" ITER("\"tile_count\"", "true")
       "]}",
       "must be an int or None, got bool"},
      {"{\"schema_version\":1," BASE ",\"typed_specializations\":[" ITER("\"generic\"", "null")
       "," ITER("\"generic\"", "null") "]}",
       "duplicate Dataflow handler specialization kind 'iter_range'"},
      {"{\"schema_version\":1," RBASE ",\"typed_specializations\":[{\"kind\":\"reduce_arity\","
       "\"value\":\"ternary\"}]}",
       "Unsupported Dataflow reduce arity class 'ternary'"},
      {"{\"schema_version\":1," RBASE ",\"typed_specializations\":[{\"kind\":\"shape\","
       "\"value\":1}]}",
       "Unsupported Dataflow handler specialization kind 'shape'"},
      {"{\"schema_version\":1," RBASE ",\"typed_specializations\":{}}",
       "typed_specializations must be a list, got dict"},
      {"{\"schema_version\":1," RBASE "}", "missing key 'typed_specializations'"},
      {"{\"schema_version\":1," RBASE ",\"typed_specializations\":[],\"extra\":0}",
       "unknown key 'extra'"},
      {"{\"schema_version\":\"1\"," RBASE ",\"typed_specializations\":[]}",
       "schema_version must be an int, got str"},
      {"{\"schema_version\":1,\"base_identity\":{\"operator_id\":1,\"operator_kind\":\"reduce\","
       "\"specialization\":null},\"typed_specializations\":[]}",
       "cannot contain specialization metadata"},
      {"{\"schema_version\":1," RBASE ",\"typed_specializations\":[{\"kind\":\"reduce_arity\"}]}",
       "missing key 'value'"},
      {"{\"schema_version\":1," RBASE ",\"typed_specializations\":[{\"kind\":\"reduce_arity\","
       "\"value\":\"binary\",\"x\":1}]}",
       "unknown key 'x'"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    expect_error(df_variant_from_json(bad[i].json, &v), bad[i].msg);
#undef BASE
#undef RBASE
#undef ITER
}

/* 100 random specs from a fixed-seed LCG (seed test: random.Random(0)). */
static uint32_t lcg(uint64_t *state) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(*state >> 33);
}

static void random_variants_round_trip(void **state) {
  (void)state;
  uint64_t rng = 0;
  df_identity iter_id = {7, DF_OPK_ITER}, reduce_id = {11, DF_OPK_REDUCE};
  char buf[256], again[256];
  for (int i = 0; i < 100; i++) {
    df_iter_mode mode = (df_iter_mode)(lcg(&rng) % 3);
    df_variant v = iter_variant(7, mode, mode == DF_ITER_GENERIC ? 0 : 1 + lcg(&rng) % 4096);
    assert_int_equal(df_variant_check(&v).code, DF_OK);
    df_variant back;
    int n = df_variant_to_json(&v, buf, sizeof buf);
    assert_true(n > 0 && (size_t)n < sizeof buf);
    assert_int_equal(df_variant_from_json(buf, &back).code, DF_OK);
    assert_true(df_variant_equal(&back, &v));
    assert_int_equal(back.base.operator_id, iter_id.operator_id);
    assert_int_equal(back.base.kind, iter_id.kind);
    df_variant_to_json(&back, again, sizeof again);
    assert_string_equal(buf, again);

    int64_t arity = 1 + lcg(&rng) % 64;
    df_variant r;
    assert_int_equal(df_variant_default(reduce_id, arity, &r).code, DF_OK);
    df_arity_class want;
    assert_int_equal(df_arity_class_for(true, arity, &want).code, DF_OK);
    assert_int_equal(r.arity, want);
    df_variant_to_json(&r, buf, sizeof buf);
    assert_int_equal(df_variant_from_json(buf, &back).code, DF_OK);
    assert_true(df_variant_equal(&back, &r));
    assert_int_equal(back.base.operator_id, 11);
    df_variant_to_json(&back, again, sizeof again);
    assert_string_equal(buf, again);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(iter_modes_parse_and_reject),
      cmocka_unit_test(iter_spec_values),
      cmocka_unit_test(arity_classes),
      cmocka_unit_test(variant_kinds_must_match_identity),
      cmocka_unit_test(variant_schema_and_spec_values),
      cmocka_unit_test(variant_defaults),
      cmocka_unit_test(variant_order_and_equality),
      cmocka_unit_test(fixed_extent_and_diag_names),
      cmocka_unit_test(bucket_lists),
      cmocka_unit_test(exact_length_lists),
      cmocka_unit_test(selection_rules),
      cmocka_unit_test(identity_json),
      cmocka_unit_test(identity_json_rejects),
      cmocka_unit_test(variant_json_canonical_forms),
      cmocka_unit_test(variant_json_rejects),
      cmocka_unit_test(random_variants_round_trip),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
