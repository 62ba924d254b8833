/* GPU smoke test of the device runtime (not a lit test: the GPU machine
   has no LLVM). Packs plans with lib/Plan (seed plans, hand edits:
   releases, gated pushes, segments, issue/wait, scratch-backed and
   direct-global slots, full-size random plans), launches
   df_persistent_kernel from a PTX file built from the runtime and
   gpu_smoke_handlers.c, and checks every task's finalized sum against the
   plan's ITER ranges. Build and run: docs/device-runtime.md. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "df/plan.h"
#include "hand_plan.h"
#include "seed_plans.h"

#define CK(x)                                                                    \
  do {                                                                           \
    CUresult r_ = (x);                                                           \
    if (r_ != CUDA_SUCCESS) {                                                    \
      const char *m_ = 0;                                                        \
      cuGetErrorString(r_, &m_);                                                 \
      fprintf(stderr, "%s:%d %s -> %d %s\n", __FILE__, __LINE__, #x, r_, m_);    \
      exit(3);                                                                   \
    }                                                                            \
  } while (0)

static CUfunction g_fn;

static uint32_t f(uint32_t t, uint32_t b, uint32_t e, uint32_t w) {
  return t * 1000003u + b * 31u + e * 7u + w * 13u + 1u;
}

static CUdeviceptr up(const void *p, size_t n) {
  CUdeviceptr d = 0;
  if (!n)
    n = 16;
  CK(cuMemAlloc(&d, n));
  if (p)
    CK(cuMemcpyHtoD(d, p, n));
  else
    CK(cuMemsetD8(d, 0, n));
  return d;
}

static int wait_done(double seconds) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    CUresult r = cuStreamQuery(0);
    if (r == CUDA_SUCCESS)
      return 0;
    if (r != CUDA_ERROR_NOT_READY) {
      const char *m = 0;
      cuGetErrorString(r, &m);
      fprintf(stderr, "kernel failed: %d %s\n", r, m);
      exit(3);
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 > seconds)
      return -1;
  }
}

/* Runs plan p `reps` times with `threads` per CTA; returns failures. */
static int g_private; /* give every shared slot its own region */
static int g_scratch; /* move every shared slot to the scratch area */
static int g_direct;  /* pack with hbm_direct_global */
static int g_gate;    /* mark cluster targets with a release as gated */
/* Cluster streaming at scale: the layout gives every CTA one accumulator
   and one partial region, and an ungated cluster push of a later part's
   accumulator lands there while the consumer still uses the region for
   another task (a plan hazard, not a runtime one: the same plan passes
   with private slot regions or HBM transfers). Reported as XFAIL. */
static int g_hazard;

static int g_pool; /* attn_hbm schedules the instruction pool (docs/pool.md) */

static int run(const char *name, df_plan *p, uint32_t threads, int reps) {
  df_pack_options po;
  memset(&po, 0, sizeof po);
  po.layout.hbm_direct_global = g_direct;
  df_packed *k;
  df_status s = df_pack(p, &po, NULL, &k);
  if (s.code != DF_OK) {
    printf("%s %s: pack failed: %s\n", g_pool ? "FAIL" : "SKIP", name, s.message);
    return g_pool ? 1 : 0;
  }
  df_launch_package *L = &k->launch;
  if (g_private) {
    uint32_t off = 0;
    for (uint32_t i = 0; i < k->slot_count; i++) {
      if (k->slots[i].flags & (DF_SLOT_FLAG_SCRATCH_BACKED | DF_SLOT_FLAG_HBM_DIRECT_GLOBAL))
        continue;
      k->slots[i].shared_offset = off;
      off += (k->slots[i].bytes + 15) & ~15u;
    }
    L->shared_memory_bytes = L->shared_slot_base_offset + off;
  }
  uint32_t scratch_off = 0;
  if (g_scratch) {
    scratch_off = (L->shared_slot_base_offset + 255) & ~255u; /* the arena empties */
    uint32_t end = 0;
    for (uint32_t i = 0; i < k->slot_count; i++) {
      if (k->slots[i].flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL)
        continue;
      k->slots[i].flags |= DF_SLOT_FLAG_SCRATCH_BACKED;
      k->slots[i].reserved = k->slots[i].shared_offset;
      uint32_t e = k->slots[i].shared_offset + k->slots[i].bytes;
      end = e > end ? e : end;
    }
    L->shared_memory_bytes = scratch_off + end;
  }
  if (g_gate)
    for (uint32_t i = 0; i < k->comm_count; i++)
      if (k->comms[i].kind == DF_COMM_CLUSTER_SEND && k->comms[i].flag_index != DF_SENTINEL)
        k->slots[k->comms[i].dst_slot_id].flags |= DF_SLOT_FLAG_CLUSTER_GATED_PUSH;
  uint32_t sm = k->topology.sm_count, cs = k->topology.cluster_size;
  uint32_t words = 0;
  for (uint32_t i = 0; i < k->slot_count; i++)
    words = k->slots[i].bytes / 4 > words ? k->slots[i].bytes / 4 : words;
  uint32_t tasks = p->task_count;
  size_t out_n = (size_t)tasks * words;
  uint32_t *expect = calloc(out_n, 4), *got = malloc(out_n * 4);
  for (uint32_t i = 0; i < p->instr_count; i++) {
    const df_instr *in = &p->instrs[i];
    if (in->op != DF_INSTR_ITER || in->input_count)
      continue;
    for (uint32_t w = 0; w < words; w++)
      expect[in->task * words + w] += f(in->task, in->range_begin, in->range_end, w);
  }
  CUdeviceptr d_instr = up(k->instrs, 32 * k->instr_count);
  CUdeviceptr d_qo = up(k->queue_offsets, 4 * sm), d_ql = up(k->queue_lengths, 4 * sm);
  CUdeviceptr d_slots = up(k->slots, 32 * k->slot_count);
  CUdeviceptr d_comms = up(k->comms, 48 * k->comm_count);
  CUdeviceptr d_bio = up(L->barrier_init_offsets, 4 * sm);
  CUdeviceptr d_bil = up(L->barrier_init_lengths, 4 * sm);
  CUdeviceptr d_bii = up(L->barrier_init_indices, 4 * L->barrier_init_count);
  CUdeviceptr d_args = up(k->args, 64 * k->arg_count);
  CUdeviceptr d_out = up(NULL, out_n * 4);
  df_abi_tensor_arg ta;
  memset(&ta, 0, sizeof ta);
  ta.data_ptr = d_out;
  ta.flags = DF_TENSOR_ARG_RAW_POINTER;
  CUdeviceptr d_tensors = up(&ta, sizeof ta);
  CUdeviceptr d_in = up(k->input_slots, 4 * k->input_slot_count);
  CUdeviceptr d_tc = up(k->task_coords, 4 * k->task_coord_count);
  CUdeviceptr d_staging = up(NULL, L->global_staging_bytes);
  CUdeviceptr d_flags = up(NULL, L->flags_bytes);
  uint32_t base = L->shared_slot_base_offset, bc = L->barrier_count,
           ack = L->cluster_ack_count, block = p->block_size, scratch = scratch_off;
  CUdeviceptr d_progress = 0; /* no watchdog: the kernel skips progress reports */
  CUdeviceptr d_clear = 0;    /* flags reset by the memset below, none to clear */
  uint32_t clear_words = 0;
  void *params[] = {&d_instr, &d_qo,   &d_ql,      &d_slots,   &d_comms, &d_bio, &d_bil,
                    &d_bii,   &d_args, &d_tensors, &d_in,      &d_tc,    &d_staging,
                    &d_flags, &base,   &bc,        &ack,       &cs,      &block, &scratch,
                    &d_progress, &d_clear, &clear_words};
  uint32_t smem = L->shared_memory_bytes;
  CK(cuFuncSetAttribute(g_fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                        smem > 48 * 1024 ? smem : 48 * 1024));
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attr.value.clusterDim.x = cs;
  attr.value.clusterDim.y = 1;
  attr.value.clusterDim.z = 1;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = sm;
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = threads;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = smem;
  cfg.attrs = &attr;
  cfg.numAttrs = cs > 1 ? 1 : 0;
  int fails = 0;
  for (int r = 0; r < reps; r++) {
    CK(cuMemsetD32(d_out, 0xDEADBEEF, out_n));
    if (L->needs_flag_reset && L->flags_bytes)
      CK(cuMemsetD8(d_flags, 0, L->flags_bytes));
    CK(cuLaunchKernelEx(&cfg, g_fn, params, NULL));
    if (wait_done(20.0)) {
      printf("TIMEOUT %s rep %d (threads %u)\n", name, r, threads);
      fflush(stdout);
      exit(2);
    }
    CK(cuMemcpyDtoH(got, d_out, out_n * 4));
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < out_n; i++)
      if (got[i] != expect[i] && !bad++)
        first = i;
    if (bad) {
      fails++;
      if (fails <= 3)
        printf("  %s rep %d: %zu/%zu words wrong, first [%zu] got %08x want %08x\n", name, r,
               bad, out_n, first, got[first], expect[first]);
    }
  }
  /* a pool's counter: every CTA claimed until one claim came back empty */
  df_pool_desc pool;
  if (df_packed_pool_find(k, &pool).code == DF_OK && pool.present) {
    uint32_t claims = 0;
    CK(cuMemcpyDtoH(&claims, d_flags + 4 * pool.counter, 4));
    if (claims != pool.items + sm) {
      fails++;
      printf("  %s: pool counter %u after the last launch, want %u items + %u CTAs\n", name,
             claims, pool.items, sm);
    }
  }
  const char *verdict = fails ? (g_hazard ? "XFAIL" : "FAIL") : "PASS";
  printf("%s %s: sm %u cluster %u threads %u instrs %u comms %u barriers %u acks %u "
         "smem %u reps %d fails %d\n",
         verdict, name, sm, cs, threads, k->instr_count, k->comm_count, bc,
         ack, smem, reps, fails);
  fflush(stdout);
  CUdeviceptr all[] = {d_instr, d_qo,      d_ql, d_slots, d_comms,   d_bio,  d_bil, d_bii,
                       d_args,  d_tensors, d_in, d_tc,    d_staging, d_flags, d_out};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    cuMemFree(all[i]);
  free(expect);
  free(got);
  df_packed_destroy(k);
  return g_hazard ? 0 : fails;
}

/* Turn every HBM receive of the first HBM transfer into an ISSUE at the
   first instruction of the consumer's queue plus a WAIT at the target. */
static void issue_wait(df_plan *p) {
  uint32_t r = hand_find_comm(p, DF_COMM_HBM_RECV);
  df_comm key = p->comms[r];
  uint32_t n = p->comm_count;
  df_comm *out = malloc(sizeof(df_comm) * 2 * n);
  uint32_t m = 0;
  for (uint32_t i = 0; i < n; i++) {
    df_comm c = p->comms[i];
    if (c.kind == DF_COMM_HBM_RECV && c.src_instr == key.src_instr &&
        c.dst_instr == key.dst_instr && c.dst_slot == key.dst_slot) {
      df_comm is = c;
      is.kind = DF_COMM_HBM_RECV_ISSUE;
      is.dispatch_instr = p->queue_ids[p->queue_offsets[c.consumer_sm]];
      out[m++] = is;
      c.kind = DF_COMM_HBM_RECV_WAIT;
    }
    out[m++] = c;
  }
  hand_set_comms(p, out, m);
  free(out);
}

static df_plan *attn(uint32_t sm, uint32_t cs, const uint32_t *kv, uint32_t tasks,
                     uint32_t block, df_policy pol, df_reduce_strategy st, bool exit_) {
  return seed_schedule_attention(sm, cs, kv, tasks, block, pol, st, exit_);
}

static df_plan *attn_hbm(uint32_t sm, uint32_t cs, const uint32_t *kv, uint32_t tasks,
                         uint32_t block, df_policy pol, df_reduce_strategy st) {
  df_program *prog = seed_attention_program();
  df_schedule_options o = df_schedule_options_default();
  o.topology.sm_count = sm;
  o.topology.cluster_size = cs;
  o.block_size = block;
  o.range_count = 1;
  o.ranges[0].axis = "kv";
  o.ranges[0].count = tasks;
  o.ranges[0].lengths = kv;
  o.extent_count = 1;
  o.extents[0] = tasks;
  o.policy = pol;
  o.strategy = st;
  o.force_hbm_comms = true;
  o.pool = g_pool;
  o.skip_unary_reduce = g_pool; /* items of an ITER and its FINALIZE too */
  o.reduce_fan_in = g_pool ? 4 : 0;
  df_plan *plan;
  df_status s = df_schedule(prog, &o, &plan);
  if (s.code != DF_OK) {
    fprintf(stderr, "schedule: %s\n", s.message);
    exit(3);
  }
  df_program_destroy(prog);
  return plan;
}

int main(int argc, char **argv) {
  const char *ptx_path = argc > 1 ? argv[1] : "kernel.ptx";
  FILE *fp = fopen(ptx_path, "rb");
  if (!fp) {
    perror(ptx_path);
    return 3;
  }
  fseek(fp, 0, SEEK_END);
  long len = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *ptx = calloc(len + 1, 1);
  if (fread(ptx, 1, len, fp) != (size_t)len)
    return 3;
  fclose(fp);
  CK(cuInit(0));
  CUdevice dev;
  CK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  int sms;
  CK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  char log[8192] = "";
  CUjit_option jo[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *jv[2] = {log, (void *)(uintptr_t)sizeof log};
  CUmodule mod;
  CUresult lr = cuModuleLoadDataEx(&mod, ptx, 2, jo, jv);
  if (lr != CUDA_SUCCESS) {
    fprintf(stderr, "module load failed %d: %s\n", lr, log);
    return 3;
  }
  CK(cuModuleGetFunction(&g_fn, mod, "df_persistent_kernel"));
  printf("device SMs %d\n", sms);

  int fails = 0;
  const uint32_t T[3] = {128, 32, 256};
  for (int ti = 0; ti < 3; ti++) {
    uint32_t th = T[ti];
    df_plan *p;
    p = seed_make_plan();
    fails += run("seed", p, th, 20);
    df_plan_destroy(p);

    p = seed_make_plan();
    hand_append_release(p);
    fails += run("seed+release", p, th, 20);
    df_plan_destroy(p);

    p = seed_make_plan();
    hand_segment_first_hbm(p, 3, 16);
    fails += run("seed+segments", p, th, 20);
    df_plan_destroy(p);

    p = seed_make_plan();
    issue_wait(p);
    fails += run("seed+issue/wait", p, th, 20);
    df_plan_destroy(p);

    p = seed_make_plan();
    hand_segment_first_hbm(p, 3, 16);
    issue_wait(p);
    fails += run("seed+segments+issue/wait", p, th, 20);
    df_plan_destroy(p);

    p = seed_make_plan();
    hand_append_release(p);
    p->comms[p->comm_count - 1].dispatch_instr = p->queue_ids[p->queue_offsets[0]];
    g_gate = 1;
    fails += run("seed+gated(release at I0)", p, th, 20);
    g_gate = 0;
    df_plan_destroy(p);

    g_scratch = 1;
    p = seed_make_plan();
    hand_segment_first_hbm(p, 3, 16);
    fails += run("seed+segments scratch", p, th, 20);
    df_plan_destroy(p);
    g_scratch = 0;

    static const uint32_t kv512[1] = {512};
    p = attn(4, 4, kv512, 1, 128, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_ALL_AT_ONCE, true);
    fails += run("cluster4x3recv", p, th, 20);
    df_plan_destroy(p);

    static const uint32_t kv2[2] = {256, 256};
    p = attn(2, 1, kv2, 2, 128, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE, true);
    fails += run("hbm-only", p, th, 20);
    df_plan_destroy(p);

    g_direct = 1;
    p = attn(2, 1, kv2, 2, 128, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE, true);
    fails += run("hbm-only direct-global", p, th, 20);
    df_plan_destroy(p);
    g_direct = 0;

    p = attn(2, 2, kv2, 2, 128, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE, true);
    fails += run("2x2-two-recvs", p, th, 20);
    df_plan_destroy(p);

    static const uint32_t kv8k[2] = {8192, 8192};
    p = attn(4, 2, kv8k, 2, 64, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING, false);
    fails += run("streaming", p, th, 20);
    df_plan_destroy(p);

  }
  /* Full-size: every SM, random lengths. */
  uint32_t nsm = (uint32_t)sms & ~3u;
  static uint32_t kvr[512];
  uint32_t seed = 12345;
  for (int i = 0; i < 512; i++) {
    seed = seed * 1103515245u + 12345u;
    kvr[i] = 1 + (seed >> 8) % 3000;
  }
  df_plan *p;
  p = attn(nsm, 2, kvr, 300, 128, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE, true);
  fails += run("big-rr-c2", p, 128, 10);
  df_plan_destroy(p);
  p = attn(nsm, 4, kvr, 300, 128, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_ALL_AT_ONCE, true);
  fails += run("big-cl-c4", p, 128, 10);
  df_plan_destroy(p);
  g_hazard = 1;
  p = attn(nsm, 4, kvr, 300, 64, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING, true);
  fails += run("big-stream-c4", p, 128, 10);
  df_plan_destroy(p);
  p = attn(nsm, 2, kvr, 300, 64, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING, true);
  fails += run("big-stream-c2", p, 64, 10);
  df_plan_destroy(p);
  g_hazard = 0;
  p = attn(nsm, 1, kvr, 300, 128, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE, true);
  fails += run("big-rr-c1", p, 128, 10);
  df_plan_destroy(p);
  g_private = 1;
  p = attn(nsm, 4, kvr, 300, 64, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING, true);
  fails += run("big-stream-c4-private-slots", p, 128, 10);
  df_plan_destroy(p);
  p = attn(nsm, 2, kvr, 300, 64, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING, true);
  fails += run("big-stream-c2-private-slots", p, 64, 10);
  df_plan_destroy(p);
  g_private = 0;
  p = attn_hbm(nsm, 4, kvr, 300, 64, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING);
  fails += run("big-stream-c4-forcehbm", p, 128, 10);
  df_plan_destroy(p);
  p = attn(nsm, 1, kvr, 300, 64, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING, true);
  fails += run("big-stream-c1", p, 128, 10);
  df_plan_destroy(p);
  p = attn_hbm(nsm, 2, kvr, 300, 128, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE);
  fails += run("big-rr-c2-forcehbm", p, 128, 10);
  df_plan_destroy(p);
  g_scratch = 1;
  p = attn(nsm, 4, kvr, 300, 128, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_ALL_AT_ONCE, true);
  fails += run("big-cl-c4-scratch", p, 128, 10);
  df_plan_destroy(p);
  g_scratch = 0;
  g_direct = 1;
  p = attn_hbm(nsm, 2, kvr, 300, 128, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE);
  fails += run("big-rr-forcehbm-direct", p, 128, 10);
  df_plan_destroy(p);
  g_direct = 0;
  p = attn(128, 8, kvr, 300, 128, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_ALL_AT_ONCE, true);
  fails += run("big-cl-c8", p, 256, 10);
  df_plan_destroy(p);
  /* the instruction pool: CTAs claim partials, reduce trees and
     finalizes at run time; pooled receives wait on direct-global flags */
  g_pool = 1;
  p = attn_hbm(nsm, 2, kvr, 300, 128, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE);
  fails += run("big-pool-c2", p, 128, 10);
  df_plan_destroy(p);
  p = attn_hbm(nsm, 1, kvr, 300, 64, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE);
  fails += run("big-pool-c1-small-blocks", p, 256, 10);
  df_plan_destroy(p);
  g_pool = 0;
  printf("TOTAL FAILS %d\n", fails);
  return fails ? 1 : 0;
}
