/* The structural dispatch-cost model of a packed plan (docs/fusion.md):
   every dispatched instruction costs a fixed F cycles plus R cycles per
   byte of the records it reads and the payload its comms move; per CTA
   the costs add up, and the critical path runs through queue order and
   transfers (send dispatch -> receive dispatch plus the kind's latency).
   Nothing is executed: the model reads the records only. */
#ifndef DF_COST_H
#define DF_COST_H

#include <stdint.h>
#include <stdio.h>

#include "df/alloc.h"
#include "df/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct df_cost_params {
  double instr_cycles;    /* F: fixed cost per dispatched instruction */
  double byte_cycles;     /* R: cycles per record or payload byte */
  double cluster_latency; /* added to a cluster transfer edge */
  double hbm_latency;     /* added to an HBM transfer edge */
} df_cost_params;

/* F 40, R 0.0625 (16 B/cycle), cluster 200, HBM 1000 cycles: the host
   backend's run-time model (docs/host-backend.md) uses the same values. */
df_cost_params df_cost_params_default(void);
/* Every parameter finite and >= 0. */
df_status df_cost_params_check(const df_cost_params *p);

typedef struct df_cost_cta {
  uint32_t instructions;  /* dispatched (EXIT excluded) */
  uint32_t parts;         /* plan instructions they run (fused count all) */
  uint32_t comms;
  uint64_t record_bytes;  /* instruction, args, comm records, input and
                             coordinate words */
  uint64_t payload_bytes; /* bytes moved by its comms (each half counts) */
  double cycles;          /* sum of its dispatch costs */
  double finish;          /* finish time of its last dispatch */
} df_cost_cta;

typedef struct df_cost {
  df_cost_params params;
  uint32_t cta_count;
  df_cost_cta *ctas;
  df_cost_cta total;        /* sums; finish = critical path length */
  double critical_path;     /* longest path through queues and transfers */
  uint32_t critical_count;  /* packed instructions on it, in order */
  uint32_t *critical;
  uint32_t critical_cta;    /* CTA where the path ends */
} df_cost;

/* Cost of a packed plan. Records are checked first (df_launch_package_build
   rules); a receive with no matching send adds no edge. */
df_status df_plan_cost(const df_packed *k, const df_cost_params *params,
                       const df_allocator *alloc, df_cost *out);
void df_cost_free(df_cost *c, const df_allocator *alloc);

/* Text report of the cost of `k`: a parameter line, one line per CTA, a
   total line and the critical path as plan instruction ids at CTAs
   ("I2@2 -> I3@0+1": "+n" = n more fused parts). */
void df_cost_write(const df_cost *c, const df_packed *k, FILE *out);

#ifdef __cplusplus
}
#endif

#endif
