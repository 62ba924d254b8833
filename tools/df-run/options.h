/* df-run's command line. */
#ifndef DF_RUN_OPTIONS_H
#define DF_RUN_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "df/plan.h"
#include "df/status.h"

enum { RUN_MAX_TENSORS = 64, RUN_MAX_LENGTHS = 4096 };

/* --backend: the CUDA driver through libdfrt, or the host backend
   (df_host_run, handlers from a host-compiled shared object). */
typedef enum run_backend { RUN_BACKEND_CUDA = 0, RUN_BACKEND_HOST = 1 } run_backend;

/* Exit statuses of df-run. */
enum {
  RUN_EXIT_OK = 0,
  RUN_EXIT_CHECK = 1,
  RUN_EXIT_ERROR = 2,
  RUN_EXIT_DIAGNOSIS = 3,
  RUN_EXIT_TIMEOUT = 4 /* the watchdog stopped a launch (--timeout-ms) */
};

typedef struct run_binding {
  const char *name; /* program tensor name or index */
  const char *spec; /* tensor spec (--tensor) or path (--check/--save) */
  double rtol, atol; /* --check */
} run_binding;

typedef struct run_options {
  run_backend backend;
  const char *kernel;
  const char *plan;
  const char *kernel_name;
  const char *driver;
  int device;
  uint32_t iters, warmup;
  uint32_t block_dim[3];
  uint32_t block_size;
  /* --block-size auto: the re-plan's chosen block (blobs compiled with
     block-size=auto; block_size is set once re-planned) */
  bool block_auto;
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
  bool policy_set, strategy_set; /* given on the command line */
  bool per_cta_shared; /* --per-cta-shared: slot layout of --replan */
  bool fuse;           /* --fuse: df_plan_fuse the re-plan (host backend) */
  /* cuda backend */
  uint32_t timeout_ms; /* --timeout-ms N: watchdog (0 = off) */
  bool repeat_check;   /* --repeat-check: relaunch into poisoned outputs, compare bitwise */
  /* host backend */
  const char *handlers; /* --handlers FILE.so */
  const char *op_log;   /* --op-log FILE */
  bool cost;            /* --cost */
  uint32_t threads;     /* --threads N (0 = not given: 1) */
  bool help;
} run_options;

/* Parse argv; DF_EINVAL with a message naming the option on bad input. */
df_status run_options_parse(int argc, char **argv, run_options *o);
void run_usage(FILE *out);

#endif
