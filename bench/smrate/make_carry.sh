#!/usr/bin/env bash
# On the CPU machine (clang-22): the per-SM read-rate probe's kernels
# (README.md): DIR/sm_rate.ptx, the load loops, and DIR/sm_rate_gqa.ptx,
# the harness of examples/attention_gqa's partial.
# usage: bench/smrate/make_carry.sh DIR
# (then, on the GPU machine: bash bench/smrate/run.sh DIR [OUT])
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
dir="${1:?usage: make_carry.sh DIR}"
mkdir -p "$dir"
clang-22 --target=nvptx64-nvidia-cuda -march=sm_90a -nogpulib -nostdlibinc -ffreestanding \
  -std=gnu17 -O3 -Wall -Wextra -Werror -S "$here/sm_rate_kernel.c" -o "$dir/sm_rate.ptx"
# the real partial's harness (sm_rate_gqa.c): build a, the handler as it
# is plus SMRATE_A; builds b and c only when SMRATE_B / SMRATE_C give
# their flags (an A/B of a handler change in one run)
gqa() { # gqa OUT FLAGS...
  local out=$1; shift
  clang-22 --target=nvptx64-nvidia-cuda -march=sm_90a -nogpulib -nostdlibinc \
    -fconvergent-functions -std=gnu17 -O2 -Wall -Wextra -Werror -I "$here/../../include" "$@" \
    -S "$here/sm_rate_gqa.c" -o "$out"
}
# shellcheck disable=SC2086 # flag lists
gqa "$dir/sm_rate_gqa.ptx" ${SMRATE_A:-}
rm -f "$dir/sm_rate_gqa_b.ptx" "$dir/sm_rate_gqa_c.ptx"
# shellcheck disable=SC2086
if [ -n "${SMRATE_B:-}" ]; then gqa "$dir/sm_rate_gqa_b.ptx" $SMRATE_B; fi
# shellcheck disable=SC2086
if [ -n "${SMRATE_C:-}" ]; then gqa "$dir/sm_rate_gqa_c.ptx" $SMRATE_C; fi
