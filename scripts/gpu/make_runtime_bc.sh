#!/usr/bin/env bash
# A device-runtime bitcode variant for A/B runs (CPU machine): every
# lib/Runtime/device/*.c of SRC (a checkout; default this one) compiled with
# the runtime's flags plus FLAGS (e.g. -DDF_RT_STAGE_CLUSTER=0, -DDF_RT_TRACE),
# linked into OUT.bc. Carry makers link it instead of the embedded runtime
# when DF_RUNTIME_BC=OUT.bc (scripts/gpu/carry_lib.sh); the traced overhead
# cases take DF_TRACE_BC.
# usage: scripts/gpu/make_runtime_bc.sh OUT.bc [SRC] [FLAGS...]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:?usage: make_runtime_bc.sh OUT.bc [SRC] [FLAGS...]}"
src="${2:-$root}"
shift $(($# >= 2 ? 2 : 1))
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
bcs=()
for f in "$src"/lib/Runtime/device/*.c; do
  name="$(basename "$f" .c)"
  clang-22 --target=nvptx64-nvidia-cuda -march=sm_90a -nogpulib -nostdlibinc \
    -fconvergent-functions -O2 -std=gnu17 -Wall -Wextra -Werror -I "$src/include" "$@" \
    -emit-llvm -c "$f" -o "$tmp/$name.bc"
  bcs+=("$tmp/$name.bc")
done
llvm-link-22 "${bcs[@]}" -o "$out"
