/* TMA descriptor specs: structural checks, tiled encoding through
   cuTensorMapEncodeTiled, and building an executable's descriptors from
   its tensor pointers and metadata. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

df_status df_rt_tma_spec_check(const df_rt_tma_spec *sp) {
  if (!sp)
    return df_status_errorf(DF_EINVAL, "TMA descriptor: NULL spec");
  if (!sp->name[0] || !memchr(sp->name, 0, sizeof sp->name))
    return df_status_errorf(DF_EINVAL, "TMA descriptor: spec has no name");
  const char *d = sp->name;
  if (!sp->tensor_name[0] || !memchr(sp->tensor_name, 0, sizeof sp->tensor_name))
    return df_status_errorf(DF_EINVAL, "TMA descriptor '%s' names no tensor", d);
  if (sp->is_im2col)
    return df_status_errorf(DF_EUNSUPPORTED,
                            "TMA descriptor '%s': im2col descriptors are not supported", d);
  if (sp->rank == 0 || sp->rank > DF_CU_TENSOR_MAP_MAX_RANK)
    return df_status_errorf(DF_EINVAL, "TMA descriptor '%s': rank %u is not in 1..%u", d,
                            sp->rank, DF_CU_TENSOR_MAP_MAX_RANK);
  struct {
    const char *what;
    uint32_t value, max;
  } enums[] = {
      {"dtype", sp->dtype, DF_CU_TENSOR_MAP_DATA_TYPE_MAX},
      {"interleave", sp->interleave, DF_CU_TENSOR_MAP_INTERLEAVE_MAX},
      {"swizzle", sp->swizzle, DF_CU_TENSOR_MAP_SWIZZLE_MAX},
      {"l2_promotion", sp->l2_promotion, DF_CU_TENSOR_MAP_L2_PROMOTION_MAX},
      {"oob_fill", sp->oob_fill, DF_CU_TENSOR_MAP_OOB_FILL_MAX},
  };
  for (size_t i = 0; i < sizeof enums / sizeof enums[0]; i++)
    if (enums[i].value > enums[i].max)
      return df_status_errorf(DF_EINVAL, "TMA descriptor '%s': %s %u is not in 0..%u", d,
                              enums[i].what, enums[i].value, enums[i].max);
  for (uint32_t i = 0; i < sp->rank; i++) {
    if (sp->global_dim[i] == 0)
      return df_status_errorf(DF_EINVAL, "TMA descriptor '%s': global_dim[%u] is 0", d, i);
    if (sp->global_stride[i] == 0)
      return df_status_errorf(DF_EINVAL, "TMA descriptor '%s': global_stride[%u] is 0", d, i);
    if (sp->box_dim[i] == 0 || sp->box_dim[i] > 256)
      return df_status_errorf(DF_EINVAL, "TMA descriptor '%s': box_dim[%u] %u is not in 1..256",
                              d, i, sp->box_dim[i]);
    if (sp->element_strides[i] == 0 || sp->element_strides[i] > 8)
      return df_status_errorf(DF_EINVAL,
                              "TMA descriptor '%s': element_strides[%u] %u is not in 1..8", d, i,
                              sp->element_strides[i]);
  }
  return df_status_ok();
}

df_status dfrt_tma_encode(const df_rt *rt, const df_rt_tma_spec *sp, uint64_t ptr,
                          CUtensorMap *map) {
  if (!rt->drv.cuTensorMapEncodeTiled)
    return df_status_errorf(DF_EUNSUPPORTED,
                            "TMA descriptor '%s': the CUDA driver has no cuTensorMapEncodeTiled "
                            "(a CUDA 12 or newer driver is needed)",
                            sp->name);
  memset(map, 0, sizeof *map);
  cuuint64_t dims[DF_CU_TENSOR_MAP_MAX_RANK], strides[DF_CU_TENSOR_MAP_MAX_RANK];
  cuuint32_t box[DF_CU_TENSOR_MAP_MAX_RANK], elem[DF_CU_TENSOR_MAP_MAX_RANK];
  for (uint32_t i = 0; i < sp->rank; i++) {
    dims[i] = sp->global_dim[i];
    box[i] = sp->box_dim[i];
    elem[i] = sp->element_strides[i];
    /* The driver takes the rank-1 outer strides: global_stride without its
       first (element size) entry. */
    strides[i] = i + 1 < sp->rank ? sp->global_stride[i + 1] : 0;
  }
  char object[DF_NAME_MAX + 32];
  snprintf(object, sizeof object, "TMA descriptor '%s'", sp->name);
  return dfrt_check(rt,
                    rt->drv.cuTensorMapEncodeTiled(
                        map, (CUtensorMapDataType)sp->dtype, sp->rank, (void *)(uintptr_t)ptr,
                        dims, strides, box, elem, (CUtensorMapInterleave)sp->interleave,
                        (CUtensorMapSwizzle)sp->swizzle,
                        (CUtensorMapL2promotion)sp->l2_promotion,
                        (CUtensorMapFloatOOBfill)sp->oob_fill),
                    object, "cuTensorMapEncodeTiled");
}

void dfrt_tma_pointers(const df_rt_executable *e, const void *bytes, size_t len,
                       uint64_t *ptrs) {
  for (uint32_t i = 0; i < e->tma_count; i++) {
    uint32_t idx = e->tma_index[i];
    ptrs[i] = 0;
    if (idx != DF_SENTINEL && ((size_t)idx + 1) * sizeof(df_abi_tensor_arg) <= len)
      memcpy(&ptrs[i], (const uint8_t *)bytes + (size_t)idx * sizeof(df_abi_tensor_arg),
             sizeof ptrs[i]);
  }
}

df_status dfrt_tma_build(const df_rt_executable *e, const uint64_t *ptrs,
                         const dfrt_meta *meta, uint32_t meta_count, CUtensorMap *maps) {
  for (uint32_t i = 0; i < e->tma_count; i++) {
    uint32_t idx = e->tma_index[i];
    df_rt_tma_binding b;
    b.name = e->tma[i].tensor_name;
    b.has_ptr = idx != DF_SENTINEL;
    b.data_ptr = ptrs[i];
    b.meta = idx != DF_SENTINEL && idx < meta_count && meta[idx].present ? &meta[idx].t : NULL;
    DF_TRY(df_rt_tma_validate(&e->tma[i], 1, &b, 1, e->dev->info.ordinal));
  }
  for (uint32_t i = 0; i < e->tma_count; i++)
    DF_TRY(dfrt_tma_encode(e->rt, &e->tma[i], ptrs[i], &maps[i]));
  return df_status_ok();
}
