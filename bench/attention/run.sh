#!/usr/bin/env bash
# On the GPU machine (gcc, cmake, CUDA driver, PyTorch; no LLVM): builds
# libdfrt.so (plan core + CUDA runtime, no MLIR) and runs bench.py on the
# carry folder of bench/attention/make_carry.sh. Results: OUT/table.md,
# OUT/results.json, OUT/build.log.
# usage: bash bench/attention/run.sh DIR [OUT]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: run.sh DIR [OUT]}"
out="${2:-${OUT:-$root/bench-out}}"
build="$root/build-bench-gpu"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader || true
src="$build-src"
mkdir -p "$src"
cat >"$src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(dfrt_bench C)
set(CMAKE_C_STANDARD 17)
set(CMAKE_C_EXTENSIONS ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
add_compile_options(-Wall -Wextra -Wno-format-truncation -Wno-maybe-uninitialized)
include_directories($root/include)
add_subdirectory($root/lib/Support support)
add_subdirectory($root/lib/Plan plan)
add_subdirectory($root/lib/Runtime/cuda cuda)
CMAKE
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >"$out/build.log" 2>&1
cmake --build "$build" -j "$(nproc)" --target dfrt >>"$out/build.log" 2>&1 \
  || { tail -30 "$out/build.log"; exit 1; }
lib="$(dirname "$(find "$build" -name 'libdfrt.so' | head -1)")"
DF_RT_LIB_DIR="$lib" PYTHONUNBUFFERED=1 python3 "$root/bench/attention/bench.py" "$dir" "$out"
