"""Launch packages (df_launch_package_build) and the persistent wrapper's
handler table (df_pack's handler records), from a packed plan."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

from . import _ctypes as C
from ._lib import check, lib
from .packing import PackedInstructionPlan
from .variants import DataflowHandlerIdentity, DataflowHandlerVariantKey

__all__ = ["DataflowLaunchPackage", "build_launch_package", "DataflowWrapperHandler",
           "DataflowWrapperSpec", "build_wrapper_spec"]


@dataclass(frozen=True)
class DataflowLaunchPackage:
    """What the host needs to launch a packed plan (REFERENCE 5.5).
    ``global_staging_bytes`` and ``flags_bytes`` are the zero-filled buffers
    to upload; their sizes are ``*_byte_count``."""

    abi_version: int
    sm_count: int
    cluster_size: int
    barrier_count: int
    barrier_bytes: int
    cluster_ack_count: int
    cluster_ack_barrier_bytes: int
    cluster_ack_pending_bytes: int
    hbm_recv_state_bytes: int
    shared_control_bytes: int
    shared_slot_base_offset: int
    shared_slot_bytes: int
    shared_memory_bytes: int
    flag_count: int
    flags_byte_count: int
    global_staging_byte_count: int
    slot_count: int
    comm_count: int
    arg_count: int
    instruction_count: int
    scratch_slot_count: int
    scratch_bytes: int
    cluster_inbox_offset: int
    cluster_inbox_bytes: int
    needs_flag_reset: bool
    barrier_init_offsets: tuple
    barrier_init_lengths: tuple
    barrier_init_indices: tuple
    cluster_scheduling_policy: str = "load_balancing"

    @property
    def global_staging_bytes(self) -> bytes:
        return bytes(self.global_staging_byte_count)

    @property
    def flags_bytes(self) -> bytes:
        return bytes(self.flags_byte_count)

    @property
    def needs_hbm_flag_reset(self) -> bool:
        return self.needs_flag_reset


_RENAMED = {"flags_bytes": "flags_byte_count", "global_staging_bytes": "global_staging_byte_count"}


def build_launch_package(packed: PackedInstructionPlan) -> DataflowLaunchPackage:
    """Check a packed plan's records and derive its launch package."""
    if not isinstance(packed, PackedInstructionPlan):
        raise TypeError(f"build_launch_package expects a packed plan "
                        f"(pack_instruction_plan), got {type(packed).__name__}")
    lp = C.df_launch_package()
    k = packed._c
    check(lib.df_launch_package_build(packed.c_pointer, ctypes.byref(lp)))
    try:
        values = {_RENAMED.get(name, name): int(getattr(lp, name))
                  for name in C.LAUNCH_U32_FIELDS}
        sms = int(lp.sm_count)
        return DataflowLaunchPackage(
            **values,
            needs_flag_reset=bool(lp.needs_flag_reset),
            barrier_init_offsets=tuple(lp.barrier_init_offsets[:sms]) if sms else (),
            barrier_init_lengths=tuple(lp.barrier_init_lengths[:sms]) if sms else (),
            barrier_init_indices=tuple(lp.barrier_init_indices[:lp.barrier_init_count])
            if lp.barrier_init_count else (),
        )
    finally:
        lib.df_launch_package_free(ctypes.byref(lp), ctypes.byref(k.alloc))


@dataclass(frozen=True)
class DataflowWrapperHandler:
    handler_id: int
    operator_name: str
    operator_kind: str
    symbol: str
    handler_identity: DataflowHandlerIdentity | None
    handler_variant_key: DataflowHandlerVariantKey | None
    primary: bool


@dataclass(frozen=True)
class DataflowWrapperSpec:
    """The persistent wrapper's view of a packed plan: one handler per
    packed handler id, in id order, and how queues are indexed."""

    handlers: tuple
    queue_indexing: str
    sm_count: int
    cluster_size: int


def build_wrapper_spec(packed: PackedInstructionPlan, *,
                       queue_indexing: str = "cta_rank") -> DataflowWrapperSpec:
    if not isinstance(packed, PackedInstructionPlan):
        raise TypeError(f"build_wrapper_spec expects a packed plan, got {type(packed).__name__}")
    if queue_indexing not in ("cta_rank", "smid"):
        raise ValueError(f"Dataflow wrapper queue_indexing must be 'cta_rank' or 'smid', got "
                         f"{queue_indexing!r}")
    k = packed._c
    handlers = tuple(
        DataflowWrapperHandler(
            handler_id=int(k.handlers[i].id),
            operator_name=packed.handler_names[i],
            operator_kind=packed.handler_kinds[i],
            symbol=packed.handler_symbols[i],
            handler_identity=packed.handler_identities[i],
            handler_variant_key=packed.handler_variant_keys[i],
            primary=bool(k.handlers[i].primary),
        ) for i in range(k.handler_count))
    return DataflowWrapperSpec(handlers, queue_indexing, packed.topology.sm_count,
                               packed.topology.cluster_size)
