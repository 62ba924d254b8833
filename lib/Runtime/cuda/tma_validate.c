/* Fail-closed validation of the tensors behind TMA descriptor specs
   (REFERENCE 7.3), in the reference's order, with its message fragments. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Expected (dtype code, bits) of the driver's tensor-map dtypes 0-9;
   codes 0 means "int, uint or float" (map dtype 0) or "int or uint" (1). */
typedef struct map_dtype {
  const char *name;
  uint32_t bits;
  uint32_t codes; /* bit mask of accepted DF_TENSOR_DTYPE_* */
} map_dtype;

#define CODE(c) (1u << (c))
static const map_dtype map_dtypes[] = {
    {"8-bit int/uint/float", 8,
     CODE(DF_TENSOR_DTYPE_INT) | CODE(DF_TENSOR_DTYPE_UINT) | CODE(DF_TENSOR_DTYPE_FLOAT)},
    {"16-bit int/uint", 16, CODE(DF_TENSOR_DTYPE_INT) | CODE(DF_TENSOR_DTYPE_UINT)},
    {"uint32", 32, CODE(DF_TENSOR_DTYPE_UINT)},
    {"int32", 32, CODE(DF_TENSOR_DTYPE_INT)},
    {"uint64", 64, CODE(DF_TENSOR_DTYPE_UINT)},
    {"int64", 64, CODE(DF_TENSOR_DTYPE_INT)},
    {"float16", 16, CODE(DF_TENSOR_DTYPE_FLOAT)},
    {"float32", 32, CODE(DF_TENSOR_DTYPE_FLOAT)},
    {"float64", 64, CODE(DF_TENSOR_DTYPE_FLOAT)},
    {"bfloat16", 16, CODE(DF_TENSOR_DTYPE_BFLOAT)},
};

static const char *code_name(uint32_t code) {
  static const char *const names[] = {"unknown", "int", "uint", "float", "bfloat", "bool"};
  return code <= DF_TENSOR_DTYPE_BOOL ? names[code] : "invalid";
}

static void format_dims(char *buf, size_t cap, const int64_t *v, uint32_t n) {
  size_t used = (size_t)snprintf(buf, cap, "(");
  for (uint32_t i = 0; i < n && used < cap; i++)
    used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? ", " : "", (long long)v[i]);
  if (used < cap)
    snprintf(buf + used, cap - used, ")");
}

static void reversed(const uint64_t *src, uint32_t n, int64_t *dst) {
  for (uint32_t i = 0; i < n; i++)
    dst[i] = (int64_t)src[n - 1 - i];
}

static const df_rt_tma_binding *find(const df_rt_tma_binding *b, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (b[i].name && strcmp(b[i].name, name) == 0)
      return &b[i];
  return NULL;
}

static df_status check_one(const df_rt_tma_spec *sp, const df_rt_tma_binding *b,
                           int expected_ordinal) {
  const char *d = sp->name, *tn = sp->tensor_name;
  if (!b || !b->has_ptr)
    return df_status_errorf(DF_EINVAL, "TMA descriptor '%s' references missing tensor argument "
                                       "'%s'",
                            d, tn);
  if (b->data_ptr == 0)
    return df_status_errorf(DF_EINVAL, "TMA descriptor '%s' has a null tensor pointer for "
                                       "tensor '%s'",
                            d, tn);
  if (b->data_ptr % 16 != 0)
    return df_status_errorf(DF_EINVAL,
                            "TMA descriptor '%s' requires a 16-byte aligned tensor pointer, got "
                            "0x%" PRIx64 " for tensor '%s'",
                            d, b->data_ptr, tn);
  const df_rt_tensor *m = b->meta;
  if (!m)
    return df_status_errorf(DF_EINVAL,
                            "TMA descriptor '%s' tensor '%s' has no runtime shape, stride, and "
                            "device metadata",
                            d, tn);
  const char *source = m->source ? m->source : "unknown";
  if (!m->has_shape || !m->has_strides)
    return df_status_errorf(DF_EINVAL,
                            "TMA descriptor '%s' cannot validate tensor '%s' from %s; pass a "
                            "CUDA tensor-like object with shape, strides and device metadata "
                            "instead of a raw pointer",
                            d, tn, source);
  if (sp->dtype < sizeof map_dtypes / sizeof map_dtypes[0]) {
    const map_dtype *want = &map_dtypes[sp->dtype];
    bool code_ok = m->dtype_code <= 31 && (want->codes & CODE(m->dtype_code));
    if (!code_ok || m->dtype_bits != want->bits)
      return df_status_errorf(DF_EINVAL,
                              "TMA descriptor '%s' runtime dtype mismatch for tensor '%s': "
                              "descriptor dtype %u wants %s, got %s/%u",
                              d, tn, sp->dtype, want->name, code_name(m->dtype_code),
                              m->dtype_bits);
  }
  if (m->ndim != sp->rank)
    return df_status_errorf(DF_EINVAL, "TMA descriptor '%s' expects rank %u for tensor '%s', "
                                       "got rank %u",
                            d, sp->rank, tn, m->ndim);
  int64_t want[DF_CU_TENSOR_MAP_MAX_RANK];
  char wbuf[128], gbuf[128];
  uint32_t rank = sp->rank <= DF_CU_TENSOR_MAP_MAX_RANK ? sp->rank : DF_CU_TENSOR_MAP_MAX_RANK;
  reversed(sp->global_dim, rank, want);
  if (memcmp(want, m->shape, sizeof(int64_t) * rank) != 0) {
    format_dims(wbuf, sizeof wbuf, want, rank);
    format_dims(gbuf, sizeof gbuf, m->shape, rank);
    return df_status_errorf(DF_EINVAL,
                            "TMA descriptor '%s' runtime shape mismatch for tensor '%s': "
                            "expected %s, got %s",
                            d, tn, wbuf, gbuf);
  }
  reversed(sp->global_stride, rank, want);
  if (memcmp(want, m->strides_bytes, sizeof(int64_t) * rank) != 0) {
    format_dims(wbuf, sizeof wbuf, want, rank);
    format_dims(gbuf, sizeof gbuf, m->strides_bytes, rank);
    return df_status_errorf(DF_EINVAL,
                            "TMA descriptor '%s' runtime byte-stride mismatch for tensor '%s': "
                            "expected %s, got %s",
                            d, tn, wbuf, gbuf);
  }
  if (m->device_type != DF_RT_DEVICE_CUDA || !m->has_device_index)
    return df_status_errorf(DF_EINVAL,
                            "TMA descriptor '%s' requires explicit CUDA device metadata for "
                            "tensor '%s'",
                            d, tn);
  if (expected_ordinal >= 0 && m->device_index != expected_ordinal)
    return df_status_errorf(DF_EINVAL,
                            "TMA descriptor '%s' device mismatch: expected cuda:%d, got cuda:%d "
                            "for tensor '%s'",
                            d, expected_ordinal, m->device_index, tn);
  return df_status_ok();
}

df_status df_rt_tma_validate(const df_rt_tma_spec *specs, uint32_t spec_count,
                             const df_rt_tma_binding *bindings, uint32_t binding_count,
                             int expected_ordinal) {
  if ((spec_count && !specs) || (binding_count && !bindings))
    return df_status_errorf(DF_EINVAL, "TMA validation: NULL specs or bindings");
  for (uint32_t i = 0; i < spec_count; i++)
    DF_TRY(check_one(&specs[i], find(bindings, binding_count, specs[i].tensor_name),
                     expected_ordinal));
  return df_status_ok();
}
