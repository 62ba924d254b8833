#include "host_backend_run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/blob.h"
#include "df/fuse.h"
#include "df/host_backend.h"
#include "df/runtime.h"
#include "host_handlers.h"
#include "run_common.h"

typedef struct host_run {
  run_options *o; /* a copy: --block-size auto sets the chosen block */
  df_packed *k;
  df_program *prog;
  void *lib;
  df_handler_fn *handlers;
  run_tensors t;
  df_abi_tensor_arg records[RUN_MAX_TENSORS];
  df_host_options ho;
  df_host_result res;
  bool have_res;
  double *times_us;
} host_run;

/* The blob, re-planned through lib/Plan when --replan asks for it. */
static df_status load_plan(host_run *r) {
  uint8_t *bytes;
  size_t len;
  df_status s = read_whole_file(r->o->plan, &bytes, &len);
  if (s.code != DF_OK)
    return df_status_wrap(s, "plan");
  s = df_blob_read(bytes, len, NULL, &r->k, &r->prog);
  free(bytes);
  DF_TRY(s);
  if (!r->o->replan_axis)
    return df_status_ok();
  if (!r->prog)
    return df_status_errorf(DF_EINVAL, "plan: cannot re-plan: the plan carries no program "
                                       "(write the blob with its program)");
  DF_TRY(run_replan_choices(r->o, r->prog));
  df_schedule_options so;
  run_replan_options(r->o, &so);
  so.topology = r->k->topology;
  so.pool = df_packed_has_pool(r->k); /* as df_rt_plan_replan */
  df_pack_options po;
  run_replan_pack_options(r->o, &po);
  df_plan *plan;
  df_fit_result fit;
  s = df_schedule_replan(r->prog, &so, &po, &plan, &fit);
  if (s.code != DF_OK)
    return df_status_wrap(s, "plan: re-planning");
  if (r->prog->memory_auto)
    printf("df-run: auto memory choice: %s/%s (CTA %u needs %u bytes)\n",
           df_policy_name(plan->policy), df_reduce_strategy_name(plan->strategy),
           fit.c[fit.chosen].need.cta, fit.c[fit.chosen].need.total);
  if (plan->split_auto)
    printf("df-run: auto split: block_size %u balance_iters %d defer_reduces %d model_us %.2f\n",
           plan->block_size, plan->split_balance_iters, plan->split_defer_reduces,
           plan->split_model_us);
  run_replan_block(r->o, plan->block_size);
  if (r->o->fuse) {
    df_fuse_report fr;
    s = df_plan_fuse(plan, NULL, &fr);
    if (s.code != DF_OK) {
      df_plan_destroy(plan);
      return df_status_wrap(s, "plan: fusing the re-plan");
    }
    printf("df-run: fused %u instructions: %u -> %u dispatches\n", fr.groups,
           fr.dispatches_before, fr.dispatches_after);
  }
  df_packed *k;
  s = df_pack(plan, &po, NULL, &k);
  df_plan_destroy(plan);
  if (s.code != DF_OK)
    return df_status_wrap(s, "plan: re-planning");
  df_packed_destroy(r->k);
  r->k = k;
  printf("df-run: re-planned %s for %u lengths\n", r->o->replan_axis, r->o->replan_count);
  return df_status_ok();
}

static df_status load_handlers(host_run *r) {
  DF_TRY(host_handlers_open(r->o->handlers, &r->lib));
  r->handlers = calloc(r->k->handler_count ? r->k->handler_count : 1, sizeof *r->handlers);
  if (!r->handlers)
    return df_status_errorf(DF_ENOMEM, "out of memory for %u handlers", r->k->handler_count);
  DF_TRY(host_handlers_resolve(r->lib, r->o->handlers, r->k, r->handlers));
  printf("df-run: handlers: %u from %s\n", r->k->handler_count, r->o->handlers);
  /* the handlers' workspace travels in the library (docs/workspace.md) */
  df_status s = df_host_workspace_dl(r->lib, &r->ho.workspace_bytes);
  if (s.code != DF_OK)
    return df_status_wrap(s, r->o->handlers);
  if (r->ho.workspace_bytes)
    printf("df-run: handler workspace: %u B per CTA\n", r->ho.workspace_bytes);
  return df_status_ok();
}

/* Host buffers as the kernel's tensor records (the CUDA path's packing). */
static df_status bind_tensors(host_run *r) {
  DF_TRY(run_tensors_name(&r->t, r->prog, r->o));
  DF_TRY(run_tensors_load(&r->t, r->o, r->prog != NULL));
  memset(r->records, 0, sizeof r->records); /* unbound by index: missing */
  for (uint32_t i = 0; i < r->t.count; i++) {
    if (!r->t.bound[i])
      continue;
    const host_tensor *h = &r->t.host[i];
    df_rt_tensor d;
    DF_TRY(df_rt_tensor_contiguous((uint64_t)(uintptr_t)h->data, h->dtype, h->ndim, h->shape, -1,
                                   &d));
    d.device_type = DF_RT_DEVICE_CPU;
    df_status s = df_rt_tensor_pack(&d, &r->records[i]);
    if (s.code != DF_OK)
      return df_status_wrap(s, r->t.names[i]);
  }
  return df_status_ok();
}

static df_status setup(host_run *r) {
  DF_TRY(load_plan(r));
  const df_packed *k = r->k;
  const df_launch_package *l = &k->launch;
  printf("df-run: plan: %u SMs, cluster %u, %u instructions, %u slots, %u comms; staging %u B, "
         "flags %u B%s\n",
         k->topology.sm_count, k->topology.cluster_size, k->instr_count, k->slot_count,
         k->comm_count, l->global_staging_bytes, l->flags_bytes,
         l->needs_flag_reset ? " (reset before each launch)" : "");
  r->ho = df_host_options_default();
  r->ho.threads = r->o->threads ? r->o->threads : 1;
  r->ho.op_log = r->o->op_log != NULL;
  printf("df-run: host backend (no CUDA driver): %u virtual CTAs, cluster %u, %u thread%s per "
         "CTA, shared %u B per CTA, block_size %u\n",
         k->topology.sm_count, k->topology.cluster_size, r->ho.threads,
         r->ho.threads == 1 ? "" : "s", l->shared_memory_bytes,
         r->o->block_size ? r->o->block_size : 1);
  DF_TRY(load_handlers(r));
  return bind_tensors(r);
}

/* One run; keeps the result (also of a failed run) in r->res. */
static df_status run_once(host_run *r) {
  if (r->have_res)
    df_host_result_free(&r->res);
  df_status s = df_host_run(r->k, r->handlers, r->k->handler_count, r->records, r->t.count,
                            r->o->block_size ? r->o->block_size : 1, &r->ho, &r->res);
  r->have_res = true;
  return s;
}

static df_status run_all(host_run *r) {
  for (uint32_t i = 0; i < r->o->warmup; i++)
    DF_TRY(run_once(r));
  r->times_us = calloc(r->o->iters, sizeof *r->times_us);
  if (!r->times_us)
    return df_status_errorf(DF_ENOMEM, "out of memory for %u timings", r->o->iters);
  for (uint32_t i = 0; i < r->o->iters; i++) {
    double t0 = run_now_us();
    DF_TRY(run_once(r));
    r->times_us[i] = run_now_us() - t0;
  }
  printf("df-run: completed: %llu scheduler steps, %u op-log records\n",
         (unsigned long long)r->res.steps, r->res.op_count);
  run_print_timings(r->times_us, r->o->iters, r->o->warmup, "run", "runs",
                    "df_host_run, host clock");
  return df_status_ok();
}

/* --op-log and --cost of the last run (also of a diagnosed one: up to
   the failure). */
static df_status reports(host_run *r) {
  if (r->o->op_log) {
    FILE *f = fopen(r->o->op_log, "w");
    if (!f)
      return df_status_errorf(DF_EIO, "--op-log: cannot create '%s': %s", r->o->op_log,
                              strerror(errno));
    df_status s = df_host_op_log_write(&r->res, f);
    if (fclose(f) != 0 && s.code == DF_OK)
      s = df_status_errorf(DF_EIO, "--op-log: cannot write '%s'", r->o->op_log);
    DF_TRY(s);
    uint32_t instrs = 0;
    for (uint32_t i = 0; i < r->res.op_count; i++)
      instrs += r->res.ops[i].kind == DF_HOST_OP_INSTR;
    printf("df-run: op log: %u records (%u instructions, %u comms) written to %s\n",
           r->res.op_count, instrs, r->res.op_count - instrs, r->o->op_log);
  }
  if (r->o->cost) {
    printf("df-run: dispatch-cost estimate:\n");
    fflush(stdout);
    DF_TRY(df_host_cost_write(&r->res, stdout));
  }
  return df_status_ok();
}

static df_status fetch(void *user, uint32_t i) {
  (void)user; /* host buffers are the tensors */
  (void)i;
  return df_status_ok();
}

static df_status outputs(host_run *r, int *failed) {
  DF_TRY(run_tensors_outputs(&r->t, r->o, fetch, r, failed));
  if (r->o->staging_out) {
    DF_TRY(write_whole_file(r->o->staging_out, r->res.staging, r->res.staging_bytes));
    printf("df-run: saved %u staging bytes to %s\n", r->res.staging_bytes, r->o->staging_out);
  }
  return df_status_ok();
}

static void teardown(host_run *r) {
  if (r->have_res)
    df_host_result_free(&r->res);
  run_tensors_free(&r->t);
  free(r->handlers);
  host_handlers_close(r->lib);
  df_packed_destroy(r->k);
  df_program_destroy(r->prog);
  free(r->times_us);
}

int host_backend_run(const run_options *o) {
  static host_run r;
  static run_options opts;
  memset(&r, 0, sizeof r);
  opts = *o;
  r.o = &opts;
  int failed = 0, rc = RUN_EXIT_OK;
  df_status s = setup(&r);
  if (s.code == DF_OK)
    s = run_all(&r);
  if (s.code != DF_OK && r.have_res && r.res.diag.kind != DF_HOST_DIAG_NONE) {
    df_status diag = s;
    s = reports(&r); /* what ran up to the failure */
    fflush(stdout);
    fprintf(stderr, "df-run: the host backend diagnosed the plan (%s):\n%s\n",
            df_host_diag_kind_name(r.res.diag.kind),
            r.res.diag.report ? r.res.diag.report : diag.message);
    rc = RUN_EXIT_DIAGNOSIS;
  } else if (s.code == DF_OK) {
    s = reports(&r);
    if (s.code == DF_OK)
      s = outputs(&r, &failed);
  }
  fflush(stdout);
  teardown(&r);
  if (s.code != DF_OK) {
    fprintf(stderr, "df-run: %s: %s\n", df_code_name(s.code), s.message);
    return RUN_EXIT_ERROR;
  }
  return rc != RUN_EXIT_OK ? rc : failed;
}
