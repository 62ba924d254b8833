#!/usr/bin/env bash
# On the GPU machine (gcc, cmake, CUDA driver; no LLVM, no PyTorch): builds
# libdfrt.so and overhead_bench (a wrapper project, as
# bench/attention/run.sh does) and runs it on the carry folder of
# bench/overhead/make_carry.sh. Prints one report; also OUT/table.md and
# OUT/build.log.
# usage: bash bench/overhead/run.sh DIR [OUT]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: run.sh DIR [OUT]}"
out="${2:-${OUT:-$root/bench-out}}"
build="$root/build-overhead-gpu"
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader || true
src="$build-src"
mkdir -p "$src"
cat >"$src/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.20)
project(dfrt_overhead C)
set(CMAKE_C_STANDARD 17)
set(CMAKE_C_EXTENSIONS ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
add_compile_options(-Wall -Wextra -Wno-format-truncation -Wno-maybe-uninitialized)
include_directories($root/include)
add_subdirectory($root/lib/Support support)
add_subdirectory($root/lib/Plan plan)
add_subdirectory($root/lib/Runtime/cuda cuda)
add_executable(overhead_bench $root/bench/overhead/overhead_bench.c)
target_link_libraries(overhead_bench PRIVATE dfrt m)
CMAKE
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >"$out/build.log" 2>&1
cmake --build "$build" -j "$(nproc)" --target overhead_bench >>"$out/build.log" 2>&1 \
  || { tail -30 "$out/build.log"; exit 1; }
"$(find "$build" -name overhead_bench -type f -perm -u+x | head -1)" "$dir" | tee "$out/table.md"
