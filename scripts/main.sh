#!/usr/bin/env bash
# The main job: build df, compile the bundled example programs through
# df-opt and print what they hold, then compile the seed attention example
# end to end and run it: on the host backend always, and on the GPU too
# when a CUDA driver is present; outputs are checked against a float64
# reference.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" -j "$(nproc)" >/dev/null
bin="$root/build/bin"
for ex in "$root"/examples/seed/*.mlir; do
  echo "== ${ex#$root/}"
  "$bin/df-opt" "$ex" | "$bin/df-translate" --df-program-dump
done

echo "== seed attention: 4 SMs, cluster 2, kv 384,256, block 128"
work="$root/build/main-run"
rm -rf "$work" && mkdir -p "$work"
"$bin/df-opt" "$root/examples/seed/attention.mlir" \
  --df-schedule="sm-count=4 cluster-size=2 block-size=128 range-lengths=kv:384,256 task-extents=2" \
  -o "$work/plan.mlir"
"$bin/df-translate" --df-to-plan "$work/plan.mlir" -o "$work/plan.dfplan"
"$bin/df-translate" --df-plan-dump "$work/plan.mlir" | grep -E '^(plan|counts|totals):'
clang-22 -O2 -fPIC -std=gnu17 -I "$root/include" -emit-llvm -c \
  "$root/examples/seed/attention_handlers.c" -o "$work/handlers_host.bc"
"$bin/df-translate" --df-to-host --df-link="$work/handlers_host.bc" "$work/plan.mlir" \
  -o "$work/handlers_host.so"
"$root/build/test/runtime/dfrt_make_attention_ref" "$work" 384 256 >/dev/null
tensors=(--tensor "Q=file:$work/q.bin:float16:2x16" --tensor "K=file:$work/k.bin:float16:2x4096x16"
         --tensor "V=file:$work/v.bin:float16:2x4096x16" --tensor O=zeros:float32:2x16
         --check "O=$work/o_ref.bin:0.02:0.002")
echo "-- host backend"
"$bin/df-run" --backend=host --handlers "$work/handlers_host.so" --plan "$work/plan.dfplan" \
  --block-size 128 "${tensors[@]}" --cost | grep -E 'check|total:|host backend'
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "-- GPU"
  clang-22 --target=nvptx64-nvidia-cuda -march=sm_90a -nogpulib -nostdlibinc \
    -fconvergent-functions -O2 -std=gnu17 -I "$root/include" -emit-llvm -c \
    "$root/examples/seed/attention_handlers.c" -o "$work/handlers.bc"
  "$bin/df-translate" --df-to-ptx --df-link="$work/handlers.bc" "$work/plan.mlir" -o "$work/kernel.ptx"
  "$bin/df-run" --kernel "$work/kernel.ptx" --plan "$work/plan.dfplan" --block-size 128 \
    "${tensors[@]}" --iters 10 --warmup 2 | grep -E 'check|launches'
else
  echo "-- GPU: no CUDA driver here; the host backend ran the same plan"
fi
