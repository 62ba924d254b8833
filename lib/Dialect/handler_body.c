/* One handler's MLIR body, given as text apart from the program (the Python
   bindings' `mlir=` bodies), merged into a program module (an
   implementation's body, df.implements, likewise): the text's
   func.func with the handler's name replaces the handler's declaration and
   the functions it calls are added beside it. All checks run before the
   module changes, so a refused body leaves it as it was. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/compiler.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/LLVM.h"
#include "mlir_util.h"

static MlirBlock body_of(MlirOperation module) {
  return mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
}

static bool has_body(MlirOperation fn) {
  return !mlirBlockIsNull(mlirRegionGetFirstBlock(mlirOperationGetRegion(fn, 0)));
}

static MlirStringRef sym_name(MlirOperation op) {
  MlirAttribute a = df_op_attr(op, "sym_name");
  return mlirAttributeIsAString(a) ? mlirStringAttrGetValue(a) : mlirStringRefCreate("", 0);
}

static MlirOperation find_func(MlirOperation module, MlirStringRef name) {
  for (MlirOperation op = mlirBlockGetFirstOperation(body_of(module)); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op))
    if (df_op_is(op, "func.func") && mlirStringRefEqual(sym_name(op), name))
      return op;
  return (MlirOperation){NULL};
}

/* The generic text of an operation (malloc'ed; NULL when out of memory). */
static char *op_text(MlirOperation op) {
  char *text;
  df_status s = df_operation_generic_text(op, &text);
  return s.code == DF_OK ? text : NULL;
}

/* A function of the body text other than the handler: a helper (or a
   declaration of one). One the module already has is kept once when
   identical (the same helper given with two handlers); anything else
   clashes. */
static df_status check_helper(MlirOperation module, MlirOperation fn, const char *op_name) {
  MlirStringRef name = sym_name(fn);
  if (!mlirAttributeIsNull(df_op_attr(fn, "df.kind")) ||
      !mlirAttributeIsNull(df_op_attr(fn, "df.task_domain")))
    return df_status_errorf(DF_EINVAL,
                            "handler '%s': its MLIR text also defines @%.*s as a handler or "
                            "program; give each handler's body with its own operator",
                            op_name, (int)name.length, name.data);
  MlirOperation old = find_func(module, name);
  if (mlirOperationIsNull(old))
    return df_status_ok();
  if (!mlirAttributeIsNull(df_op_attr(old, "df.kind")) ||
      !mlirAttributeIsNull(df_op_attr(old, "df.task_domain")))
    return df_status_errorf(DF_EINVAL,
                            "handler '%s': its MLIR text defines @%.*s, the name of a handler "
                            "or the program; give each handler's body with its own operator",
                            op_name, (int)name.length, name.data);
  if (!has_body(fn))
    return df_status_ok(); /* a declaration of a function the module has */
  char *a = op_text(old), *b = op_text(fn);
  bool same = a && b && !strcmp(a, b);
  free(a);
  free(b);
  if (same)
    return df_status_ok();
  return df_status_errorf(DF_EINVAL,
                          "handler '%s': its MLIR text defines @%.*s, which the module already "
                          "has with a different definition (a helper of another handler's "
                          "body)",
                          op_name, (int)name.length, name.data);
}

/* `attr` of the body equals the declaration's, or is absent (then copied). */
static df_status check_attr(MlirOperation decl, MlirOperation fn, const char *attr,
                            const char *decl_attr, const char *op_name) {
  MlirAttribute want = df_op_attr(decl, decl_attr), got = df_op_attr(fn, attr);
  if (mlirAttributeIsNull(got) || mlirAttributeEqual(want, got))
    return df_status_ok();
  char w[160], g[160];
  if (!strcmp(attr, "df.signature")) {
    df_type_to_string(mlirTypeAttrGetValue(want), w, sizeof w);
    if (mlirAttributeIsAType(got))
      df_type_to_string(mlirTypeAttrGetValue(got), g, sizeof g);
    else
      df_attr_to_string(got, g, sizeof g);
  } else {
    df_attr_to_string(want, w, sizeof w);
    df_attr_to_string(got, g, sizeof g);
  }
  return df_status_errorf(DF_EINVAL,
                          "handler '%s': the MLIR body's %s %s does not match the operator's "
                          "declaration %s",
                          op_name, attr, g, w);
}

/* The df.* attributes of an implementation's declaration: the operator it
   implements and its capability region. */
static const char *const impl_attrs[] = {"df.implements", "df.tiles", "df.length", "df.arity",
                                         "df.dtype", "df.min_arch", "df.general"};
#define IMPL_ATTR_COUNT (sizeof impl_attrs / sizeof impl_attrs[0])

static bool is_impl(MlirOperation decl) {
  return mlirAttributeIsNull(df_op_attr(decl, "df.kind")) &&
         !mlirAttributeIsNull(df_op_attr(decl, "df.implements"));
}

/* An implementation's body: the df_ctx signature; the region, when the
   text repeats it, must be the declaration's. */
static df_status check_impl_body(MlirOperation decl, MlirOperation fn, const char *name) {
  MlirType ft = mlirTypeAttrGetValue(df_op_attr(fn, "function_type"));
  if (mlirFunctionTypeGetNumInputs(ft) != 1 || mlirFunctionTypeGetNumResults(ft) != 0 ||
      !mlirTypeIsALLVMPointerType(mlirFunctionTypeGetInput(ft, 0))) {
    char t[160];
    df_type_to_string(ft, t, sizeof t);
    return df_status_errorf(DF_EINVAL,
                            "implementation '%s': the MLIR body's type must be (!llvm.ptr) -> () "
                            "(the df_ctx pointer), got %s",
                            name, t);
  }
  for (size_t i = 0; i < IMPL_ATTR_COUNT; i++) {
    MlirAttribute want = df_op_attr(decl, impl_attrs[i]), got = df_op_attr(fn, impl_attrs[i]);
    if (mlirAttributeIsNull(got) || (!mlirAttributeIsNull(want) && mlirAttributeEqual(want, got)))
      continue;
    char w[160] = "(none)", g[160];
    if (!mlirAttributeIsNull(want))
      df_attr_to_string(want, w, sizeof w);
    df_attr_to_string(got, g, sizeof g);
    return df_status_errorf(DF_EINVAL,
                            "implementation '%s': the MLIR body's %s %s does not match the "
                            "declaration's %s",
                            name, impl_attrs[i], g, w);
  }
  return df_status_ok();
}

static df_status check_body(MlirOperation decl, MlirOperation fn, const char *op_name) {
  if (is_impl(decl))
    return check_impl_body(decl, fn, op_name);
  MlirType ft = mlirTypeAttrGetValue(df_op_attr(fn, "function_type"));
  if (mlirFunctionTypeGetNumInputs(ft) != 1 || mlirFunctionTypeGetNumResults(ft) != 0 ||
      !mlirTypeIsALLVMPointerType(mlirFunctionTypeGetInput(ft, 0))) {
    char t[160], w[160];
    df_type_to_string(ft, t, sizeof t);
    df_type_to_string(mlirTypeAttrGetValue(df_op_attr(decl, "function_type")), w, sizeof w);
    return df_status_errorf(DF_EINVAL,
                            "handler '%s': the MLIR body's type must be (!llvm.ptr) -> () (the "
                            "df_ctx pointer), got %s; the operator's declaration %s is its "
                            "df.signature",
                            op_name, t, w);
  }
  DF_TRY(check_attr(decl, fn, "df.signature", "function_type", op_name));
  DF_TRY(check_attr(decl, fn, "df.kind", "df.kind", op_name));
  DF_TRY(check_attr(decl, fn, "df.params", "df.params", op_name));
  return df_status_ok();
}

/* Every top-level op of the parsed text: the handler, its helpers. */
static df_status check_text(MlirOperation module, MlirOperation parsed, MlirOperation decl,
                            const char *op_name, MlirOperation *handler) {
  MlirStringRef want = mlirStringRefCreateFromCString(op_name);
  *handler = (MlirOperation){NULL};
  for (MlirOperation op = mlirBlockGetFirstOperation(body_of(parsed)); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
    if (!df_op_is(op, "func.func"))
      return df_status_errorf(DF_EINVAL,
                              "handler '%s': its MLIR text holds '%.*s'; only func.func (the "
                              "handler and the functions it calls) may be given",
                              op_name, (int)name.length, name.data);
    if (mlirStringRefEqual(sym_name(op), want)) {
      if (has_body(op))
        *handler = op;
    } else {
      DF_TRY(check_helper(module, op, op_name));
    }
  }
  if (mlirOperationIsNull(*handler))
    return df_status_errorf(DF_EINVAL, "handler '%s': its MLIR text defines no func.func @%s "
                                       "with a body",
                            op_name, op_name);
  return check_body(decl, *handler, op_name);
}

static void set_missing(MlirOperation decl, MlirOperation fn, const char *attr,
                        const char *decl_attr) {
  if (mlirAttributeIsNull(df_op_attr(fn, attr)))
    mlirOperationSetAttributeByName(fn, mlirStringRefCreateFromCString(attr),
                                    df_op_attr(decl, decl_attr));
}

/* Clone the handler in place of its declaration and the helpers (bodies
   the module lacks; declarations of external functions likewise). */
static void merge(MlirOperation module, MlirOperation parsed, MlirOperation decl,
                  MlirOperation handler) {
  MlirOperation fn = mlirOperationClone(handler);
  if (is_impl(decl)) {
    for (size_t i = 0; i < IMPL_ATTR_COUNT; i++)
      if (!mlirAttributeIsNull(df_op_attr(decl, impl_attrs[i])))
        set_missing(decl, fn, impl_attrs[i], impl_attrs[i]);
  } else {
    set_missing(decl, fn, "df.signature", "function_type");
    set_missing(decl, fn, "df.kind", "df.kind");
    set_missing(decl, fn, "df.params", "df.params");
    /* the declared workspace stays with the handler (docs/workspace.md) */
    if (!mlirAttributeIsNull(df_op_attr(decl, "df.workspace_bytes")))
      set_missing(decl, fn, "df.workspace_bytes", "df.workspace_bytes");
  }
  mlirBlockInsertOwnedOperationAfter(body_of(module), decl, fn);
  mlirOperationDestroy(decl);
  for (MlirOperation op = mlirBlockGetFirstOperation(body_of(parsed)); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    if (mlirOperationEqual(op, handler) || !mlirOperationIsNull(find_func(module, sym_name(op))))
      continue;
    mlirBlockAppendOwnedOperation(body_of(module), mlirOperationClone(op));
  }
}

static MlirOperation parse_captured(MlirContext ctx, MlirStringRef text, const char *source_name,
                                    df_diag_capture *diag) {
  df_diag_capture_begin(ctx, diag);
  MlirOperation op = mlirOperationCreateParse(ctx, text,
                                              mlirStringRefCreateFromCString(source_name));
  df_diag_capture_end(diag);
  return op;
}

/* The text as a builtin.module: a module as given, one function wrapped,
   several functions parsed again inside `module {` (put on the text's
   first line, so line numbers stay those of the text). */
static df_status parse_text(MlirContext ctx, const char *op_name, const char *text, size_t len,
                            const char *source_name, MlirOperation *out) {
  df_diag_capture diag;
  MlirOperation op = parse_captured(ctx, mlirStringRefCreate(text, len), source_name, &diag);
  if (mlirOperationIsNull(op) && strstr(diag.text, "single top-level operation")) {
    static const char open[] = "module {", close[] = "\n}";
    char *wrapped = malloc(len + sizeof open + sizeof close);
    if (!wrapped)
      return df_status_errorf(DF_ENOMEM, "handler '%s': out of memory", op_name);
    memcpy(wrapped, open, sizeof open - 1);
    memcpy(wrapped + sizeof open - 1, text, len);
    memcpy(wrapped + sizeof open - 1 + len, close, sizeof close);
    op = parse_captured(ctx, mlirStringRefCreateFromCString(wrapped), source_name, &diag);
    free(wrapped);
  }
  if (mlirOperationIsNull(op))
    return df_status_errorf(DF_EFORMAT, "handler '%s': the MLIR body does not parse: %s",
                            op_name, diag.text[0] ? diag.text : "(no diagnostic)");
  if (!df_op_is(op, "builtin.module")) {
    MlirOperation module = mlirModuleGetOperation(mlirModuleCreateEmpty(
        mlirOperationGetLocation(op)));
    mlirBlockAppendOwnedOperation(body_of(module), op);
    op = module;
  }
  *out = op;
  return df_status_ok();
}


df_status df_module_add_handler_body(MlirOperation module, const char *op_name,
                                     const char *text, size_t len, const char *source_name) {
  if (!op_name || !*op_name)
    return df_status_errorf(DF_EINVAL, "an MLIR handler body needs its operator's name");
  MlirOperation decl = find_func(module, mlirStringRefCreateFromCString(op_name));
  if (mlirOperationIsNull(decl) ||
      (mlirAttributeIsNull(df_op_attr(decl, "df.kind")) && !is_impl(decl)))
    return df_status_errorf(DF_EINVAL, "handler '%s': the program declares no handler of that "
                                       "name",
                            op_name);
  if (has_body(decl))
    return df_status_errorf(DF_EINVAL, "handler '%s' has a body already; give one body per "
                                       "handler",
                            op_name);
  if (!text || len == 0)
    return df_status_errorf(DF_EINVAL, "handler '%s': the MLIR body text is empty", op_name);
  MlirContext ctx = mlirOperationGetContext(module);
  MlirOperation parsed = {NULL};
  DF_TRY(parse_text(ctx, op_name, text, len, source_name, &parsed));
  MlirOperation handler;
  df_status s = check_text(module, parsed, decl, op_name, &handler);
  if (s.code == DF_OK)
    merge(module, parsed, decl, handler);
  mlirOperationDestroy(parsed);
  return s;
}
