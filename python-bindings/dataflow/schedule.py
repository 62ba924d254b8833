"""schedule(): the reference's keyword arguments mapped onto
df_schedule_options; df_schedule (lib/Plan) computes the plan."""

from __future__ import annotations

import ctypes
from typing import Iterable, Mapping

from . import _ctypes as C
from ._convert import plan_from_c
from ._lib import DataflowValueError, check, lib
from ._program import DataflowProgram, Owned, _name
from .plan import GPUTopology, InstructionPlan

__all__ = ["schedule", "schedule_options"]

_NONE_LIKE = (None, False)


def _option_text(value, what: str) -> bytes:
    """Bucket / exact-length options as the text df_*_parse reads: None and
    False are "none", strings pass through, sequences become comma lists."""
    if value in _NONE_LIKE:
        return b"none"
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value).encode()
    try:
        items = list(value)
    except TypeError:
        raise TypeError(f"Dataflow {what} must be None, a string or a sequence, got "
                        f"{type(value).__name__}") from None
    parts = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise TypeError(f"Dataflow {what} entries must be ints or 'generic', got {item!r}")
        parts.append(str(item))
    return ",".join(parts).encode() if parts else b"none"


def _lengths(value, what: str) -> list:
    if isinstance(value, bool):
        raise TypeError(f"Dataflow {what} must be an int or a sequence of ints, got bool")
    items = [value] if isinstance(value, int) else list(value)
    out = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, int):
            raise TypeError(f"Dataflow {what} must contain ints, got {item!r}")
        if item >= 2**32:
            raise DataflowValueError(f"Dataflow ABI value must fit uint32, got {item} ({what})")
        out.append(max(item, 0))  # df reports non-positive lengths as 0
    return out


def _uint(value, what: str) -> int:
    """An int for a u32 option; zero passes through for df to judge."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"Dataflow {what} must be an int, got {type(value).__name__}")
    if value < 0 or value >= 2**32:
        raise DataflowValueError(f"Dataflow {what} must be positive, got {value}")
    return value


def schedule(program: DataflowProgram, **options) -> InstructionPlan:
    """Schedule ``program`` for concrete range lengths (REFERENCE 2); the
    keyword arguments are the reference's (see ``schedule_options``)."""
    if not isinstance(program, DataflowProgram):
        raise TypeError(f"schedule expects a DataflowProgram, got {type(program).__name__}")
    prog = program.c_program()
    o, keep = schedule_options(**options)
    out = ctypes.c_void_p()
    check(lib.df_schedule(prog.ptr, ctypes.byref(o), ctypes.byref(out)))
    del keep
    handle = Owned(out.value, lib.df_plan_destroy)
    try:
        return plan_from_c(handle.ptr, program, options["topology"])
    finally:
        handle.close()


def schedule_options(
    *,
    topology: GPUTopology,
    range_lengths: Mapping[str, int | Iterable[int]],
    block_size: int | str,
    task_extents: Iterable[int] | None = None,
    range_offsets: Mapping[str, int | Iterable[int]] | None = None,
    include_exit: bool = True,
    scheduler_policy: str = "round_robin",
    reduce_strategy: str = "all_at_once",
    force_hbm_comms: bool = False,
    partial_only: bool = False,
    iter_range_buckets=None,
    iter_range_bucket_size: int | None = None,
    iter_range_exact_lengths=None,
    transfer_tile_bytes: int = 0,
    defer_reduces: bool = False,
    balance_iters: bool = False,
    arch: str | None = None,
    replacements=None,
    even_split: bool = False,
    even_split_granularity: int = 0,
    even_split_chunks: int = 0,
    even_split_task_cost: int = 0,
    reduce_fan_in: int = 0,
    reduce_spread: bool = False,
    skip_unary_reduce: bool = False,
    reduce_sms: int = 0,
    pool: bool = False,
    even_split_taper: int = 0,
    even_split_taper_min: int = 0,
) -> tuple:
    """The df_schedule_options of ``schedule``'s keyword arguments, and the
    ctypes arrays they point into (keep both alive while the options are
    used): what df_schedule and libdfrt's df_rt_plan_replan take.

    ``arch`` ("sm_80", "sm_90", "sm_90a"; None = sm_90a) and
    ``replacements`` (``OP=SYMBOL[:region]`` strings or
    language.Implementation objects supplied by the caller) steer the
    selection of implementations (df_schedule_options.select) for programs
    that declare implementations or use built-in handlers."""
    if not isinstance(topology, GPUTopology):
        raise TypeError(f"schedule expects topology=GPUTopology(...), got "
                        f"{type(topology).__name__}")
    o = lib.df_schedule_options_default()
    o.topology = topology.to_c()
    # "auto": df_split_choose picks block size and placement (df/split.h)
    o.auto_split = block_size == "auto"
    o.block_size = 0 if o.auto_split else _uint(block_size, "block_size")
    if not isinstance(range_lengths, Mapping):
        raise TypeError("Dataflow range_lengths must be a mapping of range axis -> lengths")
    if len(range_lengths) > C.MAX_AXES:
        raise DataflowValueError(f"Dataflow range_lengths has {len(range_lengths)} axes, at most "
                                 f"{C.MAX_AXES}")
    offsets = dict(range_offsets or {})
    unknown = sorted(set(offsets) - set(range_lengths))
    if unknown:
        raise DataflowValueError(f"Dataflow range_offsets names axes without range_lengths: "
                                 f"{unknown}")
    keep = []  # arrays the options point into
    o.range_count = len(range_lengths)
    for i, (axis, value) in enumerate(range_lengths.items()):
        lengths = _lengths(value, f"range_lengths['{axis}']")
        arr = (C.u32 * max(1, len(lengths)))(*lengths)
        axis_bytes = _name(axis, "range axis")
        keep += [arr, axis_bytes]
        r = o.ranges[i]
        r.axis = axis_bytes
        r.count = len(lengths)
        r.lengths = arr
        if axis in offsets:
            offs = _lengths(offsets[axis], f"range_offsets['{axis}']")
            if len(offs) == 1 and len(lengths) > 1:
                offs = offs * len(lengths)
            if len(offs) != len(lengths):
                raise DataflowValueError(f"Dataflow range_offsets['{axis}'] has {len(offs)} "
                                         f"entries for {len(lengths)} range lengths")
            oarr = (C.u32 * max(1, len(offs)))(*offs)
            keep.append(oarr)
            r.offsets = oarr
    extents = tuple(task_extents) if task_extents is not None else ()
    if len(extents) > C.MAX_AXES:
        raise DataflowValueError(f"Dataflow task_extents has {len(extents)} entries, at most "
                                 f"{C.MAX_AXES}")
    o.extent_count = len(extents)
    for i, e in enumerate(extents):
        o.extents[i] = _uint(e, "task_extents entry")
    code = ctypes.c_int()
    if not isinstance(scheduler_policy, str):
        raise TypeError("Dataflow scheduler_policy must be a string")
    check(lib.df_policy_parse(scheduler_policy.encode(), ctypes.byref(code)))
    o.policy = code.value
    if not isinstance(reduce_strategy, str):
        raise TypeError("Dataflow reduce_strategy must be a string")
    check(lib.df_reduce_strategy_parse(reduce_strategy.encode(), ctypes.byref(code)))
    o.strategy = code.value
    o.include_exit = bool(include_exit)
    o.force_hbm_comms = bool(force_hbm_comms)
    o.partial_only = bool(partial_only)
    o.defer_reduces = bool(defer_reduces)  # df extensions (include/df/plan.h)
    o.balance_iters = bool(balance_iters)
    o.even_split = bool(even_split)
    o.even_split_granularity = _uint(even_split_granularity, "even_split_granularity")
    o.even_split_chunks = _uint(even_split_chunks, "even_split_chunks")
    o.even_split_task_cost = _uint(even_split_task_cost, "even_split_task_cost")
    o.reduce_fan_in = _uint(reduce_fan_in, "reduce_fan_in")
    o.reduce_spread = bool(reduce_spread)
    o.skip_unary_reduce = bool(skip_unary_reduce)
    o.reduce_sms = _uint(reduce_sms, "reduce_sms")
    o.pool = bool(pool)
    o.even_split_taper = _uint(even_split_taper, "even_split_taper")
    o.even_split_taper_min = _uint(even_split_taper_min, "even_split_taper_min")
    check(lib.df_iter_buckets_parse(_option_text(iter_range_buckets, "iter_range_buckets"),
                                    ctypes.byref(o.buckets)))
    o.bucket_size = 0 if iter_range_bucket_size is None else \
        _uint(iter_range_bucket_size, "iter_range_bucket_size")
    check(lib.df_exact_lengths_parse(
        _option_text(iter_range_exact_lengths, "iter_range_exact_lengths"),
        ctypes.byref(o.exact_lengths)))
    o.transfer_tile_bytes = _uint(transfer_tile_bytes, "transfer_tile_bytes")
    if arch is not None or replacements:
        sel = select_options(arch, replacements, keep)
        keep.append(sel)
        o.select = ctypes.pointer(sel)
    return o, keep


def select_options(arch, replacements, keep: list) -> "C.df_select_options":
    """df_select_options of a target architecture and replacements; the
    replacement array is appended to ``keep``."""
    from .language import Implementation

    sel = C.df_select_options()
    if arch is not None:
        if not isinstance(arch, str):
            raise TypeError(f"Dataflow arch must be a string such as 'sm_90a', got {arch!r}")
        code = ctypes.c_int()
        check(lib.df_arch_parse(arch.encode(), ctypes.byref(code)))
        sel.arch = code.value
    if isinstance(replacements, (str, Implementation)):
        replacements = [replacements]
    items = []
    for r in replacements or ():
        if isinstance(r, str):
            r = Implementation.parse(r)
        if not isinstance(r, Implementation):
            raise TypeError(f"Dataflow replacements take 'OP=SYMBOL[:region]' strings or "
                            f"Implementation objects, got {r!r}")
        items.append(r.to_c(origin=2))
    if items:
        arr = (C.df_impl * len(items))(*items)
        keep.append(arr)
        sel.replacements = arr
        sel.replacement_count = len(items)
    return sel
