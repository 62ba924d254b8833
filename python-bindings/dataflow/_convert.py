"""C df_plan <-> Python InstructionPlan. Reading copies the scheduler's plan
into frozen dataclasses; writing rebuilds a C plan with the df_plan_*
growers (instructions in id order, as df requires) and returns the plan's
list order, which the handler table walks (df_pack_options.handler_order)."""

from __future__ import annotations

import ctypes

from . import _ctypes as C
from ._lib import DataflowValueError, check, lib
from ._program import Owned, _name, itype_slot_bytes
from .plan import (CommPlan, DataflowCommKind, DataflowInstruction, DataflowOpcode,
                   GPUTopology, InstructionPlan, SlotPlan, comm_kind_code, opcode_code)
from .variants import identity_from_c, variant_from_c

S = 0xFFFFFFFF

_OPCODES = {}
_KINDS = {}
_ROLES = {}


def _opcode(code: int) -> DataflowOpcode:
    if code not in _OPCODES:
        _OPCODES[code] = DataflowOpcode(lib.df_instr_op_name(code).decode())
    return _OPCODES[code]


def _kind(code: int) -> DataflowCommKind:
    if code not in _KINDS:
        _KINDS[code] = DataflowCommKind(lib.df_comm_kind_name(code).decode())
    return _KINDS[code]


def _opt(value: int):
    return None if value == S else int(value)


def _u32(value, what: str, none_ok: bool = True) -> int:
    if value is None:
        if none_ok:
            return S
        raise DataflowValueError(f"{what} is required")
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, got {type(value).__name__}")
    if value < 0 or value >= 2**32:
        raise DataflowValueError(f"Dataflow ABI value must fit uint32, got {value} ({what})")
    return value


def _enum_code(name_fn, text: str, count: int) -> int | None:
    for code in range(count):
        if name_fn(code).decode() == text:
            return code
    return None


# ---- C -> Python --------------------------------------------------------------------------

def plan_from_c(ptr: int, program, topology: GPUTopology) -> InstructionPlan:
    p = ctypes.cast(ptr, ctypes.POINTER(C.df_plan)).contents
    types = program.intermediate_types() if program is not None else ()
    stage_names = [p.stages[i].name.decode() for i in range(p.stage_count)]
    op_names = [p.stages[i].op_name.decode() for i in range(p.stage_count)]
    coords_buf = (C.u32 * C.MAX_AXES)()
    coords_cache: dict[int, tuple] = {}

    def coords(task: int) -> tuple:
        if task == S:
            return ()
        found = coords_cache.get(task)
        if found is None:
            n = lib.df_plan_task_coords(ptr, task, coords_buf)
            found = coords_cache[task] = tuple(coords_buf[:n])
        return found

    inputs = p.inputs
    impl_names = [p.impl_names[i].name.decode() for i in range(p.impl_count)]
    instructions = []
    for i in range(p.instr_count):
        d = p.instrs[i]
        stage = d.stage if 0 <= d.stage < p.stage_count else None
        name = None
        if stage is not None:
            name = op_names[stage] or stage_names[stage]
        instructions.append(DataflowInstruction(
            instruction_id=int(d.id),
            opcode=_opcode(d.op),
            sm_id=int(d.sm),
            task_id=_opt(d.task),
            task_coords=coords(d.task),
            task_range=(int(d.range_begin), int(d.range_end)) if d.has_range else None,
            input_slots=tuple(inputs[d.input_offset:d.input_offset + d.input_count]),
            output_slot=_opt(d.output_slot),
            operator_name=name,
            stage_id=stage,
            handler_identity=identity_from_c(d.identity) if d.has_identity else None,
            handler_variant_key=variant_from_c(d.variant) if d.has_variant else None,
            program=program,
            implementation=impl_names[d.impl - 1] if 0 < d.impl <= len(impl_names) else None,
        ))
    slots = []
    for i in range(p.slot_count):
        s = p.slots[i]
        role = lib.df_slot_role_name(s.role).decode()
        if role == "stage_output" and 0 <= s.stage < p.stage_count:
            role = f"{stage_names[s.stage]}_output"
        itype = types[s.type] if 0 <= s.type < len(types) else \
            (p.types[s.type].name.decode() if 0 <= s.type < p.type_count else None)
        slots.append(SlotPlan(
            slot_id=int(s.id), task_id=_opt(s.task), intermediate_type=itype, role=role,
            producer_instruction_id=_opt(s.producer), shared_storage_id=_opt(s.shared_storage),
            global_storage_id=_opt(s.global_storage), private_shared=bool(s.private_shared),
            scratch_backed=bool(s.scratch_backed),
            scratch_offset=int(s.scratch_offset) if s.has_scratch_offset else None,
            owner_cta=_opt(s.owner), cluster_gated=bool(s.gated)))
    comms = []
    for i in range(p.comm_count):
        c = p.comms[i]
        comms.append(CommPlan(
            kind=_kind(c.kind), source_instruction_id=int(c.src_instr),
            target_instruction_id=int(c.dst_instr), source_slot_id=int(c.src_slot),
            target_slot_id=int(c.dst_slot), producer_sm=int(c.producer_sm),
            consumer_sm=int(c.consumer_sm), dispatch_instruction_id=_opt(c.dispatch_instr),
            peer_cta_rank=_opt(c.peer_cta_rank), flag_epoch=int(c.flag_epoch),
            barrier_phase=int(c.barrier_phase), byte_offset=int(c.byte_offset),
            byte_count=int(c.byte_count), segment_id=int(c.segment_id),
            segment_count=int(c.segment_count), cluster_gate_id=_opt(c.gate_id)))
    by_id = {ins.instruction_id: ins for ins in instructions}
    queues = {}
    for sm in range(p.topology.sm_count):
        off, n = p.queue_offsets[sm], p.queue_lengths[sm]
        queues[sm] = tuple(by_id[p.queue_ids[j]] for j in range(off, off + n))
    return InstructionPlan(
        topology=topology,
        block_size=int(p.block_size),
        range_axis=p.range_axis.decode(),
        scheduler_policy=lib.df_policy_name(p.policy).decode(),
        reduce_strategy=lib.df_reduce_strategy_name(p.strategy).decode(),
        task_extents=tuple(p.extents[:p.extent_count]) if p.extent_count else None,
        task_range_lengths=tuple(p.task_lengths[:p.task_count]),
        instructions=tuple(instructions),
        queues=queues,
        slots=tuple(slots),
        comms=tuple(comms),
        program=program,
        pool=bool(p.pool),
    )


# ---- Python -> C --------------------------------------------------------------------------

class CPlan:
    """A C plan rebuilt from an InstructionPlan, plus the list order of its
    instructions (None when it is id order)."""

    def __init__(self, handle: Owned, handler_order: list | None):
        self.handle = handle
        self.handler_order = handler_order

    @property
    def ptr(self) -> int:
        return self.handle.ptr

    @property
    def c(self) -> C.df_plan:
        return ctypes.cast(self.handle.ptr, ctypes.POINTER(C.df_plan)).contents


def _add_tables(ptr: int, plan: InstructionPlan) -> tuple[list, list]:
    """Type and stage tables; returns (type names, stage names)."""
    program = plan.resolved_program()
    if program is not None:
        check(lib.df_plan_adopt_program(ptr, program.c_program().ptr))
        p = ctypes.cast(ptr, ctypes.POINTER(C.df_plan)).contents
        return ([p.types[i].name.decode() for i in range(p.type_count)],
                [p.stages[i].name.decode() for i in range(p.stage_count)])
    from .language import intermediate_of

    names: list = []
    for slot in plan.slots:
        it = intermediate_of(slot.intermediate_type)
        name = it.name if it is not None else slot.intermediate_type
        if name is None or name in names:
            continue
        if it is None:
            raise DataflowValueError(f"slot {slot.slot_id}: intermediate type {name!r} is not a "
                                     f"@dataflow_intermediate class and the plan has no program")
        check(lib.df_plan_add_type(ptr, _name(it.name, "intermediate name"),
                                   itype_slot_bytes(it), None))
        names.append(name)
    return names, []


def _type_index(slot: SlotPlan, type_names: list) -> int:
    from .language import intermediate_of

    t = slot.intermediate_type
    it = intermediate_of(t)
    name = it.name if it is not None else t
    if name not in type_names:
        raise DataflowValueError(f"slot {slot.slot_id}: intermediate type {name!r} is not in the "
                                 f"plan's type table ({', '.join(type_names) or 'empty'})")
    return type_names.index(name)


def _role(slot: SlotPlan, stage_names: list) -> tuple[int, int]:
    out = ctypes.c_int()
    role = slot.role
    if role.endswith("_output") and role[:-len("_output")] in stage_names:
        check(lib.df_slot_role_parse(b"stage_output", ctypes.byref(out)))
        return out.value, stage_names.index(role[:-len("_output")])
    check(lib.df_slot_role_parse(role.encode(), ctypes.byref(out)),
          f"slot {slot.slot_id}")
    return out.value, -1


def _ordered(items, key: str, what: str) -> list:
    ordered = sorted(items, key=lambda x: getattr(x, key))
    ids = [getattr(x, key) for x in ordered]
    if ids != list(range(len(ids))):
        raise DataflowValueError(f"InstructionPlan {what} ids must be 0..{len(ids) - 1} without "
                                 f"gaps or repeats, got {ids}")
    return ordered


def plan_to_c(plan) -> CPlan:
    if not isinstance(plan, InstructionPlan):
        raise TypeError(f"expected an InstructionPlan, got {type(plan).__name__}")
    out = ctypes.c_void_p()
    check(lib.df_plan_create(None, plan.topology.to_c(), ctypes.byref(out)))
    handle = Owned(out.value, lib.df_plan_destroy)
    ptr = handle.ptr
    p = ctypes.cast(ptr, ctypes.POINTER(C.df_plan)).contents
    p.block_size = _u32(plan.block_size, "block_size", none_ok=False)
    p.range_axis = _name(plan.range_axis or "", "range axis")
    policy = _enum_code(lib.df_policy_name, plan.scheduler_policy, 3)
    strategy = _enum_code(lib.df_reduce_strategy_name, plan.reduce_strategy, 4)
    if policy is None:
        check(lib.df_policy_parse(str(plan.scheduler_policy).encode(),
                                  ctypes.byref(ctypes.c_int())))
    if strategy is None:
        check(lib.df_reduce_strategy_parse(str(plan.reduce_strategy).encode(),
                                           ctypes.byref(ctypes.c_int())))
    p.policy, p.strategy = policy, strategy
    p.pool = bool(plan.pool)
    extents = plan.task_extents or ()
    if len(extents) > C.MAX_AXES:
        raise DataflowValueError(f"task_extents has {len(extents)} entries, at most {C.MAX_AXES}")
    p.extent_count = len(extents)
    for i, e in enumerate(extents):
        p.extents[i] = _u32(e, "task_extents entry", none_ok=False)
    lengths = [_u32(n, "task range length", none_ok=False) for n in plan.task_range_lengths]
    check(lib.df_plan_set_tasks(ptr, len(lengths), (C.u32 * max(1, len(lengths)))(*lengths)))
    type_names, stage_names = _add_tables(ptr, plan)

    for ins in _ordered(plan.instructions, "instruction_id", "instruction"):
        d = C.df_instr()
        d.op = opcode_code(ins.opcode)
        d.task = _u32(ins.task_id, f"instruction {ins.instruction_id} task_id")
        d.sm = _u32(ins.sm_id, f"instruction {ins.instruction_id} sm_id", none_ok=False)
        if ins.task_range is not None:
            d.has_range = True
            d.range_begin, d.range_end = (_u32(v, f"instruction {ins.instruction_id} task_range",
                                               none_ok=False) for v in ins.task_range)
        d.output_slot = _u32(ins.output_slot, f"instruction {ins.instruction_id} output_slot")
        d.stage = ins.stage_id if ins.stage_id is not None and \
            ins.stage_id < len(stage_names) else -1
        if ins.handler_identity is not None:
            d.has_identity = True
            d.identity = ins.handler_identity.to_c()
        if ins.handler_variant_key is not None:
            d.has_variant = True
            d.variant = ins.handler_variant_key.to_c()
        if ins.implementation is not None:
            ref = C.u32()
            check(lib.df_plan_intern_impl(
                ptr, _name(ins.implementation, f"instruction {ins.instruction_id} implementation"),
                ctypes.byref(ref)))
            d.impl = ref.value
        inputs = [_u32(s, f"instruction {ins.instruction_id} input slot", none_ok=False)
                  for s in ins.input_slots]
        arr = (C.u32 * max(1, len(inputs)))(*inputs)
        check(lib.df_plan_add_instr(ptr, ctypes.byref(d), arr, len(inputs), None))

    for slot in _ordered(plan.slots, "slot_id", "slot"):
        s = C.df_slot()
        s.task = _u32(slot.task_id, f"slot {slot.slot_id} task_id")
        s.type = _type_index(slot, type_names)
        s.role, s.stage = _role(slot, stage_names)
        s.producer = _u32(slot.producer_instruction_id, f"slot {slot.slot_id} producer")
        s.shared_storage = _u32(slot.shared_storage_id, f"slot {slot.slot_id} shared_storage_id")
        s.global_storage = _u32(slot.global_storage_id, f"slot {slot.slot_id} global_storage_id")
        s.private_shared = bool(slot.private_shared)
        s.scratch_backed = bool(slot.scratch_backed)
        if slot.scratch_offset is not None:
            s.has_scratch_offset = True
            s.scratch_offset = _u32(slot.scratch_offset, f"slot {slot.slot_id} scratch_offset")
        s.owner = _u32(slot.owner_cta, f"slot {slot.slot_id} owner_cta")
        s.gated = bool(slot.cluster_gated)
        check(lib.df_plan_add_slot(ptr, ctypes.byref(s), None))

    for n, comm in enumerate(plan.comms):
        what = f"comm {n}"
        c = C.df_comm()
        c.kind = comm_kind_code(comm.kind)
        c.src_instr = _u32(comm.source_instruction_id, what, none_ok=False)
        c.dst_instr = _u32(comm.target_instruction_id, what, none_ok=False)
        c.src_slot = _u32(comm.source_slot_id, what, none_ok=False)
        c.dst_slot = _u32(comm.target_slot_id, what, none_ok=False)
        c.producer_sm = _u32(comm.producer_sm, what, none_ok=False)
        c.consumer_sm = _u32(comm.consumer_sm, what, none_ok=False)
        c.dispatch_instr = _u32(comm.dispatch_instruction_id, what)
        c.peer_cta_rank = _u32(comm.peer_cta_rank, what)
        c.flag_epoch = _u32(comm.flag_epoch, what, none_ok=False)
        c.barrier_phase = _u32(comm.barrier_phase, what, none_ok=False)
        c.byte_offset = _u32(comm.byte_offset, what, none_ok=False)
        c.byte_count = _u32(comm.byte_count, what, none_ok=False)
        c.segment_id = _u32(comm.segment_id, what, none_ok=False)
        c.segment_count = _u32(comm.segment_count, what, none_ok=False)
        c.gate_id = _u32(comm.cluster_gate_id, what)
        check(lib.df_plan_add_comm(ptr, ctypes.byref(c)))

    sm_count = plan.topology.sm_count
    lengths, ids = [], []
    for sm in range(sm_count):
        queue = plan.queue(sm)
        lengths.append(len(queue))
        ids.extend(_u32(getattr(i, "instruction_id", i), f"queue {sm} entry", none_ok=False)
                   for i in queue)
    extra = sorted(set(plan.queues) - set(range(sm_count)))
    if extra:
        raise DataflowValueError(f"InstructionPlan queues name SMs {extra} outside topology "
                                 f"(sm_count={sm_count})")
    check(lib.df_plan_set_queues(ptr, (C.u32 * sm_count)(*lengths),
                                 (C.u32 * max(1, len(ids)))(*ids), len(ids)))
    order = [ins.instruction_id for ins in plan.instructions]
    return CPlan(handle, None if order == sorted(order) else order)
