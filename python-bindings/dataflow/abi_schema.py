"""The packed-plan ABI as df's C headers define it (include/df/abi.h): the
constants are read from libdf.so, the record layouts are ``struct.Struct``
objects whose sizes are checked against the C records."""

from __future__ import annotations

import struct

from . import _ctypes as C
from ._lib import lib

_CONSTANTS = C.read_table(lib.df_shared_constants)
_LAYOUTS = C.read_table(lib.df_shared_layouts)


def constant(name: str) -> int:
    """A constant of abi.h / plan.h / program.h by its C name."""
    return _CONSTANTS[name]


ABI_VERSION = constant("DF_ABI_VERSION")
UINT32_SENTINEL = constant("DF_SENTINEL")
SLOT_ALIGNMENT = constant("DF_SLOT_ALIGN")
SHARED_ALIGNMENT = constant("DF_SHARED_ALIGN")
BARRIER_BYTES = constant("DF_BARRIER_BYTES")
DYNAMIC_SHARED_ALIGNMENT = constant("DF_DYNAMIC_SHARED_ALIGN")
VARIANT_SCHEMA_VERSION = constant("DF_VARIANT_SCHEMA_VERSION")

DATAFLOW_SLOT_FLAG_SCRATCH_BACKED = constant("DF_SLOT_FLAG_SCRATCH_BACKED")
DATAFLOW_SLOT_FLAG_HBM_DIRECT_GLOBAL = constant("DF_SLOT_FLAG_HBM_DIRECT_GLOBAL")
DATAFLOW_SLOT_FLAG_CLUSTER_GATED_PUSH = constant("DF_SLOT_FLAG_CLUSTER_GATED_PUSH")
DATAFLOW_SLOT_FLAG_COMMUNICATE = constant("DF_SLOT_FLAG_COMMUNICATE")

DATAFLOW_HANDOFF_FLAG_PRODUCER = constant("DF_HANDOFF_PRODUCER")
DATAFLOW_HANDOFF_FLAG_CONSUMER = constant("DF_HANDOFF_CONSUMER")
DATAFLOW_HANDOFF_FLAG_TAIL = constant("DF_HANDOFF_TAIL")
DATAFLOW_HANDOFF_FLAG_DISABLED = constant("DF_HANDOFF_DISABLED")

DATAFLOW_TENSOR_DTYPE_UNKNOWN = constant("DF_TENSOR_DTYPE_UNKNOWN")
DATAFLOW_TENSOR_DTYPE_INT = constant("DF_TENSOR_DTYPE_INT")
DATAFLOW_TENSOR_DTYPE_UINT = constant("DF_TENSOR_DTYPE_UINT")
DATAFLOW_TENSOR_DTYPE_FLOAT = constant("DF_TENSOR_DTYPE_FLOAT")
DATAFLOW_TENSOR_DTYPE_BFLOAT = constant("DF_TENSOR_DTYPE_BFLOAT")
DATAFLOW_TENSOR_DTYPE_BOOL = constant("DF_TENSOR_DTYPE_BOOL")

DATAFLOW_TENSOR_ARG_FLAG_RAW_POINTER = constant("DF_TENSOR_ARG_RAW_POINTER")
DATAFLOW_TENSOR_ARG_FLAG_CUDA_ARRAY_INTERFACE = constant("DF_TENSOR_ARG_ARRAY_INTERFACE")
DATAFLOW_TENSOR_ARG_FLAG_DATA_PTR = constant("DF_TENSOR_ARG_DATA_PTR")

DATAFLOW_CLUSTER_SOURCE_WAIT_NONE = constant("DF_SOURCE_WAIT_NONE")
DATAFLOW_CLUSTER_SOURCE_WAIT_ALL = constant("DF_SOURCE_WAIT_ALL")
DATAFLOW_CLUSTER_SOURCE_WAIT_KEEP_NEWEST = constant("DF_SOURCE_WAIT_KEEP_NEWEST")

INSTRUCTION_FLAGS_RECV_MASK = constant("DF_INSTR_FLAGS_RECV_MASK")
INSTRUCTION_FLAGS_SEND_SHIFT = constant("DF_INSTR_FLAGS_SEND_SHIFT")


def _names(fn, count: int) -> list[str]:
    return [fn(i).decode() for i in range(count)]


# Opcodes as the device sees them, by name.
DATAFLOW_OPCODE_ABI_VALUES = {
    "exit": constant("DF_ABI_OP_EXIT"),
    "iter": constant("DF_ABI_OP_ITER"),
    "reduce": constant("DF_ABI_OP_REDUCE"),
    "finalize": constant("DF_ABI_OP_FINALIZE"),
    "cluster_sync": constant("DF_ABI_OP_CLUSTER_SYNC"),
}
# Comm record kinds by name (df_comm_kind_name), e.g. "cluster_send" -> 1.
DATAFLOW_COMM_KIND_ABI_VALUES = {
    name: value for value, name in enumerate(_names(lib.df_comm_kind_name, 8)) if value
}


def _record(fmt: str, c_type: str) -> struct.Struct:
    s = struct.Struct(fmt)
    if s.size != _LAYOUTS[f"sizeof {c_type}"]:
        raise ImportError(f"df: {c_type} is {_LAYOUTS[f'sizeof {c_type}']} bytes in C, "
                          f"{s.size} in dataflow.abi_schema")
    return s


INSTRUCTION_STRUCT = _record("<8I", "df_abi_instr")
SLOT_STRUCT = _record("<8I", "df_abi_slot")
COMM_STRUCT = _record("<12I", "df_abi_comm")
ARG_STRUCT = _record("<16I", "df_abi_args")
TENSOR_ARG_STRUCT = _record("<QIIIIQ", "df_abi_tensor_arg")

INSTRUCTION_FIELDS = ("opcode", "handler_id", "task_id", "arg_offset", "comm_offset",
                      "comm_count", "slot_id", "flags")
SLOT_FIELDS = ("shared_offset", "global_offset", "bytes", "flag_index", "barrier_index",
               "owner_cta", "flags", "reserved")
COMM_FIELDS = ("kind", "src_slot_id", "dst_slot_id", "peer_cta_rank", "barrier_phase",
               "flag_index", "flag_epoch", "barrier_index", "byte_offset", "byte_count",
               "segment_id", "segment_count")
ARG_FIELDS = ("task_id", "task_coord_offset", "task_coord_count", "range_begin", "range_end",
              "input_slot_offset", "input_slot_count", "output_slot",
              "handoff_peer_arg_offset", "handoff_plan_index", "handoff_binding_index",
              "handoff_stage_count", "handoff_arena_slot", "handoff_flags", "reserved0",
              "reserved1")
TENSOR_ARG_FIELDS = ("data_ptr", "ndim", "dtype_code", "dtype_bits", "flags", "reserved")
