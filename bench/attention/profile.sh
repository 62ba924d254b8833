#!/usr/bin/env bash
# On the GPU machine: Nsight Compute profiles of df's attention kernel and
# SDPA's (cuDNN, flash) for the cases named, one launch each
# (profile.py), with the counters left at the clocks the card runs at
# (--clock-control none). Text reports: OUT/ncu-CASE.txt (every section of
# `--set full`, the details page) and OUT/ncu-CASE-raw.csv (a few raw
# metrics, one row per kernel).
# usage: bash bench/attention/profile.sh CARRY OUT CASE[,CASE...]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: profile.sh CARRY OUT CASES}"
out="${2:?usage: profile.sh CARRY OUT CASES}"
cases="${3:?usage: profile.sh CARRY OUT CASES}"
mkdir -p "$out"
# shellcheck source=scripts/gpu/build_dfrt.sh
source "$root/scripts/gpu/build_dfrt.sh"
lib="$(bench_dfrt_lib "$out")"
ncu_bin="$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)"
kernels='regex:df_persistent_kernel|cudnn|sdpa|fmha|flash|attention'
metrics=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,dram__bytes_read.sum,lts__t_sector_hit_rate.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,smsp__warps_issue_stalled_long_scoreboard_per_issue_active.ratio
metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread
metrics+=,launch__grid_size,launch__block_size,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,lts__t_sectors_srcunit_tex_op_read.sum
IFS=, read -r -a names <<<"$cases"
for c in "${names[@]}"; do
  DF_RT_LIB_DIR="$lib" "$ncu_bin" --clock-control none --set full -k "$kernels" -c 3 \
    python3 "$root/bench/attention/profile.py" "$dir" "$c" >"$out/ncu-$c.txt" 2>&1 || true
  DF_RT_LIB_DIR="$lib" "$ncu_bin" --clock-control none --metrics "$metrics" -k "$kernels" -c 3 \
    --csv --page raw python3 "$root/bench/attention/profile.py" "$dir" "$c" \
    >"$out/ncu-$c-raw.csv" 2>&1 || true
done
