/* Hand-built and hand-edited plans for the packing tests: small plans
   written instruction by instruction, and the seed test's edits of
   scheduled plans (list reordering, releases, segments). */
#ifndef DF_TEST_HAND_PLAN_H
#define DF_TEST_HAND_PLAN_H

#include <stdbool.h>

#include "df/plan.h"

/* An empty plan: one intermediate type "T" of `slot_bytes`, one map stage
   "work" (operator "work"), one task of length 1, block size 1. */
df_plan *hand_plan_new(uint32_t sm_count, uint32_t cluster_size, uint32_t slot_bytes);
/* A slot of type 0 for task 0 (producer set by hand_instr). */
uint32_t hand_slot(df_plan *p);
/* An instruction of task 0 on `sm` (stage "work" for MAP); `out` may be
   DF_SENTINEL; the output slot's producer becomes this instruction. */
uint32_t hand_instr(df_plan *p, df_instr_op op, uint32_t sm, const uint32_t *in,
                    uint32_t n_in, uint32_t out);
/* Send + receive of `src_slot` (at src_instr) into `dst_slot` (at
   dst_instr): cluster or HBM kinds, SMs from the instructions. */
void hand_transfer(df_plan *p, bool cluster, uint32_t src_instr, uint32_t dst_instr,
                   uint32_t src_slot, uint32_t dst_slot, uint32_t epoch);
/* Queues in id order and handler identities attached. */
void hand_finish(df_plan *p);

/* The plan with its instruction list in `order` (plan ids): ids are
   renumbered to list positions and every reference follows, so the
   result is the seed's `replace(plan, instructions=reordered)`. */
df_plan *hand_permute(const df_plan *p, const uint32_t *order);
/* Index of the first comm of `kind` (DF_SENTINEL if none). */
uint32_t hand_find_comm(const df_plan *p, df_comm_kind kind);
/* The seed's release test: a CLUSTER_RELEASE copied from the first
   cluster send, dispatched at its target, SMs swapped, peer = the
   producer's cluster rank. */
void hand_append_release(df_plan *p);
/* The seed's segmented test: the HBM send/recv of the first HBM receive's
   transfer replaced by `n` segments of `bytes` each (epochs 1..n). */
void hand_segment_first_hbm(df_plan *p, uint32_t n, uint32_t bytes);
/* Replace the comm list. */
void hand_set_comms(df_plan *p, const df_comm *comms, uint32_t n);

/* True when the status failed with `needle` in its message. */
bool hand_error_has(df_status s, const char *needle);

#endif
