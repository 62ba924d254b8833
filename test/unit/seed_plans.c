#include "seed_plans.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(df_status s, const char *what) {
  if (s.code != DF_OK) {
    fprintf(stderr, "seed setup failed at %s: %s\n", what, s.message);
    abort();
  }
}

static df_field field(const char *name, df_dtype t, uint32_t rank, uint32_t d0, uint32_t d1) {
  df_field f;
  memset(&f, 0, sizeof f);
  snprintf(f.name, sizeof f.name, "%s", name);
  f.dtype = t;
  f.rank = rank;
  f.shape[0] = d0;
  f.shape[1] = d1;
  return f;
}

static df_param param(const char *name, df_param_kind kind, int32_t type) {
  df_param q;
  memset(&q, 0, sizeof q);
  snprintf(q.name, sizeof q.name, "%s", name);
  q.kind = kind;
  q.type = type;
  return q;
}

static df_stage stage(const char *name, df_stage_kind kind, int32_t op, int32_t input,
                      const char *axis, int32_t type) {
  df_stage s;
  memset(&s, 0, sizeof s);
  snprintf(s.name, sizeof s.name, "%s", name);
  s.kind = kind;
  s.op = op;
  s.input = input;
  snprintf(s.range_axis, sizeof s.range_axis, "%s", axis);
  s.type = type;
  s.logical_type = -1;
  return s;
}

static void task_args(df_stage *s, const char *a, const char *b) {
  s->task_arg_count = 2;
  snprintf(s->task_args[0], DF_NAME_MAX, "%s", a);
  snprintf(s->task_args[1], DF_NAME_MAX, "%s", b);
}

df_program *seed_attention_program(void) {
  df_program *p;
  check(df_program_create(NULL, "attention", &p), "create");
  check(df_program_add_axis(p, "batch"), "axis");
  check(df_program_add_axis(p, "head"), "axis");
  check(df_program_add_range(p, "kv", "seq_lens"), "range");
  df_field f[2] = {field("lse", DF_DTYPE_FLOAT32, 0, 0, 0),
                   field("o", DF_DTYPE_FLOAT16, 2, 2, 8)};
  int32_t attn;
  check(df_program_add_type(p, "AttnInter", 2, f, &attn), "type");
  df_param sk[5] = {param("seq", DF_PARAM_SCALAR, -1), param("head", DF_PARAM_SCALAR, -1),
                    param("Q", DF_PARAM_TENSOR, -1), param("K", DF_PARAM_TENSOR, -1),
                    param("V", DF_PARAM_TENSOR, -1)};
  df_param cb[1] = {param("items", DF_PARAM_INTER_LIST, attn)};
  df_param fz[4] = {param("inter", DF_PARAM_INTER, attn), param("seq", DF_PARAM_SCALAR, -1),
                    param("head", DF_PARAM_SCALAR, -1), param("Output", DF_PARAM_TENSOR, -1)};
  int32_t o_split, o_comb, o_fin;
  check(df_program_add_operator(p, "split_kv", DF_OPK_ITER, 5, sk, attn, &o_split), "op");
  check(df_program_add_operator(p, "combine", DF_OPK_REDUCE, 1, cb, attn, &o_comb), "op");
  check(df_program_add_operator(p, "finalize", DF_OPK_FINALIZE, 4, fz, -1, &o_fin), "op");
  df_binding qkv[3] = {{"Q", "Q"}, {"K", "K"}, {"V", "V"}};
  df_stage s0 = stage("partial", DF_STAGE_MAP, o_split, -1, "kv", attn);
  task_args(&s0, "seq", "head");
  s0.binding_count = 3;
  s0.bindings = qkv;
  check(df_program_add_stage(p, &s0, NULL), "stage");
  df_stage s1 = stage("reduce", DF_STAGE_REDUCE, o_comb, 0, "", attn);
  check(df_program_add_stage(p, &s1, NULL), "stage");
  df_binding out[1] = {{"Output", "O"}};
  df_stage s2 = stage("finalize", DF_STAGE_FINALIZE, o_fin, 1, "", -1);
  s2.binding_count = 1;
  s2.bindings = out;
  check(df_program_add_stage(p, &s2, NULL), "stage");
  check(df_program_validate(p), "validate");
  return p;
}

df_program *seed_moe_program(void) {
  df_program *p;
  check(df_program_create(NULL, "moe_reshared", &p), "create");
  check(df_program_add_axis(p, "expert"), "axis");
  check(df_program_add_axis(p, "token"), "axis");
  check(df_program_add_range(p, "expert_tile", "expert_tiles"), "range");
  check(df_program_add_range(p, "hidden_tile", "hidden_tiles"), "range");
  df_field f24 = field("value", DF_DTYPE_FLOAT16, 2, 2, 4);
  df_field f28 = field("value", DF_DTYPE_FLOAT16, 2, 2, 8);
  int32_t up_shard, up_full, hidden;
  check(df_program_add_type(p, "UpShard", 1, &f24, &up_shard), "type");
  check(df_program_add_type(p, "UpFull", 1, &f28, &up_full), "type");
  check(df_program_add_type(p, "HiddenShard", 1, &f24, &hidden), "type");
  df_param m1[4] = {param("expert", DF_PARAM_SCALAR, -1), param("token", DF_PARAM_SCALAR, -1),
                    param("Input", DF_PARAM_TENSOR, -1), param("W1", DF_PARAM_TENSOR, -1)};
  df_param m2[4] = {param("parts", DF_PARAM_INTER_LIST, up_shard),
                    param("expert", DF_PARAM_SCALAR, -1), param("token", DF_PARAM_SCALAR, -1),
                    param("W2", DF_PARAM_TENSOR, -1)};
  df_param fh[4] = {param("hidden", DF_PARAM_INTER, hidden),
                    param("expert", DF_PARAM_SCALAR, -1), param("token", DF_PARAM_SCALAR, -1),
                    param("Output", DF_PARAM_TENSOR, -1)};
  int32_t o1, o2, of;
  check(df_program_add_operator(p, "moe_map1", DF_OPK_MAP, 4, m1, up_shard, &o1), "op");
  check(df_program_add_operator(p, "moe_map2", DF_OPK_MAP, 4, m2, hidden, &o2), "op");
  check(df_program_add_operator(p, "finalize_hidden", DF_OPK_FINALIZE, 4, fh, -1, &of), "op");
  df_binding b1[2] = {{"Input", "Input"}, {"W1", "W1"}};
  df_stage s0 = stage("map1", DF_STAGE_MAP, o1, -1, "expert_tile", up_shard);
  task_args(&s0, "expert", "token");
  s0.binding_count = 2;
  s0.bindings = b1;
  check(df_program_add_stage(p, &s0, NULL), "stage");
  df_stage s1 = stage("gather_up", DF_STAGE_RESHARED, -1, 0, "", up_shard);
  s1.logical_type = up_full;
  s1.output_arity = 2;
  snprintf(s1.policy, sizeof s1.policy, "hbm_all_gather");
  check(df_program_add_stage(p, &s1, NULL), "stage");
  df_binding b2[1] = {{"W2", "W2"}};
  df_stage s2 = stage("map2", DF_STAGE_MAP, o2, 1, "hidden_tile", hidden);
  task_args(&s2, "expert", "token");
  s2.binding_count = 1;
  s2.bindings = b2;
  check(df_program_add_stage(p, &s2, NULL), "stage");
  df_binding b3[1] = {{"Output", "Output"}};
  df_stage s3 = stage("finalize", DF_STAGE_FINALIZE, of, 2, "", -1);
  s3.binding_count = 1;
  s3.bindings = b3;
  check(df_program_add_stage(p, &s3, NULL), "stage");
  check(df_program_validate(p), "validate");
  return p;
}

df_plan *seed_schedule_attention(uint32_t sm_count, uint32_t cluster_size,
                                 const uint32_t *kv, uint32_t task_count, uint32_t block,
                                 df_policy policy, df_reduce_strategy strategy,
                                 bool include_exit) {
  df_program *prog = seed_attention_program();
  df_schedule_options o = df_schedule_options_default();
  o.topology.sm_count = sm_count;
  o.topology.cluster_size = cluster_size;
  o.block_size = block;
  o.range_count = 1;
  o.ranges[0].axis = "kv";
  o.ranges[0].count = task_count;
  o.ranges[0].lengths = kv;
  o.extent_count = 1;
  o.extents[0] = task_count;
  o.policy = policy;
  o.strategy = strategy;
  o.include_exit = include_exit;
  df_plan *plan;
  check(df_schedule(prog, &o, &plan), "schedule");
  df_program_destroy(prog);
  return plan;
}

df_plan *seed_make_plan(void) {
  static const uint32_t kv[2] = {384, 256};
  return seed_schedule_attention(4, 2, kv, 2, 128, DF_POLICY_ROUND_ROBIN,
                                 DF_REDUCE_ALL_AT_ONCE, true);
}

df_plan *seed_make_reshared_plan(void) {
  df_program *prog = seed_moe_program();
  static const uint32_t e[1] = {256}, h[1] = {256};
  df_schedule_options o = df_schedule_options_default();
  o.topology.sm_count = 4;
  o.topology.cluster_size = 2;
  o.block_size = 128;
  o.range_count = 2;
  o.ranges[0].axis = "expert_tile";
  o.ranges[0].count = 1;
  o.ranges[0].lengths = e;
  o.ranges[1].axis = "hidden_tile";
  o.ranges[1].count = 1;
  o.ranges[1].lengths = h;
  o.extent_count = 1;
  o.extents[0] = 1;
  o.include_exit = false;
  o.force_hbm_comms = true;
  df_plan *plan;
  check(df_schedule(prog, &o, &plan), "schedule");
  df_program_destroy(prog);
  return plan;
}
