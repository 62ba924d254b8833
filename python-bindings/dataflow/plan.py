"""The scheduled plan as Python values: frozen dataclasses mirroring the
reference's InstructionPlan, its instructions, slots and comms. They are
built from df's C plan after df_schedule and turned back into a C plan for
packing (see _convert.py); nothing here computes a plan."""

from __future__ import annotations

import ctypes
import enum
from dataclasses import dataclass, field
from typing import Any, Mapping

from . import _ctypes as C
from ._lib import DataflowValueError, check, lib
from .variants import DataflowHandlerIdentity, DataflowHandlerVariantKey

__all__ = [
    "GPUTopology",
    "DataflowOpcode",
    "DataflowCommKind",
    "DataflowInstruction",
    "SlotPlan",
    "CommPlan",
    "InstructionPlan",
]


def _enum(name: str, name_fn, count: int, skip: tuple = ()):
    members = []
    for value in range(count):
        text = name_fn(value).decode()
        if value not in skip:
            members.append((text.upper(), text))
    return enum.Enum(name, members, type=str, module=__name__)


# Plan-level opcodes ("exit", "iter", ..., "reduce_update", ...) and comm
# kinds ("cluster_send", ...): names from df_instr_op_name / df_comm_kind_name.
DataflowOpcode = _enum("DataflowOpcode", lib.df_instr_op_name,
                       C.read_table(lib.df_shared_constants)["DF_INSTR_OP_COUNT"])
DataflowCommKind = _enum("DataflowCommKind", lib.df_comm_kind_name, 8, skip=(0,))


def opcode_code(opcode: DataflowOpcode | str) -> int:
    out = ctypes.c_int()
    check(lib.df_instr_op_parse(DataflowOpcode(opcode).value.encode(), ctypes.byref(out)))
    return out.value


def comm_kind_code(kind: DataflowCommKind | str) -> int:
    out = ctypes.c_int()
    check(lib.df_comm_kind_parse(DataflowCommKind(kind).value.encode(), ctypes.byref(out)))
    return out.value


def _positive_u32(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")
    if value < 0 or value >= 2**32:
        raise DataflowValueError(f"{what} must be positive, got {value}")
    return value


@dataclass(frozen=True)
class GPUTopology:
    """SMs and thread-block clusters (REFERENCE 2.1); checked by
    df_topology_check."""

    sm_count: int
    cluster_size: int = 1

    def __post_init__(self):
        t = C.df_topology(_positive_u32(self.sm_count, "GPUTopology sm_count"),
                          _positive_u32(self.cluster_size, "GPUTopology cluster_size"))
        check(lib.df_topology_check(ctypes.byref(t)))

    def to_c(self) -> C.df_topology:
        return C.df_topology(self.sm_count, self.cluster_size)

    def _sm(self, sm_id: int) -> int:
        if not 0 <= sm_id < self.sm_count:
            raise DataflowValueError(f"SM id {sm_id} is outside topology "
                                     f"(sm_count={self.sm_count})")
        return sm_id

    @property
    def cluster_count(self) -> int:
        return -(-self.sm_count // self.cluster_size)

    def cluster_id(self, sm_id: int) -> int:
        return self._sm(sm_id) // self.cluster_size

    def cluster_rank(self, sm_id: int) -> int:
        return self._sm(sm_id) % self.cluster_size

    def same_cluster(self, a: int, b: int) -> bool:
        return self.cluster_id(a) == self.cluster_id(b)

    def cluster_sms(self, cluster_id: int) -> tuple:
        first = cluster_id * self.cluster_size
        return tuple(range(first, min(first + self.cluster_size, self.sm_count)))


@dataclass(frozen=True)
class DataflowInstruction:
    """One scheduled instruction (REFERENCE 2.4): ITER/MAP/RESHARED/REDUCE/
    REDUCE_UPDATE/FINALIZE/EXIT/CLUSTER_SYNC on a queue."""

    instruction_id: int
    opcode: DataflowOpcode
    sm_id: int
    task_id: int | None = None
    task_coords: tuple = ()
    task_range: tuple | None = None
    input_slots: tuple = ()
    output_slot: int | None = None
    operator_name: str | None = None
    stage_id: int | None = None
    handler_identity: DataflowHandlerIdentity | None = None
    handler_variant_key: DataflowHandlerVariantKey | None = None
    program: Any = field(default=None, compare=False, repr=False, hash=False)
    # The implementation selection chose (df_instr.impl: a symbol declared
    # with T.implementation, a built-in library entry, or a replacement);
    # None = the default binding.
    implementation: str | None = None

    def __post_init__(self):
        if not isinstance(self.opcode, DataflowOpcode):
            object.__setattr__(self, "opcode", DataflowOpcode(self.opcode))
        object.__setattr__(self, "input_slots", tuple(self.input_slots))
        object.__setattr__(self, "task_coords", tuple(self.task_coords))
        if self.task_range is not None:
            object.__setattr__(self, "task_range", tuple(self.task_range))

    @property
    def attrs(self) -> Mapping[str, Any]:
        return {} if self.stage_id is None else {"stage_id": self.stage_id}


Instruction = DataflowInstruction


@dataclass(frozen=True)
class SlotPlan:
    """One intermediate slot (REFERENCE 4): its type, role, producer and the
    storage it shares."""

    slot_id: int
    task_id: int | None
    intermediate_type: Any
    role: str
    producer_instruction_id: int | None = None
    shared_storage_id: int | None = None
    global_storage_id: int | None = None
    private_shared: bool = False
    scratch_backed: bool = False
    scratch_offset: int | None = None
    owner_cta: int | None = None
    cluster_gated: bool = False


@dataclass(frozen=True)
class CommPlan:
    """One half of a transfer between instructions (REFERENCE 2.4)."""

    kind: DataflowCommKind
    source_instruction_id: int
    target_instruction_id: int
    source_slot_id: int
    target_slot_id: int
    producer_sm: int
    consumer_sm: int
    dispatch_instruction_id: int | None = None
    peer_cta_rank: int | None = None
    flag_epoch: int = 0
    barrier_phase: int = 0
    byte_offset: int = 0
    byte_count: int = 0
    segment_id: int = 0
    segment_count: int = 1
    cluster_gate_id: int | None = None

    def __post_init__(self):
        if not isinstance(self.kind, DataflowCommKind):
            object.__setattr__(self, "kind", DataflowCommKind(self.kind))

    @property
    def transfer_key(self) -> tuple:
        return (self.source_instruction_id, self.target_instruction_id, self.source_slot_id,
                self.target_slot_id, self.segment_id)


DataflowCommPlan = CommPlan


@dataclass(frozen=True)
class InstructionPlan:
    """A scheduled plan: instructions (in list order), per-SM queues, slots
    and comms. ``program`` (not compared) supplies the type and stage tables
    when the plan goes back to C; plans built by hand may leave it None when
    their instructions carry it."""

    topology: GPUTopology
    block_size: int
    range_axis: str
    scheduler_policy: str
    reduce_strategy: str
    task_extents: tuple | None
    task_range_lengths: tuple
    instructions: tuple
    queues: Mapping[int, tuple]
    slots: tuple
    comms: tuple
    program: Any = field(default=None, compare=False, repr=False, hash=False)
    # df-schedule pool: df_pack moves the ITERs to the pool every CTA
    # claims from (docs/pool.md)
    pool: bool = False

    def __post_init__(self):
        object.__setattr__(self, "instructions", tuple(self.instructions))
        object.__setattr__(self, "slots", tuple(self.slots))
        object.__setattr__(self, "comms", tuple(self.comms))
        object.__setattr__(self, "task_range_lengths", tuple(self.task_range_lengths))
        if self.task_extents is not None:
            object.__setattr__(self, "task_extents", tuple(self.task_extents))

    def queue(self, sm_id: int) -> tuple:
        return tuple(self.queues.get(sm_id, ()))

    def instruction(self, instruction_id: int) -> DataflowInstruction:
        for instruction in self.instructions:
            if instruction.instruction_id == instruction_id:
                return instruction
        raise KeyError(instruction_id)

    def resolved_program(self):
        if self.program is not None:
            return self.program
        return next((i.program for i in self.instructions if i.program is not None), None)

    def dump(self, **pack_options) -> str:
        """The plan packed with ``pack_options`` as df's text dump
        (df_packed_dump_text): records, queues, tables, barriers, launch
        package, fingerprint."""
        from .packing import pack_instruction_plan

        return pack_instruction_plan(self, **pack_options).dump()

    def fingerprint(self) -> str:
        from .packing import instruction_plan_fingerprint

        return instruction_plan_fingerprint(self)

    def timeline(self):
        """The per-CTA timeline (dataflow.plot.timeline): bars and arrows."""
        from .plot import timeline

        return timeline(self)

    def to_svg(self, *, title: str | None = None) -> str:
        from .plot import to_svg

        return to_svg(self, title=title)

    def plot(self, path, *, title: str | None = None):
        """Draw the per-CTA timeline to ``path`` (SVG; PNG with matplotlib)."""
        from .plot import plot

        return plot(self, path, title=title)
