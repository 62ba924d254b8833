#!/usr/bin/env bash
# Every GPU bench and proof of the repo in one call on the lent H200, over
# carries made here beforehand by scripts/gpu/make_all_carries.sh (each
# step is skipped when its carry is missing): build-bench-carry,
# build-overhead-carry, build-moe-carry (the shipped MoE rows, listed
# there), .gpu-fuse and .gpu-ring; then, on the GPU machine:
#   OUT=$OUT bash scripts/gpu/run_all.sh
# Leaves attention/, overhead/, moe/, fusion/ and ring/ under $OUT and
# prints each step's table; the exit status counts failed steps. The
# device tool brings back at most 8 files, so a call writes them elsewhere
# and returns one archive (run AD):
#   OUT=/tmp/all bash scripts/gpu/run_all.sh > /tmp/all/all.log 2>&1;
#   .gpu-smoke/gpu_smoke .gpu-smoke/kernel.ptx > /tmp/all/smoke.txt 2>&1;
#   tar czf $OUT/all.tgz -C /tmp/all .
set -u
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${OUT:?set OUT}"
cd "$root"
bad=0
step() { # NAME CARRY COMMAND...
  local name=$1 carry=$2
  shift 2
  [ -e "$carry" ] || { echo "=== $name: no carry $carry, skipped"; return; }
  mkdir -p "$out/$name"
  echo "=== $name"
  if ! "$@" >"$out/$name/log.txt" 2>&1; then
    echo "FAILED: $name (see $name/log.txt)"
    bad=$((bad + 1))
  fi
}
step attention build-bench-carry bash bench/attention/run.sh build-bench-carry "$out/attention"
step overhead build-overhead-carry bash bench/overhead/run.sh build-overhead-carry "$out/overhead"
step moe build-moe-carry python3 bench/moe/moe_bench.py build-moe-carry --out "$out/moe"
step fusion .gpu-fuse bash -c "OUT='$out/fusion' bash scripts/gpu/run_seed.sh .gpu-fuse && \
  bash scripts/gpu/compare_fusion.sh .gpu-fuse '$out/fusion' && rm -f '$out'/fusion/*_O.bin"
step ring .gpu-ring env OUT="$out/ring" bash scripts/gpu/run_gpu_proof.sh .gpu-ring
for f in attention/table.md overhead/table.md moe/moe_table.txt; do
  [ -e "$out/$f" ] && { echo "--- $f"; cat "$out/$f"; }
done
[ -e "$out/fusion/log.txt" ] && { echo "--- fusion"; grep -A5 "^case" "$out/fusion/log.txt"; }
[ -e "$out/ring/summary.txt" ] && { echo "--- ring"; cat "$out/ring/summary.txt"; }
exit "$bad"
