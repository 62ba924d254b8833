/* Device memory: the public helpers and the grow-only buffers the
   executable keeps. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

df_status df_rt_mem_alloc(df_rt_device *dev, size_t bytes, CUdeviceptr *out) {
  if (!dev || !out)
    return df_status_errorf(DF_EINVAL, "memory: NULL argument to df_rt_mem_alloc");
  *out = 0;
  DF_TRY(dfrt_bind(dev));
  return dfrt_check(dev->rt, dev->rt->drv.cuMemAlloc(out, bytes ? bytes : 1), "memory",
                    "cuMemAlloc");
}

df_status df_rt_mem_free(df_rt_device *dev, CUdeviceptr ptr) {
  if (!dev)
    return df_status_errorf(DF_EINVAL, "memory: NULL device in df_rt_mem_free");
  if (!ptr)
    return df_status_ok();
  DF_TRY(dfrt_bind(dev));
  return dfrt_check(dev->rt, dev->rt->drv.cuMemFree(ptr), "memory", "cuMemFree");
}

df_status df_rt_memcpy_htod(df_rt_device *dev, df_rt_stream *stream, CUdeviceptr dst,
                            const void *src, size_t bytes) {
  if (!dev || (!src && bytes))
    return df_status_errorf(DF_EINVAL, "memory: NULL argument to df_rt_memcpy_htod");
  if (!bytes)
    return df_status_ok();
  DF_TRY(dfrt_bind(dev));
  return dfrt_check(dev->rt, dev->rt->drv.cuMemcpyHtoDAsync(dst, src, bytes,
                                                            df_rt_stream_handle(stream)),
                    "memory", "cuMemcpyHtoDAsync");
}

df_status df_rt_memcpy_dtoh(df_rt_device *dev, df_rt_stream *stream, void *dst,
                            CUdeviceptr src, size_t bytes) {
  if (!dev || (!dst && bytes))
    return df_status_errorf(DF_EINVAL, "memory: NULL argument to df_rt_memcpy_dtoh");
  if (!bytes)
    return df_status_ok();
  DF_TRY(dfrt_bind(dev));
  CUstream h = df_rt_stream_handle(stream);
  DF_TRY(dfrt_check(dev->rt, dev->rt->drv.cuMemcpyDtoHAsync(dst, src, bytes, h), "memory",
                    "cuMemcpyDtoHAsync"));
  return dfrt_check(dev->rt, dev->rt->drv.cuStreamSynchronize(h), "memory",
                    "cuStreamSynchronize");
}

df_status df_rt_memset_d8(df_rt_device *dev, df_rt_stream *stream, CUdeviceptr dst,
                          uint8_t value, size_t bytes) {
  if (!dev)
    return df_status_errorf(DF_EINVAL, "memory: NULL device in df_rt_memset_d8");
  if (!bytes)
    return df_status_ok();
  DF_TRY(dfrt_bind(dev));
  return dfrt_check(dev->rt, dev->rt->drv.cuMemsetD8Async(dst, value, bytes,
                                                          df_rt_stream_handle(stream)),
                    "memory", "cuMemsetD8Async");
}

df_status dfrt_buffer_reserve(df_rt_device *dev, dfrt_buffer *b, size_t bytes,
                              const char *object, bool *grown) {
  size_t size = bytes ? bytes : 1;
  if (grown)
    *grown = false;
  if (b->ptr && size <= b->cap)
    return df_status_ok();
  dfrt_buffer_release(dev, b);
  CUdeviceptr p = 0;
  DF_TRY(dfrt_check(dev->rt, dev->rt->drv.cuMemAlloc(&p, size), object, "cuMemAlloc"));
  b->ptr = p;
  b->cap = size;
  if (grown)
    *grown = true;
  return df_status_ok();
}

void dfrt_buffer_release(df_rt_device *dev, dfrt_buffer *b) {
  if (b->ptr && !dev->hung)
    dev->rt->drv.cuMemFree(b->ptr);
  b->ptr = 0;
  b->cap = 0;
}

df_status dfrt_read_file(const df_allocator *a, const char *path, const char *what,
                         uint8_t **bytes, size_t *len) {
  *bytes = NULL;
  *len = 0;
  if (!path)
    return df_status_errorf(DF_EINVAL, "%s: NULL path", what);
  FILE *f = fopen(path, "rb");
  if (!f)
    return df_status_errorf(DF_EIO, "%s: cannot open '%s'", what, path);
  long n = -1;
  if (fseek(f, 0, SEEK_END) == 0)
    n = ftell(f);
  if (n < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return df_status_errorf(DF_EIO, "%s: cannot size '%s'", what, path);
  }
  uint8_t *buf = df_alloc(a, (size_t)n + 1);
  if (!buf) {
    fclose(f);
    return df_status_errorf(DF_ENOMEM, "%s: out of memory reading '%s'", what, path);
  }
  size_t got = fread(buf, 1, (size_t)n, f);
  fclose(f);
  if (got != (size_t)n) {
    df_free(a, buf);
    return df_status_errorf(DF_EIO, "%s: short read of '%s' (%zu of %ld bytes)", what, path,
                            got, n);
  }
  buf[n] = 0;
  *bytes = buf;
  *len = (size_t)n;
  return df_status_ok();
}
