/* Streams. A NULL df_rt_stream is the device's default stream. */
#include <string.h>

#include "internal.h"

df_status df_rt_stream_create(df_rt_device *dev, df_rt_stream **out) {
  if (!dev || !out)
    return df_status_errorf(DF_EINVAL, "stream: NULL argument to df_rt_stream_create");
  *out = NULL;
  DF_TRY(dfrt_bind(dev));
  df_rt_stream *s = df_alloc(&dev->rt->alloc, sizeof *s);
  if (!s)
    return df_status_errorf(DF_ENOMEM, "stream: out of memory");
  memset(s, 0, sizeof *s);
  s->dev = dev;
  df_status st = dfrt_check(dev->rt, dev->rt->drv.cuStreamCreate(&s->handle,
                                                                 CU_STREAM_NON_BLOCKING),
                            "stream", "cuStreamCreate");
  if (st.code != DF_OK) {
    df_free(&dev->rt->alloc, s);
    return st;
  }
  *out = s;
  return st;
}

df_status df_rt_stream_synchronize(df_rt_device *dev, df_rt_stream *s) {
  if (!dev)
    return df_status_errorf(DF_EINVAL, "stream: NULL device in df_rt_stream_synchronize");
  DF_TRY(dfrt_bind(dev));
  return dfrt_check(dev->rt, dev->rt->drv.cuStreamSynchronize(df_rt_stream_handle(s)),
                    "stream", "cuStreamSynchronize");
}

void df_rt_stream_destroy(df_rt_stream *s) {
  if (!s)
    return;
  df_rt *rt = s->dev->rt;
  if (s->handle && dfrt_bind(s->dev).code == DF_OK)
    rt->drv.cuStreamDestroy(s->handle);
  df_free(&rt->alloc, s);
}

CUstream df_rt_stream_handle(const df_rt_stream *s) { return s ? s->handle : NULL; }
