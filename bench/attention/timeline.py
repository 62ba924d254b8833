#!/usr/bin/env python3
"""One traced launch per plan and where its time goes (timeline_report.py).

usage: timeline.py CARRY_DIR OUT_DIR PLAN[,PLAN...]
  CARRY_DIR: made by bench/attention/make_trace_carry.sh (kernels linked
  with the traced device runtime, NAME.dump next to each plan). PLAN: a
  case or one of its alternative plans, on the case's inputs (bench.py's,
  one input set). Three untraced-buffer warm-up launches, then the trace
  buffer is zeroed and one launch fills it. Writes OUT_DIR/timeline.md and
  OUT_DIR/trace-PLAN.bin (the raw df_rt_trace_buf words); with the
  diagnostic runtime (make_trace_carry.sh TRACE_DIAG=1) also
  OUT_DIR/diag-PLAN.bin (df_rt_diag_buf) and the receive steps' report."""
import array
import ctypes
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402
import timeline_report  # noqa: E402
from dataflow._lib import check  # noqa: E402  (bench made the package importable)

SYMBOL = b"df_rt_trace_buf"
WORDS = timeline_report.CTAS * timeline_report.INSTRS * timeline_report.POINTS * 2
DIAG_SYMBOL = b"df_rt_diag_buf"
DIAG_WORDS = timeline_report.CTAS * timeline_report.INSTRS * timeline_report.DIAG_POINTS


def module_global(dfk, symbol, words, required=True):
    """(device address, bytes) of a traced kernel's buffer; None when an
    optional one is missing."""
    ptr, size = ctypes.c_uint64(), ctypes.c_size_t()
    try:
        check(dfk.dll.df_rt_module_global(dfk.module, symbol, ctypes.byref(ptr), ctypes.byref(size)))
    except Exception:
        if required:
            raise
        return None
    if size.value != words * 8:
        raise RuntimeError(f"{symbol.decode()} is {size.value} bytes, df/rt_trace.h says {words * 8}")
    return ptr.value, size.value


def read_global(dfk, g):
    host = array.array("Q", bytes(g[1]))
    buf = (ctypes.c_char * g[1]).from_buffer(host)
    check(dfk.dll.df_rt_memcpy_dtoh(dfk.dev, None, ctypes.addressof(buf), g[0], g[1]))
    return host


def traced_launch(dfk, idx):
    """The trace of one launch after three warm-ups, and the diagnostic
    stamps (df_rt_diag_buf) when the kernel has them, else None."""
    dll = dfk.dll
    trace = module_global(dfk, SYMBOL, WORDS)
    diag = module_global(dfk, DIAG_SYMBOL, DIAG_WORDS, required=False)
    for _ in range(3):
        dfk.launch(idx)
    torch.cuda.synchronize()
    for g in (trace, diag):
        if g:
            check(dll.df_rt_memset_d8(dfk.dev, None, g[0], 0, g[1]))
    dfk.launch(idx)
    torch.cuda.synchronize()
    return read_global(dfk, trace), (read_global(dfk, diag) if diag else None)


def main():
    carry, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    plans = bench.plan_index(carry)
    lines = []
    for name in sys.argv[3].split(","):
        c, block, threads = plans[name]
        q, k, v, o = bench.make_inputs(c, torch.Generator(device="cuda").manual_seed(1234))
        dfk = bench.DfKernel(carry / f"{name}.ptx", carry / f"{name}.dfplan", block, threads)
        try:
            trace, diag = traced_launch(dfk, dfk.bind([q, k, v, o]))
        finally:
            dfk.close()
        (out / f"trace-{name}.bin").write_bytes(trace.tobytes())
        plan = timeline_report.parse_dump((carry / f"{name}.dump").read_text())
        lines += timeline_report.report(name, plan, trace) + [""]
        if diag is not None:
            (out / f"diag-{name}.bin").write_bytes(diag.tobytes())
            lines += timeline_report.diag_report(name, plan, trace, diag) + [""]
        del q, k, v, o
        torch.cuda.empty_cache()
    text = "\n".join(lines)
    (out / "timeline.md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
