"""Packing (df_pack), barrier planning (df_allocate_barriers), plan
fingerprints (df_plan_fingerprint) and plan blobs (df_blob_write/read): the
Python objects carry what lib/Plan computed, with the reference's names."""

from __future__ import annotations

import ctypes
import json
import struct
from collections import namedtuple
from dataclasses import dataclass, field

from . import _ctypes as C
from . import abi_schema as abi
from ._convert import CPlan, plan_to_c
from ._lib import DataflowValueError, capture, check, error_for, lib
from ._program import Owned
from .plan import GPUTopology, InstructionPlan
from .variants import identity_from_c, variant_from_c

__all__ = [
    "PackedInstructionPlan",
    "DataflowBarrierAllocation",
    "pack_instruction_plan",
    "plan_dataflow_barriers",
    "instruction_plan_fingerprint",
    "load_packed_plan",
]

S = abi.UINT32_SENTINEL

PackedInstruction = namedtuple("PackedInstruction", abi.INSTRUCTION_FIELDS)
PackedSlot = namedtuple("PackedSlot", abi.SLOT_FIELDS)
PackedComm = namedtuple("PackedComm", abi.COMM_FIELDS)
PackedArgs = namedtuple("PackedArgs", abi.ARG_FIELDS)


def _u32s(ptr, n: int) -> tuple:
    return tuple(ptr[:n]) if n else ()


def _bytes(ptr, n: int, size: int) -> bytes:
    return ctypes.string_at(ptr, n * size) if n else b""


def _kind(code: int) -> str:
    return lib.df_op_kind_name(code).decode()


# ---- barrier allocation -------------------------------------------------------------------

@dataclass(frozen=True, eq=True)
class DataflowBarrierAllocation:
    """Barrier colouring, phases and cluster ACK indices (REFERENCE 3).
    Transfer keys are (source instruction, target instruction, source slot,
    target slot, segment); the per-comm tuples follow the plan's comm list."""

    barrier_count: int
    slot_barrier_indices: dict
    transfer_barrier_indices: dict
    transfer_phases: dict
    cluster_ack_count: int
    cluster_ack_indices: dict
    comm_barrier_indices: tuple
    comm_barrier_phases: tuple
    comm_ack_indices: tuple
    validation_error: str | None = field(default=None, compare=False, repr=False)

    __hash__ = None  # holds dicts

    def require_valid(self) -> "DataflowBarrierAllocation":
        """df_barrier_alloc_check's verdict: legal colouring, count = max + 1,
        every use assigned. Returns self."""
        if self.validation_error is not None:
            raise DataflowValueError(self.validation_error)
        return self

    @classmethod
    def from_c(cls, b: C.df_barrier_alloc, comms=None,
               validation_error: str | None = None) -> "DataflowBarrierAllocation":
        slot_barrier = _u32s(b.slot_barrier, b.slot_count)
        comm_barrier = _u32s(b.comm_barrier, b.comm_count)
        comm_phase = _u32s(b.comm_phase, b.comm_count)
        comm_ack = _u32s(b.comm_ack, b.comm_count)
        transfer_barrier, transfer_phase, acks = {}, {}, {}
        for i in range(b.comm_count if comms is not None else 0):
            c = comms[i]
            key = (int(c.src_instr), int(c.dst_instr), int(c.src_slot), int(c.dst_slot),
                   int(c.segment_id))
            if comm_barrier[i] != S:
                transfer_barrier[key] = comm_barrier[i]
                transfer_phase[key] = comm_phase[i]
            if comm_ack[i] != S:
                acks[key] = comm_ack[i]
        return cls(
            barrier_count=int(b.barrier_count),
            slot_barrier_indices={s: v for s, v in enumerate(slot_barrier) if v != S},
            transfer_barrier_indices=transfer_barrier,
            transfer_phases=transfer_phase,
            cluster_ack_count=int(b.ack_count),
            cluster_ack_indices=acks,
            comm_barrier_indices=comm_barrier,
            comm_barrier_phases=comm_phase,
            comm_ack_indices=comm_ack,
            validation_error=validation_error,
        )


def _check_barriers(cplan: CPlan, b: C.df_barrier_alloc) -> str | None:
    status = lib.df_barrier_alloc_check(cplan.ptr, ctypes.byref(b))
    return None if status.code == 0 else str(error_for(status))


def plan_dataflow_barriers(plan: InstructionPlan) -> DataflowBarrierAllocation:
    """Allocate receive barriers for ``plan`` (df_allocate_barriers)."""
    cplan = plan_to_c(plan)
    b = C.df_barrier_alloc()
    check(lib.df_allocate_barriers(cplan.ptr, None, ctypes.byref(b)))
    try:
        return DataflowBarrierAllocation.from_c(b, cplan.c.comms, _check_barriers(cplan, b))
    finally:
        lib.df_barrier_alloc_free(ctypes.byref(b), None)


def instruction_plan_fingerprint(plan: InstructionPlan) -> str:
    """SHA-256 hex of the plan's canonical encoding, operator names excluded
    (df_plan_fingerprint)."""
    cplan = plan_to_c(plan)
    buf = ctypes.create_string_buffer(65)
    check(lib.df_plan_fingerprint(cplan.ptr, buf))
    return buf.value.decode()


# ---- packed plans --------------------------------------------------------------------------

class PackedInstructionPlan:
    """A packed plan (df_packed): ABI records as bytes and as named tuples,
    queue and argument tables, the handler table, barrier allocation and
    fingerprint. Keeps the C object for launch packages, dumps and blobs."""

    instruction_record_size = abi.INSTRUCTION_STRUCT.size
    slot_record_size = abi.SLOT_STRUCT.size
    comm_record_size = abi.COMM_STRUCT.size
    arg_record_size = abi.ARG_STRUCT.size

    def __init__(self, handle: Owned, *, barrier_allocation: DataflowBarrierAllocation,
                 program=None, plan: InstructionPlan | None = None):
        self._handle = handle
        self.program = program
        self.plan = plan
        k = self._c
        self.abi_version = int(k.abi_version)
        self.topology = GPUTopology(int(k.topology.sm_count), int(k.topology.cluster_size))
        self.instruction_bytes = _bytes(k.instrs, k.instr_count, self.instruction_record_size)
        self.slot_bytes = _bytes(k.slots, k.slot_count, self.slot_record_size)
        self.comm_bytes = _bytes(k.comms, k.comm_count, self.comm_record_size)
        self.arg_bytes = _bytes(k.args, k.arg_count, self.arg_record_size)
        self.instructions = tuple(PackedInstruction(*r) for r in
                                  abi.INSTRUCTION_STRUCT.iter_unpack(self.instruction_bytes))
        self.slots = tuple(PackedSlot(*r) for r in abi.SLOT_STRUCT.iter_unpack(self.slot_bytes))
        self.comms = tuple(PackedComm(*r) for r in abi.COMM_STRUCT.iter_unpack(self.comm_bytes))
        self.args = tuple(PackedArgs(*r) for r in abi.ARG_STRUCT.iter_unpack(self.arg_bytes))
        sms = self.topology.sm_count
        self.queue_offsets = _u32s(k.queue_offsets, sms)
        self.queue_lengths = _u32s(k.queue_lengths, sms)
        self.input_slots = _u32s(k.input_slots, k.input_slot_count)
        self.task_coords = _u32s(k.task_coords, k.task_coord_count)
        self.pack_order = _u32s(k.pack_order, k.instr_count)
        self.queue_offsets_bytes = struct.pack(f"<{sms}I", *self.queue_offsets)
        self.queue_lengths_bytes = struct.pack(f"<{sms}I", *self.queue_lengths)
        self.input_slots_bytes = struct.pack(f"<{len(self.input_slots)}I", *self.input_slots)
        self.task_coords_bytes = struct.pack(f"<{len(self.task_coords)}I", *self.task_coords)
        handlers = [k.handlers[i] for i in range(k.handler_count)]
        self.handler_identities = tuple(identity_from_c(h.identity) if h.has_identity else None
                                        for h in handlers)
        self.handler_variant_keys = tuple(variant_from_c(h.variant) if h.has_variant else None
                                          for h in handlers)
        self.handler_names = tuple(h.name.decode() for h in handlers)
        self.handler_kinds = tuple(_kind(h.kind) for h in handlers)
        self.handler_symbols = tuple(h.symbol.decode() for h in handlers)
        # The implementation each handler runs (selection by capability
        # region, docs/implementations.md); None = the default binding.
        self.handler_implementations = tuple(h.impl.decode() or None for h in handlers)
        self.primary_handler_count = int(k.primary_handler_count)
        ops = [k.operators[i] for i in range(k.operator_count)]
        self.operator_table = {o.name.decode(): int(o.index) for o in ops}
        self.operator_kinds = {o.name.decode(): _kind(o.kind) for o in ops}
        self.intermediate_type_table = {k.types[i].name.decode(): int(k.types[i].index)
                                        for i in range(k.type_count)}
        self.barrier_allocation = barrier_allocation
        self.shared_slot_bytes = int(k.shared_slot_bytes)
        self.global_staging_bytes = int(k.global_staging_bytes)
        self.scratch_bytes = int(k.scratch_bytes)
        self.fingerprint = k.fingerprint.decode() or None

    @property
    def _c(self) -> C.df_packed:
        return ctypes.cast(self._handle.ptr, ctypes.POINTER(C.df_packed)).contents

    @property
    def c_pointer(self) -> int:
        """The df_packed * (valid while this object lives)."""
        return self._handle.ptr

    def dump(self) -> str:
        """df_packed_dump_text."""
        return capture(lib.df_packed_dump_text, self._handle.ptr)

    def dump_json(self) -> dict:
        """df_packed_dump_json, parsed."""
        return json.loads(capture(lib.df_packed_dump_json, self._handle.ptr))

    def to_blob(self, program=None) -> bytes:
        """The plan blob (df_blob_write), with ``program`` (default: the
        program this plan was packed from; a DataflowProgram or an owned C
        program such as ``selection_c_program``'s) embedded when known."""
        program = program if program is not None else self.program
        if program is not None:
            prog = program.ptr if isinstance(program, Owned) else program.c_program().ptr
        else:
            embedded = getattr(self, "embedded_program", None)
            prog = embedded.ptr if embedded is not None else None
        data = ctypes.POINTER(ctypes.c_uint8)()
        size = ctypes.c_size_t()
        check(lib.df_blob_write(self._handle.ptr, prog, None, ctypes.byref(data),
                                ctypes.byref(size)))
        try:
            return ctypes.string_at(data, size.value)
        finally:
            lib.df_shared_free(data)

    @classmethod
    def from_blob(cls, data: bytes) -> "PackedInstructionPlan":
        """Read a plan blob (df_blob_read validates every field)."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"a plan blob is bytes, got {type(data).__name__}")
        data = bytes(data)
        out = ctypes.c_void_p()
        prog = ctypes.c_void_p()
        check(lib.df_blob_read(data, len(data), None, ctypes.byref(out), ctypes.byref(prog)))
        handle = Owned(out.value, lib.df_packed_destroy)
        program_handle = Owned(prog.value, lib.df_program_destroy) if prog.value else None
        k = ctypes.cast(handle.ptr, ctypes.POINTER(C.df_packed)).contents
        packed = cls(handle, barrier_allocation=DataflowBarrierAllocation.from_c(k.barriers))
        packed.embedded_program = program_handle
        return packed

    def plot(self, path, *, title: str | None = None):
        """The timeline of the plan this was packed from (plan.plot)."""
        if self.plan is None:
            raise DataflowValueError("plot needs the scheduled plan; a plan read from a blob "
                                     "has only its records (plot the InstructionPlan)")
        return self.plan.plot(path, title=title)

    def embedded_program_dump(self) -> str | None:
        """df_program_dump of the program a blob carried, if any."""
        handle = getattr(self, "embedded_program", None)
        return None if handle is None else capture(lib.df_program_dump, handle.ptr)

    def __repr__(self):
        return (f"<PackedInstructionPlan abi={self.abi_version} sms={self.topology.sm_count} "
                f"instructions={len(self.instructions)} slots={len(self.slots)} "
                f"comms={len(self.comms)} handlers={len(self.handler_identities)}>")


PackedPlan = PackedInstructionPlan


def _direct_slots(ids) -> list:
    try:
        items = sorted(ids)
    except TypeError:
        raise TypeError("hbm_direct_global_slot_ids must be a collection of slot ids") from None
    for s in items:
        if isinstance(s, bool) or not isinstance(s, int) or s < 0 or s >= 2**32:
            raise DataflowValueError(f"Dataflow HBM direct-global slot ids must exist in the "
                                     f"plan; unknown={items}")
    return items


def pack_instruction_plan(plan: InstructionPlan, *, reuse_hbm_flags: bool = False,
                          hbm_direct_global: bool = False,
                          hbm_direct_global_slot_ids=None) -> PackedInstructionPlan:
    """Pack a plan into ABI records (df_pack: barriers, slot layout, handler
    table, comms, records, source lifetimes, launch package, fingerprint)."""
    if not isinstance(plan, InstructionPlan):
        raise TypeError(f"pack_instruction_plan expects InstructionPlan, got "
                        f"{type(plan).__name__}")
    cplan = plan_to_c(plan)
    o = C.df_pack_options()
    o.layout.hbm_direct_global = bool(hbm_direct_global)
    o.layout.reuse_hbm_flags = bool(reuse_hbm_flags)
    keep = []
    if hbm_direct_global_slot_ids is not None:
        ids = _direct_slots(hbm_direct_global_slot_ids)
        arr = (C.u32 * max(1, len(ids)))(*ids)
        keep.append(arr)
        o.layout.direct_count = len(ids)
        o.layout.direct_slots = arr
    if cplan.handler_order is not None:
        order = (C.u32 * len(cplan.handler_order))(*cplan.handler_order)
        keep.append(order)
        o.handler_order = order
        o.handler_order_count = len(cplan.handler_order)
    out = ctypes.c_void_p()
    check(lib.df_pack(cplan.ptr, ctypes.byref(o), None, ctypes.byref(out)))
    handle = Owned(out.value, lib.df_packed_destroy)
    k = ctypes.cast(handle.ptr, ctypes.POINTER(C.df_packed)).contents
    allocation = DataflowBarrierAllocation.from_c(k.barriers, cplan.c.comms,
                                                  _check_barriers(cplan, k.barriers))
    return PackedInstructionPlan(handle, barrier_allocation=allocation,
                                 program=plan.resolved_program(), plan=plan)


def load_packed_plan(data: bytes) -> PackedInstructionPlan:
    """A packed plan from blob bytes (df_blob_read)."""
    return PackedInstructionPlan.from_blob(data)
