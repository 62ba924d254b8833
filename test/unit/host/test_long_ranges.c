/* Long ranges in bounded memory (issue 8) on the host backend: the three
   reshared transports give the same numbers on random data for cluster
   sizes 2 and 4 and one or two tiles per shard; tile-segmented transfers
   give the same numbers as whole-slot ones and no copy moves more than a
   tile; the ring's cluster sends are C*(C-1)*n_tiles per task; the
   shared-memory budget refuses and `auto` chooses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host_test_support.h"
#include "seed_plans.h"

/* ---- a reshared program over random data --------------------------------------- */

/* Tensors: 0 = random map1 values f32[tasks][C][V], 1 = config u32 {V, C},
   2 = output f32[tasks][C][V]. UpShard / HiddenShard are f32[V]. */
enum { MAX_V = 64, MAX_C = 4, MAX_TASKS = 4 };

static uint32_t cfg_v(const df_ctx *c) { return ((const uint32_t *)df_ctx_tensor(c, 1))[0]; }
static uint32_t cfg_c(const df_ctx *c) { return ((const uint32_t *)df_ctx_tensor(c, 1))[1]; }
static uint32_t rank_of(const df_ctx *c) {
  uint32_t b = df_ctx_range_begin(c), e = df_ctx_range_end(c);
  return e > b ? b / (e - b) : 0;
}

static void h_map1(const df_ctx *c) {
  if (df_ctx_thread(c) != 0)
    return;
  uint32_t v = cfg_v(c), cs = cfg_c(c), t = df_ctx_task_id(c), r = rank_of(c);
  const float *in = (const float *)df_ctx_tensor(c, 0) + ((size_t)t * cs + r) * v;
  memcpy(df_ctx_output(c), in, sizeof(float) * v);
}

/* hidden[i] = sum_p (p + 1 + rank) * shard_p[i], p in tile order. */
static float mix(const float *const *parts, uint32_t n, uint32_t rank, uint32_t i) {
  float acc = 0.0f;
  for (uint32_t p = 0; p < n; p++)
    acc += (float)(p + 1 + rank) * parts[p][i];
  return acc;
}

static void h_map2(const df_ctx *c) {
  if (df_ctx_thread(c) != 0)
    return;
  uint32_t v = cfg_v(c), n = df_ctx_input_count(c), r = rank_of(c);
  const float *parts[MAX_C];
  for (uint32_t p = 0; p < n && p < MAX_C; p++)
    parts[p] = df_ctx_input(c, p);
  float *out = df_ctx_output(c);
  for (uint32_t i = 0; i < v; i++)
    out[i] = mix(parts, n, r, i);
}

static void h_finalize(const df_ctx *c) {
  if (df_ctx_thread(c) != 0)
    return;
  uint32_t v = cfg_v(c), cs = cfg_c(c);
  float *out = (float *)df_ctx_tensor(c, 2) + ((size_t)df_ctx_task_id(c) * cs + rank_of(c)) * v;
  memcpy(out, df_ctx_input(c, 0), sizeof(float) * v);
}

/* The seed MoE program with f32[V] shards, output_arity C and a policy. */
static df_program *moe_program(uint32_t v, uint32_t cs, const char *policy) {
  df_program *g = seed_moe_program();
  for (uint32_t i = 0; i < g->type_count; i++) {
    df_field *f = &g->types[i].fields[0];
    f->dtype = DF_DTYPE_FLOAT32;
    f->rank = 1;
    f->shape[0] = strcmp(g->types[i].name, "UpFull") ? v : v * cs;
  }
  g->stages[1].output_arity = cs;
  snprintf(g->stages[1].policy, sizeof g->stages[1].policy, "%s", policy);
  return g;
}

static df_status moe_schedule(uint32_t v, uint32_t cs, uint32_t tasks, const char *policy,
                              bool force_hbm, uint32_t tile, df_plan **out) {
  df_program *g = moe_program(v, cs, policy);
  static const uint32_t len[MAX_TASKS] = {64, 64, 64, 64};
  df_schedule_options o = df_schedule_options_default();
  o.topology.sm_count = 4;
  o.topology.cluster_size = cs;
  o.block_size = 16;
  o.range_count = 2;
  o.ranges[0] = (df_range_lengths){"expert_tile", tasks, len, NULL};
  o.ranges[1] = (df_range_lengths){"hidden_tile", tasks, len, NULL};
  o.include_exit = true;
  o.force_hbm_comms = force_hbm;
  o.transfer_tile_bytes = tile;
  df_status st = df_schedule(g, &o, out);
  df_program_destroy(g);
  return st;
}

typedef struct moe_run {
  float out[MAX_TASKS * MAX_C * MAX_V];
  uint32_t cluster_sends, max_copy;
} moe_run;

static void run_moe(const df_plan *p, const float *in, uint32_t v, uint32_t cs,
                    moe_run *m, int variant) {
  df_packed *k = ht_pack(p, NULL);
  uint32_t cfg[2] = {v, cs};
  memset(m, 0, sizeof *m);
  df_abi_tensor_arg t[3];
  memset(t, 0, sizeof t);
  t[0].data_ptr = (uint64_t)(uintptr_t)in;
  t[1].data_ptr = (uint64_t)(uintptr_t)cfg;
  t[2].data_ptr = (uint64_t)(uintptr_t)m->out;
  df_handler_fn *h = calloc(k->handler_count + 1, sizeof *h);
  for (uint32_t i = 0; i < k->handler_count; i++)
    h[i] = !strcmp(k->handlers[i].name, "moe_map1")   ? h_map1
           : !strcmp(k->handlers[i].name, "moe_map2") ? h_map2
                                                      : h_finalize;
  df_host_options o = df_host_options_default();
  o.reverse = variant == 1;
  o.quantum = variant == 2 ? 1 : 0;
  o.threads = variant == 3 ? 3 : 1;
  df_host_result res;
  df_status st = df_host_run(k, h, k->handler_count, t, 3, p->block_size, &o, &res);
  if (st.code != DF_OK)
    fprintf(stderr, "C=%u variant %d: %s\n", cs, variant,
            res.diag.report ? res.diag.report : st.message);
  assert_int_equal(st.code, DF_OK);
  assert_true(res.completed);
  for (uint32_t s = 0; s < res.cost.cta_count; s++)
    if (res.cost.ctas[s].max_copy_bytes > m->max_copy)
      m->max_copy = res.cost.ctas[s].max_copy_bytes;
  for (uint32_t i = 0; i < k->comm_count; i++)
    m->cluster_sends += k->comms[i].kind == DF_COMM_CLUSTER_SEND;
  df_host_result_free(&res);
  free(h);
  df_packed_destroy(k);
}

static void moe_reference(const float *in, uint32_t v, uint32_t cs, uint32_t tasks, float *want) {
  for (uint32_t t = 0; t < tasks; t++)
    for (uint32_t r = 0; r < cs; r++) {
      const float *parts[MAX_C];
      for (uint32_t p = 0; p < cs; p++)
        parts[p] = in + ((size_t)t * cs + p) * v;
      for (uint32_t i = 0; i < v; i++)
        want[((size_t)t * cs + r) * v + i] = mix(parts, cs, r, i);
    }
}

static void random_floats(float *x, size_t n, unsigned seed) {
  srand(seed);
  for (size_t i = 0; i < n; i++)
    x[i] = (float)rand() / (float)RAND_MAX * 2.0f - 1.0f;
}

/* Every policy, C in {2, 4}, n_tiles in {1, 2}: same output as the
   reference, bit for bit, in four scheduling orders; the ring sends
   C*(C-1)*n_tiles cluster segments per task; no copy exceeds a tile. */
static void reshared_policies_parity(void **state) {
  (void)state;
  static const char *policies[3] = {"hbm_all_gather", "cluster_shared_all_gather",
                                    "cluster_shared_pull_ring"};
  const uint32_t v = 16, tile = 32; /* shard 64 B: two tiles of 32 B */
  for (uint32_t cs = 2; cs <= 4; cs += 2) {
    uint32_t tasks = 4 / cs * 2; /* two tasks per cluster */
    float in[MAX_TASKS * MAX_C * MAX_V], want[MAX_TASKS * MAX_C * MAX_V];
    random_floats(in, (size_t)tasks * cs * v, 100 + cs);
    moe_reference(in, v, cs, tasks, want);
    for (uint32_t pi = 0; pi < 3; pi++)
      for (uint32_t n_tiles = 1; n_tiles <= 2; n_tiles++) {
        df_plan *p = NULL;
        /* hbm_all_gather over HBM at C = 2 (at C = 4 its sends of one shard
           to three consumers rewrite one staging region, which the host
           backend refuses as a staging overwrite: REFERENCE 2.6 gives
           every target the producer's global storage) */
        bool hbm = pi == 0 && n_tiles == 1 && cs == 2;
        df_status st = moe_schedule(v, cs, tasks, policies[pi], hbm, n_tiles == 2 ? tile : 0, &p);
        if (st.code != DF_OK)
          fprintf(stderr, "%s\n", st.message);
        assert_int_equal(st.code, DF_OK);
        for (int variant = 0; variant < 4; variant++) {
          moe_run m;
          run_moe(p, in, v, cs, &m, variant);
          assert_memory_equal(m.out, want, sizeof(float) * tasks * cs * v);
          if (hbm)
            assert_int_equal(m.cluster_sends, 0);
          else
            assert_int_equal(m.cluster_sends, tasks * cs * (cs - 1) * n_tiles);
          if (n_tiles == 2)
            assert_int_equal(m.max_copy, tile);
          else
            assert_int_equal(m.max_copy, v * 4);
        }
        df_plan_destroy(p);
      }
  }
}

/* Ring step structure: every cluster send goes to the right neighbour. */
static void ring_is_neighbour_to_neighbour(void **state) {
  (void)state;
  df_plan *p = NULL;
  assert_int_equal(moe_schedule(16, 4, 1, "cluster_shared_pull_ring", false, 32, &p).code,
                   DF_OK);
  uint32_t sends = 0;
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    if (c->kind != DF_COMM_CLUSTER_SEND)
      continue;
    sends++;
    assert_int_equal(c->consumer_sm % 4, (c->producer_sm + 1) % 4);
    assert_true(c->byte_count <= 32);
  }
  assert_int_equal(sends, 4 * 3 * 2);
  df_plan_destroy(p);
}

static void cluster_policies_refuse_force_hbm(void **state) {
  (void)state;
  static const char *cluster_only[2] = {"cluster_shared_all_gather", "cluster_shared_pull_ring"};
  for (int i = 0; i < 2; i++) {
    df_plan *p = NULL;
    df_status st = moe_schedule(16, 2, 2, cluster_only[i], true, 0, &p);
    assert_int_equal(st.code, DF_EINVAL);
    assert_non_null(strstr(st.message, cluster_only[i]));
    assert_non_null(strstr(st.message, "force_hbm_comms"));
    assert_null(p);
  }
}

/* ---- segmented vs whole-slot transfers (attention) -------------------------------- */

/* Runs the plan in scheduling order `variant` (0 ascending, 1 reversed,
   2 lockstep, 3 three threads per CTA); the largest copy and the most
   receive bulk-load bytes in flight on any CTA. */
static void run_rows_variant(const df_plan *p, uint32_t tasks, uint32_t block, int variant,
                             float **rows, uint32_t *max_copy, uint32_t *max_inflight) {
  df_packed *k = ht_pack(p, NULL);
  df_host_options o = df_host_options_default();
  o.reverse = variant == 1;
  o.quantum = variant == 2 ? 1 : 0;
  o.threads = variant == 3 ? 3 : 1;
  df_host_result res;
  df_status st = ht_run_attention(k, tasks, block, &o, rows, &res);
  if (st.code != DF_OK)
    fprintf(stderr, "%s\n", res.diag.report ? res.diag.report : st.message);
  assert_int_equal(st.code, DF_OK);
  *max_copy = 0;
  if (max_inflight)
    *max_inflight = 0;
  for (uint32_t s = 0; s < res.cost.cta_count; s++) {
    if (res.cost.ctas[s].max_copy_bytes > *max_copy)
      *max_copy = res.cost.ctas[s].max_copy_bytes;
    if (max_inflight && res.cost.ctas[s].max_recv_inflight_bytes > *max_inflight)
      *max_inflight = res.cost.ctas[s].max_recv_inflight_bytes;
  }
  df_host_result_free(&res);
  df_packed_destroy(k);
}

static void run_rows(const df_plan *p, uint32_t tasks, uint32_t block, float **rows,
                     uint32_t *max_copy) {
  run_rows_variant(p, tasks, block, 0, rows, max_copy, NULL);
}

static df_plan *attention(df_policy pol, df_reduce_strategy st, uint32_t cluster,
                          const uint32_t *kv, uint32_t tasks, uint32_t block, uint32_t tile) {
  df_program *g = st == DF_REDUCE_STREAMING_TREE ? ht_associative_attention_program()
                                                 : seed_attention_program();
  df_schedule_options o = ht_kv_options(4, cluster, kv, tasks, block);
  o.policy = pol;
  o.strategy = st;
  o.transfer_tile_bytes = tile;
  df_plan *p = NULL;
  df_status s = df_schedule(g, &o, &p);
  if (s.code != DF_OK)
    fprintf(stderr, "%s\n", s.message);
  assert_int_equal(s.code, DF_OK);
  df_program_destroy(g);
  return p;
}

/* AttnInter is 48 B: tile 16 makes 3 segments per transfer, over cluster
   and HBM kinds; the rows equal the whole-slot run's bit for bit. */
static void segmented_equals_whole(void **state) {
  (void)state;
  static const uint32_t kv[3] = {384, 256, 640};
  struct {
    df_policy pol;
    df_reduce_strategy st;
    uint32_t cluster;
  } cases[4] = {{DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE, 2},
                {DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE, 1},
                {DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING, 2},
                {DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING_TREE, 2}};
  for (int i = 0; i < 4; i++) {
    df_plan *whole = attention(cases[i].pol, cases[i].st, cases[i].cluster, kv, 3, 64, 0);
    df_plan *seg = attention(cases[i].pol, cases[i].st, cases[i].cluster, kv, 3, 64, 16);
    uint32_t transfers = 0, records = 0;
    for (uint32_t j = 0; j < whole->comm_count; j++)
      transfers += df_comm_kind_is_recv(whole->comms[j].kind);
    for (uint32_t j = 0; j < seg->comm_count; j++)
      records += df_comm_kind_is_recv(seg->comms[j].kind);
    assert_true(transfers > 0);
    assert_int_equal(records, 3 * transfers); /* ceil(48 / 16) per direction */
    float *a, *b;
    uint32_t ma, mb;
    run_rows(whole, 3, 64, &a, &ma);
    run_rows(seg, 3, 64, &b, &mb);
    ht_check_attention(b, kv, 3);
    assert_memory_equal(a, b, sizeof(float) * 3 * HT_ATTN_ROW);
    assert_int_equal(ma, 48);
    assert_int_equal(mb, 16);
    free(a);
    free(b);
    df_plan_destroy(whole);
    df_plan_destroy(seg);
  }
}

/* The receiving CTA loads a tiled HBM transfer one tile at a time: the
   most bulk-load bytes in flight on any CTA is the tile (48-byte
   AttnInter: 3 tiles of 16, or 32 + 16, which adds an empty phase to
   keep the barrier's parity), not the slot, in every scheduling order,
   with the same rows as the whole-slot plan. Whole-slot receives take
   the thread-copy path: nothing in flight. */
static void tiled_receive_in_flight(void **state) {
  (void)state;
  /* 3 long tasks; 8 short ones, so that barriers are reused on a CTA
     after a tiled transfer (a wrong phase count would be a mismatch) */
  static const uint32_t kv3[3] = {384, 256, 640};
  static const uint32_t kv8[8] = {128, 192, 256, 128, 192, 256, 128, 192};
  for (int cfg = 0; cfg < 2; cfg++) {
    const uint32_t *kv = cfg ? kv8 : kv3;
    uint32_t tasks = cfg ? 8 : 3;
    df_plan *whole = attention(DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE, 1, kv, tasks, 64, 0);
    float *a;
    uint32_t ma, ia;
    run_rows_variant(whole, tasks, 64, 0, &a, &ma, &ia);
    assert_int_equal(ia, 0);
    for (uint32_t tile = 16; tile <= 32; tile += 16) {
      df_plan *seg =
          attention(DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE, 1, kv, tasks, 64, tile);
      uint32_t hbm_recvs = 0;
      for (uint32_t j = 0; j < seg->comm_count; j++)
        hbm_recvs += seg->comms[j].kind == DF_COMM_HBM_RECV && seg->comms[j].segment_count > 1;
      assert_true(hbm_recvs > 0);
      for (int variant = 0; variant < 4; variant++) {
        float *b;
        uint32_t mb, ib;
        run_rows_variant(seg, tasks, 64, variant, &b, &mb, &ib);
        ht_check_attention(b, kv, tasks);
        assert_memory_equal(a, b, sizeof(float) * tasks * HT_ATTN_ROW);
        assert_int_equal(mb, tile);
        assert_int_equal(ib, tile);
        free(b);
      }
      df_plan_destroy(seg);
    }
    free(a);
    df_plan_destroy(whole);
  }
}

/* ceil(S / T) segments per direction, for S over a range of tiles. */
static void segment_formula(void **state) {
  (void)state;
  assert_int_equal(df_transfer_segment_count(48, 16), 3);
  assert_int_equal(df_transfer_segment_count(48, 32), 2);
  assert_int_equal(df_transfer_segment_count(48, 48), 1);
  assert_int_equal(df_transfer_segment_count(48, 64), 1);
  assert_int_equal(df_transfer_segment_count(48, 0), 1);
  assert_int_equal(df_transfer_segment_count(4096, 1024), 4);
  assert_int_equal(df_transfer_segment_count(4097, 1024), 5);
  for (uint32_t tile = 16; tile <= 64; tile += 16) {
    df_plan *p = NULL;
    assert_int_equal(moe_schedule(MAX_V, 2, 2, "cluster_shared_all_gather", false, tile, &p).code,
                     DF_OK);
    uint32_t per_dir[2] = {0, 0}, s = MAX_V * 4, want = (s + tile - 1) / tile;
    for (uint32_t i = 0; i < p->comm_count; i++) {
      const df_comm *c = &p->comms[i];
      per_dir[c->kind == DF_COMM_CLUSTER_RECV] += 1;
      assert_int_equal(c->segment_count, want);
      assert_int_equal(c->byte_offset, c->segment_id * tile);
      assert_int_equal(c->byte_count, c->segment_id + 1 < want ? tile : s - c->segment_id * tile);
    }
    /* 2 tasks x 2 transfers, each ceil(S/T) records per direction */
    assert_int_equal(per_dir[0], 4 * want);
    assert_int_equal(per_dir[1], 4 * want);
    df_plan_destroy(p);
  }
}

static void bad_tiles(void **state) {
  (void)state;
  df_plan *p = NULL;
  df_status st = moe_schedule(16, 2, 2, "hbm_all_gather", false, 24, &p);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "transfer_tile_bytes 24 must be a multiple of 16"));
  df_plan *q = seed_make_plan();
  st = df_plan_segment_transfers(q, 8);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "transfer-tile-bytes 8"));
  df_plan_destroy(q);
}

/* Bad plans: a comm naming a slot outside the plan; epochs that would not
   fit uint32 once scaled by the segment count. */
static void segment_bad_plans(void **state) {
  (void)state;
  df_plan *p = seed_make_plan();
  p->comms[0].dst_slot = 999;
  df_status st = df_plan_segment_transfers(p, 16);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "comm 0 names slot"));
  assert_non_null(strstr(st.message, "999, outside the plan's 7 slots"));
  df_plan_destroy(p);
  p = seed_make_plan();
  for (uint32_t i = 0; i < p->comm_count; i++)
    if (df_comm_kind_is_hbm(p->comms[i].kind))
      p->comms[i].flag_epoch = 0x7FFFFFFFu;
  uint32_t before = p->comm_count;
  st = df_plan_segment_transfers(p, 16);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "times 3 segments does not fit uint32"));
  assert_int_equal(p->comm_count, before); /* untouched on failure */
  df_plan_destroy(p);
}

/* HBM epochs: every segment its own, order kept on each flag. */
static void segmented_hbm_epochs(void **state) {
  (void)state;
  df_plan *p = seed_make_plan(); /* HBM epochs 1 (I2->I3) and 2 (I6->I7) */
  assert_int_equal(df_plan_segment_transfers(p, 16).code, DF_OK);
  uint32_t seen = 0;
  for (uint32_t i = 0; i < p->comm_count; i++) {
    const df_comm *c = &p->comms[i];
    if (c->kind != DF_COMM_HBM_SEND)
      continue;
    assert_int_equal(c->segment_count, 3);
    uint32_t base = c->src_instr == 2 ? 0 : 3;
    assert_int_equal(c->flag_epoch, base + c->segment_id + 1);
    seen++;
  }
  assert_int_equal(seen, 6);
  df_plan_destroy(p);
}

/* ---- shared-memory budget ------------------------------------------------------------ */

static void budget_limits(void **state) {
  (void)state;
  uint32_t l = 0;
  assert_int_equal(df_target_shared_limit("sm_90", &l).code, DF_OK);
  assert_int_equal(l, 232448);
  assert_int_equal(df_target_shared_limit("sm_90a", &l).code, DF_OK);
  assert_int_equal(l, 232448);
  assert_int_equal(df_target_shared_limit("sm_80", &l).code, DF_OK);
  assert_int_equal(l, 166912);
  df_status st = df_target_shared_limit("sm_70", &l);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "'sm_70' is unknown"));
  assert_int_equal(df_target_shared_limit(NULL, &l).code, DF_EINVAL);
}

static uint32_t need_of(const df_plan *p, df_shared_need *n) {
  df_packed *k = ht_pack(p, NULL);
  assert_int_equal(df_shared_need_of(p, k, 0, n).code, DF_OK);
  df_packed_destroy(k);
  return n->total;
}

/* kv 131072 / block 128 = 1024 partials per task: streaming and
   streaming_tree need what kv 4096 needs; all_at_once is refused. */
static void budget_long_range(void **state) {
  (void)state;
  static const uint32_t shortkv[2] = {4096, 4096}, longkv[2] = {131072, 131072};
  df_shared_need a, b;
  for (int s = 1; s <= 2; s++) {
    df_reduce_strategy st = s == 1 ? DF_REDUCE_STREAMING : DF_REDUCE_STREAMING_TREE;
    df_plan *p = attention(DF_POLICY_CLUSTER_LOCAL, st, 2, shortkv, 2, 128, 0);
    df_plan *q = attention(DF_POLICY_CLUSTER_LOCAL, st, 2, longkv, 2, 128, 0);
    assert_int_equal(need_of(p, &a), need_of(q, &b));
    assert_true(a.total < DF_SHARED_LIMIT_SM80);
    df_plan_destroy(p);
    df_plan_destroy(q);
  }
  df_plan *p = attention(DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE, 2, longkv, 2, 128, 0);
  df_packed *k = ht_pack(p, NULL);
  df_shared_need n;
  assert_int_equal(df_shared_budget_check(p, k, 0, 0, &n).code, DF_OK); /* 0: no limit */
  assert_true(n.total > 65536);
  df_status st = df_shared_budget_check(p, k, 0, 65536, NULL);
  assert_int_equal(st.code, DF_EINVAL);
  char want[200];
  snprintf(want, sizeof want, "CTA %u needs %u bytes of dynamic shared memory (control %u + slots %u",
           n.cta, n.total, n.control_bytes, n.slot_bytes);
  assert_non_null(strstr(st.message, want));
  assert_non_null(strstr(st.message, "over the limit of 65536 bytes"));
  assert_int_equal(df_shared_budget_check(p, k, 0, n.total, NULL).code, DF_OK);
  df_packed_destroy(k);
  df_plan_destroy(p);
}

static void auto_chooses_first_fit(void **state) {
  (void)state;
  static const uint32_t kv[2] = {131072, 131072};
  df_program *g = ht_associative_attention_program();
  df_schedule_options o = ht_kv_options(4, 2, kv, 2, 128);
  df_plan *p = NULL;
  df_fit_result r;
  /* no limit: all_at_once */
  assert_int_equal(df_schedule_fitting(g, &o, NULL, 0, &p, &r).code, DF_OK);
  assert_int_equal(r.chosen, 0);
  assert_int_equal(p->strategy, DF_REDUCE_ALL_AT_ONCE);
  df_plan_destroy(p);
  /* 64 KiB: all_at_once does not fit, streaming does */
  assert_int_equal(df_schedule_fitting(g, &o, NULL, 65536, &p, &r).code, DF_OK);
  assert_int_equal(r.chosen, 1);
  assert_false(r.c[0].fits);
  assert_int_equal(p->strategy, DF_REDUCE_STREAMING);
  assert_int_equal(p->policy, DF_POLICY_CLUSTER_LOCAL);
  char hint[200];
  df_fit_suggestion(&r, DF_REDUCE_ALL_AT_ONCE, hint, sizeof hint);
  assert_non_null(strstr(hint, "reduce-strategy=streaming policy=cluster_local fits"));
  df_plan_destroy(p);
  /* 64 bytes: nothing fits; every candidate is listed */
  df_status st = df_schedule_fitting(g, &o, NULL, 64, &p, &r);
  assert_int_equal(st.code, DF_EINVAL);
  assert_null(p);
  assert_non_null(strstr(st.message, "no strategy fits the shared memory limit of 64 bytes"));
  assert_non_null(strstr(st.message, "cluster_local/streaming_tree needs"));
  df_fit_suggestion(&r, DF_REDUCE_ALL_AT_ONCE, hint, sizeof hint);
  assert_non_null(strstr(hint, "no reduce strategy fits"));
  df_program_destroy(g);
  /* a refused candidate (streaming_tree needs an associative reducer) */
  g = seed_attention_program();
  st = df_schedule_fitting(g, &o, NULL, 64, &p, &r);
  assert_int_equal(st.code, DF_EINVAL);
  assert_false(r.c[2].scheduled);
  assert_non_null(strstr(st.message, "streaming_tree refused"));
  df_program_destroy(g);
}

/* df_schedule_replan repeats the program's recorded choices: the tile
   (unless the options give one) and the auto memory choice, starting
   from the recorded policy whatever the options ask; the tiled re-plan
   runs on the host with one tile per copy and in flight. */
static void replan_repeats_choices(void **state) {
  (void)state;
  static const uint32_t kv[3] = {384, 256, 640};
  df_program *g = seed_attention_program();
  df_schedule_options o = ht_kv_options(4, 1, kv, 3, 64);
  g->transfer_tile_bytes = 16;
  df_plan *p = NULL;
  assert_int_equal(df_schedule_replan(g, &o, NULL, &p, NULL).code, DF_OK);
  for (uint32_t i = 0; i < p->comm_count; i++)
    assert_int_equal(p->comms[i].segment_count, 3);
  float *rows;
  uint32_t max_copy, inflight;
  run_rows_variant(p, 3, 64, 0, &rows, &max_copy, &inflight);
  ht_check_attention(rows, kv, 3);
  assert_int_equal(max_copy, 16);
  assert_int_equal(inflight, 16);
  free(rows);
  df_plan_destroy(p);
  o.transfer_tile_bytes = 32;
  assert_int_equal(df_schedule_replan(g, &o, NULL, &p, NULL).code, DF_OK);
  assert_int_equal(p->comms[0].segment_count, 2);
  df_plan_destroy(p);
  /* auto: all_at_once does not fit 200 bytes, streaming does */
  o.transfer_tile_bytes = 0;
  o.topology.cluster_size = 2;
  g->memory_auto = 1;
  g->shared_memory_limit = 200;
  o.policy = DF_POLICY_ROUND_ROBIN;
  o.strategy = DF_REDUCE_ALL_AT_ONCE;
  df_fit_result fit;
  assert_int_equal(df_schedule_replan(g, &o, NULL, &p, &fit).code, DF_OK);
  assert_int_equal(p->strategy, DF_REDUCE_STREAMING);
  assert_int_equal(fit.chosen, 1);
  assert_false(fit.c[0].fits);
  df_plan_destroy(p);
  g->shared_memory_limit = 0; /* no limit: all_at_once under the recorded policy */
  g->auto_policy = DF_POLICY_CLUSTER_LOCAL;
  o.strategy = DF_REDUCE_STREAMING; /* not used under auto */
  assert_int_equal(df_schedule_replan(g, &o, NULL, &p, NULL).code, DF_OK);
  assert_int_equal(p->strategy, DF_REDUCE_ALL_AT_ONCE);
  assert_int_equal(p->policy, DF_POLICY_CLUSTER_LOCAL);
  df_plan_destroy(p);
  /* bad input */
  g->auto_policy = DF_POLICY_STAGE_GRAPH;
  df_status st = df_schedule_replan(g, &o, NULL, &p, NULL);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "records auto_policy 2, not round_robin or cluster_local"));
  assert_null(p);
  g->auto_policy = DF_POLICY_ROUND_ROBIN;
  g->shared_memory_limit = 16;
  st = df_schedule_replan(g, &o, NULL, &p, NULL);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "re-plan with the recorded memory choice auto: "));
  assert_non_null(strstr(st.message, "no strategy fits the shared memory limit of 16 bytes"));
  assert_int_equal(df_schedule_replan(NULL, &o, NULL, &p, NULL).code, DF_EINVAL);
  assert_int_equal(df_schedule_replan(g, NULL, NULL, &p, NULL).code, DF_EINVAL);
  df_program_destroy(g);
}

/* A program recording block-size=auto re-plans choose again for the new
   lengths with the default model, whatever the options' block size,
   policy, strategy and placement: the choice is df_split_choose's for
   those lengths (two length sets, two blocks), and the re-plan runs. */
static void replan_repeats_split_choice(void **state) {
  (void)state;
  static const uint32_t kv_a[3] = {384, 256, 640}, kv_b[3] = {4096, 3000, 5000};
  const uint32_t *kvs[2] = {kv_a, kv_b};
  uint32_t blocks[2];
  df_program *g = seed_attention_program();
  g->split_auto = 1;
  for (int i = 0; i < 2; i++) {
    df_schedule_options o = ht_kv_options(4, 1, kvs[i], 3, 64);
    o.policy = DF_POLICY_CLUSTER_LOCAL; /* not used under auto */
    o.strategy = DF_REDUCE_STREAMING;
    o.balance_iters = true;
    o.split.cost.per_unit_us = 1e6; /* the recorded choice uses the default model */
    df_split_search def = df_split_search_default();
    df_split_choice want;
    assert_int_equal(df_split_choose(kvs[i], 3, 4, &def, &want).code, DF_OK);
    df_plan *p = NULL;
    df_status st = df_schedule_replan(g, &o, NULL, &p, NULL);
    if (st.code != DF_OK)
      fail_msg("%s", st.message);
    assert_true(p->split_auto);
    assert_int_equal(p->block_size, want.block_size);
    assert_int_equal(p->split_balance_iters, want.balance_iters);
    assert_int_equal(p->split_defer_reduces, want.defer_reduces);
    assert_int_equal(p->policy, DF_POLICY_ROUND_ROBIN);
    assert_int_equal(p->strategy, DF_REDUCE_ALL_AT_ONCE);
    blocks[i] = p->block_size;
    if (i == 0) {
      float *rows;
      uint32_t max_copy;
      run_rows(p, 3, p->block_size, &rows, &max_copy);
      ht_check_attention(rows, kv_a, 3);
      free(rows);
    }
    df_plan_destroy(p);
  }
  assert_int_not_equal(blocks[0], blocks[1]);
  /* without the flag the options' block size stays */
  g->split_auto = 0;
  df_schedule_options o = ht_kv_options(4, 1, kv_a, 3, 64);
  df_plan *p = NULL;
  assert_int_equal(df_schedule_replan(g, &o, NULL, &p, NULL).code, DF_OK);
  assert_int_equal(p->block_size, 64);
  assert_false(p->split_auto);
  df_plan_destroy(p);
  df_program_destroy(g);
  /* a failing choice names the recorded choice */
  g = moe_program(4, 1, "hbm_all_gather");
  g->split_auto = 1;
  static const uint32_t len[2] = {64, 64};
  o = df_schedule_options_default();
  o.topology.sm_count = 4;
  o.range_count = 2;
  o.ranges[0] = (df_range_lengths){"expert_tile", 2, len, NULL};
  o.ranges[1] = (df_range_lengths){"hidden_tile", 2, len, NULL};
  df_status st = df_schedule_replan(g, &o, NULL, &p, NULL);
  assert_int_equal(st.code, DF_EINVAL);
  assert_non_null(strstr(st.message, "re-plan with the recorded split choice block-size=auto: "));
  assert_non_null(strstr(st.message, "needs a partial/reduce program"));
  assert_null(p);
  df_program_destroy(g);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reshared_policies_parity),
      cmocka_unit_test(ring_is_neighbour_to_neighbour),
      cmocka_unit_test(cluster_policies_refuse_force_hbm),
      cmocka_unit_test(segmented_equals_whole),
      cmocka_unit_test(tiled_receive_in_flight),
      cmocka_unit_test(segment_formula),
      cmocka_unit_test(bad_tiles),
      cmocka_unit_test(segment_bad_plans),
      cmocka_unit_test(segmented_hbm_epochs),
      cmocka_unit_test(budget_limits),
      cmocka_unit_test(budget_long_range),
      cmocka_unit_test(auto_chooses_first_fit),
      cmocka_unit_test(replan_repeats_choices),
      cmocka_unit_test(replan_repeats_split_choice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
