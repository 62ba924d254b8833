/* A deep copy of a program through its builders, implementations and
   built-in handler choices included. */
#include <string.h>

#include "df/impl.h"

static df_status copy_into(const df_program *p, df_program *q) {
  for (uint32_t i = 0; i < p->axis_count; i++)
    DF_TRY(df_program_add_axis(q, p->axes[i]));
  for (uint32_t i = 0; i < p->range_count; i++)
    DF_TRY(df_program_add_range(q, p->ranges[i].axis, p->ranges[i].source));
  for (uint32_t i = 0; i < p->type_count; i++)
    DF_TRY(df_program_add_type(q, p->types[i].name, p->types[i].field_count,
                               p->types[i].fields, NULL));
  for (uint32_t i = 0; i < p->op_count; i++) {
    DF_TRY(df_program_add_operator(q, p->ops[i].name, p->ops[i].kind, p->ops[i].param_count,
                                   p->ops[i].params, p->ops[i].result_type, NULL));
    memcpy(q->ops[i].library, p->ops[i].library, sizeof q->ops[i].library);
    q->ops[i].workspace_bytes = p->ops[i].workspace_bytes;
  }
  for (uint32_t i = 0; i < p->stage_count; i++)
    DF_TRY(df_program_add_stage(q, &p->stages[i], NULL));
  for (uint32_t i = 0; i < p->impl_count; i++) {
    DF_TRY(df_program_add_impl(q, &p->impls[i]));
    q->impls[i].origin = p->impls[i].origin; /* replacements stay replacements */
  }
  q->select_arch = p->select_arch;
  q->transfer_tile_bytes = p->transfer_tile_bytes;
  q->memory_auto = p->memory_auto;
  q->shared_memory_limit = p->shared_memory_limit;
  q->auto_policy = p->auto_policy;
  q->split_auto = p->split_auto;
  return df_status_ok();
}

df_status df_program_clone(const df_program *p, const df_allocator *alloc, df_program **out) {
  *out = NULL;
  df_program *q;
  DF_TRY(df_program_create(alloc, p->name, &q));
  df_status s = copy_into(p, q);
  if (s.code != DF_OK) {
    df_program_destroy(q);
    return s;
  }
  *out = q;
  return s;
}
