#!/usr/bin/env bash
# Device-runtime A/B in one call on the lent GPU: the runtime smoke test
# (test/lit/Runtime/Inputs/gpu_smoke_build.sh, made into .gpu-smoke here),
# then bench/overhead on every carry folder named (same bench binary, one
# process per carry, back to back), then the long-range/ring proof
# (.gpu-ring, scripts/gpu/make_ring_carry.sh) when present. Carries are
# made on the CPU machine, e.g. the new runtime's and a base revision's:
#   bash bench/overhead/make_carry.sh build-overhead-carry
#   DF_BIN=/path/to/base/build/bin bash bench/overhead/make_carry.sh build-overhead-base
# usage: OUT=... bash scripts/gpu/run_runtime_ab.sh CARRY...
set -u
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${OUT:?set OUT}"
cd "$root"
bad=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader || true
if [ -x .gpu-smoke/gpu_smoke ]; then
  echo "=== smoke"
  .gpu-smoke/gpu_smoke .gpu-smoke/kernel.ptx >"$out/smoke.txt" 2>&1 || { echo "FAILED: smoke"; bad=$((bad + 1)); }
  tail -5 "$out/smoke.txt"
fi
for c in "$@"; do
  echo "=== overhead $c"
  mkdir -p "$out/$c"
  bash bench/overhead/run.sh "$c" "$out/$c" >/dev/null 2>"$out/$c/err.txt" || { echo "FAILED: $c"; bad=$((bad + 1)); }
  grep -E "^\| (1|256) \||Fit:|fit\*\*|L = 512|per dispatched|edge|launch:" "$out/$c/table.md" | head -20
done
if [ -d .gpu-ring ]; then
  echo "=== ring"
  OUT="$out/ring" bash scripts/gpu/run_gpu_proof.sh .gpu-ring >/dev/null 2>&1 || { echo "FAILED: ring"; bad=$((bad + 1)); }
  cat "$out/ring/summary.txt" 2>/dev/null
fi
exit "$bad"
