/* The runtime context: allocator and driver table, loaded or injected. */
#include <string.h>

#include "internal.h"

static df_status load(df_rt *rt, const df_rt_options *o) {
  if (o && o->driver) {
    DF_TRY(dfrt_driver_check_table(o->driver));
    rt->drv = *o->driver;
    return df_status_ok();
  }
  rt->loader = o && o->loader ? *o->loader : dfrt_default_loader();
  if (!rt->loader.open || !rt->loader.symbol || !rt->loader.close)
    return df_status_errorf(DF_EINVAL, "runtime: loader lacks open, symbol or close");
  const char *library = o && o->library ? o->library : DF_RT_DRIVER_LIBRARY;
  rt->library = rt->loader.open(rt->loader.user, library);
  if (!rt->library) {
    const char *why = rt->loader.error ? rt->loader.error(rt->loader.user) : NULL;
    return df_status_errorf(DF_EUNSUPPORTED,
                            "no CUDA driver: cannot load %s%s%s; install the NVIDIA "
                            "driver or use the host backend",
                            library, why ? ": " : "", why ? why : "");
  }
  return dfrt_driver_resolve(&rt->loader, rt->library, library, &rt->drv);
}

df_status df_rt_create(const df_rt_options *o, df_rt **out) {
  if (!out)
    return df_status_errorf(DF_EINVAL, "runtime: NULL output pointer");
  *out = NULL;
  df_allocator a = df_allocator_or_default(o ? &o->alloc : NULL);
  df_rt *rt = df_alloc(&a, sizeof *rt);
  if (!rt)
    return df_status_errorf(DF_ENOMEM, "runtime: out of memory");
  memset(rt, 0, sizeof *rt);
  rt->alloc = a;
  df_status s = load(rt, o);
  if (s.code == DF_OK)
    s = dfrt_check(rt, rt->drv.cuInit(0), "runtime", "cuInit");
  if (s.code != DF_OK) {
    df_rt_destroy(rt);
    return s;
  }
  *out = rt;
  return s;
}

void df_rt_destroy(df_rt *rt) {
  if (!rt)
    return;
  if (rt->library)
    rt->loader.close(rt->loader.user, rt->library);
  df_allocator a = rt->alloc;
  df_free(&a, rt);
}

const df_cuda_driver *df_rt_driver(const df_rt *rt) { return rt ? &rt->drv : NULL; }

df_status df_rt_driver_version(const df_rt *rt, int *version) {
  if (!rt || !version)
    return df_status_errorf(DF_EINVAL, "runtime: NULL argument to df_rt_driver_version");
  return dfrt_check(rt, rt->drv.cuDriverGetVersion(version), "runtime",
                    "cuDriverGetVersion");
}

df_status df_rt_device_count(const df_rt *rt, int *count) {
  if (!rt || !count)
    return df_status_errorf(DF_EINVAL, "runtime: NULL argument to df_rt_device_count");
  return dfrt_check(rt, rt->drv.cuDeviceGetCount(count), "runtime", "cuDeviceGetCount");
}
