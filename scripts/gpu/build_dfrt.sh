# Sourced by the bench runners on the GPU machine (gcc, cmake, CUDA driver;
# no LLVM): bench/attention/run.sh and bench/overhead/run.sh. The caller
# sets `root` (the repository) first.
#
# build_dfrt BUILD PROJECT TARGET LOG [CMAKE]: prints the GPU's name, driver
# and clocks, then builds TARGET in BUILD with a wrapper project PROJECT
# (in BUILD-src) of the plan library and the CUDA runtime libdfrt, no MLIR,
# plus the CMake lines CMAKE (e.g. a bench executable). The build's output
# goes to LOG; on failure its tail is printed and the script exits.
build_dfrt() {
  local build=$1 project=$2 target=$3 log=$4 extra=${5:-}
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader || true
  local src="$build-src"
  mkdir -p "$src"
  {
    cat <<CMAKE
cmake_minimum_required(VERSION 3.20)
project($project C)
set(CMAKE_C_STANDARD 17)
set(CMAKE_C_EXTENSIONS ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
add_compile_options(-Wall -Wextra -Wno-format-truncation -Wno-maybe-uninitialized)
include_directories($root/include)
add_subdirectory($root/lib/Support support)
add_subdirectory($root/lib/Plan plan)
add_subdirectory($root/lib/Runtime/cuda cuda)
CMAKE
    if [ -n "$extra" ]; then printf '%s\n' "$extra"; fi
  } >"$src/CMakeLists.txt"
  local gen=()
  if command -v ninja >/dev/null; then gen=(-G Ninja); fi
  cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release >"$log" 2>&1
  cmake --build "$build" -j "$(nproc)" --target "$target" >>"$log" 2>&1 \
    || { tail -30 "$log"; exit 1; }
}

# bench_dfrt_lib OUT: libdfrt.so built in $root/build-bench-gpu (log:
# OUT/build.log); prints the folder that holds it, for DF_RT_LIB_DIR of
# the Python benches (bench/attention run.sh, profile.sh).
bench_dfrt_lib() {
  local build="$root/build-bench-gpu"
  build_dfrt "$build" dfrt_bench dfrt "$1/build.log" >&2
  dirname "$(find "$build" -name 'libdfrt.so' | head -1)"
}
