#!/usr/bin/env bash
# On the GPU machine (gcc, cmake, CUDA driver; no LLVM, no PyTorch): builds
# libdfrt.so and overhead_bench (a wrapper project, as
# bench/attention/run.sh does) and runs it on the carry folder of
# bench/overhead/make_carry.sh. Prints one report; also OUT/table.md and
# OUT/build.log.
# usage: bash bench/overhead/run.sh DIR [OUT]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: run.sh DIR [OUT]}"
out="${2:-${OUT:-$root/bench-out}}"
build="$root/build-overhead-gpu"
mkdir -p "$out"
# shellcheck source=scripts/gpu/build_dfrt.sh
source "$root/scripts/gpu/build_dfrt.sh"
build_dfrt "$build" dfrt_overhead overhead_bench "$out/build.log" \
  "add_executable(overhead_bench $root/bench/overhead/overhead_bench.c
  $root/bench/overhead/overhead_manifest.c
  $root/bench/overhead/overhead_trace.c $root/bench/bench_util.c)
target_link_libraries(overhead_bench PRIVATE dfrt m)"
"$(find "$build" -name overhead_bench -type f -perm -u+x | head -1)" "$dir" | tee "$out/table.md"
