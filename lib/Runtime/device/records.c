/* The record lines an instruction's handler and sends read, gathered
   before its receive waits so that they can be re-fetched into L1 in one
   parallel round trip after them (df_rt_prefetch_records). Records are
   read-only for the launch, so reading them before the wait is safe; the
   addresses are what matters: without them the handler's dependent
   record reads (args -> input slot ids -> slot records) each pay an L2
   round trip after the acquire emptied L1. */
#include "runtime.h"

#define DF_PF_INPUTS 16u /* input slot records prefetched (the first ones) */

void df_rt_gather_records(df_rt *rt, const df_abi_args *a, const df_abi_comm *c, uint32_t n,
                          const uint32_t *input_slots, const uint32_t *task_coords) {
  const void *p = (const void *)0;
  const uint32_t lane = rt->tid;
  if (lane < 32) {
    const uint32_t nin = a->input_slot_count < DF_PF_INPUTS ? a->input_slot_count : DF_PF_INPUTS;
    if (lane == 0)
      p = a;
    else if (lane == 1)
      p = input_slots + a->input_slot_offset;
    else if (lane == 2)
      p = task_coords + a->task_coord_offset;
    else if (lane == 3 && a->output_slot != DF_SENTINEL)
      p = &rt->slots[a->output_slot];
    else if (lane >= 4 && lane < 4 + nin)
      p = &rt->slots[input_slots[a->input_slot_offset + (lane - 4)]];
    else if (lane >= 20 && lane < 24 && lane - 20 < n)
      p = &c[lane - 20];
    else if (lane >= 24 && lane < 28 && lane - 24 < n && c[lane - 24].kind != DF_COMM_CLUSTER_RECV &&
             c[lane - 24].kind != DF_COMM_HBM_RECV)
      p = &rt->slots[c[lane - 24].dst_slot_id];
  }
  rt->pf_line = p;
  /* Warm L1 now, while the receives are awaited: cluster receives wait at
     CTA scope and keep it; HBM polls empty it and prefetch again. */
  df_rt_prefetch_records(rt);
}
