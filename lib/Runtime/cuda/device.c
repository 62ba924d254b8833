/* Devices: open by ordinal (primary context), attributes, close. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

df_status dfrt_bind(df_rt_device *dev) {
  if (dev->hung)
    return df_status_errorf(DF_ETIMEOUT,
                            "device %d: unusable after a kernel that did not finish (watchdog "
                            "timeout): its context may still run it, so df makes no more "
                            "driver calls on it; exit the process",
                            dev->info.ordinal);
  return dfrt_check(dev->rt, dev->rt->drv.cuCtxSetCurrent(dev->ctx), "device",
                    "cuCtxSetCurrent");
}

static df_status attribute(df_rt_device *dev, CUdevice_attribute a, const char *what,
                           int *out) {
  char object[96];
  snprintf(object, sizeof object, "device %d: attribute %s", dev->info.ordinal, what);
  return dfrt_check(dev->rt, dev->rt->drv.cuDeviceGetAttribute(out, a, dev->device), object,
                    "cuDeviceGetAttribute");
}

static df_status query(df_rt_device *dev) {
  df_rt_device_info *in = &dev->info;
  const df_cuda_driver *d = &dev->rt->drv;
  char object[32];
  snprintf(object, sizeof object, "device %d", in->ordinal);
  DF_TRY(dfrt_check(dev->rt, d->cuDeviceGetName(in->name, (int)sizeof in->name, dev->device),
                    object, "cuDeviceGetName"));
  in->name[sizeof in->name - 1] = '\0';
  int cluster = 0;
  DF_TRY(attribute(dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count",
                   &in->sm_count));
  DF_TRY(attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability",
                   &in->cc_major));
  DF_TRY(attribute(dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability",
                   &in->cc_minor));
  DF_TRY(attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block",
                   &in->max_threads_per_block));
  DF_TRY(attribute(dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                   "max opt-in shared memory per block", &in->max_shared_per_block_optin));
  DF_TRY(attribute(dev, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, "cluster launch", &cluster));
  in->cluster_launch = cluster != 0;
  return df_status_ok();
}

df_status df_rt_device_open(df_rt *rt, int ordinal, df_rt_device **out) {
  if (!rt || !out)
    return df_status_errorf(DF_EINVAL, "device: NULL argument to df_rt_device_open");
  *out = NULL;
  int count = 0;
  DF_TRY(df_rt_device_count(rt, &count));
  if (ordinal < 0 || ordinal >= count)
    return df_status_errorf(DF_EINVAL, "device %d: no such CUDA device (%d device%s present)",
                            ordinal, count, count == 1 ? "" : "s");
  df_rt_device *dev = df_alloc(&rt->alloc, sizeof *dev);
  if (!dev)
    return df_status_errorf(DF_ENOMEM, "device %d: out of memory", ordinal);
  memset(dev, 0, sizeof *dev);
  dev->rt = rt;
  dev->info.ordinal = ordinal;
  char object[32];
  snprintf(object, sizeof object, "device %d", ordinal);
  df_status s = dfrt_check(rt, rt->drv.cuDeviceGet(&dev->device, ordinal), object,
                           "cuDeviceGet");
  if (s.code == DF_OK) {
    s = dfrt_check(rt, rt->drv.cuDevicePrimaryCtxRetain(&dev->ctx, dev->device), object,
                   "cuDevicePrimaryCtxRetain");
    if (s.code != DF_OK) {
      df_free(&rt->alloc, dev);
      return s;
    }
    s = dfrt_bind(dev);
  }
  if (s.code == DF_OK)
    s = query(dev);
  if (s.code != DF_OK) {
    df_rt_device_close(dev);
    return s;
  }
  *out = dev;
  return s;
}

void df_rt_device_close(df_rt_device *dev) {
  if (!dev)
    return;
  df_rt *rt = dev->rt;
  if (dev->ctx && !dev->hung) /* releasing would wait for the hung kernel */
    rt->drv.cuDevicePrimaryCtxRelease(dev->device);
  df_free(&rt->alloc, dev);
}

bool df_rt_device_hung(const df_rt_device *dev) { return dev && dev->hung; }

const df_rt_device_info *df_rt_device_get_info(const df_rt_device *dev) {
  return dev ? &dev->info : NULL;
}
