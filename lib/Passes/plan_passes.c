/* df-schedule, df-allocate-barriers, df-layout-slots, df-pack: the plan
   core (lib/Plan) run over the plan held in IR. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "mlir_util.h"
#include "pass_util.h"
#include "plan_ir.h"

#define MAX_RANGE_VALUES 4096
#define MAX_DIRECT_SLOTS 256

/* ---- df-schedule ------------------------------------------------------------ */

/* The shared-memory limit options of df-schedule (auto) and
   df-layout-slots: target=sm_90|sm_90a|sm_80, shared-memory-limit=BYTES
   (0 = no check); the later option wins. Default: sm_90. */
typedef struct limit_opt {
  uint32_t bytes;
} limit_opt;

static df_status set_limit_option(limit_opt *l, const char *key, const char *value,
                                  bool *handled) {
  *handled = true;
  if (!strcmp(key, "target"))
    return df_target_shared_limit(value, &l->bytes);
  if (!strcmp(key, "shared-memory-limit"))
    return df_option_u32(key, value, &l->bytes);
  *handled = false;
  return df_status_ok();
}

typedef struct schedule_opts {
  df_schedule_options o;
  bool auto_strategy;
  limit_opt limit;
  uint32_t axis_count;
  char axes[DF_MAX_AXES][DF_NAME_MAX];
  uint32_t counts[DF_MAX_AXES];
  uint32_t values[MAX_RANGE_VALUES];
} schedule_opts;

static df_status set_ranges(schedule_opts *s, const char *value) {
  char buf[8 * MAX_RANGE_VALUES];
  snprintf(buf, sizeof buf, "%s", value);
  uint32_t used = 0;
  s->axis_count = 0;
  char *save = NULL;
  for (char *part = strtok_r(buf, ";", &save); part; part = strtok_r(NULL, ";", &save)) {
    char *colon = strchr(part, ':');
    if (!colon)
      return df_status_errorf(DF_EINVAL,
                              "option 'range-lengths' expects axis:len,len;axis:len..., got '%s'",
                              part);
    *colon = '\0';
    if (s->axis_count == DF_MAX_AXES)
      return df_status_errorf(DF_EINVAL, "option 'range-lengths' names more than %d axes",
                              DF_MAX_AXES);
    uint32_t a = s->axis_count++;
    snprintf(s->axes[a], DF_NAME_MAX, "%s", part);
    DF_TRY(df_option_u32_list("range-lengths", colon + 1, s->values + used,
                              MAX_RANGE_VALUES - used, &s->counts[a]));
    used += s->counts[a];
  }
  if (s->axis_count == 0)
    return df_status_errorf(DF_EINVAL, "option 'range-lengths' is empty");
  return df_status_ok();
}

/* split-*-ns: the automatic split's costs (df/split.h) in nanoseconds. */
static df_status set_split_cost(df_schedule_options *o, const char *key, const char *value) {
  static const struct {
    const char *key;
    size_t off;
  } costs[] = {
      {"split-unit-ns", offsetof(df_split_cost, per_unit_us)},
      {"split-partial-ns", offsetof(df_split_cost, per_partial_us)},
      {"split-reduce-ns", offsetof(df_split_cost, reduce_us)},
      {"split-reduce-input-ns", offsetof(df_split_cost, reduce_per_input_us)},
      {"split-finalize-ns", offsetof(df_split_cost, finalize_us)},
      {"split-hbm-edge-ns", offsetof(df_split_cost, hbm_edge_us)},
  };
  for (size_t i = 0; i < sizeof costs / sizeof *costs; i++)
    if (!strcmp(key, costs[i].key)) {
      char *end = NULL;
      double v = strtod(value, &end);
      if (!*value || *end || !(v >= 0) || v > 1e12)
        return df_status_errorf(DF_EINVAL,
                                "option '%s' expects a non-negative number of nanoseconds, "
                                "got '%s'",
                                key, value);
      *(double *)((char *)&o->split.cost + costs[i].off) = v / 1000.0;
      return df_status_ok();
    }
  return df_status_errorf(DF_EINVAL, "unknown option '%s'", key);
}

static df_status set_schedule_option(void *opts, const char *key, const char *value) {
  schedule_opts *s = opts;
  df_schedule_options *o = &s->o;
  if (!strcmp(key, "sm-count")) return df_option_u32(key, value, &o->topology.sm_count);
  if (!strcmp(key, "cluster-size")) return df_option_u32(key, value, &o->topology.cluster_size);
  if (!strcmp(key, "block-size")) {
    o->auto_split = !strcmp(value, "auto");
    return o->auto_split ? df_status_ok() : df_option_u32(key, value, &o->block_size);
  }
  if (!strcmp(key, "split-step")) return df_option_u32(key, value, &o->split.step);
  if (!strcmp(key, "split-min-block")) return df_option_u32(key, value, &o->split.min_block);
  if (!strcmp(key, "split-max-block")) return df_option_u32(key, value, &o->split.max_block);
  if (!strcmp(key, "split-slot-bytes")) return df_option_u32(key, value, &o->split.cost.slot_bytes);
  if (!strcmp(key, "split-slot-budget"))
    return df_option_u32(key, value, &o->split.cost.slot_budget);
  if (!strncmp(key, "split-", 6) && strstr(key, "-ns")) return set_split_cost(o, key, value);
  if (!strcmp(key, "range-lengths")) return set_ranges(s, value);
  if (!strcmp(key, "task-extents"))
    return df_option_u32_list(key, value, o->extents, DF_MAX_AXES, &o->extent_count);
  if (!strcmp(key, "policy")) return df_policy_parse(value, &o->policy);
  if (!strcmp(key, "reduce-strategy")) {
    s->auto_strategy = !strcmp(value, "auto");
    return s->auto_strategy ? df_status_ok() : df_reduce_strategy_parse(value, &o->strategy);
  }
  if (!strcmp(key, "transfer-tile-bytes"))
    return df_option_u32(key, value, &o->transfer_tile_bytes);
  bool handled;
  df_status ls = set_limit_option(&s->limit, key, value, &handled);
  if (handled)
    return ls;
  if (!strcmp(key, "include-exit")) return df_option_bool(key, value, &o->include_exit);
  if (!strcmp(key, "force-hbm-comms")) return df_option_bool(key, value, &o->force_hbm_comms);
  if (!strcmp(key, "partial-only")) return df_option_bool(key, value, &o->partial_only);
  if (!strcmp(key, "defer-reduces")) return df_option_bool(key, value, &o->defer_reduces);
  if (!strcmp(key, "balance-iters")) return df_option_bool(key, value, &o->balance_iters);
  if (!strcmp(key, "even-split")) return df_option_bool(key, value, &o->even_split);
  if (!strcmp(key, "even-split-granularity"))
    return df_option_u32(key, value, &o->even_split_granularity);
  if (!strcmp(key, "even-split-chunks")) return df_option_u32(key, value, &o->even_split_chunks);
  if (!strcmp(key, "reduce-fan-in")) return df_option_u32(key, value, &o->reduce_fan_in);
  if (!strcmp(key, "reduce-spread")) return df_option_bool(key, value, &o->reduce_spread);
  if (!strcmp(key, "reduce-sms")) return df_option_u32(key, value, &o->reduce_sms);
  if (!strcmp(key, "pool")) return df_option_bool(key, value, &o->pool);
  if (!strcmp(key, "skip-unary-reduce"))
    return df_option_bool(key, value, &o->skip_unary_reduce);
  if (!strcmp(key, "even-split-taper"))
    return df_option_u32(key, value, &o->even_split_taper);
  if (!strcmp(key, "even-split-taper-min"))
    return df_option_u32(key, value, &o->even_split_taper_min);
  if (!strcmp(key, "even-split-task-cost"))
    return df_option_u32(key, value, &o->even_split_task_cost);
  if (!strcmp(key, "iter-range-buckets")) return df_iter_buckets_parse(value, &o->buckets);
  if (!strcmp(key, "iter-range-bucket-size")) return df_option_u32(key, value, &o->bucket_size);
  if (!strcmp(key, "iter-range-exact-lengths"))
    return df_exact_lengths_parse(value, &o->exact_lengths);
  return df_status_errorf(DF_EINVAL, "unknown option '%s'", key);
}

static df_status run_schedule(MlirOperation module, const void *options) {
  schedule_opts s = *(const schedule_opts *)options;
  uint32_t used = 0;
  for (uint32_t a = 0; a < s.axis_count; a++) {
    s.o.ranges[a].axis = s.axes[a];
    s.o.ranges[a].count = s.counts[a];
    s.o.ranges[a].lengths = ((const schedule_opts *)options)->values + used;
    used += s.counts[a];
  }
  s.o.range_count = s.axis_count;
  df_program *prog;
  DF_TRY(df_program_from_module(module, NULL, NULL, &prog));
  df_plan *plan;
  df_fit_result fit;
  df_status st = s.auto_strategy
                     ? df_schedule_fitting(prog, &s.o, NULL, s.limit.bytes, &plan, &fit)
                     : df_schedule(prog, &s.o, &plan);
  df_program_destroy(prog);
  if (df_failed(&st))
    return df_emit(mlirOperationGetLocation(module), "df-schedule: %s", st.message);
  st = df_plan_to_ir(module, plan);
  df_plan split = *plan; /* the automatic split's choice, read below */
  df_plan_destroy(plan);
  if (df_failed(&st) || (!s.auto_strategy && !s.o.transfer_tile_bytes && !split.split_auto))
    return st;
  MlirOperation plan_op;
  DF_TRY(df_plan_op(module, &plan_op));
  MlirContext ctx = mlirOperationGetContext(module);
  if (split.split_auto) {
    /* block_size (df.plan's) is the chosen block; the placement and its
       modelled makespan (ns) say what the choice was */
    df_set_attr(plan_op, "split_choice", df_str(ctx, "auto"));
    df_set_attr(plan_op, "balance_iters", df_i64(ctx, split.split_balance_iters));
    df_set_attr(plan_op, "defer_reduces", df_i64(ctx, split.split_defer_reduces));
    df_set_attr(plan_op, "split_model_ns", df_i64(ctx, (int64_t)(split.split_model_us * 1000.0 + 0.5)));
  }
  if (!s.auto_strategy && !s.o.transfer_tile_bytes)
    return st;
  /* Choices run-time re-plans repeat (the program section of a blob). */
  if (s.o.transfer_tile_bytes)
    df_set_attr(plan_op, "transfer_tile_bytes", df_i64(ctx, s.o.transfer_tile_bytes));
  if (!s.auto_strategy)
    return st;
  /* The choice: df.plan's policy / reduce_strategy are the chosen ones;
     auto_policy / auto_limit are what the choice started from. */
  df_set_attr(plan_op, "memory_choice", df_str(ctx, "auto"));
  df_set_attr(plan_op, "auto_policy", df_str(ctx, df_policy_name(s.o.policy)));
  df_set_attr(plan_op, "auto_limit", df_i64(ctx, s.limit.bytes));
  df_set_attr(plan_op, "shared_memory_limit", df_i64(ctx, s.limit.bytes));
  df_set_attr(plan_op, "shared_memory_need", df_i64(ctx, fit.c[fit.chosen].need.total));
  return st;
}

static const char schedule_anchor = 0;

df_status df_create_schedule_pass(const char *text, MlirPass *out) {
  schedule_opts *s = calloc(1, sizeof *s);
  if (!s)
    return df_status_errorf(DF_ENOMEM, "out of memory creating df-schedule");
  s->o = df_schedule_options_default();
  s->o.defer_select = true; /* df-select-variants chooses implementations */
  s->limit.bytes = DF_SHARED_LIMIT_SM90;
  df_status st = df_parse_pass_options("df-schedule", text, s, set_schedule_option);
  if (!df_failed(&st) && s->axis_count == 0)
    st = df_status_errorf(DF_EINVAL, "df-schedule: option 'range-lengths' is required");
  if (!df_failed(&st) && s->auto_strategy && s->o.auto_split)
    st = df_status_errorf(DF_EINVAL,
                          "df-schedule: block-size=auto (all_at_once) and reduce-strategy=auto "
                          "exclude each other");
  if (!df_failed(&st) && s->o.topology.sm_count == 0)
    st = df_status_errorf(DF_EINVAL, "df-schedule: option 'sm-count' is required");
  if (!df_failed(&st))
    *out = df_make_pass(&schedule_anchor, "df-schedule",
                        "schedule the program for concrete range lengths", run_schedule, s,
                        sizeof *s);
  free(s);
  return st;
}

/* ---- passes over the plan in IR ----------------------------------------------- */

/* Read the plan and pack it with the layout options recorded on df.plan. */
static df_status pack_from_ir(MlirOperation module, df_plan **plan, df_packed **packed) {
  MlirOperation plan_op;
  DF_TRY(df_plan_op(module, &plan_op));
  uint32_t direct[MAX_DIRECT_SLOTS];
  df_pack_options po;
  memset(&po, 0, sizeof po);
  DF_TRY(df_plan_layout_options(plan_op, &po.layout, direct, MAX_DIRECT_SLOTS));
  DF_TRY(df_plan_from_ir(module, plan));
  df_status s = df_pack(*plan, &po, NULL, packed);
  if (df_failed(&s)) {
    df_plan_destroy(*plan);
    return df_emit(mlirOperationGetLocation(plan_op), "%s", s.message);
  }
  return df_status_ok();
}

/* Visit the module's ops named `name` in order. */
#define FOR_EACH_OP(module, name, op)                                                   \
  for (MlirOperation op = mlirBlockGetFirstOperation(                                   \
           mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0)));                 \
       !mlirOperationIsNull(op); op = mlirOperationGetNextInBlock(op))                  \
    if (df_op_is(op, name))

static void set_u(MlirOperation op, const char *name, uint32_t v) {
  MlirContext ctx = mlirOperationGetContext(op);
  if (v == DF_SENTINEL)
    mlirOperationRemoveAttributeByName(op, mlirStringRefCreateFromCString(name));
  else
    df_set_attr(op, name, df_i64(ctx, v));
}

static void annotate_barriers(MlirOperation module, const df_packed *k) {
  uint32_t i = 0;
  FOR_EACH_OP(module, "df.slot", op) set_u(op, "barrier", k->barriers.slot_barrier[i++]);
  i = 0;
  FOR_EACH_OP(module, "df.comm", op) {
    set_u(op, "barrier", k->barriers.comm_barrier[i]);
    set_u(op, "phase", k->barriers.comm_phase[i]);
    set_u(op, "ack", k->barriers.comm_ack[i]);
    i++;
  }
  MlirOperation plan_op;
  df_status s = df_plan_op(module, &plan_op);
  if (!df_failed(&s))
    set_u(plan_op, "barrier_count", k->barriers.barrier_count);
}

static df_status run_allocate_barriers(MlirOperation module, const void *options) {
  (void)options;
  df_plan *plan;
  df_packed *k;
  DF_TRY(pack_from_ir(module, &plan, &k));
  annotate_barriers(module, k);
  df_packed_destroy(k);
  df_plan_destroy(plan);
  return df_status_ok();
}

typedef struct layout_opts {
  limit_opt limit;
  bool hbm_direct_global, reuse_hbm_flags, per_cta_shared, reuse_dead_shared;
  uint32_t direct_count;
  uint32_t direct[MAX_DIRECT_SLOTS];
} layout_opts;

static df_status set_layout_option(void *opts, const char *key, const char *value) {
  layout_opts *l = opts;
  if (!strcmp(key, "hbm-direct-global")) return df_option_bool(key, value, &l->hbm_direct_global);
  if (!strcmp(key, "reuse-hbm-flags")) return df_option_bool(key, value, &l->reuse_hbm_flags);
  if (!strcmp(key, "per-cta-shared")) return df_option_bool(key, value, &l->per_cta_shared);
  if (!strcmp(key, "reuse-dead-shared"))
    return df_option_bool(key, value, &l->reuse_dead_shared);
  if (!strcmp(key, "hbm-direct-global-slots"))
    return df_option_u32_list(key, value, l->direct, MAX_DIRECT_SLOTS, &l->direct_count);
  bool handled;
  df_status ls = set_limit_option(&l->limit, key, value, &handled);
  if (handled)
    return ls;
  return df_status_errorf(DF_EINVAL, "unknown option '%s'", key);
}

/* A strategy that would fit, re-scheduling the module's program with the
   plan's recorded topology, block size, lengths, extents and policy. */
static void suggest(MlirOperation module, const df_plan *plan, const layout_opts *l, char *buf,
                    size_t cap) {
  snprintf(buf, cap, "no other reduce strategy applies to this plan");
  if (plan->policy == DF_POLICY_STAGE_GRAPH) {
    snprintf(buf, cap, "a stage-graph plan has no reduce strategy to change; use smaller "
                       "intermediates or more SMs per cluster");
    return;
  }
  df_program *prog;
  df_status st = df_program_from_module(module, NULL, NULL, &prog);
  if (df_failed(&st))
    return;
  df_schedule_options o = df_schedule_options_default();
  o.topology = plan->topology;
  o.block_size = plan->block_size;
  o.range_count = 1;
  o.ranges[0].axis = plan->range_axis;
  o.ranges[0].count = plan->task_count;
  o.ranges[0].lengths = plan->task_lengths;
  o.extent_count = plan->extent_count;
  memcpy(o.extents, plan->extents, sizeof o.extents);
  o.policy = plan->policy;
  df_pack_options po;
  memset(&po, 0, sizeof po);
  po.layout.per_cta_shared = l->per_cta_shared;
  po.layout.reuse_dead_shared = l->reuse_dead_shared;
  po.layout.reuse_hbm_flags = l->reuse_hbm_flags;
  df_plan *fit_plan = NULL;
  df_fit_result fit;
  st = df_schedule_fitting(prog, &o, &po, l->limit.bytes, &fit_plan, &fit);
  if (fit_plan)
    df_plan_destroy(fit_plan);
  df_program_destroy(prog);
  if (st.code == DF_OK || st.code == DF_EINVAL)
    df_fit_suggestion(&fit, plan->strategy, buf, cap);
}

static df_status run_layout_slots(MlirOperation module, const void *options) {
  const layout_opts *l = options;
  MlirOperation plan_op;
  DF_TRY(df_plan_op(module, &plan_op));
  MlirContext ctx = mlirOperationGetContext(module);
  df_set_attr(plan_op, "hbm_direct_global", mlirBoolAttrGet(ctx, l->hbm_direct_global));
  df_set_attr(plan_op, "reuse_hbm_flags", mlirBoolAttrGet(ctx, l->reuse_hbm_flags));
  if (l->per_cta_shared)
    df_set_attr(plan_op, "per_cta_shared", mlirBoolAttrGet(ctx, true));
  else
    mlirOperationRemoveAttributeByName(plan_op, mlirStringRefCreateFromCString("per_cta_shared"));
  if (l->reuse_dead_shared)
    df_set_attr(plan_op, "reuse_dead_shared", mlirBoolAttrGet(ctx, true));
  else
    mlirOperationRemoveAttributeByName(plan_op,
                                       mlirStringRefCreateFromCString("reuse_dead_shared"));
  if (l->direct_count)
    df_set_attr(plan_op, "hbm_direct_global_slots", df_i64_array(ctx, l->direct, l->direct_count));
  else
    mlirOperationRemoveAttributeByName(plan_op,
                                       mlirStringRefCreateFromCString("hbm_direct_global_slots"));
  df_set_attr(plan_op, "shared_memory_limit", df_i64(ctx, l->limit.bytes));
  /* the handlers' workspace shares the budget (docs/workspace.md) */
  df_program *prog;
  DF_TRY(df_program_from_module(module, NULL, NULL, &prog));
  uint32_t workspace = df_program_workspace_bytes(prog);
  df_program_destroy(prog);
  df_plan *plan;
  df_packed *k;
  DF_TRY(pack_from_ir(module, &plan, &k));
  df_shared_need need;
  df_status st = df_shared_budget_check(plan, k, workspace, l->limit.bytes, &need);
  if (!df_failed(&st))
    set_u(plan_op, "shared_memory_need", need.total);
  else if (st.code == DF_EINVAL) {
    char hint[300];
    suggest(module, plan, l, hint, sizeof hint);
    st = df_emit(mlirOperationGetLocation(plan_op), "df-layout-slots: %s; %s", st.message, hint);
  }
  if (df_failed(&st)) {
    df_packed_destroy(k);
    df_plan_destroy(plan);
    return st;
  }
  annotate_barriers(module, k);
  uint32_t i = 0;
  FOR_EACH_OP(module, "df.slot", op) {
    const df_abi_slot *s = &k->slots[i++];
    set_u(op, "shared_offset", s->shared_offset);
    set_u(op, "global_offset", s->global_offset);
    set_u(op, "bytes", s->bytes);
    set_u(op, "flag_index", s->flag_index);
    set_u(op, "owner_cta", s->owner_cta);
    set_u(op, "flags", s->flags);
  }
  set_u(plan_op, "shared_slot_bytes", k->shared_slot_bytes);
  set_u(plan_op, "global_staging_bytes", k->global_staging_bytes);
  df_packed_destroy(k);
  df_plan_destroy(plan);
  return df_status_ok();
}

static MlirAttribute records(MlirContext ctx, const void *data, uint32_t count, uint32_t words) {
  int64_t shape[2] = {count, words};
  MlirType t = mlirRankedTensorTypeGet(words ? 2 : 1, shape, mlirIntegerTypeUnsignedGet(ctx, 32),
                                       mlirAttributeGetNull());
  if (!words)
    shape[0] = count;
  return mlirDenseElementsAttrUInt32Get(t, (intptr_t)count * (words ? words : 1), data);
}

static df_status run_pack(MlirOperation module, const void *options) {
  (void)options;
  df_plan *plan;
  df_packed *k;
  DF_TRY(pack_from_ir(module, &plan, &k));
  MlirContext ctx = mlirOperationGetContext(module);
  MlirOperationState st = mlirOperationStateGet(mlirStringRefCreateFromCString("df.packed"),
                                                mlirLocationUnknownGet(ctx));
  MlirOperation op = mlirOperationCreate(&st);
  const df_launch_package *l = &k->launch;
  df_set_attr(op, "abi_version", df_i64(ctx, k->abi_version));
  df_set_attr(op, "instructions", records(ctx, k->instrs, k->instr_count, 8));
  df_set_attr(op, "slots", records(ctx, k->slots, k->slot_count, 8));
  df_set_attr(op, "comms", records(ctx, k->comms, k->comm_count, 12));
  df_set_attr(op, "args", records(ctx, k->args, k->arg_count, 16));
  df_set_attr(op, "queue_offsets", records(ctx, k->queue_offsets, k->topology.sm_count, 0));
  df_set_attr(op, "queue_lengths", records(ctx, k->queue_lengths, k->topology.sm_count, 0));
  df_set_attr(op, "input_slots", records(ctx, k->input_slots, k->input_slot_count, 0));
  df_set_attr(op, "task_coords", records(ctx, k->task_coords, k->task_coord_count, 0));
  df_set_attr(op, "barrier_count", df_i64(ctx, l->barrier_count));
  df_set_attr(op, "cluster_ack_count", df_i64(ctx, l->cluster_ack_count));
  df_set_attr(op, "shared_slot_base_offset", df_i64(ctx, l->shared_slot_base_offset));
  df_set_attr(op, "shared_memory_bytes", df_i64(ctx, l->shared_memory_bytes));
  df_set_attr(op, "global_staging_bytes", df_i64(ctx, l->global_staging_bytes));
  df_set_attr(op, "flag_count", df_i64(ctx, l->flag_count));
  df_set_attr(op, "needs_flag_reset", mlirBoolAttrGet(ctx, l->needs_flag_reset));
  df_set_attr(op, "fingerprint", df_str(ctx, k->fingerprint));
  FOR_EACH_OP(module, "df.packed", old) {
    mlirOperationDestroy(old);
    break;
  }
  mlirBlockAppendOwnedOperation(mlirRegionGetFirstBlock(mlirOperationGetRegion(module, 0)), op);
  df_packed_destroy(k);
  df_plan_destroy(plan);
  return df_status_ok();
}

static const char barriers_anchor = 0, layout_anchor = 0, pack_anchor = 0;

df_status df_create_allocate_barriers_pass(const char *text, MlirPass *out) {
  if (text && *text)
    return df_status_errorf(DF_EINVAL, "df-allocate-barriers takes no options, got '%s'", text);
  *out = df_make_pass(&barriers_anchor, "df-allocate-barriers",
                      "annotate slots and comms with barrier indices and phases",
                      run_allocate_barriers, NULL, 0);
  return df_status_ok();
}

df_status df_create_layout_slots_pass(const char *text, MlirPass *out) {
  layout_opts l;
  memset(&l, 0, sizeof l);
  l.limit.bytes = DF_SHARED_LIMIT_SM90;
  DF_TRY(df_parse_pass_options("df-layout-slots", text, &l, set_layout_option));
  *out = df_make_pass(&layout_anchor, "df-layout-slots",
                      "annotate slots with shared/global offsets, flags and owners",
                      run_layout_slots, &l, sizeof l);
  return df_status_ok();
}

df_status df_create_pack_pass(const char *text, MlirPass *out) {
  if (text && *text)
    return df_status_errorf(DF_EINVAL, "df-pack takes no options, got '%s'", text);
  *out = df_make_pass(&pack_anchor, "df-pack", "pack the plan into ABI records (df.packed)",
                      run_pack, NULL, 0);
  return df_status_ok();
}

