/* The program model: builders and whole-program rules (REFERENCE 1.1). */
#include <string.h>

#include "df/kernel_plan.h"
#include "df/program.h"
#include "vec.h"

static const char *const stage_kind_names[] = {"map", "reduce", "reshared", "finalize"};
static const char *const op_kind_names[] = {"iter", "map", "reduce", "finalize", "none"};

const char *df_stage_kind_name(df_stage_kind k) {
  return (unsigned)k < 4 ? stage_kind_names[k] : "invalid";
}

const char *df_op_kind_name(df_op_kind k) {
  return (unsigned)k < 5 ? op_kind_names[k] : "invalid";
}

df_status df_op_kind_parse(const char *name, df_op_kind *out) {
  for (int i = 0; i < 4; i++)
    if (strcmp(name, op_kind_names[i]) == 0) {
      *out = (df_op_kind)i;
      return df_status_ok();
    }
  return df_status_errorf(DF_EINVAL,
                          "Unsupported Dataflow handler operator_kind '%s'; expected one "
                          "of: finalize, iter, map, reduce",
                          name);
}

bool df_operator_is_associative(const df_operator *op) {
  uint32_t inters = 0;
  for (uint32_t i = 0; i < op->param_count; i++) {
    if (op->params[i].kind == DF_PARAM_INTER_LIST)
      return false;
    inters += op->params[i].kind == DF_PARAM_INTER;
  }
  return inters == 2;
}

df_status df_program_create(const df_allocator *alloc, const char *name,
                            df_program **out) {
  *out = NULL;
  df_allocator a = df_allocator_or_default(alloc);
  df_program *p = df_alloc(&a, sizeof *p);
  if (!p)
    return df_status_errorf(DF_ENOMEM, "out of memory creating a program");
  memset(p, 0, sizeof *p);
  p->alloc = a;
  df_status s = df_name_copy(p->name, sizeof p->name, name, "program name");
  if (df_failed(&s)) {
    df_free(&a, p);
    return s;
  }
  *out = p;
  return df_status_ok();
}

void df_program_destroy(df_program *p) {
  if (!p)
    return;
  df_allocator a = p->alloc;
  for (uint32_t i = 0; i < p->type_count; i++)
    df_free(&a, p->types[i].fields);
  for (uint32_t i = 0; i < p->op_count; i++)
    df_free(&a, p->ops[i].params);
  for (uint32_t i = 0; i < p->stage_count; i++)
    df_free(&a, p->stages[i].bindings);
  df_free(&a, p->types);
  df_free(&a, p->ops);
  df_free(&a, p->stages);
  df_free(&a, p->impls);
  df_free(&a, p);
}

df_status df_program_add_axis(df_program *p, const char *axis) {
  if (p->axis_count == DF_MAX_AXES)
    return df_status_errorf(DF_EUNSUPPORTED, "program '%s': more than %d task axes",
                            p->name, DF_MAX_AXES);
  for (uint32_t i = 0; i < p->axis_count; i++)
    if (strcmp(p->axes[i], axis) == 0)
      return df_status_errorf(DF_EINVAL, "program '%s': task axis '%s' is declared twice",
                              p->name, axis);
  DF_TRY(df_name_copy(p->axes[p->axis_count], DF_NAME_MAX, axis, "task axis name"));
  p->axis_count++;
  return df_status_ok();
}

df_status df_program_add_range(df_program *p, const char *axis, const char *source) {
  if (p->range_count == DF_MAX_AXES)
    return df_status_errorf(DF_EUNSUPPORTED, "program '%s': more than %d dynamic ranges",
                            p->name, DF_MAX_AXES);
  for (uint32_t i = 0; i < p->range_count; i++)
    if (strcmp(p->ranges[i].axis, axis) == 0)
      return df_status_errorf(DF_EINVAL,
                              "program '%s': dynamic range '%s' is declared twice", p->name,
                              axis);
  df_range_decl *r = &p->ranges[p->range_count];
  DF_TRY(df_name_copy(r->axis, DF_NAME_MAX, axis, "dynamic range axis"));
  DF_TRY(df_name_copy(r->source, DF_NAME_MAX, source, "dynamic range source"));
  p->range_count++;
  return df_status_ok();
}

df_status df_program_add_type(df_program *p, const char *name, uint32_t field_count,
                              const df_field *fields, int32_t *index_out) {
  if (df_program_find_type(p, name) >= 0)
    return df_status_errorf(DF_EINVAL, "intermediate '%s' is declared twice", name);
  if (field_count == 0)
    return df_status_errorf(DF_EINVAL, "intermediate '%s' has no fields", name);
  for (uint32_t i = 0; i < field_count; i++) {
    if (fields[i].dtype <= DF_DTYPE_INVALID || fields[i].dtype >= DF_DTYPE_COUNT)
      return df_status_errorf(DF_EINVAL, "intermediate '%s' field '%s' has an unsupported dtype",
                              name, fields[i].name);
    if (fields[i].rank > DF_MAX_RANK)
      return df_status_errorf(DF_EUNSUPPORTED,
                              "intermediate '%s' field '%s' has rank %u, more than %d", name,
                              fields[i].name, fields[i].rank, DF_MAX_RANK);
    for (uint32_t j = 0; j < i; j++)
      if (strcmp(fields[i].name, fields[j].name) == 0)
        return df_status_errorf(DF_EINVAL, "intermediate '%s' has two fields named '%s'",
                                name, fields[i].name);
  }
  uint32_t cap = p->type_count;
  DF_TRY(df_vec_reserve(&p->alloc, (void **)&p->types, &cap, p->type_count + 1,
                        sizeof *p->types));
  df_itype *t = &p->types[p->type_count];
  memset(t, 0, sizeof *t);
  DF_TRY(df_name_copy(t->name, DF_NAME_MAX, name, "intermediate name"));
  t->fields = df_alloc(&p->alloc, sizeof(df_field) * field_count);
  if (!t->fields)
    return df_status_errorf(DF_ENOMEM, "out of memory adding intermediate '%s'", name);
  memcpy(t->fields, fields, sizeof(df_field) * field_count);
  t->field_count = field_count;
  if (df_itype_slot_bytes(t) == 0) {
    df_free(&p->alloc, t->fields);
    return df_status_errorf(DF_EINVAL, "intermediate '%s' is too large for a slot", name);
  }
  if (index_out)
    *index_out = (int32_t)p->type_count;
  p->type_count++;
  return df_status_ok();
}

df_status df_program_add_operator(df_program *p, const char *name, df_op_kind kind,
                                  uint32_t param_count, const df_param *params,
                                  int32_t result_type, int32_t *index_out) {
  if (df_program_find_operator(p, name) >= 0)
    return df_status_errorf(DF_EINVAL, "handler '%s' is declared twice", name);
  if ((unsigned)kind > DF_OPK_FINALIZE)
    return df_status_errorf(DF_EINVAL, "handler '%s' has no operator kind", name);
  for (uint32_t i = 0; i < param_count; i++) {
    bool typed = params[i].kind == DF_PARAM_INTER || params[i].kind == DF_PARAM_INTER_LIST;
    if (typed && (params[i].type < 0 || (uint32_t)params[i].type >= p->type_count))
      return df_status_errorf(DF_EINVAL, "handler '%s' parameter '%s' names no intermediate",
                              name, params[i].name);
  }
  if (result_type >= (int32_t)p->type_count)
    return df_status_errorf(DF_EINVAL, "handler '%s' result names no intermediate", name);
  uint32_t cap = p->op_count;
  DF_TRY(df_vec_reserve(&p->alloc, (void **)&p->ops, &cap, p->op_count + 1, sizeof *p->ops));
  df_operator *op = &p->ops[p->op_count];
  memset(op, 0, sizeof *op);
  DF_TRY(df_name_copy(op->name, DF_NAME_MAX, name, "handler name"));
  op->kind = kind;
  op->result_type = result_type;
  if (param_count) {
    op->params = df_alloc(&p->alloc, sizeof(df_param) * param_count);
    if (!op->params)
      return df_status_errorf(DF_ENOMEM, "out of memory adding handler '%s'", name);
    memcpy(op->params, params, sizeof(df_param) * param_count);
  }
  op->param_count = param_count;
  if (index_out)
    *index_out = (int32_t)p->op_count;
  p->op_count++;
  return df_status_ok();
}

df_status df_program_set_handler_workspace(df_program *p, const char *name, int64_t bytes) {
  int32_t i = df_program_find_operator(p, name);
  if (i < 0)
    return df_status_errorf(DF_EINVAL, "program '%s' has no handler '%s' to give a workspace",
                            p->name, name);
  if (bytes < 0 || bytes > (int64_t)DF_WORKSPACE_MAX_BYTES)
    return df_status_errorf(DF_EINVAL,
                            "handler '%s': df.workspace_bytes %lld must be 0 to %u (227 KiB, the "
                            "sm_90 dynamic shared memory per block)",
                            name, (long long)bytes, DF_WORKSPACE_MAX_BYTES);
  p->ops[i].workspace_bytes = (uint32_t)bytes;
  return df_status_ok();
}

uint32_t df_program_workspace_bytes(const df_program *p) {
  uint32_t w = 0;
  for (uint32_t i = 0; p && i < p->stage_count; i++) {
    int32_t op = p->stages[i].op;
    if (op >= 0 && (uint32_t)op < p->op_count && p->ops[op].workspace_bytes > w)
      w = p->ops[op].workspace_bytes;
  }
  return w;
}

df_status df_program_add_stage(df_program *p, const df_stage *stage, int32_t *index_out) {
  if (df_program_find_stage(p, stage->name) >= 0)
    return df_status_errorf(DF_EINVAL, "stage name '%s' is used twice", stage->name);
  uint32_t cap = p->stage_count;
  DF_TRY(df_vec_reserve(&p->alloc, (void **)&p->stages, &cap, p->stage_count + 1,
                        sizeof *p->stages));
  df_stage *d = &p->stages[p->stage_count];
  *d = *stage;
  d->bindings = NULL;
  if (stage->binding_count) {
    d->bindings = df_alloc(&p->alloc, sizeof(df_binding) * stage->binding_count);
    if (!d->bindings)
      return df_status_errorf(DF_ENOMEM, "out of memory adding stage '%s'", stage->name);
    memcpy(d->bindings, stage->bindings, sizeof(df_binding) * stage->binding_count);
  }
  if (index_out)
    *index_out = (int32_t)p->stage_count;
  p->stage_count++;
  return df_status_ok();
}

int32_t df_program_find_type(const df_program *p, const char *name) {
  for (uint32_t i = 0; i < p->type_count; i++)
    if (strcmp(p->types[i].name, name) == 0)
      return (int32_t)i;
  return -1;
}

int32_t df_program_find_operator(const df_program *p, const char *name) {
  for (uint32_t i = 0; i < p->op_count; i++)
    if (strcmp(p->ops[i].name, name) == 0)
      return (int32_t)i;
  return -1;
}

int32_t df_program_find_stage(const df_program *p, const char *name) {
  for (uint32_t i = 0; i < p->stage_count; i++)
    if (strcmp(p->stages[i].name, name) == 0)
      return (int32_t)i;
  return -1;
}

bool df_program_is_stage_graph(const df_program *p) {
  for (uint32_t i = 0; i < p->stage_count; i++)
    if (p->stages[i].kind == DF_STAGE_RESHARED)
      return true;
  return false;
}

int32_t df_program_operator_id(const df_program *p, uint32_t stage) {
  if (stage >= p->stage_count || p->stages[stage].op < 0)
    return -1;
  int32_t id = 0;
  for (uint32_t i = 0; i < stage; i++)
    if (p->stages[i].op >= 0)
      id++;
  return id;
}

df_op_kind df_program_identity_kind(const df_program *p, uint32_t stage) {
  const df_stage *s = &p->stages[stage];
  if (s->op < 0)
    return DF_OPK_NONE;
  switch (s->kind) {
  case DF_STAGE_MAP: return p->ops[s->op].kind;
  case DF_STAGE_REDUCE: return DF_OPK_REDUCE;
  case DF_STAGE_FINALIZE: return DF_OPK_FINALIZE;
  case DF_STAGE_RESHARED: break;
  }
  return DF_OPK_NONE;
}

int32_t df_program_partial_stage(const df_program *p) {
  for (uint32_t i = 0; i < p->stage_count; i++) {
    const df_stage *s = &p->stages[i];
    if (s->kind == DF_STAGE_MAP && s->op >= 0 && p->ops[s->op].kind == DF_OPK_ITER)
      return (int32_t)i;
  }
  return -1;
}

const char *df_stage_binding(const df_stage *s, const char *param) {
  for (uint32_t i = 0; i < s->binding_count; i++)
    if (strcmp(s->bindings[i].param, param) == 0)
      return s->bindings[i].tensor;
  return NULL;
}

uint32_t df_program_tensor_args(const df_program *p, const char **names, uint32_t cap) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < p->stage_count; i++) {
    const df_stage *s = &p->stages[i];
    if (s->op < 0)
      continue;
    const df_operator *op = &p->ops[s->op];
    for (uint32_t j = 0; j < op->param_count; j++) {
      if (op->params[j].kind != DF_PARAM_TENSOR)
        continue;
      const char *bound = df_stage_binding(s, op->params[j].name);
      const char *name = bound ? bound : op->params[j].name;
      bool seen = false;
      for (uint32_t k = 0; k < n && k < cap; k++)
        seen |= strcmp(names[k], name) == 0;
      if (seen)
        continue;
      if (n < cap)
        names[n] = name;
      n++;
    }
  }
  return n;
}

/* The intermediate type a stage's handler consumes from upstream: the first
   INTER/INTER_LIST parameter. -1 if none. */
static int32_t consumed_type(const df_operator *op, df_param_kind *kind) {
  for (uint32_t i = 0; i < op->param_count; i++)
    if (op->params[i].kind == DF_PARAM_INTER || op->params[i].kind == DF_PARAM_INTER_LIST) {
      if (kind)
        *kind = op->params[i].kind;
      return op->params[i].type;
    }
  return -1;
}

static const char *type_name(const df_program *p, int32_t t) {
  return t >= 0 && (uint32_t)t < p->type_count ? p->types[t].name : "<none>";
}

static bool has_range(const df_program *p, const char *axis) {
  for (uint32_t i = 0; i < p->range_count; i++)
    if (strcmp(p->ranges[i].axis, axis) == 0)
      return true;
  return false;
}

#define FAIL_AT(idx, ...)                                                      \
  do {                                                                         \
    *bad_stage = (idx);                                                        \
    return df_status_errorf(DF_EINVAL, __VA_ARGS__);                           \
  } while (0)

static df_status check_stage_local(const df_program *p, uint32_t i, int32_t *bad_stage) {
  const df_stage *s = &p->stages[i];
  if (s->input >= (int32_t)i)
    FAIL_AT(i, "stage '%s' depends on stage %d, which is not an earlier stage", s->name,
            s->input);
  if (s->task_arg_count && s->task_arg_count != p->axis_count)
    FAIL_AT(i, "stage '%s': task_args has %u entries but the task domain has rank %u",
            s->name, s->task_arg_count, p->axis_count);
  if (s->range_axis[0] && !has_range(p, s->range_axis))
    FAIL_AT(i, "stage '%s': range axis '%s' is not a declared dynamic range", s->name,
            s->range_axis);
  if (s->kind == DF_STAGE_RESHARED) {
    if (s->op >= 0)
      FAIL_AT(i, "reshared stage '%s' must not call a handler", s->name);
    if (s->input < 0)
      FAIL_AT(i, "reshared stage '%s' has no input stage", s->name);
    if (s->output_arity == 0)
      FAIL_AT(i, "reshared stage '%s': output_arity must be positive", s->name);
    if (strcmp(s->policy, "hbm_all_gather") && strcmp(s->policy, "cluster_shared_all_gather") &&
        strcmp(s->policy, "cluster_shared_pull_ring"))
      FAIL_AT(i,
              "reshared stage '%s': unknown policy '%s'; expected one of: hbm_all_gather, "
              "cluster_shared_all_gather, cluster_shared_pull_ring",
              s->name, s->policy);
    return df_status_ok();
  }
  if (s->op < 0)
    FAIL_AT(i, "stage '%s' (%s) has no handler", s->name, df_stage_kind_name(s->kind));
  for (uint32_t j = 0; j < i; j++)
    if (p->stages[j].op == s->op)
      FAIL_AT(i, "handler '%s' is used by two stages ('%s' and '%s')", p->ops[s->op].name,
              p->stages[j].name, s->name);
  const df_operator *op = &p->ops[s->op];
  static const df_op_kind expected[] = {[DF_STAGE_REDUCE] = DF_OPK_REDUCE,
                                        [DF_STAGE_FINALIZE] = DF_OPK_FINALIZE};
  if (s->kind == DF_STAGE_MAP && op->kind != DF_OPK_ITER && op->kind != DF_OPK_MAP)
    FAIL_AT(i, "map stage '%s' calls %s handler '%s'; expected an iter or map handler",
            s->name, df_op_kind_name(op->kind), op->name);
  if (s->kind != DF_STAGE_MAP && op->kind != expected[s->kind])
    FAIL_AT(i, "%s stage '%s' calls %s handler '%s'", df_stage_kind_name(s->kind), s->name,
            df_op_kind_name(op->kind), op->name);
  if (s->kind != DF_STAGE_FINALIZE && s->type != op->result_type)
    FAIL_AT(i, "stage '%s' produces '%s' but handler '%s' returns '%s'", s->name,
            type_name(p, s->type), op->name, type_name(p, op->result_type));
  for (uint32_t b = 0; b < s->binding_count; b++) {
    bool found = false;
    for (uint32_t j = 0; j < op->param_count; j++)
      found |= op->params[j].kind == DF_PARAM_TENSOR &&
               strcmp(op->params[j].name, s->bindings[b].param) == 0;
    if (!found)
      FAIL_AT(i, "stage '%s' binds '%s', which is not a tensor parameter of handler '%s'",
              s->name, s->bindings[b].param, op->name);
  }
  if (s->input >= 0) {
    int32_t want = consumed_type(op, NULL);
    int32_t have = p->stages[s->input].type;
    if (want < 0)
      FAIL_AT(i, "stage '%s' consumes stage '%s' but handler '%s' takes no intermediate",
              s->name, p->stages[s->input].name, op->name);
    if (want != have)
      FAIL_AT(i,
              "stage '%s': stream type mismatch: '%s' produces '%s' but handler '%s' "
              "consumes '%s'",
              s->name, p->stages[s->input].name, type_name(p, have), op->name,
              type_name(p, want));
  }
  return df_status_ok();
}

static df_status check_pipeline(const df_program *p, int32_t *bad_stage) {
  int32_t partial = -1;
  for (uint32_t i = 0; i < p->stage_count; i++) {
    const df_stage *s = &p->stages[i];
    if (i > 0 && p->stages[i - 1].kind == DF_STAGE_FINALIZE)
      FAIL_AT(i, "stage '%s' follows finalize: the program is already finalized", s->name);
    const df_operator *op = &p->ops[s->op];
    if (s->kind == DF_STAGE_MAP) {
      if (op->kind != DF_OPK_ITER)
        FAIL_AT(i,
                "map stage '%s' without a reshared stage: the canonical pipeline is "
                "partial -> reduce -> finalize",
                s->name);
      if (partial >= 0)
        FAIL_AT(i, "stage '%s': the pipeline already has a partial stage ('%s')", s->name,
                p->stages[partial].name);
      if (s->input >= 0)
        FAIL_AT(i, "partial stage '%s' must not have an input stage", s->name);
      partial = (int32_t)i;
      continue;
    }
    if (partial < 0)
      FAIL_AT(i, "%s stage '%s' needs a partial stage before it",
              df_stage_kind_name(s->kind), s->name);
    if (s->input != (int32_t)i - 1)
      FAIL_AT(i, "stage '%s' must consume the stage right before it", s->name);
    if (s->kind == DF_STAGE_REDUCE) {
      int32_t pt = p->stages[partial].type;
      df_param_kind k = DF_PARAM_SCALAR;
      int32_t in = consumed_type(op, &k);
      if (in != pt || op->result_type != pt)
        FAIL_AT(i,
                "reduce stage '%s': intermediate type mismatch: the partial produces '%s' "
                "but '%s' takes '%s' and returns '%s'",
                s->name, type_name(p, pt), op->name, type_name(p, in),
                type_name(p, op->result_type));
    }
  }
  return df_status_ok();
}

static df_status check_stage_graph(const df_program *p, int32_t *bad_stage) {
  static const df_stage_kind shape[] = {DF_STAGE_MAP, DF_STAGE_RESHARED, DF_STAGE_MAP,
                                        DF_STAGE_FINALIZE};
  bool ok = p->stage_count == 3 || p->stage_count == 4;
  for (uint32_t i = 0; ok && i < p->stage_count; i++)
    ok = p->stages[i].kind == shape[i] && (i == 0 ? p->stages[i].input < 0
                                                  : p->stages[i].input == (int32_t)i - 1);
  if (!ok)
    FAIL_AT(-1, "Dataflow stage graph scheduler currently supports exactly map -> "
                "reshared -> map [-> finalize]; program '%s' has %u stages of another shape",
            p->name, p->stage_count);
  const df_stage *map1 = &p->stages[0], *re = &p->stages[1];
  if (!map1->range_axis[0] || !p->stages[2].range_axis[0])
    FAIL_AT(map1->range_axis[0] ? 2 : 0, "stage graph maps need a range axis");
  /* downstream consumes the physical type; it defaults to the upstream type */
  if (re->type < 0)
    FAIL_AT(1, "reshared stage '%s' has no physical output type", re->name);
  if (re->type != map1->type)
    FAIL_AT(1,
            "reshared stage '%s': physical output type '%s' differs from the type '%s' its "
            "input stage produces",
            re->name, type_name(p, re->type), type_name(p, map1->type));
  return df_status_ok();
}

df_status df_program_validate_at(const df_program *p, int32_t *bad_stage) {
  *bad_stage = -1;
  if (p->axis_count == 0)
    return df_status_errorf(DF_EINVAL, "program '%s': task_domain must contain at least one axis",
                            p->name);
  if (p->stage_count == 0)
    return df_status_errorf(DF_EINVAL, "program '%s' has no stages", p->name);
  for (uint32_t i = 0; i < p->stage_count; i++)
    DF_TRY(check_stage_local(p, i, bad_stage));
  if (df_program_is_stage_graph(p))
    return check_stage_graph(p, bad_stage);
  return check_pipeline(p, bad_stage);
}

df_status df_program_validate(const df_program *p) {
  int32_t bad;
  return df_program_validate_at(p, &bad);
}
