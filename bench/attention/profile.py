#!/usr/bin/env python3
"""One launch of df's kernel and one of each SDPA backend per case, for a
profiler (bench/attention/profile.sh runs it under ncu).

usage: profile.py CARRY_DIR PLAN[,PLAN...]
  PLAN: a case or one of its alternative plans (on the case's inputs). The inputs, plans and SDPA calls are bench.py's (one input set per
  case); nothing is timed. Kernel order per case: df (the case's plan),
  then cuDNN, then flash (uniform cases: one dense call each)."""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402


def main():
    carry = Path(sys.argv[1]).resolve()
    wanted = sys.argv[2].split(",")
    plans = bench.plan_index(carry)
    for name in wanted:
        c, block, threads = plans[name]
        lens = c["lens"]
        q, k, v, o = bench.make_inputs(c, torch.Generator(device="cuda").manual_seed(1234))
        dfk = bench.DfKernel(carry / f"{name}.ptx", carry / f"{name}.dfplan", block, threads)
        try:
            dfk.launch(dfk.bind([q, k, v, o]))
            torch.cuda.synchronize()
        finally:
            dfk.close()
        if len(set(lens)) == 1:
            for be in ("cudnn", "flash"):
                bench.sdpa_dense(be, q, k, v, lens[0])()
                torch.cuda.synchronize()
        print(f"{name}: launched", flush=True)
        del q, k, v, o
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
