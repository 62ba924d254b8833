/* Plan <-> IR. Every plan fact is an attribute; sentinels are omitted. */
#include "plan_ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir_util.h"

#define S DF_SENTINEL

MlirAttribute df_i64(MlirContext ctx, int64_t v) {
  return mlirIntegerAttrGet(mlirIntegerTypeGet(ctx, 64), v);
}

MlirAttribute df_str(MlirContext ctx, const char *s) {
  return mlirStringAttrGet(ctx, mlirStringRefCreateFromCString(s));
}

MlirAttribute df_i64_array(MlirContext ctx, const uint32_t *v, uint32_t n) {
  int64_t buf[64] = {0};
  int64_t *vals = n <= 64 ? buf : malloc(sizeof(int64_t) * n);
  if (!vals)
    return mlirAttributeGetNull();
  for (uint32_t i = 0; i < n; i++)
    vals[i] = v[i];
  MlirAttribute a = mlirDenseI64ArrayGet(ctx, n, vals);
  if (vals != buf)
    free(vals);
  return a;
}

void df_set_attr(MlirOperation op, const char *name, MlirAttribute value) {
  mlirOperationSetAttributeByName(op, mlirStringRefCreateFromCString(name), value);
}

/* ---- writing ------------------------------------------------------------ */

typedef struct attrs {
  MlirContext ctx;
  intptr_t n;
  MlirNamedAttribute a[40];
} attrs;

static void put(attrs *b, const char *name, MlirAttribute v) {
  b->a[b->n++] = mlirNamedAttributeGet(
      mlirIdentifierGet(b->ctx, mlirStringRefCreateFromCString(name)), v);
}
static void put_u(attrs *b, const char *name, uint32_t v) {
  if (v != S)
    put(b, name, df_i64(b->ctx, v));
}
static void put_s(attrs *b, const char *name, const char *v) { put(b, name, df_str(b->ctx, v)); }

static void emit(MlirOperation module, const char *name, attrs *b) {
  /* Plan ops point at the module they were scheduled from. */
  MlirLocation loc = mlirOperationGetLocation(module);
  MlirOperationState st = mlirOperationStateGet(mlirStringRefCreateFromCString(name), loc);
  mlirOperationStateAddAttributes(&st, b->n, b->a);
  MlirOperation op = mlirOperationCreate(&st);
  mlirBlockAppendOwnedOperation(mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0)), op);
  b->n = 0;
}

static bool is_plan_op(MlirOperation op) {
  return df_op_is(op, "df.plan") || df_op_is(op, "df.queue") || df_op_is(op, "df.instr") ||
         df_op_is(op, "df.slot") || df_op_is(op, "df.comm") || df_op_is(op, "df.packed");
}

static void erase_plan_ops(MlirOperation module) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  MlirOperation op = mlirBlockGetFirstOperation(body);
  while (!mlirOperationIsNull(op)) {
    MlirOperation next = mlirOperationGetNextInBlock(op);
    if (is_plan_op(op))
      mlirOperationDestroy(op);
    op = next;
  }
}

static void variant_text(const df_variant *v, char *buf, size_t cap) {
  if (v->has_iter && v->iter_mode != DF_ITER_GENERIC)
    snprintf(buf, cap, "%s=%u", df_iter_mode_name(v->iter_mode), v->iter_value);
  else if (v->has_iter)
    snprintf(buf, cap, "generic");
  else if (v->has_arity)
    snprintf(buf, cap, "%s", df_arity_class_name(v->arity));
  else
    snprintf(buf, cap, "none");
}

df_status df_plan_to_ir(MlirOperation module, const df_plan *p) {
  erase_plan_ops(module);
  attrs b = {mlirOperationGetContext(module), 0, {{{0}, {0}}}};
  put_u(&b, "sm_count", p->topology.sm_count);
  put_u(&b, "cluster_size", p->topology.cluster_size);
  put_u(&b, "block_size", p->block_size);
  put_s(&b, "range_axis", p->range_axis);
  put_s(&b, "policy", df_policy_name(p->policy));
  put_s(&b, "reduce_strategy", df_reduce_strategy_name(p->strategy));
  put(&b, "task_lengths", df_i64_array(b.ctx, p->task_lengths, p->task_count));
  put(&b, "task_extents", df_i64_array(b.ctx, p->extents, p->extent_count));
  if (p->pool)
    put_u(&b, "pool", 1);
  emit(module, "df.plan", &b);
  for (uint32_t sm = 0; sm < p->topology.sm_count; sm++) {
    put_u(&b, "sm", sm);
    put(&b, "instrs",
        df_i64_array(b.ctx, p->queue_ids + p->queue_offsets[sm], p->queue_lengths[sm]));
    emit(module, "df.queue", &b);
  }
  for (uint32_t i = 0; i < p->instr_count; i++) {
    const df_instr *in = &p->instrs[i];
    put_u(&b, "id", in->id);
    put_s(&b, "opcode", df_instr_op_name(in->op));
    put_u(&b, "task", in->task);
    put_u(&b, "sm", in->sm);
    if (in->has_range) {
      uint32_t r[2] = {in->range_begin, in->range_end};
      put(&b, "range", df_i64_array(b.ctx, r, 2));
    }
    put(&b, "inputs", df_i64_array(b.ctx, df_plan_instr_inputs(p, in), in->input_count));
    put_u(&b, "output", in->output_slot);
    if (in->stage >= 0)
      put_s(&b, "stage", p->stages[in->stage].name);
    if (in->has_identity) {
      put_u(&b, "operator_id", in->identity.operator_id);
      put_s(&b, "operator_kind", df_op_kind_name(in->identity.kind));
    }
    if (in->has_variant) {
      char v[64];
      variant_text(&in->variant, v, sizeof v);
      put_s(&b, "variant", v);
    }
    if (in->impl && in->impl <= p->impl_count)
      put_s(&b, "impl", p->impl_names[in->impl - 1].name);
    if (in->fused)
      put(&b, "fused", mlirBoolAttrGet(b.ctx, 1));
    emit(module, "df.instr", &b);
  }
  for (uint32_t i = 0; i < p->slot_count; i++) {
    const df_slot *s = &p->slots[i];
    put_u(&b, "id", s->id);
    put_u(&b, "task", s->task);
    put_s(&b, "type", s->type >= 0 ? p->types[s->type].name : "");
    put_s(&b, "role", df_slot_role_name(s->role));
    if (s->stage >= 0)
      put_s(&b, "stage", p->stages[s->stage].name);
    put_u(&b, "producer", s->producer);
    put_u(&b, "shared_storage", s->shared_storage);
    put_u(&b, "global_storage", s->global_storage);
    if (s->private_shared)
      put(&b, "private_shared", mlirBoolAttrGet(b.ctx, 1));
    if (s->scratch_backed)
      put(&b, "scratch_backed", mlirBoolAttrGet(b.ctx, 1));
    if (s->has_scratch_offset)
      put_u(&b, "scratch_offset", s->scratch_offset);
    put_u(&b, "owner", s->owner);
    if (s->gated)
      put(&b, "gated", mlirBoolAttrGet(b.ctx, 1));
    emit(module, "df.slot", &b);
  }
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    put_s(&b, "kind", df_comm_kind_name(c->kind));
    put_u(&b, "src", c->src_instr);
    put_u(&b, "dst", c->dst_instr);
    put_u(&b, "src_slot", c->src_slot);
    put_u(&b, "dst_slot", c->dst_slot);
    put_u(&b, "producer_sm", c->producer_sm);
    put_u(&b, "consumer_sm", c->consumer_sm);
    put_u(&b, "dispatch", c->dispatch_instr);
    put_u(&b, "peer", c->peer_cta_rank);
    put_u(&b, "epoch", c->flag_epoch);
    put_u(&b, "phase", c->barrier_phase);
    if (c->byte_offset || c->byte_count) {
      put_u(&b, "byte_offset", c->byte_offset);
      put_u(&b, "byte_count", c->byte_count);
    }
    if (c->segment_count != 1) {
      put_u(&b, "segment", c->segment_id);
      put_u(&b, "segment_count", c->segment_count);
    }
    put_u(&b, "gate", c->gate_id);
    emit(module, "df.comm", &b);
  }
  return df_status_ok();
}

/* ---- reading ------------------------------------------------------------ */

typedef struct reader {
  MlirOperation op;
  df_status status;
} reader;

/* Read an integer attribute; `def` when absent (S marks required). */
static uint32_t get_u(reader *r, const char *name, uint32_t def, bool required) {
  MlirAttribute a = df_op_attr(r->op, name);
  if (mlirAttributeIsNull(a)) {
    if (required && r->status.code == DF_OK)
      r->status = df_emit(mlirOperationGetLocation(r->op), "'%s' needs an integer attribute '%s'",
                          mlirIdentifierStr(mlirOperationGetName(r->op)).data, name);
    return def;
  }
  int64_t v = mlirAttributeIsAInteger(a) ? mlirIntegerAttrGetValueInt(a) : -1;
  if ((!mlirAttributeIsAInteger(a) || v < 0 || v >= S) && r->status.code == DF_OK)
    r->status = df_emit(mlirOperationGetLocation(r->op),
                        "attribute '%s' must be an integer in [0, 2^32-1)", name);
  return (uint32_t)v;
}

static bool get_flag(reader *r, const char *name) {
  MlirAttribute a = df_op_attr(r->op, name);
  if (mlirAttributeIsNull(a))
    return false;
  if (mlirAttributeIsABool(a))
    return mlirBoolAttrGetValue(a);
  if (mlirAttributeIsAUnit(a))
    return true;
  if (r->status.code == DF_OK)
    r->status = df_emit(mlirOperationGetLocation(r->op), "attribute '%s' must be a bool", name);
  return false;
}

static void get_s(reader *r, const char *name, char *dst, size_t cap, bool required) {
  dst[0] = '\0';
  if (r->status.code != DF_OK)
    return;
  r->status = df_attr_string(r->op, name, required, dst, cap, NULL);
}

/* A dense i64 array into a malloc'ed u32 array. */
static uint32_t *get_array(reader *r, const char *name, uint32_t *n, bool required) {
  *n = 0;
  MlirAttribute a = df_op_attr(r->op, name);
  if (mlirAttributeIsNull(a) || !mlirAttributeIsADenseI64Array(a)) {
    if ((required || !mlirAttributeIsNull(a)) && r->status.code == DF_OK)
      r->status = df_emit(mlirOperationGetLocation(r->op),
                          "attribute '%s' must be an array<i64: ...>", name);
    return NULL;
  }
  intptr_t len = mlirDenseArrayGetNumElements(a);
  uint32_t *v = malloc(sizeof(uint32_t) * (len ? len : 1));
  if (!v) {
    r->status = df_status_errorf(DF_ENOMEM, "out of memory reading '%s'", name);
    return NULL;
  }
  for (intptr_t i = 0; i < len; i++) {
    int64_t e = mlirDenseI64ArrayGetElement(a, i);
    if ((e < 0 || e >= S) && r->status.code == DF_OK)
      r->status = df_emit(mlirOperationGetLocation(r->op),
                          "attribute '%s' entry %ld must be in [0, 2^32-1)", name, (long)i);
    v[i] = (uint32_t)e;
  }
  *n = (uint32_t)len;
  return v;
}

static void lift(reader *r, df_status s) {
  if (df_failed(&s) && r->status.code == DF_OK)
    r->status = df_emit(mlirOperationGetLocation(r->op), "%s", s.message);
}

df_status df_plan_op(MlirOperation module, MlirOperation *out) {
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  uint32_t n = 0;
  for (MlirOperation op = mlirBlockGetFirstOperation(body); !mlirOperationIsNull(op);
       op = mlirOperationGetNextInBlock(op))
    if (df_op_is(op, "df.plan")) {
      if (n++ == 0)
        *out = op;
      else
        return df_emit(mlirOperationGetLocation(op), "a module holds at most one df.plan");
    }
  if (n == 0)
    return df_emit(mlirOperationGetLocation(module),
                   "module has no plan; run --df-schedule first (or write df.plan ops)");
  return df_status_ok();
}

static int32_t stage_index(const df_plan *p, const char *name) {
  for (uint32_t i = 0; i < p->stage_count; i++)
    if (!strcmp(p->stages[i].name, name))
      return (int32_t)i;
  return -1;
}

static int32_t type_index(const df_plan *p, const char *name) {
  for (uint32_t i = 0; i < p->type_count; i++)
    if (!strcmp(p->types[i].name, name))
      return (int32_t)i;
  return -1;
}

static void read_variant(reader *r, df_instr *in) {
  char text[64];
  get_s(r, "variant", text, sizeof text, false);
  if (!text[0] || r->status.code)
    return;
  df_variant *v = &in->variant;
  memset(v, 0, sizeof *v);
  v->base = in->identity;
  v->schema_version = DF_VARIANT_SCHEMA_VERSION;
  in->has_variant = true;
  char *eq = strchr(text, '=');
  df_iter_mode mode;
  if (!strcmp(text, "none"))
    return;
  if (!strcmp(text, "passthrough") || !strcmp(text, "binary") || !strcmp(text, "generic")) {
    bool iter = in->identity.kind == DF_OPK_ITER;
    v->has_iter = iter;
    v->iter_mode = DF_ITER_GENERIC;
    v->has_arity = !iter;
    v->arity = text[0] == 'p' ? DF_ARITY_PASSTHROUGH
               : text[0] == 'b' ? DF_ARITY_BINARY
                                : DF_ARITY_GENERIC;
    if (iter && strcmp(text, "generic"))
      lift(r, df_status_errorf(DF_EINVAL, "iter variant '%s' is not an iter range", text));
    return;
  }
  if (eq) {
    *eq = '\0';
    char *end;
    unsigned long value = strtoul(eq + 1, &end, 10);
    df_status s = df_iter_mode_parse(text, &mode);
    if (s.code == DF_OK && (*end || value == 0 || value >= S))
      s = df_status_errorf(DF_EINVAL, "variant '%s=%s' needs a positive integer value", text,
                           eq + 1);
    lift(r, s);
    v->has_iter = true;
    v->iter_mode = mode;
    v->iter_value = (uint32_t)value;
    return;
  }
  lift(r, df_status_errorf(DF_EINVAL,
                           "unknown variant '%s'; expected none, generic, tile_count=N, "
                           "exact_length=N, passthrough, binary",
                           text));
}

static void read_instr(reader *r, df_plan *p) {
  df_instr in;
  memset(&in, 0, sizeof in);
  uint32_t id = get_u(r, "id", S, true);
  char text[DF_NAME_MAX];
  get_s(r, "opcode", text, sizeof text, true);
  if (r->status.code)
    return;
  lift(r, df_instr_op_parse(text, &in.op));
  in.task = get_u(r, "task", S, false);
  in.sm = get_u(r, "sm", S, true);
  uint32_t n, *range = get_array(r, "range", &n, false);
  if (range) {
    if (n != 2)
      lift(r, df_status_errorf(DF_EINVAL, "range must have two entries [begin, end]"));
    else if (range[0] > range[1])
      lift(r, df_status_errorf(DF_EINVAL, "range begin %u is after its end %u", range[0],
                               range[1]));
    in.has_range = true;
    in.range_begin = n == 2 ? range[0] : 0;
    in.range_end = n == 2 ? range[1] : 0;
    free(range);
  }
  in.output_slot = get_u(r, "output", S, false);
  get_s(r, "stage", text, sizeof text, false);
  in.stage = -1;
  if (text[0] && (in.stage = stage_index(p, text)) < 0)
    lift(r, df_status_errorf(DF_EINVAL, "instruction names unknown stage '%s'", text));
  in.identity.operator_id = get_u(r, "operator_id", S, false);
  get_s(r, "operator_kind", text, sizeof text, false);
  if (in.identity.operator_id != S || text[0]) {
    in.has_identity = true;
    lift(r, df_op_kind_parse(text, &in.identity.kind));
    if (in.identity.operator_id == S)
      lift(r, df_status_errorf(DF_EINVAL, "operator_kind without operator_id"));
  }
  read_variant(r, &in);
  get_s(r, "impl", text, sizeof text, false);
  if (text[0] && r->status.code == DF_OK)
    lift(r, df_plan_intern_impl(p, text, &in.impl));
  in.fused = get_flag(r, "fused");
  uint32_t *inputs = get_array(r, "inputs", &n, false);
  if (r->status.code == DF_OK && id != p->instr_count)
    lift(r, df_status_errorf(DF_EINVAL, "instruction ids must be 0, 1, 2, ... in order; "
                                        "expected %u, got %u", p->instr_count, id));
  if (r->status.code == DF_OK)
    lift(r, df_plan_add_instr(p, &in, inputs, n, NULL));
  free(inputs);
}

static void read_slot(reader *r, df_plan *p) {
  df_slot s;
  memset(&s, 0, sizeof s);
  uint32_t id = get_u(r, "id", S, true);
  s.task = get_u(r, "task", S, false);
  char text[DF_NAME_MAX];
  get_s(r, "type", text, sizeof text, true);
  if (r->status.code == DF_OK && (s.type = type_index(p, text)) < 0)
    lift(r, df_status_errorf(DF_EINVAL, "slot names unknown intermediate '%s'", text));
  get_s(r, "role", text, sizeof text, true);
  if (r->status.code == DF_OK)
    lift(r, df_slot_role_parse(text, &s.role));
  get_s(r, "stage", text, sizeof text, false);
  s.stage = -1;
  if (text[0] && (s.stage = stage_index(p, text)) < 0)
    lift(r, df_status_errorf(DF_EINVAL, "slot names unknown stage '%s'", text));
  s.producer = get_u(r, "producer", S, false);
  s.shared_storage = get_u(r, "shared_storage", S, false);
  s.global_storage = get_u(r, "global_storage", S, false);
  s.private_shared = get_flag(r, "private_shared");
  s.scratch_backed = get_flag(r, "scratch_backed");
  s.has_scratch_offset = !mlirAttributeIsNull(df_op_attr(r->op, "scratch_offset"));
  s.scratch_offset = get_u(r, "scratch_offset", 0, false);
  s.owner = get_u(r, "owner", S, false);
  s.gated = get_flag(r, "gated");
  if (r->status.code == DF_OK && id != p->slot_count)
    lift(r, df_status_errorf(DF_EINVAL, "slot ids must be 0, 1, 2, ... in order; expected "
                                        "%u, got %u", p->slot_count, id));
  if (r->status.code == DF_OK)
    lift(r, df_plan_add_slot(p, &s, NULL));
}

static void read_comm(reader *r, df_plan *p) {
  df_comm c;
  memset(&c, 0, sizeof c);
  char text[DF_NAME_MAX];
  get_s(r, "kind", text, sizeof text, true);
  if (r->status.code == DF_OK)
    lift(r, df_comm_kind_parse(text, &c.kind));
  c.src_instr = get_u(r, "src", S, true);
  c.dst_instr = get_u(r, "dst", S, true);
  c.src_slot = get_u(r, "src_slot", S, true);
  c.dst_slot = get_u(r, "dst_slot", S, true);
  c.producer_sm = get_u(r, "producer_sm", S, true);
  c.consumer_sm = get_u(r, "consumer_sm", S, true);
  c.dispatch_instr = get_u(r, "dispatch", S, false);
  c.peer_cta_rank = get_u(r, "peer", S, false);
  c.flag_epoch = get_u(r, "epoch", 0, false);
  c.barrier_phase = get_u(r, "phase", 0, false);
  c.byte_offset = get_u(r, "byte_offset", 0, false);
  c.byte_count = get_u(r, "byte_count", 0, false);
  c.segment_id = get_u(r, "segment", 0, false);
  c.segment_count = get_u(r, "segment_count", 1, false);
  c.gate_id = get_u(r, "gate", S, false);
  if (r->status.code == DF_OK)
    lift(r, df_plan_add_comm(p, &c));
}

df_status df_plan_from_ir(MlirOperation module, df_plan **out) {
  *out = NULL;
  MlirOperation plan_op;
  DF_TRY(df_plan_op(module, &plan_op));
  df_program *prog;
  DF_TRY(df_program_from_module(module, NULL, NULL, &prog));
  reader r = {plan_op, df_status_ok()};
  df_topology topo = {get_u(&r, "sm_count", S, true), get_u(&r, "cluster_size", 1, false)};
  df_plan *p = NULL;
  if (r.status.code == DF_OK)
    lift(&r, df_plan_create(NULL, topo, &p));
  if (r.status.code == DF_OK)
    lift(&r, df_plan_adopt_program(p, prog));
  df_program_destroy(prog);
  if (p) {
    p->block_size = get_u(&r, "block_size", 1, false);
    get_s(&r, "range_axis", p->range_axis, sizeof p->range_axis, false);
    char text[DF_NAME_MAX];
    /* df-schedule block-size=auto: the choice it recorded */
    get_s(&r, "split_choice", text, sizeof text, false);
    if (!strcmp(text, "auto")) {
      p->split_auto = true;
      p->split_balance_iters = get_u(&r, "balance_iters", 0, false) != 0;
      p->split_defer_reduces = get_u(&r, "defer_reduces", 0, false) != 0;
      p->split_model_us = get_u(&r, "split_model_ns", 0, false) / 1000.0;
    }
    p->pool = get_u(&r, "pool", 0, false) != 0;
    get_s(&r, "policy", text, sizeof text, false);
    if (!strcmp(text, "stage_graph"))
      p->policy = DF_POLICY_STAGE_GRAPH;
    else if (text[0])
      lift(&r, df_policy_parse(text, &p->policy));
    get_s(&r, "reduce_strategy", text, sizeof text, false);
    if (!strcmp(text, "none"))
      p->strategy = DF_REDUCE_NONE;
    else if (text[0])
      lift(&r, df_reduce_strategy_parse(text, &p->strategy));
    uint32_t n, *lengths = get_array(&r, "task_lengths", &n, false);
    if (r.status.code == DF_OK)
      lift(&r, df_plan_set_tasks(p, n, lengths));
    free(lengths);
    uint32_t *ext = get_array(&r, "task_extents", &n, false);
    if (n > DF_MAX_AXES)
      lift(&r, df_status_errorf(DF_EINVAL, "task_extents has more than %d entries", DF_MAX_AXES));
    else if (ext) {
      memcpy(p->extents, ext, sizeof(uint32_t) * n);
      p->extent_count = n;
    }
    free(ext);
  }
  MlirBlock body = mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0));
  uint32_t *qlen = p ? calloc(topo.sm_count, sizeof(uint32_t)) : NULL;
  uint32_t *qids = NULL, qn = 0;
  bool *seen = p ? calloc(topo.sm_count, sizeof(bool)) : NULL;
  uint32_t **qsm = p ? calloc(topo.sm_count, sizeof(uint32_t *)) : NULL;
  if (p && (!qlen || !seen || !qsm))
    r.status = df_status_errorf(DF_ENOMEM, "out of memory reading plan queues");
  for (MlirOperation op = mlirBlockGetFirstOperation(body);
       r.status.code == DF_OK && !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op)) {
    r.op = op;
    if (df_op_is(op, "df.instr"))
      read_instr(&r, p);
    else if (df_op_is(op, "df.slot"))
      read_slot(&r, p);
    else if (df_op_is(op, "df.comm"))
      read_comm(&r, p);
    else if (df_op_is(op, "df.queue")) {
      uint32_t sm = get_u(&r, "sm", S, true);
      if (r.status.code == DF_OK && sm >= topo.sm_count)
        lift(&r, df_status_errorf(DF_EINVAL, "queue of SM %u is outside topology (sm_count=%u)",
                                  sm, topo.sm_count));
      else if (r.status.code == DF_OK && seen[sm])
        lift(&r, df_status_errorf(DF_EINVAL, "SM %u has two queues", sm));
      else if (r.status.code == DF_OK) {
        seen[sm] = true;
        qsm[sm] = get_array(&r, "instrs", &qlen[sm], true);
      }
    }
  }
  if (r.status.code == DF_OK) {
    for (uint32_t sm = 0; sm < topo.sm_count; sm++)
      qn += qlen[sm];
    qids = malloc(sizeof(uint32_t) * (qn ? qn : 1));
    uint32_t k = 0;
    for (uint32_t sm = 0; qids && sm < topo.sm_count; sm++)
      for (uint32_t j = 0; j < qlen[sm]; j++)
        qids[k++] = qsm[sm][j];
    r.op = plan_op;
    lift(&r, qids ? df_plan_set_queues(p, qlen, qids, qn)
                  : df_status_errorf(DF_ENOMEM, "out of memory reading queues"));
  }
  for (uint32_t sm = 0; qsm && sm < topo.sm_count; sm++)
    free(qsm[sm]);
  free(qsm);
  free(qlen);
  free(seen);
  free(qids);
  if (r.status.code != DF_OK) {
    df_plan_destroy(p);
    return r.status;
  }
  *out = p;
  return df_status_ok();
}

df_status df_plan_layout_options(MlirOperation plan_op, df_layout_options *o,
                                 uint32_t *storage, uint32_t cap) {
  memset(o, 0, sizeof *o);
  reader r = {plan_op, df_status_ok()};
  o->hbm_direct_global = get_flag(&r, "hbm_direct_global");
  o->reuse_hbm_flags = get_flag(&r, "reuse_hbm_flags");
  o->per_cta_shared = get_flag(&r, "per_cta_shared");
  o->reuse_dead_shared = get_flag(&r, "reuse_dead_shared");
  uint32_t n, *ids = get_array(&r, "hbm_direct_global_slots", &n, false);
  if (ids) {
    if (n > cap)
      lift(&r, df_status_errorf(DF_EINVAL, "more than %u direct-global slots", cap));
    else
      memcpy(storage, ids, sizeof(uint32_t) * n);
    o->direct_count = n;
    o->direct_slots = storage;
    free(ids);
  }
  return r.status;
}
