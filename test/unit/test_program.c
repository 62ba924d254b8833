/* Program model: slot byte sizes, operator identities, tensor order,
   validation messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "seed_plans.h"

static void slot_bytes_follow_field_alignment(void **state) {
  (void)state;
  df_program *a = seed_attention_program();
  assert_int_equal(df_itype_slot_bytes(&a->types[0]), 48);
  df_program *m = seed_moe_program();
  assert_int_equal(df_itype_slot_bytes(&m->types[df_program_find_type(m, "UpShard")]), 16);
  assert_int_equal(df_itype_slot_bytes(&m->types[df_program_find_type(m, "UpFull")]), 32);
  df_field f[3];
  memset(f, 0, sizeof f);
  strcpy(f[0].name, "flag");
  f[0].dtype = DF_DTYPE_BOOL;
  strcpy(f[1].name, "x");
  f[1].dtype = DF_DTYPE_FLOAT64; /* aligned to 8 */
  strcpy(f[2].name, "v");
  f[2].dtype = DF_DTYPE_INT32;
  f[2].rank = 1;
  f[2].shape[0] = 5; /* 16 + 20 = 36 -> 48 */
  df_itype t = {"Mixed", 3, f};
  assert_int_equal(df_itype_slot_bytes(&t), 48);
  /* Field offsets by the same rule: flag 0, x 8, v 16; AttnInter o at 4. */
  assert_int_equal(df_itype_field_offset(&t, 0), 0);
  assert_int_equal(df_itype_field_offset(&t, 1), 8);
  assert_int_equal(df_itype_field_offset(&t, 2), 16);
  assert_int_equal(df_itype_field_offset(&t, 3), DF_SENTINEL);
  assert_int_equal(df_field_elements(&f[2]), 5);
  assert_int_equal(df_itype_field_offset(&a->types[0], 1), 4);
  df_program_destroy(a);
  df_program_destroy(m);
}

static void operator_ids_skip_reshared_stages(void **state) {
  (void)state;
  df_program *a = seed_attention_program();
  assert_int_equal(df_program_operator_id(a, 0), 0);
  assert_int_equal(df_program_identity_kind(a, 0), DF_OPK_ITER);
  assert_int_equal(df_program_operator_id(a, 1), 1);
  assert_int_equal(df_program_identity_kind(a, 1), DF_OPK_REDUCE);
  assert_int_equal(df_program_operator_id(a, 2), 2);
  assert_int_equal(df_program_identity_kind(a, 2), DF_OPK_FINALIZE);
  df_program *m = seed_moe_program();
  assert_int_equal(df_program_operator_id(m, 0), 0);
  assert_int_equal(df_program_identity_kind(m, 0), DF_OPK_MAP);
  assert_int_equal(df_program_operator_id(m, 1), -1);
  assert_int_equal(df_program_identity_kind(m, 1), DF_OPK_NONE);
  assert_int_equal(df_program_operator_id(m, 2), 1);
  assert_int_equal(df_program_operator_id(m, 3), 2);
  assert_int_equal(df_program_identity_kind(m, 3), DF_OPK_FINALIZE);
  df_program_destroy(a);
  df_program_destroy(m);
}

static void tensor_args_follow_first_appearance(void **state) {
  (void)state;
  df_program *a = seed_attention_program();
  const char *names[8];
  assert_int_equal(df_program_tensor_args(a, names, 8), 4);
  assert_string_equal(names[0], "Q");
  assert_string_equal(names[1], "K");
  assert_string_equal(names[2], "V");
  assert_string_equal(names[3], "O");
  df_program_destroy(a);
}

static void dtype_names_and_aliases(void **state) {
  (void)state;
  df_dtype t;
  assert_int_equal(df_dtype_parse("half", &t).code, DF_OK);
  assert_int_equal(t, DF_DTYPE_FLOAT16);
  assert_int_equal(df_dtype_parse("T.BF16", &t).code, DF_OK);
  assert_int_equal(t, DF_DTYPE_BFLOAT16);
  assert_int_equal(df_dtype_parse("tl.Float8_E4M3FN", &t).code, DF_OK);
  assert_int_equal(t, DF_DTYPE_FLOAT8_E4M3FN);
  assert_int_equal(df_dtype_bits(DF_DTYPE_BOOL), 1);
  assert_int_equal(df_dtype_bits(DF_DTYPE_FLOAT8_E5M2), 8);
  assert_int_equal(df_dtype_code(DF_DTYPE_BFLOAT16), DF_TENSOR_DTYPE_BFLOAT);
  df_status s = df_dtype_parse("complex64", &t);
  assert_int_equal(s.code, DF_EINVAL);
  assert_non_null(strstr(s.message, "unsupported dtype 'complex64'"));
}

static void validation_names_the_rule(void **state) {
  (void)state;
  df_program *p;
  assert_int_equal(df_program_create(NULL, "empty", &p).code, DF_OK);
  df_status s = df_program_validate(p);
  assert_non_null(strstr(s.message, "task_domain must contain at least one axis"));
  df_program_destroy(p);

  df_program *a = seed_attention_program();
  a->stages[0].task_arg_count = 1; /* domain rank is 2 */
  int32_t bad;
  s = df_program_validate_at(a, &bad);
  assert_int_equal(bad, 0);
  assert_non_null(strstr(s.message, "task_args has 1 entries but the task domain has rank 2"));
  a->stages[0].task_arg_count = 2;
  strcpy(a->stages[0].range_axis, "q");
  s = df_program_validate_at(a, &bad);
  assert_non_null(strstr(s.message, "range axis 'q' is not a declared dynamic range"));
  df_program_destroy(a);
}

/* Handler workspaces (docs/workspace.md): the setter's rules, the
   program's workspace is the largest of the handlers its stages call,
   clones keep it. */
static void handler_workspace(void **state) {
  (void)state;
  df_program *a = seed_attention_program();
  assert_int_equal(df_program_workspace_bytes(a), 0);
  assert_int_equal(df_program_workspace_bytes(NULL), 0);
  assert_int_equal(df_program_set_handler_workspace(a, "split_kv", 8192).code, DF_OK);
  assert_int_equal(df_program_set_handler_workspace(a, "finalize", 196608).code, DF_OK);
  assert_int_equal(df_program_workspace_bytes(a), 196608);
  df_status s = df_program_set_handler_workspace(a, "combine", -1);
  assert_int_equal(s.code, DF_EINVAL);
  assert_non_null(strstr(s.message, "handler 'combine': df.workspace_bytes -1 must be 0 to "
                                    "232448"));
  s = df_program_set_handler_workspace(a, "combine", 232449);
  assert_int_equal(s.code, DF_EINVAL);
  assert_non_null(strstr(s.message, "df.workspace_bytes 232449 must be 0 to 232448"));
  s = df_program_set_handler_workspace(a, "nope", 16);
  assert_int_equal(s.code, DF_EINVAL);
  assert_non_null(strstr(s.message, "has no handler 'nope'"));
  assert_int_equal(a->ops[df_program_find_operator(a, "combine")].workspace_bytes, 0);
  df_program *c;
  assert_int_equal(df_program_clone(a, NULL, &c).code, DF_OK);
  assert_int_equal(c->ops[df_program_find_operator(c, "split_kv")].workspace_bytes, 8192);
  assert_int_equal(df_program_workspace_bytes(c), 196608);
  /* 0 removes a declaration */
  assert_int_equal(df_program_set_handler_workspace(c, "finalize", 0).code, DF_OK);
  assert_int_equal(df_program_workspace_bytes(c), 8192);
  df_program_destroy(c);
  df_program_destroy(a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(slot_bytes_follow_field_alignment),
      cmocka_unit_test(operator_ids_skip_reshared_stages),
      cmocka_unit_test(tensor_args_follow_first_appearance),
      cmocka_unit_test(dtype_names_and_aliases),
      cmocka_unit_test(validation_names_the_rule),
      cmocka_unit_test(handler_workspace),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
