#!/usr/bin/env bash
# On the CPU machine (clang-22, df-opt/df-translate in $DF_BIN, default
# build/bin): issue 8's GPU cases in the folder run_seed.sh takes —
# kernels (PTX), plan blobs, float64 references (.npy) and df-run
# arguments. Inputs are df-run's seeded random tensors made on the GPU
# machine; moe_reference / gqa_reference regenerate them here.
#   moe_ring4_t16     reshared MoE, cluster_shared_pull_ring, 132 SMs / cluster 4,
#                     8 experts x 16 tokens, 64 hidden columns (f16[2,8] shards of 32 B)
#                     in 16-byte transfer tiles: 128 x 4*3*2 = 3072 DSMEM segment sends
#   moe_ring4         the same ring with whole-shard transfers (128 x 12 sends)
#   moe_gather4_t16   cluster_shared_all_gather, same shape, 16-byte tiles
#   moe_ring2         the seed MoE (cluster 2, 16 columns) over the ring
#   gqa_tiled         GQA decode, 4 SMs / cluster 2, transfers in 256-byte tiles
#                     (cluster segments and the HBM bulk store/load paths)
#   gqa_tiled_hbm     the same on cluster size 1: every transfer is tiled HBM
#                     (the receiving CTA loads one 256-byte tile at a time)
#   gqa_tiled_hbm_replan  the gqa_tiled_hbm kernel and blob, re-planned by libdfrt
#                     for swapped lengths (kv 256 x 8, 384 x 8): the re-plan repeats
#                     the blob's recorded 256-byte tile
#   gqa_long          a 128K-token range: 1 sequence x 8 KV heads, kv = 131072, block 128
#                     (1,024 blocks per task), 132 SMs / cluster 2, reduce-strategy=auto
#                     under the sm_90 budget (all_at_once would need 8.5 MB of shared
#                     memory on one CTA; auto takes cluster_local/streaming, 2096 B) and
#                     1024-byte transfer tiles; K and V are 256 MB each
# The 132-SM plans take DF_SMS's count instead (carry_lib.sh df_sms).
# usage: scripts/gpu/make_ring_carry.sh DIR
# then on the GPU machine: OUT=$OUT bash scripts/gpu/run_gpu_proof.sh DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: make_ring_carry.sh DIR}"
# shellcheck source=scripts/gpu/carry_lib.sh
source "$root/scripts/gpu/carry_lib.sh"
sms2=$(df_sms 2)
sms4=$(df_sms 4)
clang-22 "${cflags[@]}" "$root/examples/seed/moe_handlers.c" -o "$tmp/moe.bc"
clang-22 "${cflags[@]}" -DMOE_FULL=64 -DMOE_SHARDS=4 "$root/examples/seed/moe_handlers.c" \
  -o "$tmp/moe4.bc"
clang-22 "${cflags[@]}" -DGQA_LMAX=512 "$root/examples/attention_gqa/attention_gqa_handlers.c" \
  -o "$tmp/gqa512.bc"
clang-22 "${cflags[@]}" -DGQA_LMAX=131072 "$root/examples/attention_gqa/attention_gqa_handlers.c" \
  -o "$tmp/gqa128k.bc"

# plan NAME PROGRAM HANDLERS_BC SCHEDULE [LAYOUT]: NAME.ptx and NAME.dfplan
plan() {
  plan_files "$@"
  local name=$1
  local dump="$tmp/$name.dump"
  "$bin/df-translate" --df-plan-dump "$dir/$name.dfplan" >"$dump"
  echo "$name: $(grep -E '^counts' "$dump") cluster_sends=$(grep -c 'kind=1 ' "$dump")" \
    "segment_records=$(grep -c 'segment_count=[2-9]' "$dump")" \
    "$(grep -E '^  shared_memory_bytes' "$dump" | tr -d ' ')"
}

sed -e 's/hbm_all_gather/cluster_shared_pull_ring/' "$root/examples/seed/moe_reshared.mlir" \
  >"$tmp/ring2.mlir"
sed -e 's/hbm_all_gather/cluster_shared_pull_ring/; s/tensor<2x4xf16>/tensor<2x8xf16>/g' \
  -e 's/output_arity = 2/output_arity = 4/' "$root/examples/seed/moe_reshared.mlir" >"$tmp/ring4.mlir"
sed -e 's/cluster_shared_pull_ring/cluster_shared_all_gather/' "$tmp/ring4.mlir" >"$tmp/gather4.mlir"
moe="block-size=8 range-lengths=expert_tile:$(rep 128 16);hidden_tile:$(rep 128 16) task-extents=8,16"
plan moe_ring4_t16 "$tmp/ring4.mlir" "$tmp/moe4.bc" "sm-count=$sms4 cluster-size=4 $moe transfer-tile-bytes=16"
plan moe_ring4 "$tmp/ring4.mlir" "$tmp/moe4.bc" "sm-count=$sms4 cluster-size=4 $moe"
plan moe_gather4_t16 "$tmp/gather4.mlir" "$tmp/moe4.bc" "sm-count=$sms4 cluster-size=4 $moe transfer-tile-bytes=16"
plan moe_ring2 "$tmp/ring2.mlir" "$tmp/moe.bc" "sm-count=$sms2 cluster-size=2 $moe"

gqa="block-size=128 range-lengths=kv:$(rep 8 384),$(rep 8 256) task-extents=2,8 transfer-tile-bytes=256"
plan gqa_tiled "$root/examples/attention_gqa/attention_gqa.mlir" "$tmp/gqa512.bc" \
  "sm-count=4 cluster-size=2 $gqa" "per-cta-shared=true"
plan gqa_tiled_hbm "$root/examples/attention_gqa/attention_gqa.mlir" "$tmp/gqa512.bc" \
  "sm-count=4 cluster-size=1 $gqa" "per-cta-shared=true"

plan gqa_long "$root/examples/attention_gqa/attention_gqa.mlir" "$tmp/gqa128k.bc" \
  "sm-count=$sms2 cluster-size=2 block-size=128 range-lengths=kv:$(rep 8 131072) task-extents=1,8 reduce-strategy=auto target=sm_90 transfer-tile-bytes=1024" \
  "target=sm_90"

"$bin/moe_reference" "$dir/moe4_ref.npy" 8 16 64 21 22 23 64
"$bin/moe_reference" "$dir/moe_ref.npy" 8 16 64 21 22 23
"$bin/gqa_reference" "$dir/gqa_ref.npy" 512 11 12 13 384 256
"$bin/gqa_reference" "$dir/gqa_long_ref.npy" 131072 11 12 13 131072
"$bin/gqa_reference" "$dir/gqa_replan_ref.npy" 512 11 12 13 256 384
cp "$dir/gqa_tiled_hbm.ptx" "$dir/gqa_tiled_hbm_replan.ptx"
cp "$dir/gqa_tiled_hbm.dfplan" "$dir/gqa_tiled_hbm_replan.dfplan"

moe4="--block-size 8 --tensor Input=random:float16:16x64:21 --tensor W1=random:float16:8x64x64:22"
moe4+=" --tensor W2=random:float16:8x64x64:23 --tensor Output=zeros:float32:8x16x64"
moe4+=" --check Output=@DIR@/moe4_ref.npy:0.02:0.01 --repeat-check"
for n in moe_ring4_t16 moe_ring4 moe_gather4_t16; do
  echo "$moe4" >"$dir/$n.args"
done
echo "--block-size 8 --tensor Input=random:float16:16x64:21 --tensor W1=random:float16:8x16x64:22" \
  "--tensor W2=random:float16:8x16x16:23 --tensor Output=zeros:float32:8x16x16" \
  "--check Output=@DIR@/moe_ref.npy:0.01:0.01 --repeat-check" >"$dir/moe_ring2.args"
for n in gqa_tiled gqa_tiled_hbm; do
  echo "--block-dim 256 --block-size 128 --tensor Q=random:float16:2x32x128:11" \
    "--tensor K=random:float16:2x512x8x128:12 --tensor V=random:float16:2x512x8x128:13" \
    "--tensor O=zeros:float32:2x32x128 --check O=@DIR@/gqa_ref.npy:0.02:0.002 --repeat-check" \
    >"$dir/$n.args"
done
echo "--block-dim 256 --block-size 128 --tensor Q=random:float16:2x32x128:11" \
  "--tensor K=random:float16:2x512x8x128:12 --tensor V=random:float16:2x512x8x128:13" \
  "--tensor O=zeros:float32:2x32x128 --check O=@DIR@/gqa_replan_ref.npy:0.02:0.002 --repeat-check" \
  "--replan kv=$(rep 8 256),$(rep 8 384) --task-extents 2,8 --per-cta-shared" \
  >"$dir/gqa_tiled_hbm_replan.args"
echo "--block-dim 256 --block-size 128 --tensor Q=random:float16:1x32x128:11" \
  "--tensor K=random:float16:1x131072x8x128:12 --tensor V=random:float16:1x131072x8x128:13" \
  "--tensor O=zeros:float32:1x32x128 --check O=@DIR@/gqa_long_ref.npy:0.02:0.002 --repeat-check" \
  >"$dir/gqa_long.args"
ls -l "$dir"
