#!/usr/bin/env bash
# The GPU examples on the host backend (no GPU): examples/attention_gqa
# (split-KV GQA decode attention) and the reshared MoE of examples/seed,
# compiled by df-opt/df-translate, run by df-run --backend=host with their
# C handlers built for the host, checked against the float64 references
# that regenerate df-run's random inputs (gqa_reference, moe_reference).
# Covers the per-CTA shared layout (df-layout-slots per-cta-shared=true) and
# df-run --replan --per-cta-shared. The same plans at full size run on the
# H200 (scripts/gpu/make_gqa_carry.sh, test/lit/GPU).
# Issue 8: the three reshared transports (hbm_all_gather,
# cluster_shared_all_gather, cluster_shared_pull_ring) at cluster sizes 2
# and 4 (MOE4_SO: the handlers built with MOE_FULL=64 MOE_SHARDS=4), whole
# and tile-segmented (transfer-tile-bytes), must give bit-identical outputs
# that match the reference; tiled GQA equals untiled GQA bit for bit.
# The handler join (GQA_JOIN_SO: the GQA handlers built with -DGQA_JOIN) on
# partial-only plans equals the reference, and leaves its counters zero.
# usage: examples_host_test.sh BIN GQA_SO MOE_SO MOE4_SO SRC WORK GQA_JOIN_SO
set -u
bin=$1 gqa_so=$2 moe_so=$3 moe4_so=$4 src=$5 work=$6 gqa_join_so=$7
rm -rf "$work" && mkdir -p "$work"
failures=0

# run EXPECTED_RC PATTERN ARGS...
run() {
  local want=$1 pattern=$2
  shift 2
  local out rc
  out=$("$bin/df-run" "$@" 2>&1)
  rc=$?
  if [ "$rc" != "$want" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: df-run $* -> rc $rc (want $want), output:"
    echo "$out" | sed 's/^/    /'
    echo "    (expected /$pattern/)"
    failures=$((failures + 1))
  else
    echo "ok: $(grep -E -- "$pattern" <<<"$out" | head -1)"
  fi
}
rep() { local n=$1 x=$2 s=$2; for ((i = 1; i < n; i++)); do s+=",$x"; done; echo "$s"; }

# GQA: 2 sequences x 8 KV heads on 4 SMs / cluster 2, kv 384 and 256, KV
# capacity 512 (the handlers are built with GQA_LMAX=512).
gqa_plan() { # NAME LAYOUT [SCHEDULE OPTIONS]
  "$bin/df-opt" "$src/examples/attention_gqa/attention_gqa.mlir" \
    --df-schedule="sm-count=4 cluster-size=2 block-size=128 range-lengths=kv:$(rep 8 384),$(rep 8 256) task-extents=2,8 ${3:-}" \
    ${2:+--df-layout-slots="$2"} -o "$work/$1.mlir" &&
    "$bin/df-translate" --df-to-plan "$work/$1.mlir" -o "$work/$1.dfplan"
}
gqa_plan gqa_cta "per-cta-shared=true" || exit 1
gqa_plan gqa_ref_layout "" || exit 1
# The bench's schedule options (df extensions): ITERs balanced by length,
# every queue's reduces after its ITERs.
gqa_plan gqa_balanced "per-cta-shared=true" "balance-iters=true defer-reduces=true" || exit 1
# even-split: the total range cut into 4 even chunks (cuts at multiples of
# 16), and into 7 chunks at any key (pieces of 347, 37, ... keys; two waves).
gqa_plan gqa_even "per-cta-shared=true" "even-split=true even-split-granularity=16" || exit 1
gqa_plan gqa_even7 "per-cta-shared=true" "even-split=true even-split-chunks=7 defer-reduces=true" || exit 1
# reduce trees: 40 chunks of 128 keys split each 384-key task in 3-4
# pieces, combined 2 at a time (two levels); and the reference layout.
gqa_plan gqa_fanin "per-cta-shared=true" "even-split=true even-split-chunks=40 reduce-fan-in=2" || exit 1
gqa_plan gqa_fanin_rr "" "reduce-fan-in=2 defer-reduces=true" || exit 1
# trees of 6 blocks per task with each reduce on an SM that runs no other
# reduce of its task (reduce-spread moves reduces: a different plan from
# the same options without it)
gqa_plan gqa_spread_rr "" "block-size=64 reduce-fan-in=2 defer-reduces=true reduce-spread=true" || exit 1
# skip-unary-reduce: at block 256 sequence 1's tasks are one block each
# (ITER -> FINALIZE, no REDUCE), sequence 0's two (a REDUCE); with
# defer-reduces the one-block tasks' FINALIZEs stay after their ITERs,
# where df-fuse joins them (one composite dispatch; its outputs are checked
# on the GPU by bench/attention, the host library here has no composites).
# At block 512 every task is one block.
gqa_plan gqa_skip "per-cta-shared=true" "block-size=256 balance-iters=true defer-reduces=true skip-unary-reduce=true" || exit 1
gqa_plan gqa_skip_all "per-cta-shared=true" "block-size=512 skip-unary-reduce=true" || exit 1
"$bin/df-opt" "$work/gqa_skip.mlir" --df-fuse -o "$work/gqa_skip_fused.mlir" &&
  "$bin/df-translate" --df-to-plan "$work/gqa_skip_fused.mlir" -o "$work/gqa_skip_fused.dfplan" || exit 1
for want in gqa_skip:8 gqa_skip_all:0 gqa_skip_fused:8; do # REDUCEs (opcode 2): 8 two-block tasks
  n=$("$bin/df-translate" --df-plan-dump "$work/${want%:*}.dfplan" | grep -c "opcode=2 ")
  [ "$n" = "${want#*:}" ] ||
    { echo "FAIL: ${want%:*}: $n REDUCEs, want ${want#*:}"; failures=$((failures + 1)); }
done
grep -q "fused = true" "$work/gqa_skip_fused.mlir" ||
  { echo "FAIL: gqa_skip: df-fuse joined no ITER -> FINALIZE"; failures=$((failures + 1)); }
# one reduce per task over 16-key partials: 24 inputs (sequence 0, the
# combine's any-count path) and 16 (sequence 1, its resolved-inputs path)
gqa_plan gqa_wide "per-cta-shared=true" "sm-count=32 block-size=16" || exit 1
"$bin/gqa_reference" "$work/gqa_ref.npy" 512 11 12 13 384 256 || exit 1
"$bin/gqa_reference" "$work/gqa_ref2.npy" 512 11 12 13 300 200 || exit 1
gqa=(--backend=host --handlers "$gqa_so" --block-size 128 --tensor Q=random:float16:2x32x128:11
     --tensor K=random:float16:2x512x8x128:12 --tensor V=random:float16:2x512x8x128:13
     --tensor O=zeros:float32:2x32x128)
run 0 "check O: ok \(8192 elements" "${gqa[@]}" --plan "$work/gqa_cta.dfplan" \
  --check "O=$work/gqa_ref.npy:0.02:0.002" --save "O=$work/o_cta.npy"
run 0 "check O: ok \(8192 elements" "${gqa[@]}" --plan "$work/gqa_ref_layout.dfplan" \
  --check "O=$work/gqa_ref.npy:0.02:0.002" --save "O=$work/o_ref_layout.npy"
cmp -s "$work/o_cta.npy" "$work/o_ref_layout.npy" ||
  { echo "FAIL: per-CTA and reference layouts give different outputs"; failures=$((failures + 1)); }
run 0 "check O: ok \(8192 elements" "${gqa[@]}" --plan "$work/gqa_balanced.dfplan" \
  --check "O=$work/gqa_ref.npy:0.02:0.002"
for plan in gqa_even gqa_even7 gqa_fanin gqa_fanin_rr gqa_spread_rr gqa_wide gqa_skip gqa_skip_all; do
  run 0 "check O: ok \(8192 elements" "${gqa[@]}" --plan "$work/$plan.dfplan" \
    --check "O=$work/gqa_ref.npy:0.02:0.002"
done
run 0 "check O: ok \(8192 elements" "${gqa[@]}" --plan "$work/gqa_cta.dfplan" \
  --replan "kv=$(rep 8 300),$(rep 8 200)" --task-extents 2,8 --per-cta-shared \
  --check "O=$work/gqa_ref2.npy:0.02:0.002"
# The handler join (examples/attention_gqa/gqa_join.h): partial-only plans
# (no REDUCE or FINALIZE) of a program whose finalize also declares SeqLens
# and Join (scripts/gpu/carry_lib.sh); the partial completing a task
# combines it. Blocks of 64 (6 and 4 pieces per task, each setting its
# flag), of 128 (3 and 2), blocks of 256 balanced
# (sequence 1's tasks are one piece: written directly), and 4
# warm launches on one Join tensor: its counters are zero after them. Two
# runs give the same O bytes (the combine goes in block order, whichever
# piece arrives last).
(root=$src dir=$work/carry_lib && source "$src/scripts/gpu/carry_lib.sh" &&
  tensor_params_program "$src/examples/attention_gqa/attention_gqa.mlir" gqa_finalize SeqLens Join \
    >"$work/gqa_join.mlir") || exit 1
for j in "join64:block-size=64" "join128:block-size=128" "join256:block-size=256 balance-iters=true"; do
  "$bin/df-opt" "$work/gqa_join.mlir" \
    --df-schedule="sm-count=4 cluster-size=2 range-lengths=kv:$(rep 8 384),$(rep 8 256) task-extents=2,8 partial-only=true ${j#*:}" \
    --df-layout-slots="per-cta-shared=true" -o "$work/gqa_${j%%:*}.mlir" &&
    "$bin/df-translate" --df-to-plan "$work/gqa_${j%%:*}.mlir" -o "$work/gqa_${j%%:*}.dfplan" || exit 1
  n=$("$bin/df-translate" --df-plan-dump "$work/gqa_${j%%:*}.dfplan" | grep -cE "opcode=[23] ")
  [ "$n" = 0 ] || { echo "FAIL: gqa_${j%%:*}: $n REDUCE/FINALIZE instructions"; failures=$((failures + 1)); }
done
printf '\x80\x01\x00\x00\x00\x01\x00\x00' >"$work/seq_lens.bin" # int32 384, 256
# per task: 16 bytes of counter, a flag per slot (padded to 16 bytes) and
# ceil(512 / block) slots of 1040 bytes
for jb in join64:64 join128:128 join256:256; do
  b=${jb#*:} nb=$(((512 + ${jb#*:} - 1) / ${jb#*:}))
  stride=$((16 + (4 * nb + 15) / 16 * 16 + nb * 1040))
  for r in a b; do
    run 0 "check O: ok \(8192 elements" --backend=host --handlers "$gqa_join_so" --block-size "$b" \
      --tensor Q=random:float16:2x32x128:11 --tensor K=random:float16:2x512x8x128:12 \
      --tensor V=random:float16:2x512x8x128:13 --tensor O=zeros:float32:2x32x128 \
      --tensor SeqLens=file:$work/seq_lens.bin:int32:2 --tensor Join=zeros:uint8:$((16 * stride)) \
      --plan "$work/gqa_${jb%%:*}.dfplan" --warmup 3 --check "O=$work/gqa_ref.npy:0.02:0.002" \
      --save "Join=$work/join_${jb%%:*}.bin" --save "O=$work/o_${jb%%:*}_$r.npy"
  done
  cmp -s "$work/o_${jb%%:*}_a.npy" "$work/o_${jb%%:*}_b.npy" ||
    { echo "FAIL: gqa_${jb%%:*}: two runs differ"; failures=$((failures + 1)); }
  python3 - "$work/join_${jb%%:*}.bin" "$stride" "$nb" <<'PY' ||
import sys
data, stride, nb = open(sys.argv[1], "rb").read(), int(sys.argv[2]), int(sys.argv[3])
bad = [t for t in range(16) if data[t * stride:t * stride + 16 + 4 * nb] != bytes(16 + 4 * nb)]
sys.exit(f"counters or flags of tasks {bad} not zero after the launches" if bad else 0)
PY
    { echo "FAIL: gqa_${jb%%:*}: the Join counters and flags"; failures=$((failures + 1)); }
done

# The per-CTA layout needs less shared memory than the reference's.
cta=$("$bin/df-translate" --df-plan-dump "$work/gqa_cta.dfplan" | sed -n 's/^  shared_memory_bytes=//p')
whole=$("$bin/df-translate" --df-plan-dump "$work/gqa_ref_layout.dfplan" | sed -n 's/^  shared_memory_bytes=//p')
[ -n "$cta" ] && [ -n "$whole" ] && [ "$cta" -lt "$whole" ] ||
  { echo "FAIL: per-CTA shared $cta not below the reference layout's $whole"; failures=$((failures + 1)); }

# MoE: 2 experts x 16 tokens on 4 SMs / cluster 2, over HBM and over DSMEM.
for mode in "hbm force-hbm-comms=true" "cluster force-hbm-comms=false"; do
  "$bin/df-opt" "$src/examples/seed/moe_reshared.mlir" \
    --df-schedule="sm-count=4 cluster-size=2 block-size=8 range-lengths=expert_tile:$(rep 32 16);hidden_tile:$(rep 32 16) task-extents=2,16 ${mode#* }" \
    -o "$work/moe.mlir" && "$bin/df-translate" --df-to-plan "$work/moe.mlir" -o "$work/moe_${mode%% *}.dfplan" || exit 1
done
"$bin/moe_reference" "$work/moe_ref.npy" 2 16 64 21 22 23 || exit 1
for m in hbm cluster; do
  run 0 "check Output: ok \(512 elements" --backend=host --handlers "$moe_so" --plan "$work/moe_$m.dfplan" \
    --block-size 8 --tensor Input=random:float16:16x64:21 --tensor W1=random:float16:2x16x64:22 \
    --tensor W2=random:float16:2x16x16:23 --tensor Output=zeros:float32:2x16x16 \
    --check "Output=$work/moe_ref.npy:0.01:0.01"
done

same() { # same A B WHAT: A and B hold the same bytes
  cmp -s "$1" "$2" && echo "ok: $3" ||
    { echo "FAIL: $3 ($1 and $2 differ)"; failures=$((failures + 1)); }
}

# GQA split into 256-byte transfer tiles: the same output bytes.
"$bin/df-opt" "$src/examples/attention_gqa/attention_gqa.mlir" \
  --df-schedule="sm-count=4 cluster-size=2 block-size=128 range-lengths=kv:$(rep 8 384),$(rep 8 256) task-extents=2,8 transfer-tile-bytes=256" \
  --df-layout-slots="per-cta-shared=true" -o "$work/gqa_tiled.mlir" &&
  "$bin/df-translate" --df-to-plan "$work/gqa_tiled.mlir" -o "$work/gqa_tiled.dfplan" || exit 1
segs=$("$bin/df-translate" --df-plan-dump "$work/gqa_tiled.dfplan" | grep -c "segment_count=[2-9]")
[ "$segs" -gt 0 ] || { echo "FAIL: the tiled GQA plan has no segments"; failures=$((failures + 1)); }
run 0 "check O: ok \(8192 elements" "${gqa[@]}" --plan "$work/gqa_tiled.dfplan" \
  --check "O=$work/gqa_ref.npy:0.02:0.002" --save "O=$work/o_tiled.npy"
same "$work/o_cta.npy" "$work/o_tiled.npy" "tiled GQA ($segs segment records) = untiled GQA"

# GQA cluster_local/streaming on one thread per CTA: the accumulator's
# lse of every head (not only thread 0's) must be carried between updates.
"$bin/df-opt" "$src/examples/attention_gqa/attention_gqa.mlir" \
  --df-schedule="sm-count=4 cluster-size=2 block-size=128 range-lengths=kv:$(rep 8 384),$(rep 8 256) task-extents=2,8 policy=cluster_local reduce-strategy=streaming" \
  -o "$work/gqa_stream.mlir" &&
  "$bin/df-translate" --df-to-plan "$work/gqa_stream.mlir" -o "$work/gqa_stream.dfplan" || exit 1
run 0 "check O: ok \(8192 elements" "${gqa[@]}" --plan "$work/gqa_stream.dfplan" \
  --check "O=$work/gqa_ref.npy:0.02:0.002"

# MoE transports. moe_plan NAME SO-SHARDS POLICY SCHEDULE-EXTRA [SED]
moe_plan() {
  sed -e "s/hbm_all_gather/$3/" ${5:+-e "$5"} "$src/examples/seed/moe_reshared.mlir" >"$work/$1.in.mlir"
  "$bin/df-opt" "$work/$1.in.mlir" --df-schedule="$4" -o "$work/$1.mlir" &&
    "$bin/df-translate" --df-to-plan "$work/$1.mlir" -o "$work/$1.dfplan"
}
moe_args() { # moe_args FULL SO NAME
  echo --backend=host --handlers "$2" --plan "$work/$3.dfplan" --block-size 8 \
    --tensor Input=random:float16:16x64:21 --tensor W1=random:float16:2x$1x64:22 \
    --tensor W2=random:float16:2x$1x$1:23 --tensor Output=zeros:float32:2x16x$1 \
    --save "Output=$work/$3_out.npy"
}
m2="sm-count=4 cluster-size=2 block-size=8 range-lengths=expert_tile:$(rep 32 16);hidden_tile:$(rep 32 16) task-extents=2,16"
for p in "hbm_all_gather:force-hbm-comms=true" "cluster_shared_all_gather:" "cluster_shared_pull_ring:"; do
  moe_plan "c2_${p%%:*}" 2 "${p%%:*}" "$m2 ${p#*:}" || exit 1
  # shellcheck disable=SC2046
  run 0 "check Output: ok \(512 elements" $(moe_args 16 "$moe_so" "c2_${p%%:*}") \
    --check "Output=$work/moe_ref.npy:0.01:0.01"
done
same "$work/c2_hbm_all_gather_out.npy" "$work/c2_cluster_shared_all_gather_out.npy" "C=2: all_gather over DSMEM = over HBM"
same "$work/c2_hbm_all_gather_out.npy" "$work/c2_cluster_shared_pull_ring_out.npy" "C=2: ring = hbm_all_gather"
"$bin/moe_reference" "$work/moe4_ref.npy" 2 16 64 21 22 23 64 || exit 1
"$bin/moe_reference" "$work/bad.npy" 2 16 64 21 22 23 0 2>"$work/bad.txt"
[ $? = 2 ] && grep -q "FULL must be in 1..256, got 0" "$work/bad.txt" && echo "ok: moe_reference refuses FULL 0" ||
  { echo "FAIL: moe_reference FULL 0"; failures=$((failures + 1)); }
m4="sm-count=4 cluster-size=4 block-size=8 range-lengths=expert_tile:$(rep 32 16);hidden_tile:$(rep 32 16) task-extents=2,16"
wide='s/tensor<2x4xf16>/tensor<2x8xf16>/g; s/output_arity = 2/output_arity = 4/'
for p in "hbm_all_gather:" "cluster_shared_all_gather:" "cluster_shared_pull_ring:" \
         "cluster_shared_all_gather:transfer-tile-bytes=16" "cluster_shared_pull_ring:transfer-tile-bytes=16"; do
  n="c4_${p%%:*}${p#*:}"
  n="${n//transfer-tile-bytes=/_t}"
  moe_plan "$n" 4 "${p%%:*}" "$m4 ${p#*:}" "$wide" || exit 1
  # shellcheck disable=SC2046
  run 0 "check Output: ok \(2048 elements" $(moe_args 64 "$moe4_so" "$n") \
    --check "Output=$work/moe4_ref.npy:0.02:0.01"
  [ "$n" = c4_hbm_all_gather ] || same "$work/c4_hbm_all_gather_out.npy" "$work/${n}_out.npy" "C=4: $n = hbm_all_gather"
done
sends=$("$bin/df-translate" --df-plan-dump "$work/c4_cluster_shared_pull_ring_t16.dfplan" | grep -c "kind=1 ")
# 32 tasks x C*(C-1)*n_tiles = 32 x 4*3*2
[ "$sends" = 768 ] && echo "ok: C=4 tiled ring: $sends cluster sends = 32 x 4*3*2" ||
  { echo "FAIL: C=4 tiled ring has $sends cluster sends, want 768"; failures=$((failures + 1)); }

if [ "$failures" != 0 ]; then
  echo "$failures example case(s) failed"
  exit 1
fi
echo "examples on the host backend: all cases passed"
