#!/bin/sh
# Builds the device-runtime GPU smoke test on the CPU machine into OUT:
# kernel.ptx and gpu_smoke. Needs LLVM 22, a built BUILD_DIR (the runtime
# bitcode, libdf_plan) and, from a CUDA toolkit, cuda.h and the libcuda
# stub. Run on the GPU machine: `OUT/gpu_smoke OUT/kernel.ptx`.
# Usage: gpu_smoke_build.sh BUILD_DIR OUT
set -eu
build=$1
out=$2
src=$(cd "$(dirname "$0")/../../../.." && pwd)
llvm=/usr/lib/llvm-22/bin
cuda=${CUDA_HOME:-/usr/local/cuda}
mkdir -p "$out"
"$llvm/clang" --target=nvptx64-nvidia-cuda -march=sm_90a -nogpulib -nostdlibinc \
  -fconvergent-functions -O2 -Wall -Wextra -Werror -emit-llvm -c -I "$src/include" \
  "$src/test/lit/Runtime/Inputs/gpu_smoke_handlers.c" -o "$out/handlers.bc"
"$llvm/llvm-link" "$build/lib/Runtime/device/df_device_runtime.bc" "$out/handlers.bc" \
  -o "$out/kernel.bc"
# The compiler's pipeline: everything but the kernel internal, O3, PTX 8.0.
"$llvm/opt" -passes='internalize,default<O3>' \
  -internalize-public-api-list=df_persistent_kernel "$out/kernel.bc" -o "$out/kernel.opt.bc"
"$llvm/llc" -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90a -mattr=+ptx86 "$out/kernel.opt.bc" \
  -o "$out/kernel.ptx"
cc -std=gnu17 -O1 -Wall -Wextra -Werror -I "$src/include" -I "$cuda/include" \
  -I "$src/test/unit" "$src/test/lit/Runtime/Inputs/gpu_smoke.c" \
  "$src/test/unit/seed_plans.c" "$src/test/unit/hand_plan.c" \
  "$build/lib/Plan/libdf_plan.a" "$build/lib/Support/libdf_support.a" \
  -L "$cuda/lib64/stubs" -lcuda -lm -o "$out/gpu_smoke"
