#!/usr/bin/env bash
# On the CPU machine (clang-22, MLIR build in build/): fused and unfused
# kernels and plan blobs of the same schedules (docs/fusion.md), in the
# folder scripts/gpu/run_seed.sh takes; scripts/gpu/compare_fusion.sh then
# checks parity and prints the times side by side.
#   seed_{unfused,fused}          the seed plan (4 SMs), checked against the
#                                 float64 reference of attention_inputs.py
#   decode_short_{unfused,fused}  a decode step with short ranges: TASKS
#                                 (default 1024) tasks on 132 SMs (DF_SMS, cluster 2),
#                                 kv lengths 1..256, block 256 (one block per
#                                 task), seeded random inputs made by df-run
#   decode_mixed_{unfused,fused}  the same tasks with kv 16..4096 (multi-block
#                                 tasks: only reduce+finalize fuses)
# Every run saves O to $OUT/NAME_O.bin for the bitwise comparison.
# usage: scripts/gpu/make_fusion_carry.sh DIR [TASKS]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: make_fusion_carry.sh DIR [TASKS]}"
tasks="${2:-1024}"
# shellcheck source=scripts/gpu/carry_lib.sh
source "$root/scripts/gpu/carry_lib.sh"
sms=$(df_sms 2)
clang-22 "${cflags[@]}" "$root/examples/seed/attention_handlers.c" -o "$tmp/handlers.bc"

# make NAME SCHEDULE ARGS [LAYOUT]: NAME_unfused and NAME_fused (df-opt
# --df-fuse) of one schedule and slot layout.
make() {
  local name=$1 sched=$2 args=$3 layout=${4:-}
  "$bin/df-opt" "$root/examples/seed/attention.mlir" --df-schedule="$sched" \
    --df-layout-slots="$layout" -o "$tmp/$name.mlir"
  "$bin/df-opt" "$tmp/$name.mlir" --df-fuse -o "$tmp/${name}_f.mlir"
  for v in unfused fused; do
    local src="$tmp/$name.mlir"
    [ "$v" = fused ] && src="$tmp/${name}_f.mlir"
    kernel_and_blob "${name}_$v" "$src" "$tmp/handlers.bc"
    "$bin/df-translate" --df-plan-cost "$src" >"$dir/${name}_$v.cost"
    echo "$args --save O=@OUT@/${name}_${v}_O.bin" >"$dir/${name}_$v.args"
  done
}

python3 "$root/scripts/gpu/attention_inputs.py" "$dir" 384 256
make seed "sm-count=4 cluster-size=2 block-size=128 range-lengths=kv:384,256 task-extents=2" \
  "--block-size 128 --tensor Q=file:@DIR@/q.bin:float16:2x16 --tensor K=file:@DIR@/k.bin:float16:2x4096x16 --tensor V=file:@DIR@/v.bin:float16:2x4096x16 --tensor O=zeros:float32:2x16 --check O=@DIR@/o_ref.bin:0.02:0.002"

rand="--tensor Q=random:float16:${tasks}x16:101 --tensor K=random:float16:${tasks}x4096x16:102 --tensor V=random:float16:${tasks}x4096x16:103 --tensor O=zeros:float32:${tasks}x16"
short="$(python3 -c "import random; r=random.Random(9); print(','.join(str(r.randint(1,256)) for _ in range($tasks)))")"
make decode_short "sm-count=$sms cluster-size=2 block-size=256 range-lengths=kv:$short task-extents=$tasks" \
  "--block-size 256 $rand" "per-cta-shared=true"
mixed="$(python3 -c "import random; r=random.Random(7); print(','.join(str(r.randint(1,256)*16) for _ in range($tasks)))")"
make decode_mixed "sm-count=$sms cluster-size=2 block-size=256 range-lengths=kv:$mixed task-extents=$tasks" \
  "--block-size 256 $rand" "per-cta-shared=true"
ls -l "$dir"
