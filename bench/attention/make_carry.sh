#!/usr/bin/env bash
# On the CPU machine (clang-22, df-opt/df-translate in $DF_BIN, default
# build/bin): kernels and plans of the decode-attention bench, one PTX and
# one plan blob per case of bench/attention/cases.py (lengths, LMAX and the
# chosen block size in DIR/cases.json). Handlers:
# examples/attention_gqa/attention_gqa_handlers.c with GQA_LMAX = the case's
# KV capacity. Plans: 132 SMs (DF_SMS: the card's, carry_lib.sh df_sms),
# cluster 2, all_at_once with the placement the model of cases.py prefers
# (round_robin, + defer-reduces, + balance-iters),
# per-CTA shared layout, HBM staging copies; plus each case's alternative
# plans (cases.json "alts": even-split, round_robin, same kernel, with the
# df-opt passes of their "passes" (e.g. --df-fuse) after df-schedule and the
# df-layout-slots options of their "layout"; CASE.stS:
# the case's plan with handlers built with -DKV_STAGES=S, the program's
# partial declaring df.workspace_bytes = the alt's workspace_bytes).
# CARRY_PLANS=NAME[,NAME...] makes only those plans (cases.json lists all).
# usage: bench/attention/make_carry.sh DIR    (then, on the GPU machine:
#        bash bench/attention/run.sh DIR OUT)
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dir="${1:?usage: make_carry.sh DIR}"
# shellcheck source=scripts/gpu/carry_lib.sh
source "$root/scripts/gpu/carry_lib.sh"
sms=$(df_sms 2)
DF_SMS=$sms python3 "$root/bench/attention/cases.py" "$dir/cases.json"
gqa="$root/examples/attention_gqa"
python3 - "$dir/cases.json" >"$tmp/list" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1])):
    per_task = ",".join(str(n) for n in c["lens"] for _ in range(8))
    for p in [c] + c.get("alts", []):
        extra = " ".join(f for f in (c["cflags"], p.get("cflags", "")) if f) or "-"
        print(p["name"], c["lmax"], p["block"], extra, p.get("workspace_bytes", 0),
              len(c["lens"]), per_task, p["opts"], p.get("passes", "") or "-",
              p.get("translate", "") or "-", p.get("layout", "per-cta-shared=true"),
              p.get("rt_flags", "") or "-", sep="\t")
PY
while IFS=$'\t' read -r name lmax block extra ws seqs lens opts passes translate layout rtf; do
  [ -n "${CARRY_PLANS:-}" ] && [[ ",$CARRY_PLANS," != *",$name,"* ]] && continue
  [ "$extra" = - ] && extra=""
  [ "$passes" = - ] && passes=""
  [ "$translate" = - ] && translate=""
  bc="$tmp/gqa_$lmax${extra//[^A-Za-z0-9]/_}.bc"
  # shellcheck disable=SC2086 # extra: compiler flags of a variant
  [ -e "$bc" ] || clang-22 "${cflags[@]}" -DGQA_LMAX="${lmax}u" $extra "$gqa/attention_gqa_handlers.c" -o "$bc"
  prog="$gqa/attention_gqa.mlir"
  if [ "$ws" != 0 ]; then
    # The staged partial (-DKV_STAGES) keeps its K/V ring in the handler
    # workspace: a copy of the program whose partial declares it.
    prog="$tmp/attention_gqa_ws$ws.mlir"
    [ -e "$prog" ] || workspace_program "$gqa/attention_gqa.mlir" gqa_partial "$ws" >"$prog"
  fi
  case " $extra " in
  *" -DGQA_JOIN "*)
    # The handler join (examples/attention_gqa/gqa_join.h) reads two more
    # tensors, SeqLens and Join: a copy of the program whose finalize
    # declares them, so they follow O in the program's tensor arguments.
    src="$prog" prog="$tmp/attention_gqa_join$ws.mlir"
    [ -e "$prog" ] || tensor_params_program "$src" gqa_finalize SeqLens Join >"$prog"
    ;;
  esac
  rtbc="${DF_RUNTIME_BC:-}"
  if [ "$rtf" != - ]; then
    # a twin whose kernel links the device runtime built with more flags
    # (cases.py CASES_RT_AB)
    rtbc="$tmp/rt_${rtf//[^A-Za-z0-9]/_}.bc"
    # shellcheck disable=SC2086 # rtf: compiler flags, split on spaces
    [ -e "$rtbc" ] || bash "$root/scripts/gpu/make_runtime_bc.sh" "$rtbc" "$root" $rtf
  fi
  DF_RUNTIME_BC="$rtbc" KERNEL_OPTS="$translate" plan_files "$name" "$prog" "$bc" \
    "sm-count=$sms cluster-size=2 block-size=$block range-lengths=kv:$lens task-extents=$seqs,8 policy=round_robin reduce-strategy=all_at_once $opts" \
    "$layout" "$passes"
  echo "$name: $("$bin/df-translate" --df-plan-dump "$dir/$name.dfplan" | grep -E "^counts|^  shared_memory_bytes" \
    | sed -E 's/ (slots|args|input_slots|task_coords|handlers|primary_handlers|operators|types)=[0-9]+//g' | tr '\n' ' ')"
  # A kernel whose ctx.workspace is NULL for certain (a df without
  # df.workspace_bytes support) keeps only the staged partial's one-warp
  # fallback: the optimizer drops the ring path and its cp.async copies.
  if [ "$ws" != 0 ] && ! grep -qE "cp\.async\.(cg|bulk)\.shared" "$dir/$name.ptx"; then
    echo "  warning: $name: the kernel has no handler workspace (df.workspace_bytes not supported by"
    echo "  this df?): its staged partial runs the one-warp fallback, not the ring"
  fi
done <"$tmp/list"
if command -v ptxas >/dev/null; then
  # the first case's kernel and its staged variants: registers, spills
  first="$(head -1 "$tmp/list" | cut -f1)"
  for name in "$first" "$first".st2 "$first".st3 "$first".bk3w8; do
    [ -e "$dir/$name.ptx" ] || continue
    echo "$name: $(ptxas -arch=sm_90a -v "$dir/$name.ptx" -o "$tmp/k.cubin" 2>&1 | grep -E "registers|spill" \
      | tr -s ' \n' ' ')"
  done
fi
du -sh "$dir"
