/* Constant and layout tables of libdf.so for the Python bindings. */
#include <stddef.h>
#include <stdlib.h>

#include "df/abi.h"
#include "df/blob.h"
#include "df/impl.h"
#include "df/plan.h"
#include "df/program.h"
#include "df/runtime.h"
#include "host_api.h"
#include "shared.h"

#define C(name) {#name, (uint64_t)(name)}

static const df_shared_entry constants[] = {
    C(DF_ABI_VERSION), C(DF_SENTINEL), C(DF_SLOT_ALIGN), C(DF_SHARED_ALIGN),
    C(DF_BARRIER_BYTES), C(DF_DYNAMIC_SHARED_ALIGN),
    C(DF_SLOT_FLAG_SCRATCH_BACKED), C(DF_SLOT_FLAG_HBM_DIRECT_GLOBAL),
    C(DF_SLOT_FLAG_CLUSTER_GATED_PUSH), C(DF_SLOT_FLAG_COMMUNICATE),
    C(DF_HANDOFF_PRODUCER), C(DF_HANDOFF_CONSUMER), C(DF_HANDOFF_TAIL), C(DF_HANDOFF_DISABLED),
    C(DF_TENSOR_DTYPE_UNKNOWN), C(DF_TENSOR_DTYPE_INT), C(DF_TENSOR_DTYPE_UINT),
    C(DF_TENSOR_DTYPE_FLOAT), C(DF_TENSOR_DTYPE_BFLOAT), C(DF_TENSOR_DTYPE_BOOL),
    C(DF_TENSOR_ARG_RAW_POINTER), C(DF_TENSOR_ARG_ARRAY_INTERFACE), C(DF_TENSOR_ARG_DATA_PTR),
    C(DF_SOURCE_WAIT_NONE), C(DF_SOURCE_WAIT_ALL), C(DF_SOURCE_WAIT_KEEP_NEWEST),
    C(DF_INSTR_FLAGS_RECV_MASK), C(DF_INSTR_FLAGS_SEND_SHIFT), C(DF_INSTR_FLAGS_MAX_COUNT),
    C(DF_ABI_OP_EXIT), C(DF_ABI_OP_ITER), C(DF_ABI_OP_REDUCE), C(DF_ABI_OP_FINALIZE),
    C(DF_ABI_OP_CLUSTER_SYNC), C(DF_ABI_OP_POOL),
    C(DF_VARIANT_SCHEMA_VERSION), C(DF_NAME_MAX), C(DF_MAX_AXES), C(DF_MAX_RANK),
    C(DF_INSTR_OP_COUNT), C(DF_ROLE_COUNT), C(DF_DTYPE_COUNT), C(DF_BLOB_FORMAT_VERSION),
    C(DF_STATUS_MESSAGE_MAX), C(DF_FUSE_MAX_PARTS),
};

#define SIZE(t) {"sizeof " #t, sizeof(t)}
#define OFF(t, f) {"offsetof " #t "." #f, offsetof(t, f)}

static const df_shared_entry layouts[] = {
    SIZE(df_status), SIZE(df_allocator), SIZE(df_field), SIZE(df_itype), SIZE(df_param),
    SIZE(df_binding), SIZE(df_stage), OFF(df_stage, bindings), OFF(df_stage, policy),
    SIZE(df_range_decl), SIZE(df_program), OFF(df_program, ranges), OFF(df_program, ops),
    OFF(df_program, impl_count), OFF(df_program, impls), OFF(df_program, select_arch),
    OFF(df_program, split_auto),
    SIZE(df_topology), SIZE(df_identity), SIZE(df_variant), OFF(df_variant, arity),
    SIZE(df_iter_buckets), SIZE(df_exact_lengths),
    SIZE(df_instr), OFF(df_instr, stage), OFF(df_instr, variant), OFF(df_instr, impl), OFF(df_instr, fused),
    SIZE(df_slot), OFF(df_slot, owner), OFF(df_slot, gated),
    SIZE(df_comm), OFF(df_comm, gate_id), SIZE(df_plan_type), SIZE(df_plan_stage),
    SIZE(df_plan), OFF(df_plan, instrs), OFF(df_plan, queue_ids), OFF(df_plan, impl_names),
    SIZE(df_range_lengths), SIZE(df_schedule_options), OFF(df_schedule_options, buckets),
    OFF(df_schedule_options, exact_lengths), OFF(df_schedule_options, transfer_tile_bytes),
    OFF(df_schedule_options, select), OFF(df_schedule_options, defer_select),
    OFF(df_schedule_options, defer_reduces), OFF(df_schedule_options, balance_iters),
    OFF(df_schedule_options, even_split), OFF(df_schedule_options, even_split_granularity),
    OFF(df_schedule_options, even_split_chunks), OFF(df_schedule_options, even_split_task_cost),
    OFF(df_schedule_options, reduce_fan_in), OFF(df_schedule_options, auto_split),
    OFF(df_schedule_options, split), OFF(df_schedule_options, reduce_spread),
    OFF(df_schedule_options, reduce_sms), OFF(df_schedule_options, pool),
    OFF(df_schedule_options, even_split_taper), OFF(df_schedule_options, even_split_taper_min),
    OFF(df_plan, pool),
    OFF(df_schedule_options, skip_unary_reduce), SIZE(df_split_cost), SIZE(df_split_search),
    OFF(df_split_search, cost), OFF(df_plan, split_auto), OFF(df_plan, split_model_us),
    SIZE(df_barrier_alloc), SIZE(df_layout_options), SIZE(df_handler), OFF(df_handler, symbol),
    OFF(df_handler, impl), OFF(df_handler, parts),
    SIZE(df_named_index), SIZE(df_launch_package), OFF(df_launch_package, needs_flag_reset),
    OFF(df_launch_package, barrier_init_indices), SIZE(df_pack_options),
    OFF(df_pack_options, handler_order), OFF(df_pack_options, skip_fingerprint),
    SIZE(df_packed), OFF(df_packed, handlers), OFF(df_packed, barriers), OFF(df_packed, launch),
    OFF(df_packed, fingerprint),
    /* impl.h */
    SIZE(df_impl), OFF(df_impl, op), OFF(df_impl, iter_value), OFF(df_impl, arity),
    OFF(df_impl, min_arch), OFF(df_impl, general), OFF(df_impl, library),
    SIZE(df_select_options), OFF(df_select_options, replacements),
    OFF(df_select_options, replacement_count), SIZE(df_plan_impl_name),
    SIZE(df_abi_instr), SIZE(df_abi_slot), SIZE(df_abi_comm), SIZE(df_abi_args),
    SIZE(df_abi_tensor_arg),
    /* host_api.h */
    SIZE(df_shared_host_run_options), SIZE(df_shared_host_run_info),
    OFF(df_shared_host_run_info, makespan_cycles), OFF(df_shared_host_run_info, cost),
    /* runtime.h (libdfrt; the bindings declare its entry points) */
    SIZE(df_rt_device_info), OFF(df_rt_device_info, sm_count),
    OFF(df_rt_device_info, cluster_launch), SIZE(df_rt_tensor),
    OFF(df_rt_tensor, device_type), OFF(df_rt_tensor, dtype_bits),
    SIZE(df_rt_tma_spec), OFF(df_rt_tma_spec, interleave), SIZE(df_rt_tma_binding),
    SIZE(df_rt_executable_options), OFF(df_rt_executable_options, tma_specs),
    OFF(df_rt_executable_options, stream), SIZE(df_rt_launch_info),
    OFF(df_rt_launch_info, flags_alternate), OFF(df_rt_launch_info, param_count),
    OFF(df_rt_launch_info, plan_bytes),
    SIZE(df_patch_result), OFF(df_patch_result, changed), OFF(df_patch_result, reason),
};

const df_shared_entry *df_shared_constants(uint32_t *count) {
  *count = (uint32_t)(sizeof constants / sizeof constants[0]);
  return constants;
}

const df_shared_entry *df_shared_layouts(uint32_t *count) {
  *count = (uint32_t)(sizeof layouts / sizeof layouts[0]);
  return layouts;
}

void df_shared_free(void *p) { free(p); }
