#!/usr/bin/env bash
# On the GPU machine: Nsight Compute profile of the fused MoE kernel (the
# first df launch of moe_bench.py on CARRY: make it with one variant and
# one token count, e.g. MOE_TOKENS=1024 MOE_VARIANTS="c2:132:2"
# bench/moe/make_moe_carry.sh DIR) and of grouped_mm's kernels, with the
# counters at the clocks the card runs at (--clock-control none).
# Writes OUT/ncu-moe.txt (df kernel, every section of --set full) and
# OUT/ncu-gmm.txt (the first two kernels whose names match MOE_GMM_KERNELS,
# default '[Gg]rouped': in run J that caught only grouped_mm's
# prepare_grouped_gemm_data kernels, not its GEMMs, whose names were not
# seen; set the regex once they are known).
# usage: bash bench/moe/profile.sh CARRY OUT
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: profile.sh CARRY OUT}"
out="${2:?usage: profile.sh CARRY OUT}"
mkdir -p "$out"
ncu_bin="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
bench=(python3 "$root/bench/moe/moe_bench.py" "$dir" --out "$out/bench" --iters 30 --warmup 0
       --sets 1 --block-dims 256)
"$ncu_bin" --clock-control none --set full -k regex:df_persistent_kernel -c 1 "${bench[@]}" \
  >"$out/ncu-moe.txt" 2>&1 || true
"$ncu_bin" --clock-control none --set full -k "regex:${MOE_GMM_KERNELS:-[Gg]rouped}" -c 2 "${bench[@]}" \
  >"$out/ncu-gmm.txt" 2>&1 || true
