/* A module's device globals by name (cuModuleGetGlobal): developer
   readers such as bench/overhead's trace (df_rt_trace_buf, df/rt_trace.h). */
#include <stdio.h>
#include <string.h>

#include "internal.h"

df_status df_rt_module_global(const df_rt_module *m, const char *name, CUdeviceptr *ptr,
                              size_t *bytes) {
  if (!m || !name || !ptr || !bytes)
    return df_status_errorf(DF_EINVAL, "module: NULL argument to df_rt_module_global");
  df_rt *rt = m->dev->rt;
  if (!rt->drv.cuModuleGetGlobal)
    return df_status_errorf(DF_EUNSUPPORTED,
                            "module: global '%s': the CUDA driver has no cuModuleGetGlobal", name);
  DF_TRY(dfrt_bind(m->dev));
  CUdeviceptr p = 0;
  size_t n = 0;
  CUresult r = rt->drv.cuModuleGetGlobal(&p, &n, m->module, name);
  if (r == CUDA_ERROR_NOT_FOUND)
    return df_status_errorf(DF_EINVAL,
                            "module: the image of kernel '%s' has no global '%s' (for "
                            "df_rt_trace_buf: compile the kernel with the traced device runtime, "
                            "df-translate --df-runtime=df_device_runtime_trace.bc)",
                            m->kernel_name, name);
  char object[DF_NAME_MAX + 96];
  snprintf(object, sizeof object, "module: global '%.*s'", 64, name);
  DF_TRY(dfrt_check(rt, r, object, "cuModuleGetGlobal"));
  *ptr = p;
  *bytes = n;
  return df_status_ok();
}
