/* df-run --handlers: the plan's handlers from a host-compiled shared
   object, resolved through dlsym. */
#ifndef DF_RUN_HOST_HANDLERS_H
#define DF_RUN_HOST_HANDLERS_H

#include "df/device.h"
#include "df/plan.h"
#include "df/status.h"

/* dlopen `path` (a path without '/' is taken relative to the working
   directory, not searched for). *handle is NULL on failure. */
df_status host_handlers_open(const char *path, void **handle);

/* Fill out[0..k->handler_count) through df_host_resolve_handlers: for
   each handler its packed symbol (dataflow_handler_<id>_<name>), else the
   variant's specialised name (<name>__dataflow_iter_...), else the
   operator name. Fails naming the handler and every symbol looked for. */
df_status host_handlers_resolve(void *handle, const char *path, const df_packed *k,
                                df_handler_fn *out);

/* dlclose; NULL-safe. */
void host_handlers_close(void *handle);

#endif
