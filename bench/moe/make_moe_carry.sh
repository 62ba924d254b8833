#!/usr/bin/env bash
# On the CPU machine (clang-22, df-opt/df-translate and moe_fused_gen in
# $DF_BIN, default build/bin): the fused-MoE benchmark's carry folder for
# bench/moe/moe_bench.py on the GPU machine. Weights and activations are
# generated there from seeds, so only kernels, plans and routing travel
# (about 1 MB per variant):
#   DIR/VARIANT/moe.ptx        one kernel for the variant's plans (the plan
#                              comes in the launch parameters)
#   DIR/VARIANT/tN/plan.dfplan N = 128, 256, 512, 1024 tokens, per-CTA
#                              shared layout
#   DIR/VARIANT/tN/{tasks,tokens,weights,topk,topw,sync}.bin, ntasks, gen.txt
#                              routing (32 experts, top-2, Zipf s = 1.0, seed
#                              $MOE_SEED, default 1: the same routing in
#                              every variant) and the variant's task table
#   DIR/VARIANT/kernel_report.txt  registers, stack, spills (ptxas -v)
#   DIR/VARIANT/output_zeroing  "kernel" (the handlers zero Output) or "host"
# Variants (SMs x cluster size; the cluster size is the handlers' MOE_CS and
# the number of shards of each expert's weights per task):
#   c4      128 SMs, clusters of 4 (32 clusters; H200 GPCs of 18 SMs leave
#           2 SMs each that a 4-cluster cannot use)
#   c2      132 SMs, clusters of 2 (66 clusters; each SM streams half an
#           expert's weights per task)
#   c4x132  132 SMs, clusters of 4: only if the card co-schedules 33
#           4-clusters (libdfrt refuses the launch otherwise, and the bench
#           reports that)
#   c4x120  120 SMs, clusters of 4: in case a GPC has fewer than 16 SMs and
#           32 4-clusters do not fit either
#   c3x117  117 SMs, clusters of 3 (the 39 the H200 co-schedules; a third
#           of an expert per SM; down's shards are 688 columns, the last
#           rank's 672 valid)
# usage: bench/moe/make_moe_carry.sh DIR
#   (env: DF_BIN, MOE_SEED, MOE_TOKENS="128 256 512 1024",
#    MOE_VARIANTS="c4:128:4 c2:132:2 c4x132:132:4 c4x120:120:4" as NAME:SMS:CLUSTER
#    (SMS at most DF_SMS, the card's count, rounded down to a multiple of CLUSTER),
#    MOE_TT: token rows of a task's slots (the handlers' MOE_TT, default
#    64; smaller halves the slots and the cluster gather's bytes, and needs
#    MOE_TILE <= MOE_TT),
#    MOE_TILE: most tokens per task (moe_fused_gen --tile, default 64 =
#    the handlers' MOE_TT; smaller tiles make more, lighter tasks; auto:
#    the smallest of 16-64 whose tasks fit one round on the clusters),
#    MOE_PER_CLUSTER: most tasks per cluster (moe_fused_gen
#    --per-cluster, default 2; every task's slots stay in shared memory),
#    MOE_KERNEL_OPTS: df-translate kernel options for the variant's kernel,
#    e.g. --df-resolve=off (run M: c2 1.7-2.3 % faster without the
#    cluster-receive resolution),
#    MOE_HANDLERS=FILE: another handler source, e.g. an earlier revision's
#    (`git archive REV examples/moe | tar -x -C DIR`, then
#    DIR/examples/moe/moe_fused_handlers.c: clang finds its parts next to
#    it before this tree's), for a before/after table (revisions with the
#    Sync tensor: the program's tensor order);
#    MOE_CFLAGS: extra clang flags, e.g. -DMOE_GU_RING=... ring
#    depths; MOE_LAYOUT: extra df-layout-slots options, e.g.
#    reuse-dead-shared=true; MOE_GU_STAGE=R: gate_up's 8-n-tile token rows
#    staged in a shared-memory ring of R k steps (-DMOE_GU_STAGE=R and
#    df.workspace_bytes = 4096 R on @moe_gate_up; the workspace adds to
#    the plan's dynamic shared memory, so only plans with one task per CTA
#    have room); MOE_PACKED=1: the handlers built with -DMOE_PACKED
#    (weights in the fragment-packed layout, examples/moe/README.md) and
#    VARIANT/weights_layout saying so, for moe_bench.py; MOE_BULK=KB (with
#    MOE_PACKED=1): both GEMMs stream their weights through a KB KiB ring
#    per warp filled by bulk copies (-DMOE_BULK=KB; both handlers declare
#    df.workspace_bytes = 8 warps x (KB KiB + 128), so the plan's slots
#    and the rings must fit the SM's shared memory together); MOE_WG=GU,DN,MW:
#    both GEMMs on wgmma (-DMOE_WGMMA, examples/moe/moe_wgmma.h) with GU and
#    DN stages per warpgroup of MW 4 KB A tiles (gate_up's with a 4 KB
#    token tile); both handlers declare the two warpgroups' rings. Run the script
#    several times into one DIR with distinct names.)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: make_moe_carry.sh DIR}"
seed="${MOE_SEED:-1}"
tokens="${MOE_TOKENS:-128 256 512 1024}"
tt="${MOE_TT:-64}"
case "$tt" in
  8 | 16 | 24 | 32 | 40 | 48 | 56 | 64) ;;
  *) echo "make_moe_carry.sh: MOE_TT=$tt: a multiple of 8 up to 64" >&2; exit 1 ;;
esac
if [ "$tt" != 64 ] && { [ "${MOE_TILE:-64}" = auto ] || [ "${MOE_TILE:-64}" -gt "$tt" ]; }; then
  echo "make_moe_carry.sh: MOE_TT=$tt needs MOE_TILE <= $tt (a number: auto may pick 64)" >&2
  exit 1
fi
# shellcheck source=scripts/gpu/carry_lib.sh
source "$root/scripts/gpu/carry_lib.sh"
for v in ${MOE_VARIANTS:-c4:128:4 c2:132:2 c4x132:132:4 c4x120:120:4}; do
  IFS=: read -r name sms cs <<<"$v"
  # A card with fewer SMs (DF_SMS, carry_lib.sh df_sms) runs the variant on
  # as many as it has (meta.txt records the count).
  cap=$(df_sms "$cs")
  [ "$sms" -le "$cap" ] || sms=$cap
  vd="$dir/$name"
  mkdir -p "$vd"
  chunks=$((768 / cs / 32))
  # The program for cluster size cs: UpShard holds 768 / cs columns of
  # MOE_TT token rows.
  sed -e "s/tensor<6x64x32xbf16>/tensor<${chunks}x${tt}x32xbf16>/" \
      -e "s/tensor<4x6x64x32xbf16>/tensor<${cs}x${chunks}x${tt}x32xbf16>/" \
      -e "s/output_arity = 4 : i64/output_arity = $cs : i64/" \
      "$root/examples/moe/moe_fused.mlir" >"$tmp/moe$cs.mlir"
  stage=()
  # Workspaces: the staged token ring (gate_up), then the bulk rings after
  # it (both handlers: they find them at the same offset).
  ws_gu=0
  ws_dn=0
  if [ -n "${MOE_GU_STAGE:-}" ]; then
    ws_gu=$((4096 * MOE_GU_STAGE))
    stage=(-DMOE_GU_STAGE="$MOE_GU_STAGE")
  fi
  if [ -n "${MOE_BULK:-}" ]; then
    [ "${MOE_PACKED:-0}" = 1 ] || { echo "make_moe_carry.sh: MOE_BULK needs MOE_PACKED=1" >&2; exit 1; }
    ws_gu=$((ws_gu + 8 * (1024 * MOE_BULK + 128)))
    ws_dn=$ws_gu
    stage+=(-DMOE_BULK="$MOE_BULK")
  fi
  # MOE_WG=GU,DN,MW: the warpgroup GEMMs (-DMOE_WGMMA, moe_wgmma.h) with
  # GU / DN stages per warpgroup of MW A tiles (gate_up's stages also hold
  # a token tile), two warpgroups (256 threads).
  if [ -n "${MOE_WG:-}" ]; then
    IFS=, read -r wg_gu wg_dn wg_mw <<<"$MOE_WG"
    [ -n "$wg_gu" ] && [ -n "$wg_dn" ] && [ -n "$wg_mw" ] ||
      { echo "make_moe_carry.sh: MOE_WG is GU_STAGES,DN_STAGES,MW, not '$MOE_WG'" >&2; exit 1; }
    stage+=(-DMOE_WGMMA -DMOE_WG_GU_STAGES="$wg_gu" -DMOE_WG_DN_STAGES="$wg_dn" -DMOE_WG_MW="$wg_mw")
    need=$((2 * wg_gu * (wg_mw + 1) * 4096))
    [ "$need" -gt "$ws_gu" ] && ws_gu=$need
    need=$((2 * wg_dn * wg_mw * 4096))
    [ "$need" -gt "$ws_dn" ] && ws_dn=$need
  fi
  for hw in "moe_gate_up:$ws_gu" "moe_down:$ws_dn"; do
    [ "${hw#*:}" = 0 ] && continue
    workspace_program "$tmp/moe$cs.mlir" "${hw%%:*}" "${hw#*:}" >"$tmp/moews.mlir"
    mv "$tmp/moews.mlir" "$tmp/moe$cs.mlir"
  done
  # MOE_PACKED=1: the handlers read fragment-packed weights; moe_bench.py
  # binds packed copies for a variant whose weights_layout says so.
  if [ "${MOE_PACKED:-0}" = 1 ]; then
    stage+=(-DMOE_PACKED)
    echo packed >"$vd/weights_layout"
  else
    rm -f "$vd/weights_layout"
  fi
  # Who zeroes Output before a launch (moe_bench.py reads it): the host,
  # or the kernel when built with -DMOE_ZERO_OUTPUT=1 (moe_zero_output.h).
  case " ${MOE_CFLAGS:-} " in
    *" -DMOE_ZERO_OUTPUT=1 "*) echo kernel >"$vd/output_zeroing" ;;
    *) echo host >"$vd/output_zeroing" ;;
  esac
  # -I: a MOE_HANDLERS copy outside the tree still finds moe_bulk_ring.h
  # shellcheck disable=SC2086 # MOE_CFLAGS is a list of flags
  clang-22 "${cflags[@]}" ${MOE_CFLAGS:-} "${stage[@]}" -DMOE_CS="$cs" -DMOE_TT="$tt" -I"$root/examples/moe" \
    "${MOE_HANDLERS:-$root/examples/moe/moe_fused_handlers.c}" -o "$tmp/moe$cs.bc"
  first=""
  for t in $tokens; do
    d="$vd/t$t"
    mkdir -p "$d"
    "$bin/moe_fused_gen" "$d" --experts 32 --tokens "$t" --clusters $((sms / cs)) --shards "$cs" --seed "$seed" \
      --tile "${MOE_TILE:-64}" --per-cluster "${MOE_PER_CLUSTER:-2}" >"$d/gen.txt"
    "$bin/df-opt" "$tmp/moe$cs.mlir" \
      --df-schedule="sm-count=$sms cluster-size=$cs block-size=64 $(cat "$d/schedule.txt")" \
      --df-layout-slots="per-cta-shared=true ${MOE_LAYOUT:-}" -o "$tmp/plan.mlir"
    "$bin/df-translate" --df-to-plan "$tmp/plan.mlir" -o "$d/plan.dfplan"
    echo "$name t$t: $(tail -1 "$d/gen.txt" | sed 's/^moe_fused_gen: //');" \
      "$("$bin/df-translate" --df-plan-dump "$d/plan.dfplan" | grep -oE "instructions=[0-9]+|shared_memory_bytes=[0-9]+" | tr '\n' ' ')"
    [ -n "$first" ] || { first=1; cp "$tmp/plan.mlir" "$tmp/first.mlir"; }
  done
  # DF_RUNTIME_BC: another device runtime (scripts/gpu/make_runtime_bc.sh), for A/B runs.
  # MOE_KERNEL_OPTS: df-translate kernel options, e.g. --df-resolve=off.
  rt=()
  [ -n "${DF_RUNTIME_BC:-}" ] && rt=(--df-runtime="$DF_RUNTIME_BC")
  # shellcheck disable=SC2206 # MOE_KERNEL_OPTS is a list of options
  rt+=(${MOE_KERNEL_OPTS:-})
  "$bin/df-translate" --df-to-ptx --df-link="$tmp/moe$cs.bc" "${rt[@]}" "$tmp/first.mlir" -o "$vd/moe.ptx"
  "$bin/df-translate" --df-kernel-report --df-link="$tmp/moe$cs.bc" "${rt[@]}" "$tmp/first.mlir" \
    >"$vd/kernel_report.txt" 2>&1 || true
  echo "$name: $(grep -E "^(features|registers|stack_frame_bytes|spill_store_bytes):" "$vd/kernel_report.txt" | tr '\n' ' ')"
  echo "$sms SMs, cluster $cs, seed $seed, tokens $tokens" >"$vd/meta.txt"
done
head -1 "$dir/c4/t1024/gen.txt" 2>/dev/null || true
du -sh "$dir"
