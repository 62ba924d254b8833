/* bench/host_backend: what a CPU dry run of a full-chip plan costs on the
   host backend. Runs decode-step plans (132 SMs, cluster 2, 64 x 8 tasks,
   lengths 1K-32K, block 256) with no-op handlers, so the time is the
   backend's own, and prints instructions per second and the overhead per
   comm (from the same tasks scheduled with and without their reduce
   comms). Not a test. Usage: bench_host_backend [repeats]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_program.h"
#include "bench_util.h"
#include "df/host_backend.h"
#include "df/plan.h"

static void die(df_status s, const char *what) { bench_check("bench_host_backend", s, what); }

static void noop(const df_ctx *ctx) { (void)ctx; }

typedef struct measured {
  uint32_t instrs, comms, shared;
  double us;
} measured;

typedef struct config {
  const char *name;
  df_policy pol;
  df_reduce_strategy strat;
  bool force_hbm;
  uint32_t tasks, max_len;
} config;

static measured run(const df_program *prog, const config *c, int repeats) {
  uint32_t kv[512], x = 12345;
  for (int i = 0; i < 512; i++)
    kv[i] = (256 + bench_xorshift(&x) % (c->max_len - 256 + 1)) / 16 * 16;
  df_schedule_options o = bench_kv_options(132, 2, 256, kv, c->tasks, c->pol, c->strat);
  o.force_hbm_comms = c->force_hbm;
  df_plan *plan;
  die(df_schedule(prog, &o, &plan), "schedule");
  df_packed *k;
  die(df_pack(plan, NULL, NULL, &k), "pack");
  df_handler_fn *h = malloc(sizeof *h * (k->handler_count ? k->handler_count : 1));
  for (uint32_t i = 0; i < k->handler_count; i++)
    h[i] = noop;
  df_host_options ho = df_host_options_default();
  ho.op_log = false;
  double best = 1e300;
  for (int r = 0; r < repeats; r++) {
    df_host_result res;
    double t0 = bench_wall_us();
    die(df_host_run(k, h, k->handler_count, NULL, 0, 256, &ho, &res), "host run");
    double t = bench_wall_us() - t0;
    best = t < best ? t : best;
    df_host_result_free(&res);
  }
  measured m = {k->instr_count, k->comm_count, k->launch.shared_memory_bytes, best};
  free(h);
  df_packed_destroy(k);
  df_plan_destroy(plan);
  return m;
}

int main(int argc, char **argv) {
  int repeats = argc > 1 ? atoi(argv[1]) : 5;
  if (repeats < 1)
    repeats = 1;
  /* o: f16[128], no tensors (the handlers are no-ops) */
  static const bench_attention_shape shape = {"seq", DF_DTYPE_FLOAT16, false};
  df_program *prog = bench_attention_program_of(&shape);
  printf("host backend, no-op handlers (the time is the backend's own), best of %d runs, op "
         "log off; 132 SMs, cluster 2, block 256; plans that fit the H200's shared memory\n\n",
         repeats);
  printf("| %-40s | %7s | %6s | %9s | %10s | %11s | %9s |\n", "plan", "instrs", "comms",
         "shared B", "run us", "instr/s", "us/instr");
  printf("|------------------------------------------|---------|--------|-----------|-----"
         "-------|-------------|-----------|\n");
  /* all_at_once keeps every partial in its own slot: with long ranges the
     plan outgrows shared memory (and the host arena), so it runs shorter */
  static const config configs[] = {
      {"512 tasks 256-32K cluster_local/streaming", DF_POLICY_CLUSTER_LOCAL,
       DF_REDUCE_STREAMING, false, 512, 32768},
      {"  same, force HBM comms", DF_POLICY_CLUSTER_LOCAL, DF_REDUCE_STREAMING, true, 512,
       32768},
      {"64 tasks 256-4K round_robin/all_at_once", DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE,
       false, 64, 4096},
      {"  same, force HBM comms", DF_POLICY_ROUND_ROBIN, DF_REDUCE_ALL_AT_ONCE, true, 64, 4096},
  };
  enum { N = sizeof configs / sizeof configs[0] };
  measured m[N];
  /* least squares t = a * instrs + b * comms over the rows */
  double sii = 0, sic = 0, scc = 0, sit = 0, sct = 0;
  for (int i = 0; i < N; i++) {
    m[i] = run(prog, &configs[i], repeats);
    printf("| %-40s | %7u | %6u | %9u | %10.1f | %11.3g | %9.2f |\n", configs[i].name,
           m[i].instrs, m[i].comms, m[i].shared, m[i].us, m[i].instrs / (m[i].us * 1e-6),
           m[i].us / m[i].instrs);
    sii += (double)m[i].instrs * m[i].instrs;
    sic += (double)m[i].instrs * m[i].comms;
    scc += (double)m[i].comms * m[i].comms;
    sit += m[i].instrs * m[i].us;
    sct += m[i].comms * m[i].us;
  }
  double det = sii * scc - sic * sic;
  if (det != 0)
    printf("\nleast-squares fit over the rows: %.2f us per instruction + %.2f us per comm "
           "(the arena of every virtual CTA is set up and checked per run, so plans with "
           "larger shared memory cost more per instruction)\n",
           (sit * scc - sct * sic) / det, (sii * sct - sic * sit) / det);
  df_program_destroy(prog);
  return 0;
}
