/* The program facts a plan keeps: type table and stage names. */
#include <string.h>

#include "df/plan.h"

df_status df_plan_adopt_program(df_plan *p, const df_program *g) {
  if (p->type_count || p->stage_count)
    return df_status_errorf(DF_EINTERNAL, "plan already holds program tables");
  for (uint32_t i = 0; i < g->type_count; i++)
    DF_TRY(df_plan_add_type(p, g->types[i].name, df_itype_slot_bytes(&g->types[i]), NULL));
  for (uint32_t i = 0; i < g->stage_count; i++) {
    const df_stage *st = &g->stages[i];
    df_plan_stage ps;
    memset(&ps, 0, sizeof ps);
    memcpy(ps.name, st->name, sizeof ps.name);
    if (st->op >= 0)
      memcpy(ps.op_name, g->ops[st->op].name, sizeof ps.op_name);
    ps.kind = st->kind;
    ps.op_kind = st->op >= 0 ? g->ops[st->op].kind : DF_OPK_NONE;
    DF_TRY(df_plan_add_stage(p, &ps, NULL));
  }
  return df_status_ok();
}
