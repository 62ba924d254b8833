/* Tensor arguments: raw pointers and tensor descriptions, and their
   32-byte records (REFERENCE 7.1). */
#include <string.h>

#include "internal.h"

df_rt_tensor df_rt_tensor_raw(uint64_t data_ptr) {
  df_rt_tensor t;
  memset(&t, 0, sizeof t);
  t.data_ptr = data_ptr;
  t.source = "raw_pointer";
  return t;
}

df_rt_tensor df_rt_tensor_missing(void) {
  df_rt_tensor t;
  memset(&t, 0, sizeof t);
  t.source = "missing";
  t.missing = true;
  return t;
}

df_status df_rt_tensor_contiguous(uint64_t data_ptr, df_dtype dtype, uint32_t ndim,
                                  const int64_t *shape, int ordinal, df_rt_tensor *out) {
  if (!out || (ndim && !shape))
    return df_status_errorf(DF_EINVAL, "tensor: NULL argument to df_rt_tensor_contiguous");
  memset(out, 0, sizeof *out);
  if (ndim > DF_RT_MAX_DIMS)
    return df_status_errorf(DF_EINVAL, "tensor: rank %u exceeds the maximum of %u", ndim,
                            DF_RT_MAX_DIMS);
  uint32_t bytes = df_dtype_bytes(dtype);
  if (!bytes)
    return df_status_errorf(DF_EINVAL, "tensor: dtype %d is not a valid df dtype", (int)dtype);
  out->data_ptr = data_ptr;
  out->source = "tensor_description";
  out->has_shape = out->has_strides = true;
  out->ndim = ndim;
  int64_t stride = bytes;
  for (uint32_t i = ndim; i-- > 0;) {
    if (shape[i] < 0)
      return df_status_errorf(DF_EINVAL, "tensor: dimension %u has negative extent %lld", i,
                              (long long)shape[i]);
    out->shape[i] = shape[i];
    out->strides_bytes[i] = stride;
    stride *= shape[i] ? shape[i] : 1;
  }
  out->device_type = DF_RT_DEVICE_CUDA;
  out->has_device_index = ordinal >= 0;
  out->device_index = ordinal;
  out->dtype_code = df_dtype_code(dtype);
  out->dtype_bits = df_dtype_bits(dtype);
  return df_status_ok();
}

static bool is_raw(const df_rt_tensor *t) {
  return !t->has_shape && !t->has_strides && t->ndim == 0 && t->dtype_code == 0;
}

df_status df_rt_tensor_pack(const df_rt_tensor *t, df_abi_tensor_arg *out) {
  if (!t || !out)
    return df_status_errorf(DF_EINVAL, "tensor: NULL argument to df_rt_tensor_pack");
  memset(out, 0, sizeof *out);
  if (t->missing)
    return df_status_ok();
  out->data_ptr = t->data_ptr;
  if (is_raw(t)) {
    out->flags = DF_TENSOR_ARG_RAW_POINTER;
    return df_status_ok();
  }
  if (t->ndim > DF_RT_MAX_DIMS)
    return df_status_errorf(DF_EINVAL, "tensor: rank %u exceeds the maximum of %u", t->ndim,
                            DF_RT_MAX_DIMS);
  if (t->dtype_code > DF_TENSOR_DTYPE_BOOL)
    return df_status_errorf(DF_EINVAL, "tensor: dtype code %u is not a tensor dtype code (0-5)",
                            t->dtype_code);
  if (t->dtype_code != DF_TENSOR_DTYPE_UNKNOWN && t->dtype_bits == 0)
    return df_status_errorf(DF_EINVAL, "tensor: dtype code %u needs non-zero dtype_bits",
                            t->dtype_code);
  if (t->has_shape)
    for (uint32_t i = 0; i < t->ndim; i++)
      if (t->shape[i] < 0)
        return df_status_errorf(DF_EINVAL, "tensor: dimension %u has negative extent %lld", i,
                                (long long)t->shape[i]);
  out->ndim = t->ndim;
  out->dtype_code = t->dtype_code;
  out->dtype_bits = t->dtype_bits;
  out->flags = DF_TENSOR_ARG_ARRAY_INTERFACE;
  return df_status_ok();
}
