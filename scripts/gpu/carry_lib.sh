# Sourced by the carry makers (bench/*/make_*carry.sh, scripts/gpu/make_*_carry.sh),
# which run on the CPU machine: what they share. The caller sets `root` (the
# repository) and `dir` (the carry folder) first; this sets `bin` (df-opt and
# df-translate: $DF_BIN, default build/bin), makes DIR, a scratch folder `tmp`
# removed on exit, and `cflags`, the clang-22 flags that compile a handler
# source to NVPTX bitcode for df-translate --df-link.
bin="${DF_BIN:-$root/build/bin}"
mkdir -p "$dir"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cflags=(--target=nvptx64-nvidia-cuda -march=sm_90a -nogpulib -nostdlibinc -fconvergent-functions
        -O2 -std=gnu17 -I "$root/include" -emit-llvm -c)

# df_sms CS: the SM count of the carries' full-card plans for clusters of
# CS: DF_SMS (the card's SMs, default 132: H200, H100 SXM), rounded down to
# a multiple of CS (an H100 PCIe: DF_SMS=114 gives 114 at cluster 2, 112 at
# cluster 4). libdfrt refuses a plan whose CTAs the card cannot hold.
df_sms() {
  local n="${DF_SMS:-132}" cs=$1
  if ! [[ "$n" =~ ^[1-9][0-9]*$ ]] || [ "$n" -lt "$cs" ]; then
    echo "DF_SMS='$n': the card's SM count, a whole number of at least $cs (the cluster size)" >&2
    return 1
  fi
  echo $((n / cs * cs))
}

# kernel_and_blob NAME MLIR HANDLERS_BC: $dir/NAME.ptx (MLIR, a scheduled
# module, linked with HANDLERS_BC and, if DF_RUNTIME_BC names one, that
# device runtime instead of the embedded one: scripts/gpu/make_runtime_bc.sh)
# and $dir/NAME.dfplan.
kernel_and_blob() {
  kernel_only "$@"
  "$bin/df-translate" --df-to-plan "$2" -o "$dir/$1.dfplan"
}

# kernel_only NAME MLIR HANDLERS_BC: $dir/NAME.ptx alone, as kernel_and_blob
# (another kernel for a plan written under another name). KERNEL_OPTS:
# more df-translate flags (e.g. --df-embed-plan).
kernel_only() {
  local rt=()
  [ -n "${DF_RUNTIME_BC:-}" ] && rt=(--df-runtime="$DF_RUNTIME_BC")
  # shellcheck disable=SC2206 # KERNEL_OPTS: df-translate flags, split on spaces
  [ -n "${KERNEL_OPTS:-}" ] && rt+=($KERNEL_OPTS)
  "$bin/df-translate" --df-to-ptx --df-link="$3" "${rt[@]}" "$2" -o "$dir/$1.ptx"
}

# plan_files NAME PROGRAM HANDLERS_BC SCHEDULE [LAYOUT [PASSES]]: schedules
# PROGRAM (then runs the df-opt PASSES, e.g. --df-fuse, and lays out its
# slots with LAYOUT, if given) into $tmp/NAME.mlir, and writes
# $dir/NAME.ptx (linked with HANDLERS_BC) and $dir/NAME.dfplan.
plan_files() {
  local name=$1 prog=$2 bc=$3 sched=$4 layout=${5:-} passes=${6:-}
  local opt=(--df-schedule="$sched")
  # shellcheck disable=SC2206 # PASSES: df-opt flags, split on spaces
  [ -n "$passes" ] && opt+=($passes)
  [ -n "$layout" ] && opt+=(--df-layout-slots="$layout")
  "$bin/df-opt" "$prog" "${opt[@]}" -o "$tmp/$name.mlir"
  kernel_and_blob "$name" "$tmp/$name.mlir" "$bc"
}

# workspace_program PROGRAM HANDLER BYTES: PROGRAM on stdout with
# `df.workspace_bytes = BYTES` added to the attributes of HANDLER's
# declaration (`func.func private @HANDLER`), which must have some.
workspace_program() {
  python3 - "$@" <<'PY'
import re, sys
prog, handler, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(prog).read()
decl = re.search(r"func\.func\s+private\s+@" + re.escape(handler) + r"\s*\(", text)
at = text.find("attributes {", decl.end()) if decl else -1
nxt = text.find("func.func", decl.end()) if decl else -1
if at < 0 or (0 <= nxt < at):
    sys.exit(f"workspace_program: {prog}: no attributes on the declaration of @{handler}")
at += len("attributes {")
sys.stdout.write(text[:at] + f"df.workspace_bytes = {n}, " + text[at:])
PY
}

# tensor_params_program PROGRAM HANDLER NAME...: PROGRAM on stdout with a
# `!df.tensor` parameter per NAME appended to HANDLER's declaration and
# its `df.params`: the program's tensor arguments gain NAMEs after those
# of HANDLER's stage and the stages before it.
tensor_params_program() {
  python3 - "$@" <<'PY'
import re, sys
prog, handler, names = sys.argv[1], sys.argv[2], sys.argv[3:]
text = open(prog).read()
decl = re.search(r"func\.func\s+private\s+@" + re.escape(handler) + r"\s*\(", text)
if not decl or not names:
    sys.exit(f"tensor_params_program: {prog}: no declaration of @{handler}, or no names")
close = text.find(")", decl.end())
params = text.find("df.params = [", close)
nxt = text.find("func.func", decl.end())
end = text.find("]", params)
if params < 0 or (0 <= nxt < params) or end < 0:
    sys.exit(f"tensor_params_program: {prog}: @{handler} has no df.params")
text = (text[:close] + "".join(", !df.tensor" for _ in names) + text[close:end]
        + "".join(f', "{n}"' for n in names) + text[end:])
sys.stdout.write(text)
PY
}

# rep N X: X repeated N times, comma-separated
rep() { python3 -c "import sys; print(','.join([sys.argv[2]] * int(sys.argv[1])))" "$1" "$2"; }
