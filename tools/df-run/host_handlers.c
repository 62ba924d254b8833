#include "host_handlers.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "df/host_backend.h"

df_status host_handlers_open(const char *path, void **handle) {
  *handle = NULL;
  char local[4096];
  if (!strchr(path, '/')) {
    snprintf(local, sizeof local, "./%s", path);
    path = local;
  }
  dlerror();
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *why = dlerror();
    return df_status_errorf(DF_EIO, "--handlers: cannot load the host handler library: %s",
                            why ? why : path);
  }
  *handle = h;
  return df_status_ok();
}

void host_handlers_close(void *handle) {
  if (handle)
    dlclose(handle);
}

typedef struct lookup_state {
  void *handle;
  const df_packed *k;
  char tried[3 * 2 * DF_NAME_MAX + 64]; /* names looked for by the last call */
} lookup_state;

static void *find(lookup_state *st, const char *name) {
  size_t n = strlen(st->tried);
  snprintf(st->tried + n, sizeof st->tried - n, "%s%s", n ? ", " : "", name);
  dlerror();
  return dlsym(st->handle, name);
}

/* The packed symbol first, then the names the PTX path links by
   (lib/Target/dispatch.c): the variant's specialised name, the operator
   name. */
static void *lookup(void *user, const char *symbol) {
  lookup_state *st = user;
  st->tried[0] = '\0';
  void *p = find(st, symbol);
  if (p)
    return p;
  const df_handler *h = NULL;
  for (uint32_t i = 0; i < st->k->handler_count && !h; i++)
    if (strcmp(st->k->handlers[i].symbol, symbol) == 0)
      h = &st->k->handlers[i];
  if (!h)
    return NULL;
  char special[2 * DF_NAME_MAX + 48] = "";
  if (h->has_variant)
    df_variant_diag_name(&h->variant, h->name, special, sizeof special);
  if (special[0] && strcmp(special, h->name) != 0 && strcmp(special, symbol) != 0 &&
      (p = find(st, special)))
    return p;
  if (h->name[0] && strcmp(h->name, symbol) != 0)
    p = find(st, h->name);
  return p;
}

df_status host_handlers_resolve(void *handle, const char *path, const df_packed *k,
                                df_handler_fn *out) {
  lookup_state st;
  memset(&st, 0, sizeof st);
  st.handle = handle;
  st.k = k;
  df_status s = df_host_resolve_handlers(k, lookup, &st, out);
  if (s.code != DF_OK)
    return df_status_errorf(s.code, "--handlers %s: %s (looked for %s)", path, s.message,
                            st.tried);
  return s;
}
