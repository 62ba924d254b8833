/* Handler ids of a (re-planned) plan mapped onto the handler table of the
   plan the module was compiled for: the kernel dispatches on the module
   plan's ids, so a variant that table lacks cannot run. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static bool same_handler(const df_handler *a, const df_handler *b) {
  if (a->has_identity != b->has_identity || a->has_variant != b->has_variant ||
      strcmp(a->impl, b->impl) != 0) /* a chosen implementation is part of the handler */
    return false;
  if (a->has_variant)
    return df_variant_equal(&a->variant, &b->variant);
  if (a->has_identity)
    return a->identity.operator_id == b->identity.operator_id &&
           a->identity.kind == b->identity.kind;
  /* Legacy handlers: (kind, operator name). */
  return a->kind == b->kind && strcmp(a->name, b->name) == 0;
}

static void describe(const df_handler *h, char *buf, size_t cap) {
  if (h->has_variant) {
    const df_variant *v = &h->variant;
    if (v->has_iter)
      snprintf(buf, cap, "%s (%u,%s) iter %s %u", h->name, v->base.operator_id,
               df_op_kind_name(v->base.kind), df_iter_mode_name(v->iter_mode), v->iter_value);
    else if (v->has_arity)
      snprintf(buf, cap, "%s (%u,%s) arity %s", h->name, v->base.operator_id,
               df_op_kind_name(v->base.kind), df_arity_class_name(v->arity));
    else
      snprintf(buf, cap, "%s (%u,%s)", h->name, v->base.operator_id,
               df_op_kind_name(v->base.kind));
  } else {
    snprintf(buf, cap, "%s (%s)", h->name, df_op_kind_name(h->kind));
  }
  size_t n = strlen(buf);
  if (h->impl[0] && n < cap)
    snprintf(buf + n, cap - n, " implementation %s", h->impl);
}

df_status dfrt_map_handlers(const df_rt_executable *e, const df_packed *k, uint32_t *map) {
  for (uint32_t i = 0; i < k->handler_count; i++) {
    uint32_t found = DF_SENTINEL;
    for (uint32_t j = 0; j < e->handler_count && found == DF_SENTINEL; j++)
      if (same_handler(&k->handlers[i], &e->handlers[j]))
        found = e->handlers[j].id;
    if (found == DF_SENTINEL) {
      char what[160];
      describe(&k->handlers[i], what, sizeof what);
      return df_status_errorf(DF_EINVAL,
                              "executable: plan handler %u, %s, is not among the %u handlers "
                              "of the module's plan; re-compile the kernel for this variant",
                              i, what, e->handler_count);
    }
    map[i] = found;
  }
  return df_status_ok();
}
