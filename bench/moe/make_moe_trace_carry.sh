#!/usr/bin/env bash
# On the CPU machine: a fused-MoE carry (make_moe_carry.sh) whose kernels
# link the traced device runtime (scripts/gpu/make_runtime_bc.sh
# -DDF_RT_TRACE; df/rt_trace.h), with each plan's dump
# (VARIANT/tN/plan.dump, df-translate --df-plan-dump) and the variant's
# MOE_CFLAGS (VARIANT/cflags.txt: the handlers' n-tile rule) for
# bench/moe/moe_timeline.py.
# usage: [MOE_VARIANTS=... MOE_TOKENS=... MOE_CFLAGS=... ...] \
#          bench/moe/make_moe_trace_carry.sh DIR
#   The MOE_* variables go to make_moe_carry.sh as they are, except that
#   MOE_VARIANTS defaults to "c4x120:120:4 c2:132:2" (the variants the H200
#   co-schedules); RT_FLAGS: more runtime build flags (e.g. -DDF_RT_RESOLVE=0).
#   Then, on the GPU machine: bash bench/moe/timeline.sh DIR OUT VARIANT:TOKENS[,...]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: make_moe_trace_carry.sh DIR}"
bin="${DF_BIN:-$root/build/bin}"
export MOE_VARIANTS="${MOE_VARIANTS:-c4x120:120:4 c2:132:2}"
mkdir -p "$dir"
rt="$(mktemp -d)"
trap 'rm -rf "$rt"' EXIT
flags=(-DDF_RT_TRACE)
# shellcheck disable=SC2206 # RT_FLAGS: compiler flags, split on spaces
[ -n "${RT_FLAGS:-}" ] && flags+=($RT_FLAGS)
bash "$root/scripts/gpu/make_runtime_bc.sh" "$rt/trace.bc" "$root" "${flags[@]}"
DF_RUNTIME_BC="$rt/trace.bc" bash "$root/bench/moe/make_moe_carry.sh" "$dir"
for v in $MOE_VARIANTS; do
  name="${v%%:*}"
  grep -q df_rt_trace_buf "$dir/$name/moe.ptx" ||
    { echo "make_moe_trace_carry.sh: $name/moe.ptx is not traced" >&2; exit 1; }
  # the n-tile rule follows -DMOE_NT6 / -DMOE_NT_FINE (moe_timeline_report.ntiles)
  echo "${MOE_CFLAGS:-}" >"$dir/$name/cflags.txt"
  for p in "$dir/$name"/t*/plan.dfplan; do
    "$bin/df-translate" --df-plan-dump "$p" >"${p%.dfplan}.dump"
  done
done
