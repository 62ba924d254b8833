#!/usr/bin/env bash
# On the CPU machine: the seed attention with a 192 KiB handler workspace
# (docs/workspace.md) declared on split_kv, whose partial
# (test/lit/Target/Inputs/workspace_handlers.c) writes and reads back all
# of it across the CTA's threads before it computes (NaN output without a
# workspace that large), in the folder run_seed.sh takes; layout-slots
# target=sm_90 checks the budget (plan + workspace + 128 <= 227 KiB).
# usage: scripts/gpu/make_workspace_carry.sh DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: make_workspace_carry.sh DIR}"
# shellcheck source=scripts/gpu/carry_lib.sh
source "$root/scripts/gpu/carry_lib.sh"
clang-22 "${cflags[@]}" -DWORKSPACE_NEED=196608u \
  "$root/test/lit/Target/Inputs/workspace_handlers.c" -o "$tmp/handlers.bc"
sed 's/df.kind = "iter",/df.kind = "iter", df.workspace_bytes = 196608 : i64,/' \
  "$root/examples/seed/attention.mlir" >"$tmp/ws.mlir"
plan_files seed_workspace "$tmp/ws.mlir" "$tmp/handlers.bc" \
  "sm-count=4 cluster-size=2 block-size=128 range-lengths=kv:384,256 task-extents=2" "target=sm_90"
grep -q "df_handler_workspace_bytes = 196608;" "$dir/seed_workspace.ptx"
python3 "$root/scripts/gpu/attention_inputs.py" "$dir" 384 256
echo "--block-size 128 --tensor Q=file:@DIR@/q.bin:float16:2x16" \
  "--tensor K=file:@DIR@/k.bin:float16:2x4096x16 --tensor V=file:@DIR@/v.bin:float16:2x4096x16" \
  "--tensor O=zeros:float32:2x16 --check O=@DIR@/o_ref.bin:0.02:0.002" >"$dir/seed_workspace.args"
# The same kernel with 256 threads per CTA (the workspace shared by more
# threads).
cp "$dir/seed_workspace.ptx" "$dir/seed_workspace_t256.ptx"
cp "$dir/seed_workspace.dfplan" "$dir/seed_workspace_t256.dfplan"
sed 's|^|--block-dim 256,1,1 |' "$dir/seed_workspace.args" >"$dir/seed_workspace_t256.args"
ls -l "$dir"
