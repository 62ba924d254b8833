/* bench/replan: host cost of a run-time re-plan of a decode step, the
   host half of df_rt_plan_replan (bench/overhead times it with the
   upload on a GPU): the decode attention program (partial -> reduce ->
   finalize, 8 KV heads per sequence), block 2048, balance-iters, per-CTA
   shared layout, 132 SMs in clusters of 2, new log-normal lengths (median
   2K, sigma 1, at most 32K) every step. Per stage: df_schedule_replan,
   then the passes of df_pack timed on their own (barriers, slot layout)
   and df_pack as a whole (barriers + layout + records + launch package,
   no fingerprint). Prints one table of medians; the ns-per-instruction
   columns show whether a stage grows linearly with the batch.
   Usage: bench_replan [steps [sequences...]] (default 21 steps; 64, 256
   and 1024 sequences). */
#include <malloc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "attention_program.h"
#include "df/plan.h"

/* CPU time of this thread (user + system): the passes are single-threaded
   and CPU-bound, and on a shared machine wall time also counts the time
   other processes hold the core. */
static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void die(df_status s, const char *what) {
  if (s.code != DF_OK) {
    fprintf(stderr, "bench_replan: %s: %s\n", what, s.message);
    exit(1);
  }
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

typedef struct rng {
  uint64_t s;
} rng;

static double uniform(rng *r) {
  r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
  return ((r->s >> 11) + 0.5) / 9007199254740992.0;
}

/* Log-normal decode length: median 2048, sigma 1, in [16, 32768]; the
   same draw as bench/overhead. */
static uint32_t decode_length(rng *r) {
  double z = sqrt(-2.0 * log(uniform(r))) * cos(6.283185307179586 * uniform(r));
  double v = 2048.0 * exp(z);
  return v < 16 ? 16 : v > 32768 ? 32768 : (uint32_t)v;
}

enum { SCHED, BARRIERS, LAYOUT, PACK, STAGES };

typedef struct row {
  double instrs, slots;
  double us[STAGES];
} row;

static row measure(const df_program *prog, uint32_t seqs, int steps) {
  uint32_t tasks = seqs * 8;
  uint32_t *lens = malloc(sizeof *lens * tasks);
  double *t[STAGES];
  for (int s = 0; s < STAGES; s++)
    t[s] = malloc(sizeof(double) * (size_t)steps);
  row r;
  memset(&r, 0, sizeof r);
  rng g = {1000 + seqs};
  df_pack_options po;
  memset(&po, 0, sizeof po);
  po.skip_fingerprint = true;
  po.layout.per_cta_shared = true;
  int warm = 2;
  for (int it = 0; it < steps + warm; it++) {
    for (uint32_t s = 0; s < seqs; s++) {
      uint32_t len = decode_length(&g);
      for (uint32_t h = 0; h < 8; h++)
        lens[s * 8 + h] = len;
    }
    df_schedule_options so = df_schedule_options_default();
    so.topology.sm_count = 132;
    so.topology.cluster_size = 2;
    so.block_size = 2048;
    so.range_count = 1;
    so.ranges[0].axis = "kv";
    so.ranges[0].count = tasks;
    so.ranges[0].lengths = lens;
    so.extent_count = 2;
    so.extents[0] = seqs;
    so.extents[1] = 8;
    so.balance_iters = true;
    double t0 = now_us();
    df_plan *plan;
    die(df_schedule_replan(prog, &so, &po, &plan, NULL), "schedule");
    double t1 = now_us();
    uint8_t *direct = malloc(plan->slot_count ? plan->slot_count : 1);
    die(df_direct_global_slots(plan, &po.layout, direct), "direct-global slots");
    df_barrier_alloc b;
    die(df_allocate_barriers_ex(plan, direct, NULL, &b), "barriers");
    double t2 = now_us();
    df_slot_layout lay;
    die(df_layout_slots(plan, &b, &po.layout, NULL, &lay), "layout");
    double t3 = now_us();
    df_packed *k;
    die(df_pack(plan, &po, NULL, &k), "pack");
    double t4 = now_us();
    if (it >= warm) {
      t[SCHED][it - warm] = t1 - t0;
      t[BARRIERS][it - warm] = t2 - t1;
      t[LAYOUT][it - warm] = t3 - t2;
      t[PACK][it - warm] = t4 - t3;
      r.instrs += plan->instr_count;
      r.slots += plan->slot_count;
    }
    df_packed_destroy(k);
    df_slot_layout_free(&lay, NULL);
    df_barrier_alloc_free(&b, NULL);
    free(direct);
    df_plan_destroy(plan);
  }
  r.instrs /= steps;
  r.slots /= steps;
  for (int s = 0; s < STAGES; s++) {
    r.us[s] = median(t[s], steps);
    free(t[s]);
  }
  free(lens);
  return r;
}

int main(int argc, char **argv) {
  int steps = argc > 1 ? atoi(argv[1]) : 21;
  if (steps < 1)
    steps = 1;
  df_program *prog = bench_attention_program();
  /* A runtime re-plans every step: keep freed memory in the heap. */
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  printf("re-plan of a decode step (8 KV heads per sequence, block 2048, balance-iters, "
         "per-CTA shared, 132 SMs / cluster 2, log-normal lengths around 2K): median of %d "
         "steps, thread CPU time; re-plan = schedule + pack; pack includes barriers and layout (timed "
         "alone too); ns/in = ns per instruction\n\n",
         steps);
  printf("| sequences | instrs | slots | schedule us | barriers us | layout us | pack us | "
         "re-plan us | sched ns/in | barr ns/in | layout ns/in | pack ns/in | re-plan ns/in "
         "|\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  uint32_t batches[16] = {64, 256, 1024}, nb = 3;
  if (argc > 2)
    for (nb = 0; nb < 16 && (int)nb + 2 < argc; nb++)
      batches[nb] = (uint32_t)strtoul(argv[nb + 2], NULL, 10);
  for (uint32_t i = 0; i < nb; i++) {
    if (batches[i] == 0 || batches[i] > 65536) {
      fprintf(stderr, "bench_replan: sequences must be in 1..65536, got %u\n", batches[i]);
      return 2;
    }
    row r = measure(prog, batches[i], steps);
    double total = r.us[SCHED] + r.us[PACK], per = 1000.0 / r.instrs;
    printf("| %u | %.0f | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %.0f | %.0f | %.0f | %.0f "
           "| %.0f |\n",
           batches[i], r.instrs, r.slots, r.us[SCHED], r.us[BARRIERS], r.us[LAYOUT],
           r.us[PACK], total, r.us[SCHED] * per, r.us[BARRIERS] * per, r.us[LAYOUT] * per,
           r.us[PACK] * per, total * per);
  }
  df_program_destroy(prog);
  return 0;
}
