/* The launch configuration of REFERENCE 7.5 and its pre-checks: grid
   (sm_count,1,1), block_dim, cluster (cluster_size,1,1) with the
   load-balancing scheduling preference, dynamic shared memory = the
   launch package's bytes plus the kernel's handler workspace (set as the
   function's maximum), non-portable
   cluster sizes above 8; then the checks that keep a persistent kernel
   from failing or hanging at launch. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Largest cluster the driver guarantees without opting in. */
#define DFRT_PORTABLE_CLUSTER_SIZE 8u

static void fill_config(const dfrt_launch_cfg *c, CUstream stream, CUlaunchConfig *cfg,
                        CUlaunchAttribute attrs[2]) {
  cfg->gridDimX = c->grid_x;
  cfg->gridDimY = 1;
  cfg->gridDimZ = 1;
  cfg->blockDimX = c->block[0];
  cfg->blockDimY = c->block[1];
  cfg->blockDimZ = c->block[2];
  cfg->sharedMemBytes = c->shared_bytes;
  cfg->hStream = stream;
  cfg->attrs = NULL;
  cfg->numAttrs = 0;
  if (c->cluster_size > 1) {
    memset(attrs, 0, 2 * sizeof attrs[0]);
    attrs[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[0].value.clusterDim.x = c->cluster_size;
    attrs[0].value.clusterDim.y = 1;
    attrs[0].value.clusterDim.z = 1;
    attrs[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
    attrs[1].value.clusterSchedulingPolicyPreference =
        CU_CLUSTER_SCHEDULING_POLICY_LOAD_BALANCING;
    cfg->attrs = attrs;
    cfg->numAttrs = 2;
  }
}

/* One function attribute on the module's entries (the watched twin too). */
static df_status set_attribute(df_rt_executable *e, CUfunction_attribute a, int v,
                               const char *what) {
  df_rt_module *m = e->module;
  const df_cuda_driver *d = &e->rt->drv;
  DF_TRY(dfrt_check(e->rt, d->cuFuncSetAttribute(m->fn, a, v), what, "cuFuncSetAttribute"));
  if (m->fn_watched)
    DF_TRY(dfrt_check(e->rt, d->cuFuncSetAttribute(m->fn_watched, a, v), what,
                      "cuFuncSetAttribute"));
  return df_status_ok();
}

df_status dfrt_launch_attributes(df_rt_executable *e, const dfrt_launch_cfg *c) {
  df_rt_module *m = e->module;
  if (c->shared_bytes && m->dynamic_shared_set != (int)c->shared_bytes) {
    DF_TRY(set_attribute(e, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)c->shared_bytes,
                         "launch: dynamic shared memory maximum"));
    m->dynamic_shared_set = (int)c->shared_bytes;
  }
  if (c->non_portable && !m->non_portable_set) {
    DF_TRY(set_attribute(e, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1,
                         "launch: non-portable cluster size"));
    m->non_portable_set = true;
  }
  return df_status_ok();
}

/* Every CTA of a persistent kernel must be resident at once: CTAs wait on
   each other's flags and barriers. */
static df_status check_residency(df_rt_executable *e, const dfrt_launch_cfg *c) {
  const df_cuda_driver *d = &e->rt->drv;
  const df_rt_device_info *dev = &e->dev->info;
  uint32_t threads = c->block[0] * c->block[1] * c->block[2];
  if (c->cluster_size > 1) {
    CUlaunchConfig cfg;
    CUlaunchAttribute attrs[2];
    fill_config(c, NULL, &cfg, attrs);
    int clusters = 0;
    DF_TRY(dfrt_check(e->rt, d->cuOccupancyMaxActiveClusters(&clusters, e->module->fn, &cfg),
                      "launch: resident clusters", "cuOccupancyMaxActiveClusters"));
    uint32_t need = c->grid_x / c->cluster_size;
    if (clusters < 0 || (uint32_t)clusters < need)
      return df_status_errorf(DF_EUNSUPPORTED,
                              "launch: only %d clusters of %u CTAs (%u threads, %u dynamic "
                              "shared bytes) can be resident on device %d, the plan needs %u "
                              "resident at once",
                              clusters, c->cluster_size, threads, c->shared_bytes,
                              dev->ordinal, need);
    return df_status_ok();
  }
  int blocks = 0;
  DF_TRY(dfrt_check(e->rt,
                    d->cuOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, e->module->fn,
                                                                   (int)threads,
                                                                   c->shared_bytes),
                    "launch: resident CTAs", "cuOccupancyMaxActiveBlocksPerMultiprocessor"));
  uint64_t resident = (uint64_t)(blocks < 0 ? 0 : blocks) * (uint64_t)dev->sm_count;
  if (resident < c->grid_x)
    return df_status_errorf(DF_EUNSUPPORTED,
                            "launch: only %llu CTAs (%u threads, %u dynamic shared bytes) can "
                            "be resident on device %d's %d SMs, the plan needs %u resident at "
                            "once",
                            (unsigned long long)resident, threads, c->shared_bytes,
                            dev->ordinal, dev->sm_count, c->grid_x);
  return df_status_ok();
}

df_status dfrt_launch_prepare(df_rt_executable *e, const df_launch_package *lp,
                              uint32_t plan_block_size, dfrt_launch_cfg *c) {
  const df_rt_device_info *dev = &e->dev->info;
  const df_rt_kernel_info *k = &e->module->info;
  uint32_t sm = lp->sm_count, cs = lp->cluster_size;
  if (cs == 0 || sm % cs != 0)
    return df_status_errorf(DF_EINVAL,
                            "launch: plan sm_count %u is not a multiple of cluster_size %u "
                            "(the grid must hold whole clusters)",
                            sm, cs);
  /* The handler workspace follows the plan's bytes (docs/workspace.md). */
  const uint32_t workspace = df_workspace_launch_bytes(k->workspace_bytes);
  const uint64_t dynamic = (uint64_t)lp->shared_memory_bytes + workspace;
  uint64_t shared = dynamic + (uint64_t)(k->static_shared_bytes > 0 ? k->static_shared_bytes
                                                                    : 0);
  if (shared > (uint64_t)(dev->max_shared_per_block_optin > 0 ? dev->max_shared_per_block_optin
                                                              : 0)) {
    if (workspace)
      return df_status_errorf(DF_EUNSUPPORTED,
                              "launch: plan needs %u bytes of dynamic shared memory + the "
                              "handler workspace of %u bytes (+%u alignment) (+%d static), "
                              "over device %d's limit of %d bytes per block",
                              lp->shared_memory_bytes, k->workspace_bytes, DF_WORKSPACE_ALIGN,
                              k->static_shared_bytes, dev->ordinal,
                              dev->max_shared_per_block_optin);
    return df_status_errorf(DF_EUNSUPPORTED,
                            "launch: plan needs %u bytes of dynamic shared memory (+%d static), "
                            "over device %d's limit of %d bytes per block",
                            lp->shared_memory_bytes, k->static_shared_bytes, dev->ordinal,
                            dev->max_shared_per_block_optin);
  }
  if (cs > 1 && !dev->cluster_launch)
    return df_status_errorf(DF_EUNSUPPORTED,
                            "launch: cluster_size %u needs thread-block cluster launch, which "
                            "device %d (%s, sm_%d%d) does not support",
                            cs, dev->ordinal, dev->name, dev->cc_major, dev->cc_minor);
  uint64_t threads = (uint64_t)e->block_dim[0] * e->block_dim[1] * e->block_dim[2];
  if (threads > (uint64_t)(k->max_threads_per_block > 0 ? k->max_threads_per_block : 0))
    return df_status_errorf(DF_EINVAL,
                            "launch: block_dim (%u,%u,%u) has %llu threads, over kernel '%s''s "
                            "maximum of %d threads per block",
                            e->block_dim[0], e->block_dim[1], e->block_dim[2],
                            (unsigned long long)threads, e->module->kernel_name,
                            k->max_threads_per_block);
  c->grid_x = sm;
  c->block[0] = e->block_dim[0];
  c->block[1] = e->block_dim[1];
  c->block[2] = e->block_dim[2];
  c->cluster_size = cs;
  c->shared_bytes = (uint32_t)dynamic;
  c->non_portable = cs > DFRT_PORTABLE_CLUSTER_SIZE;
  c->needs_flag_reset = lp->needs_flag_reset;
  c->block_size = plan_block_size ? plan_block_size
                                  : (e->block_size_option ? e->block_size_option : 1);
  DF_TRY(dfrt_launch_attributes(e, c));
  if (cs > 1) {
    CUlaunchConfig cfg;
    CUlaunchAttribute attrs[2];
    fill_config(c, NULL, &cfg, attrs);
    int max_cluster = 0;
    DF_TRY(dfrt_check(e->rt,
                      e->rt->drv.cuOccupancyMaxPotentialClusterSize(&max_cluster,
                                                                   e->module->fn, &cfg),
                      "launch: maximum cluster size", "cuOccupancyMaxPotentialClusterSize"));
    if (max_cluster < 0 || cs > (uint32_t)max_cluster)
      return df_status_errorf(DF_EUNSUPPORTED,
                              "launch: cluster_size %u exceeds kernel '%s''s maximum cluster "
                              "size %d on device %d (%llu threads, %u dynamic shared bytes)",
                              cs, e->module->kernel_name, max_cluster, dev->ordinal,
                              (unsigned long long)threads, c->shared_bytes);
  }
  return check_residency(e, c);
}

/* The parameters before the TMA descriptors: a kernel of ABI 1 declares
   its descriptors right after the progress array (REFERENCE §6), one of
   ABI 2 after the flag-clearing pair. */
uint32_t dfrt_fixed_params(const df_rt_module *m) {
  return m->info.kernel_abi >= 2 ? DF_RT_KERNEL_FIXED_PARAMS : DF_RT_KERNEL_FLAGS_CLEAR_PARAM;
}

df_status dfrt_launch_kernel(df_rt_executable *e, CUstream stream) {
  _Static_assert(DF_RT_KERNEL_POINTER_PARAMS + DF_RT_KERNEL_SCALAR_PARAMS ==
                     DF_RT_KERNEL_PROGRESS_PARAM,
                 "the progress array follows the scalar parameters");
  _Static_assert(DF_RT_KERNEL_FLAGS_CLEAR_PARAM == DF_RT_KERNEL_PROGRESS_PARAM + 1 &&
                     DF_RT_KERNEL_FLAGS_CLEAR_WORDS_PARAM + 1 == DF_RT_KERNEL_FIXED_PARAMS,
                 "the flag clearing parameters follow the progress array");
  enum { FIXED = DF_RT_KERNEL_FIXED_PARAMS };
  void *stack_params[FIXED + 8];
  void **params = stack_params;
  const uint32_t fixed = dfrt_fixed_params(e->module);
  size_t count = fixed + e->tma_count;
  if (count > sizeof stack_params / sizeof stack_params[0]) {
    params = df_alloc(&e->rt->alloc, sizeof(void *) * count);
    if (!params)
      return df_status_errorf(DF_ENOMEM, "launch: out of memory for %zu kernel parameters",
                              count);
  }
  for (uint32_t i = 0; i < DF_RT_KERNEL_POINTER_PARAMS; i++)
    params[i] = &e->params_ptr[i];
  for (uint32_t i = 0; i < DF_RT_KERNEL_SCALAR_PARAMS; i++)
    params[DF_RT_KERNEL_POINTER_PARAMS + i] = &e->params_u32[i];
  params[DF_RT_KERNEL_PROGRESS_PARAM] = &e->param_progress;
  if (fixed == FIXED) {
    params[DF_RT_KERNEL_FLAGS_CLEAR_PARAM] = &e->param_flags_clear;
    params[DF_RT_KERNEL_FLAGS_CLEAR_WORDS_PARAM] = &e->param_flags_clear_words;
  }
  for (uint32_t i = 0; i < e->tma_count; i++)
    params[fixed + i] = &e->targs.maps[i];
  CUlaunchConfig cfg;
  CUlaunchAttribute attrs[2];
  fill_config(&e->cfg, stream, &cfg, attrs);
  /* A watched launch (progress array set) runs the entry with the marks. */
  CUfunction fn = e->param_progress && e->module->fn_watched ? e->module->fn_watched
                                                             : e->module->fn;
  df_status s = dfrt_check(e->rt, e->rt->drv.cuLaunchKernelEx(&cfg, fn, params, NULL),
                           "launch", "cuLaunchKernelEx");
  if (params != stack_params)
    df_free(&e->rt->alloc, params);
  return s;
}
