/* df-select-variants: choose each scheduled instruction's implementation
   by capability region (df/impl.h) and record it on the df.instr ops. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/impl.h"
#include "mlir_util.h"
#include "pass_util.h"
#include "plan_ir.h"

#define MAX_REPLACEMENTS 32

typedef struct select_opts select_opts;
static df_status select_and_record(MlirOperation module, select_opts *sp);

struct select_opts {
  df_select_options o;
  df_impl replacements[MAX_REPLACEMENTS];
  char replace_text[4096]; /* recorded on df.plan as given */
};

/* replace=OP=SYM[:k=v,...][;OP=SYM...] */
static df_status set_replacements(select_opts *s, const char *value) {
  char buf[4096];
  if (strlen(value) >= sizeof buf)
    return df_status_errorf(DF_EINVAL, "option 'replace' is longer than %zu bytes",
                            sizeof buf - 1);
  memcpy(buf, value, strlen(value) + 1);
  memcpy(s->replace_text, value, strlen(value) + 1);
  char *save = NULL;
  for (char *part = strtok_r(buf, ";", &save); part; part = strtok_r(NULL, ";", &save)) {
    if (s->o.replacement_count == MAX_REPLACEMENTS)
      return df_status_errorf(DF_EINVAL, "option 'replace' names more than %d kernels",
                              MAX_REPLACEMENTS);
    DF_TRY(df_impl_parse(part, &s->replacements[s->o.replacement_count]));
    s->o.replacement_count++;
  }
  return df_status_ok();
}

static df_status set_select_option(void *opts, const char *key, const char *value) {
  select_opts *s = opts;
  if (!strcmp(key, "arch")) return df_arch_parse(value, &s->o.arch);
  if (!strcmp(key, "replace")) return set_replacements(s, value);
  return df_status_errorf(DF_EINVAL, "unknown option '%s'", key);
}

/* Record (or clear) the selection on df.plan: blobs written from the
   module carry it so run-time re-plans select the same way. */
static df_status record(MlirOperation module, const select_opts *s, bool set) {
  MlirOperation plan_op;
  DF_TRY(df_plan_op(module, &plan_op));
  MlirContext ctx = mlirOperationGetContext(module);
  const char *names[2] = {"select_arch", "select_replace"};
  const char *values[2] = {s->o.arch ? df_arch_name(s->o.arch) : "", s->replace_text};
  for (int i = 0; i < 2; i++) {
    if (set && values[i][0])
      df_set_attr(plan_op, names[i], df_str(ctx, values[i]));
    else
      mlirOperationRemoveAttributeByName(plan_op, mlirStringRefCreateFromCString(names[i]));
  }
  return df_status_ok();
}

static df_status run_select(MlirOperation module, const void *options) {
  select_opts *sp = malloc(sizeof *sp);
  if (!sp)
    return df_status_errorf(DF_ENOMEM, "out of memory running df-select-variants");
  *sp = *(const select_opts *)options;
  df_status r = record(module, sp, false); /* a previous selection does not count */
  if (!df_failed(&r))
    r = select_and_record(module, sp);
  free(sp);
  return r;
}

static df_status select_and_record(MlirOperation module, select_opts *sp) {
  select_opts s = *sp;
  s.o.replacements = s.replacements;
  df_program *prog;
  DF_TRY(df_program_from_module(module, NULL, NULL, &prog));
  df_plan *plan;
  df_status st = df_plan_from_ir(module, &plan);
  if (df_failed(&st)) {
    df_program_destroy(prog);
    return st;
  }
  st = df_plan_select_impls(plan, prog, &s.o);
  df_program_destroy(prog);
  if (df_failed(&st)) {
    df_plan_destroy(plan);
    return df_emit(mlirOperationGetLocation(module), "df-select-variants: %s", st.message);
  }
  /* df_plan_to_ir re-creates df.plan: keep what earlier passes recorded
     on it (memory choice, layout options) */
  MlirOperation old;
  st = df_plan_op(module, &old);
  intptr_t n = df_failed(&st) ? 0 : mlirOperationGetNumAttributes(old);
  MlirNamedAttribute *kept = calloc(n ? (size_t)n : 1, sizeof *kept);
  if (!kept) {
    df_plan_destroy(plan);
    return df_status_errorf(DF_ENOMEM, "out of memory running df-select-variants");
  }
  for (intptr_t i = 0; i < n; i++)
    kept[i] = mlirOperationGetAttribute(old, i);
  st = df_plan_to_ir(module, plan);
  df_plan_destroy(plan);
  MlirOperation fresh;
  if (!df_failed(&st))
    st = df_plan_op(module, &fresh);
  for (intptr_t i = 0; i < n && !df_failed(&st); i++)
    if (mlirAttributeIsNull(mlirOperationGetAttributeByName(fresh, mlirIdentifierStr(kept[i].name))))
      mlirOperationSetAttributeByName(fresh, mlirIdentifierStr(kept[i].name), kept[i].attribute);
  free(kept);
  return df_failed(&st) ? st : record(module, &s, true);
}

static const char select_anchor = 0;

df_status df_create_select_variants_pass(const char *text, MlirPass *out) {
  select_opts *s = calloc(1, sizeof *s);
  if (!s)
    return df_status_errorf(DF_ENOMEM, "out of memory creating df-select-variants");
  df_status st = df_parse_pass_options("df-select-variants", text, s, set_select_option);
  if (!df_failed(&st))
    *out = df_make_pass(&select_anchor, "df-select-variants",
                        "choose each instruction's implementation by capability region",
                        run_select, s, sizeof *s);
  free(s);
  return st;
}
