"""Launching on the host backend (lib/Runtime/host through libdf.so's
df_shared_host_run): the packed plan runs on the CPU with the handlers of a
host-compiled shared object, over tensors in host memory."""

from __future__ import annotations

import ctypes

from ._ctypes_rt import df_shared_host_run_info, df_shared_host_run_options
from ._lib import DataflowValueError, error_for, lib

__all__ = ["host_run", "HostRunStats"]

_DIAGS = ("none", "invalid_plan", "arena", "missing_handler", "phase_mismatch", "deadlock",
          "unwritten_read", "overwrite", "stale_flag", "step_limit")


class HostRunStats:
    """What a host run reports: scheduler steps, op-log records, the cost
    model's makespan, and (when asked for) the op log and cost texts."""

    def __init__(self, info: df_shared_host_run_info):
        self.steps = int(info.steps)
        self.op_count = int(info.op_count)
        self.makespan_cycles = float(info.makespan_cycles)
        self.diagnosis = _DIAGS[info.diag_kind] if info.diag_kind < len(_DIAGS) else \
            str(info.diag_kind)
        self.report = _text(info.report)
        self.op_log = _text(info.op_log)
        self.cost = _text(info.cost)


def _text(ptr) -> str | None:
    return ctypes.string_at(ptr).decode("utf-8", "replace") if ptr else None


def host_run(packed, library: str, tensors: list, *, block_size: int, threads: int = 1,
             op_log: bool = False, cost: bool = False,
             workspace_bytes: int = 0) -> HostRunStats:
    """Run ``packed`` (a PackedInstructionPlan) once. ``tensors`` are
    TensorRefs in host memory. ``workspace_bytes``: the handlers' workspace
    per virtual CTA (docs/workspace.md) when the library does not carry it.
    A diagnosed plan raises DataflowValueError whose ``report`` is the host
    backend's full diagnosis."""
    if not hasattr(lib.load(), "df_shared_host_run"):
        raise OSError(f"df: {lib.path} predates the host backend entry point; rebuild it")
    for i, t in enumerate(tensors):
        if t.device == "cuda":
            raise DataflowValueError(f"tensor argument {i} lives on a CUDA device; the host "
                                     f"backend needs host memory")
    records = b"".join(t.record() for t in tensors)
    buf = (ctypes.c_uint8 * max(1, len(records))).from_buffer_copy(records or b"\0")
    o = df_shared_host_run_options(threads=threads, block_size=block_size, op_log=op_log,
                                   cost=cost, workspace_bytes=workspace_bytes)
    info = df_shared_host_run_info()
    status = lib.df_shared_host_run(packed.c_pointer, str(library).encode(), buf, len(tensors),
                                    ctypes.byref(o), ctypes.byref(info))
    try:
        stats = HostRunStats(info)
    finally:
        lib.df_shared_host_run_info_free(ctypes.byref(info))
    if status.code != 0:
        err = error_for(status)
        err.report = stats.report
        err.stats = stats
        raise err
    return stats
