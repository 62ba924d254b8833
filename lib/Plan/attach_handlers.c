/* Post-pass of scheduling: handler identities and default variants
   (REFERENCE 2.7). Also run on hand-edited plans. */
#include <string.h>

#include "df/plan.h"

/* Identity of plan stage i: operator ids count stages with a call. */
static bool stage_identity(const df_plan *p, uint32_t stage, const int32_t *op_ids,
                           df_identity *out) {
  const df_plan_stage *st = &p->stages[stage];
  if (st->kind == DF_STAGE_RESHARED || op_ids[stage] < 0)
    return false;
  out->operator_id = (uint32_t)op_ids[stage];
  out->kind = st->kind == DF_STAGE_MAP        ? st->op_kind
              : st->kind == DF_STAGE_REDUCE   ? DF_OPK_REDUCE
                                              : DF_OPK_FINALIZE;
  return out->kind != DF_OPK_NONE;
}

/* Stage the opcode falls back to: the partial for ITER, the reduce stage
   for REDUCE/REDUCE_UPDATE, the finalize stage for FINALIZE. */
static int32_t fallback_stage(const df_plan *p, df_instr_op op) {
  for (uint32_t i = 0; i < p->stage_count; i++) {
    const df_plan_stage *st = &p->stages[i];
    if ((op == DF_INSTR_ITER && st->kind == DF_STAGE_MAP && st->op_kind == DF_OPK_ITER) ||
        ((op == DF_INSTR_REDUCE || op == DF_INSTR_REDUCE_UPDATE) &&
         st->kind == DF_STAGE_REDUCE) ||
        (op == DF_INSTR_FINALIZE && st->kind == DF_STAGE_FINALIZE))
      return (int32_t)i;
  }
  return -1;
}

df_status df_plan_attach_handlers(df_plan *p) {
  int32_t small[16], *op_ids = small;
  if (p->stage_count > 16) {
    op_ids = df_alloc(&p->alloc, sizeof(int32_t) * p->stage_count);
    if (!op_ids)
      return df_status_errorf(DF_ENOMEM, "out of memory attaching handler identities");
  }
  int32_t next = 0;
  for (uint32_t i = 0; i < p->stage_count; i++) {
    bool call = p->stages[i].kind != DF_STAGE_RESHARED && p->stages[i].op_name[0];
    op_ids[i] = call ? next++ : -1;
  }
  int32_t fallback[DF_INSTR_OP_COUNT];
  for (int op = 0; op < DF_INSTR_OP_COUNT; op++)
    fallback[op] = fallback_stage(p, (df_instr_op)op);
  df_status st = df_status_ok();
  for (uint32_t i = 0; i < p->instr_count && !df_failed(&st); i++) {
    df_instr *in = &p->instrs[i];
    if (in->op == DF_INSTR_RESHARED || in->op == DF_INSTR_EXIT ||
        in->op == DF_INSTR_CLUSTER_SYNC || (unsigned)in->op >= DF_INSTR_OP_COUNT) {
      in->has_identity = in->has_variant = false;
      continue;
    }
    df_identity id;
    bool found = true;
    if (in->has_variant)
      id = in->variant.base;
    else if (in->has_identity)
      id = in->identity;
    else if (in->stage >= 0 && (uint32_t)in->stage < p->stage_count)
      found = stage_identity(p, (uint32_t)in->stage, op_ids, &id);
    else
      found = fallback[in->op] >= 0 && stage_identity(p, (uint32_t)fallback[in->op], op_ids, &id);
    if (!found)
      continue; /* legacy instruction: packed by operator name */
    in->has_identity = true;
    in->identity = id;
    if (!in->has_variant && (id.kind == DF_OPK_ITER || id.kind == DF_OPK_MAP ||
                             id.kind == DF_OPK_FINALIZE)) {
      /* iter -> generic, map/finalize -> no specialisation: cannot fail,
         and this runs once per instruction of every re-plan */
      memset(&in->variant, 0, sizeof in->variant);
      in->variant.base = id;
      in->variant.schema_version = DF_VARIANT_SCHEMA_VERSION;
      in->variant.has_iter = id.kind == DF_OPK_ITER;
      in->variant.iter_mode = DF_ITER_GENERIC;
      in->has_variant = true;
    } else if (!in->has_variant) {
      st = df_variant_default(id, (int64_t)in->input_count, &in->variant);
      if (df_failed(&st)) {
        df_status w = df_status_errorf(DF_EINVAL, "instruction %u (%s): %s", in->id,
                                       df_instr_op_name(in->op), st.message);
        st = w;
      }
      in->has_variant = !df_failed(&st);
    }
  }
  if (op_ids != small)
    df_free(&p->alloc, op_ids);
  return st;
}
