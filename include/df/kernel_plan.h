/* What the generated kernel module tells the device runtime about its plan
   (docs/codegen.md): the feature bits `df_plan_features` (the runtime
   guards every protocol path with them, so O3 drops the paths a plan does
   not use) and, with --df-embed-plan, the plan's ABI records as constant
   data (`df_embedded_plan`). Freestanding: only <stdint.h> and abi.h, so
   the device runtime, the compiler and a host launcher share it. */
#ifndef DF_KERNEL_PLAN_H
#define DF_KERNEL_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "df/abi.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Feature bits. A kernel runs exactly the plans whose features are a
   subset of its own; a comm kind outside them traps. */
#define DF_FEATURE_CLUSTER (1u << 0)       /* cluster_size > 1: cluster barriers */
#define DF_FEATURE_CLUSTER_SEND (1u << 1)  /* kind 1: mapa, DSMEM bulk copies, lifetime guard */
#define DF_FEATURE_CLUSTER_RECV (1u << 2)  /* kind 2: cluster-scope mbarrier waits */
#define DF_FEATURE_RELEASE (1u << 3)       /* kind 5 and the ACK barriers */
#define DF_FEATURE_GATED (1u << 4)         /* slots with CLUSTER_GATED_PUSH */
#define DF_FEATURE_HBM (1u << 5)           /* kinds 3, 4, 6, 7: flags, staging copies */
#define DF_FEATURE_HBM_BULK (1u << 6)      /* segmented HBM transfers, kinds 6/7: bulk copies */
#define DF_FEATURE_DIRECT_GLOBAL (1u << 7) /* slots with HBM_DIRECT_GLOBAL */
#define DF_FEATURE_SCRATCH (1u << 8)       /* slots with SCRATCH_BACKED */
/* A cluster send from a scratch-backed slot: the plan's source lifetime
   is not precomputed (REFERENCE 5.5), so where its action (args word 14)
   is 0 the guard still tests the pending source ranges at run time.
   Without it the packer's actions are trusted as they are. */
#define DF_FEATURE_SOURCE_TEST (1u << 9)
/* OP_POOL records: the instruction pool's claims (docs/pool.md). From the
   instructions, not the comms: df_packed_features adds it. */
#define DF_FEATURE_POOL (1u << 10)
#define DF_FEATURES_ALL 0x7FFu
/* Not a protocol path: the records come from df_embedded_plan. */
#define DF_FEATURE_EMBEDDED_PLAN (1u << 16)
/* Not a protocol path (df-translate --df-resolve=off): cluster-receiving
   instructions do not resolve the handler's input 0 and output addresses
   before the wait (df_ctx.resolved_*); the handler's accessors read the
   records. For kernels whose handlers do not read those accessors after
   the wait and whose registers are tight (bench/moe, run M: the fused
   MoE c2 kernel 1.7-2.3 % faster without it). */
#define DF_FEATURE_NO_RESOLVE (1u << 17)

/* The features a plan needs, from its records. */
static inline uint32_t df_plan_features_of(const df_abi_comm *comms, uint32_t comm_count,
                                           const df_abi_slot *slots, uint32_t slot_count,
                                           uint32_t cluster_size) {
  uint32_t f = cluster_size > 1 ? DF_FEATURE_CLUSTER : 0;
  for (uint32_t i = 0; i < comm_count; i++) {
    uint32_t k = comms[i].kind;
    if (k == DF_COMM_CLUSTER_SEND) {
      f |= DF_FEATURE_CLUSTER_SEND;
      uint32_t src = comms[i].src_slot_id;
      if (src < slot_count && (slots[src].flags & DF_SLOT_FLAG_SCRATCH_BACKED))
        f |= DF_FEATURE_SOURCE_TEST;
    }
    else if (k == DF_COMM_CLUSTER_RECV)
      f |= DF_FEATURE_CLUSTER_RECV;
    else if (k == DF_COMM_CLUSTER_RELEASE)
      f |= DF_FEATURE_RELEASE;
    else if (k == DF_COMM_HBM_SEND || k == DF_COMM_HBM_RECV)
      f |= DF_FEATURE_HBM;
    else if (k == DF_COMM_HBM_RECV_ISSUE || k == DF_COMM_HBM_RECV_WAIT)
      f |= DF_FEATURE_HBM | DF_FEATURE_HBM_BULK;
    if ((k == DF_COMM_HBM_RECV || k == DF_COMM_HBM_SEND) && comms[i].segment_count > 1)
      f |= DF_FEATURE_HBM_BULK;
  }
  for (uint32_t i = 0; i < slot_count; i++) {
    if (slots[i].flags & DF_SLOT_FLAG_CLUSTER_GATED_PUSH)
      f |= DF_FEATURE_GATED;
    if (slots[i].flags & DF_SLOT_FLAG_HBM_DIRECT_GLOBAL)
      f |= DF_FEATURE_DIRECT_GLOBAL;
    if (slots[i].flags & DF_SLOT_FLAG_SCRATCH_BACKED)
      f |= DF_FEATURE_SCRATCH;
  }
  return f;
}

/* Comm kinds (bit k = kind k) a kernel with features `f` can execute. */
static inline uint32_t df_plan_features_kinds(uint32_t f) {
  uint32_t k = 0;
  if (f & DF_FEATURE_CLUSTER_SEND)
    k |= 1u << DF_COMM_CLUSTER_SEND;
  if (f & DF_FEATURE_CLUSTER_RECV)
    k |= 1u << DF_COMM_CLUSTER_RECV;
  if (f & DF_FEATURE_RELEASE)
    k |= 1u << DF_COMM_CLUSTER_RELEASE;
  if (f & DF_FEATURE_HBM)
    k |= (1u << DF_COMM_HBM_SEND) | (1u << DF_COMM_HBM_RECV);
  if (f & DF_FEATURE_HBM_BULK)
    k |= (1u << DF_COMM_HBM_RECV_ISSUE) | (1u << DF_COMM_HBM_RECV_WAIT);
  return k;
}

/* Whether a kernel built with `kernel` features runs a plan needing `plan`. */
static inline bool df_plan_features_cover(uint32_t kernel, uint32_t plan) {
  return (plan & ~kernel & DF_FEATURES_ALL) == 0;
}

/* Handler workspace (docs/workspace.md). The generated module defines
   `const uint32_t df_handler_workspace_bytes`: the largest
   `df.workspace_bytes` of the handlers linked into the kernel (0 when
   none declares one). Like df_plan_features it stays a visible symbol of
   the image, so a launcher reads it (cuModuleGetGlobal; absent in images
   older than the workspace = 0). The device runtime places the workspace
   at the end of the CTA's dynamic shared memory, its start rounded down
   to DF_WORKSPACE_ALIGN; a launcher adds df_workspace_launch_bytes(W) to
   the plan's dynamic shared bytes so the round-down never reaches the
   plan's own bytes. */
#define DF_WORKSPACE_ALIGN 128u
/* The largest workspace a handler may declare: sm_90's 227 KiB opt-in
   dynamic shared memory per block. */
#define DF_WORKSPACE_MAX_BYTES 232448u

/* Dynamic shared bytes a launch adds for a workspace of `w` bytes. */
static inline uint32_t df_workspace_launch_bytes(uint32_t w) {
  return w ? w + DF_WORKSPACE_ALIGN : 0u;
}

/* --df-embed-plan: the plan's records and launch words as constant data in
   the kernel image. The kernel then ignores its parameters 0-8, 10, 11
   and 14-18 (plan records and launch words); tensor_args, global_staging,
   flags and scratch_offset still come from the launch. */
typedef struct df_plan_records {
  const df_abi_instr *instructions;
  const uint32_t *queue_offsets, *queue_lengths;
  const df_abi_slot *slots;
  const df_abi_comm *comms;
  const uint32_t *barrier_init_offsets, *barrier_init_lengths, *barrier_init_indices;
  const uint8_t *args;
  const uint32_t *input_slots, *task_coords;
  uint32_t shared_slot_base_offset, barrier_count, cluster_ack_count, cluster_size;
  uint32_t block_size;
} df_plan_records;

#ifdef __cplusplus
}
#endif

#endif
