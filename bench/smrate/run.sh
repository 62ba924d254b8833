#!/usr/bin/env bash
# On the GPU machine (gcc and the CUDA driver; no toolkit, no LLVM): builds
# bench_smrate and runs it on the carry folder of make_carry.sh in three
# processes: the second also launches tables weighted by the first's
# per-SM rates, the third streams constant K/V instead of random (README.md). Prints both reports; also OUT/sm_rate.md.
# usage: bash bench/smrate/run.sh DIR [OUT]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dir="${1:?usage: run.sh DIR [OUT]}"
out="${2:-${OUT:-$root/bench-out}}"
mkdir -p "$out"
gcc -std=gnu17 -O2 -Wall -Wextra -I"$root/include" "$here/sm_rate.c" "$here/sm_rate_stats.c" \
  -o "$dir/bench_smrate" -ldl -lm
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader || true
{
  echo "# process 1"
  "$dir/bench_smrate" "$dir" - "$out/weights1.txt"
  echo "# process 2 (WEIGHTS_IN: process 1's rates)"
  "$dir/bench_smrate" "$dir" "$out/weights1.txt" "$out/weights2.txt"
  echo "# process 3 (K and V constant: SM_RATE_FILL=const)"
  SM_RATE_FILL=const "$dir/bench_smrate" "$dir" -
} | tee "$out/sm_rate.md"
