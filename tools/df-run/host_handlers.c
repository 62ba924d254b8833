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

df_status host_handlers_resolve(void *handle, const char *path, const df_packed *k,
                                df_handler_fn *out) {
  char tried[3 * 2 * DF_NAME_MAX + 64];
  df_status s = df_host_resolve_dl(k, handle, out, tried, sizeof tried);
  if (s.code != DF_OK)
    return df_status_errorf(s.code, "--handlers %s: %s (looked for %s)", path, s.message,
                            tried);
  return s;
}
