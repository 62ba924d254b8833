/* The packed plan ABI: records and enumerations shared by the compiler,
   the host runtime and the device runtime. All records are little-endian
   arrays of u32 (u64 where noted) and 16-byte aligned. */
#ifndef DF_ABI_H
#define DF_ABI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DF_ABI_VERSION 8u
/* The kernel parameter ABI df's device runtime implements, in its image
   as the constant df_rt_kernel_abi (df_rt_kernel_info.kernel_abi): 1 =
   REFERENCE §6's 21 parameters, 2 = also parameters 21-22, the flag
   words a launch zeroes for the next one (df/runtime.h). */
#define DF_RT_KERNEL_ABI 2u
#define DF_SENTINEL 0xFFFFFFFFu
#define DF_SLOT_ALIGN 16u
#define DF_SHARED_ALIGN 16u
#define DF_BARRIER_BYTES 8u
#define DF_DYNAMIC_SHARED_ALIGN 1024u

/* Instruction opcodes as the device sees them. ITER also carries map and
   reshared instructions; REDUCE also carries reduce_update. */
typedef enum df_abi_opcode {
  DF_ABI_OP_EXIT = 0,
  DF_ABI_OP_ITER = 1,
  DF_ABI_OP_REDUCE = 2,
  DF_ABI_OP_FINALIZE = 3,
  DF_ABI_OP_CLUSTER_SYNC = 4,
  /* df extension (docs/pool.md): run instructions of the plan's pool,
     claimed one item at a time from a counter shared by every CTA, until
     the pool is empty; then go on with this queue. comm_offset = the
     pool's first instruction, flags = its items, task_id = instructions
     per item (an item ends early at an EXIT), slot_id = the counter's
     flag index; handler_id and arg_offset S, comm_count 0. */
  DF_ABI_OP_POOL = 5,
} df_abi_opcode;

/* Communication record kinds. */
typedef enum df_comm_kind {
  DF_COMM_NONE = 0,
  DF_COMM_CLUSTER_SEND = 1,
  DF_COMM_CLUSTER_RECV = 2,
  DF_COMM_HBM_SEND = 3,
  DF_COMM_HBM_RECV = 4,
  DF_COMM_CLUSTER_RELEASE = 5,
  DF_COMM_HBM_RECV_ISSUE = 6,
  DF_COMM_HBM_RECV_WAIT = 7,
} df_comm_kind;

/* Slot record flags. */
enum {
  DF_SLOT_FLAG_SCRATCH_BACKED = 1u,
  DF_SLOT_FLAG_HBM_DIRECT_GLOBAL = 2u,
  DF_SLOT_FLAG_CLUSTER_GATED_PUSH = 4u,
  DF_SLOT_FLAG_COMMUNICATE = 8u,
};

/* Handoff flags (args word 13). */
enum {
  DF_HANDOFF_PRODUCER = 1u,
  DF_HANDOFF_CONSUMER = 2u,
  DF_HANDOFF_TAIL = 4u,
  DF_HANDOFF_DISABLED = 8u,
};

/* Tensor dtype codes of tensor-arg records. */
enum {
  DF_TENSOR_DTYPE_UNKNOWN = 0,
  DF_TENSOR_DTYPE_INT = 1,
  DF_TENSOR_DTYPE_UINT = 2,
  DF_TENSOR_DTYPE_FLOAT = 3,
  DF_TENSOR_DTYPE_BFLOAT = 4,
  DF_TENSOR_DTYPE_BOOL = 5,
};

/* Tensor-arg record flags: where the record came from. */
enum {
  DF_TENSOR_ARG_RAW_POINTER = 1u,
  DF_TENSOR_ARG_ARRAY_INTERFACE = 2u,
  DF_TENSOR_ARG_DATA_PTR = 4u,
};

/* Cluster source wait actions (args word 14). */
enum {
  DF_SOURCE_WAIT_NONE = 0u,
  DF_SOURCE_WAIT_ALL = 1u,
  DF_SOURCE_WAIT_KEEP_NEWEST = 2u,
};

/* Instruction flags: low half cluster receive count, high half cluster
   send + release count. */
#define DF_INSTR_FLAGS_RECV_MASK 0xFFFFu
#define DF_INSTR_FLAGS_SEND_SHIFT 16u
#define DF_INSTR_FLAGS_MAX_COUNT 0xFFFFu

/* One queue entry, 32 bytes. */
typedef struct __attribute__((aligned(16))) df_abi_instr {
  uint32_t opcode;
  uint32_t handler_id;  /* S for exit / reshared / cluster_sync */
  uint32_t task_id;     /* S if none */
  uint32_t arg_offset;  /* byte offset into args; S for EXIT only */
  uint32_t comm_offset; /* first comm record dispatched here */
  uint32_t comm_count;
  uint32_t slot_id;     /* output slot, else first input, else S */
  uint32_t flags;
} df_abi_instr;

/* One intermediate slot, 32 bytes. */
typedef struct __attribute__((aligned(16))) df_abi_slot {
  uint32_t shared_offset;
  uint32_t global_offset;
  uint32_t bytes;
  uint32_t flag_index;
  uint32_t barrier_index; /* S = no barrier */
  uint32_t owner_cta;
  uint32_t flags;
  uint32_t reserved; /* scratch offset for scratch-backed slots */
} df_abi_slot;

/* One transfer half, 48 bytes. */
typedef struct __attribute__((aligned(16))) df_abi_comm {
  uint32_t kind;
  uint32_t src_slot_id;
  uint32_t dst_slot_id;
  uint32_t peer_cta_rank; /* cluster kinds only, else S */
  uint32_t barrier_phase;
  uint32_t flag_index; /* cluster: ACK index or S; HBM: flag or S */
  uint32_t flag_epoch;
  uint32_t barrier_index; /* HBM receive kinds only, else S */
  uint32_t byte_offset;
  uint32_t byte_count; /* 0 = whole slot */
  uint32_t segment_id;
  uint32_t segment_count;
} df_abi_comm;

/* Handler arguments of one non-EXIT instruction, 64 bytes. */
typedef struct __attribute__((aligned(16))) df_abi_args {
  uint32_t task_id;
  uint32_t task_coord_offset;
  uint32_t task_coord_count;
  uint32_t range_begin;
  uint32_t range_end;
  uint32_t input_slot_offset;
  uint32_t input_slot_count;
  uint32_t output_slot;
  uint32_t handoff_peer_arg_offset;
  uint32_t handoff_plan_index;
  uint32_t handoff_binding_index;
  uint32_t handoff_stage_count;
  uint32_t handoff_arena_slot;
  uint32_t handoff_flags;
  uint32_t reserved0; /* cluster source wait action */
  uint32_t reserved1;
} df_abi_args;

/* One tensor argument, 32 bytes. */
typedef struct __attribute__((aligned(16))) df_abi_tensor_arg {
  uint64_t data_ptr;
  uint32_t ndim;
  uint32_t dtype_code;
  uint32_t dtype_bits;
  uint32_t flags;
  uint64_t reserved;
} df_abi_tensor_arg;

_Static_assert(sizeof(df_abi_instr) == 32, "instruction record is 32 bytes");
_Static_assert(sizeof(df_abi_slot) == 32, "slot record is 32 bytes");
_Static_assert(sizeof(df_abi_comm) == 48, "comm record is 48 bytes");
_Static_assert(sizeof(df_abi_args) == 64, "args record is 64 bytes");
_Static_assert(sizeof(df_abi_tensor_arg) == 32, "tensor arg record is 32 bytes");
_Static_assert(__builtin_offsetof(df_abi_instr, flags) == 28, "instr layout");
_Static_assert(__builtin_offsetof(df_abi_slot, reserved) == 28, "slot layout");
_Static_assert(__builtin_offsetof(df_abi_comm, segment_count) == 44, "comm layout");
_Static_assert(__builtin_offsetof(df_abi_args, reserved1) == 60, "args layout");
_Static_assert(__builtin_offsetof(df_abi_tensor_arg, reserved) == 24, "tensor arg layout");

#ifdef __cplusplus
}
#endif

#endif
