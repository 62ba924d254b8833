#!/usr/bin/env bash
# On the CPU machine (clang-22, df-opt/df-translate in $DF_BIN, default
# build/bin): the GPU proof of issue 5 in the folder run_seed.sh takes —
# kernels (PTX), plan blobs, float64 references (.npy) and df-run
# arguments (NAME.args; NAME.expect = "RC REGEX" for runs that must fail).
# Inputs are df-run's seeded random tensors, generated on the GPU machine;
# the references regenerate them here (gqa_reference, moe_reference), so
# only kilobytes travel.
#   gqa_seed          GQA decode attention, 4 SMs / cluster 2, 2 seqs x 8 KV heads, kv 384/256
#   gqa_full          132 SMs (DF_SMS) / cluster 2, 64 seqs x 8 KV heads, lengths 1K-32K, block 512,
#                     per-CTA shared layout, HBM transfers direct-global (flags in HBM)
#   gqa_full_copy     the same at block 1024 with HBM staging copies (no direct-global)
#   gqa_full_replan   gqa_full_copy's kernel and blob, re-planned in df-run for new lengths
#   gqa_full_watch    gqa_full under the watchdog (progress stores on: its cost)
#   moe_hbm           the reshared MoE (map -> hbm_all_gather -> map -> finalize), 132 SMs,
#                     8 experts x 16 tokens, HBM transfers
#   moe_cluster       the same plan without force-hbm: the gathers go through DSMEM
#   seed_hung         the seed attention kernel with a plan whose HBM receive waits for an
#                     epoch nobody sends: the watchdog must stop it and name the CTA and comm
# usage: scripts/gpu/make_gqa_carry.sh DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: make_gqa_carry.sh DIR}"
# shellcheck source=scripts/gpu/carry_lib.sh
source "$root/scripts/gpu/carry_lib.sh"
sms=$(df_sms 2) # 132, or DF_SMS's count
seedblob="${DF_SEED_BLOB:-$(dirname "$bin")/test/runtime/dfrt_make_seed_blob}"
gqa="$root/examples/attention_gqa"
clang-22 "${cflags[@]}" "$gqa/attention_gqa_handlers.c" -o "$tmp/gqa.bc"
clang-22 "${cflags[@]}" -DGQA_LMAX=512 "$gqa/attention_gqa_handlers.c" -o "$tmp/gqa512.bc"
clang-22 "${cflags[@]}" "$root/examples/seed/moe_handlers.c" -o "$tmp/moe.bc"
clang-22 "${cflags[@]}" "$root/examples/seed/attention_handlers.c" -o "$tmp/attn.bc"

# plan NAME PROGRAM HANDLERS_BC SCHEDULE [LAYOUT]: NAME.ptx and NAME.dfplan
plan() {
  plan_files "$@"
  local name=$1
  "$bin/df-translate" --df-plan-dump "$dir/$name.dfplan" | grep -E "^counts|^  shared_memory_bytes" \
    | sed "s/^/$name: /"
}

# Lengths: 64 sequences, most 1K-8K, every 16th 16K-32K; each repeated for
# the 8 KV heads (task = (seq, kv_head), row-major). New lengths for the
# re-plan: each sequence shortened to 50-100 %, at least 1100 (two blocks of
# 1024: a single-block task would need the reduce's passthrough variant, which
# the base plan -- and so the kernel -- lacks).
read -r seqlens seqlens2 < <(python3 - <<'PY'
import random
r = random.Random(2026)
a = [r.randint(16384, 32768) if s % 16 == 5 else r.randint(1024, 8192) for s in range(64)]
b = [max(1100, int(x * r.uniform(0.5, 1.0))) for x in a]
print(",".join(map(str, a)), ",".join(map(str, b)))
PY
)
per_task() { python3 -c "import sys; print(','.join(x for x in sys.argv[1].split(',') for _ in range(8)))" "$1"; }
lens=$(per_task "$seqlens")
lens2=$(per_task "$seqlens2")
echo "seq lengths: $seqlens" >"$dir/lengths.txt"
echo "re-plan lengths: $seqlens2" >>"$dir/lengths.txt"

full="sm-count=$sms cluster-size=2 range-lengths=kv:$lens task-extents=64,8 policy=round_robin reduce-strategy=all_at_once"
plan gqa_seed "$gqa/attention_gqa.mlir" "$tmp/gqa512.bc" \
  "sm-count=4 cluster-size=2 block-size=128 range-lengths=kv:$(rep 8 384),$(rep 8 256) task-extents=2,8" \
  "per-cta-shared=true"
plan gqa_full "$gqa/attention_gqa.mlir" "$tmp/gqa.bc" "$full block-size=512" \
  "per-cta-shared=true hbm-direct-global=true"
plan gqa_full_copy "$gqa/attention_gqa.mlir" "$tmp/gqa.bc" "$full block-size=1024" "per-cta-shared=true"
cp "$dir/gqa_full_copy.ptx" "$dir/gqa_full_replan.ptx"
cp "$dir/gqa_full_copy.dfplan" "$dir/gqa_full_replan.dfplan"
cp "$dir/gqa_full.ptx" "$dir/gqa_full_watch.ptx"
cp "$dir/gqa_full.dfplan" "$dir/gqa_full_watch.dfplan"
moe="sm-count=$sms cluster-size=2 block-size=8 range-lengths=expert_tile:$(rep 128 16);hidden_tile:$(rep 128 16) task-extents=8,16"
plan moe_hbm "$root/examples/seed/moe_reshared.mlir" "$tmp/moe.bc" "$moe force-hbm-comms=true"
plan moe_cluster "$root/examples/seed/moe_reshared.mlir" "$tmp/moe.bc" "$moe"
plan seed_hung "$root/examples/seed/attention.mlir" "$tmp/attn.bc" \
  "sm-count=4 cluster-size=2 block-size=128 range-lengths=kv:384,256 task-extents=2"
"$seedblob" "$dir/seed_hung.dfplan" hung # the same plan, one receive epoch + 1000

# References (float64 .npy) from the same random inputs.
"$bin/gqa_reference" "$dir/gqa_seed_ref.npy" 512 11 12 13 384 256
"$bin/gqa_reference" "$dir/gqa_full_ref.npy" 32768 11 12 13 ${seqlens//,/ }
"$bin/gqa_reference" "$dir/gqa_replan_ref.npy" 32768 11 12 13 ${seqlens2//,/ }
"$bin/moe_reference" "$dir/moe_ref.npy" 8 16 64 21 22 23

qkv() { # qkv SEQS LMAX
  echo "--tensor Q=random:float16:$1x32x128:11 --tensor K=random:float16:$1x$2x8x128:12" \
       "--tensor V=random:float16:$1x$2x8x128:13 --tensor O=zeros:float32:$1x32x128"
}
tol=0.02:0.002
echo "--block-dim 256 --block-size 128 $(qkv 2 512) --check O=@DIR@/gqa_seed_ref.npy:$tol --repeat-check" \
  >"$dir/gqa_seed.args"
echo "--block-dim 256 --block-size 512 $(qkv 64 32768) --check O=@DIR@/gqa_full_ref.npy:$tol" \
  "--save O=@WORK@/gqa_full_O.npy --repeat-check" >"$dir/gqa_full.args"
echo "--block-dim 256 --block-size 1024 $(qkv 64 32768) --check O=@DIR@/gqa_full_ref.npy:$tol" \
  "--save O=@WORK@/gqa_full_copy_O.npy --repeat-check" >"$dir/gqa_full_copy.args"
echo "--block-dim 256 --block-size 1024 $(qkv 64 32768) --check O=@DIR@/gqa_replan_ref.npy:$tol" \
  "--replan kv=$lens2 --task-extents 64,8 --per-cta-shared --repeat-check" >"$dir/gqa_full_replan.args"
echo "--block-dim 256 --block-size 512 $(qkv 64 32768) --check O=@DIR@/gqa_full_ref.npy:$tol" \
  "--timeout-ms 20000" >"$dir/gqa_full_watch.args"
moeargs="--block-size 8 --tensor Input=random:float16:16x64:21 --tensor W1=random:float16:8x16x64:22"
moeargs+=" --tensor W2=random:float16:8x16x16:23 --tensor Output=zeros:float32:8x16x16"
moeargs+=" --check Output=@DIR@/moe_ref.npy:0.01:0.01 --repeat-check"
echo "$moeargs" >"$dir/moe_hbm.args"
echo "$moeargs" >"$dir/moe_cluster.args"
echo "--block-size 128 --tensor Q=random:float16:2x16 --tensor K=random:float16:2x4096x16" \
  "--tensor V=random:float16:2x4096x16 --tensor O=zeros:float32:2x16 --timeout-ms 3000 --iters 1" \
  >"$dir/seed_hung.args"
echo "4 CTA [0-9]+: pc [0-9]+ of [0-9]+ .*hbm_recv: waits on comm [0-9]+ \(hbm_recv .*epoch 100[0-9]\)" \
  >"$dir/seed_hung.expect"
ls -l "$dir"
