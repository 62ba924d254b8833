#!/usr/bin/env python3
"""One traced launch per (variant, token count) of the fused MoE and
which CTAs and tasks set its makespan (moe_timeline_report.py).

usage: moe_timeline.py CARRY OUT VARIANT:TOKENS[,VARIANT:TOKENS...]
                       [--block-dim 256] [--build-dir DIR]
  CARRY: made by bench/moe/make_moe_trace_carry.sh (kernels linked with
  the traced device runtime, VARIANT/tN/plan.dump next to each plan).
  Builds libdfrt and the shim as moe_bench.py does, makes moe_bench.py's
  first input set (same seeds; packed weights for a variant whose
  weights_layout says so), runs three warm-up launches (the first under
  the watchdog), then one launch that fills df_rt_trace_buf
  (moe_df_trace). Writes OUT/trace-VARIANT-tN.bin (the raw trace words)
  and appends the report to OUT/moe_timeline.md and stdout."""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import moe_bench as B  # noqa: E402
import moe_timeline_report as R  # noqa: E402


def traced_run(df, timeout_ms):
    """Three warm-ups, then the trace of one launch (set 0)."""
    for i in range(3):
        df.run(0, timeout_ms if i == 0 else 0)
    return df.trace(0, R.WORDS)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("carry", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("cases", help="VARIANT:TOKENS[,VARIANT:TOKENS...]")
    ap.add_argument("--block-dim", type=int, default=256)
    ap.add_argument("--build-dir", type=Path, default=B.ROOT / "build-gpu-moe")
    ap.add_argument("--timeout-ms", type=int, default=20000, help="watchdog of the first warm-up")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    cases = []
    for spec in a.cases.split(","):
        variant, _, tokens = spec.partition(":")
        d = a.carry / variant / f"t{tokens}"
        if not tokens.isdigit() or not (d / "plan.dump").is_file():
            sys.exit(f"moe_timeline: no {d}/plan.dump (VARIANT:TOKENS of a "
                     f"make_moe_trace_carry.sh carry)")
        cases.append((variant, int(tokens)))
    shim = B.build(a.build_dir, a.out / "build.log")

    import torch  # noqa: PLC0415 (after the build, as moe_bench.py)
    wgu, wd = B.set_weights(torch, 0)
    packed = None
    md = a.out / "moe_timeline.md"
    for variant, T in cases:
        v, d = a.carry / variant, a.carry / variant / f"t{T}"
        r = B.load_routing(torch, d, T)
        x = B.set_tokens(torch, 0, T)
        out = torch.zeros(T, B.H, device="cuda", dtype=torch.float32)
        layout = v / "weights_layout"
        w = (wgu, wd)
        if layout.is_file() and layout.read_text().strip() == "packed":
            packed = packed or B.pack_weights(wgu, wd)
            w = packed
        torch.cuda.synchronize()  # made on torch's stream, read on libdfrt's
        df = B.DfMoe(shim, v / "moe.ptx", d / "plan.dfplan", a.block_dim)
        try:
            df.bind(B.moe_tensors(x, w[0], w[1], r, out, T))
            trace = traced_run(df, a.timeout_ms)
        finally:
            if not df.hung():
                df.close()
        (a.out / f"trace-{variant}-t{T}.bin").write_bytes(trace.tobytes())
        cflags = v / "cflags.txt"
        mode = R.nt_mode(variant, cflags.read_text() if cflags.is_file() else None)
        lines = R.report(f"{variant}/{a.block_dim} t{T}", R.parse_dump((d / "plan.dump").read_text()),
                         trace, R.read_tasks((d / "tasks.bin").read_bytes()), mode)
        text = "\n".join(lines) + "\n\n"
        with open(md, "a") as f:
            f.write(text)
        print(text, flush=True)
        del x, out, r


if __name__ == "__main__":
    main()
