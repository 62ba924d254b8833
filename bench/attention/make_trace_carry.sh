#!/usr/bin/env bash
# On the CPU machine: a carry of attention plans whose kernels link the
# traced device runtime (scripts/gpu/make_runtime_bc.sh -DDF_RT_TRACE;
# docs/device-runtime.md "Trace"), each with its plan dump (NAME.dump,
# df-translate --df-plan-dump) for bench/attention/timeline.py.
# usage: [TRACE_DIAG=1] bench/attention/make_trace_carry.sh DIR PLAN[,PLAN...]
#        (then, on the GPU machine: bash bench/attention/timeline.sh DIR OUT PLANS)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: make_trace_carry.sh DIR PLANS}"
plans="${2:?usage: make_trace_carry.sh DIR PLANS}"
bin="${DF_BIN:-$root/build/bin}"
mkdir -p "$dir"
rt="$(mktemp -d)"
trap 'rm -rf "$rt"' EXIT
# TRACE_DIAG=1: the diagnostic build (df/rt_trace.h: df_rt_diag_buf too);
# RT_FLAGS: more runtime build flags (A/B switches, e.g. -DDF_RT_RESOLVE=0)
diag=()
[ "${TRACE_DIAG:-0}" = 1 ] && diag=(-DDF_RT_TRACE_DIAG)
# shellcheck disable=SC2206 # RT_FLAGS: compiler flags, split on spaces
[ -n "${RT_FLAGS:-}" ] && diag+=($RT_FLAGS)
bash "$root/scripts/gpu/make_runtime_bc.sh" "$rt/trace.bc" "$root" -DDF_RT_TRACE "${diag[@]}"
DF_RUNTIME_BC="$rt/trace.bc" CARRY_PLANS="$plans" bash "$root/bench/attention/make_carry.sh" "$dir"
IFS=, read -r -a names <<<"$plans"
for n in "${names[@]}"; do
  [ -e "$dir/$n.dfplan" ] || { echo "make_trace_carry.sh: no plan $n in cases.json" >&2; exit 1; }
  grep -q df_rt_trace_buf "$dir/$n.ptx" || { echo "make_trace_carry.sh: $n.ptx is not traced" >&2; exit 1; }
  "$bin/df-translate" --df-plan-dump "$dir/$n.dfplan" >"$dir/$n.dump"
done
