#include "host_test_support.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "seed_plans.h"

/* ---- float16 -------------------------------------------------------------- */

uint16_t ht_f2h(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u, fexp = (x >> 23) & 0xFFu, mant = x & 0x7FFFFFu;
  if (fexp == 0xFF)
    return (uint16_t)(sign | 0x7C00u | (mant ? 0x200u : 0));
  int32_t exp = (int32_t)fexp - 127 + 15;
  if (exp >= 31)
    return (uint16_t)(sign | 0x7C00u);
  if (exp <= 0) {
    if (exp < -10)
      return (uint16_t)sign;
    mant |= 0x800000u;
    uint32_t shift = (uint32_t)(14 - exp);
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1)))
      h++;
    return (uint16_t)(sign | h);
  }
  uint32_t h = ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
    h++;
  return (uint16_t)(sign | h);
}

float ht_h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  float f;
  if (exp == 0) {
    f = ldexpf((float)mant, -24);
    return sign ? -f : f;
  }
  uint32_t x = exp == 31 ? sign | 0x7F800000u | (mant << 13)
                         : sign | ((exp - 15 + 127) << 23) | (mant << 13);
  memcpy(&f, &x, sizeof f);
  return f;
}

/* ---- attention ---------------------------------------------------------------- */

static double score(uint32_t t, uint32_t j) { return 0.8 * sin(0.05 * j + 0.7 * t); }
static double value(uint32_t t, uint32_t j, uint32_t c) {
  return cos(0.013 * j * (c + 1) + 0.31 * t + 0.17 * c);
}

static void put_lse(void *slot, float lse) { memcpy(slot, &lse, sizeof lse); }
static float get_lse(const void *slot) {
  float f;
  memcpy(&f, slot, sizeof f);
  return f;
}
static void put_o(void *slot, uint32_t c, float v) {
  uint16_t h = ht_f2h(v);
  memcpy((uint8_t *)slot + 4 + 2 * c, &h, 2);
}
static float get_o(const void *slot, uint32_t c) {
  uint16_t h;
  memcpy(&h, (const uint8_t *)slot + 4 + 2 * c, 2);
  return ht_h2f(h);
}

/* Thread 0 writes lse; after the CTA barrier every thread normalises its
   channels against the lse in the slot. */
void ht_split_kv(const df_ctx *c) {
  uint32_t t = df_ctx_task_id(c), b = df_ctx_range_begin(c), e = df_ctx_range_end(c);
  void *out = df_ctx_output(c);
  double m = -INFINITY, sum = 0;
  for (uint32_t j = b; j < e; j++)
    m = fmax(m, score(t, j));
  for (uint32_t j = b; j < e; j++)
    sum += exp(score(t, j) - m);
  if (df_ctx_thread(c) == 0)
    put_lse(out, (float)(m + log(sum)));
  df_ctx_barrier(c);
  double lse = get_lse(out);
  for (uint32_t ch = df_ctx_thread(c); ch < HT_ATTN_O; ch += df_ctx_threads(c)) {
    double acc = 0;
    for (uint32_t j = b; j < e; j++)
      acc += exp(score(t, j) - lse) * value(t, j, ch);
    put_o(out, ch, (float)acc);
  }
  df_ctx_barrier(c);
}

void ht_combine(const df_ctx *c) {
  if (df_ctx_thread(c) != 0)
    return;
  uint32_t n = df_ctx_input_count(c);
  double m = -INFINITY, sum = 0, acc[HT_ATTN_O] = {0};
  for (uint32_t i = 0; i < n; i++)
    m = fmax(m, get_lse(df_ctx_input(c, i)));
  for (uint32_t i = 0; i < n; i++) {
    const void *in = df_ctx_input(c, i);
    double w = exp(get_lse(in) - m);
    sum += w;
    for (uint32_t ch = 0; ch < HT_ATTN_O; ch++)
      acc[ch] += w * get_o(in, ch);
  }
  void *out = df_ctx_output(c); /* may alias an input: everything is read */
  put_lse(out, (float)(m + log(sum)));
  for (uint32_t ch = 0; ch < HT_ATTN_O; ch++)
    put_o(out, ch, (float)(acc[ch] / sum));
}

void ht_finalize(const df_ctx *c) {
  if (df_ctx_thread(c) != 0)
    return;
  const void *in = df_ctx_input(c, 0);
  float *row = (float *)df_ctx_tensor(c, HT_ATTN_OUT_TENSOR) + HT_ATTN_ROW * df_ctx_task_id(c);
  row[0] = get_lse(in);
  for (uint32_t ch = 0; ch < HT_ATTN_O; ch++)
    row[1 + ch] = get_o(in, ch);
}

void ht_attention_reference(uint32_t t, uint32_t len, float row[HT_ATTN_ROW]) {
  double m = -INFINITY, sum = 0, acc[HT_ATTN_O] = {0};
  for (uint32_t j = 0; j < len; j++)
    m = fmax(m, score(t, j));
  for (uint32_t j = 0; j < len; j++) {
    double w = exp(score(t, j) - m);
    sum += w;
    for (uint32_t ch = 0; ch < HT_ATTN_O; ch++)
      acc[ch] += w * value(t, j, ch);
  }
  row[0] = (float)(m + log(sum));
  for (uint32_t ch = 0; ch < HT_ATTN_O; ch++)
    row[1 + ch] = (float)(acc[ch] / sum);
}

void ht_check_attention(const float *rows, const uint32_t *kv, uint32_t task_count) {
  for (uint32_t t = 0; t < task_count; t++) {
    float want[HT_ATTN_ROW];
    ht_attention_reference(t, kv[t], want);
    const float *got = rows + HT_ATTN_ROW * t;
    if (fabsf(got[0] - want[0]) > 2e-4f) {
      fprintf(stderr, "task %u: lse %.6f, reference %.6f\n", t, got[0], want[0]);
      fail();
    }
    for (uint32_t ch = 0; ch < HT_ATTN_O; ch++)
      if (fabsf(got[1 + ch] - want[1 + ch]) > 3e-3f) {
        fprintf(stderr, "task %u: o[%u] %.6f, reference %.6f\n", t, ch, got[1 + ch],
                want[1 + ch]);
        fail();
      }
  }
}

df_status ht_run_attention(const df_packed *k, uint32_t task_count, uint32_t block,
                           const df_host_options *o, float **rows, df_host_result *res) {
  df_handler_fn *h = ht_handlers(k);
  df_status st = ht_run_attention_with(k, h, task_count, block, o, rows, res);
  free(h);
  return st;
}

df_status ht_run_attention_with(const df_packed *k, const df_handler_fn *h, uint32_t task_count,
                                uint32_t block, const df_host_options *o, float **rows,
                                df_host_result *res) {
  *rows = calloc((size_t)task_count * HT_ATTN_ROW, sizeof(float));
  df_abi_tensor_arg tensors[4];
  memset(tensors, 0, sizeof tensors);
  tensors[HT_ATTN_OUT_TENSOR].data_ptr = (uint64_t)(uintptr_t)*rows;
  tensors[HT_ATTN_OUT_TENSOR].ndim = 2;
  tensors[HT_ATTN_OUT_TENSOR].dtype_code = DF_TENSOR_DTYPE_FLOAT;
  tensors[HT_ATTN_OUT_TENSOR].dtype_bits = 32;
  df_host_result local;
  df_host_result *out = res ? res : &local;
  df_status st = df_host_run(k, h, k->handler_count, tensors, 4, block, o, out);
  if (!res)
    df_host_result_free(&local);
  return st;
}

/* ---- MoE ------------------------------------------------------------------------ */

static float moe_up(uint32_t t, uint32_t b, uint32_t i) {
  return ht_h2f(ht_f2h(0.25f * sinf(0.01f * (float)b + 0.3f * (float)i + (float)t)));
}

static float moe_mix(const float *shards, uint32_t n, uint32_t i, uint32_t b) {
  float acc = 0;
  for (uint32_t p = 0; p < n; p++)
    acc += shards[p] * (0.5f + 0.1f * (float)p + 0.01f * (float)i + 0.001f * (float)b);
  return ht_h2f(ht_f2h(acc));
}

void ht_moe_map1(const df_ctx *c) {
  if (df_ctx_thread(c) != 0)
    return;
  uint16_t *out = df_ctx_output(c);
  for (uint32_t i = 0; i < HT_MOE_VALUES; i++) {
    uint16_t h = ht_f2h(moe_up(df_ctx_task_id(c), df_ctx_range_begin(c), i));
    memcpy(out + i, &h, 2);
  }
}

void ht_moe_map2(const df_ctx *c) {
  if (df_ctx_thread(c) != 0)
    return;
  uint32_t n = df_ctx_input_count(c);
  float vals[HT_MOE_VALUES][8];
  for (uint32_t p = 0; p < n && p < 8; p++) {
    const uint8_t *in = df_ctx_input(c, p);
    for (uint32_t i = 0; i < HT_MOE_VALUES; i++) {
      uint16_t h;
      memcpy(&h, in + 2 * i, 2);
      vals[i][p] = ht_h2f(h);
    }
  }
  uint8_t *out = df_ctx_output(c);
  for (uint32_t i = 0; i < HT_MOE_VALUES; i++) {
    uint16_t h = ht_f2h(moe_mix(vals[i], n, i, df_ctx_range_begin(c)));
    memcpy(out + 2 * i, &h, 2);
  }
}

void ht_moe_finalize(const df_ctx *c) {
  if (df_ctx_thread(c) != 0)
    return;
  const uint8_t *in = df_ctx_input(c, 0);
  float *row = (float *)df_ctx_tensor(c, 3) +
               HT_MOE_VALUES * (df_ctx_range_begin(c) / c->block_size);
  for (uint32_t i = 0; i < HT_MOE_VALUES; i++) {
    uint16_t h;
    memcpy(&h, in + 2 * i, 2);
    row[i] = ht_h2f(h);
  }
}

void ht_moe_reference(uint32_t task, uint32_t b, uint32_t map1_block, uint32_t shards,
                      float row[HT_MOE_VALUES]) {
  for (uint32_t i = 0; i < HT_MOE_VALUES; i++) {
    float vals[8];
    for (uint32_t p = 0; p < shards; p++)
      vals[p] = moe_up(task, p * map1_block, i);
    row[i] = moe_mix(vals, shards, i, b);
  }
}

/* ---- plans ------------------------------------------------------------------------ */

df_handler_fn *ht_handlers(const df_packed *k) {
  df_handler_fn *h = calloc(k->handler_count + 1, sizeof *h);
  for (uint32_t i = 0; i < k->handler_count; i++) {
    const char *n = k->handlers[i].name;
    if (!strcmp(n, "split_kv"))
      h[i] = ht_split_kv;
    else if (!strcmp(n, "combine"))
      h[i] = ht_combine;
    else if (!strcmp(n, "finalize"))
      h[i] = ht_finalize;
    else if (!strcmp(n, "moe_map1"))
      h[i] = ht_moe_map1;
    else if (!strcmp(n, "moe_map2"))
      h[i] = ht_moe_map2;
    else if (!strcmp(n, "finalize_hidden"))
      h[i] = ht_moe_finalize;
  }
  return h;
}

df_packed *ht_pack(const df_plan *p, const df_pack_options *o) {
  df_packed *k = NULL;
  df_status st = df_pack(p, o, NULL, &k);
  if (st.code != DF_OK) {
    fprintf(stderr, "pack failed: %s\n", st.message);
    fail();
  }
  return k;
}

df_program *ht_associative_attention_program(void) {
  df_program *p = seed_attention_program();
  int32_t op = df_program_find_operator(p, "combine");
  assert_true(op >= 0);
  df_operator *o = &p->ops[op];
  df_param *params = df_realloc(&p->alloc, o->params, 2 * sizeof(df_param));
  assert_non_null(params);
  params[0].kind = DF_PARAM_INTER;
  params[1] = params[0];
  snprintf(params[0].name, sizeof params[0].name, "a");
  snprintf(params[1].name, sizeof params[1].name, "b");
  o->params = params;
  o->param_count = 2;
  df_status st = df_program_validate(p);
  if (st.code != DF_OK) {
    fprintf(stderr, "associative program: %s\n", st.message);
    fail();
  }
  return p;
}

const ht_combo ht_combos[HT_COMBOS] = {{DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE},
                                      {DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_ALL_AT_ONCE},
                                      {DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING},
                                      {DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING_TREE}};

df_schedule_options ht_kv_options(uint32_t sm_count, uint32_t cluster_size, const uint32_t *kv,
                                  uint32_t task_count, uint32_t block) {
  df_schedule_options o = df_schedule_options_default();
  o.topology.sm_count = sm_count;
  o.topology.cluster_size = cluster_size;
  o.block_size = block;
  o.range_count = 1;
  o.ranges[0] = (df_range_lengths){"kv", task_count, kv, NULL};
  return o;
}

df_plan *ht_schedule(const df_program *prog, uint32_t sm_count, uint32_t cluster_size,
                     const uint32_t *kv, uint32_t task_count, uint32_t block, df_policy policy,
                     df_reduce_strategy strategy, bool include_exit) {
  df_schedule_options o = ht_kv_options(sm_count, cluster_size, kv, task_count, block);
  o.extent_count = 1;
  o.extents[0] = task_count;
  o.policy = policy;
  o.strategy = strategy;
  o.include_exit = include_exit;
  df_plan *plan = NULL;
  df_status st = df_schedule(prog, &o, &plan);
  if (st.code != DF_OK) {
    fprintf(stderr, "schedule failed: %s\n", st.message);
    fail();
  }
  return plan;
}

/* ---- packed edits ------------------------------------------------------------------ */

static uint32_t owner(const df_packed *k, uint32_t comm) {
  for (uint32_t i = 0; i < k->instr_count; i++)
    if (comm >= k->instrs[i].comm_offset &&
        comm < k->instrs[i].comm_offset + k->instrs[i].comm_count)
      return i;
  return DF_SENTINEL;
}

/* OP_POOL's comm_offset and flags name its pool, not comms. */
static bool is_pool(const df_abi_instr *in) { return in->opcode == DF_ABI_OP_POOL; }

void ht_fix_flags(df_packed *k) {
  for (uint32_t i = 0; i < k->instr_count; i++) {
    df_abi_instr *in = &k->instrs[i];
    if (is_pool(in))
      continue;
    uint32_t recv = 0, send = 0;
    for (uint32_t j = in->comm_offset; j < in->comm_offset + in->comm_count; j++) {
      uint32_t kind = k->comms[j].kind;
      recv += kind == DF_COMM_CLUSTER_RECV;
      send += kind == DF_COMM_CLUSTER_SEND || kind == DF_COMM_CLUSTER_RELEASE;
    }
    in->flags = recv | send << DF_INSTR_FLAGS_SEND_SHIFT;
  }
}

void ht_delete_comm(df_packed *k, uint32_t comm) {
  uint32_t i = owner(k, comm);
  assert_int_not_equal(i, DF_SENTINEL);
  memmove(&k->comms[comm], &k->comms[comm + 1], sizeof(df_abi_comm) * (k->comm_count - comm - 1));
  k->comm_count--;
  for (uint32_t n = 0; n < k->instr_count; n++)
    if (n != i && !is_pool(&k->instrs[n]) && k->instrs[n].comm_offset > comm)
      k->instrs[n].comm_offset--;
  k->instrs[i].comm_count--;
  ht_fix_flags(k);
}

void ht_insert_comm(df_packed *k, uint32_t instr, const df_abi_comm *c) {
  df_allocator al = df_allocator_or_default(&k->alloc);
  df_abi_comm *p = df_realloc(&al, k->comms, sizeof(df_abi_comm) * (k->comm_count + 1));
  assert_non_null(p);
  k->comms = p;
  uint32_t pos = k->instrs[instr].comm_offset + k->instrs[instr].comm_count;
  memmove(&p[pos + 1], &p[pos], sizeof(df_abi_comm) * (k->comm_count - pos));
  p[pos] = *c;
  k->comm_count++;
  for (uint32_t n = 0; n < k->instr_count; n++)
    if (n != instr && !is_pool(&k->instrs[n]) && k->instrs[n].comm_offset >= pos)
      k->instrs[n].comm_offset++;
  if (k->instrs[instr].comm_count == 0)
    k->instrs[instr].comm_offset = pos;
  k->instrs[instr].comm_count++;
  ht_fix_flags(k);
}

void ht_swap_instrs(df_packed *k, uint32_t a, uint32_t b) {
  df_abi_instr t = k->instrs[a];
  k->instrs[a] = k->instrs[b];
  k->instrs[b] = t;
  uint32_t o = k->pack_order[a];
  k->pack_order[a] = k->pack_order[b];
  k->pack_order[b] = o;
}

uint32_t ht_find_comm(const df_packed *k, uint32_t kind, uint32_t instr) {
  for (uint32_t j = 0; j < k->comm_count; j++) {
    if (k->comms[j].kind != kind)
      continue;
    if (instr == DF_SENTINEL || owner(k, j) == instr)
      return j;
  }
  return DF_SENTINEL;
}

uint32_t ht_packed_index(const df_packed *k, uint32_t plan_id) {
  for (uint32_t i = 0; i < k->instr_count; i++)
    if (k->pack_order[i] == plan_id)
      return i;
  return DF_SENTINEL;
}

uint32_t ht_rand(uint64_t *state, uint32_t lo, uint32_t hi) {
  *state = *state * 6364136223846793005ull + 1442695040888963407ull;
  return lo + (uint32_t)((*state >> 33) % (uint64_t)(hi - lo + 1));
}
