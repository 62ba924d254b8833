/* The persistent executable's tensor arguments (REFERENCE 7.4): one
   grow-only device buffer, copies skipped when the bytes are unchanged,
   TMA descriptors built once from the first non-null pointers and never
   silently rebuilt by a pointer-only update. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

static df_status copy_bytes(const df_allocator *a, uint8_t **dst, size_t *dst_len,
                            const void *src, size_t len) {
  uint8_t *p = df_alloc(a, len ? len : 1);
  if (!p)
    return df_status_errorf(DF_ENOMEM, "executable: out of memory keeping %zu tensor-arg bytes",
                            len);
  if (len)
    memcpy(p, src, len);
  df_free(a, *dst);
  *dst = p;
  *dst_len = len;
  return df_status_ok();
}

static bool same_bytes(const uint8_t *a, size_t alen, const void *b, size_t blen) {
  return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

df_status dfrt_targs_update(df_rt_executable *e, const void *bytes, size_t len,
                            CUstream stream) {
  dfrt_targs *t = &e->targs;
  df_allocator *a = &e->rt->alloc;
  uint64_t stack_ptrs[8], *ptrs = stack_ptrs;
  if (e->tma_count > 8) {
    ptrs = df_alloc(a, sizeof *ptrs * e->tma_count);
    if (!ptrs)
      return df_status_errorf(DF_ENOMEM, "executable: out of memory reading TMA pointers");
  }
  df_status s = df_status_ok();
  /* 1-2: TMA tensor pointers; refuse a pointer-only change, build once. */
  bool any_ptr = false;
  if (e->tma_count) {
    dfrt_tma_pointers(e, bytes, len, ptrs);
    for (uint32_t i = 0; i < e->tma_count; i++)
      any_ptr = any_ptr || ptrs[i] != 0;
    if (t->has_ptr_map && memcmp(t->ptr_map, ptrs, sizeof *ptrs * e->tma_count) != 0) {
      uint32_t i = 0;
      while (t->ptr_map[i] == ptrs[i])
        i++;
      s = df_status_errorf(DF_EINVAL,
                           "executable: persistent Dataflow TMA tensor pointers cannot be "
                           "changed through pointer-only tensor_args_bytes; tensor '%s' of TMA "
                           "descriptor '%s' moved from 0x%llx to 0x%llx: bind the tensors again "
                           "(df_rt_executable_bind_tensors) to rebuild the descriptors",
                           e->tma[i].tensor_name, e->tma[i].name,
                           (unsigned long long)t->ptr_map[i], (unsigned long long)ptrs[i]);
    } else if (any_ptr && !t->built) {
      s = dfrt_tma_build(e, ptrs, t->meta, t->meta_count, t->maps);
      if (s.code == DF_OK) {
        t->built = true;
        t->builds++;
      }
    }
  }
  /* 3: grow the device buffer only when needed. */
  bool grown = false;
  if (s.code == DF_OK)
    s = dfrt_buffer_reserve(e->dev, &t->buf, len, "executable: tensor args", &grown);
  if (s.code == DF_OK && grown) {
    t->has_uploaded = false;
    t->uploaded_len = 0;
  }
  /* 4: copy only changed bytes. */
  if (s.code == DF_OK && !(t->has_uploaded && same_bytes(t->uploaded, t->uploaded_len, bytes, len))) {
    if (len)
      s = dfrt_check(e->rt, e->rt->drv.cuMemcpyHtoDAsync(t->buf.ptr, bytes, len, stream),
                     "executable: tensor args", "cuMemcpyHtoDAsync");
    if (s.code == DF_OK && !same_bytes(t->current, t->current_len, bytes, len))
      s = copy_bytes(a, &t->current, &t->current_len, bytes, len);
    if (s.code == DF_OK)
      s = copy_bytes(a, &t->uploaded, &t->uploaded_len, bytes, len);
    if (s.code == DF_OK) {
      t->has_uploaded = true;
      if (e->tma_count && any_ptr) {
        memcpy(t->ptr_map, ptrs, sizeof *ptrs * e->tma_count);
        t->has_ptr_map = true;
      }
    }
  }
  if (ptrs != stack_ptrs)
    df_free(a, ptrs);
  if (s.code == DF_OK)
    e->params_ptr[DFRT_P_TENSOR_ARGS] = t->buf.ptr;
  return s;
}

df_status dfrt_meta_build(df_rt_executable *e, const df_rt_tensor *tensors, uint32_t count,
                          dfrt_meta **out) {
  df_allocator *a = &e->rt->alloc;
  *out = NULL;
  dfrt_meta *m = df_alloc(a, sizeof *m * (count ? count : 1));
  if (!m)
    return df_status_errorf(DF_ENOMEM, "executable: out of memory keeping tensor metadata");
  memset(m, 0, sizeof *m * (count ? count : 1));
  for (uint32_t i = 0; i < count; i++) {
    const df_rt_tensor *in = &tensors[i];
    if (in->ndim > DF_RT_MAX_DIMS) {
      df_free(a, m);
      return df_status_errorf(DF_EINVAL,
                              "executable: tensor %u has rank %u, over the maximum of %u", i,
                              in->ndim, DF_RT_MAX_DIMS);
    }
    if (in->missing)
      continue;
    m[i].present = true;
    m[i].t = *in;
    snprintf(m[i].source, sizeof m[i].source, "%s", in->source ? in->source : "unknown");
    m[i].t.source = m[i].source;
  }
  *out = m;
  return df_status_ok();
}

void dfrt_targs_adopt_meta(df_rt_executable *e, dfrt_meta *meta, uint32_t count) {
  df_free(&e->rt->alloc, e->targs.meta);
  e->targs.meta = meta;
  e->targs.meta_count = count;
}

df_status dfrt_targs_bind(df_rt_executable *e, const df_abi_tensor_arg *records,
                          uint32_t count, dfrt_meta *meta, CUstream stream) {
  dfrt_targs *t = &e->targs;
  df_allocator *a = &e->rt->alloc;
  size_t len = sizeof *records * count;
  bool any_ptr = false;
  uint64_t *ptrs = NULL;
  void *block = NULL;
  CUtensorMap *maps = NULL;
  df_status s = df_status_ok();
  if (e->tma_count) {
    ptrs = df_alloc(a, sizeof *ptrs * e->tma_count);
    block = df_alloc(a, sizeof *maps * e->tma_count + 128);
    if (!ptrs || !block)
      s = df_status_errorf(DF_ENOMEM, "executable: out of memory building TMA descriptors");
    if (s.code == DF_OK) {
      maps = (CUtensorMap *)(((uintptr_t)block + 127) & ~(uintptr_t)127);
      dfrt_tma_pointers(e, records, len, ptrs);
      for (uint32_t i = 0; i < e->tma_count; i++)
        any_ptr = any_ptr || ptrs[i] != 0;
      if (any_ptr)
        s = dfrt_tma_build(e, ptrs, meta, count, maps);
    }
  }
  if (s.code != DF_OK) {
    df_free(a, ptrs);
    df_free(a, block);
    df_free(a, meta);
    return s;
  }
  /* Commit: the new metadata, descriptors and the pointers they were built
     from (a later pointer-only update must not move them). */
  dfrt_targs_adopt_meta(e, meta, count);
  t->built = any_ptr;
  t->has_ptr_map = any_ptr;
  if (any_ptr) {
    memcpy(t->maps, maps, sizeof *maps * e->tma_count);
    memcpy(t->ptr_map, ptrs, sizeof *ptrs * e->tma_count);
    t->builds++;
  }
  df_free(a, ptrs);
  df_free(a, block);
  return dfrt_targs_update(e, records, len, stream);
}

void dfrt_targs_release(df_rt_executable *e) {
  dfrt_targs *t = &e->targs;
  df_allocator *a = &e->rt->alloc;
  dfrt_buffer_release(e->dev, &t->buf);
  df_free(a, t->current);
  df_free(a, t->uploaded);
  df_free(a, t->meta);
  df_free(a, t->map_block);
  df_free(a, t->ptr_map);
  memset(t, 0, sizeof *t);
}
