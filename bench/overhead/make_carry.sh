#!/usr/bin/env bash
# On the CPU machine (clang-22, df-opt/df-translate in $DF_BIN, default
# build/bin): PTX + plan blob of every case of the runtime-overhead bench,
# and DIR/manifest.txt listing them for overhead_bench.c.
#   disp_N      partial-only plan of overhead.mlir, N empty ITERs per SM
#   launch      partial-only plan with one empty ITER (SM 0) + EXIT per SM
#   chain_K_L   chain_plan.py chains of L edges: cluster (SMs 0,1, DSMEM),
#               hbm (SMs 0,2: two clusters), hbm_in_cluster (SMs 0,1
#               through HBM, as force-hbm-comms would); counting handlers
#   gqa_replan  examples/attention_gqa, 64 sequences x 8 KV heads, mixed
#               lengths, block 2048, balance-iters: the base plan the bench
#               re-plans for new lengths every step
# 132 SMs (OV_SMS), cluster 2. usage: bench/overhead/make_carry.sh DIR
# (then, on the GPU machine: bash bench/overhead/run.sh DIR)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: make_carry.sh DIR}"
sms="${OV_SMS:-132}"
here="$root/bench/overhead"
# shellcheck source=scripts/gpu/carry_lib.sh
source "$root/scripts/gpu/carry_lib.sh"
clang-22 "${cflags[@]}" -DOV_EMPTY "$here/overhead_handlers.c" -o "$tmp/empty.bc"
clang-22 "${cflags[@]}" "$here/overhead_handlers.c" -o "$tmp/count.bc"
manifest="$dir/manifest.txt"
: >"$manifest"

sched() { # sched OUT SCHEDULE-OPTIONS...
  local out="$1"; shift
  "$bin/df-opt" "$here/overhead.mlir" --df-schedule="sm-count=$sms cluster-size=2 block-size=128 task-extents=1 $*" \
    --df-layout-slots="per-cta-shared=true" -o "$out"
}

for n in 1 2 4 8 16 32 64 128 256; do
  sched "$tmp/disp_$n.mlir" "range-lengths=n:$((sms * n * 128)) partial-only=true"
  kernel_and_blob "disp_$n" "$tmp/disp_$n.mlir" "$tmp/empty.bc"
  echo "dispatch disp_$n $n" >>"$manifest"
done
sched "$tmp/launch.mlir" "range-lengths=n:128 partial-only=true"
kernel_and_blob launch "$tmp/launch.mlir" "$tmp/empty.bc"
echo "launch launch" >>"$manifest"

sched "$tmp/base.mlir" "range-lengths=n:128"
for kind in cluster hbm hbm_in_cluster; do
  for len in 2 8 32 128 512; do
    case $kind in
      cluster) args=(--kind cluster --sms 0,1) ;;
      hbm) args=(--kind hbm --sms 0,2) ;;
      hbm_in_cluster) args=(--kind hbm --sms 0,1) ;;
    esac
    python3 "$here/chain_plan.py" "$tmp/base.mlir" "$tmp/chain.mlir" --length "$len" "${args[@]}"
    kernel_and_blob "chain_${kind}_$len" "$tmp/chain.mlir" "$tmp/count.bc"
    echo "chain chain_${kind}_$len $kind $len" >>"$manifest"
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
"$bin/df-translate" --df-plan-dump "$dir/gqa_replan.dfplan" | grep -E "^handler" || true
du -sh "$dir"
