/* Timing events: cuEventCreate / Record / Synchronize / ElapsedTime. */
#include <string.h>

#include "internal.h"

static df_status need(const df_rt *rt, bool present, const char *name) {
  (void)rt;
  if (!present)
    return df_status_errorf(DF_EUNSUPPORTED,
                            "event: the CUDA driver table lacks %s (events need cuEventCreate, "
                            "cuEventRecord, cuEventSynchronize, cuEventElapsedTime and "
                            "cuEventDestroy)",
                            name);
  return df_status_ok();
}

df_status df_rt_event_create(df_rt_device *dev, df_rt_event **out) {
  if (!dev || !out)
    return df_status_errorf(DF_EINVAL, "event: NULL argument to df_rt_event_create");
  *out = NULL;
  const df_cuda_driver *d = &dev->rt->drv;
  DF_TRY(need(dev->rt, d->cuEventCreate != NULL, "cuEventCreate"));
  DF_TRY(need(dev->rt, d->cuEventDestroy != NULL, "cuEventDestroy"));
  DF_TRY(dfrt_bind(dev));
  df_rt_event *ev = df_alloc(&dev->rt->alloc, sizeof *ev);
  if (!ev)
    return df_status_errorf(DF_ENOMEM, "event: out of memory");
  memset(ev, 0, sizeof *ev);
  ev->dev = dev;
  df_status s = dfrt_check(dev->rt, d->cuEventCreate(&ev->handle, CU_EVENT_DEFAULT), "event",
                           "cuEventCreate");
  if (s.code != DF_OK) {
    df_free(&dev->rt->alloc, ev);
    return s;
  }
  *out = ev;
  return s;
}

df_status df_rt_event_record(df_rt_event *ev, df_rt_stream *s) {
  if (!ev)
    return df_status_errorf(DF_EINVAL, "event: NULL event in df_rt_event_record");
  const df_cuda_driver *d = &ev->dev->rt->drv;
  DF_TRY(need(ev->dev->rt, d->cuEventRecord != NULL, "cuEventRecord"));
  DF_TRY(dfrt_bind(ev->dev));
  return dfrt_check(ev->dev->rt, d->cuEventRecord(ev->handle, df_rt_stream_handle(s)), "event",
                    "cuEventRecord");
}

df_status df_rt_event_synchronize(df_rt_event *ev) {
  if (!ev)
    return df_status_errorf(DF_EINVAL, "event: NULL event in df_rt_event_synchronize");
  const df_cuda_driver *d = &ev->dev->rt->drv;
  DF_TRY(need(ev->dev->rt, d->cuEventSynchronize != NULL, "cuEventSynchronize"));
  DF_TRY(dfrt_bind(ev->dev));
  return dfrt_check(ev->dev->rt, d->cuEventSynchronize(ev->handle), "event",
                    "cuEventSynchronize");
}

df_status df_rt_event_elapsed_ms(const df_rt_event *start, const df_rt_event *end, float *ms) {
  if (!start || !end || !ms)
    return df_status_errorf(DF_EINVAL, "event: NULL argument to df_rt_event_elapsed_ms");
  if (start->dev != end->dev)
    return df_status_errorf(DF_EINVAL, "event: elapsed time between events of devices %d and "
                                       "%d",
                            start->dev->info.ordinal, end->dev->info.ordinal);
  const df_cuda_driver *d = &start->dev->rt->drv;
  DF_TRY(need(start->dev->rt, d->cuEventElapsedTime != NULL, "cuEventElapsedTime"));
  DF_TRY(dfrt_bind(start->dev));
  *ms = 0;
  return dfrt_check(start->dev->rt, d->cuEventElapsedTime(ms, start->handle, end->handle),
                    "event", "cuEventElapsedTime");
}

void df_rt_event_destroy(df_rt_event *ev) {
  if (!ev)
    return;
  df_rt *rt = ev->dev->rt;
  if (ev->handle && dfrt_bind(ev->dev).code == DF_OK)
    rt->drv.cuEventDestroy(ev->handle);
  df_free(&rt->alloc, ev);
}
