/* bench/fusion: what df_plan_fuse costs a run-time re-plan and what the
   structural dispatch-cost model says it saves (docs/fusion.md), unfused
   and fused side by side for the seed plan and decode-sized plans. Prints
   one table; not a test. Usage: bench_fusion [repeats]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_program.h"
#include "bench_util.h"
#include "df/cost.h"
#include "df/fuse.h"
#include "df/plan.h"

static void die(df_status s, const char *what) { bench_check("bench_fusion", s, what); }

static df_cost cost_of(const df_plan *p, double r) {
  df_pack_options po;
  memset(&po, 0, sizeof po);
  po.skip_fingerprint = true;
  po.layout.per_cta_shared = true;
  df_packed *k;
  die(df_pack(p, &po, NULL, &k), "pack");
  df_cost_params prm = df_cost_params_default();
  prm.byte_cycles = r;
  df_cost c;
  die(df_plan_cost(k, &prm, NULL, &c), "cost");
  df_packed_destroy(k);
  return c;
}

static void row(const char *name, const df_program *prog, const df_schedule_options *o,
                int repeats) {
  double *tf = malloc(sizeof(double) * repeats), *ts = malloc(sizeof(double) * repeats);
  df_plan *plan = NULL;
  df_fuse_report rep;
  for (int i = 0; i < repeats; i++) {
    df_plan_destroy(plan);
    double t0 = bench_wall_us();
    die(df_schedule(prog, o, &plan), "schedule");
    double t1 = bench_wall_us();
    die(df_plan_fuse(plan, NULL, &rep), "fuse");
    double t2 = bench_wall_us();
    ts[i] = t1 - t0;
    tf[i] = t2 - t1;
  }
  double fuse_us = bench_median_upper(tf, (size_t)repeats);
  double sched_us = bench_median_upper(ts, (size_t)repeats);
  const double rs[3] = {0.25, 0.0625, 0.03125};
  double ratio[3], cu = 0, cf = 0, pu = 0, pf = 0;
  for (int j = 0; j < 3; j++) {
    df_cost f = cost_of(plan, rs[j]);
    df_plan_unfuse(plan);
    df_cost u = cost_of(plan, rs[j]);
    die(df_plan_fuse(plan, NULL, NULL), "fuse");
    ratio[j] = u.total.cycles / f.total.cycles;
    if (j == 1) {
      cu = u.total.cycles;
      cf = f.total.cycles;
      pu = u.critical_path;
      pf = f.critical_path;
    }
    df_cost_free(&u, NULL);
    df_cost_free(&f, NULL);
  }
  printf("| %-36s | %6u | %6u | %8.1f | %8.1f | %6.1f | %10.0f | %10.0f | %5.2f | %5.2f | "
         "%5.2f | %9.0f | %9.0f |\n",
         name, rep.dispatches_before, rep.dispatches_after, sched_us, fuse_us,
         fuse_us * 1000.0 / plan->instr_count, cu, cf, ratio[0], ratio[1], ratio[2], pu, pf);
  df_plan_destroy(plan);
  free(tf);
  free(ts);
}

static void lengths(uint32_t *out, uint32_t n, uint32_t lo, uint32_t hi, uint32_t seed) {
  uint32_t x = seed;
  for (uint32_t i = 0; i < n; i++)
    out[i] = lo + bench_xorshift(&x) % (hi - lo + 1);
}

int main(int argc, char **argv) {
  int repeats = argc > 1 ? atoi(argv[1]) : 21;
  if (repeats < 1)
    repeats = 1;
  df_program *prog = bench_attention_program();
  printf("fusion: dispatches unfused -> fused; schedule and df_plan_fuse times (median of %d);"
         " model total dispatch cycles (F 40, R 0.0625) unfused and fused; unfused/fused at "
         "R 0.25, 0.0625, 0.03125; critical path unfused and fused (R 0.0625)\n\n",
         repeats);
  printf("| %-36s | %6s | %6s | %8s | %8s | %6s | %10s | %10s | %5s | %5s | %5s | %9s | %9s |\n",
         "plan", "disp", "fused", "sched us", "fuse us", "ns/in", "cyc unfus", "cyc fused",
         "R.25", "R.0625", "R.031", "path unf", "path fus");
  printf("|--------------------------------------|--------|--------|----------|----------|"
         "--------|------------|------------|-------|-------|-------|-----------|-----------|\n");
  static const uint32_t seed_kv[2] = {384, 256};
  df_schedule_options o = bench_kv_options(4, 2, 128, seed_kv, 2, DF_POLICY_ROUND_ROBIN,
                                  DF_REDUCE_ALL_AT_ONCE);
  o.topology.sm_count = 4;
  row("seed make_plan (4 SMs)", prog, &o, repeats);
  uint32_t *kv = malloc(sizeof(uint32_t) * 4096);
  lengths(kv, 512, 1, 256, 99);
  o = bench_kv_options(132, 2, 256, kv, 512, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE);
  row("decode 512 tasks, kv 1-256 (1 block)", prog, &o, repeats);
  lengths(kv, 4096, 1, 256, 98);
  o = bench_kv_options(132, 2, 256, kv, 4096, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE);
  row("decode 4096 tasks, kv 1-256", prog, &o, repeats > 5 ? 5 : repeats);
  lengths(kv, 512, 16, 1024, 97);
  o = bench_kv_options(132, 2, 256, kv, 512, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE);
  row("decode 512 tasks, kv 16-1024 rr", prog, &o, repeats);
  o = bench_kv_options(132, 2, 256, kv, 512, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING);
  row("decode 512 tasks, kv 16-1024 stream", prog, &o, repeats);
  lengths(kv, 512, 1024, 32768, 12345);
  o = bench_kv_options(132, 2, 256, kv, 512, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE);
  row("decode 512 tasks, kv 1K-32K rr", prog, &o, repeats > 5 ? 5 : repeats);
  free(kv);
  df_program_destroy(prog);
  return 0;
}
