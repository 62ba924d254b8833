/* df_shared_emit_ptx: PTX for the Python bindings (lib/Target). */
#include "compile_api.h"

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

df_status df_shared_emit_ptx(const df_packed *k, const char *sm,
                             const char *const *link_files, unsigned link_count, char **ptx,
                             size_t *len) {
  *ptx = NULL;
  *len = 0;
  if (!k)
    return df_status_errorf(DF_EINVAL, "compile: no packed plan");
#ifdef DF_HAVE_DEVICE_RUNTIME
  df_ptx_options o = {sm, link_files, link_count, df_device_runtime_bc,
                      (size_t)df_device_runtime_bc_size};
  return df_emit_ptx(k, &o, ptx, len);
#else
  (void)sm;
  (void)link_files;
  (void)link_count;
  return df_status_errorf(DF_EUNSUPPORTED, "compile: this libdf_compiler.so was built without "
                                           "the device runtime (needs clang-22)");
#endif
}
