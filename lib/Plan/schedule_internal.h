/* Shared state of one df_schedule call (internal to lib/Plan). */
#ifndef DF_PLAN_SCHEDULE_INTERNAL_H
#define DF_PLAN_SCHEDULE_INTERNAL_H

#include "df/plan.h"

typedef struct df_sched {
  const df_program *prog;
  const df_schedule_options *o;
  df_plan *p;
  df_topology topo;
  uint32_t block;
  const df_range_lengths *range; /* lengths of the scheduled axis */
  int32_t partial, reduce, finalize; /* stage indices, -1 when absent */
  df_identity iter_identity;         /* identity of the partial stage */
  uint32_t bucket_size;
  /* reusable scratch (plan allocator) */
  uint32_t *buf;
  uint32_t buf_cap;
  /* queue order of the non-EXIT instructions; NULL = id order */
  uint32_t *order;
  uint32_t order_count;
  bool overflow; /* an emitter ran past the reserved room */
  df_schedule_options chosen; /* the options with an automatic split applied */
} df_sched;

/* Ensure s->buf holds at least n u32s. */
df_status df_sched_buf(df_sched *s, uint32_t n);

/* Reserve room for this many more instructions/slots/comms/inputs, so the
   emission loops do not regrow. */
df_status df_sched_reserve(df_sched *s, uint64_t instrs, uint64_t slots, uint64_t comms,
                           uint64_t inputs);

/* The emitters below write into room reserved by df_sched_reserve and
   return ids without a status (a status is a large struct and these run
   per instruction); running out of room sets s->overflow, an internal
   error reported at the end. */

/* Slot of `task` holding plan type `type`. */
uint32_t df_sched_slot(df_sched *s, uint32_t task, int32_t type, df_slot_role role,
                       uint32_t producer);

/* Instruction without a range; stage -1 for none. */
uint32_t df_sched_instr(df_sched *s, df_instr_op op, uint32_t task, uint32_t sm, int32_t stage,
                        const uint32_t *inputs, uint32_t n, uint32_t output);

/* Instruction over [b, e) (offsets already applied by the caller). */
uint32_t df_sched_ranged(df_sched *s, df_instr_op op, uint32_t task, uint32_t sm,
                         int32_t stage, uint32_t b, uint32_t e, const uint32_t *inputs,
                         uint32_t n, uint32_t output);

/* ITER of `task` over block [b, e) of its range (offset applied here),
   with its iter-range variant selected by length. */
uint32_t df_sched_iter(df_sched *s, uint32_t task, uint32_t sm, uint32_t b, uint32_t e,
                       uint32_t output);

/* Send + receive of slot `src_slot` -> `dst_slot` between two SMs: cluster
   kinds inside one cluster unless force_hbm, else HBM kinds. */
void df_sched_transfer(df_sched *s, uint32_t src_instr, uint32_t dst_instr, uint32_t src_slot,
                       uint32_t dst_slot, uint32_t producer_sm, uint32_t consumer_sm,
                       uint32_t cluster_epoch, uint32_t hbm_epoch, bool pull);

/* Range lengths of `axis` in the options, NULL when absent. */
const df_range_lengths *df_sched_find_range(const df_schedule_options *o, const char *axis);

/* task_extents (if any) multiply to the task count. */
df_status df_sched_check_extents(const df_schedule_options *o, uint32_t task_count);

/* Number of blocks of a range of length L. */
static inline uint32_t df_sched_blocks(const df_sched *s, uint32_t len) {
  return (uint32_t)(((uint64_t)len + s->block - 1) / s->block);
}

/* First SM and SM count of cluster c. */
static inline void df_sched_cluster_sms(const df_sched *s, uint32_t c, uint32_t *first,
                                        uint32_t *count) {
  uint32_t cs = s->topo.cluster_size;
  *first = c * cs;
  uint32_t end = *first + cs < s->topo.sm_count ? *first + cs : s->topo.sm_count;
  *count = end - *first;
}

/* One ITER of an even split: task-local range [b, e) on `sm`. */
typedef struct df_sched_piece {
  uint32_t b, e, sm;
} df_sched_piece;

/* even_split pieces of the tasks in `order` (r->count of them): task
   order[k] has pieces[first[k] .. first[k + 1]) in range order. Both
   arrays come from the plan allocator; the caller frees them. */
df_status df_sched_even_split(df_sched *s, const uint32_t *order, df_sched_piece **pieces,
                              uint32_t **first);

df_status df_schedule_all_at_once(df_sched *s);
df_status df_schedule_streaming(df_sched *s);
df_status df_schedule_streaming_tree(df_sched *s);
df_status df_schedule_stage_graph(df_sched *s);

#endif
