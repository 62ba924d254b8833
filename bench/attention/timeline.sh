#!/usr/bin/env bash
# On the GPU machine: builds libdfrt and runs timeline.py (one traced launch
# per plan and where its time goes) on a carry of make_trace_carry.sh.
# Results: OUT/timeline.md, OUT/trace-PLAN.bin.
# usage: bash bench/attention/timeline.sh CARRY OUT PLAN[,PLAN...]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: timeline.sh CARRY OUT PLANS}"
out="${2:?usage: timeline.sh CARRY OUT PLANS}"
plans="${3:?usage: timeline.sh CARRY OUT PLANS}"
mkdir -p "$out"
# shellcheck source=scripts/gpu/build_dfrt.sh
source "$root/scripts/gpu/build_dfrt.sh"
lib="$(bench_dfrt_lib "$out")"
DF_RT_LIB_DIR="$lib" PYTHONUNBUFFERED=1 python3 "$root/bench/attention/timeline.py" "$dir" "$out" "$plans"
