/* Handler resolution for df-run: the packed handler table's symbols
   looked up through a caller's function (dlsym over a host build). */
#include <string.h>

#include "host_internal.h"

df_status df_host_resolve_handlers(const df_packed *k, df_host_symbol_lookup lookup,
                                   void *user, df_handler_fn *out) {
  if (!k || !lookup || (!out && k->handler_count))
    return df_status_errorf(DF_EINVAL,
                            "handler resolution expects a packed plan, a lookup and an output "
                            "table, got NULL");
  for (uint32_t h = 0; h < k->handler_count; h++) {
    const df_handler *d = &k->handlers[h];
    void *p = lookup(user, d->symbol);
    if (!p && d->part_count) {
      out[h] = NULL; /* a composite: the backend runs its parts */
      continue;
    }
    if (!p)
      return df_status_errorf(DF_EINVAL,
                              "handler %u '%s' (%s): symbol '%s' not found in the host handler "
                              "library%s",
                              h, d->name, df_op_kind_name(d->kind), d->symbol,
                              strchr(d->name, '+')
                                  ? " (a composite of fused instructions: make the library "
                                    "with df-translate --df-to-host from the fused plan)"
                                  : "");
    df_handler_fn f;
    memcpy(&f, &p, sizeof f);
    out[h] = f;
  }
  return df_status_ok();
}
