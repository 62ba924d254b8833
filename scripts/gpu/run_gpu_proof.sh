#!/usr/bin/env bash
# The GPU proof of issue 5 in one command on the lent GPU machine: builds
# libdfrt and df-run there (scripts/gpu/run_seed.sh), runs every plan of
# DIR (made by scripts/gpu/make_gqa_carry.sh on the CPU machine) and the
# runtime probe, and leaves in $OUT at most three files: summary.txt,
# all.log (every run's full output) and build.log. Prints the summary and
# the key lines of each run last.
# usage: OUT=... scripts/gpu/run_gpu_proof.sh DIR
set -u
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: run_gpu_proof.sh DIR}"
final="${OUT:-$root/gpu-out}"
tmp="$(mktemp -d)"
mkdir -p "$final"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader || true
OUT="$tmp/out" DF_GPU_WORK="$tmp/work" bash "$root/scripts/gpu/run_seed.sh" "$dir"
rc=$?
cp "$tmp/out/summary.txt" "$tmp/out/build.log" "$final/" 2>/dev/null
for f in "$tmp"/out/*.log; do
  [ "$(basename "$f")" = build.log ] && continue
  echo "=== $(basename "$f" .log)"
  cat "$f"
done >"$final/all.log"
for f in "$tmp"/out/*.log; do
  n="$(basename "$f" .log)"
  [ "$n" = build ] && continue
  grep -E "plan:|launch:|re-planned|check|repeat|CUDA events|host clock|watchdog|timeout|CTA [0-9]+:|FAIL" "$f" \
    | grep -v "^df-run: tensor" | head -12 | sed "s/^/[$n] /"
done
echo "--- summary"
cat "$tmp/out/summary.txt"
exit "$rc"
