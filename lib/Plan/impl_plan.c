/* Implementations of a program and their selection over a plan
   (df-select-variants; run-time re-plans call the same function). */
#include <stdio.h>
#include <string.h>

#include "df/impl.h"
#include "vec.h"

df_status df_program_add_impl(df_program *p, const df_impl *im) {
  DF_TRY(df_impl_check(im));
  int32_t op = df_program_find_operator(p, im->op);
  if (op < 0)
    return df_status_errorf(DF_EINVAL,
                            "implementation '%s' implements '%s', which is not an operator of "
                            "program '%s'",
                            im->name, im->op, p->name);
  for (uint32_t i = 0; i < p->impl_count; i++)
    if (strcmp(p->impls[i].name, im->name) == 0)
      return df_status_errorf(DF_EINVAL, "implementation '%s' is declared twice", im->name);
  if (df_program_find_operator(p, im->name) >= 0 && strcmp(im->name, im->op) != 0)
    return df_status_errorf(DF_EINVAL,
                            "implementation '%s' of '%s' has the name of another operator",
                            im->name, im->op);
  uint32_t cap = p->impl_count;
  DF_TRY(df_vec_reserve(&p->alloc, (void **)&p->impls, &cap, p->impl_count + 1,
                        sizeof *p->impls));
  p->impls[p->impl_count] = *im;
  p->impls[p->impl_count].origin = DF_IMPL_PROGRAM;
  p->impls[p->impl_count].library[0] = '\0';
  p->impl_count++;
  return df_status_ok();
}

df_status df_program_set_library(df_program *p, const char *op, const char *library) {
  int32_t i = df_program_find_operator(p, op);
  if (i < 0)
    return df_status_errorf(DF_EINVAL, "program '%s' has no operator '%s'", p->name, op);
  if (!library || strlen(library) >= DF_NAME_MAX)
    return df_status_errorf(DF_EINVAL, "operator '%s': library name too long", op);
  df_operator *o = &p->ops[i];
  const df_itype *t = NULL;
  for (uint32_t j = 0; j < o->param_count && !t; j++)
    if (o->params[j].kind == DF_PARAM_INTER || o->params[j].kind == DF_PARAM_INTER_LIST)
      t = &p->types[o->params[j].type];
  DF_TRY(df_library_check(library, op, o->kind, t));
  snprintf(o->library, sizeof o->library, "%s", library);
  return df_status_ok();
}

bool df_program_has_impls(const df_program *p) {
  if (p->impl_count)
    return true;
  for (uint32_t i = 0; i < p->op_count; i++)
    if (p->ops[i].library[0])
      return true;
  return false;
}

bool df_operator_has_impls(const df_program *p, const char *op) {
  int32_t i = df_program_find_operator(p, op);
  if (i < 0)
    return false;
  if (p->ops[i].library[0])
    return true;
  for (uint32_t k = 0; k < p->impl_count; k++)
    if (strcmp(p->impls[k].op, op) == 0)
      return true;
  return false;
}

df_status df_program_impls(const df_program *p, const df_select_options *o,
                           const df_allocator *alloc, df_impl **out, uint32_t *count) {
  *out = NULL;
  *count = 0;
  uint32_t nrep = o ? o->replacement_count : 0;
  uint32_t n = p->impl_count + nrep;
  for (uint32_t i = 0; i < p->op_count; i++)
    if (p->ops[i].library[0])
      n += df_library_impls(p->ops[i].library, p->ops[i].name, NULL, 0);
  if (n == 0)
    return df_status_ok();
  for (uint32_t r = 0; r < nrep; r++) {
    const df_impl *im = &o->replacements[r];
    DF_TRY(df_impl_check(im));
    if (df_program_find_operator(p, im->op) < 0)
      return df_status_errorf(DF_EINVAL,
                              "the kernel supplied for operator '%s' ('%s') replaces nothing: "
                              "program '%s' has no such operator",
                              im->op, im->name, p->name);
  }
  df_allocator a = df_allocator_or_default(alloc);
  df_impl *v = df_alloc(&a, sizeof *v * n);
  if (!v)
    return df_status_errorf(DF_ENOMEM, "out of memory listing %u implementations", n);
  uint32_t k = 0;
  for (uint32_t i = 0; i < p->impl_count; i++)
    v[k++] = p->impls[i];
  for (uint32_t i = 0; i < p->op_count; i++)
    if (p->ops[i].library[0])
      k += df_library_impls(p->ops[i].library, p->ops[i].name, v + k, n - k);
  for (uint32_t r = 0; r < nrep; r++) {
    v[k] = o->replacements[r];
    v[k++].origin = DF_IMPL_REPLACEMENT;
  }
  *out = v;
  *count = k;
  return df_status_ok();
}

/* The dtype implementations are matched on: the intermediate's first
   array field (its payload), else its first field. */
static df_dtype payload_dtype(const df_program *p, const df_operator *o) {
  int32_t t = o->result_type;
  for (uint32_t i = 0; i < o->param_count && t < 0; i++)
    if (o->params[i].kind == DF_PARAM_INTER || o->params[i].kind == DF_PARAM_INTER_LIST)
      t = o->params[i].type;
  if (t < 0 || (uint32_t)t >= p->type_count || p->types[t].field_count == 0)
    return DF_DTYPE_INVALID;
  const df_itype *ty = &p->types[t];
  for (uint32_t f = 0; f < ty->field_count; f++)
    if (ty->fields[f].rank > 0)
      return ty->fields[f].dtype;
  return ty->fields[0].dtype;
}

static bool runs_handler(df_instr_op op) {
  return op == DF_INSTR_ITER || op == DF_INSTR_MAP || op == DF_INSTR_REDUCE ||
         op == DF_INSTR_REDUCE_UPDATE || op == DF_INSTR_FINALIZE;
}

/* Plan stage naming the instruction's operator: its own, else the stage of
   its identity's operator id (operator ids count stages with a call). */
static int32_t call_stage(const df_plan *plan, const df_instr *in) {
  if (in->stage >= 0 && (uint32_t)in->stage < plan->stage_count &&
      plan->stages[in->stage].op_name[0])
    return in->stage;
  if (!in->has_identity)
    return -1;
  uint32_t id = 0;
  for (uint32_t s = 0; s < plan->stage_count; s++) {
    if (plan->stages[s].kind == DF_STAGE_RESHARED || !plan->stages[s].op_name[0])
      continue;
    if (id++ == in->identity.operator_id)
      return (int32_t)s;
  }
  return -1;
}

static void call_facts(const df_plan *plan, const df_instr *in, const char *op, df_dtype dtype,
                       df_arch arch, df_call_facts *f) {
  memset(f, 0, sizeof *f);
  f->op = op;
  f->instr = in->id;
  f->arch = arch;
  f->dtype = dtype;
  f->has_range = in->has_range;
  if (in->has_range && in->range_end >= in->range_begin) {
    f->length = in->range_end - in->range_begin;
    uint32_t b = plan->block_size ? plan->block_size : 1;
    f->tiles = (uint32_t)(((uint64_t)f->length + b - 1) / b);
    if (in->has_variant && in->variant.has_iter && in->variant.iter_mode == DF_ITER_TILE_COUNT)
      f->tiles = in->variant.iter_value;
  }
  f->has_arity = in->op == DF_INSTR_REDUCE || in->op == DF_INSTR_REDUCE_UPDATE;
  f->arity = in->input_count;
}

df_status df_plan_select_impls(df_plan *plan, const df_program *p, const df_select_options *o) {
  df_impl *impls;
  uint32_t count;
  DF_TRY(df_program_impls(p, o, &plan->alloc, &impls, &count));
  df_arch arch = o && o->arch ? o->arch : (df_arch)p->select_arch;
  plan->impl_count = 0; /* a re-selection starts afresh */
  df_status st = df_status_ok();
  for (uint32_t i = 0; i < plan->instr_count && !df_failed(&st); i++) {
    df_instr *in = &plan->instrs[i];
    in->impl = 0;
    if (count == 0 || !runs_handler(in->op))
      continue;
    int32_t s = call_stage(plan, in);
    if (s < 0)
      continue;
    const char *op = plan->stages[s].op_name;
    int32_t oi = df_program_find_operator(p, op);
    if (oi < 0) {
      st = df_status_errorf(DF_EINVAL,
                            "instruction %u calls '%s', which is not an operator of program "
                            "'%s'",
                            in->id, op, p->name);
      break;
    }
    df_call_facts f;
    call_facts(plan, in, op, payload_dtype(p, &p->ops[oi]), arch, &f);
    uint32_t chosen;
    st = df_impl_select(impls, count, &f, &chosen);
    if (!df_failed(&st) && chosen != DF_SENTINEL)
      st = df_plan_intern_impl(plan, impls[chosen].name, &in->impl);
  }
  df_free(&plan->alloc, impls);
  return st;
}
