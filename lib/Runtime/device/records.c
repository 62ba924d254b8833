/* Record lines of an instruction that receives over HBM, warmed into L1
   after its flag polls. An acquire at gpu scope invalidates the whole L1
   (SASS CCTL.IVALL), so afterwards the handler's dependent record reads
   (args -> input slot ids -> slot records) and the sends' slot records
   would each pay an L2 round trip (bench/overhead trace: ~0.4 us each
   side). The addresses are gathered before the polls (records are
   read-only for the launch, so reading the ids early is safe); after the
   polls the lanes of warp 0 each load one line, all in parallel, into
   registers nobody reads: the loads fill L1 without stalling anyone. */
#include "runtime.h"

#define DF_WARM_INPUTS 16u /* input slot records warmed (the first ones) */

void df_rt_gather_records(df_rt *rt, const df_abi_args *a, const df_abi_comm *c, uint32_t n,
                          const uint32_t *input_slots, const uint32_t *task_coords) {
  const void *p = (const void *)0;
  const uint32_t lane = rt->tid;
  if (lane < 32) {
    const uint32_t nin =
        a->input_slot_count < DF_WARM_INPUTS ? a->input_slot_count : DF_WARM_INPUTS;
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
    else if (lane >= 24 && lane < 32 && (lane - 24) / 2 < n) {
      const df_abi_comm *s = &c[(lane - 24) / 2];
      if (s->kind == DF_COMM_HBM_SEND || s->kind == DF_COMM_CLUSTER_SEND)
        p = &rt->slots[(lane & 1) ? s->dst_slot_id : s->src_slot_id];
    }
  }
  rt->warm_line = p;
}
