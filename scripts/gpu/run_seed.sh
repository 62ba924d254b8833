#!/usr/bin/env bash
# GPU smoke run of libdfrt and df-run, on the lent GPU machine (gcc, cmake,
# CUDA driver; no clang, no LLVM/MLIR needed).
#
# usage: scripts/gpu/run_seed.sh DIR
#   DIR holds what was built on the CPU machine: NAME.ptx (or NAME.cubin)
#   with NAME.dfplan, and optionally NAME.args (extra df-run arguments on
#   one line, e.g. "--tensor Q=file:@DIR@/q.bin:float16:2x16 ... --check
#   O=@DIR@/o_ref.bin:0.02"; @DIR@, @OUT@ and @WORK@ stand for DIR, $OUT
#   and a scratch folder that does not come back) and NAME.expect ("RC
#   REGEX": the run must exit with RC and print a line matching REGEX, for
#   runs that must fail, e.g. the watchdog's); scripts/gpu/run_case.sh runs
#   each (20 timed launches after 3 warm-ups, killed after
#   $DF_GPU_RUN_TIMEOUT seconds, default 300).
#   scripts/gpu/make_seed_carry.sh DIR fills DIR with the seed attention
#   kernel, plan, inputs and reference on the CPU machine.
#   With DIR/probe.ptx, or nvcc on the PATH (which compiles
#   scripts/gpu/probe_kernel.cu), it also runs the runtime probe
#   (scripts/gpu/probe_runtime.c) and df-run on the seed plan with it.
# Results go to $OUT (default ./gpu-out): build.log, one NAME.log per run,
# probe.log, summary.txt. Exit status: number of failed runs.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="$(cd "${1:?usage: run_seed.sh DIR}" && pwd)"
out="${OUT:-$root/gpu-out}"
build="$root/build-gpu"
work="${DF_GPU_WORK:-$build-work}"
mkdir -p "$out" "$work"
summary="$out/summary.txt"
: >"$summary"
failed=0
note() { echo "$*" | tee -a "$summary"; }

# Build libdfrt and df-run. The top-level project needs cmocka for its unit
# tests; without it, a wrapper project builds just the plan library and
# the runtime (DF_GPU_WRAPPER=1 forces that).
export CC=gcc
# gcc -O3 reports maybe-uninitialized false positives, which -Werror turns
# into build failures.
cflags="-Wno-maybe-uninitialized"
if [ -z "${DF_GPU_WRAPPER:-}" ] && cmake -S "$root" -B "$build" -G Ninja -DDF_ENABLE_MLIR=OFF -DCMAKE_BUILD_TYPE=Release \
    "-DCMAKE_C_FLAGS=$cflags" >"$out/build.log" 2>&1; then
  targets=(dfrt df-run dfrt_make_seed_blob)
else
  echo "top-level configure failed; using the wrapper project" >>"$out/build.log"
  wrapper="$build-src"
  build="$build-wrapper"
  mkdir -p "$wrapper"
  cat >"$wrapper/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.25)
project(dfrt_gpu C)
set(CMAKE_C_STANDARD 17)
set(CMAKE_C_EXTENSIONS ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)
add_compile_options(-Wall -Wextra -Wno-format-truncation)
include_directories($root/include)
add_subdirectory($root/lib/Support support)
add_subdirectory($root/lib/Plan plan)
add_subdirectory($root/lib/Runtime/cuda cuda)
CMAKE
  cmake -S "$wrapper" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_C_FLAGS=$cflags" \
    >>"$out/build.log" 2>&1 \
    || { note "BUILD FAILED (configure): see build.log"; exit 1; }
  targets=(dfrt df-run dfrt_make_seed_blob)
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >>"$out/build.log" 2>&1 \
  || { note "BUILD FAILED: see build.log"; exit 1; }
df_run="$build/bin/df-run"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$summary"
fi

# One df-run per NAME.dfplan with its kernel.
for plan in "$dir"/*.dfplan; do
  [ -e "$plan" ] || continue
  name="$(basename "$plan" .dfplan)"
  kernel="$dir/$name.ptx"
  [ -e "$kernel" ] || kernel="$dir/$name.cubin"
  if [ ! -e "$kernel" ]; then
    note "SKIP $name: no $name.ptx or $name.cubin"
    continue
  fi
  bash "$root/scripts/gpu/run_case.sh" "$df_run" "$dir" "$name" "$out" "$work" >"$out/$name.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ] && [ -e "$dir/$name.expect" ]; then
    note "ok   $name: failed as expected: $(grep -E 'CTA [0-9]+: pc' "$out/$name.log" | tail -1)"
  elif [ "$rc" = 0 ]; then
    note "ok   $name: $(grep -E 'launches \(.*CUDA events' "$out/$name.log" | tail -1)"
  else
    note "FAIL $name (rc $rc): $(tail -1 "$out/$name.log")"
    failed=$((failed + 1))
  fi
done

# The runtime probe: real clusters, TMA, flag reset, staging, errors.
probe="$dir/probe.ptx"
if [ ! -e "$probe" ] && command -v nvcc >/dev/null; then
  probe="$build/probe.ptx"
  nvcc -arch=sm_90a -ptx "$root/scripts/gpu/probe_kernel.cu" -o "$probe" >>"$out/build.log" 2>&1 \
    || probe=""
fi
if [ -n "$probe" ] && [ -e "$probe" ]; then
  plan_a="$(find "$build" -name libdf_plan.a | head -1)"
  support_a="$(find "$build" -name libdf_support.a | head -1)"
  gcc -std=gnu17 -O1 -I"$root/include" -I"$root/test/unit" "$root/scripts/gpu/probe_runtime.c" \
    "$root/test/unit/seed_plans.c" -L"$build/lib" -ldfrt "$plan_a" "$support_a" \
    -Wl,-rpath,"$build/lib" -o "$build/probe_runtime" >>"$out/build.log" 2>&1 || true
  if [ -x "$build/probe_runtime" ] && "$build/probe_runtime" "$probe" >"$out/probe.log" 2>&1; then
    note "ok   probe: $(tail -1 "$out/probe.log")"
  else
    note "FAIL probe: $(grep -E 'FAIL|SETUP' "$out/probe.log" 2>/dev/null | head -3)"
    failed=$((failed + 1))
  fi
  # df-run end to end on the seed plan: tensor Q receives the probe's reports.
  "$build/test/runtime/dfrt_make_seed_blob" "$build/seed.dfplan"
  if "$df_run" --kernel "$probe" --plan "$build/seed.dfplan" --block-size 128 --iters 50 \
      --warmup 5 --tensor Q=zeros:float32:2048 --tensor K=random:float16:4x16 \
      --tensor V=zeros:float16:64 --tensor O=zeros:float16:64 --save "Q=$build/probe_reports.bin" \
      --staging-out "$build/probe_staging.bin" >"$out/probe_df_run.log" 2>&1; then
    note "ok   df-run probe: $(grep -E 'launches' "$out/probe_df_run.log" | tail -1)"
  else
    note "FAIL df-run probe: $(tail -1 "$out/probe_df_run.log")"
    failed=$((failed + 1))
  fi
fi
exit "$failed"
