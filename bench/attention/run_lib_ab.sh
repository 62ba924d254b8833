#!/usr/bin/env bash
# On the GPU machine: bench.py on one carry with two builds of libdfrt,
# the default and one with LIB_CFLAGS (a -D switch of lib/Runtime/cuda;
# run Z's, a carve-out preference, changed nothing and was removed), run
# alternately A B A B in separate processes: an A/B of a runtime library
# change on the same kernels and plans. Results: OUT/{a1,b1,a2,b2}/table.md.
# usage: LIB_CFLAGS=... bash bench/attention/run_lib_ab.sh CARRY OUT
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: run_lib_ab.sh CARRY OUT}"
out="${2:?usage: run_lib_ab.sh CARRY OUT}"
flags="${LIB_CFLAGS:?LIB_CFLAGS: compiler flags of build B}"
mkdir -p "$out"
# shellcheck source=scripts/gpu/build_dfrt.sh
source "$root/scripts/gpu/build_dfrt.sh"
lib_a="$(bench_dfrt_lib "$out")"
CFLAGS="$flags" build_dfrt "$root/build-bench-gpu-b" dfrt_bench_b dfrt "$out/build-b.log" >&2
lib_b="$(dirname "$(find "$root/build-bench-gpu-b" -name 'libdfrt.so' | head -1)")"
for round in 1 2; do
  for v in a b; do
    lib="$lib_a" label=default
    if [ "$v" = b ]; then lib="$lib_b" label="$flags"; fi
    echo "== $v$round ($label)"
    DF_RT_LIB_DIR="$lib" PYTHONUNBUFFERED=1 python3 "$root/bench/attention/bench.py" "$dir" \
      "$out/$v$round" | grep -E "^\| [su]" || true
  done
done
