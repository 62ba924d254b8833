#!/usr/bin/env bash
# One GPU case of a carry folder (scripts/gpu/make_gqa_carry.sh,
# make_seed_carry.sh): df-run on NAME.ptx (or .cubin) + NAME.dfplan with
# the arguments of NAME.args (@DIR@, @OUT@, @WORK@ replaced), killed after
# $DF_GPU_RUN_TIMEOUT seconds (default 300). Prints df-run's output. Exit
# status: df-run's, or, with NAME.expect ("RC REGEX"), 0 when df-run exited
# with RC and printed a line matching REGEX, else 1.
# usage: run_case.sh DF_RUN DIR NAME [OUT [WORK]]
set -u
df_run=$1 dir=$2 name=$3 out=${4:-${OUT:-/tmp}} work=${5:-/tmp}
kernel="$dir/$name.ptx"
[ -e "$kernel" ] || kernel="$dir/$name.cubin"
if [ ! -e "$kernel" ]; then
  echo "run_case: no $name.ptx or $name.cubin in $dir"
  exit 2
fi
args=()
[ -e "$dir/$name.args" ] &&
  read -r -a args < <(sed -e "s|@DIR@|$dir|g" -e "s|@OUT@|$out|g" -e "s|@WORK@|$work|g" \
                        "$dir/$name.args")
log="$(mktemp)"
timeout -k 10 "${DF_GPU_RUN_TIMEOUT:-300}" "$df_run" --kernel "$kernel" --plan "$dir/$name.dfplan" \
  --iters "${DF_GPU_ITERS:-20}" --warmup "${DF_GPU_WARMUP:-3}" "${args[@]}" >"$log" 2>&1
rc=$?
cat "$log"
if [ -e "$dir/$name.expect" ]; then
  read -r want regex <"$dir/$name.expect"
  if [ "$rc" = "$want" ] && grep -qE -- "$regex" "$log"; then
    rc=0
  else
    echo "run_case: $name: exit $rc, want $want and a line matching /$regex/"
    rc=1
  fi
fi
rm -f "$log"
exit "$rc"
