/* The program section of a plan blob: a df_program in full so that the
   runtime can re-plan for new range lengths. Every item is a u32 (i32
   where noted); strings are offsets into the strings section:
     name axis_count range_count type_count op_count stage_count
     axes[axis_count]  ranges[range_count]{axis source}
     types{name field_count fields{name dtype rank shape[8]}}
     ops{name kind param_count result_type(i32) params{name kind type(i32)}}
     stages{name kind op(i32) input(i32) range_axis type(i32)
            logical_type(i32) output_arity policy task_arg_count
            binding_count task_args[task_arg_count] bindings{param tensor}}
   then, only for programs with implementations (df/impl.h):
     IMPL_MAGIC select_arch impl_count
     impls{name op origin iter iter_value has_arity arity dtype min_arch general}
     library_count libraries{op library}
   then, only for programs whose plan was tiled or chose its memory
   strategy with `auto` (df_program's re-plan choices):
     PLAN_MAGIC transfer_tile_bytes memory_auto shared_memory_limit
     auto_policy
   then, only for programs whose plan chose its split with
   block-size=auto (df_program.split_auto):
     SPLIT_MAGIC split_auto (1)
   then, only for programs with handler workspaces (docs/workspace.md),
   so re-plans budget shared memory with them:
     WORKSPACE_MAGIC count workspaces[count]{op bytes}
   Blobs without these trailers read as before (no implementations,
   whole-slot transfers, a fixed strategy, a given block size, no
   workspace). */
#include <stdarg.h>
#include <stdio.h>

#include "blob_check.h"
#include "df/impl.h"

#define N DF_NAME_MAX
#define IMPL_MAGIC 0x4c504d49u /* "IMPL" */
#define PLAN_MAGIC 0x4e4c5052u /* "RPLN" */
#define SPLIT_MAGIC 0x4c505341u /* "ASPL" */
#define WORKSPACE_MAGIC 0x50534b57u /* "WKSP" */
#define bad df_blob_fail

static bool in_range(int32_t v, uint32_t n) { return v >= -1 && (v < 0 || (uint32_t)v < n); }

#define NAME(s, what, ...)                                                     \
  do {                                                                         \
    if (!df_blob_str_ok((s), N))                                               \
      return bad(what " is not NUL-terminated within %d bytes", __VA_ARGS__, N); \
  } while (0)

static df_status check_types(const df_program *p) {
  for (uint32_t i = 0; i < p->type_count; i++) {
    const df_itype *t = &p->types[i];
    NAME(t->name, "type %u: name", i);
    if (t->field_count && !t->fields)
      return bad("type %u: fields missing", i);
    for (uint32_t f = 0; f < t->field_count; f++) {
      const df_field *d = &t->fields[f];
      NAME(d->name, "type %u field %u: name", i, f);
      if ((uint32_t)d->dtype == DF_DTYPE_INVALID || (uint32_t)d->dtype >= DF_DTYPE_COUNT)
        return bad("type %u field %u: dtype %u out of range (1..%d)", i, f,
                   (uint32_t)d->dtype, DF_DTYPE_COUNT - 1);
      if (d->rank > DF_MAX_RANK)
        return bad("type %u field %u: rank %u exceeds %d", i, f, d->rank, DF_MAX_RANK);
    }
  }
  return df_status_ok();
}

static df_status check_ops(const df_program *p) {
  for (uint32_t i = 0; i < p->op_count; i++) {
    const df_operator *o = &p->ops[i];
    NAME(o->name, "operator %u: name", i);
    if ((uint32_t)o->kind > DF_OPK_FINALIZE)
      return bad("operator %u: kind %u out of range (0..3)", i, (uint32_t)o->kind);
    if (!in_range(o->result_type, p->type_count))
      return bad("operator %u: result_type %d out of range (-1..%u)", i, o->result_type,
                 p->type_count);
    if (o->param_count && !o->params)
      return bad("operator %u: params missing", i);
    for (uint32_t j = 0; j < o->param_count; j++) {
      const df_param *q = &o->params[j];
      NAME(q->name, "operator %u param %u: name", i, j);
      if ((uint32_t)q->kind > DF_PARAM_INTER_LIST)
        return bad("operator %u param %u: kind %u out of range (0..3)", i, j,
                   (uint32_t)q->kind);
      if (!in_range(q->type, p->type_count))
        return bad("operator %u param %u: type %d out of range (-1..%u)", i, j, q->type,
                   p->type_count);
    }
  }
  return df_status_ok();
}

static df_status check_stages(const df_program *p) {
  for (uint32_t i = 0; i < p->stage_count; i++) {
    const df_stage *s = &p->stages[i];
    NAME(s->name, "stage %u: name", i);
    NAME(s->range_axis, "stage %u: range_axis", i);
    NAME(s->policy, "stage %u: policy", i);
    if ((uint32_t)s->kind > DF_STAGE_FINALIZE)
      return bad("stage %u: kind %u out of range (0..3)", i, (uint32_t)s->kind);
    if (!in_range(s->op, p->op_count))
      return bad("stage %u: op %d out of range (-1..%u)", i, s->op, p->op_count);
    if (!in_range(s->input, p->stage_count))
      return bad("stage %u: input %d out of range (-1..%u)", i, s->input, p->stage_count);
    if (!in_range(s->type, p->type_count))
      return bad("stage %u: type %d out of range (-1..%u)", i, s->type, p->type_count);
    if (!in_range(s->logical_type, p->type_count))
      return bad("stage %u: logical_type %d out of range (-1..%u)", i, s->logical_type,
                 p->type_count);
    if (s->task_arg_count > DF_MAX_AXES)
      return bad("stage %u: task_arg_count %u exceeds %d", i, s->task_arg_count, DF_MAX_AXES);
    for (uint32_t j = 0; j < s->task_arg_count; j++)
      NAME(s->task_args[j], "stage %u task_arg %u", i, j);
    if (s->binding_count && !s->bindings)
      return bad("stage %u: bindings missing", i);
    for (uint32_t j = 0; j < s->binding_count; j++) {
      NAME(s->bindings[j].param, "stage %u binding %u: param", i, j);
      NAME(s->bindings[j].tensor, "stage %u binding %u: tensor", i, j);
    }
  }
  return df_status_ok();
}

/* The re-plan choices: a tile the scheduler accepts; `auto` as a flag
   with a policy it starts from; no limit or policy without it. */
static df_status check_plan_choices(const df_program *p) {
  if (p->transfer_tile_bytes % DF_SLOT_ALIGN)
    return bad("transfer_tile_bytes %u is not a multiple of %u", p->transfer_tile_bytes,
               DF_SLOT_ALIGN);
  if (p->memory_auto > 1)
    return bad("memory_auto %u is not 0 or 1", p->memory_auto);
  if (p->auto_policy != DF_POLICY_ROUND_ROBIN && p->auto_policy != DF_POLICY_CLUSTER_LOCAL)
    return bad("auto_policy %u is not round_robin (0) or cluster_local (1)", p->auto_policy);
  if (!p->memory_auto && (p->shared_memory_limit || p->auto_policy))
    return bad("shared_memory_limit %u / auto_policy %u without memory_auto",
               p->shared_memory_limit, p->auto_policy);
  if (p->split_auto > 1)
    return bad("split_auto %u is not 0 or 1", p->split_auto);
  if (p->split_auto && p->memory_auto)
    return bad("split_auto and memory_auto exclude each other (block-size=auto is "
               "all_at_once)");
  return df_status_ok();
}

df_status df_blob_check_program(const df_program *p) {
  if (!df_blob_str_ok(p->name, N))
    return bad("name is not NUL-terminated within %d bytes", N);
  if (p->axis_count > DF_MAX_AXES)
    return bad("axis_count %u exceeds %d", p->axis_count, DF_MAX_AXES);
  if (p->range_count > DF_MAX_AXES)
    return bad("range_count %u exceeds %d", p->range_count, DF_MAX_AXES);
  for (uint32_t i = 0; i < p->axis_count; i++)
    NAME(p->axes[i], "axis %u", i);
  for (uint32_t i = 0; i < p->range_count; i++) {
    NAME(p->ranges[i].axis, "range %u: axis", i);
    NAME(p->ranges[i].source, "range %u: source", i);
  }
  if ((p->type_count && !p->types) || (p->op_count && !p->ops) ||
      (p->stage_count && !p->stages))
    return bad("arrays missing for non-zero counts");
  DF_TRY(check_plan_choices(p));
  DF_TRY(check_types(p));
  DF_TRY(check_ops(p));
  DF_TRY(check_stages(p));
  /* The model's own rules: a blob carries only programs that can be
     re-planned. */
  return df_program_validate(p);
}

/* ---- encoding ------------------------------------------------------------ */

static void put_str(df_blob_buf *b, df_blob_buf *pool, const char *s) {
  df_blob_buf_u32(b, df_blob_pool_add(pool, s, N));
}

static void put_impls(df_blob_buf *b, df_blob_buf *pool, const df_program *p);

void df_blob_put_program(df_blob_buf *b, df_blob_buf *pool, const df_program *p) {
  put_str(b, pool, p->name);
  uint32_t head[5] = {p->axis_count, p->range_count, p->type_count, p->op_count,
                      p->stage_count};
  for (int i = 0; i < 5; i++)
    df_blob_buf_u32(b, head[i]);
  for (uint32_t i = 0; i < p->axis_count; i++)
    put_str(b, pool, p->axes[i]);
  for (uint32_t i = 0; i < p->range_count; i++) {
    put_str(b, pool, p->ranges[i].axis);
    put_str(b, pool, p->ranges[i].source);
  }
  for (uint32_t i = 0; i < p->type_count; i++) {
    const df_itype *t = &p->types[i];
    put_str(b, pool, t->name);
    df_blob_buf_u32(b, t->field_count);
    for (uint32_t f = 0; f < t->field_count; f++) {
      put_str(b, pool, t->fields[f].name);
      df_blob_buf_u32(b, (uint32_t)t->fields[f].dtype);
      df_blob_buf_u32(b, t->fields[f].rank);
      for (int d = 0; d < DF_MAX_RANK; d++)
        df_blob_buf_u32(b, t->fields[f].shape[d]);
    }
  }
  for (uint32_t i = 0; i < p->op_count; i++) {
    const df_operator *o = &p->ops[i];
    put_str(b, pool, o->name);
    df_blob_buf_u32(b, (uint32_t)o->kind);
    df_blob_buf_u32(b, o->param_count);
    df_blob_buf_i32(b, o->result_type);
    for (uint32_t j = 0; j < o->param_count; j++) {
      put_str(b, pool, o->params[j].name);
      df_blob_buf_u32(b, (uint32_t)o->params[j].kind);
      df_blob_buf_i32(b, o->params[j].type);
    }
  }
  for (uint32_t i = 0; i < p->stage_count; i++) {
    const df_stage *s = &p->stages[i];
    put_str(b, pool, s->name);
    df_blob_buf_u32(b, (uint32_t)s->kind);
    df_blob_buf_i32(b, s->op);
    df_blob_buf_i32(b, s->input);
    put_str(b, pool, s->range_axis);
    df_blob_buf_i32(b, s->type);
    df_blob_buf_i32(b, s->logical_type);
    df_blob_buf_u32(b, s->output_arity);
    put_str(b, pool, s->policy);
    df_blob_buf_u32(b, s->task_arg_count);
    df_blob_buf_u32(b, s->binding_count);
    for (uint32_t j = 0; j < s->task_arg_count; j++)
      put_str(b, pool, s->task_args[j]);
    for (uint32_t j = 0; j < s->binding_count; j++) {
      put_str(b, pool, s->bindings[j].param);
      put_str(b, pool, s->bindings[j].tensor);
    }
  }
  put_impls(b, pool, p);
  if (p->transfer_tile_bytes || p->memory_auto) {
    uint32_t w[5] = {PLAN_MAGIC, p->transfer_tile_bytes, p->memory_auto,
                     p->shared_memory_limit, p->auto_policy};
    for (int i = 0; i < 5; i++)
      df_blob_buf_u32(b, w[i]);
  }
  if (p->split_auto) { /* plans without it are unchanged */
    df_blob_buf_u32(b, SPLIT_MAGIC);
    df_blob_buf_u32(b, p->split_auto);
  }
  uint32_t ws = 0;
  for (uint32_t i = 0; i < p->op_count; i++)
    ws += p->ops[i].workspace_bytes != 0;
  if (ws) { /* programs without workspaces are unchanged */
    df_blob_buf_u32(b, WORKSPACE_MAGIC);
    df_blob_buf_u32(b, ws);
    for (uint32_t i = 0; i < p->op_count; i++)
      if (p->ops[i].workspace_bytes) {
        df_blob_buf_u32(b, i);
        df_blob_buf_u32(b, p->ops[i].workspace_bytes);
      }
  }
}

static void put_impls(df_blob_buf *b, df_blob_buf *pool, const df_program *p) {
  if (!df_program_has_impls(p) && !p->select_arch)
    return; /* blobs of programs without implementations are unchanged */
  df_blob_buf_u32(b, IMPL_MAGIC);
  df_blob_buf_u32(b, p->select_arch);
  df_blob_buf_u32(b, p->impl_count);
  for (uint32_t i = 0; i < p->impl_count; i++) {
    const df_impl *im = &p->impls[i];
    put_str(b, pool, im->name);
    put_str(b, pool, im->op);
    uint32_t w[8] = {(uint32_t)im->origin, (uint32_t)im->iter, im->iter_value, im->has_arity,
                     (uint32_t)im->arity,  (uint32_t)im->dtype, (uint32_t)im->min_arch,
                     im->general};
    for (int k = 0; k < 8; k++)
      df_blob_buf_u32(b, w[k]);
  }
  uint32_t libs = 0;
  for (uint32_t i = 0; i < p->op_count; i++)
    libs += p->ops[i].library[0] != 0;
  df_blob_buf_u32(b, libs);
  for (uint32_t i = 0; i < p->op_count; i++)
    if (p->ops[i].library[0]) {
      df_blob_buf_u32(b, i);
      put_str(b, pool, p->ops[i].library);
    }
}

/* ---- decoding ------------------------------------------------------------ */

typedef struct cursor {
  const uint8_t *p;
  size_t len, pos;
  const df_blob_strings *strings;
} cursor;

static df_status short_read(const cursor *c, const char *what) {
  return bad("%s ends past the section (offset %zu of %zu bytes)", what, c->pos, c->len);
}

static df_status get_u32(cursor *c, uint32_t *v, const char *what) {
  if (c->len - c->pos < 4)
    return short_read(c, what);
  *v = df_le32(c->p + c->pos);
  c->pos += 4;
  return df_status_ok();
}

static df_status get_i32(cursor *c, int32_t *v, const char *what) {
  uint32_t u = 0;
  DF_TRY(get_u32(c, &u, what));
  *v = (int32_t)u;
  return df_status_ok();
}

/* A string field: an offset into the strings section. */
static df_status get_str(cursor *c, char *dst, size_t width, const char *what) {
  uint32_t off;
  DF_TRY(get_u32(c, &off, what));
  char why[128];
  if (!df_blob_string(c->strings, off, dst, width, why, sizeof why))
    return bad("%s: %s", what, why);
  return df_status_ok();
}

/* Allocate `n` zeroed elements after checking that the bytes left could
   hold them at `min_bytes` each, so a count cannot force a huge
   allocation. */
static df_status get_array(cursor *c, const df_allocator *a, uint32_t n, size_t elem,
                           size_t min_bytes, void **out, const char *what) {
  *out = NULL;
  if (n == 0)
    return df_status_ok();
  if ((c->len - c->pos) / min_bytes < n)
    return bad("%s count %u does not fit the %zu bytes left", what, n, c->len - c->pos);
  *out = df_alloc(a, (size_t)n * elem);
  if (!*out)
    return df_status_errorf(DF_ENOMEM, "out of memory reading %s", what);
  memset(*out, 0, (size_t)n * elem);
  return df_status_ok();
}

static char *label(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static char *label(char *buf, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
  return buf;
}

static df_status get_types(cursor *c, df_program *p, uint32_t n) {
  char w[96];
  DF_TRY(get_array(c, &p->alloc, n, sizeof *p->types, 8, (void **)&p->types, "types"));
  p->type_count = n;
  for (uint32_t i = 0; i < n; i++) {
    df_itype *t = &p->types[i];
    DF_TRY(get_str(c, t->name, N, label(w, sizeof w, "type %u: name", i)));
    uint32_t nf = 0;
    DF_TRY(get_u32(c, &nf, label(w, sizeof w, "type %u: field_count", i)));
    DF_TRY(get_array(c, &p->alloc, nf, sizeof *t->fields, 44, (void **)&t->fields,
                     label(w, sizeof w, "type %u: fields", i)));
    t->field_count = nf;
    for (uint32_t f = 0; f < nf; f++) {
      df_field *d = &t->fields[f];
      uint32_t dt = 0;
      DF_TRY(get_str(c, d->name, N, label(w, sizeof w, "type %u field %u: name", i, f)));
      DF_TRY(get_u32(c, &dt, label(w, sizeof w, "type %u field %u: dtype", i, f)));
      d->dtype = (df_dtype)dt;
      DF_TRY(get_u32(c, &d->rank, label(w, sizeof w, "type %u field %u: rank", i, f)));
      for (int k = 0; k < DF_MAX_RANK; k++)
        DF_TRY(get_u32(c, &d->shape[k], label(w, sizeof w, "type %u field %u: shape", i, f)));
    }
  }
  return df_status_ok();
}

static df_status get_ops(cursor *c, df_program *p, uint32_t n) {
  char w[96];
  DF_TRY(get_array(c, &p->alloc, n, sizeof *p->ops, 16, (void **)&p->ops, "operators"));
  p->op_count = n;
  for (uint32_t i = 0; i < n; i++) {
    df_operator *o = &p->ops[i];
    uint32_t kind = 0, np = 0;
    DF_TRY(get_str(c, o->name, N, label(w, sizeof w, "operator %u: name", i)));
    DF_TRY(get_u32(c, &kind, label(w, sizeof w, "operator %u: kind", i)));
    o->kind = (df_op_kind)kind;
    DF_TRY(get_u32(c, &np, label(w, sizeof w, "operator %u: param_count", i)));
    DF_TRY(get_i32(c, &o->result_type, label(w, sizeof w, "operator %u: result_type", i)));
    DF_TRY(get_array(c, &p->alloc, np, sizeof *o->params, 12, (void **)&o->params,
                     label(w, sizeof w, "operator %u: params", i)));
    o->param_count = np;
    for (uint32_t j = 0; j < np; j++) {
      df_param *q = &o->params[j];
      uint32_t pk = 0;
      DF_TRY(get_str(c, q->name, N, label(w, sizeof w, "operator %u param %u: name", i, j)));
      DF_TRY(get_u32(c, &pk, label(w, sizeof w, "operator %u param %u: kind", i, j)));
      q->kind = (df_param_kind)pk;
      DF_TRY(get_i32(c, &q->type, label(w, sizeof w, "operator %u param %u: type", i, j)));
    }
  }
  return df_status_ok();
}

static df_status get_stage(cursor *c, df_program *p, uint32_t i) {
  char w[96];
  df_stage *s = &p->stages[i];
  uint32_t kind = 0, nb = 0;
  DF_TRY(get_str(c, s->name, N, label(w, sizeof w, "stage %u: name", i)));
  DF_TRY(get_u32(c, &kind, label(w, sizeof w, "stage %u: kind", i)));
  s->kind = (df_stage_kind)kind;
  DF_TRY(get_i32(c, &s->op, label(w, sizeof w, "stage %u: op", i)));
  DF_TRY(get_i32(c, &s->input, label(w, sizeof w, "stage %u: input", i)));
  DF_TRY(get_str(c, s->range_axis, N, label(w, sizeof w, "stage %u: range_axis", i)));
  DF_TRY(get_i32(c, &s->type, label(w, sizeof w, "stage %u: type", i)));
  DF_TRY(get_i32(c, &s->logical_type, label(w, sizeof w, "stage %u: logical_type", i)));
  DF_TRY(get_u32(c, &s->output_arity, label(w, sizeof w, "stage %u: output_arity", i)));
  DF_TRY(get_str(c, s->policy, N, label(w, sizeof w, "stage %u: policy", i)));
  DF_TRY(get_u32(c, &s->task_arg_count, label(w, sizeof w, "stage %u: task_arg_count", i)));
  DF_TRY(get_u32(c, &nb, label(w, sizeof w, "stage %u: binding_count", i)));
  if (s->task_arg_count > DF_MAX_AXES)
    return bad("stage %u: task_arg_count %u exceeds %d", i, s->task_arg_count, DF_MAX_AXES);
  for (uint32_t j = 0; j < s->task_arg_count; j++)
    DF_TRY(get_str(c, s->task_args[j], N, label(w, sizeof w, "stage %u task_arg %u", i, j)));
  DF_TRY(get_array(c, &p->alloc, nb, sizeof *s->bindings, 8, (void **)&s->bindings,
                   label(w, sizeof w, "stage %u: bindings", i)));
  s->binding_count = nb;
  for (uint32_t j = 0; j < nb; j++) {
    DF_TRY(get_str(c, s->bindings[j].param, N,
                   label(w, sizeof w, "stage %u binding %u: param", i, j)));
    DF_TRY(get_str(c, s->bindings[j].tensor, N,
                   label(w, sizeof w, "stage %u binding %u: tensor", i, j)));
  }
  return df_status_ok();
}

/* The re-plan choices trailer (checked by check_plan_choices). */
static df_status get_plan_choices(cursor *c, df_program *p) {
  DF_TRY(get_u32(c, &p->transfer_tile_bytes, "plan choices: transfer_tile_bytes"));
  DF_TRY(get_u32(c, &p->memory_auto, "plan choices: memory_auto"));
  DF_TRY(get_u32(c, &p->shared_memory_limit, "plan choices: shared_memory_limit"));
  DF_TRY(get_u32(c, &p->auto_policy, "plan choices: auto_policy"));
  if (!p->transfer_tile_bytes && !p->memory_auto)
    return bad("plan choices trailer records no choice (tile 0, memory_auto 0)");
  return df_status_ok();
}

/* The automatic split trailer: the flag, which must be set. */
static df_status get_split_choice(cursor *c, df_program *p) {
  DF_TRY(get_u32(c, &p->split_auto, "split choice: split_auto"));
  if (p->split_auto != 1)
    return bad("split choice trailer: split_auto %u is not 1", p->split_auto);
  return df_status_ok();
}

/* The workspace trailer: per entry an operator index and its bytes,
   checked by the program model's rule. */
static df_status get_workspaces(cursor *c, df_program *p) {
  uint32_t n = 0;
  char w[96];
  DF_TRY(get_u32(c, &n, "workspace count"));
  if (n == 0 || n > p->op_count)
    return bad("workspace trailer: count %u is not 1 to the %u operators", n, p->op_count);
  for (uint32_t i = 0; i < n; i++) {
    uint32_t op = 0, bytes = 0;
    DF_TRY(get_u32(c, &op, label(w, sizeof w, "workspace %u: operator", i)));
    DF_TRY(get_u32(c, &bytes, label(w, sizeof w, "workspace %u: bytes", i)));
    if (op >= p->op_count)
      return bad("workspace %u: operator %u out of range (%u operators)", i, op, p->op_count);
    if (bytes == 0 || p->ops[op].workspace_bytes)
      return bad("workspace %u: operator '%s' has bytes 0 or a second entry", i,
                 p->ops[op].name);
    df_status s = df_program_set_handler_workspace(p, p->ops[op].name, bytes);
    if (df_failed(&s))
      return bad("workspace %u: %s", i, s.message);
  }
  return df_status_ok();
}

/* The implementations trailer; every entry is re-checked by the program
   model's own rules. */
static df_status get_impls(cursor *c, df_program *p) {
  uint32_t arch = 0, n = 0, libs = 0;
  char w[96];
  DF_TRY(get_u32(c, &arch, "select_arch"));
  if (arch != DF_ARCH_ANY && arch != DF_ARCH_SM80 && arch != DF_ARCH_SM90 &&
      arch != DF_ARCH_SM90A)
    return bad("select_arch %u is not an architecture (0, 80, 90, 91)", arch);
  p->select_arch = arch;
  DF_TRY(get_u32(c, &n, "impl_count"));
  if ((c->len - c->pos) / 40 < n)
    return bad("impl_count %u does not fit the %zu bytes left", n, c->len - c->pos);
  for (uint32_t i = 0; i < n; i++) {
    df_impl im;
    memset(&im, 0, sizeof im);
    DF_TRY(get_str(c, im.name, N, label(w, sizeof w, "implementation %u: name", i)));
    DF_TRY(get_str(c, im.op, N, label(w, sizeof w, "implementation %u: op", i)));
    uint32_t v[8];
    for (int k = 0; k < 8; k++)
      DF_TRY(get_u32(c, &v[k], label(w, sizeof w, "implementation %u: word %d", i, k)));
    if (v[0] > DF_IMPL_REPLACEMENT || v[0] == DF_IMPL_BUILTIN || v[3] > 1 || v[7] > 1)
      return bad("implementation %u ('%s'): origin %u, has_arity %u or general %u out of range",
                 i, im.name, v[0], v[3], v[7]);
    im.iter = (df_impl_iter)v[1];
    im.iter_value = v[2];
    im.has_arity = v[3];
    im.arity = (df_arity_class)v[4];
    im.dtype = (df_dtype)v[5];
    im.min_arch = (df_arch)v[6];
    im.general = v[7];
    df_status s = df_program_add_impl(p, &im);
    if (df_failed(&s))
      return bad("implementation %u: %s", i, s.message);
    p->impls[p->impl_count - 1].origin = (df_impl_origin)v[0];
  }
  DF_TRY(get_u32(c, &libs, "library_count"));
  for (uint32_t i = 0; i < libs; i++) {
    uint32_t op = 0;
    char library[N];
    DF_TRY(get_u32(c, &op, label(w, sizeof w, "library %u: operator", i)));
    DF_TRY(get_str(c, library, N, label(w, sizeof w, "library %u: name", i)));
    if (op >= p->op_count)
      return bad("library %u: operator %u out of range (%u operators)", i, op, p->op_count);
    df_status s = df_program_set_library(p, p->ops[op].name, library);
    if (df_failed(&s))
      return bad("library %u: %s", i, s.message);
  }
  return df_status_ok();
}

static df_status get_program(cursor *c, df_program *p) {
  uint32_t head[5] = {0};
  static const char *const what[5] = {"axis_count", "range_count", "type_count", "op_count",
                                      "stage_count"};
  for (int i = 0; i < 5; i++)
    DF_TRY(get_u32(c, &head[i], what[i]));
  if (head[0] > DF_MAX_AXES)
    return bad("axis_count %u exceeds %d", head[0], DF_MAX_AXES);
  if (head[1] > DF_MAX_AXES)
    return bad("range_count %u exceeds %d", head[1], DF_MAX_AXES);
  char w[64];
  p->axis_count = head[0];
  for (uint32_t i = 0; i < head[0]; i++)
    DF_TRY(get_str(c, p->axes[i], N, label(w, sizeof w, "axis %u", i)));
  p->range_count = head[1];
  for (uint32_t i = 0; i < head[1]; i++) {
    DF_TRY(get_str(c, p->ranges[i].axis, N, label(w, sizeof w, "range %u: axis", i)));
    DF_TRY(get_str(c, p->ranges[i].source, N, label(w, sizeof w, "range %u: source", i)));
  }
  DF_TRY(get_types(c, p, head[2]));
  DF_TRY(get_ops(c, p, head[3]));
  /* A stage is at least its fixed part of 11 words. */
  DF_TRY(get_array(c, &p->alloc, head[4], sizeof *p->stages, 44,
                   (void **)&p->stages, "stages"));
  p->stage_count = head[4];
  for (uint32_t i = 0; i < head[4]; i++)
    DF_TRY(get_stage(c, p, i));
  /* Optional trailers, each once, in the order written. */
  bool impls = false, choices = false, split = false, ws = false;
  while (c->pos != c->len) {
    const char *after = ws        ? "workspace"
                        : split   ? "split choice"
                        : choices ? "plan choice"
                        : impls   ? "implementation"
                                  : "stage";
    uint32_t magic = 0;
    DF_TRY(get_u32(c, &magic, "trailer magic"));
    if (magic == IMPL_MAGIC && !impls && !choices && !split && !ws) {
      impls = true;
      DF_TRY(get_impls(c, p));
    } else if (magic == PLAN_MAGIC && !choices && !split && !ws) {
      choices = true;
      DF_TRY(get_plan_choices(c, p));
    } else if (magic == SPLIT_MAGIC && !split && !ws) {
      split = true;
      DF_TRY(get_split_choice(c, p));
    } else if (magic == WORKSPACE_MAGIC && !ws) {
      ws = true;
      DF_TRY(get_workspaces(c, p));
    } else {
      return bad("%zu bytes left over after the last %s", c->len - c->pos + 4, after);
    }
  }
  return df_status_ok();
}

df_status df_blob_get_program(const uint8_t *data, size_t len, const df_blob_strings *strings,
                              const df_allocator *a, df_program **out) {
  *out = NULL;
  cursor c = {data, len, 0, strings};
  char name[N];
  DF_TRY(get_str(&c, name, N, "name"));
  df_program *p;
  DF_TRY(df_program_create(a, name, &p));
  df_status s = get_program(&c, p);
  if (!df_failed(&s))
    s = df_blob_check_program(p);
  if (df_failed(&s)) {
    if (s.code != DF_ENOMEM)
      s.code = DF_EFORMAT;
    df_program_destroy(p);
    return s;
  }
  *out = p;
  return df_status_ok();
}
