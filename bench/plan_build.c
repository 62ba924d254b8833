/* bench/plan_build: time schedule -> barriers -> layout -> pack (with
   launch package and fingerprint) for the seed plans and decode-sized
   plans, and show how the cost grows with the instruction count.
   Prints one table; not a test. Usage: bench_plan_build [repeats]. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_program.h"
#include "bench_util.h"
#include "df/plan.h"

static void die(df_status s, const char *what) { bench_check("bench_plan_build", s, what); }

typedef struct result {
  uint32_t instrs;
  double schedule_us, pack_us, fingerprint_us;
} result;

/* Median over `repeats` runs of schedule and of pack. */
static result run(const df_program *prog, const df_schedule_options *o, int repeats) {
  double *ts = malloc(sizeof(double) * repeats), *tp = malloc(sizeof(double) * repeats);
  double *tf = malloc(sizeof(double) * repeats);
  result r = {0, 0, 0, 0};
  /* A re-plan does not need the fingerprint; it is timed on its own. */
  df_pack_options po;
  memset(&po, 0, sizeof po);
  po.skip_fingerprint = true;
  for (int i = 0; i < repeats; i++) {
    double t0 = bench_wall_us();
    df_plan *plan;
    die(df_schedule(prog, o, &plan), "schedule");
    double t1 = bench_wall_us();
    df_packed *k;
    die(df_pack(plan, &po, NULL, &k), "pack");
    double t2 = bench_wall_us();
    char hex[65];
    die(df_plan_fingerprint(plan, hex), "fingerprint");
    double t3 = bench_wall_us();
    ts[i] = t1 - t0;
    tp[i] = t2 - t1;
    tf[i] = t3 - t2;
    r.instrs = plan->instr_count;
    df_packed_destroy(k);
    df_plan_destroy(plan);
  }
  r.schedule_us = bench_median_upper(ts, (size_t)repeats);
  r.pack_us = bench_median_upper(tp, (size_t)repeats);
  r.fingerprint_us = bench_median_upper(tf, (size_t)repeats);
  free(ts);
  free(tp);
  free(tf);
  return r;
}

static void row(const char *name, const df_program *prog, const df_schedule_options *o,
                int repeats) {
  result r = run(prog, o, repeats);
  double total = r.schedule_us + r.pack_us;
  printf("| %-46s | %8u | %10.1f | %10.1f | %10.1f | %8.1f | %8.1f |\n", name, r.instrs,
         r.schedule_us, r.pack_us, total, total * 1000.0 / r.instrs,
         r.fingerprint_us * 1000.0 / r.instrs);
}

/* Deterministic lengths in [lo, hi] (xorshift), rounded to 16. */
static void lengths(uint32_t *out, uint32_t n, uint32_t lo, uint32_t hi, uint32_t seed) {
  uint32_t x = seed;
  for (uint32_t i = 0; i < n; i++) {
    out[i] = (lo + bench_xorshift(&x) % (hi - lo + 1)) / 16 * 16;
    if (out[i] == 0)
      out[i] = 16;
  }
}

int main(int argc, char **argv) {
  int repeats = argc > 1 ? atoi(argv[1]) : 21;
  if (repeats < 1)
    repeats = 1;
  df_program *prog = bench_attention_program();
  /* Steady state of a runtime that re-plans every decode step: keep freed
     memory in the heap instead of returning it to the kernel each call. */
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  printf("plan build: median of %d runs; total = schedule + pack (barriers, layout, "
         "records, launch package); the fingerprint (hash of the plan, not needed to "
         "re-plan) is timed separately\n\n",
         repeats);
  printf("| %-46s | %8s | %10s | %10s | %10s | %8s | %8s |\n", "plan", "instrs",
         "sched us", "pack us", "total us", "ns/instr", "fp ns/in");
  printf("|%s|%s|%s|%s|%s|%s|%s|\n", "------------------------------------------------",
         "----------", "------------", "------------", "------------", "----------",
         "----------");

  static const uint32_t seed_kv[2] = {384, 256};
  df_schedule_options o =
      bench_kv_options(4, 2, 128, seed_kv, 2, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE);
  row("seed make_plan (4 SMs, kv 384,256)", prog, &o, repeats);

  uint32_t *kv = malloc(sizeof(uint32_t) * 4096);
  lengths(kv, 512, 1024, 32768, 12345);
  o = bench_kv_options(132, 2, 256, kv, 512, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE);
  row("decode 64x8, 1K-32K, rr/all_at_once", prog, &o, repeats);
  o = bench_kv_options(132, 2, 256, kv, 512, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING);
  row("decode 64x8, 1K-32K, cluster_local/streaming", prog, &o, repeats);

  /* Growth: 4096 tasks, the maximum length doubling up to 128K. */
  for (uint32_t hi = 16384; hi <= 131072; hi *= 2) {
    lengths(kv, 4096, 256, hi, 777);
    char name[64];
    snprintf(name, sizeof name, "4096 tasks, 256-%uK, cluster_local/streaming", hi / 1024);
    o = bench_kv_options(132, 2, 256, kv, 4096, DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING);
    row(name, prog, &o, repeats > 5 ? 5 : repeats);
  }
  for (uint32_t hi = 16384; hi <= 131072; hi *= 2) {
    lengths(kv, 4096, 256, hi, 777);
    char name[64];
    snprintf(name, sizeof name, "4096 tasks, 256-%uK, rr/all_at_once", hi / 1024);
    o = bench_kv_options(132, 2, 256, kv, 4096, DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE);
    row(name, prog, &o, repeats > 5 ? 5 : repeats);
  }
  free(kv);
  df_program_destroy(prog);
  return 0;
}
