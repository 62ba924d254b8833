/* See attention_program.h. */
#include <string.h>

#include "attention_program.h"
#include "bench_util.h"

static void die(df_status s, const char *what) { bench_check("bench", s, what); }

df_program *bench_attention_program_of(const bench_attention_shape *shape) {
  df_program *p;
  die(df_program_create(NULL, "attention", &p), "program");
  die(df_program_add_axis(p, shape->outer_axis), "axis");
  die(df_program_add_axis(p, "head"), "axis");
  die(df_program_add_range(p, "kv", "seq_lens"), "range");
  df_field f[2];
  memset(f, 0, sizeof f);
  strcpy(f[0].name, "lse");
  f[0].dtype = DF_DTYPE_FLOAT32;
  strcpy(f[1].name, "o");
  f[1].dtype = shape->o_dtype; /* decode: o[128] per head group */
  f[1].rank = 1;
  f[1].shape[0] = 128;
  int32_t t;
  die(df_program_add_type(p, "AttnInter", 2, f, &t), "type");
  df_param sk[2] = {{"seq", DF_PARAM_SCALAR, -1}, {"K", DF_PARAM_TENSOR, -1}};
  df_param cb[1] = {{"items", DF_PARAM_INTER_LIST, t}};
  df_param fz[2] = {{"inter", DF_PARAM_INTER, t}, {"O", DF_PARAM_TENSOR, -1}};
  int32_t o0, o1, o2;
  uint32_t nt = shape->tensors ? 1 : 0;
  die(df_program_add_operator(p, "split_kv", DF_OPK_ITER, 2 * nt, nt ? sk : NULL, t, &o0),
      "op");
  die(df_program_add_operator(p, "combine", DF_OPK_REDUCE, 1, cb, t, &o1), "op");
  die(df_program_add_operator(p, "finalize", DF_OPK_FINALIZE, 1 + nt, fz, -1, &o2), "op");
  df_stage s;
  memset(&s, 0, sizeof s);
  s.logical_type = -1;
  strcpy(s.name, "partial");
  s.kind = DF_STAGE_MAP;
  s.op = o0;
  s.input = -1;
  strcpy(s.range_axis, "kv");
  s.type = t;
  die(df_program_add_stage(p, &s, NULL), "stage");
  memset(s.range_axis, 0, sizeof s.range_axis);
  strcpy(s.name, "reduce");
  s.kind = DF_STAGE_REDUCE;
  s.op = o1;
  s.input = 0;
  die(df_program_add_stage(p, &s, NULL), "stage");
  strcpy(s.name, "finalize");
  s.kind = DF_STAGE_FINALIZE;
  s.op = o2;
  s.input = 1;
  s.type = -1;
  die(df_program_add_stage(p, &s, NULL), "stage");
  die(df_program_validate(p), "validate");
  return p;
}


df_program *bench_attention_program(void) {
  static const bench_attention_shape shape = {"batch", DF_DTYPE_FLOAT32, true};
  return bench_attention_program_of(&shape);
}
