/* df_shared_emit_ptx and the handler-body module: PTX and host handler
   objects for the Python bindings (lib/Target). */
#include "compile_api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/compiler.h"
#include "df/target.h"
#ifdef DF_HAVE_DEVICE_RUNTIME
#include "df/device_runtime.h"
#endif

int df_shared_has_device_runtime(void) {
#ifdef DF_HAVE_DEVICE_RUNTIME
  return 1;
#else
  return 0;
#endif
}

#ifndef DF_HAVE_DEVICE_RUNTIME
static df_status no_runtime(void) {
  return df_status_errorf(DF_EUNSUPPORTED, "compile: this libdf_compiler.so was built without "
                                           "the device runtime (needs clang-22)");
}
#endif

df_status df_shared_emit_ptx(const df_packed *k, const df_program *program, const char *sm,
                             const char *const *link_files, unsigned link_count, char **ptx,
                             size_t *len) {
  *ptx = NULL;
  *len = 0;
  if (!k)
    return df_status_errorf(DF_EINVAL, "compile: no packed plan");
#ifdef DF_HAVE_DEVICE_RUNTIME
  df_ptx_options o = {sm, link_files, link_count, df_device_runtime_bc,
                      (size_t)df_device_runtime_bc_size};
  /* no handler module: bitcode handlers only; the program for the
     handlers' workspace */
  df_kernel_options ko = {{NULL}, program, true, false, 0, false};
  return df_emit_kernel(k, &o, &ko, ptx, len);
#else
  (void)program;
  (void)sm;
  (void)link_files;
  (void)link_count;
  return no_runtime();
#endif
}

struct df_shared_handlers {
  MlirContext ctx;
  MlirOperation module;
  const df_program *program;
};

df_status df_shared_handlers_create(const df_program *p, df_shared_handlers **out) {
  *out = NULL;
  if (!p)
    return df_status_errorf(DF_EINVAL, "handler bodies: no program");
  df_shared_handlers *h = calloc(1, sizeof *h);
  if (!h)
    return df_status_errorf(DF_ENOMEM, "handler bodies: out of memory");
  df_status s = df_context_create(&h->ctx);
  if (s.code != DF_OK) {
    free(h);
    return s;
  }
  s = df_program_to_mlir(p, h->ctx, &h->module);
  if (s.code != DF_OK) {
    mlirContextDestroy(h->ctx);
    free(h);
    return s;
  }
  h->program = p;
  *out = h;
  return df_status_ok();
}

df_status df_shared_handlers_add_mlir(df_shared_handlers *h, const char *op_name,
                                      const char *text, size_t len) {
  if (!h)
    return df_status_errorf(DF_EINVAL, "handler bodies: no module");
  char source[128];
  snprintf(source, sizeof source, "<mlir body of %s>", op_name ? op_name : "?");
  return df_module_add_handler_body(h->module, op_name, text, len, source);
}

df_status df_shared_handlers_text(const df_shared_handlers *h, char **text) {
  *text = NULL;
  if (!h)
    return df_status_errorf(DF_EINVAL, "handler bodies: no module");
  df_status s = df_operation_generic_text(h->module, text);
  return s.code == DF_OK ? s : df_status_wrap(s, "handler bodies");
}

#ifdef DF_HAVE_DEVICE_RUNTIME
/* A code generation status with the located diagnostics it raised (the
   status alone drops their locations, which name the operator's text). */
static df_status located(df_status s, const df_diag_capture *diag) {
  if (s.code == DF_OK || !diag->text[0])
    return s;
  if (strstr(diag->text, s.message))
    return df_status_errorf(s.code, "%s", diag->text);
  return df_status_errorf(s.code, "%s: %s", s.message, diag->text);
}
#endif

df_status df_shared_handlers_emit_ptx(const df_shared_handlers *h, const df_packed *k,
                                      const char *sm, const char *const *link_files,
                                      unsigned link_count, char **ptx, size_t *len) {
  *ptx = NULL;
  *len = 0;
  if (!h || !k)
    return df_status_errorf(DF_EINVAL, "compile: no handler module or packed plan");
#ifdef DF_HAVE_DEVICE_RUNTIME
  df_ptx_options o = {sm, link_files, link_count, df_device_runtime_bc,
                      (size_t)df_device_runtime_bc_size};
  df_kernel_options ko = {h->module, h->program, true, false, 0, false};
  df_diag_capture diag;
  df_diag_capture_begin(h->ctx, &diag);
  df_status s = df_emit_kernel(k, &o, &ko, ptx, len);
  df_diag_capture_end(&diag);
  return located(s, &diag);
#else
  (void)sm;
  (void)link_files;
  (void)link_count;
  return no_runtime();
#endif
}

df_status df_shared_handlers_emit_host(const df_shared_handlers *h, const df_packed *k,
                                       const char *output, const char *const *link_files,
                                       unsigned link_count, const char *cc) {
  if (!h || !k)
    return df_status_errorf(DF_EINVAL, "compile: no handler module or packed plan");
#ifdef DF_HAVE_DEVICE_RUNTIME
  df_host_handler_options o = {output, link_files, link_count, cc, h->module, h->program,
                               df_host_ctx_fn_bc, (size_t)df_host_ctx_fn_bc_size};
  df_diag_capture diag;
  df_diag_capture_begin(h->ctx, &diag);
  df_status s = df_emit_host_handlers(k, &o);
  df_diag_capture_end(&diag);
  return located(s, &diag);
#else
  (void)output;
  (void)link_files;
  (void)link_count;
  (void)cc;
  return no_runtime();
#endif
}

void df_shared_handlers_destroy(df_shared_handlers *h) {
  if (!h)
    return;
  mlirOperationDestroy(h->module);
  mlirContextDestroy(h->ctx);
  free(h);
}
