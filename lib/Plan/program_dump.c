/* Text form of the program model (df-translate --df-program-dump). */
#include <stdio.h>

#include "df/program.h"

static const char *param_kind_name(df_param_kind k) {
  switch (k) {
  case DF_PARAM_SCALAR: return "scalar";
  case DF_PARAM_TENSOR: return "tensor";
  case DF_PARAM_INTER: return "inter";
  case DF_PARAM_INTER_LIST: return "list";
  }
  return "invalid";
}

static const char *type_name(const df_program *p, int32_t t) {
  return t >= 0 && (uint32_t)t < p->type_count ? p->types[t].name : "-";
}

df_status df_program_dump(const df_program *p, FILE *out) {
  fprintf(out, "program %s\n", p->name);
  fprintf(out, "task_domain:");
  for (uint32_t i = 0; i < p->axis_count; i++)
    fprintf(out, "%s %s", i ? "," : "", p->axes[i]);
  fprintf(out, "\n");
  for (uint32_t i = 0; i < p->range_count; i++)
    fprintf(out, "dynamic_range %s <- %s\n", p->ranges[i].axis, p->ranges[i].source);
  for (uint32_t i = 0; i < p->type_count; i++) {
    const df_itype *t = &p->types[i];
    fprintf(out, "intermediate %u %s slot_bytes=%u\n", i, t->name, df_itype_slot_bytes(t));
    for (uint32_t f = 0; f < t->field_count; f++) {
      const df_field *fd = &t->fields[f];
      fprintf(out, "  field %s: %s", fd->name, df_dtype_name(fd->dtype));
      if (fd->rank) {
        fprintf(out, "[");
        for (uint32_t d = 0; d < fd->rank; d++)
          fprintf(out, "%s%u", d ? "," : "", fd->shape[d]);
        fprintf(out, "]");
      }
      fprintf(out, "\n");
    }
  }
  for (uint32_t i = 0; i < p->op_count; i++) {
    const df_operator *op = &p->ops[i];
    fprintf(out, "operator %s kind=%s params=(", op->name, df_op_kind_name(op->kind));
    for (uint32_t j = 0; j < op->param_count; j++) {
      const df_param *q = &op->params[j];
      fprintf(out, "%s%s: %s", j ? ", " : "", q->name, param_kind_name(q->kind));
      if (q->type >= 0)
        fprintf(out, "<%s>", type_name(p, q->type));
    }
    fprintf(out, ") result=%s%s", type_name(p, op->result_type),
            op->kind == DF_OPK_REDUCE
                ? (df_operator_is_associative(op) ? " associative" : " n-ary")
                : "");
    if (op->workspace_bytes)
      fprintf(out, " workspace=%u", op->workspace_bytes);
    fprintf(out, "\n");
  }
  for (uint32_t i = 0; i < p->stage_count; i++) {
    const df_stage *s = &p->stages[i];
    fprintf(out, "stage %u %s: kind=%s", i, s->name, df_stage_kind_name(s->kind));
    if (s->op >= 0)
      fprintf(out, " operator=%s operator_id=%d operator_kind=%s", p->ops[s->op].name,
              df_program_operator_id(p, i), df_op_kind_name(df_program_identity_kind(p, i)));
    if (s->input >= 0)
      fprintf(out, " input=%s", p->stages[s->input].name);
    if (s->range_axis[0])
      fprintf(out, " range_axis=%s", s->range_axis);
    if (s->task_arg_count) {
      fprintf(out, " task_args=(");
      for (uint32_t j = 0; j < s->task_arg_count; j++)
        fprintf(out, "%s%s", j ? ", " : "", s->task_args[j]);
      fprintf(out, ")");
    }
    if (s->binding_count) {
      fprintf(out, " bind=(");
      for (uint32_t j = 0; j < s->binding_count; j++)
        fprintf(out, "%s%s=%s", j ? ", " : "", s->bindings[j].param, s->bindings[j].tensor);
      fprintf(out, ")");
    }
    if (s->kind == DF_STAGE_RESHARED)
      fprintf(out, " output_type=%s physical_output_type=%s output_arity=%u policy=%s",
              type_name(p, s->logical_type), type_name(p, s->type), s->output_arity, s->policy);
    else if (s->type >= 0)
      fprintf(out, " produces=%s", type_name(p, s->type));
    fprintf(out, "\n");
  }
  const char *names[64];
  uint32_t n = df_program_tensor_args(p, names, 64);
  fprintf(out, "tensor_args:");
  for (uint32_t i = 0; i < n && i < 64; i++)
    fprintf(out, "%s %u=%s", i ? "," : "", i, names[i]);
  fprintf(out, "\n");
  if (ferror(out))
    return df_status_errorf(DF_EIO, "error writing the program dump");
  return df_status_ok();
}
