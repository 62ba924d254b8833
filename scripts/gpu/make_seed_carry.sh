#!/usr/bin/env bash
# On the CPU machine (clang-22, MLIR build in build/): the seed attention
# kernel, its plan blob, inputs, reference and df-run arguments, in the
# folder run_seed.sh takes.  usage: scripts/gpu/make_seed_carry.sh DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: make_seed_carry.sh DIR}"
# shellcheck source=scripts/gpu/carry_lib.sh
source "$root/scripts/gpu/carry_lib.sh"
sms=$(df_sms 2) # 132, or DF_SMS's count
clang-22 "${cflags[@]}" "$root/examples/seed/attention_handlers.c" -o "$tmp/handlers.bc"
plan_files seed_attention "$root/examples/seed/attention.mlir" "$tmp/handlers.bc" \
  "sm-count=4 cluster-size=2 block-size=128 range-lengths=kv:384,256 task-extents=2"
python3 "$root/scripts/gpu/attention_inputs.py" "$dir" 384 256
echo "--block-size 128 --tensor Q=file:@DIR@/q.bin:float16:2x16" \
  "--tensor K=file:@DIR@/k.bin:float16:2x4096x16 --tensor V=file:@DIR@/v.bin:float16:2x4096x16" \
  "--tensor O=zeros:float32:2x16 --check O=@DIR@/o_ref.bin:0.02:0.002" \
  "--save O=@OUT@/seed_attention_O.bin" >"$dir/seed_attention.args"
# The same kernel and blob re-planned in process for other lengths.
cp "$dir/seed_attention.ptx" "$dir/seed_attention_replan.ptx"
cp "$dir/seed_attention.dfplan" "$dir/seed_attention_replan.dfplan"
python3 "$root/scripts/gpu/attention_inputs.py" "$dir" --ref o_ref_replan.bin 300 200
sed -e 's|o_ref.bin|o_ref_replan.bin|' -e 's|seed_attention_O|seed_attention_replan_O|' \
  -e 's|^|--replan kv=300,200 --task-extents 2 |' "$dir/seed_attention.args" >"$dir/seed_attention_replan.args"
# A decode-sized step: 64 tasks on 132 SMs (DF_SMS; cluster 2), lengths 256..4096,
# block 256, once round_robin/all_at_once and once cluster_local/streaming.
mkdir -p "$dir/decode"
lens="$(python3 -c "import random; r=random.Random(7); print(','.join(str(r.randint(16,256)*16) for _ in range(64)))")"
python3 "$root/scripts/gpu/attention_inputs.py" "$dir/decode" ${lens//,/ }
for cfg in "rr:policy=round_robin reduce-strategy=all_at_once" \
           "stream:policy=cluster_local reduce-strategy=streaming"; do
  n="${cfg%%:*}"
  plan_files "decode_$n" "$root/examples/seed/attention.mlir" "$tmp/handlers.bc" \
    "sm-count=$sms cluster-size=2 block-size=256 range-lengths=kv:$lens task-extents=64 ${cfg#*:}"
  echo "--block-size 256 --tensor Q=file:@DIR@/decode/q.bin:float16:64x16" \
    "--tensor K=file:@DIR@/decode/k.bin:float16:64x4096x16 --tensor V=file:@DIR@/decode/v.bin:float16:64x4096x16" \
    "--tensor O=zeros:float32:64x16 --check O=@DIR@/decode/o_ref.bin:0.02:0.002" >"$dir/decode_$n.args"
done
ls -l "$dir"
