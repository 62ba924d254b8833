#!/usr/bin/env bash
# df-run end to end on a fake libcuda.so (test/unit/runtime/fake_libcuda.c):
# usage errors, "no CUDA driver", a full run with generated and file
# tensors, checks that pass and fail, saving, staging copy-back,
# re-planning, plans without a program, and driver failures.
# usage: df_run_test.sh DF_RUN FAKE_LIBCUDA MAKE_SEED_BLOB WORKDIR
set -u
df_run=$1 fake=$2 make_blob=$3 work=$4
rm -rf "$work" && mkdir -p "$work"
failures=0

# run EXPECTED_RC PATTERN ARGS...: df-run's output must match PATTERN.
run() {
  local want=$1 pattern=$2
  shift 2
  local out rc
  out=$("$df_run" "$@" 2>&1)
  rc=$?
  if [ "$rc" != "$want" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: df-run $* -> rc $rc (want $want), output:"
    echo "$out" | sed 's/^/    /'
    echo "    (expected /$pattern/)"
    failures=$((failures + 1))
  else
    echo "ok: $pattern"
  fi
}

printf '//\n.version 8.7\n.target sm_90a\n.address_size 64\n.visible .entry df_persistent_kernel()\n{\n ret;\n}\n' >"$work/k.ptx"
"$make_blob" "$work/seed.dfplan" || exit 1
"$make_blob" "$work/bare.dfplan" bare || exit 1
head -c 128 /dev/zero | tr '\0' '<' >"$work/o.bin"     # float16 0x3c3c (1.06)
head -c 128 /dev/zero | tr '\0' '@' >"$work/other.bin" # float16 0x4040 (2.13)
head -c 128 /dev/zero | tr '\0' '\377' >"$work/nan.bin" # float16 NaN
base=(--driver "$fake" --kernel "$work/k.ptx" --plan "$work/seed.dfplan")
qkv=(--tensor Q=random:float16:4x16 --tensor K=random:float16:4x16:7 --tensor V=zeros:bf16:64)

# usage
run 0 "usage: df-run" --help
run 2 "--kernel and --plan are required" --kernel "$work/k.ptx"
run 2 "unknown option '--frobnicate'" --frobnicate 1
run 2 "--iters needs a value" --kernel a --plan b --iters
run 2 "--iters: '0' is not an integer >= 1" --kernel a --plan b --iters 0
run 2 "--block-dim: give X or X,Y,Z" --kernel a --plan b --block-dim 4,4
run 2 "--tensor: expected NAME=VALUE" --kernel a --plan b --tensor Q
run 2 "--tensor: tensor 'Q' is given twice" --kernel a --plan b --tensor Q=zeros:f32:1 --tensor Q=zeros:f32:1
run 2 "--replan needs --block-size" --kernel a --plan b --replan kv=1,2
run 2 "--replan: trailing ','" --kernel a --plan b --replan kv=1,
run 2 "Dataflow scheduler_policy must be one of" --kernel a --plan b --policy nope
run 2 "--check rtol: 'x' is not a non-negative number" --kernel a --plan b --check O=ref.bin:x
run 2 "unexpected argument 'stray'" stray

# no driver
run 2 "no CUDA driver: cannot load /nonexistent/libcuda.so.1" --driver /nonexistent/libcuda.so.1 --kernel "$work/k.ptx" --plan "$work/seed.dfplan"

# a full run: prints device, plan, launch, tensors, timings and checks
run 0 "check O: ok \(64 elements" "${base[@]}" "${qkv[@]}" --tensor "O=file:$work/o.bin:float16:4x16" \
  --check "O=$work/o.bin" --iters 3 --warmup 1
run 0 "3 launches \(1 warm-up, launch \+ stream sync, host clock\): min" "${base[@]}" "${qkv[@]}" \
  --tensor "O=file:$work/o.bin:float16:4x16" --iters 3 --warmup 1
run 0 "plan: 4 SMs, cluster 2, 13 instructions, 7 slots, 6 comms; staging 336 B, flags 28 B \(reset before each launch\)" \
  "${base[@]}" "${qkv[@]}" --tensor O=zeros:float16:4x16
run 0 "launch: grid 4, block 64x2x1, cluster 2, dynamic shared 368 B, block_size 128" \
  "${base[@]}" "${qkv[@]}" --tensor O=zeros:float16:4x16 --block-dim 64,2,1 --block-size 128
run 0 "tensor K: float16 4x16 random\(seed 7\)" "${base[@]}" "${qkv[@]}" --tensor O=zeros:float16:4x16
run 0 "saved O to $work/saved.bin" "${base[@]}" "${qkv[@]}" --tensor "O=file:$work/o.bin:float16:4x16" \
  --save "O=$work/saved.bin"
if ! cmp -s "$work/o.bin" "$work/saved.bin"; then
  echo "FAIL: saved tensor differs from its input"
  failures=$((failures + 1))
fi
run 0 "saved 336 staging bytes to $work/staging.bin" "${base[@]}" "${qkv[@]}" --tensor O=zeros:float16:4x16 \
  --staging-out "$work/staging.bin"
[ "$(stat -c %s "$work/staging.bin" 2>/dev/null)" = 336 ] || { echo "FAIL: staging size"; failures=$((failures + 1)); }

# checks that fail: exit status 1
run 1 "check O: FAILED: [0-9]+ of 64 elements outside rtol 0.001 atol 1e-05" "${base[@]}" "${qkv[@]}" \
  --tensor "O=file:$work/o.bin:float16:4x16" --check "O=$work/other.bin"
run 1 "check O: FAILED" "${base[@]}" "${qkv[@]}" \
  --tensor "O=file:$work/o.bin:float16:4x16" --check "O=$work/other.bin:0.01:0.001"
# NaN never passes, not even against itself
run 1 "check O: FAILED: 64 of 64 elements" "${base[@]}" "${qkv[@]}" \
  --tensor "O=file:$work/nan.bin:float16:4x16" --check "O=$work/nan.bin"
run 2 "reference '$work/seed.dfplan' has [0-9]+ bytes, the tensor 128" "${base[@]}" "${qkv[@]}" \
  --tensor "O=file:$work/o.bin:float16:4x16" --check "O=$work/seed.dfplan"

# binding errors
run 2 "tensor 'O' is not bound \(use --tensor O=SPEC\)" "${base[@]}" "${qkv[@]}"
run 2 "--tensor: no tensor argument 'X' \(the plan's tensors: Q, K, V, O\)" "${base[@]}" "${qkv[@]}" \
  --tensor X=zeros:f32:1
run 2 "file '$work/o.bin' has 128 bytes, float32 shape needs 256" "${base[@]}" "${qkv[@]}" \
  --tensor "O=file:$work/o.bin:float32:64"
run 2 "tensor dtype: " "${base[@]}" "${qkv[@]}" --tensor O=zeros:complex:4
run 2 "shape '4xx' is not non-negative integers" "${base[@]}" "${qkv[@]}" --tensor O=zeros:fp16:4xx
run 2 "random float8 values are not supported" "${base[@]}" "${qkv[@]}" --tensor O=random:float8_e4m3:4
run 2 "expected file:PATH:DTYPE:SHAPE, random:DTYPE:SHAPE\[:SEED\], zeros:DTYPE:SHAPE or PATH.npy" \
  "${base[@]}" "${qkv[@]}" --tensor O=ones:fp16:4

# tensors by index when the plan carries no program
run 0 "tensor 3: float16 4x16 zeros" --driver "$fake" --kernel "$work/k.ptx" --plan "$work/bare.dfplan" \
  --tensor 0=zeros:fp16:4 --tensor 3=zeros:fp16:4x16
run 2 "the plan has no program, name tensors by index" --driver "$fake" --kernel "$work/k.ptx" \
  --plan "$work/bare.dfplan" --tensor Q=zeros:fp16:4

# re-planning for new lengths with the same kernel
run 0 "re-planned kv for 2 lengths" "${base[@]}" "${qkv[@]}" --tensor O=zeros:float16:4x16 \
  --replan kv=300,200 --block-size 128
run 0 "re-planned kv for 2 lengths" "${base[@]}" "${qkv[@]}" --tensor O=zeros:float16:4x16 \
  --replan kv=300,200 --block-size 128 --task-extents 2 --policy cluster_local
run 2 "--task-extents: '0' is not an integer >= 1" --kernel a --plan b --task-extents 2,0
run 2 "plan: re-planning: " "${base[@]}" "${qkv[@]}" --tensor O=zeros:float16:4x16 \
  --replan kv=300,200 --block-size 128 --task-extents 3
run 2 "plan handler 3, combine \(1,reduce\) arity passthrough, is not among" "${base[@]}" "${qkv[@]}" \
  --tensor O=zeros:float16:4x16 --replan kv=512,128 --block-size 128
run 2 "cannot re-plan: the plan carries no program" --driver "$fake" --kernel "$work/k.ptx" \
  --plan "$work/bare.dfplan" --replan kv=300,200 --block-size 128
# a blob recording block-size=auto: the re-plan chooses the block for the
# new lengths and the launch passes it to the kernel
"$make_blob" "$work/split.dfplan" split || exit 1
split=(--driver "$fake" --kernel "$work/k.ptx" --plan "$work/split.dfplan" "${qkv[@]}" --tensor O=zeros:float16:4x16)
run 0 "re-plan chose block_size 1024" "${split[@]}" --replan kv=2000,2000 --block-size auto
run 0 "launch: grid 4, .*, block_size 1024" "${split[@]}" --replan kv=2000,2000 --block-size auto
run 0 "launch: grid 4, .*, block_size 512" "${split[@]}" --replan kv=1000,1000 --block-size auto
run 2 "compiled with block-size=auto, which re-plans repeat \(choosing the block for the new lengths\); pass --block-size auto, not 128" \
  "${split[@]}" --replan kv=1000,1000 --block-size 128
run 2 "--block-size auto: the plan was not compiled with block-size=auto" "${base[@]}" "${qkv[@]}" \
  --tensor O=zeros:float16:4x16 --replan kv=1000,1000 --block-size auto
run 2 "--block-size auto takes the block a re-plan chooses" --kernel a --plan b --block-size auto

# .npy: round trips, references of another float width, bad headers
run 0 "saved O to $work/r.npy" "${base[@]}" "${qkv[@]}" --tensor O=random:float16:4x16:5 --save "O=$work/r.npy"
run 0 "tensor O: float16 4x16 from $work/r.npy" "${base[@]}" "${qkv[@]}" --tensor "O=$work/r.npy" \
  --check "O=$work/r.npy:0:0" --save "O=$work/r2.npy"
cmp -s "$work/r.npy" "$work/r2.npy" || { echo "FAIL: .npy round trip differs"; failures=$((failures + 1)); }
head -c 128 "$work/r.npy" | grep -aq "NUMPY.*{'descr': '<f2', 'fortran_order': False, 'shape': (4, 16), }" ||
  { echo "FAIL: .npy header"; failures=$((failures + 1)); }
[ $(( $(stat -c %s "$work/r.npy") - 128 )) = 128 ] || { echo "FAIL: .npy data offset"; failures=$((failures + 1)); }
run 0 "2 launches \(0 warm-up, CUDA events" "${base[@]}" "${qkv[@]}" --tensor O=zeros:float16:4 --repeat 2
run 0 "saved O to $work/out.npy" "${base[@]}" "${qkv[@]}" --tensor O=zeros:float16:4 --out "O=$work/out.npy"
run 0 "saved O to $work/r64.npy" "${base[@]}" "${qkv[@]}" --tensor O=random:float64:64:9 --save "O=$work/r64.npy"
run 0 "saved O to $work/v.npy" "${base[@]}" "${qkv[@]}" --tensor O=random:float16:64:9 --save "O=$work/v.npy"
run 0 "check O: ok \(64 elements, max abs err [0-9.e-]+, max rel err [0-9.e-]+, rel L2 err" "${base[@]}" "${qkv[@]}" \
  --tensor "O=random:float32:64:9" --check "O=$work/r64.npy:1e-6:0"
run 1 "check O: FAILED" "${base[@]}" "${qkv[@]}" --tensor "O=$work/v.npy" --check "O=$work/r64.npy:1e-6:0"
run 0 "saved O to $work/i.npy" "${base[@]}" "${qkv[@]}" --tensor O=random:int32:8x8 --save "O=$work/i.npy"
run 2 "--check O: reference '$work/i.npy' has shape 8x8, the tensor 4x16" "${base[@]}" "${qkv[@]}" \
  --tensor "O=$work/r.npy" --check "O=$work/i.npy"
run 2 "--check O: reference '$work/r64.npy' is float64, the tensor int32" "${base[@]}" "${qkv[@]}" \
  --tensor "O=random:int32:64" --check "O=$work/r64.npy"
npy() { # npy FILE HEADER-DICT DATA-BYTES: a v1.0 file with that dictionary
  local dict="$2" n
  n=$(( ${#dict} + 1 ))
  { printf '\x93NUMPY\x01\x00'; printf "\\x$(printf %02x $((n % 256)))\\x$(printf %02x $((n / 256)))";
    printf '%s\n' "$dict"; head -c "$3" /dev/zero; } >"$1"
}
npy "$work/fortran.npy" "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }" 16
npy "$work/big.npy" "{'descr': '>f4', 'fortran_order': False, 'shape': (4,), }" 16
npy "$work/bf16.npy" "{'descr': '<V2', 'fortran_order': False, 'shape': (4,), }" 8
npy "$work/short.npy" "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }" 12
npy "$work/nokey.npy" "{'descr': '<f4', 'shape': (4,), }" 16
npy "$work/ok.npy" "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }" 16
printf 'NUMPY nonsense' >"$work/magic.npy"
run 2 "fortran.npy: .npy array is in Fortran order \(fortran_order True\); df-run needs C order" \
  "${base[@]}" "${qkv[@]}" --tensor "O=$work/fortran.npy"
run 2 "big.npy: .npy dtype '>f4' is big-endian" "${base[@]}" "${qkv[@]}" --tensor "O=$work/big.npy"
run 2 "bf16.npy: .npy dtype '<V2' is a raw void type \(bfloat16" "${base[@]}" "${qkv[@]}" --tensor "O=$work/bf16.npy"
run 2 "short.npy: .npy data has 12 bytes, its header \(dtype float32, 1 dimensions\) says 16" \
  "${base[@]}" "${qkv[@]}" --tensor "O=$work/short.npy"
run 2 "nokey.npy: .npy header lacks 'fortran_order'" "${base[@]}" "${qkv[@]}" --tensor "O=$work/nokey.npy"
run 2 "magic.npy: not a .npy file" "${base[@]}" "${qkv[@]}" --tensor "O=$work/magic.npy"
run 0 "tensor O: float32 4 from $work/ok.npy" "${base[@]}" "${qkv[@]}" --tensor "O=$work/ok.npy"
run 2 "cannot save '$work/f8.npy' as .npy: dtype float8_e4m3" "${base[@]}" "${qkv[@]}" \
  --tensor O=zeros:float8_e4m3:4 --save "O=$work/f8.npy"

# timing with CUDA events (the fake's clock: 0.5 ms per launch)
run 0 "3 launches \(0 warm-up, CUDA events around each launch\): min 500.0 us, median 500.0 us" \
  "${base[@]}" "${qkv[@]}" --tensor O=zeros:float16:4x16 --iters 3

# --repeat-check: the fake kernel writes nothing, so the poisoned output stays
run 1 "repeat O: FAILED: 128 of 128 bytes differ after a relaunch into poisoned outputs" \
  "${base[@]}" "${qkv[@]}" --tensor O=random:float16:4x16 --save "O=$work/rep.npy" --repeat-check
run 2 "--repeat-check compares the --check and --save tensors; none is given" \
  "${base[@]}" "${qkv[@]}" --tensor O=zeros:float16:4x16 --repeat-check
run 2 "--repeat-check needs --backend=cuda|--repeat-check is for --backend=cuda" --backend=host --plan p \
  --handlers h.so --repeat-check
run 2 "--per-cta-shared is a layout option of --replan" --kernel a --plan b --per-cta-shared

# the watchdog: a kernel that never finishes stops with a per-CTA dump (exit 4)
FAKE_CUDA_HANG=1 run 4 "did not finish within 50 ms \(watchdog\): 1 of 4 CTAs not done" \
  "${base[@]}" "${qkv[@]}" --tensor O=zeros:float16:4x16 --timeout-ms 50
FAKE_CUDA_HANG=1 run 4 "watchdog dump: 1 of 4 CTAs not done:" \
  "${base[@]}" "${qkv[@]}" --tensor O=zeros:float16:4x16 --timeout-ms 50
FAKE_CUDA_HANG=1 run 4 "CTA 0: pc 1 of [0-9]+ \([a-z]+, task [0-9]+\): hbm_recv: waits on comm 1 \(hbm_recv slot [0-9]+ -> [0-9]+, flag [0-9]+ >= epoch 1\)" \
  "${base[@]}" "${qkv[@]}" --tensor O=zeros:float16:4x16 --timeout-ms 50
run 0 "watchdog: 1000 ms per launch" "${base[@]}" "${qkv[@]}" --tensor O=zeros:float16:4x16 --timeout-ms 1000
run 2 "--timeout-ms: '0' is not an integer >= 1" --kernel a --plan b --timeout-ms 0

# files and driver failures
run 2 "plan: cannot open '$work/none.dfplan'" --driver "$fake" --kernel "$work/k.ptx" --plan "$work/none.dfplan"
run 2 "plan blob" --driver "$fake" --kernel "$work/k.ptx" --plan "$work/k.ptx"
run 2 "module: image of [0-9]+ bytes is neither" --driver "$fake" --kernel "$work/seed.dfplan" --plan "$work/seed.dfplan"
FAKE_CUDA_JIT_FAIL=1 run 2 "JIT log:" "${base[@]}" "${qkv[@]}" --tensor O=zeros:fp16:64
FAKE_CUDA_JIT_FAIL=1 run 2 "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX \(218\): a PTX JIT compilation failed; JIT log: ptxas fatal" \
  "${base[@]}" "${qkv[@]}" --tensor O=zeros:fp16:64
FAKE_CUDA_LAUNCH_FAIL=1 run 2 "cuLaunchKernelEx failed: CUDA_ERROR_LAUNCH_FAILED" "${base[@]}" "${qkv[@]}" --tensor O=zeros:fp16:64
FAKE_CUDA_NO_DEVICE=1 run 2 "device 0: no such CUDA device \(0 devices present\)" "${base[@]}"
run 2 "device 3: no such CUDA device" "${base[@]}" --device 3
FAKE_CUDA_SM_COUNT=3 run 2 "can be resident on device 0, the plan needs 2" "${base[@]}"

if [ "$failures" != 0 ]; then
  echo "$failures df-run case(s) failed"
  exit 1
fi
echo "df-run: all cases passed"
