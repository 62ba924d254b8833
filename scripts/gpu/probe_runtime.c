/* libdfrt on a real GPU with the probe kernel (probe_kernel.cu): launch
   configuration, parameters, clusters (2 and a non-portable 16), flag
   reset, staging copy-back, a >48 KiB dynamic shared memory plan, TMA
   descriptors, re-planning, and the driver-side errors (JIT log, cluster
   size over the kernel's maximum). Prints one line per check; exit status
   = number of failed checks (2 for a setup failure).
   usage: probe_runtime PROBE.ptx */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "df/runtime.h"
#include "seed_plans.h"

enum { WORDS = 32, CTAS = 64, OUT_BYTES = CTAS * WORDS * 4 + 128 };

static int failures;

static void check(int ok, const char *what, unsigned long long got, unsigned long long want) {
  if (ok)
    printf("ok: %s\n", what);
  else
    printf("FAIL: %s (got %llu, want %llu)\n", what, got, want);
  failures += !ok;
}
#define EQ(what, got, want) check((unsigned long long)(got) == (unsigned long long)(want), what, (unsigned long long)(got), (unsigned long long)(want))

static void must(df_status s, const char *what) {
  if (s.code != DF_OK) {
    printf("SETUP FAILED at %s: %s\n", what, s.message);
    exit(2);
  }
}

static df_rt_plan *pack(df_rt *rt, df_plan *plan, uint32_t block, uint32_t shared_override) {
  df_pack_options po;
  memset(&po, 0, sizeof po);
  df_packed *k;
  must(df_pack(plan, &po, NULL, &k), "pack");
  df_plan_destroy(plan);
  if (shared_override)
    k->launch.shared_memory_bytes = shared_override;
  df_rt_plan *p;
  must(df_rt_plan_from_packed(rt, k, NULL, block, &p), "plan");
  return p;
}

static df_rt_plan *attention(df_rt *rt, uint32_t sm, uint32_t cs, df_policy policy,
                             uint32_t shared_override) {
  static const uint32_t kv[2] = {256, 256};
  return pack(rt, seed_schedule_attention(sm, cs, kv, 2, 128, policy, DF_REDUCE_ALL_AT_ONCE, true),
              128, shared_override);
}

typedef struct probe {
  df_rt *rt;
  df_rt_device *dev;
  df_rt_stream *stream;
  df_rt_module *mod, *tma_mod;
  CUdeviceptr out, b;
  uint32_t host[OUT_BYTES / 4];
  uint16_t tile[64];
} probe;

static void run_and_read(probe *p, df_rt_executable *e, int launches) {
  for (int i = 0; i < launches; i++)
    must(df_rt_executable_launch(e, p->stream), "launch");
  must(df_rt_stream_synchronize(p->dev, p->stream), "synchronize");
  must(df_rt_memcpy_dtoh(p->dev, p->stream, p->host, p->out, OUT_BYTES), "read reports");
}

/* Every CTA's report against the plan. */
static void check_reports(probe *p, const df_rt_plan *plan, const char *name, uint32_t dsmem) {
  const df_packed *k = df_rt_plan_packed(plan);
  char what[160];
  uint32_t sm = k->topology.sm_count, cs = k->topology.cluster_size;
  int bad = 0;
  for (uint32_t c = 0; c < sm && c < CTAS; c++) {
    const uint32_t *r = p->host + c * WORDS;
    bad += r[21] != 0x600d || r[0] != c || r[1] != c % cs || r[2] != cs || r[15] != sm;
    bad += r[11] != k->queue_offsets[c] || r[12] != k->queue_lengths[c];
    bad += r[16] != k->launch.barrier_init_lengths[c] || r[20] != 0;
    bad += r[5] != k->launch.shared_slot_base_offset || r[6] != k->launch.barrier_count ||
           r[7] != k->launch.cluster_ack_count || r[8] != cs || r[9] != 128 || r[10] != 0;
    bad += r[3] != dsmem || r[4] != 128;
    if (c < 4 && k->launch.needs_flag_reset)
      bad += r[13] != 0;
    if (k->queue_lengths[c])
      bad += r[14] != k->instrs[k->queue_offsets[c]].opcode;
  }
  snprintf(what, sizeof what, "%s: %u CTA reports (cluster %u, dynamic shared %u)", name, sm, cs,
           dsmem);
  EQ(what, bad, 0);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: probe_runtime PROBE.ptx\n");
    return 2;
  }
  probe p;
  memset(&p, 0, sizeof p);
  must(df_rt_create(NULL, &p.rt), "driver");
  int version;
  must(df_rt_driver_version(p.rt, &version), "driver version");
  must(df_rt_device_open(p.rt, 0, &p.dev), "device");
  const df_rt_device_info *di = df_rt_device_get_info(p.dev);
  printf("device: %s sm_%d%d, %d SMs, opt-in shared %d, cluster launch %d, driver %d\n", di->name,
         di->cc_major, di->cc_minor, di->sm_count, di->max_shared_per_block_optin,
         di->cluster_launch, version);
  must(df_rt_stream_create(p.dev, &p.stream), "stream");
  static char log[16384];
  df_rt_module_options mo = {NULL, log, sizeof log};
  must(df_rt_module_load_file(p.dev, argv[1], &mo, &p.mod), "module");
  df_rt_module_options to = {"df_probe_tma", log, sizeof log};
  must(df_rt_module_load_file(p.dev, argv[1], &to, &p.tma_mod), "module df_probe_tma");
  must(df_rt_mem_alloc(p.dev, OUT_BYTES, &p.out), "out");
  must(df_rt_mem_alloc(p.dev, 128, &p.b), "B");
  for (int i = 0; i < 64; i++)
    p.tile[i] = (uint16_t)(0x3c00 + i); /* float16 1.0 + i ulp */
  must(df_rt_memcpy_htod(p.dev, p.stream, p.b, p.tile, sizeof p.tile), "B upload");

  /* 1. The seed plan (4 SMs, cluster 2, HBM comms) with a TMA descriptor on B. */
  df_rt_plan *seed = pack(p.rt, seed_make_plan(), 128, 0);
  df_rt_tma_spec spec;
  memset(&spec, 0, sizeof spec);
  strcpy(spec.name, "B_desc");
  strcpy(spec.tensor_name, "B");
  spec.dtype = CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  spec.rank = 2;
  spec.global_dim[0] = 16;
  spec.global_dim[1] = 4;
  spec.global_stride[0] = 2;
  spec.global_stride[1] = 32;
  spec.box_dim[0] = 16;
  spec.box_dim[1] = 4;
  spec.element_strides[0] = spec.element_strides[1] = 1;
  spec.l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
  const char *names[2] = {"out", "B"};
  df_rt_executable_options eo;
  memset(&eo, 0, sizeof eo);
  eo.tma_count = 1;
  eo.tma_specs = &spec;
  eo.tensor_names = names;
  eo.tensor_name_count = 2;
  eo.copy_back_staging = true;
  eo.stream = p.stream;
  df_rt_executable *e;
  must(df_rt_executable_create(p.tma_mod, seed, &eo, &e), "seed executable");
  df_rt_tensor t[2];
  t[0] = df_rt_tensor_raw(p.out);
  const int64_t shape[2] = {4, 16};
  must(df_rt_tensor_contiguous(p.b, DF_DTYPE_FLOAT16, 2, shape, 0, &t[1]), "B tensor");
  must(df_rt_executable_bind_tensors(e, p.stream, t, 2), "bind");
  run_and_read(&p, e, 1);
  check_reports(&p, seed, "seed plan, first launch", 368);
  run_and_read(&p, e, 3); /* the flags the kernel set must be reset each time */
  check_reports(&p, seed, "seed plan, after 4 launches (flags reset)", 368);
  EQ("tensor arg 1 ndim", p.host[17], 2);
  EQ("tensor arg 1 dtype bits", p.host[18], 16);
  EQ("slot 0 bytes through the slots pointer", p.host[19], 48);
  EQ("TMA tile matches B", memcmp((uint8_t *)p.host + CTAS * WORDS * 4, p.tile, 128), 0);
  const uint8_t *staging;
  size_t staging_len;
  must(df_rt_executable_staging(e, &staging, &staging_len), "staging");
  EQ("staging copy-back size", staging_len, 336);
  EQ("staging copy-back bytes", staging_len >= 4 && staging[0] == 1 && staging[1] == 2 &&
                                    staging[2] == 3 && staging[3] == 4, 1);

  /* 2. Re-planned for other lengths, same module. */
  df_program *prog = seed_attention_program();
  df_schedule_options so = df_schedule_options_default();
  static const uint32_t kv[2] = {300, 200};
  so.topology.sm_count = 8;
  so.topology.cluster_size = 2;
  so.block_size = 128;
  so.range_count = 1;
  so.ranges[0].axis = "kv";
  so.ranges[0].count = 2;
  so.ranges[0].lengths = kv;
  df_rt_plan *re;
  must(df_rt_plan_from_program(p.rt, prog, &so, NULL, &re), "re-plan");
  df_program_destroy(prog);
  must(df_rt_executable_set_plan(e, re, p.stream), "set_plan");
  memset(p.host, 0, sizeof p.host);
  must(df_rt_memcpy_htod(p.dev, p.stream, p.out, p.host, OUT_BYTES), "clear");
  run_and_read(&p, e, 2);
  check_reports(&p, re, "re-planned 8-SM plan", df_rt_plan_packed(re)->launch.shared_memory_bytes);
  df_rt_executable_destroy(e);

  /* 3. A non-portable cluster of 16 (needs the opt-in attribute). */
  df_rt_plan *c16 = attention(p.rt, 16, 16, DF_POLICY_CLUSTER_LOCAL, 0);
  memset(&eo, 0, sizeof eo);
  eo.stream = p.stream;
  df_status s = df_rt_executable_create(p.mod, c16, &eo, &e);
  if (s.code == DF_OK) {
    must(df_rt_executable_bind_tensors(e, p.stream, t, 2), "bind");
    run_and_read(&p, e, 1);
    check_reports(&p, c16, "cluster 16",
                  df_rt_plan_packed(c16)->launch.shared_memory_bytes);
    df_rt_executable_destroy(e);
  } else {
    printf("FAIL: cluster 16 executable: %s\n", s.message);
    failures++;
  }

  /* 4. More than 48 KiB of dynamic shared memory (set as the maximum). */
  df_rt_plan *big = attention(p.rt, 4, 2, DF_POLICY_ROUND_ROBIN, 200 * 1024);
  must(df_rt_executable_create(p.mod, big, &eo, &e), "200 KiB executable");
  must(df_rt_executable_bind_tensors(e, p.stream, t, 2), "bind");
  run_and_read(&p, e, 1);
  check_reports(&p, big, "200 KiB dynamic shared memory", 200 * 1024);
  df_rt_executable_destroy(e);

  /* 5. Errors from the real driver. */
  df_rt_plan *huge = attention(p.rt, 4, 2, DF_POLICY_ROUND_ROBIN,
                               (uint32_t)di->max_shared_per_block_optin + 1);
  s = df_rt_executable_create(p.mod, huge, &eo, &e);
  EQ("shared bytes over the device limit refused",
     s.code == DF_EUNSUPPORTED && strstr(s.message, "over device 0's limit"), 1);
  printf("   %s\n", s.message);
  df_rt_plan *c32 = attention(p.rt, 32, 32, DF_POLICY_CLUSTER_LOCAL, 0);
  s = df_rt_executable_create(p.mod, c32, &eo, &e);
  EQ("cluster 32 refused against the kernel's maximum",
     s.code != DF_OK && strstr(s.message, "maximum cluster size"), 1);
  printf("   %s\n", s.message);
  const char broken[] = ".version 8.7\n.target sm_90a\n.address_size 64\n"
                        ".visible .entry df_persistent_kernel() { mov.u32 %r1, 1; ret; }\n";
  df_rt_module *m;
  s = df_rt_module_load(p.dev, broken, sizeof broken - 1, &mo, &m);
  EQ("broken PTX returns the JIT log", s.code != DF_OK && strstr(s.message, "JIT log:") && log[0], 1);
  printf("   %s\n", s.message);

  df_rt_plan_destroy(seed);
  df_rt_plan_destroy(re);
  df_rt_plan_destroy(c16);
  df_rt_plan_destroy(big);
  df_rt_plan_destroy(huge);
  df_rt_plan_destroy(c32);
  df_rt_mem_free(p.dev, p.out);
  df_rt_mem_free(p.dev, p.b);
  df_rt_module_unload(p.mod);
  df_rt_module_unload(p.tma_mod);
  df_rt_stream_destroy(p.stream);
  df_rt_device_close(p.dev);
  df_rt_destroy(p.rt);
  printf("probe: %d failure%s\n", failures, failures == 1 ? "" : "s");
  return failures;
}
