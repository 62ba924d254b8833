"""ctypes mirrors of the C types the bindings use (include/df/*.h) and the
signatures of the functions they call. ``check_layouts`` compares every
mirror with the sizes and offsets libdf.so reports, so a header change that
is not mirrored here fails loudly instead of corrupting memory."""

from __future__ import annotations

import ctypes
from ctypes import (POINTER, Structure, c_bool, c_char, c_char_p, c_int, c_int32, c_int64,
                    c_size_t, c_uint8, c_uint32, c_uint64, c_void_p)

NAME_MAX = 64
MAX_AXES = 8
FUSE_MAX_PARTS = 8
MAX_RANK = 8
u32 = c_uint32
enum = c_int


def _chars(n):
    return c_char * n


class df_status(Structure):
    _fields_ = [("code", enum), ("message", _chars(512))]


class df_allocator(Structure):
    _fields_ = [("realloc", c_void_p), ("user", c_void_p)]


# ---- program.h --------------------------------------------------------------------------

class df_field(Structure):
    _fields_ = [("name", _chars(NAME_MAX)), ("dtype", enum), ("rank", u32),
                ("shape", u32 * MAX_RANK)]


class df_itype(Structure):
    _fields_ = [("name", _chars(NAME_MAX)), ("field_count", u32), ("fields", POINTER(df_field))]


class df_param(Structure):
    _fields_ = [("name", _chars(NAME_MAX)), ("kind", enum), ("type", c_int32)]


class df_binding(Structure):
    _fields_ = [("param", _chars(NAME_MAX)), ("tensor", _chars(NAME_MAX))]


class df_stage(Structure):
    _fields_ = [("name", _chars(NAME_MAX)), ("kind", enum), ("op", c_int32), ("input", c_int32),
                ("range_axis", _chars(NAME_MAX)), ("task_arg_count", u32),
                ("task_args", _chars(NAME_MAX) * MAX_AXES), ("binding_count", u32),
                ("bindings", POINTER(df_binding)), ("type", c_int32), ("logical_type", c_int32),
                ("output_arity", u32), ("policy", _chars(NAME_MAX))]


class df_range_decl(Structure):
    _fields_ = [("axis", _chars(NAME_MAX)), ("source", _chars(NAME_MAX))]


class df_program(Structure):
    # impls is a df_impl * (impl.h, mirrored below)
    _fields_ = [("alloc", df_allocator), ("name", _chars(NAME_MAX)), ("axis_count", u32),
                ("axes", _chars(NAME_MAX) * MAX_AXES), ("range_count", u32),
                ("ranges", df_range_decl * MAX_AXES), ("type_count", u32),
                ("types", POINTER(df_itype)), ("op_count", u32), ("ops", c_void_p),
                ("stage_count", u32), ("stages", POINTER(df_stage)), ("impl_count", u32),
                ("impls", c_void_p), ("select_arch", u32), ("transfer_tile_bytes", u32),
                ("memory_auto", u32), ("shared_memory_limit", u32), ("auto_policy", u32),
                ("split_auto", u32)]


# ---- plan.h -----------------------------------------------------------------------------

class df_topology(Structure):
    _fields_ = [("sm_count", u32), ("cluster_size", u32)]


class df_identity(Structure):
    _fields_ = [("operator_id", u32), ("kind", enum)]


class df_variant(Structure):
    _fields_ = [("base", df_identity), ("schema_version", u32), ("has_iter", c_bool),
                ("iter_mode", enum), ("iter_value", u32), ("has_arity", c_bool),
                ("arity", enum)]


class df_iter_buckets(Structure):
    _fields_ = [("enabled", c_bool), ("count", u32), ("values", u32 * 64), ("generic", c_bool)]


class df_exact_lengths(Structure):
    _fields_ = [("count", u32), ("values", u32 * 64)]


class df_instr(Structure):
    _fields_ = [("id", u32), ("op", enum), ("task", u32), ("sm", u32), ("has_range", c_bool),
                ("range_begin", u32), ("range_end", u32), ("input_offset", u32),
                ("input_count", u32), ("output_slot", u32), ("stage", c_int32),
                ("has_identity", c_bool), ("identity", df_identity), ("has_variant", c_bool),
                ("variant", df_variant), ("impl", u32), ("fused", c_bool)]


class df_slot(Structure):
    _fields_ = [("id", u32), ("task", u32), ("type", c_int32), ("role", enum), ("stage", c_int32),
                ("producer", u32), ("shared_storage", u32), ("global_storage", u32),
                ("private_shared", c_bool), ("scratch_backed", c_bool),
                ("has_scratch_offset", c_bool), ("scratch_offset", u32), ("owner", u32),
                ("gated", c_bool)]


class df_comm(Structure):
    _fields_ = [("kind", enum), ("src_instr", u32), ("dst_instr", u32), ("src_slot", u32),
                ("dst_slot", u32), ("producer_sm", u32), ("consumer_sm", u32),
                ("dispatch_instr", u32), ("peer_cta_rank", u32), ("flag_epoch", u32),
                ("barrier_phase", u32), ("byte_offset", u32), ("byte_count", u32),
                ("segment_id", u32), ("segment_count", u32), ("gate_id", u32)]


class df_plan_type(Structure):
    _fields_ = [("name", _chars(NAME_MAX)), ("bytes", u32)]


class df_plan_stage(Structure):
    _fields_ = [("name", _chars(NAME_MAX)), ("op_name", _chars(NAME_MAX)), ("kind", enum),
                ("op_kind", enum)]


class df_plan_impl_name(Structure):
    _fields_ = [("name", _chars(NAME_MAX))]


class df_plan(Structure):
    _fields_ = [("alloc", df_allocator), ("topology", df_topology), ("block_size", u32),
                ("range_axis", _chars(NAME_MAX)), ("policy", enum), ("strategy", enum),
                ("extent_count", u32), ("extents", u32 * MAX_AXES), ("task_count", u32),
                ("task_lengths", POINTER(u32)), ("stage_count", u32),
                ("stages", POINTER(df_plan_stage)), ("type_count", u32),
                ("types", POINTER(df_plan_type)), ("instr_count", u32), ("instr_cap", u32),
                ("instrs", POINTER(df_instr)), ("slot_count", u32), ("slot_cap", u32),
                ("slots", POINTER(df_slot)), ("comm_count", u32), ("comm_cap", u32),
                ("comms", POINTER(df_comm)), ("input_count", u32), ("input_cap", u32),
                ("inputs", POINTER(u32)), ("queue_offsets", POINTER(u32)),
                ("queue_lengths", POINTER(u32)), ("queue_id_count", u32),
                ("queue_id_cap", u32), ("queue_ids", POINTER(u32)), ("impl_count", u32),
                ("impl_names", POINTER(df_plan_impl_name)), ("split_auto", c_bool),
                ("split_balance_iters", c_bool), ("split_defer_reduces", c_bool),
                ("split_model_us", ctypes.c_double), ("pool", c_bool)]


# ---- impl.h -----------------------------------------------------------------------------

class df_impl(Structure):
    _fields_ = [("name", _chars(NAME_MAX)), ("op", _chars(NAME_MAX)), ("origin", enum),
                ("iter", enum), ("iter_value", u32), ("has_arity", c_bool), ("arity", enum),
                ("dtype", enum), ("min_arch", enum), ("general", c_bool),
                ("library", _chars(NAME_MAX))]


class df_select_options(Structure):
    _fields_ = [("arch", enum), ("replacements", POINTER(df_impl)),
                ("replacement_count", u32)]


class df_range_lengths(Structure):
    _fields_ = [("axis", c_char_p), ("count", u32), ("lengths", POINTER(u32)),
                ("offsets", POINTER(u32))]


class df_split_cost(Structure):
    _fields_ = [("per_unit_us", ctypes.c_double), ("per_partial_us", ctypes.c_double),
                ("reduce_us", ctypes.c_double), ("reduce_per_input_us", ctypes.c_double),
                ("finalize_us", ctypes.c_double), ("hbm_edge_us", ctypes.c_double),
                ("slot_bytes", u32), ("slot_budget", u32)]


class df_split_search(Structure):
    _fields_ = [("step", u32), ("min_block", u32), ("max_block", u32), ("cost", df_split_cost)]


class df_schedule_options(Structure):
    _fields_ = [("topology", df_topology), ("block_size", u32), ("range_count", u32),
                ("ranges", df_range_lengths * MAX_AXES), ("extent_count", u32),
                ("extents", u32 * MAX_AXES), ("policy", enum), ("strategy", enum),
                ("include_exit", c_bool), ("force_hbm_comms", c_bool), ("partial_only", c_bool),
                ("buckets", df_iter_buckets), ("bucket_size", u32),
                ("exact_lengths", df_exact_lengths), ("transfer_tile_bytes", u32),
                ("select", POINTER(df_select_options)), ("defer_select", c_bool), ("defer_reduces", c_bool),
                ("balance_iters", c_bool), ("even_split", c_bool),
                ("even_split_granularity", u32), ("even_split_chunks", u32),
                ("even_split_task_cost", u32), ("reduce_fan_in", u32),
                ("auto_split", c_bool), ("split", df_split_search), ("reduce_spread", c_bool),
                ("skip_unary_reduce", c_bool), ("reduce_sms", u32),
                ("pool", c_bool), ("even_split_taper", u32), ("even_split_taper_min", u32)]


class df_barrier_alloc(Structure):
    _fields_ = [("barrier_count", u32), ("slot_count", u32), ("comm_count", u32),
                ("slot_barrier", POINTER(u32)), ("comm_barrier", POINTER(u32)),
                ("comm_phase", POINTER(u32)), ("comm_ack", POINTER(u32)), ("ack_count", u32)]


class df_layout_options(Structure):
    _fields_ = [("hbm_direct_global", c_bool), ("direct_count", u32),
                ("direct_slots", POINTER(u32)), ("reuse_hbm_flags", c_bool),
                ("per_cta_shared", c_bool), ("reuse_dead_shared", c_bool)]


class df_handler(Structure):
    _fields_ = [("id", u32), ("name", _chars(NAME_MAX)), ("kind", enum),
                ("has_identity", c_bool), ("identity", df_identity), ("has_variant", c_bool),
                ("variant", df_variant), ("primary", c_bool), ("symbol", _chars(2 * NAME_MAX)),
                ("impl", _chars(NAME_MAX)), ("part_count", u32), ("parts", u32 * FUSE_MAX_PARTS)]


class df_named_index(Structure):
    _fields_ = [("name", _chars(NAME_MAX)), ("index", u32), ("kind", enum)]


LAUNCH_U32_FIELDS = (
    "abi_version", "sm_count", "cluster_size", "barrier_count", "barrier_bytes",
    "cluster_ack_count", "cluster_ack_barrier_bytes", "cluster_ack_pending_bytes",
    "hbm_recv_state_bytes", "shared_control_bytes", "shared_slot_base_offset",
    "shared_slot_bytes", "shared_memory_bytes", "flag_count", "flags_bytes",
    "global_staging_bytes", "slot_count", "comm_count", "arg_count", "instruction_count",
    "scratch_slot_count", "scratch_bytes", "cluster_inbox_offset", "cluster_inbox_bytes",
)


class df_launch_package(Structure):
    _fields_ = [(name, u32) for name in LAUNCH_U32_FIELDS] + [
        ("needs_flag_reset", c_bool), ("barrier_init_offsets", POINTER(u32)),
        ("barrier_init_lengths", POINTER(u32)), ("barrier_init_count", u32),
        ("barrier_init_indices", POINTER(u32))]


class df_pack_options(Structure):
    _fields_ = [("layout", df_layout_options), ("handler_order", POINTER(u32)),
                ("handler_order_count", u32), ("skip_fingerprint", c_bool)]


class df_packed(Structure):
    _fields_ = [("alloc", df_allocator), ("abi_version", u32), ("topology", df_topology),
                ("instr_count", u32), ("slot_count", u32), ("comm_count", u32),
                ("arg_count", u32), ("instrs", c_void_p), ("pack_order", POINTER(u32)),
                ("slots", c_void_p), ("comms", c_void_p), ("args", c_void_p),
                ("queue_offsets", POINTER(u32)), ("queue_lengths", POINTER(u32)),
                ("input_slot_count", u32), ("task_coord_count", u32),
                ("input_slots", POINTER(u32)), ("task_coords", POINTER(u32)),
                ("handler_count", u32), ("primary_handler_count", u32),
                ("handlers", POINTER(df_handler)), ("operator_count", u32),
                ("operators", POINTER(df_named_index)), ("type_count", u32),
                ("types", POINTER(df_named_index)), ("barriers", df_barrier_alloc),
                ("shared_slot_bytes", u32), ("global_staging_bytes", u32),
                ("scratch_bytes", u32), ("launch", df_launch_package),
                ("fingerprint", _chars(65))]


class df_shared_entry(Structure):
    _fields_ = [("name", c_char_p), ("value", c_uint64)]


# ---- MLIR C API handles (compiler.h) ------------------------------------------------------

class MlirContext(Structure):
    _fields_ = [("ptr", c_void_p)]


class MlirOperation(Structure):
    _fields_ = [("ptr", c_void_p)]


MIRRORS = {
    "df_status": df_status, "df_allocator": df_allocator, "df_field": df_field,
    "df_itype": df_itype, "df_param": df_param, "df_binding": df_binding, "df_stage": df_stage,
    "df_topology": df_topology, "df_identity": df_identity, "df_variant": df_variant,
    "df_iter_buckets": df_iter_buckets, "df_exact_lengths": df_exact_lengths,
    "df_instr": df_instr, "df_slot": df_slot, "df_comm": df_comm, "df_plan_type": df_plan_type,
    "df_range_decl": df_range_decl, "df_program": df_program,
    "df_plan_stage": df_plan_stage, "df_plan_impl_name": df_plan_impl_name,
    "df_plan": df_plan, "df_impl": df_impl, "df_select_options": df_select_options,
    "df_range_lengths": df_range_lengths,
    "df_schedule_options": df_schedule_options, "df_barrier_alloc": df_barrier_alloc,
    "df_layout_options": df_layout_options, "df_handler": df_handler,
    "df_named_index": df_named_index, "df_launch_package": df_launch_package,
    "df_pack_options": df_pack_options, "df_packed": df_packed,
}

STATUS = df_status
P = c_void_p  # opaque df object pointers (df_program *, df_plan *, df_packed *, FILE *)


# Entry points newer than the rest (lib/Shared/host_api.c, compile_api.c): a
# library built before them still loads; calling them says to rebuild.
OPTIONAL = {"df_shared_host_run", "df_shared_host_run_info_free",
            "df_shared_has_device_runtime", "df_shared_emit_ptx", "df_shared_handlers_create",
            "df_shared_handlers_add_mlir", "df_shared_handlers_text",
            "df_shared_handlers_emit_ptx", "df_shared_handlers_emit_host",
            "df_shared_handlers_destroy"}


def _sig(dll, name, restype, *argtypes):
    try:
        fn = getattr(dll, name)
    except AttributeError:
        if name not in OPTIONAL:
            raise
        return
    fn.restype = restype
    fn.argtypes = list(argtypes)


def declare_core(dll) -> None:
    S = STATUS
    pI = POINTER(c_int)
    pP = POINTER(c_void_p)
    pu32 = POINTER(u32)
    alloc = POINTER(df_allocator)
    sigs = [
        ("df_shared_constants", POINTER(df_shared_entry), pu32),
        ("df_shared_layouts", POINTER(df_shared_entry), pu32),
        ("df_shared_free", None, c_void_p),
        # program.h
        ("df_dtype_name", c_char_p, enum), ("df_dtype_bytes", u32, enum),
        ("df_dtype_code", u32, enum), ("df_dtype_bits", u32, enum),
        ("df_dtype_parse", S, c_char_p, pI),
        ("df_itype_slot_bytes", u32, POINTER(df_itype)),
        ("df_op_kind_name", c_char_p, enum), ("df_op_kind_parse", S, c_char_p, pI),
        ("df_stage_kind_name", c_char_p, enum),
        ("df_program_create", S, alloc, c_char_p, pP), ("df_program_destroy", None, P),
        ("df_program_add_axis", S, P, c_char_p), ("df_program_add_range", S, P, c_char_p, c_char_p),
        ("df_program_add_type", S, P, c_char_p, u32, POINTER(df_field), POINTER(c_int32)),
        ("df_program_add_operator", S, P, c_char_p, enum, u32, POINTER(df_param), c_int32,
         POINTER(c_int32)),
        ("df_program_add_stage", S, P, POINTER(df_stage), POINTER(c_int32)),
        ("df_program_validate_at", S, P, POINTER(c_int32)),
        ("df_program_tensor_args", u32, P, POINTER(c_char_p), u32),
        ("df_program_dump", S, P, P),
        # impl.h: implementations by capability region, built-in handlers
        ("df_arch_name", c_char_p, enum), ("df_arch_parse", S, c_char_p, pI),
        ("df_impl_origin_name", c_char_p, enum),
        ("df_impl_check", S, POINTER(df_impl)), ("df_impl_parse", S, c_char_p, POINTER(df_impl)),
        ("df_impl_region", c_int, POINTER(df_impl), c_char_p, c_size_t),
        ("df_library_names", c_char_p),
        ("df_program_add_impl", S, P, POINTER(df_impl)),
        ("df_program_set_library", S, P, c_char_p, c_char_p),
        ("df_program_set_handler_workspace", S, P, c_char_p, c_int64),
        ("df_program_workspace_bytes", u32, P),
        # plan.h: names and variants
        ("df_topology_check", S, POINTER(df_topology)),
        ("df_iter_mode_name", c_char_p, enum), ("df_iter_mode_parse", S, c_char_p, pI),
        ("df_iter_spec_check", S, enum, c_bool, c_int64),
        ("df_arity_class_name", c_char_p, enum),
        ("df_arity_class_for", S, c_bool, c_int64, pI),
        ("df_variant_check", S, POINTER(df_variant)),
        ("df_variant_default", S, df_identity, c_int64, POINTER(df_variant)),
        ("df_variant_compare", c_int, POINTER(df_variant), POINTER(df_variant)),
        ("df_variant_diag_name", c_int, POINTER(df_variant), c_char_p, c_char_p, c_size_t),
        ("df_identity_to_json", c_int, POINTER(df_identity), c_char_p, c_size_t),
        ("df_identity_from_json", S, c_char_p, POINTER(df_identity)),
        ("df_variant_to_json", c_int, POINTER(df_variant), c_char_p, c_size_t),
        ("df_variant_from_json", S, c_char_p, POINTER(df_variant)),
        ("df_iter_buckets_parse", S, c_char_p, POINTER(df_iter_buckets)),
        ("df_exact_lengths_parse", S, c_char_p, POINTER(df_exact_lengths)),
        ("df_instr_op_name", c_char_p, enum), ("df_instr_op_parse", S, c_char_p, pI),
        ("df_comm_kind_name", c_char_p, enum), ("df_comm_kind_parse", S, c_char_p, pI),
        ("df_slot_role_name", c_char_p, enum), ("df_slot_role_parse", S, c_char_p, pI),
        ("df_policy_name", c_char_p, enum), ("df_policy_parse", S, c_char_p, pI),
        ("df_reduce_strategy_name", c_char_p, enum),
        ("df_reduce_strategy_parse", S, c_char_p, pI),
        # plan.h: the plan container
        ("df_plan_create", S, alloc, df_topology, pP), ("df_plan_destroy", None, P),
        ("df_plan_add_type", S, P, c_char_p, u32, POINTER(c_int32)),
        ("df_plan_add_stage", S, P, POINTER(df_plan_stage), POINTER(c_int32)),
        ("df_plan_add_instr", S, P, POINTER(df_instr), pu32, u32, pu32),
        ("df_plan_add_slot", S, P, POINTER(df_slot), pu32),
        ("df_plan_add_comm", S, P, POINTER(df_comm)),
        ("df_plan_set_tasks", S, P, u32, pu32),
        ("df_plan_set_queues", S, P, pu32, pu32, u32),
        ("df_plan_adopt_program", S, P, P),
        ("df_plan_intern_impl", S, P, c_char_p, pu32),
        ("df_plan_task_coords", u32, P, u32, pu32),
        # scheduling, barriers, layout, packing
        ("df_schedule_options_default", df_schedule_options),
        ("df_schedule", S, P, POINTER(df_schedule_options), pP),
        ("df_plan_attach_handlers", S, P),
        ("df_allocate_barriers", S, P, alloc, POINTER(df_barrier_alloc)),
        ("df_barrier_alloc_free", None, POINTER(df_barrier_alloc), alloc),
        ("df_barrier_alloc_check", S, P, POINTER(df_barrier_alloc)),
        ("df_pack", S, P, POINTER(df_pack_options), alloc, pP),
        ("df_packed_destroy", None, P),
        ("df_launch_package_build", S, P, POINTER(df_launch_package)),
        ("df_launch_package_free", None, POINTER(df_launch_package), alloc),
        ("df_plan_fingerprint", S, P, c_char_p),
        # blob.h
        ("df_blob_write", S, P, P, alloc, POINTER(POINTER(c_uint8)), POINTER(c_size_t)),
        ("df_blob_read", S, c_char_p, c_size_t, alloc, pP, pP),
        ("df_packed_dump_text", S, P, P), ("df_packed_dump_json", S, P, P),
        # host_api.h: the host backend
        ("df_shared_host_run", S, P, c_char_p, c_void_p, u32, c_void_p, c_void_p),
        ("df_shared_host_run_info_free", None, c_void_p),
    ]
    for name, restype, *argtypes in sigs:
        _sig(dll, name, restype, *argtypes)
    check_layouts(dll)


def declare_compiler(dll) -> None:
    S = STATUS
    sigs = [
        ("df_compiler_shared_available", c_int),
        ("df_context_create", S, POINTER(MlirContext)),
        ("mlirContextDestroy", None, MlirContext),
        ("mlirOperationDestroy", None, MlirOperation),
        ("df_parse_module", S, MlirContext, c_char_p, c_size_t, c_char_p, POINTER(MlirOperation)),
        ("df_program_from_module", S, MlirOperation, c_char_p, POINTER(df_allocator),
         POINTER(c_void_p)),
        ("df_program_to_mlir_text", S, P, POINTER(c_void_p)),
        # compile_api.h: PTX with the embedded device runtime
        ("df_shared_has_device_runtime", c_int),
        ("df_shared_emit_ptx", S, P, P, c_char_p, POINTER(c_char_p), ctypes.c_uint,
         POINTER(c_void_p), POINTER(c_size_t)),
        # compile_api.h: the program module with MLIR handler bodies merged in
        ("df_shared_handlers_create", S, P, POINTER(c_void_p)),
        ("df_shared_handlers_add_mlir", S, P, c_char_p, c_char_p, c_size_t),
        ("df_shared_handlers_text", S, P, POINTER(c_void_p)),
        ("df_shared_handlers_emit_ptx", S, P, P, c_char_p, POINTER(c_char_p), ctypes.c_uint,
         POINTER(c_void_p), POINTER(c_size_t)),
        ("df_shared_handlers_emit_host", S, P, P, c_char_p, POINTER(c_char_p), ctypes.c_uint,
         c_char_p),
        ("df_shared_handlers_destroy", None, P),
    ]
    for name, restype, *argtypes in sigs:
        _sig(dll, name, restype, *argtypes)


def declare_runtime(dll) -> None:
    """libdfrt is optional; its entry points are declared on first load."""
    from ._ctypes_rt import declare_runtime as declare

    declare(dll)


def read_table(fn) -> dict[str, int]:
    count = u32()
    entries = fn(ctypes.byref(count))
    return {entries[i].name.decode(): int(entries[i].value) for i in range(count.value)}


def check_layouts(dll) -> None:
    from ._ctypes_rt import MIRRORS as RT_MIRRORS

    MIRRORS.update(RT_MIRRORS)
    layouts = read_table(dll.df_shared_layouts)
    problems = []
    for key, value in layouts.items():
        what, _, ref = key.partition(" ")
        type_name, _, field = ref.partition(".")
        mirror = MIRRORS.get(type_name)
        if mirror is None:
            continue
        have = ctypes.sizeof(mirror) if what == "sizeof" else getattr(mirror, field).offset
        if have != value:
            problems.append(f"{key}: C {value}, Python {have}")
    if problems:
        raise ImportError("df: the ctypes mirrors in dataflow/_ctypes.py do not match libdf.so "
                          "(update them with the headers): " + "; ".join(problems))
