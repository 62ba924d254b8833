#!/usr/bin/env bash
# After scripts/gpu/run_seed.sh DIR on a carry of make_fusion_carry.sh:
# per case, whether the fused run's O is bitwise equal to the unfused
# one's, and the two median launch times (CUDA events) side by side with
# the model's total dispatch cycles. Exit status: number of mismatches.
# usage: scripts/gpu/compare_fusion.sh DIR OUT
set -uo pipefail
dir="${1:?usage: compare_fusion.sh DIR OUT}"
out="${2:?usage: compare_fusion.sh DIR OUT}"
bad=0
median() { grep -E 'launches \(.*CUDA events' "$1" 2>/dev/null | sed -E 's/.*median ([0-9.]+) us.*/\1/' | tail -1; }
cycles() { sed -nE 's/^total: .*cycles=([0-9.]+) .*/\1/p' "$1" 2>/dev/null; }
printf '%-14s %-9s %14s %14s %8s %14s %14s\n' case parity unfused_us fused_us speedup \
  model_unfused model_fused
for f in "$dir"/*_fused.dfplan; do
  [ -e "$f" ] || continue
  name="$(basename "$f" _fused.dfplan)"
  parity=missing
  if [ -e "$out/${name}_unfused_O.bin" ] && [ -e "$out/${name}_fused_O.bin" ]; then
    if cmp -s "$out/${name}_unfused_O.bin" "$out/${name}_fused_O.bin"; then
      parity=bitwise
    else
      parity=DIFFERS
    fi
  fi
  [ "$parity" = bitwise ] || bad=$((bad + 1))
  u="$(median "$out/${name}_unfused.log")" fz="$(median "$out/${name}_fused.log")"
  sp="$(awk -v u="${u:-0}" -v f="${fz:-0}" 'BEGIN { if (f > 0) printf "%.3f", u / f; else print "-" }')"
  printf '%-14s %-9s %14s %14s %8s %14s %14s\n' "$name" "$parity" "${u:--}" "${fz:--}" "$sp" \
    "$(cycles "$dir/${name}_unfused.cost")" "$(cycles "$dir/${name}_fused.cost")"
done
exit "$bad"
