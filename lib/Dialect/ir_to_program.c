/* IR -> program model: df.intermediate ops, handler declarations and the
   program function's stage ops become a df_program. */
#include <stdio.h>
#include <string.h>

#include "df/compiler.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Dialect/LLVM.h"
#include "df/impl.h"
#include "mlir_util.h"

#define MAX_STAGES 64

typedef struct convert {
  MlirOperation module;
  df_program *prog;
  MlirValue stage_values[MAX_STAGES];
  MlirLocation stage_locs[MAX_STAGES];
} convert;

static MlirBlock module_body(MlirOperation module) {
  return mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
}

static df_status element_dtype(MlirType t, df_dtype *out) {
  if (mlirTypeIsAF16(t)) *out = DF_DTYPE_FLOAT16;
  else if (mlirTypeIsABF16(t)) *out = DF_DTYPE_BFLOAT16;
  else if (mlirTypeIsAF32(t)) *out = DF_DTYPE_FLOAT32;
  else if (mlirTypeIsAF64(t)) *out = DF_DTYPE_FLOAT64;
  else if (mlirTypeIsAFloat8E4M3(t)) *out = DF_DTYPE_FLOAT8_E4M3;
  else if (mlirTypeIsAFloat8E4M3FN(t)) *out = DF_DTYPE_FLOAT8_E4M3FN;
  else if (mlirTypeIsAFloat8E4M3FNUZ(t)) *out = DF_DTYPE_FLOAT8_E4M3FNUZ;
  else if (mlirTypeIsAFloat8E5M2(t)) *out = DF_DTYPE_FLOAT8_E5M2;
  else if (mlirTypeIsAFloat8E5M2FNUZ(t)) *out = DF_DTYPE_FLOAT8_E5M2FNUZ;
  else if (mlirTypeIsAInteger(t)) {
    unsigned w = mlirIntegerTypeGetWidth(t);
    bool u = mlirIntegerTypeIsUnsigned(t);
    if (w == 1 && !u) *out = DF_DTYPE_BOOL;
    else if (w == 8) *out = u ? DF_DTYPE_UINT8 : DF_DTYPE_INT8;
    else if (w == 16) *out = u ? DF_DTYPE_UINT16 : DF_DTYPE_INT16;
    else if (w == 32) *out = u ? DF_DTYPE_UINT32 : DF_DTYPE_INT32;
    else if (w == 64) *out = u ? DF_DTYPE_UINT64 : DF_DTYPE_INT64;
    else return df_status_errorf(DF_EINVAL, "integers of width %u", w);
  } else {
    return df_status_errorf(DF_EINVAL, "this element type");
  }
  return df_status_ok();
}

static df_status convert_intermediate(convert *c, MlirOperation op) {
  MlirLocation loc = mlirOperationGetLocation(op);
  char name[DF_NAME_MAX];
  DF_TRY(df_attr_string(op, "sym_name", true, name, sizeof name, NULL));
  MlirAttribute names = df_op_attr(op, "field_names"), types = df_op_attr(op, "field_types");
  intptr_t n = mlirArrayAttrGetNumElements(names);
  if (n != mlirArrayAttrGetNumElements(types))
    return df_emit(loc, "intermediate '%s' has %ld field names but %ld field types", name,
                   (long)n, (long)mlirArrayAttrGetNumElements(types));
  if (n == 0 || n > 64)
    return df_emit(loc, "intermediate '%s' must have 1 to 64 fields, has %ld", name, (long)n);
  df_field fields[64];
  memset(fields, 0, sizeof fields);
  for (intptr_t i = 0; i < n; i++) {
    MlirAttribute fn = mlirArrayAttrGetElement(names, i);
    MlirAttribute ft = mlirArrayAttrGetElement(types, i);
    if (!mlirAttributeIsAString(fn) ||
        !df_strref_copy(mlirStringAttrGetValue(fn), fields[i].name, DF_NAME_MAX))
      return df_emit(loc, "intermediate '%s' field %ld: name must be a string of at most 63 "
                          "bytes", name, (long)i);
    if (!mlirAttributeIsAType(ft))
      return df_emit(loc, "intermediate '%s' field '%s': type must be a type attribute", name,
                     fields[i].name);
    MlirType t = mlirTypeAttrGetValue(ft), elem = t;
    if (mlirTypeIsARankedTensor(t)) {
      intptr_t rank = mlirShapedTypeGetRank(t);
      if (rank > DF_MAX_RANK)
        return df_emit(loc, "intermediate '%s' field '%s': rank %ld exceeds %d", name,
                       fields[i].name, (long)rank, DF_MAX_RANK);
      for (intptr_t d = 0; d < rank; d++) {
        int64_t e = mlirShapedTypeGetDimSize(t, d);
        if (e <= 0 || e > UINT32_MAX)
          return df_emit(loc, "intermediate '%s' field '%s': every dimension must be static "
                              "and positive", name, fields[i].name);
        fields[i].shape[d] = (uint32_t)e;
      }
      fields[i].rank = (uint32_t)rank;
      elem = mlirShapedTypeGetElementType(t);
    }
    df_status s = element_dtype(elem, &fields[i].dtype);
    if (df_failed(&s)) {
      char ts[128];
      df_type_to_string(t, ts, sizeof ts);
      return df_emit(loc,
                     "intermediate '%s' field '%s': unsupported dtype '%s' (expected f16, bf16, "
                     "f32, f64, i1, i8-i64, ui8-ui64 or an f8 type, as a scalar or a static "
                     "tensor)",
                     name, fields[i].name, ts);
    }
  }
  df_status s = df_program_add_type(c->prog, name, (uint32_t)n, fields, NULL);
  if (df_failed(&s))
    return df_emit(loc, "%s", s.message);
  return df_status_ok();
}

static df_status intermediate_index(convert *c, MlirLocation loc, MlirType t, char want,
                                    const char *what, int32_t *out) {
  char kind, name[DF_NAME_MAX], text[128];
  df_type_to_string(t, text, sizeof text);
  if (!df_type_classify(t, &kind, name, sizeof name) || kind != want)
    return df_emit(loc, "%s has type %s; expected %s", what, text,
                   want == 'i' ? "!df.inter<\"Name\">" : "!df.list<\"Name\">");
  *out = df_program_find_type(c->prog, name);
  if (*out < 0)
    return df_emit(loc, "%s names unknown intermediate '%s'", what, name);
  return df_status_ok();
}

/* A handler with a body (MLIR handler) takes the df_ctx pointer; its
   parameters are declared by `df.signature`. A declaration's own type is
   its signature. */
static df_status df_handler_signature(MlirOperation fn, const char *name, MlirType *out) {
  MlirLocation loc = mlirOperationGetLocation(fn);
  MlirType ft = mlirTypeAttrGetValue(df_op_attr(fn, "function_type"));
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(fn, 0));
  MlirAttribute sig = df_op_attr(fn, "df.signature");
  if (mlirBlockIsNull(body)) {
    if (!mlirAttributeIsNull(sig))
      return df_emit(loc, "handler '%s' is a declaration; df.signature belongs on handlers "
                          "with a body (a declaration's own type is its signature)", name);
    *out = ft;
    return df_status_ok();
  }
  char text[128];
  df_type_to_string(ft, text, sizeof text);
  if (mlirFunctionTypeGetNumInputs(ft) != 1 || mlirFunctionTypeGetNumResults(ft) != 0 ||
      !mlirTypeIsALLVMPointerType(mlirFunctionTypeGetInput(ft, 0)))
    return df_emit(loc, "handler '%s' has a body, so its type must be (!llvm.ptr) -> () (the "
                        "df_ctx pointer), got %s; declare its parameters in df.signature",
                   name, text);
  if (mlirAttributeIsNull(sig) || !mlirAttributeIsAType(sig) ||
      !mlirTypeIsAFunction(mlirTypeAttrGetValue(sig)))
    return df_emit(loc, "handler '%s' has a body and needs df.signature = (parameter types) "
                        "-> (result types), the signature the program calls", name);
  *out = mlirTypeAttrGetValue(sig);
  return df_status_ok();
}

/* `df.workspace_bytes = N` (any integer type): the handler's per-CTA
   shared-memory workspace (docs/workspace.md). */
static df_status handler_workspace(convert *c, MlirOperation fn, const char *name) {
  MlirLocation loc = mlirOperationGetLocation(fn);
  MlirAttribute a = df_op_attr(fn, "df.workspace_bytes");
  if (mlirAttributeIsNull(a))
    return df_status_ok();
  if (!mlirAttributeIsAInteger(a))
    return df_emit(loc, "handler '%s': df.workspace_bytes must be an integer attribute (the "
                        "workspace size in bytes, e.g. 196608 : i64)", name);
  MlirType t = mlirAttributeGetType(a);
  int64_t bytes;
  if (mlirTypeIsAIndex(t) || mlirIntegerTypeIsSignless(t))
    bytes = mlirIntegerAttrGetValueInt(a);
  else if (mlirIntegerTypeIsSigned(t))
    bytes = mlirIntegerAttrGetValueSInt(a);
  else /* unsigned: values past INT64_MAX read as negative and are refused */
    bytes = (int64_t)mlirIntegerAttrGetValueUInt(a);
  df_status s = df_program_set_handler_workspace(c->prog, name, bytes);
  if (df_failed(&s))
    return df_emit(loc, "%s", s.message);
  return df_status_ok();
}

static df_status convert_handler(convert *c, MlirOperation fn) {
  MlirLocation loc = mlirOperationGetLocation(fn);
  char name[DF_NAME_MAX], kind_name[DF_NAME_MAX];
  DF_TRY(df_attr_string(fn, "sym_name", true, name, sizeof name, NULL));
  DF_TRY(df_attr_string(fn, "df.kind", true, kind_name, sizeof kind_name, NULL));
  df_op_kind kind;
  df_status s = df_op_kind_parse(kind_name, &kind);
  if (df_failed(&s))
    return df_emit(loc, "handler '%s': %s", name, s.message);
  MlirType ft;
  DF_TRY(df_handler_signature(fn, name, &ft));
  intptr_t nin = mlirFunctionTypeGetNumInputs(ft), nout = mlirFunctionTypeGetNumResults(ft);
  char pnames[32][64];
  uint32_t pcount = 0;
  bool present;
  DF_TRY(df_attr_string_array(fn, "df.params", 32, pnames, &pcount, &present));
  if (!present || pcount != nin)
    return df_emit(loc, "handler '%s' has %ld parameters but df.params names %u", name,
                   (long)nin, pcount);
  df_param params[32];
  memset(params, 0, sizeof params);
  for (intptr_t i = 0; i < nin; i++) {
    MlirType t = mlirFunctionTypeGetInput(ft, i);
    memcpy(params[i].name, pnames[i], DF_NAME_MAX);
    params[i].type = -1;
    char k, tn[DF_NAME_MAX], what[160];
    snprintf(what, sizeof what, "handler '%s' parameter '%s'", name, pnames[i]);
    if (mlirTypeIsAInteger(t)) {
      params[i].kind = DF_PARAM_SCALAR;
    } else if (df_type_classify(t, &k, tn, sizeof tn)) {
      params[i].kind = k == 't' ? DF_PARAM_TENSOR : k == 'i' ? DF_PARAM_INTER : DF_PARAM_INTER_LIST;
      if (k != 't')
        DF_TRY(intermediate_index(c, loc, t, k, what, &params[i].type));
    } else {
      char ts[128];
      df_type_to_string(t, ts, sizeof ts);
      return df_emit(loc, "%s has unsupported type %s (expected an integer, !df.tensor, "
                          "!df.inter<...> or !df.list<...>)", what, ts);
    }
  }
  int32_t result = -1;
  if (nout > 1)
    return df_emit(loc, "handler '%s' returns %ld values; at most one intermediate", name,
                   (long)nout);
  if (nout == 1) {
    char what[160];
    snprintf(what, sizeof what, "handler '%s' result", name);
    DF_TRY(intermediate_index(c, loc, mlirFunctionTypeGetResult(ft, 0), 'i', what, &result));
  }
  s = df_program_add_operator(c->prog, name, kind, (uint32_t)nin, params, result, NULL);
  if (df_failed(&s))
    return df_emit(loc, "%s", s.message);
  DF_TRY(handler_workspace(c, fn, name));
  char library[DF_NAME_MAX];
  bool has_library;
  DF_TRY(df_attr_string(fn, "df.library", false, library, sizeof library, &has_library));
  if (has_library) {
    s = df_program_set_library(c->prog, name, library);
    if (df_failed(&s))
      return df_emit(loc, "%s", s.message);
  }
  return df_status_ok();
}

/* The selection df-select-variants recorded on df.plan (architecture and
   the caller's replacements), so a plan blob written from this module lets
   run-time re-plans select the same way. */
static df_status recorded_selection(convert *c, MlirOperation plan) {
  MlirLocation loc = mlirOperationGetLocation(plan);
  char text[4096];
  bool has;
  DF_TRY(df_attr_string(plan, "select_arch", false, text, sizeof text, &has));
  df_status s = df_status_ok();
  if (has) {
    df_arch arch;
    s = df_arch_parse(text, &arch);
    c->prog->select_arch = (uint32_t)arch;
  }
  if (df_failed(&s))
    return df_emit(loc, "df.plan select_arch: %s", s.message);
  DF_TRY(df_attr_string(plan, "select_replace", false, text, sizeof text, &has));
  char *save = NULL;
  for (char *part = has ? strtok_r(text, ";", &save) : NULL; part && s.code == DF_OK;
       part = strtok_r(NULL, ";", &save)) {
    df_impl im;
    s = df_impl_parse(part, &im);
    if (s.code == DF_OK)
      s = df_program_add_impl(c->prog, &im);
    if (s.code == DF_OK)
      c->prog->impls[c->prog->impl_count - 1].origin = DF_IMPL_REPLACEMENT;
  }
  if (df_failed(&s))
    return df_emit(loc, "df.plan select_replace: %s", s.message);
  return df_status_ok();
}

static df_status plan_u32(MlirOperation plan, const char *name, uint32_t *out, bool *has) {
  int64_t v = 0;
  DF_TRY(df_attr_int(plan, name, &v, has));
  if (*has && (v < 0 || v > UINT32_MAX))
    return df_emit(mlirOperationGetLocation(plan), "df.plan %s %lld does not fit uint32", name,
                   (long long)v);
  *out = *has ? (uint32_t)v : 0;
  return df_status_ok();
}

/* How df-schedule made the plan (transfer tile, `auto` memory choice,
   `auto` split), so
   a plan blob written from this module lets run-time re-plans schedule
   the same way. The auto limit is the tighter of the ones the compile
   checked: df-schedule's (auto_limit) and df-layout-slots'
   (shared_memory_limit); 0 = none. */
static df_status recorded_plan_choices(convert *c, MlirOperation plan) {
  MlirLocation loc = mlirOperationGetLocation(plan);
  df_program *p = c->prog;
  bool has;
  DF_TRY(plan_u32(plan, "transfer_tile_bytes", &p->transfer_tile_bytes, &has));
  if (p->transfer_tile_bytes % DF_SLOT_ALIGN)
    return df_emit(loc, "df.plan transfer_tile_bytes %u is not a multiple of %u",
                   p->transfer_tile_bytes, DF_SLOT_ALIGN);
  char text[64];
  DF_TRY(df_attr_string(plan, "split_choice", false, text, sizeof text, &has));
  if (has && strcmp(text, "auto"))
    return df_emit(loc, "df.plan split_choice \"%s\" is not \"auto\"", text);
  p->split_auto = has;
  DF_TRY(df_attr_string(plan, "memory_choice", false, text, sizeof text, &has));
  if (!has)
    return df_status_ok();
  if (strcmp(text, "auto"))
    return df_emit(loc, "df.plan memory_choice \"%s\" is not \"auto\"", text);
  if (p->split_auto)
    return df_emit(loc, "df.plan split_choice and memory_choice \"auto\" exclude each other");
  p->memory_auto = 1;
  uint32_t sched = 0, layout = 0;
  bool has_layout;
  DF_TRY(plan_u32(plan, "auto_limit", &sched, &has));
  DF_TRY(plan_u32(plan, "shared_memory_limit", &layout, &has_layout));
  p->shared_memory_limit = !sched || (layout && layout < sched) ? layout : sched;
  DF_TRY(df_attr_string(plan, "auto_policy", false, text, sizeof text, &has));
  df_policy pol = DF_POLICY_ROUND_ROBIN;
  df_status s = has ? df_policy_parse(text, &pol) : df_status_ok();
  if (df_failed(&s) || pol == DF_POLICY_STAGE_GRAPH)
    return df_emit(loc, "df.plan auto_policy \"%s\" is not round_robin or cluster_local", text);
  p->auto_policy = (uint32_t)pol;
  return df_status_ok();
}

/* An implementation: a func.func with df.implements = @operator and its
   capability region (docs/implementations.md). */
static df_status convert_impl(convert *c, MlirOperation fn) {
  MlirLocation loc = mlirOperationGetLocation(fn);
  df_impl im;
  memset(&im, 0, sizeof im);
  DF_TRY(df_attr_string(fn, "sym_name", true, im.name, sizeof im.name, NULL));
  DF_TRY(df_attr_symbol(fn, "df.implements", im.op, sizeof im.op));
  MlirType ft = mlirTypeAttrGetValue(df_op_attr(fn, "function_type"));
  if (mlirFunctionTypeGetNumInputs(ft) != 1 || mlirFunctionTypeGetNumResults(ft) != 0 ||
      !mlirTypeIsALLVMPointerType(mlirFunctionTypeGetInput(ft, 0))) {
    char text[128];
    df_type_to_string(ft, text, sizeof text);
    return df_emit(loc, "implementation '%s' of '%s' must have type (!llvm.ptr) -> () (the "
                        "df_ctx pointer), got %s", im.name, im.op, text);
  }
  int64_t tiles = 0, length = 0;
  bool has_tiles, has_length, has;
  DF_TRY(df_attr_int(fn, "df.tiles", &tiles, &has_tiles));
  DF_TRY(df_attr_int(fn, "df.length", &length, &has_length));
  if (has_tiles && has_length)
    return df_emit(loc, "implementation '%s' gives both df.tiles and df.length; an iter region "
                        "is one of them", im.name);
  if ((has_tiles && (tiles <= 0 || tiles > UINT32_MAX)) ||
      (has_length && (length <= 0 || length > UINT32_MAX)))
    return df_emit(loc, "implementation '%s': df.%s must be a positive 32-bit integer",
                   im.name, has_tiles ? "tiles" : "length");
  im.iter = has_tiles ? DF_IMPL_ITER_TILES : has_length ? DF_IMPL_ITER_LENGTH : DF_IMPL_ITER_ANY;
  im.iter_value = (uint32_t)(has_tiles ? tiles : length);
  char text[DF_NAME_MAX];
  df_status s;
  DF_TRY(df_attr_string(fn, "df.arity", false, text, sizeof text, &has));
  if (has) {
    s = df_arity_class_for(true, !strcmp(text, "passthrough") ? 1 : !strcmp(text, "binary") ? 2
                                 : !strcmp(text, "generic")   ? 3 : 0, &im.arity);
    if (df_failed(&s))
      return df_emit(loc, "implementation '%s': df.arity must be \"passthrough\", \"binary\" "
                          "or \"generic\", got \"%s\"", im.name, text);
    im.has_arity = true;
  }
  DF_TRY(df_attr_string(fn, "df.dtype", false, text, sizeof text, &has));
  s = has ? df_dtype_parse(text, &im.dtype) : df_status_ok();
  if (df_failed(&s))
    return df_emit(loc, "implementation '%s': df.dtype: %s", im.name, s.message);
  DF_TRY(df_attr_string(fn, "df.min_arch", false, text, sizeof text, &has));
  s = has ? df_arch_parse(text, &im.min_arch) : df_status_ok();
  if (df_failed(&s))
    return df_emit(loc, "implementation '%s': df.min_arch: %s", im.name, s.message);
  MlirAttribute general = df_op_attr(fn, "df.general");
  if (!mlirAttributeIsNull(general) && !mlirAttributeIsAUnit(general))
    return df_emit(loc, "implementation '%s': df.general is a unit attribute", im.name);
  im.general = !mlirAttributeIsNull(general);
  if (!mlirAttributeIsNull(df_op_attr(fn, "df.workspace_bytes")))
    return df_emit(loc, "implementation '%s': df.workspace_bytes belongs on the declaration of "
                        "the operator it implements, '%s' (its implementations run under it)",
                   im.name, im.op);
  s = df_program_add_impl(c->prog, &im);
  if (df_failed(&s))
    return df_emit(loc, "%s", s.message);
  return df_status_ok();
}

static df_status read_bindings(MlirOperation op, df_binding *b, uint32_t *count) {
  MlirAttribute a = df_op_attr(op, "bind");
  *count = 0;
  if (mlirAttributeIsNull(a))
    return df_status_ok();
  MlirLocation loc = mlirOperationGetLocation(op);
  if (!mlirAttributeIsADictionary(a))
    return df_emit(loc, "attribute 'bind' must be a dictionary of parameter = \"tensor\"");
  intptr_t n = mlirDictionaryAttrGetNumElements(a);
  if (n > 32)
    return df_emit(loc, "attribute 'bind' has more than 32 entries");
  for (intptr_t i = 0; i < n; i++) {
    MlirNamedAttribute e = mlirDictionaryAttrGetElement(a, i);
    if (!mlirAttributeIsAString(e.attribute))
      return df_emit(loc, "binding of '%s' must be a string tensor name",
                     mlirIdentifierStr(e.name).data);
    if (!df_strref_copy(mlirIdentifierStr(e.name), b[i].param, DF_NAME_MAX) ||
        !df_strref_copy(mlirStringAttrGetValue(e.attribute), b[i].tensor, DF_NAME_MAX))
      return df_emit(loc, "a binding name is longer than 63 bytes");
  }
  *count = (uint32_t)n;
  return df_status_ok();
}

static int32_t stage_of_value(convert *c, MlirValue v) {
  for (uint32_t i = 0; i < c->prog->stage_count; i++)
    if (mlirValueEqual(c->stage_values[i], v))
      return (int32_t)i;
  return -1;
}

static df_status convert_stage(convert *c, MlirOperation op) {
  MlirLocation loc = mlirOperationGetLocation(op);
  const char *opname = mlirIdentifierStr(mlirOperationGetName(op)).data + 3; /* "df." */
  if (c->prog->stage_count == MAX_STAGES)
    return df_emit(loc, "more than %d stages", MAX_STAGES);
  df_stage st;
  memset(&st, 0, sizeof st);
  st.op = st.input = st.type = st.logical_type = -1;
  df_binding bindings[32];
  if (df_op_is(op, "df.partial") || df_op_is(op, "df.map"))
    st.kind = DF_STAGE_MAP;
  else if (df_op_is(op, "df.reshared"))
    st.kind = DF_STAGE_RESHARED;
  else if (df_op_is(op, "df.reduce"))
    st.kind = DF_STAGE_REDUCE;
  else
    st.kind = DF_STAGE_FINALIZE;
  char call[DF_NAME_MAX] = "";
  if (st.kind != DF_STAGE_RESHARED) {
    DF_TRY(df_attr_symbol(op, "call", call, sizeof call));
    st.op = df_program_find_operator(c->prog, call);
    if (st.op < 0)
      return df_emit(loc, "'%s' calls unknown handler @%s (declare it as a func.func with "
                          "df.kind)", mlirIdentifierStr(mlirOperationGetName(op)).data, call);
  }
  bool present;
  DF_TRY(df_attr_string(op, "name", false, st.name, sizeof st.name, &present));
  if (!present)
    snprintf(st.name, sizeof st.name, "%s",
             st.kind == DF_STAGE_MAP && df_op_is(op, "df.map") ? call : opname);
  DF_TRY(df_attr_string(op, "range_axis", false, st.range_axis, sizeof st.range_axis, NULL));
  DF_TRY(df_attr_string_array(op, "task_args", DF_MAX_AXES, st.task_args, &st.task_arg_count,
                              NULL));
  DF_TRY(read_bindings(op, bindings, &st.binding_count));
  st.bindings = bindings;
  if (mlirOperationGetNumOperands(op) > 0) {
    st.input = stage_of_value(c, mlirOperationGetOperand(op, 0));
    if (st.input < 0)
      return df_emit(loc, "the input of stage '%s' is not produced by a df stage", st.name);
  }
  if (mlirOperationGetNumResults(op) > 0) {
    char what[128];
    snprintf(what, sizeof what, "the result of stage '%s'", st.name);
    DF_TRY(intermediate_index(c, loc, mlirValueGetType(mlirOperationGetResult(op, 0)), 'i',
                              what, &st.type));
  }
  if (st.kind == DF_STAGE_RESHARED) {
    char logical[DF_NAME_MAX];
    DF_TRY(df_attr_string(op, "output_type", false, logical, sizeof logical, &present));
    st.logical_type = st.type;
    if (present) {
      st.logical_type = df_program_find_type(c->prog, logical);
      if (st.logical_type < 0)
        return df_emit(loc, "reshared stage '%s': output_type names unknown intermediate '%s'",
                       st.name, logical);
    }
    int64_t arity = 1;
    DF_TRY(df_attr_int(op, "output_arity", &arity, NULL));
    if (arity <= 0 || arity > UINT32_MAX)
      return df_emit(loc, "reshared stage '%s': output_arity must be positive, got %lld",
                     st.name, (long long)arity);
    st.output_arity = (uint32_t)arity;
    DF_TRY(df_attr_string(op, "policy", false, st.policy, sizeof st.policy, &present));
    if (!present)
      snprintf(st.policy, sizeof st.policy, "hbm_all_gather");
  }
  int32_t index;
  df_status s = df_program_add_stage(c->prog, &st, &index);
  if (df_failed(&s))
    return df_emit(loc, "%s", s.message);
  c->stage_locs[index] = loc;
  c->stage_values[index] = mlirOperationGetNumResults(op) ? mlirOperationGetResult(op, 0)
                                                          : (MlirValue){NULL};
  return df_status_ok();
}

df_status df_find_program(MlirOperation module, const char *name, MlirOperation *out) {
  MlirOperation found = {NULL};
  uint32_t count = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(module_body(module));
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    if (!df_op_is(op, "func.func") || mlirAttributeIsNull(df_op_attr(op, "df.task_domain")))
      continue;
    MlirAttribute sym = df_op_attr(op, "sym_name");
    if (name && !df_strref_eq(mlirStringAttrGetValue(sym), name))
      continue;
    count++;
    if (mlirOperationIsNull(found))
      found = op;
  }
  if (count == 0)
    return name ? df_emit(mlirOperationGetLocation(module),
                          "module has no program function '%s' (a func.func with "
                          "df.task_domain)", name)
                : df_emit(mlirOperationGetLocation(module),
                          "module has no program: expected a func.func with df.task_domain");
  if (count > 1)
    return df_emit(mlirOperationGetLocation(module),
                   "module has %u program functions; name the one to use", count);
  *out = found;
  return df_status_ok();
}

static df_status convert_program(convert *c, MlirOperation fn) {
  MlirLocation loc = mlirOperationGetLocation(fn);
  char axes[DF_MAX_AXES + 1][64];
  uint32_t n;
  df_status s = df_attr_string_array(fn, "df.task_domain", DF_MAX_AXES, axes, &n, NULL);
  if (df_failed(&s))
    return s;
  for (uint32_t i = 0; i < n; i++) {
    s = df_program_add_axis(c->prog, axes[i]);
    if (df_failed(&s))
      return df_emit(loc, "%s", s.message);
  }
  MlirAttribute ranges = df_op_attr(fn, "df.dynamic_ranges");
  if (!mlirAttributeIsNull(ranges)) {
    if (!mlirAttributeIsADictionary(ranges))
      return df_emit(loc, "df.dynamic_ranges must be a dictionary of axis = \"length source\"");
    for (intptr_t i = 0; i < mlirDictionaryAttrGetNumElements(ranges); i++) {
      MlirNamedAttribute e = mlirDictionaryAttrGetElement(ranges, i);
      char axis[DF_NAME_MAX], source[DF_NAME_MAX];
      if (!mlirAttributeIsAString(e.attribute) ||
          !df_strref_copy(mlirIdentifierStr(e.name), axis, sizeof axis) ||
          !df_strref_copy(mlirStringAttrGetValue(e.attribute), source, sizeof source))
        return df_emit(loc, "df.dynamic_ranges entries must map an axis to a string of at "
                            "most 63 bytes");
      s = df_program_add_range(c->prog, axis, source);
      if (df_failed(&s))
        return df_emit(loc, "%s", s.message);
    }
  }
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(fn, 0));
  if (mlirBlockIsNull(body))
    return df_emit(loc, "program '%s' has no body", c->prog->name);
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op)) {
    MlirStringRef opname = mlirIdentifierStr(mlirOperationGetName(op));
    if (df_op_is(op, "func.return"))
      continue;
    if (opname.length > 3 && memcmp(opname.data, "df.", 3) == 0 &&
        !df_op_is(op, "df.intermediate")) {
      DF_TRY(convert_stage(c, op));
      continue;
    }
    return df_emit(mlirOperationGetLocation(op),
                   "'%.*s' is not allowed in a program body; expected df stage ops and return",
                   (int)opname.length, opname.data);
  }
  int32_t bad;
  s = df_program_validate_at(c->prog, &bad);
  if (df_failed(&s))
    return df_emit(bad >= 0 ? c->stage_locs[bad] : loc, "%s", s.message);
  return df_status_ok();
}

df_status df_program_from_module(MlirOperation module, const char *name,
                                 const df_allocator *alloc, df_program **out) {
  *out = NULL;
  MlirOperation fn;
  DF_TRY(df_find_program(module, name, &fn));
  char pname[DF_NAME_MAX];
  DF_TRY(df_attr_string(fn, "sym_name", true, pname, sizeof pname, NULL));
  convert c;
  memset(&c, 0, sizeof c);
  c.module = module;
  DF_TRY(df_program_create(alloc, pname, &c.prog));
  df_status s = df_status_ok();
  MlirBlock body = module_body(module);
  for (MlirOperation op = mlirBlockGetFirstOperation(body);
       s.code == DF_OK && !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    if (df_op_is(op, "df.intermediate"))
      s = convert_intermediate(&c, op);
  for (MlirOperation op = mlirBlockGetFirstOperation(body);
       s.code == DF_OK && !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    if (df_op_is(op, "func.func") && !mlirAttributeIsNull(df_op_attr(op, "df.kind")))
      s = convert_handler(&c, op);
  for (MlirOperation op = mlirBlockGetFirstOperation(body);
       s.code == DF_OK && !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    if (df_op_is(op, "func.func") && !mlirAttributeIsNull(df_op_attr(op, "df.implements")))
      s = convert_impl(&c, op);
  if (s.code == DF_OK)
    s = convert_program(&c, fn);
  for (MlirOperation op = mlirBlockGetFirstOperation(body);
       s.code == DF_OK && !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    if (df_op_is(op, "df.plan"))
      s = recorded_selection(&c, op);
  for (MlirOperation op = mlirBlockGetFirstOperation(body);
       s.code == DF_OK && !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))
    if (df_op_is(op, "df.plan"))
      s = recorded_plan_choices(&c, op);
  if (df_failed(&s)) {
    df_program_destroy(c.prog);
    return s;
  }
  *out = c.prog;
  return df_status_ok();
}
