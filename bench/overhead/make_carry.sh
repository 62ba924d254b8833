#!/usr/bin/env bash
# On the CPU machine (clang-22, df-opt/df-translate in $DF_BIN, default
# build/bin): PTX + plan blob of every case of the runtime-overhead bench,
# and DIR/manifest.txt listing them for overhead_bench.c.
#   disp_N      partial-only plan of overhead.mlir, N empty ITERs per SM
#   launch      partial-only plan with one empty ITER (SM 0) + EXIT per SM
#   chain_K_L   chain_plan.py chains of L edges: cluster (SMs 0,1, DSMEM),
#               hbm (SMs 0,2: two clusters), hbm_in_cluster (SMs 0,1
#               through HBM, as force-hbm-comms would); counting handlers
#   echain_K_L  the kernel of chain_K_L's plan with empty handlers (the
#               manifest line names the plan: "echain NAME PLAN KIND L")
#   trace_*     traced copies (df_device_runtime_trace.bc, df/rt_trace.h)
#               of disp_32 and chain_K_32 for the per-phase trace table:
#               manifest lines "trace NAME KIND L" (KIND dispatch or K)
#   gqa_replan  examples/attention_gqa, 64 sequences x 8 KV heads, mixed
#               lengths, block 2048, balance-iters: the base plan the bench
#               re-plans for new lengths every step
# 132 SMs (OV_SMS, else DF_SMS: carry_lib.sh df_sms), cluster 2.
# usage: bench/overhead/make_carry.sh DIR
# (then, on the GPU machine: bash bench/overhead/run.sh DIR)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: make_carry.sh DIR}"
here="$root/bench/overhead"
# shellcheck source=scripts/gpu/carry_lib.sh
source "$root/scripts/gpu/carry_lib.sh"
sms="${OV_SMS:-$(df_sms 2)}"
clang-22 "${cflags[@]}" -DOV_EMPTY "$here/overhead_handlers.c" -o "$tmp/empty.bc"
# shellcheck disable=SC2086 # OV_CFLAGS: extra handler flags, a list
clang-22 "${cflags[@]}" ${OV_CFLAGS:-} "$here/overhead_handlers.c" -o "$tmp/count.bc"
manifest="$dir/manifest.txt"
: >"$manifest"
# The traced device runtime (lib/Runtime/device, built with the tree).
trace_bc="${DF_TRACE_BC:-$bin/../lib/Runtime/device/df_device_runtime_trace.bc}"
if [ ! -f "$trace_bc" ]; then
  echo "make_carry.sh: no traced device runtime at $trace_bc (cmake --build build, or set DF_TRACE_BC)" >&2
  exit 1
fi
traces=()
# traced NAME MLIR HANDLERS_BC KIND L: as kernel_and_blob on the traced
# runtime; its manifest line is written after the untraced cases'.
traced() {
  "$bin/df-translate" --df-to-ptx --df-link="$3" --df-runtime="$trace_bc" "$2" -o "$dir/$1.ptx"
  "$bin/df-translate" --df-to-plan "$2" -o "$dir/$1.dfplan"
  traces+=("trace $1 $4 $5")
}

sched() { # sched OUT SCHEDULE-OPTIONS...
  local out="$1"; shift
  "$bin/df-opt" "$here/overhead.mlir" --df-schedule="sm-count=$sms cluster-size=2 block-size=128 task-extents=1 $*" \
    --df-layout-slots="per-cta-shared=true" -o "$out"
}

for n in 1 2 4 8 16 32 64 128 256; do
  sched "$tmp/disp_$n.mlir" "range-lengths=n:$((sms * n * 128)) partial-only=true"
  kernel_and_blob "disp_$n" "$tmp/disp_$n.mlir" "$tmp/empty.bc"
  echo "dispatch disp_$n $n" >>"$manifest"
  if [ "$n" = 32 ]; then traced "trace_disp_$n" "$tmp/disp_$n.mlir" "$tmp/empty.bc" dispatch "$n"; fi
done
sched "$tmp/launch.mlir" "range-lengths=n:128 partial-only=true"
kernel_and_blob launch "$tmp/launch.mlir" "$tmp/empty.bc"
echo "launch launch" >>"$manifest"

sched "$tmp/base.mlir" "range-lengths=n:128"
for kind in cluster hbm hbm_in_cluster hbm_direct; do
  for len in 2 8 32 128 512; do
    case $kind in
      cluster) args=(--kind cluster --sms 0,1) ;;
      hbm | hbm_direct) args=(--kind hbm --sms 0,2) ;;
      hbm_in_cluster) args=(--kind hbm --sms 0,1) ;;
    esac
    python3 "$here/chain_plan.py" "$tmp/base.mlir" "$tmp/chain.mlir" --length "$len" "${args[@]}"
    if [ "$kind" = hbm_direct ]; then
      # Direct-global slots: handlers write and read the staging bytes, no copies.
      "$bin/df-opt" "$tmp/chain.mlir" --df-layout-slots="per-cta-shared=true hbm-direct-global=true" \
        -o "$tmp/chain_dg.mlir"
      mv "$tmp/chain_dg.mlir" "$tmp/chain.mlir"
    fi
    kernel_and_blob "chain_${kind}_$len" "$tmp/chain.mlir" "$tmp/count.bc"
    echo "chain chain_${kind}_$len $kind $len" >>"$manifest"
    # The same plan with empty handlers: the runtime's edge alone.
    kernel_only "echain_${kind}_$len" "$tmp/chain.mlir" "$tmp/empty.bc"
    echo "echain echain_${kind}_$len chain_${kind}_$len $kind $len" >>"$manifest"
    if [ "$len" = 32 ]; then traced "trace_${kind}_$len" "$tmp/chain.mlir" "$tmp/count.bc" "$kind" "$len"; fi
  done
done

# Decode-step base plan for the re-plan bench: K/V capacity 32768.
lens="$(python3 - <<'PY'
import math, random
r = random.Random(1064)
out = []
for s in range(64):
    n = max(16, min(32768, int(2048 * math.exp(r.gauss(0, 1.0)))))
    out += [n] * 8
# tasks of 1, 2 and many blocks, so every reduce arity is in the handler table
out[0:8], out[8:16] = [1000] * 8, [3000] * 8
print(",".join(map(str, out)))
PY
)"
clang-22 "${cflags[@]}" -DGQA_LMAX=32768u "$root/examples/attention_gqa/attention_gqa_handlers.c" -o "$tmp/gqa.bc"
plan_files gqa_replan "$root/examples/attention_gqa/attention_gqa.mlir" "$tmp/gqa.bc" \
  "sm-count=$sms cluster-size=2 block-size=2048 range-lengths=kv:$lens task-extents=64,8 balance-iters=true" \
  "per-cta-shared=true"
echo "replan gqa_replan 2048 32768" >>"$manifest"
printf '%s\n' "${traces[@]}" >>"$manifest"
"$bin/df-translate" --df-plan-dump "$dir/gqa_replan.dfplan" | grep -E "^handler" || true
du -sh "$dir"
