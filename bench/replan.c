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
   A second table follows a decode loop: one draw, then 8 x steps steps
   that each add a token to every sequence; each step patches the packed
   plan in place through its last-block index (df_packed_patch_lengths_at,
   last blocks up to the block size; the index, df_packed_last_blocks, is
   built with each plan and counted with its re-plan, as libdfrt does)
   and re-plans only when a sequence's last block would outgrow the
   block, i.e. when it crosses a block boundary.
   Usage: bench_replan [steps [sequences...]] (default 21 steps; 64, 256
   and 1024 sequences). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_program.h"
#include "bench_util.h"
#include "df/plan.h"

static void die(df_status s, const char *what) { bench_check("bench_replan", s, what); }

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
  bench_rng g = {1000 + seqs};
  df_pack_options po;
  memset(&po, 0, sizeof po);
  po.skip_fingerprint = true;
  po.layout.per_cta_shared = true;
  int warm = 2;
  for (int it = 0; it < steps + warm; it++) {
    /* the same draw as bench/overhead, lengths at most 32768 */
    df_schedule_options so = bench_decode_step(&g, seqs, 32768, lens, 2048);
    so.topology.sm_count = 132;
    so.topology.cluster_size = 2;
    double t0 = bench_thread_cpu_us();
    df_plan *plan;
    die(df_schedule_replan(prog, &so, &po, &plan, NULL), "schedule");
    double t1 = bench_thread_cpu_us();
    uint8_t *direct = malloc(plan->slot_count ? plan->slot_count : 1);
    die(df_direct_global_slots(plan, &po.layout, direct), "direct-global slots");
    df_barrier_alloc b;
    die(df_allocate_barriers_ex(plan, direct, NULL, &b), "barriers");
    double t2 = bench_thread_cpu_us();
    df_slot_layout lay;
    die(df_layout_slots(plan, &b, &po.layout, NULL, &lay), "layout");
    double t3 = bench_thread_cpu_us();
    df_packed *k;
    die(df_pack(plan, &po, NULL, &k), "pack");
    double t4 = bench_thread_cpu_us();
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
    r.us[s] = bench_median_upper(t[s], (size_t)steps);
    free(t[s]);
  }
  free(lens);
  return r;
}

/* The decode loop of the second table. */
typedef struct loop_row {
  uint32_t steps, patched;
  double patch_us, replan_us, mean_us;
} loop_row;

static df_packed *replan(const df_program *prog, const df_schedule_options *so,
                         const df_pack_options *po) {
  df_plan *plan;
  die(df_schedule_replan(prog, so, po, &plan, NULL), "schedule");
  df_packed *k;
  die(df_pack(plan, po, NULL, &k), "pack");
  df_plan_destroy(plan);
  return k;
}

static loop_row decode_loop(const df_program *prog, uint32_t seqs, uint32_t steps) {
  const uint32_t tasks = seqs * 8, block = 2048;
  uint32_t *lens = malloc(sizeof *lens * tasks);
  double *tp = malloc(sizeof(double) * steps), *tr = malloc(sizeof(double) * steps);
  bench_rng g = {1000 + seqs};
  df_pack_options po;
  memset(&po, 0, sizeof po);
  po.skip_fingerprint = true;
  po.layout.per_cta_shared = true;
  df_schedule_options so = bench_decode_step(&g, seqs, 32768 - steps, lens, block);
  so.topology.sm_count = 132;
  so.topology.cluster_size = 2;
  df_packed *k = replan(prog, &so, &po);
  /* libdfrt's df_rt_plan_patch_lengths: the index once per plan */
  uint32_t *last = malloc(sizeof *last * tasks);
  df_patch_result pr;
  die(df_packed_last_blocks(k, tasks, last, &pr), "index");
  loop_row r = {steps, 0, 0, 0, 0};
  uint32_t np = 0, nr = 0;
  double total = 0;
  for (uint32_t it = 0; it < steps; it++) {
    for (uint32_t t = 0; t < tasks; t++)
      lens[t]++;
    double t0 = bench_thread_cpu_us();
    die(df_packed_patch_lengths_at(k, last, lens, tasks, block, &pr), "patch");
    double t1 = bench_thread_cpu_us();
    if (pr.patched) {
      tp[np++] = t1 - t0;
      total += t1 - t0;
      continue;
    }
    df_packed_destroy(k);
    k = replan(prog, &so, &po);
    df_patch_result ir;
    die(df_packed_last_blocks(k, tasks, last, &ir), "index");
    double t2 = bench_thread_cpu_us();
    tr[nr++] = t2 - t1;
    total += t2 - t0;
  }
  df_packed_destroy(k);
  free(last);
  r.patched = np;
  r.patch_us = np ? bench_median_upper(tp, np) : 0;
  r.replan_us = nr ? bench_median_upper(tr, nr) : 0;
  r.mean_us = total / steps;
  free(tp);
  free(tr);
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
  for (uint32_t i = 0; i < nb; i++)
    if (batches[i] == 0 || batches[i] > 65536) {
      fprintf(stderr, "bench_replan: sequences must be in 1..65536, got %u\n", batches[i]);
      return 2;
    }
  double replan_us[16];
  for (uint32_t i = 0; i < nb; i++) {
    row r = measure(prog, batches[i], steps);
    double total = r.us[SCHED] + r.us[PACK], per = 1000.0 / r.instrs;
    printf("| %u | %.0f | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %.0f | %.0f | %.0f | %.0f "
           "| %.0f |\n",
           batches[i], r.instrs, r.slots, r.us[SCHED], r.us[BARRIERS], r.us[LAYOUT],
           r.us[PACK], total, r.us[SCHED] * per, r.us[BARRIERS] * per, r.us[LAYOUT] * per,
           r.us[PACK] * per, total * per);
    replan_us[i] = total;
  }
  const uint32_t loop_steps = 8 * (uint32_t)steps;
  printf("\ndecode loop: %u steps of one more token per sequence from one draw; each step "
         "patches the plan (df_packed_patch_lengths, last block <= 2048) or, where a sequence "
         "crosses a block boundary, re-plans (schedule + pack); thread CPU time\n\n",
         loop_steps);
  printf("| sequences | steps patched | patch us (median) | re-plan us (median, in the loop) | "
         "host us per step (mean) | re-plan every step us (table above) | speed-up |\n"
         "|---|---|---|---|---|---|---|\n");
  for (uint32_t i = 0; i < nb; i++) {
    loop_row l = decode_loop(prog, batches[i], loop_steps);
    printf("| %u | %u of %u | %.1f | %.1f | %.1f | %.1f | %.1fx |\n", batches[i], l.patched,
           l.steps, l.patch_us, l.replan_us, l.mean_us, replan_us[i], replan_us[i] / l.mean_us);
  }
  df_program_destroy(prog);
  return 0;
}
