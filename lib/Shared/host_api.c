/* df_shared_host_run: the host backend for the Python bindings. */
#include "host_api.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/host_backend.h"

/* Text written by `write` into a malloc'ed string (NULL on failure). */
static char *as_text(df_status (*write)(const df_host_result *, FILE *),
                     const df_host_result *r) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f)
    return NULL;
  df_status s = write(r, f);
  fclose(f);
  if (s.code != DF_OK) {
    free(text);
    return NULL;
  }
  return text;
}

static char *copy_text(const char *s) {
  if (!s)
    return NULL;
  size_t n = strlen(s) + 1;
  char *c = malloc(n);
  if (c)
    memcpy(c, s, n);
  return c;
}

static df_status run(const df_packed *k, df_handler_fn *fns, uint32_t workspace,
                     const df_abi_tensor_arg *tensors, uint32_t tensor_count,
                     const df_shared_host_run_options *o, df_shared_host_run_info *out) {
  df_host_options ho = df_host_options_default();
  ho.workspace_bytes = workspace;
  ho.threads = o && o->threads ? o->threads : 1;
  ho.op_log = o && o->op_log;
  uint32_t block_size = o && o->block_size ? o->block_size : 1;
  df_host_result res;
  df_status s = df_host_run(k, fns, k->handler_count, tensors, tensor_count, block_size, &ho,
                            &res);
  out->steps = res.steps;
  out->op_count = res.op_count;
  out->diag_kind = (uint32_t)res.diag.kind;
  out->makespan_cycles = res.cost.makespan_cycles;
  if (res.diag.kind != DF_HOST_DIAG_NONE)
    out->report = copy_text(res.diag.report ? res.diag.report : s.message);
  if (o && o->op_log)
    out->op_log = as_text(df_host_op_log_write, &res);
  if (o && o->cost)
    out->cost = as_text(df_host_cost_write, &res);
  df_host_result_free(&res);
  return s;
}

df_status df_shared_host_run(const df_packed *k, const char *handlers_path,
                             const df_abi_tensor_arg *tensors, uint32_t tensor_count,
                             const df_shared_host_run_options *o,
                             df_shared_host_run_info *out) {
  memset(out, 0, sizeof *out);
  if (!k || !handlers_path)
    return df_status_errorf(DF_EINVAL, "host run: a packed plan and a handler library are "
                                       "required");
  dlerror();
  void *lib = dlopen(handlers_path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    return df_status_errorf(DF_EIO, "host run: cannot load the handler library '%s': %s",
                            handlers_path, why ? why : "dlopen failed");
  }
  df_handler_fn *fns = calloc(k->handler_count ? k->handler_count : 1, sizeof *fns);
  df_status s = df_status_ok();
  if (!fns)
    s = df_status_errorf(DF_ENOMEM, "host run: out of memory for %u handlers",
                         k->handler_count);
  char tried[3 * 2 * DF_NAME_MAX + 64] = "";
  if (s.code == DF_OK) {
    s = df_host_resolve_dl(k, lib, fns, tried, sizeof tried);
    if (s.code != DF_OK)
      s = df_status_errorf(s.code, "host run: handler library '%s': %s (looked for %s)",
                           handlers_path, s.message, tried);
  }
  uint32_t workspace = 0;
  if (s.code == DF_OK) {
    s = df_host_workspace_dl(lib, &workspace);
    if (s.code != DF_OK)
      s = df_status_errorf(s.code, "host run: handler library '%s': %s", handlers_path,
                           s.message);
    if (o && o->workspace_bytes > workspace)
      workspace = o->workspace_bytes;
  }
  if (s.code == DF_OK)
    s = run(k, fns, workspace, tensors, tensor_count, o, out);
  free(fns);
  dlclose(lib);
  return s;
}

void df_shared_host_run_info_free(df_shared_host_run_info *info) {
  if (!info)
    return;
  free(info->report);
  free(info->op_log);
  free(info->cost);
  memset(info, 0, sizeof *info);
}
