/* libdf_compiler's handler-body module (lib/Shared/compile_api.h), the C
   side of the Python bindings' mlir= bodies: bodies merge into the seed
   attention program's module, refusals name the operator and leave the
   module as it was, and the merged module emits PTX and a host handler
   object exporting the plan's handler symbols. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "compile_api.h"
#include "df/impl.h"
#include "seed_plans.h"
#include "shared.h"

/* Bodies that only return: the signature comes from the declaration. */
static const char split_kv[] = "func.func @split_kv(%ctx: !llvm.ptr) { return }";
static const char combine[] =
    "func.func @combine(%ctx: !llvm.ptr) attributes {df.kind = \"reduce\",\n"
    "    df.params = [\"items\"],\n"
    "    df.signature = (!df.list<\"AttnInter\">) -> !df.inter<\"AttnInter\">} {\n"
    "  func.call @helper() : () -> ()\n"
    "  return\n"
    "}\n"
    "func.func private @helper() { return }\n";
static const char finalize[] =
    "module {\n  func.func @finalize(%ctx: !llvm.ptr) {\n"
    "    %t = \"df.ctx_task_id\"(%ctx) : (!llvm.ptr) -> index\n    return\n  }\n}\n";

typedef struct fixture {
  df_program *program;
  df_shared_handlers *h;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  f->program = seed_attention_program();
  df_status s = df_shared_handlers_create(f->program, &f->h);
  if (s.code != DF_OK) {
    fprintf(stderr, "%s\n", s.message);
    return -1;
  }
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  df_shared_handlers_destroy(f->h);
  df_program_destroy(f->program);
  free(f);
  return 0;
}

static df_status add(fixture *f, const char *op, const char *text) {
  return df_shared_handlers_add_mlir(f->h, op, text, strlen(text));
}

static char *module_text(fixture *f) {
  char *text = NULL;
  df_status s = df_shared_handlers_text(f->h, &text);
  assert_int_equal(s.code, DF_OK);
  return text;
}

static void bodies_replace_declarations(void **state) {
  fixture *f = *state;
  assert_int_equal(add(f, "split_kv", split_kv).code, DF_OK);
  assert_int_equal(add(f, "combine", combine).code, DF_OK);
  assert_int_equal(add(f, "finalize", finalize).code, DF_OK);
  char *text = module_text(f);
  /* split_kv took df.kind/df.params/df.signature from its declaration */
  assert_non_null(strstr(text, "df.kind = \"iter\", df.params = [\"seq\", \"head\", \"Q\", "
                               "\"K\", \"V\"], df.signature = (i32, i32, !df.tensor, "
                               "!df.tensor, !df.tensor) -> !df.inter<\"AttnInter\">"));
  assert_non_null(strstr(text, "sym_name = \"helper\", sym_visibility = \"private\""));
  assert_null(strstr(text, "sym_name = \"finalize\", sym_visibility = \"private\""));
  df_shared_free(text);
}

/* Implementations (df.implements) take MLIR bodies too: the region comes
   from the declaration, one the body repeats must match it, and field
   accessors resolve against the implemented operator's intermediate. */
static void implementation_bodies(void **state) {
  (void)state;
  df_program *p = seed_attention_program();
  df_impl im;
  assert_int_equal(df_impl_parse("split_kv=split_kv_128:length=128", &im).code, DF_OK);
  assert_int_equal(df_program_add_impl(p, &im).code, DF_OK);
  assert_int_equal(df_impl_parse("split_kv=split_kv_any:general", &im).code, DF_OK);
  assert_int_equal(df_program_add_impl(p, &im).code, DF_OK);
  df_shared_handlers *h;
  assert_int_equal(df_shared_handlers_create(p, &h).code, DF_OK);
  static const char body128[] =
      "func.func @split_kv_128(%ctx: !llvm.ptr) {\n"
      "  %o = \"df.ctx_output\"(%ctx) {field = \"lse\"} : (!llvm.ptr) -> memref<f32>\n"
      "  return\n}\n";
  assert_int_equal(df_shared_handlers_add_mlir(h, "split_kv_128", body128, strlen(body128)).code,
                   DF_OK);
  char *before = NULL;
  assert_int_equal(df_shared_handlers_text(h, &before).code, DF_OK);
  assert_non_null(strstr(before, "df.implements = @split_kv, df.length = 128 : i64}"));
  static const char wrong_region[] =
      "func.func @split_kv_any(%ctx: !llvm.ptr) attributes {df.length = 64 : i64} { return }";
  df_status s = df_shared_handlers_add_mlir(h, "split_kv_any", wrong_region,
                                            strlen(wrong_region));
  assert_string_equal(s.message, "implementation 'split_kv_any': the MLIR body's df.length "
                                 "64 : i64 does not match the declaration's (none)");
  static const char wrong_type[] = "func.func @split_kv_any(%x: i32) { return }";
  s = df_shared_handlers_add_mlir(h, "split_kv_any", wrong_type, strlen(wrong_type));
  assert_string_equal(s.message, "implementation 'split_kv_any': the MLIR body's type must be "
                                 "(!llvm.ptr) -> () (the df_ctx pointer), got (i32) -> ()");
  char *after = NULL;
  assert_int_equal(df_shared_handlers_text(h, &after).code, DF_OK);
  assert_string_equal(before, after);
  static const char general[] =
      "func.func @split_kv_any(%ctx: !llvm.ptr) attributes {df.general} { return }";
  assert_int_equal(df_shared_handlers_add_mlir(h, "split_kv_any", general, strlen(general)).code,
                   DF_OK);
  df_shared_free(before);
  df_shared_free(after);
  df_shared_handlers_destroy(h);
  df_program_destroy(p);
}

static void refusals_name_the_operator_and_change_nothing(void **state) {
  fixture *f = *state;
  char *before = module_text(f);
  df_status s = add(f, "split_kv", "func.func @split_kv(%ctx: !llvm.ptr) { retur }");
  assert_int_equal(s.code, DF_EFORMAT);
  assert_non_null(strstr(s.message, "handler 'split_kv': the MLIR body does not parse: "
                                    "<mlir body of split_kv>:1:"));
  s = add(f, "combine", "func.func @combine(%ctx: !llvm.ptr) attributes "
                        "{df.signature = (i32) -> ()} { return }");
  assert_int_equal(s.code, DF_EINVAL);
  assert_string_equal(s.message, "handler 'combine': the MLIR body's df.signature (i32) -> () "
                                 "does not match the operator's declaration "
                                 "(!df.list<\"AttnInter\">) -> !df.inter<\"AttnInter\">");
  s = add(f, "merge", split_kv);
  assert_string_equal(s.message, "handler 'merge': the program declares no handler of that "
                                 "name");
  s = add(f, "finalize", "");
  assert_string_equal(s.message, "handler 'finalize': the MLIR body text is empty");
  s = add(f, "finalize", split_kv);
  assert_string_equal(s.message, "handler 'finalize': its MLIR text defines @split_kv, the "
                                 "name of a handler or the program; give each handler's body "
                                 "with its own operator");
  s = df_shared_handlers_add_mlir(f->h, NULL, split_kv, strlen(split_kv));
  assert_string_equal(s.message, "an MLIR handler body needs its operator's name");
  char *after = module_text(f);
  assert_string_equal(before, after);
  df_shared_free(before);
  df_shared_free(after);
  assert_int_equal(add(f, "split_kv", split_kv).code, DF_OK);
  s = add(f, "split_kv", split_kv);
  assert_string_equal(s.message, "handler 'split_kv' has a body already; give one body per "
                                 "handler");
}

static void null_arguments(void **state) {
  (void)state;
  df_shared_handlers *h = (df_shared_handlers *)1;
  df_status s = df_shared_handlers_create(NULL, &h);
  assert_int_equal(s.code, DF_EINVAL);
  assert_null(h);
  s = df_shared_handlers_add_mlir(NULL, "split_kv", split_kv, strlen(split_kv));
  assert_int_equal(s.code, DF_EINVAL);
  char *text = NULL;
  assert_int_equal(df_shared_handlers_text(NULL, &text).code, DF_EINVAL);
  df_shared_handlers_destroy(NULL);
}

static df_packed *seed_packed(void) {
  df_plan *plan = seed_make_plan();
  df_packed *k = NULL;
  df_status s = df_pack(plan, NULL, NULL, &k);
  df_plan_destroy(plan);
  assert_int_equal(s.code, DF_OK);
  return k;
}

static void merged_module_emits_ptx_and_host_handlers(void **state) {
  fixture *f = *state;
  if (!df_shared_has_device_runtime())
    skip();
  df_packed *k = seed_packed();
  char *ptx = NULL;
  size_t len = 0;
  assert_int_equal(add(f, "split_kv", split_kv).code, DF_OK);
  assert_int_equal(add(f, "combine", combine).code, DF_OK);
  /* finalize has no body and nothing else defines it */
  df_status s = df_shared_handlers_emit_ptx(f->h, k, "sm_90a", NULL, 0, &ptx, &len);
  assert_int_equal(s.code, DF_EINVAL);
  assert_non_null(strstr(s.message, "finalize"));
  assert_int_equal(add(f, "finalize", finalize).code, DF_OK);
  s = df_shared_handlers_emit_ptx(f->h, k, "sm_90a", NULL, 0, &ptx, &len);
  assert_int_equal(s.code, DF_OK);
  assert_non_null(strstr(ptx, ".target sm_90a"));
  assert_non_null(strstr(ptx, ".entry df_persistent_kernel("));
  df_shared_free(ptx);

  char so[] = "/tmp/df_test_compile_api_XXXXXX";
  int fd = mkstemp(so);
  assert_true(fd >= 0);
  close(fd);
  s = df_shared_handlers_emit_host(f->h, k, so, NULL, 0, NULL);
  assert_int_equal(s.code, DF_OK);
  void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(dl);
  for (uint32_t i = 0; i < k->handler_count; i++)
    assert_non_null(dlsym(dl, k->handlers[i].symbol));
  dlclose(dl);
  unlink(so);
  df_packed_destroy(k);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(bodies_replace_declarations, setup, teardown),
      cmocka_unit_test_setup_teardown(refusals_name_the_operator_and_change_nothing, setup,
                                      teardown),
      cmocka_unit_test(null_arguments),
      cmocka_unit_test(implementation_bodies),
      cmocka_unit_test_setup_teardown(merged_module_emits_ptx_and_host_handlers, setup,
                                      teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
