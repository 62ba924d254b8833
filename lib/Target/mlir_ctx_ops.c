/* df.ctx_* ops -> calls of the device runtime's accessor functions
   (lib/Runtime/device/ctx_fn.c). Each op becomes a call of a small helper
   function with the op's own operand and result types; the helper calls
   df_ctx_<name>_fn and converts: index <-> i32, a field's byte offset,
   and a pointer into a memref descriptor of a static shape. After linking
   and O3 nothing of the helpers is left. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir_lower.h"
#include "mlir_util.h"

typedef enum { R_INT, R_PTR, R_NONE } result_kind;

/* The size a dynamic dimension of a tensor memref reads as. */
#define DF_TENSOR_DYNAMIC_SIZE 2147483647ll

typedef struct accessor {
  const char *name; /* op df.ctx_<name>, function df_ctx_<name>_fn */
  bool index;       /* takes an index operand */
  result_kind result;
} accessor;

static const accessor accessors[] = {
    {"task_id", false, R_INT},      {"task_coord_count", false, R_INT},
    {"task_coord", true, R_INT},    {"range_begin", false, R_INT},
    {"range_end", false, R_INT},    {"tiles", false, R_INT},
    {"block_size", false, R_INT},
    {"input_count", false, R_INT},  {"input", true, R_PTR},
    {"output", false, R_PTR},       {"tensor", true, R_PTR},
    {"tensor_dtype", true, R_INT},  {"tensor_bits", true, R_INT},
    {"tensor_ndim", true, R_INT},   {"thread", false, R_INT},
    {"threads", false, R_INT},      {"barrier", false, R_NONE},
};

/* Text assembled for one helper. */
typedef struct text {
  char buf[16384];
  size_t len;
  bool overflow;
} text;

static void put(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(text *t, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(t->buf + t->len, sizeof t->buf - t->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof t->buf - t->len)
    t->overflow = true;
  else
    t->len += (size_t)n;
}

/* Where a pointer accessor points: a byte offset into the slot and the
   bytes available there (0 = unknown). */
typedef struct target_bytes {
  uint32_t offset, capacity;
  char what[160];
} target_bytes;

static MlirOperation enclosing_function(MlirOperation op) {
  MlirOperation p = mlirOperationGetParentOperation(op);
  while (!mlirOperationIsNull(p) && !df_op_is(p, "func.func"))
    p = mlirOperationGetParentOperation(p);
  return p;
}

/* The intermediate type of an input or output slot of the handler that
   contains `op`; -1 with *why set when there is none. */
static int32_t slot_type(const df_program *prog, MlirOperation op, bool output,
                         char *handler, size_t cap, const char **why) {
  MlirOperation fn = enclosing_function(op);
  handler[0] = '\0';
  *why = "it is not inside a handler (a func.func with df.kind, or an implementation with "
         "df.implements)";
  if (mlirOperationIsNull(fn) || !prog)
    return -1;
  MlirAttribute implements = df_op_attr(fn, "df.implements");
  if (!mlirAttributeIsNull(df_op_attr(fn, "df.kind")))
    df_strref_copy(mlirStringAttrGetValue(df_op_attr(fn, "sym_name")), handler, cap);
  else if (mlirAttributeIsAFlatSymbolRef(implements)) /* the operator's slots */
    df_strref_copy(mlirFlatSymbolRefAttrGetValue(implements), handler, cap);
  else
    return -1;
  int32_t o = df_program_find_operator(prog, handler);
  if (o < 0)
    return -1;
  const df_operator *h = &prog->ops[o];
  if (output) {
    *why = "the handler returns no intermediate";
    return h->result_type;
  }
  int32_t type = -1;
  for (uint32_t i = 0; i < h->param_count; i++) {
    if (h->params[i].kind != DF_PARAM_INTER && h->params[i].kind != DF_PARAM_INTER_LIST)
      continue;
    if (type >= 0 && h->params[i].type != type) {
      *why = "the handler's inputs have different intermediate types";
      return -1;
    }
    type = h->params[i].type;
  }
  *why = "the handler takes no intermediate";
  return type;
}

static df_status resolve_target(const df_program *prog, MlirOperation op, const accessor *a,
                                target_bytes *tb) {
  MlirLocation loc = mlirOperationGetLocation(op);
  memset(tb, 0, sizeof tb[0]);
  MlirAttribute field = df_op_attr(op, "field");
  bool slot = !strcmp(a->name, "input") || !strcmp(a->name, "output");
  if (!mlirAttributeIsNull(field) && !slot)
    return df_emit(loc, "df.ctx_%s: 'field' applies to df.ctx_input and df.ctx_output only",
                   a->name);
  if (!slot)
    return df_status_ok();
  char handler[DF_NAME_MAX];
  const char *why;
  int32_t type = slot_type(prog, op, !strcmp(a->name, "output"), handler, sizeof handler, &why);
  if (mlirAttributeIsNull(field)) {
    if (type >= 0) {
      tb->capacity = df_itype_slot_bytes(&prog->types[type]);
      snprintf(tb->what, sizeof tb->what, "slot of '%s'", prog->types[type].name);
    }
    return df_status_ok();
  }
  char name[DF_NAME_MAX];
  if (!mlirAttributeIsAString(field) ||
      !df_strref_copy(mlirStringAttrGetValue(field), name, sizeof name))
    return df_emit(loc, "df.ctx_%s: 'field' must be the name of a field (a string)", a->name);
  if (type < 0)
    return df_emit(loc, "df.ctx_%s: field '%s' needs the intermediate type of the slot, but %s",
                   a->name, name, why);
  const df_itype *t = &prog->types[type];
  for (uint32_t i = 0; i < t->field_count; i++) {
    if (strcmp(t->fields[i].name, name) != 0)
      continue;
    tb->offset = df_itype_field_offset(t, i);
    tb->capacity = df_dtype_bytes(t->fields[i].dtype) * df_field_elements(&t->fields[i]);
    snprintf(tb->what, sizeof tb->what, "field '%s' of '%s'", name, t->name);
    return df_status_ok();
  }
  char list[256] = "";
  for (uint32_t i = 0; i < t->field_count; i++)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
             t->fields[i].name);
  return df_emit(loc, "df.ctx_%s: intermediate '%s' has no field '%s' (fields: %s)", a->name,
                 t->name, name, list);
}

static uint64_t element_bytes(MlirType t) {
  if (mlirTypeIsAIndex(t))
    return 8;
  if (mlirTypeIsAInteger(t))
    return (mlirIntegerTypeGetWidth(t) + 7) / 8;
  if (mlirTypeIsAFloat(t))
    return (mlirFloatTypeGetWidth(t) + 7) / 8;
  if (mlirTypeIsAVector(t) && mlirShapedTypeHasStaticShape(t)) {
    uint64_t n = element_bytes(mlirShapedTypeGetElementType(t));
    for (intptr_t d = 0; d < mlirShapedTypeGetRank(t); d++)
      n *= (uint64_t)mlirShapedTypeGetDimSize(t, d);
    return n;
  }
  return 0;
}

/* The helper body's tail for a memref result: a descriptor of the static
   shape and strides around pointer %q. */
static df_status memref_tail(MlirOperation op, const accessor *a, MlirType mt,
                             const target_bytes *tb, text *t) {
  MlirLocation loc = mlirOperationGetLocation(op);
  char ts[256];
  df_type_to_string(mt, ts, sizeof ts);
  intptr_t rank = mlirShapedTypeGetRank(mt);
  int64_t strides[16], offset = 0;
  if (!mlirAttributeIsNull(mlirMemRefTypeGetMemorySpace(mt)))
    return df_emit(loc, "df.ctx_%s: %s has a memory space; slot and tensor memrefs use the "
                        "default (generic) one", a->name, ts);
  /* Tensor records carry no shape: a tensor memref may leave sizes
     dynamic (they read as DF_TENSOR_DYNAMIC_SIZE) as long as its strides
     are static; slot memrefs are fully static. */
  bool tensor = !strcmp(a->name, "tensor");
  if (rank > 16 || (!tensor && !mlirShapedTypeHasStaticShape(mt)) ||
      mlirLogicalResultIsFailure(mlirMemRefTypeGetStridesAndOffset(mt, strides, &offset)) ||
      mlirShapedTypeIsDynamicStrideOrOffset(offset))
    return df_emit(loc, "df.ctx_%s: %s needs a static %sstrides and offset", a->name, ts,
                   tensor ? "" : "shape, ");
  /* Elements spanned: offset + sum((size - 1) * stride) + 1. */
  uint64_t extent = 1;
  bool empty = false;
  for (intptr_t d = 0; d < rank; d++) {
    int64_t n = mlirShapedTypeGetDimSize(mt, d);
    if (mlirShapedTypeIsDynamicSize(n))
      n = DF_TENSOR_DYNAMIC_SIZE;
    if (mlirShapedTypeIsDynamicStrideOrOffset(strides[d]) || strides[d] < 0)
      return df_emit(loc, "df.ctx_%s: %s needs static, non-negative strides", a->name, ts);
    empty |= n == 0;
    if (n > 0)
      extent += (uint64_t)(n - 1) * (uint64_t)strides[d];
  }
  uint64_t bytes =
      empty ? 0 : (extent + (uint64_t)offset) * element_bytes(mlirShapedTypeGetElementType(mt));
  if (tb->capacity && bytes > tb->capacity)
    return df_emit(loc, "df.ctx_%s: %s spans %llu bytes, more than the %u bytes of the %s",
                   a->name, ts, (unsigned long long)bytes, tb->capacity, tb->what);
  char st[96];
  if (rank == 0)
    snprintf(st, sizeof st, "!llvm.struct<(ptr, ptr, i64)>");
  else
    snprintf(st, sizeof st, "!llvm.struct<(ptr, ptr, i64, array<%ld x i64>, array<%ld x i64>)>",
             (long)rank, (long)rank);
  put(t, "  %%d0 = llvm.mlir.poison : %s\n", st);
  put(t, "  %%d1 = llvm.insertvalue %%q, %%d0[0] : %s\n", st);
  put(t, "  %%d2 = llvm.insertvalue %%q, %%d1[1] : %s\n", st);
  put(t, "  %%off = llvm.mlir.constant(%lld : i64) : i64\n", (long long)offset);
  put(t, "  %%d3 = llvm.insertvalue %%off, %%d2[2] : %s\n", st);
  int last = 3;
  for (intptr_t d = 0; d < rank; d++) {
    int64_t n = mlirShapedTypeGetDimSize(mt, d);
    put(t, "  %%n%ld = llvm.mlir.constant(%lld : i64) : i64\n", (long)d,
        (long long)(mlirShapedTypeIsDynamicSize(n) ? DF_TENSOR_DYNAMIC_SIZE : n));
    put(t, "  %%d%d = llvm.insertvalue %%n%ld, %%d%d[3, %ld] : %s\n", last + 1, (long)d, last,
        (long)d, st);
    put(t, "  %%s%ld = llvm.mlir.constant(%lld : i64) : i64\n", (long)d, (long long)strides[d]);
    put(t, "  %%d%d = llvm.insertvalue %%s%ld, %%d%d[4, %ld] : %s\n", last + 2, (long)d,
        last + 1, (long)d, st);
    last += 2;
  }
  put(t, "  %%m = builtin.unrealized_conversion_cast %%d%d : %s to %s\n", last, st, ts);
  put(t, "  return %%m : %s\n", ts);
  return df_status_ok();
}

static df_status lower_one(MlirOperation module, const df_program *prog, MlirOperation op,
                           const accessor *a) {
  char fn[64], decl[256];
  snprintf(fn, sizeof fn, "df_ctx_%s_fn", a->name);
  const char *ret = a->result == R_INT ? " -> i32" : a->result == R_PTR ? " -> !llvm.ptr" : "";
  snprintf(decl, sizeof decl, "func.func private @%s(!llvm.ptr%s)%s", fn,
           a->index ? ", i32" : "", ret);

  char it[64] = "", rt[256] = "", sig[400];
  if (a->index)
    df_type_to_string(mlirValueGetType(mlirOperationGetOperand(op, 1)), it, sizeof it);
  if (a->result != R_NONE)
    df_type_to_string(mlirValueGetType(mlirOperationGetResult(op, 0)), rt, sizeof rt);
  snprintf(sig, sizeof sig, "(%%ctx: !llvm.ptr%s%s)%s%s", a->index ? ", %i: " : "", it,
           a->result != R_NONE ? " -> " : "", rt);

  text *t = calloc(1, sizeof *t);
  if (!t)
    return df_status_errorf(DF_ENOMEM, "out of memory lowering df.ctx_%s", a->name);
  const char *iv = "%i";
  if (a->index && !strcmp(it, "index")) {
    put(t, "  %%iv = arith.index_castui %%i : index to i32\n");
    iv = "%iv";
  }
  const char *call_ret = a->result == R_INT ? "i32" : a->result == R_PTR ? "!llvm.ptr" : "()";
  put(t, "  %s@%s(%%ctx%s%s) : (!llvm.ptr%s) -> %s\n",
      a->result == R_NONE ? "func.call " : "%r = func.call ", fn, a->index ? ", " : "",
      a->index ? iv : "", a->index ? ", i32" : "", call_ret);
  df_status s = df_status_ok();
  if (a->result == R_NONE) {
    put(t, "  return\n");
  } else if (a->result == R_INT) {
    if (!strcmp(rt, "index"))
      put(t, "  %%o = arith.index_castui %%r : i32 to index\n  return %%o : index\n");
    else
      put(t, "  return %%r : i32\n");
  } else {
    target_bytes tb;
    s = resolve_target(prog, op, a, &tb);
    if (s.code == DF_OK) {
      if (tb.offset)
        put(t, "  %%q = llvm.getelementptr %%r[%u] : (!llvm.ptr) -> !llvm.ptr, i8\n", tb.offset);
      else
        put(t, "  %%q = llvm.getelementptr %%r[0] : (!llvm.ptr) -> !llvm.ptr, i8\n");
      MlirType res = mlirValueGetType(mlirOperationGetResult(op, 0));
      if (mlirTypeIsAMemRef(res))
        s = memref_tail(op, a, res, &tb, t);
      else
        put(t, "  return %%q : !llvm.ptr\n");
    }
  }
  if (s.code == DF_OK && t->overflow)
    s = df_emit(mlirOperationGetLocation(op), "df.ctx_%s: the result type %s is too large to "
                                              "lower", a->name, rt);
  char helper[64];
  if (s.code == DF_OK)
    s = df_mlir_add_helper(module, sig, t->buf, decl, helper);
  free(t);
  if (s.code == DF_OK)
    df_mlir_call_instead(op, helper);
  return s;
}

df_status df_lower_ctx_ops(MlirOperation module, const df_program *prog) {
  MlirOperation *ops;
  size_t n;
  DF_TRY(df_mlir_collect(module, "df.ctx_", &ops, &n));
  df_status s = df_status_ok();
  for (size_t i = 0; i < n && s.code == DF_OK; i++) {
    char name[64];
    df_mlir_op_name(ops[i], name, sizeof name);
    const accessor *a = NULL;
    for (size_t j = 0; j < sizeof accessors / sizeof accessors[0]; j++)
      if (!strcmp(name + strlen("df.ctx_"), accessors[j].name))
        a = &accessors[j];
    if (!a)
      s = df_emit(mlirOperationGetLocation(ops[i]), "'%s' is not a df_ctx accessor", name);
    else
      s = lower_one(module, prog, ops[i], a);
  }
  free(ops);
  return s;
}
