/* Small rewriting tools over the MLIR C API for the handler lowering:
   collecting ops, adding helper functions parsed from text, replacing an
   op by a call. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir_lower.h"
#include "mlir_util.h"

typedef struct collect {
  const char *prefix;
  size_t prefix_len;
  MlirOperation *ops;
  size_t count, cap;
  bool oom;
} collect;

static MlirWalkResult collect_op(MlirOperation op, void *user) {
  collect *c = user;
  MlirStringRef n = mlirIdentifierStr(mlirOperationGetName(op));
  if (n.length < c->prefix_len || memcmp(n.data, c->prefix, c->prefix_len) != 0)
    return MlirWalkResultAdvance;
  if (c->count == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 32;
    MlirOperation *grown = realloc(c->ops, cap * sizeof *grown);
    if (!grown) {
      c->oom = true;
      return MlirWalkResultInterrupt;
    }
    c->ops = grown;
    c->cap = cap;
  }
  c->ops[c->count++] = op;
  return MlirWalkResultAdvance;
}

df_status df_mlir_collect(MlirOperation module, const char *prefix, MlirOperation **ops,
                          size_t *count) {
  collect c = {prefix, strlen(prefix), NULL, 0, 0, false};
  mlirOperationWalk(module, collect_op, &c, MlirWalkPreOrder);
  if (c.oom) {
    free(c.ops);
    return df_status_errorf(DF_ENOMEM, "out of memory collecting %s ops", prefix);
  }
  *ops = c.ops;
  *count = c.count;
  return df_status_ok();
}

static MlirBlock module_body(MlirOperation module) {
  return mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
}

static bool has_symbol(MlirOperation module, const char *name) {
  for (MlirOperation op = mlirBlockGetFirstOperation(module_body(module)); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    MlirAttribute sym = df_op_attr(op, "sym_name");
    if (!mlirAttributeIsNull(sym) && mlirAttributeIsAString(sym) &&
        df_strref_eq(mlirStringAttrGetValue(sym), name))
      return true;
  }
  return false;
}

df_status df_mlir_add_functions(MlirOperation module, const char *what, const char *text) {
  MlirContext ctx = mlirOperationGetContext(module);
  size_t cap = strlen(text) + 32;
  char *wrapped = malloc(cap);
  if (!wrapped)
    return df_status_errorf(DF_ENOMEM, "out of memory adding '%s'", what);
  snprintf(wrapped, cap, "module {\n%s\n}\n", text);
  MlirModule parsed = mlirModuleCreateParse(ctx, mlirStringRefCreateFromCString(wrapped));
  free(wrapped);
  if (mlirModuleIsNull(parsed))
    return df_status_errorf(DF_EINTERNAL, "the handler lowering's '%s' does not parse", what);
  MlirOperation op = mlirBlockGetFirstOperation(mlirModuleGetBody(parsed));
  while (!mlirOperationIsNull(op)) {
    MlirOperation next = mlirOperationGetNextInBlock(op);
    MlirAttribute sym = df_op_attr(op, "sym_name");
    char name[128] = "";
    if (!mlirAttributeIsNull(sym))
      df_strref_copy(mlirStringAttrGetValue(sym), name, sizeof name);
    if (!name[0] || !has_symbol(module, name)) {
      mlirOperationRemoveFromParent(op);
      mlirBlockAppendOwnedOperation(module_body(module), op);
    }
    op = next;
  }
  mlirModuleDestroy(parsed);
  return df_status_ok();
}

static uint64_t fnv1a(uint64_t h, const char *s) {
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 1099511628211ull;
  }
  return h;
}

df_status df_mlir_add_helper(MlirOperation module, const char *sig, const char *body,
                             const char *decls, char name[64]) {
  uint64_t h = fnv1a(fnv1a(14695981039346656037ull, sig), body);
  snprintf(name, 64, "__df_h%016llx", (unsigned long long)h);
  if (has_symbol(module, name))
    return df_status_ok();
  size_t cap = strlen(sig) + strlen(body) + strlen(decls) + 128;
  char *text = malloc(cap);
  if (!text)
    return df_status_errorf(DF_ENOMEM, "out of memory building a lowering helper");
  snprintf(text, cap, "%s\nfunc.func private @%s%s {\n%s}\n", decls, name, sig, body);
  df_status s = df_mlir_add_functions(module, name, text);
  free(text);
  return s;
}

void df_mlir_call_instead(MlirOperation op, const char *callee) {
  df_mlir_call_instead_with(op, callee, (MlirValue){NULL});
}

void df_mlir_call_instead_with(MlirOperation op, const char *callee, MlirValue extra) {
  MlirContext ctx = mlirOperationGetContext(op);
  MlirOperationState st = mlirOperationStateGet(mlirStringRefCreateFromCString("func.call"),
                                                mlirOperationGetLocation(op));
  MlirValue operands[17];
  MlirType results[16];
  intptr_t n = mlirOperationGetNumOperands(op), r = mlirOperationGetNumResults(op);
  if (n > 16)
    n = 16;
  for (intptr_t i = 0; i < n; i++)
    operands[i] = mlirOperationGetOperand(op, i);
  if (!mlirValueIsNull(extra))
    operands[n++] = extra;
  for (intptr_t i = 0; i < r && i < 16; i++)
    results[i] = mlirValueGetType(mlirOperationGetResult(op, i));
  mlirOperationStateAddOperands(&st, n, operands);
  mlirOperationStateAddResults(&st, r < 16 ? r : 16, results);
  MlirNamedAttribute callee_attr = mlirNamedAttributeGet(
      mlirIdentifierGet(ctx, mlirStringRefCreateFromCString("callee")),
      mlirFlatSymbolRefAttrGet(ctx, mlirStringRefCreateFromCString(callee)));
  mlirOperationStateAddAttributes(&st, 1, &callee_attr);
  MlirOperation call = mlirOperationCreate(&st);
  mlirBlockInsertOwnedOperationBefore(mlirOperationGetBlock(op), op, call);
  for (intptr_t i = 0; i < r && i < 16; i++)
    mlirValueReplaceAllUsesOfWith(mlirOperationGetResult(op, i), mlirOperationGetResult(call, i));
  mlirOperationDestroy(op);
}

void df_mlir_op_name(MlirOperation op, char *buf, size_t cap) {
  if (!df_strref_copy(mlirIdentifierStr(mlirOperationGetName(op)), buf, cap))
    snprintf(buf, cap, "<long op name>");
}
