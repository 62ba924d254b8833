/* Driver status codes as df statuses. */
#include <stdio.h>

#include "internal.h"

df_code dfrt_code_for(CUresult r) {
  switch ((int)r) {
  case CUDA_SUCCESS:
    return DF_OK;
  case CUDA_ERROR_OUT_OF_MEMORY:
    return DF_ENOMEM;
  case CUDA_ERROR_INVALID_VALUE:
  case CUDA_ERROR_INVALID_DEVICE:
  case CUDA_ERROR_INVALID_HANDLE:
  case CUDA_ERROR_INVALID_CLUSTER_SIZE:
  case CUDA_ERROR_NOT_FOUND:
    return DF_EINVAL;
  case CUDA_ERROR_INVALID_IMAGE:
  case CUDA_ERROR_INVALID_PTX:
  case CUDA_ERROR_NO_BINARY_FOR_GPU:
  case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    return DF_EFORMAT;
  case CUDA_ERROR_NO_DEVICE:
  case CUDA_ERROR_NOT_SUPPORTED:
  case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    return DF_EUNSUPPORTED;
  default:
    /* Launch failures, lost contexts, unknown errors: the device did not
       do what was asked. */
    return DF_EIO;
  }
}

df_status dfrt_check(const df_rt *rt, CUresult r, const char *object, const char *fn) {
  if (r == CUDA_SUCCESS)
    return df_status_ok();
  const char *name = NULL, *text = NULL;
  if (rt && rt->drv.cuGetErrorName && rt->drv.cuGetErrorName(r, &name) != CUDA_SUCCESS)
    name = NULL;
  if (rt && rt->drv.cuGetErrorString && rt->drv.cuGetErrorString(r, &text) != CUDA_SUCCESS)
    text = NULL;
  return df_status_errorf(dfrt_code_for(r), "%s: %s failed: %s (%d)%s%s", object, fn,
                          name ? name : "CUDA error", (int)r, text ? ": " : "",
                          text ? text : "");
}
