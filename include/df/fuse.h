/* Instruction fusion (docs/fusion.md): producer and consumer that run back
   to back on one CTA with no transfer between them become one dispatched
   instruction running a composite handler. The same rule serves the
   df-fuse pass and run-time re-plans. Pure C, no MLIR. */
#ifndef DF_FUSE_H
#define DF_FUSE_H

#include <stdbool.h>
#include <stdint.h>

#include "df/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct df_fuse_options {
  /* Most parts per fused instruction, 2..DF_FUSE_MAX_PARTS; 0 = the
     maximum. */
  uint32_t max_parts;
  /* No ITER in any group: a ranged handler's long loop stays out of
     composites, whose extra live state can spill inside it (the GQA
     decode partial: ITER -> FINALIZE composites ran 20-30 % slower,
     bench/attention/HISTORY.md run N); its REDUCE -> FINALIZE pairs still fuse. */
  bool no_iter;
} df_fuse_options;

/* What a fusion did. */
typedef struct df_fuse_report {
  uint32_t dispatches_before; /* queued instructions dispatched (no EXIT) */
  uint32_t dispatches_after;
  uint32_t groups;            /* fused instructions formed (2+ parts) */
  uint32_t reduce_finalize;   /* groups ending reduce -> finalize */
  uint32_t reduce_chains;     /* groups holding reduce -> reduce(_update) */
  uint32_t map_chains;        /* groups holding map/iter -> map/iter */
  /* Candidate pairs (a queue neighbour reading its predecessor's
     output) refused because the predecessor's output is also sent,
     received into or read outside the group. */
  uint32_t refused_shared;
  uint32_t refused_transfer;  /* the consumer receives a transfer */
} df_fuse_report;

/* Recompute every instruction's `fused` flag of a plan with queues.
   Instruction B joins the group ending at A, its predecessor in the
   queue, when: both run handlers (iter, map, reduce, reduce_update,
   finalize); B reads the output of a part of the group (a same-CTA
   edge); B has no receive dispatched at it and A no send or release at it
   (data crossing CTAs and its order are unchanged); A's output slot is in
   no comm and read by no instruction outside the group plus B; the group
   stays within max_parts; with no_iter, neither is an ITER. Queues, slots
   and comms are not changed. */
df_status df_plan_fuse(df_plan *p, const df_fuse_options *o, df_fuse_report *report);

/* Clear every `fused` flag. */
void df_plan_unfuse(df_plan *p);

/* Parts of the fused instruction starting at queue entry `pos` of SM `sm`
   (1 for an unfused instruction). */
uint32_t df_plan_fused_parts(const df_plan *p, uint32_t sm, uint32_t pos);

#ifdef __cplusplus
}
#endif

#endif
