#!/usr/bin/env bash
# On the GPU machine: moe_timeline.py (one traced launch per VARIANT:TOKENS
# and which CTAs and tasks set the makespan) on a carry of
# make_moe_trace_carry.sh; it builds libdfrt and the shim as moe_bench.py
# does. Results: OUT/moe_timeline.md, OUT/trace-VARIANT-tN.bin.
# usage: bash bench/moe/timeline.sh CARRY OUT VARIANT:TOKENS[,...] [--block-dim N]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
[ $# -ge 3 ] || { echo "usage: timeline.sh CARRY OUT VARIANT:TOKENS[,...] [moe_timeline.py options]" >&2; exit 2; }
PYTHONUNBUFFERED=1 python3 "$root/bench/moe/moe_timeline.py" "$@"
