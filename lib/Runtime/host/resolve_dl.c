/* Handlers from a dlopen'ed shared object: the packed symbol first, then
   the names the PTX path links by (lib/Target/dispatch.c): the variant's
   specialised name, then the operator name. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "df/host_backend.h"
#include "df/kernel_plan.h"

typedef struct dl_lookup {
  void *lib;
  const df_packed *k;
  char *tried;
  size_t cap;
} dl_lookup;

static void *try_name(dl_lookup *l, const char *name) {
  size_t n = strlen(l->tried);
  snprintf(l->tried + n, l->cap - n, "%s%s", n ? ", " : "", name);
  dlerror();
  return dlsym(l->lib, name);
}

static void *find(void *user, const char *symbol) {
  dl_lookup *l = user;
  l->tried[0] = '\0';
  void *fn = try_name(l, symbol);
  if (fn)
    return fn;
  const df_handler *h = NULL;
  for (uint32_t i = 0; i < l->k->handler_count && !h; i++)
    if (strcmp(l->k->handlers[i].symbol, symbol) == 0)
      h = &l->k->handlers[i];
  if (!h)
    return NULL;
  char special[2 * DF_NAME_MAX + 48] = "";
  if (h->has_variant)
    df_variant_diag_name(&h->variant, h->name, special, sizeof special);
  if (special[0] && strcmp(special, h->name) != 0 && strcmp(special, symbol) != 0 &&
      (fn = try_name(l, special)))
    return fn;
  if (h->name[0] && strcmp(h->name, symbol) != 0)
    fn = try_name(l, h->name);
  return fn;
}

df_status df_host_workspace_dl(void *lib, uint32_t *out) {
  *out = 0;
  dlerror();
  const uint32_t *w = dlsym(lib, "df_handler_workspace_bytes");
  if (!w)
    return df_status_ok();
  if (*w > DF_WORKSPACE_MAX_BYTES)
    return df_status_errorf(DF_EFORMAT,
                            "the handler library's df_handler_workspace_bytes is %u, over the "
                            "largest workspace a handler may declare (%u bytes)",
                            *w, DF_WORKSPACE_MAX_BYTES);
  *out = *w;
  return df_status_ok();
}

df_status df_host_resolve_dl(const df_packed *k, void *lib, df_handler_fn *out, char *tried,
                             size_t tried_cap) {
  char none[1];
  dl_lookup l = {lib, k, tried_cap ? tried : none, tried_cap ? tried_cap : 1};
  l.tried[0] = '\0';
  return df_host_resolve_handlers(k, find, &l, out);
}
