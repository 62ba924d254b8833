#!/usr/bin/env bash
# On the GPU machine (gcc, cmake, CUDA driver, PyTorch; no LLVM): builds
# libdfrt.so (plan core + CUDA runtime, no MLIR) and runs bench.py on the
# carry folder of bench/attention/make_carry.sh. Results: OUT/table.md,
# OUT/results.json, OUT/build.log.
# usage: bash bench/attention/run.sh DIR [OUT]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: run.sh DIR [OUT]}"
out="${2:-${OUT:-$root/bench-out}}"
mkdir -p "$out"
# shellcheck source=scripts/gpu/build_dfrt.sh
source "$root/scripts/gpu/build_dfrt.sh"
lib="$(bench_dfrt_lib "$out")"
DF_RT_LIB_DIR="$lib" PYTHONUNBUFFERED=1 python3 "$root/bench/attention/bench.py" "$dir" "$out"
