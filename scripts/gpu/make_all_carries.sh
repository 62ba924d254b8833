#!/usr/bin/env bash
# On the CPU machine: every carry scripts/gpu/run_all.sh runs, plus the
# runtime smoke test's, the same way in every session:
#   build-bench-carry     decode attention: each case's plan and the
#                         alternatives worth a row (the others are removed
#                         after make_carry.sh: see PRUNE)
#   build-overhead-carry  runtime overhead microbenchmarks
#   build-moe-carry       fused MoE: the shipped rows (MOE_ROWS below)
#   .gpu-fuse, .gpu-ring  fusion parity and ring proofs
#   .gpu-smoke            libdfrt smoke test (test/lit/Runtime/Inputs)
# usage: DF_BIN=build/bin scripts/gpu/make_all_carries.sh
#   (DF_SMS=N: a card of N SMs instead of 132; bench/README.md "Reproduce")
#   then, on the GPU machine (carry all six; run_all.sh's header has the
#   command that returns its files as one archive):
#   OUT=$OUT/all bash scripts/gpu/run_all.sh; .gpu-smoke/gpu_smoke .gpu-smoke/kernel.ptx
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
export DF_BIN="${DF_BIN:-$root/build/bin}"

rm -rf build-bench-carry build-overhead-carry build-moe-carry .gpu-fuse .gpu-ring .gpu-smoke
bash bench/attention/make_carry.sh build-bench-carry
# Alternatives measured in earlier runs and not re-run every time
# (bench/README.md says which run measured each); removed to keep the
# carry under the device tool's 64 MiB.
PRUNE='*.fuse.* *.spread.* *.loop.* u1x128k.even.fan4.* u1x128k.even264* u1x128k.even66*
  *.l2hint.* *.b2048.* *.b3072.* s16.b4096.* u8x32k.st2.* u8x32k.st3.* *.noskip.* *.fan0.*
  *.fan8.* *.table.* *.b4096.* *.direct.* *.rs4.* *.rs4f4.* *.poolb2048.* *.embed.*
  u8x32k.pool.* u64x4k.pool.* *.even.* s32.pool.* s64.pool.* *.rr.* *.pt80.* *.pt70.*
  *.x2pt80.* *.fan0rf.* *.rf.* *.l2none.*'
(cd build-bench-carry && for p in $PRUNE; do rm -f $p; done)
bash bench/overhead/make_carry.sh build-overhead-carry

# MoE: run P's rows (register layout), run Q's fragment-packed rows, run
# U's small-tile rows and run V's clusters of 3 (bench/moe/README.md), side
# by side (run P's c4x120n6 no longer carried: its packed twin is).
moe() { # NAME:SMS:CLUSTER TOKENS [VAR=VALUE...]
  local variant=$1 tokens=$2
  shift 2
  # Another card (DF_SMS): the tiles the H200's rows fix may not fit its
  # clusters in one round (a staged row's workspace fits one task per CTA)
  [ "${DF_SMS:-132}" = 132 ] || set -- "$@" MOE_TILE=auto
  env "$@" MOE_TOKENS="$tokens" MOE_VARIANTS="$variant" bash bench/moe/make_moe_carry.sh build-moe-carry
}
td=-DMOE_GU_RING=3,4,4,3,4,4,3,2,2,3,2,1
moe c4x120:120:4 "128 256 512 1024"
moe c4x120td:120:4 "512 1024" MOE_CFLAGS="$td"
moe c2s6t48:132:2 1024 MOE_TILE=48 MOE_GU_STAGE=8 MOE_CFLAGS=-DMOE_NT6
moe c4x120n6pkr4:120:4 128 MOE_PACKED=1 "MOE_CFLAGS=-DMOE_NT6 -DMOE_GU_RING=1,4,4,1,4,4,1,4,2,3,2,1"
moe c4x120n6pk:120:4 "256 512" MOE_PACKED=1 MOE_CFLAGS=-DMOE_NT6
moe c4x120tdpk:120:4 512 MOE_PACKED=1 MOE_CFLAGS="$td"
moe c2s6t48pk:132:2 1024 MOE_PACKED=1 MOE_TILE=48 MOE_GU_STAGE=8 MOE_CFLAGS=-DMOE_NT6
# run U: clusters of 2 with small tiles (every task in one round on 66
# clusters), the token rows staged from N n-tiles up, n-tile variants 3
# and 5-8 each their own
moe c2sft16pkm2:132:2 "128 256" MOE_PACKED=1 MOE_TILE=16 MOE_GU_STAGE=8 \
  "MOE_CFLAGS=-DMOE_NT_FINE -DMOE_GU_STAGE_MIN_NT=2"
moe c2s3t20pkm1:132:2 512 MOE_PACKED=1 MOE_TILE=20 MOE_GU_STAGE=8 \
  "MOE_CFLAGS=-DMOE_NT_FINE -DMOE_NT3 -DMOE_GU_STAGE_MIN_NT=1"
moe c2sft40pkm4:132:2 1024 MOE_PACKED=1 MOE_TILE=40 MOE_GU_STAGE=8 \
  "MOE_CFLAGS=-DMOE_NT_FINE -DMOE_GU_STAGE_MIN_NT=4"
# run V: clusters of 3 on the 117 SMs that hold 39 of them (a third of an
# expert per SM), tiles from --tile auto (16 / 32 rows), every task staged
moe c3x117s3tapkm1:117:3 "128 256" MOE_PACKED=1 MOE_TILE=auto MOE_GU_STAGE=8 \
  "MOE_CFLAGS=-DMOE_NT_FINE -DMOE_NT3 -DMOE_GU_STAGE_MIN_NT=1"

scripts/gpu/make_fusion_carry.sh .gpu-fuse 1024
scripts/gpu/make_ring_carry.sh .gpu-ring
sh test/lit/Runtime/Inputs/gpu_smoke_build.sh build .gpu-smoke
du -sh build-bench-carry build-overhead-carry build-moe-carry .gpu-fuse .gpu-ring .gpu-smoke
# The device tool carries at most 64 MiB with the working tree.
total=$(( $(du -sb build-bench-carry build-overhead-carry build-moe-carry .gpu-fuse .gpu-ring \
  .gpu-smoke | awk '{s += $1} END {print s}') + $(git ls-files -z | du -cb --files0-from=- | tail -1 | cut -f1) ))
echo "carries + tracked files: $total bytes (limit $((64 << 20)))"
[ "$total" -le $((64 << 20)) ] || { echo "make_all_carries.sh: over the device tool's 64 MiB: prune more" >&2; exit 1; }
