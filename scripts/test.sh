#!/usr/bin/env bash
# The whole test suite: build, unit tests + lit suites, then the unit tests
# again under ASan+UBSan, then a short fuzz run of the plan-blob reader.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
jobs="$(nproc)"

cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$root/build" -j "$jobs"
cmake --build "$root/build" --target check
# The Python bindings (ctypes) over the build's shared libraries.
DF_LIB_DIR="$root/build/lib/Shared" python3 -m pytest -q "$root/python-bindings/tests"

cmake -S "$root" -B "$root/build-asan" -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DDF_ENABLE_MLIR=OFF -DDF_SANITIZE=ON -DCMAKE_C_COMPILER=clang-22 >/dev/null
cmake --build "$root/build-asan" -j "$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir "$root/build-asan" --output-on-failure -j "$jobs"

if [ -x "$root/build-asan/test/fuzz_plan_blob" ]; then
  # New inputs go to a scratch corpus; the committed seeds stay as they are.
  mkdir -p "$root/build-asan/fuzz-corpus"
  "$root/build-asan/test/fuzz_plan_blob" -runs=20000 -max_len=4096 \
    "$root/build-asan/fuzz-corpus" "$root/test/fuzz/corpus" >/dev/null \
    2>"$root/build-asan/fuzz.log" \
    || { cat "$root/build-asan/fuzz.log"; exit 1; }
fi
echo "df: all tests passed"
