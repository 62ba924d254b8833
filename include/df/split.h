/* Automatic range split of all_at_once schedules (df-schedule
   block-size=auto, df extension; docs/plan-core.md "Automatic split"):
   the block size and placement whose modelled makespan is smallest. */
#ifndef DF_SPLIT_H
#define DF_SPLIT_H

#include <stdbool.h>
#include <stdint.h>

#include "df/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cost model, in microseconds (defaults: the decode-attention bench's
   constants, bench/attention/cases.py). Every SM runs its queue in order;
   an ITER of r range units takes per_partial_us + r · per_unit_us; a
   REDUCE of n inputs starts when its SM is free and every input is done
   (an input made on another SM counts hbm_edge_us later) and takes
   reduce_us + n · reduce_per_input_us + finalize_us. */
typedef struct df_split_cost {
  double per_unit_us;         /* one range unit streamed by one SM */
  double per_partial_us;      /* fixed cost of one ITER */
  double reduce_us;           /* fixed cost of one REDUCE */
  double reduce_per_input_us; /* per REDUCE input */
  double finalize_us;         /* the task's FINALIZE */
  double hbm_edge_us;         /* a partial made on another SM */
  /* Slots an SM may hold: ITER 1, REDUCE inputs + 1, each slot_bytes;
     a plan over slot_budget bytes on some SM is not a candidate
     (0 = no bound). */
  uint32_t slot_bytes;
  uint32_t slot_budget;
} df_split_cost;

/* The search: candidate blocks are the multiples of step in [min_block,
   max_block] (max_block 0: the longest length rounded up to step), each
   under three placements: round_robin, round_robin with defer_reduces,
   balance_iters with defer_reduces (in that order; a later candidate is
   kept only when it is more than 1e-9 us faster). */
typedef struct df_split_search {
  uint32_t step;      /* 0: 256 */
  uint32_t min_block; /* 0: step */
  uint32_t max_block; /* 0: longest length rounded up to step */
  df_split_cost cost;
} df_split_search;

typedef struct df_split_choice {
  uint32_t block_size;
  bool balance_iters;
  bool defer_reduces;
  double makespan_us; /* modelled */
  uint32_t candidates; /* plans modelled */
} df_split_choice;

/* The defaults above: H200 decode attention (132 SMs' share of ~4 TB/s,
   512 B per unit; 3 us per partial, reduce 1 + 0.05/input, finalize 0.3,
   HBM edge 1 us; 1040-byte slots in a 150 KiB budget), step 256. */
df_split_search df_split_search_default(void);

/* Model one plan: task t has lengths[t] units cut into blocks of `block`;
   the placement as df_schedule all_at_once (round_robin or balance_iters,
   the REDUCE on the SM of the task's first block, defer_reduces moving
   each queue's ITERs first). *makespan_us gets the largest SM clock and
   *held_bytes the fullest SM's slot bytes. */
df_status df_split_model(const uint32_t *lengths, uint32_t task_count, uint32_t sm_count,
                         uint32_t block, bool balance_iters, bool defer_reduces,
                         const df_split_cost *cost, double *makespan_us,
                         uint64_t *held_bytes);

/* The best candidate of the search; an error when the inputs are bad or
   no candidate fits the slot budget. */
df_status df_split_choose(const uint32_t *lengths, uint32_t task_count, uint32_t sm_count,
                          const df_split_search *search, df_split_choice *out);

#ifdef __cplusplus
}
#endif

#endif
