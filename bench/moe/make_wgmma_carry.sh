#!/usr/bin/env bash
# On the CPU machine: the warpgroup-GEMM comparison carry (examples/moe/
# moe_wgmma.h, bench/moe/HISTORY.md run W), the same way in every session:
# the shipped rows of scripts/gpu/make_all_carries.sh at their token counts
# next to the wgmma builds of clusters of 3 (64-row tiles at 512 tokens:
# 38 tasks in one round) and of 2, a probe without the wgmma instructions
# (the data movement alone, wrong results), one without the proxy fences,
# and a build that leaves tasks of fewer than 3 n-tiles on the mma.sync
# paths; the register-ring form and the bulk-copy probes (run X).
# usage: DF_BIN=build/bin bench/moe/make_wgmma_carry.sh [DIR]   (default build-moe-wg)
#   then, on the GPU machine (carry DIR):
#   python3 bench/moe/moe_bench.py DIR --block-dims 256 --out $OUT/bench
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
export DF_BIN="${DF_BIN:-$root/build/bin}"
dir="${1:-build-moe-wg}"
rm -rf "$dir"

moe() { # NAME:SMS:CLUSTER TOKENS [VAR=VALUE...]
  local variant=$1 tokens=$2
  shift 2
  env "$@" MOE_TOKENS="$tokens" MOE_VARIANTS="$variant" bash bench/moe/make_moe_carry.sh "$dir"
}
fine="-DMOE_NT_FINE -DMOE_NT3 -DMOE_GU_STAGE_MIN_NT=1"
# the shipped rows (scripts/gpu/make_all_carries.sh)
moe c3x117s3tapkm1:117:3 "128 256" MOE_PACKED=1 MOE_TILE=auto MOE_GU_STAGE=8 "MOE_CFLAGS=$fine"
moe c2s3t20pkm1:132:2 512 MOE_PACKED=1 MOE_TILE=20 MOE_GU_STAGE=8 "MOE_CFLAGS=$fine"
moe c2sft40pkm4:132:2 1024 MOE_PACKED=1 MOE_TILE=40 MOE_GU_STAGE=8 \
  "MOE_CFLAGS=-DMOE_NT_FINE -DMOE_GU_STAGE_MIN_NT=4"
# wgmma: 6 gate_up / 8 down stages of one m64 block, and 4 / 6 of two
moe c3wg:117:3 "128 256 512" MOE_PACKED=1 MOE_TILE=auto MOE_WG=6,8,1
# 64-row tiles at 128 / 256 tokens too (30 / 33 tasks: fewer duplicate
# weight reads, some clusters idle)
moe c3wgt64:117:3 "128 256" MOE_PACKED=1 MOE_TILE=64 MOE_WG=6,8,1
moe c3wgm2:117:3 "128 256 512" MOE_PACKED=1 MOE_TILE=auto MOE_WG=4,6,2
# chunks of 2 k steps per wait, fence, barrier and wgmma group
moe c3wgk2:117:3 "128 256 512" MOE_PACKED=1 MOE_TILE=auto MOE_WG=6,8,1 MOE_CFLAGS=-DMOE_WG_KC=2
# wgmma from 3 n-tiles, the staged mma.sync paths below
moe c3wgn3:117:3 "128 256 512" MOE_PACKED=1 MOE_TILE=auto MOE_GU_STAGE=8 MOE_WG=6,8,1 \
  "MOE_CFLAGS=$fine -DMOE_WG_MIN_NT=3"
# the data movement alone (no wgmma instructions: wrong results), and
# without the proxy fences (their cost; results may be wrong)
moe c3wgp:117:3 512 MOE_PACKED=1 MOE_TILE=auto MOE_WG=6,8,1 MOE_CFLAGS=-DMOE_WG_PROBE=2
moe c3wgpf:117:3 512 MOE_PACKED=1 MOE_TILE=auto MOE_WG=6,8,1 MOE_CFLAGS=-DMOE_WG_PROBE=8
moe c2wg:132:2 "512 1024" MOE_PACKED=1 MOE_TILE=auto MOE_WG=6,8,1
# fewer, larger tasks on clusters of 2 (64-row tiles: 37 / 48 tasks on 66
# clusters; half an expert per SM, fewer SMs sharing the DRAM)
moe c2wgt64:132:2 "512 1024" MOE_PACKED=1 MOE_TILE=64 MOE_WG=6,8,1
# the register-ring form (run X): loads into registers, shared stores into
# 3 stages; 4 and 8 register steps; its probe without wgmma and fences
moe c3wr:117:3 "256 512" MOE_PACKED=1 MOE_TILE=auto MOE_WG=3,3,1 MOE_CFLAGS=-DMOE_WG_REG=1
moe c3wr8:117:3 512 MOE_PACKED=1 MOE_TILE=auto MOE_WG=3,3,1 "MOE_CFLAGS=-DMOE_WG_REG=1 -DMOE_WG_RR=8"
moe c3wrp:117:3 512 MOE_PACKED=1 MOE_TILE=auto MOE_WG=3,3,1 \
  "MOE_CFLAGS=-DMOE_WG_REG=1 -DMOE_WG_PROBE=66"
# weights by cp.async.bulk (run X calls 5-7; timing probes, wrong results):
# down alone (gate_up skipped) in the cp.async and bulk forms and shipped;
# bulk weights with and without the token copies (A-only stages)
moe c3wgd:117:3 512 MOE_PACKED=1 MOE_TILE=auto MOE_WG=6,8,1 "MOE_CFLAGS=-DMOE_PROBE=2"
moe c3wgbd:117:3 512 MOE_PACKED=1 MOE_TILE=auto MOE_WG=6,8,1 \
  "MOE_CFLAGS=-DMOE_PROBE=2 -DMOE_WG_PROBE=128"
moe c3sd:117:3 512 MOE_PACKED=1 MOE_TILE=auto MOE_GU_STAGE=8 "MOE_CFLAGS=$fine -DMOE_PROBE=2"
moe c3wgb:117:3 512 MOE_PACKED=1 MOE_TILE=auto MOE_WG=6,8,1 "MOE_CFLAGS=-DMOE_WG_PROBE=128"
moe c3wgbn:117:3 "128 512" MOE_PACKED=1 MOE_TILE=auto MOE_WG=6,8,1 \
  "MOE_CFLAGS=-DMOE_WG_PROBE=384"
du -sh "$dir"
