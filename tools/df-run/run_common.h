/* The parts of df-run both backends share: tensor arguments by program
   name or index, their host buffers, --check and --save, the scheduler
   options of --replan and the timing summary. */
#ifndef DF_RUN_COMMON_H
#define DF_RUN_COMMON_H

#include <stdbool.h>
#include <stdint.h>

#include "df/plan.h"
#include "df/program.h"
#include "df/status.h"
#include "host_tensor.h"
#include "options.h"

typedef struct run_tensors {
  uint32_t count; /* tensor arguments of the plan */
  const char *names[RUN_MAX_TENSORS];
  char index_names[RUN_MAX_TENSORS][12];
  host_tensor host[RUN_MAX_TENSORS];
  bool bound[RUN_MAX_TENSORS];
} run_tensors;

/* Name the tensor arguments: the program's, else indices up to the
   highest index that --tensor binds. */
df_status run_tensors_name(run_tensors *t, const df_program *prog, const run_options *o);
/* Index of a tensor argument named by program name or decimal index;
   `opt` names the option in the message. */
df_status run_tensors_find(const run_tensors *t, const char *opt, const char *name,
                           uint32_t *out);
/* Parse and fill every --tensor into its host buffer and print it. With
   a program every argument must be bound; by index, gaps stay unbound. */
df_status run_tensors_load(run_tensors *t, const run_options *o, bool has_program);
void run_tensors_free(run_tensors *t);

/* Brings the contents of tensor i after the runs into t->host[i].data. */
typedef df_status (*run_fetch_fn)(void *user, uint32_t i);

/* --check and --save. *failed = 1 when a check fails. */
df_status run_tensors_outputs(run_tensors *t, const run_options *o, run_fetch_fn fetch,
                              void *user, int *failed);

/* The scheduler options of --replan (topology left 0: the base plan's). */
void run_replan_options(const run_options *o, df_schedule_options *so);
/* --replan of a blob whose program records the compiled plan's choices
   (transfer tile, reduce-strategy=auto, block-size=auto): refuses
   --policy / --strategy, which an auto choice decides, a --block-size
   other than auto with block-size=auto (and auto without it), and
   prints the choices it repeats. */
df_status run_replan_choices(const run_options *o, const df_program *prog);
/* After a re-plan with --block-size auto: run with the chosen block
   (printed). */
void run_replan_block(run_options *o, uint32_t chosen);
/* The pack options of --replan (no fingerprint; --per-cta-shared). */
void run_replan_pack_options(const run_options *o, df_pack_options *po);

/* Print min/median/mean/max of n >= 1 timings (sorted in place):
   "df-run: 3 launches (1 warm-up, WHAT): min ..."; one/many name a run in
   singular and plural, `what` what one timing measured. */
void run_print_timings(double *times_us, uint32_t n, uint32_t warmup, const char *one,
                       const char *many, const char *what);
/* Monotonic clock in microseconds. */
double run_now_us(void);

#endif
