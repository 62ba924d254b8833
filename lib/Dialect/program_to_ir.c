/* Program model -> IR: the inverse of ir_to_program.c, built with the MLIR
   C API (no text templates). Intermediates become df.intermediate ops,
   handlers private func.func declarations with df.kind / df.params, and
   the program a func.func with df.task_domain / df.dynamic_ranges whose
   body is the SSA graph of stage ops ended by func.return. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/compiler.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/LLVM.h"
#include "df/impl.h"

#define MAX_ATTRS 12

/* One operation under construction: its named attributes. */
typedef struct attrs {
  MlirContext ctx;
  intptr_t count;
  MlirNamedAttribute items[MAX_ATTRS];
} attrs;

static MlirStringRef ref(const char *s) { return mlirStringRefCreateFromCString(s); }

static void put(attrs *a, const char *name, MlirAttribute value) {
  a->items[a->count++] = mlirNamedAttributeGet(mlirIdentifierGet(a->ctx, ref(name)), value);
}

static MlirAttribute str(MlirContext ctx, const char *s) { return mlirStringAttrGet(ctx, ref(s)); }

static MlirAttribute str_array(MlirContext ctx, uint32_t n, const char (*names)[DF_NAME_MAX]) {
  MlirAttribute items[DF_MAX_AXES];
  for (uint32_t i = 0; i < n; i++)
    items[i] = str(ctx, names[i]);
  return mlirArrayAttrGet(ctx, n, items);
}

static MlirOperation create(MlirLocation loc, const char *name, const attrs *a, intptr_t nres,
                            const MlirType *res, intptr_t nops, const MlirValue *ops,
                            MlirRegion *region) {
  MlirOperationState st = mlirOperationStateGet(ref(name), loc);
  if (nres)
    mlirOperationStateAddResults(&st, nres, res);
  if (nops)
    mlirOperationStateAddOperands(&st, nops, ops);
  if (a->count)
    mlirOperationStateAddAttributes(&st, a->count, a->items);
  if (region)
    mlirOperationStateAddOwnedRegions(&st, 1, region);
  return mlirOperationCreate(&st);
}

/* Names end up inside `!df.inter<"...">`; keep them printable as such. */
static df_status check_type_name(const char *name) {
  for (const char *c = name; *c; c++)
    if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
      return df_status_errorf(DF_EINVAL,
                              "intermediate '%s': the name cannot be written in a df type "
                              "(quotes, backslashes and control characters are not allowed)",
                              name);
  return df_status_ok();
}

/* `!df.inter<"T">` ('i') or `!df.list<"T">` ('l') of type index t. */
static df_status inter_type(MlirContext ctx, const df_program *p, int32_t t, char kind,
                            MlirType *out) {
  if (t < 0 || (uint32_t)t >= p->type_count)
    return df_status_errorf(DF_EINVAL, "program '%s': intermediate index %d out of range",
                            p->name, t);
  DF_TRY(check_type_name(p->types[t].name));
  char text[DF_NAME_MAX + 32];
  snprintf(text, sizeof text, "!df.%s<\"%s\">", kind == 'i' ? "inter" : "list",
           p->types[t].name);
  *out = mlirTypeParseGet(ctx, ref(text));
  if (mlirTypeIsNull(*out))
    return df_status_errorf(DF_EINTERNAL, "the df dialect is not loaded: cannot build %s", text);
  return df_status_ok();
}

static df_status element_type(MlirContext ctx, df_dtype t, MlirType *out) {
  switch (t) {
  case DF_DTYPE_BOOL: *out = mlirIntegerTypeGet(ctx, 1); break;
  case DF_DTYPE_INT8: *out = mlirIntegerTypeGet(ctx, 8); break;
  case DF_DTYPE_INT16: *out = mlirIntegerTypeGet(ctx, 16); break;
  case DF_DTYPE_INT32: *out = mlirIntegerTypeGet(ctx, 32); break;
  case DF_DTYPE_INT64: *out = mlirIntegerTypeGet(ctx, 64); break;
  case DF_DTYPE_UINT8: *out = mlirIntegerTypeUnsignedGet(ctx, 8); break;
  case DF_DTYPE_UINT16: *out = mlirIntegerTypeUnsignedGet(ctx, 16); break;
  case DF_DTYPE_UINT32: *out = mlirIntegerTypeUnsignedGet(ctx, 32); break;
  case DF_DTYPE_UINT64: *out = mlirIntegerTypeUnsignedGet(ctx, 64); break;
  case DF_DTYPE_FLOAT16: *out = mlirF16TypeGet(ctx); break;
  case DF_DTYPE_BFLOAT16: *out = mlirBF16TypeGet(ctx); break;
  case DF_DTYPE_FLOAT32: *out = mlirF32TypeGet(ctx); break;
  case DF_DTYPE_FLOAT64: *out = mlirF64TypeGet(ctx); break;
  case DF_DTYPE_FLOAT8_E4M3: *out = mlirFloat8E4M3TypeGet(ctx); break;
  case DF_DTYPE_FLOAT8_E4M3FN: *out = mlirFloat8E4M3FNTypeGet(ctx); break;
  case DF_DTYPE_FLOAT8_E4M3FNUZ: *out = mlirFloat8E4M3FNUZTypeGet(ctx); break;
  case DF_DTYPE_FLOAT8_E5M2: *out = mlirFloat8E5M2TypeGet(ctx); break;
  case DF_DTYPE_FLOAT8_E5M2FNUZ: *out = mlirFloat8E5M2FNUZTypeGet(ctx); break;
  default:
    return df_status_errorf(DF_EINVAL, "dtype %d has no MLIR element type", (int)t);
  }
  return df_status_ok();
}

static df_status build_intermediate(MlirContext ctx, MlirLocation loc, const df_itype *t,
                                    MlirBlock body) {
  DF_TRY(check_type_name(t->name));
  MlirAttribute *names = malloc(sizeof(MlirAttribute) * (t->field_count ? t->field_count : 1));
  MlirAttribute *types = malloc(sizeof(MlirAttribute) * (t->field_count ? t->field_count : 1));
  df_status s = df_status_ok();
  if (!names || !types)
    s = df_status_errorf(DF_ENOMEM, "out of memory building intermediate '%s'", t->name);
  for (uint32_t i = 0; s.code == DF_OK && i < t->field_count; i++) {
    const df_field *f = &t->fields[i];
    MlirType elem;
    s = element_type(ctx, f->dtype, &elem);
    if (s.code != DF_OK) {
      s = df_status_errorf(DF_EINVAL, "intermediate '%s' field '%s': %s", t->name, f->name,
                           s.message);
      break;
    }
    if (f->rank) {
      int64_t shape[DF_MAX_RANK];
      for (uint32_t d = 0; d < f->rank && d < DF_MAX_RANK; d++)
        shape[d] = f->shape[d];
      elem = mlirRankedTensorTypeGet(f->rank, shape, elem, mlirAttributeGetNull());
    }
    names[i] = str(ctx, f->name);
    types[i] = mlirTypeAttrGet(elem);
  }
  if (s.code == DF_OK) {
    attrs a = {.ctx = ctx};
    put(&a, "sym_name", str(ctx, t->name));
    put(&a, "field_names", mlirArrayAttrGet(ctx, t->field_count, names));
    put(&a, "field_types", mlirArrayAttrGet(ctx, t->field_count, types));
    mlirBlockAppendOwnedOperation(body,
                                  create(loc, "df.intermediate", &a, 0, NULL, 0, NULL, NULL));
  }
  free(names);
  free(types);
  return s;
}

static df_status build_handler(MlirContext ctx, MlirLocation loc, const df_program *p,
                               const df_operator *op, MlirBlock body) {
  uint32_t n = op->param_count;
  MlirType *ins = malloc(sizeof(MlirType) * (n ? n : 1));
  MlirAttribute *names = malloc(sizeof(MlirAttribute) * (n ? n : 1));
  df_status s = df_status_ok();
  if (!ins || !names)
    s = df_status_errorf(DF_ENOMEM, "out of memory building handler '%s'", op->name);
  for (uint32_t i = 0; s.code == DF_OK && i < n; i++) {
    const df_param *q = &op->params[i];
    names[i] = str(ctx, q->name);
    switch (q->kind) {
    case DF_PARAM_SCALAR: ins[i] = mlirIntegerTypeGet(ctx, 32); break;
    case DF_PARAM_TENSOR: ins[i] = mlirTypeParseGet(ctx, ref("!df.tensor")); break;
    case DF_PARAM_INTER: s = inter_type(ctx, p, q->type, 'i', &ins[i]); break;
    case DF_PARAM_INTER_LIST: s = inter_type(ctx, p, q->type, 'l', &ins[i]); break;
    default:
      s = df_status_errorf(DF_EINVAL, "handler '%s' parameter '%s' has invalid kind %d",
                           op->name, q->name, (int)q->kind);
    }
  }
  MlirType result;
  if (s.code == DF_OK && op->result_type >= 0)
    s = inter_type(ctx, p, op->result_type, 'i', &result);
  if (s.code == DF_OK && op->kind == DF_OPK_NONE)
    s = df_status_errorf(DF_EINVAL, "handler '%s' has no operator kind", op->name);
  if (s.code == DF_OK) {
    attrs a = {.ctx = ctx};
    put(&a, "sym_name", str(ctx, op->name));
    put(&a, "sym_visibility", str(ctx, "private"));
    put(&a, "function_type", mlirTypeAttrGet(mlirFunctionTypeGet(
                                 ctx, n, ins, op->result_type >= 0 ? 1 : 0, &result)));
    put(&a, "df.kind", str(ctx, df_op_kind_name(op->kind)));
    put(&a, "df.params", mlirArrayAttrGet(ctx, n, names));
    if (op->library[0])
      put(&a, "df.library", str(ctx, op->library));
    if (op->workspace_bytes)
      put(&a, "df.workspace_bytes",
          mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), op->workspace_bytes));
    MlirRegion region = mlirRegionCreate(); /* a declaration: no blocks */
    mlirBlockAppendOwnedOperation(body, create(loc, "func.func", &a, 0, NULL, 0, NULL, &region));
  }
  free(ins);
  free(names);
  return s;
}

static const char *stage_op_name(const df_program *p, const df_stage *st) {
  switch (st->kind) {
  case DF_STAGE_MAP:
    return st->op >= 0 && p->ops[st->op].kind == DF_OPK_ITER ? "df.partial" : "df.map";
  case DF_STAGE_REDUCE: return "df.reduce";
  case DF_STAGE_RESHARED: return "df.reshared";
  case DF_STAGE_FINALIZE: return "df.finalize";
  }
  return NULL;
}

static MlirAttribute bindings(MlirContext ctx, const df_stage *st) {
  MlirNamedAttribute items[32];
  uint32_t n = st->binding_count < 32 ? st->binding_count : 32;
  for (uint32_t i = 0; i < n; i++)
    items[i] = mlirNamedAttributeGet(mlirIdentifierGet(ctx, ref(st->bindings[i].param)),
                                     str(ctx, st->bindings[i].tensor));
  return mlirDictionaryAttrGet(ctx, n, items);
}

static df_status build_stage(MlirContext ctx, MlirLocation loc, const df_program *p,
                             uint32_t i, MlirValue *values, MlirBlock block) {
  const df_stage *st = &p->stages[i];
  const char *name = stage_op_name(p, st);
  if (!name)
    return df_status_errorf(DF_EINVAL, "stage '%s' has invalid kind %d", st->name,
                            (int)st->kind);
  if (st->op >= (int32_t)p->op_count || (st->op < 0 && st->kind != DF_STAGE_RESHARED))
    return df_status_errorf(DF_EINVAL, "stage '%s' (%s) has no handler", st->name,
                            df_stage_kind_name(st->kind));
  if (st->binding_count > 32)
    return df_status_errorf(DF_EUNSUPPORTED, "stage '%s' has more than 32 bindings", st->name);
  attrs a = {.ctx = ctx};
  put(&a, "name", str(ctx, st->name));
  if (st->op >= 0)
    put(&a, "call", mlirFlatSymbolRefAttrGet(ctx, ref(p->ops[st->op].name)));
  if (st->range_axis[0])
    put(&a, "range_axis", str(ctx, st->range_axis));
  if (st->task_arg_count)
    put(&a, "task_args", str_array(ctx, st->task_arg_count, st->task_args));
  if (st->binding_count)
    put(&a, "bind", bindings(ctx, st));
  if (st->kind == DF_STAGE_RESHARED) {
    int32_t logical = st->logical_type >= 0 ? st->logical_type : st->type;
    if (logical >= 0 && (uint32_t)logical < p->type_count)
      put(&a, "output_type", str(ctx, p->types[logical].name));
    put(&a, "output_arity", mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64),
                                               st->output_arity ? st->output_arity : 1));
    if (st->policy[0])
      put(&a, "policy", str(ctx, st->policy));
  }
  MlirValue input;
  intptr_t nops = 0;
  if (st->input < 0 && st->kind != DF_STAGE_MAP)
    return df_status_errorf(DF_EINVAL, "stage '%s' (%s) has no input stage; '%s' needs one",
                            st->name, df_stage_kind_name(st->kind), name);
  if (st->input >= 0) {
    if (st->input >= (int32_t)i || mlirValueIsNull(values[st->input]))
      return df_status_errorf(DF_EINVAL,
                              "stage '%s' consumes stage %d, which is not an earlier stage "
                              "with a result",
                              st->name, st->input);
    input = values[st->input];
    nops = 1;
  }
  MlirType result;
  intptr_t nres = 0;
  if (st->kind != DF_STAGE_FINALIZE) {
    if (st->type < 0)
      return df_status_errorf(DF_EINVAL, "stage '%s' produces no intermediate; '%s' needs one",
                              st->name, name);
    DF_TRY(inter_type(ctx, p, st->type, 'i', &result));
    nres = 1;
  }
  MlirOperation op = create(loc, name, &a, nres, &result, nops, &input, NULL);
  mlirBlockAppendOwnedOperation(block, op);
  values[i] = nres ? mlirOperationGetResult(op, 0) : (MlirValue){NULL};
  return df_status_ok();
}

/* A declared implementation: a (!llvm.ptr) -> () declaration whose body
   comes from linked bitcode, with its capability region. */
static void build_impl(MlirContext ctx, MlirLocation loc, const df_impl *im, MlirBlock body) {
  attrs a = {.ctx = ctx};
  MlirType ptr = mlirLLVMPointerTypeGet(ctx, 0);
  put(&a, "sym_name", str(ctx, im->name));
  put(&a, "sym_visibility", str(ctx, "private"));
  put(&a, "function_type", mlirTypeAttrGet(mlirFunctionTypeGet(ctx, 1, &ptr, 0, NULL)));
  put(&a, "df.implements", mlirFlatSymbolRefAttrGet(ctx, ref(im->op)));
  MlirType i64 = mlirIntegerTypeGet(ctx, 64);
  if (im->iter != DF_IMPL_ITER_ANY)
    put(&a, im->iter == DF_IMPL_ITER_TILES ? "df.tiles" : "df.length",
        mlirIntegerAttrGet(i64, im->iter_value));
  if (im->has_arity)
    put(&a, "df.arity", str(ctx, df_arity_class_name(im->arity)));
  if (im->dtype != DF_DTYPE_INVALID)
    put(&a, "df.dtype", str(ctx, df_dtype_name(im->dtype)));
  if (im->min_arch != DF_ARCH_ANY)
    put(&a, "df.min_arch", str(ctx, df_arch_name(im->min_arch)));
  if (im->general)
    put(&a, "df.general", mlirUnitAttrGet(ctx));
  MlirRegion region = mlirRegionCreate();
  mlirBlockAppendOwnedOperation(body, create(loc, "func.func", &a, 0, NULL, 0, NULL, &region));
}

static df_status build_program(MlirContext ctx, MlirLocation loc, const df_program *p,
                               MlirBlock body) {
  MlirBlock block = mlirBlockCreate(0, NULL, NULL);
  MlirRegion region = mlirRegionCreate();
  mlirRegionAppendOwnedBlock(region, block);
  MlirValue *values = malloc(sizeof(MlirValue) * (p->stage_count ? p->stage_count : 1));
  df_status s = df_status_ok();
  if (!values)
    s = df_status_errorf(DF_ENOMEM, "out of memory building program '%s'", p->name);
  for (uint32_t i = 0; s.code == DF_OK && i < p->stage_count; i++)
    s = build_stage(ctx, loc, p, i, values, block);
  free(values);
  if (s.code != DF_OK) {
    mlirRegionDestroy(region);
    return s;
  }
  attrs none = {.ctx = ctx};
  mlirBlockAppendOwnedOperation(block, create(loc, "func.return", &none, 0, NULL, 0, NULL, NULL));
  MlirNamedAttribute ranges[DF_MAX_AXES];
  for (uint32_t i = 0; i < p->range_count; i++)
    ranges[i] = mlirNamedAttributeGet(mlirIdentifierGet(ctx, ref(p->ranges[i].axis)),
                                      str(ctx, p->ranges[i].source));
  attrs a = {.ctx = ctx};
  put(&a, "sym_name", str(ctx, p->name));
  put(&a, "function_type", mlirTypeAttrGet(mlirFunctionTypeGet(ctx, 0, NULL, 0, NULL)));
  put(&a, "df.task_domain", str_array(ctx, p->axis_count, p->axes));
  put(&a, "df.dynamic_ranges", mlirDictionaryAttrGet(ctx, p->range_count, ranges));
  mlirBlockAppendOwnedOperation(body, create(loc, "func.func", &a, 0, NULL, 0, NULL, &region));
  return df_status_ok();
}

df_status df_program_to_mlir(const df_program *p, MlirContext ctx, MlirOperation *module_out) {
  if (!p || !module_out)
    return df_status_errorf(DF_EINVAL, "df_program_to_mlir: program and output are required");
  *module_out = (MlirOperation){NULL};
  MlirLocation loc = mlirLocationUnknownGet(ctx);
  MlirModule module = mlirModuleCreateEmpty(loc);
  MlirBlock body = mlirModuleGetBody(module);
  df_status s = df_status_ok();
  for (uint32_t i = 0; s.code == DF_OK && i < p->type_count; i++)
    s = build_intermediate(ctx, loc, &p->types[i], body);
  if (s.code == DF_OK)
    s = build_program(ctx, loc, p, body);
  for (uint32_t i = 0; s.code == DF_OK && i < p->op_count; i++)
    s = build_handler(ctx, loc, p, &p->ops[i], body);
  for (uint32_t i = 0; s.code == DF_OK && i < p->impl_count; i++)
    build_impl(ctx, loc, &p->impls[i], body);
  MlirOperation op = mlirModuleGetOperation(module);
  if (s.code == DF_OK && !mlirOperationVerify(op))
    s = df_status_errorf(DF_EINVAL,
                         "program '%s': the generated module does not verify (see the "
                         "diagnostics)",
                         p->name);
  if (s.code != DF_OK) {
    mlirModuleDestroy(module);
    return s;
  }
  *module_out = op;
  return df_status_ok();
}

df_status df_program_to_mlir_text(const df_program *p, char **text) {
  if (!text)
    return df_status_errorf(DF_EINVAL, "df_program_to_mlir_text: no output pointer");
  *text = NULL;
  MlirContext ctx;
  DF_TRY(df_context_create(&ctx));
  MlirOperation module;
  df_status s = df_program_to_mlir(p, ctx, &module);
  if (s.code == DF_OK) {
    s = df_operation_generic_text(module, text);
    mlirOperationDestroy(module);
  }
  mlirContextDestroy(ctx);
  return s;
}
