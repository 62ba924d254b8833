/* df_host_run: option defaults, the run's life cycle (checks, setup,
   scheduling, results) and releasing a result. */
#include <string.h>

#include "host_internal.h"

df_host_options df_host_options_default(void) {
  df_host_options o;
  memset(&o, 0, sizeof o);
  o.threads = 1;
  o.op_log = true;
  o.cost.instr_cycles = DF_HOST_DEFAULT_INSTR_CYCLES;
  o.cost.byte_cycles = DF_HOST_DEFAULT_BYTE_CYCLES;
  o.cost.cluster_latency = DF_HOST_DEFAULT_CLUSTER_LATENCY;
  o.cost.hbm_latency = DF_HOST_DEFAULT_HBM_LATENCY;
  return o;
}

static df_status check_args(const df_packed *k, const df_handler_fn *handlers,
                            uint32_t handler_count, const df_abi_tensor_arg *tensors,
                            uint32_t tensor_count, const df_host_options *o) {
  if (!k)
    return df_status_errorf(DF_EINVAL, "host run expects a packed plan, got NULL");
  if (handler_count && !handlers)
    return df_status_errorf(DF_EINVAL, "host run: %u handlers announced but the table is NULL",
                            handler_count);
  if (tensor_count && !tensors)
    return df_status_errorf(DF_EINVAL, "host run: %u tensors announced but the table is NULL",
                            tensor_count);
  if (o->threads == 0 || o->threads > DF_HOST_MAX_THREADS)
    return df_status_errorf(DF_EINVAL, "host option threads must be in 1..%u, got %u",
                            DF_HOST_MAX_THREADS, o->threads);
  if (o->workspace_bytes > DF_WORKSPACE_MAX_BYTES)
    return df_status_errorf(DF_EINVAL,
                            "host option workspace_bytes must be at most %u (227 KiB), got %u",
                            DF_WORKSPACE_MAX_BYTES, o->workspace_bytes);
  return hb_check_cost_params(&o->cost);
}

static df_status prepare(hb_run *r) {
  const df_packed *k = r->k;
  df_status st = df_launch_package_build(k, &r->pkg);
  if (st.code != DF_OK)
    return hb_fail(r, DF_HOST_DIAG_INVALID_PLAN, hb_site_none(), "launch package: %s",
                   st.message);
  r->scratch_bytes = r->o.scratch_bytes ? r->o.scratch_bytes : r->pkg.scratch_bytes;
  st = df_packed_pool_find(k, &r->pool); /* checked by the package */
  if (st.code != DF_OK)
    return hb_fail(r, DF_HOST_DIAG_INVALID_PLAN, hb_site_none(), "pool: %s", st.message);
  DF_TRY(hb_setup_maps(r));
  DF_TRY(hb_validate(r));
  return hb_setup_memory(r);
}

static df_status collect(hb_run *r) {
  df_host_result *o = r->out;
  o->steps = r->steps;
  DF_TRY(hb_cost_finish(r));
  if (!r->staging)
    return df_status_ok();
  uint32_t stg = r->pkg.global_staging_bytes, nf = r->pkg.flag_count;
  o->staging = df_alloc(&r->al, stg);
  o->flags = df_alloc(&r->al, sizeof(uint32_t) * nf);
  if (!o->staging || !o->flags)
    return hb_oom("the final staging and flags");
  memcpy(o->staging, r->staging, stg);
  memcpy(o->flags, r->flags, sizeof(uint32_t) * nf);
  o->staging_bytes = stg;
  o->flag_count = nf;
  return df_status_ok();
}

df_status df_host_run(const df_packed *k, const df_handler_fn *handlers,
                      uint32_t handler_count, const df_abi_tensor_arg *tensors,
                      uint32_t tensor_count, uint32_t block_size, const df_host_options *opt,
                      df_host_result *out) {
  if (!out)
    return df_status_errorf(DF_EINVAL, "host run expects a result to fill, got NULL");
  memset(out, 0, sizeof *out);
  hb_run r;
  memset(&r, 0, sizeof r);
  r.o = opt ? *opt : df_host_options_default();
  r.al = df_allocator_or_default(&r.o.alloc);
  out->alloc = r.al;
  out->diag.kind = DF_HOST_DIAG_NONE;
  out->diag.cta = out->diag.queue_pos = out->diag.instr = HB_S;
  out->diag.comm = out->diag.slot = out->diag.input = HB_S;
  DF_TRY(check_args(k, handlers, handler_count, tensors, tensor_count, &r.o));
  r.k = k;
  r.out = out;
  r.handlers = handlers;
  r.handler_count = handler_count;
  r.tensors = tensors;
  r.tensor_count = tensor_count;
  r.block_size = block_size;
  r.cta_count = k->topology.sm_count;
  r.cluster_size = k->topology.cluster_size;
  out->cta_count = r.cta_count;
  df_status st = hb_check_topology(&r);
  if (st.code == DF_OK)
    st = prepare(&r);
  if (st.code == DF_OK)
    st = hb_schedule(&r);
  out->completed = st.code == DF_OK;
  df_status cs = collect(&r);
  if (st.code == DF_OK)
    st = cs;
  hb_teardown(&r);
  return st;
}

void df_host_result_free(df_host_result *r) {
  if (!r)
    return;
  df_allocator al = df_allocator_or_default(&r->alloc);
  df_free(&al, r->ops);
  df_free(&al, r->cost.ctas);
  df_free(&al, r->staging);
  df_free(&al, r->flags);
  df_free(&al, r->diag.waits);
  df_free(&al, r->diag.cycle);
  df_free(&al, r->diag.report);
  memset(r, 0, sizeof *r);
}
