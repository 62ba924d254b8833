/* df-run's command line. */
#ifndef DF_RUN_OPTIONS_H
#define DF_RUN_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "df/plan.h"
#include "df/status.h"

enum { RUN_MAX_TENSORS = 64, RUN_MAX_LENGTHS = 4096 };

typedef struct run_binding {
  const char *name; /* program tensor name or index */
  const char *spec; /* tensor spec (--tensor) or path (--check/--save) */
  double rtol, atol; /* --check */
} run_binding;

typedef struct run_options {
  const char *kernel;
  const char *plan;
  const char *kernel_name;
  const char *driver;
  int device;
  uint32_t iters, warmup;
  uint32_t block_dim[3];
  uint32_t block_size;
  uint64_t seed;
  uint32_t tensor_count, check_count, save_count;
  run_binding tensors[RUN_MAX_TENSORS], checks[RUN_MAX_TENSORS], saves[RUN_MAX_TENSORS];
  const char *staging_out;
  /* --replan AXIS=L1,L2,... */
  const char *replan_axis;
  uint32_t replan_count;
  uint32_t replan_lengths[RUN_MAX_LENGTHS];
  uint32_t extent_count; /* --task-extents */
  uint32_t extents[DF_MAX_AXES];
  df_policy policy;
  df_reduce_strategy strategy;
  bool help;
} run_options;

/* Parse argv; DF_EINVAL with a message naming the option on bad input. */
df_status run_options_parse(int argc, char **argv, run_options *o);
void run_usage(FILE *out);

#endif
