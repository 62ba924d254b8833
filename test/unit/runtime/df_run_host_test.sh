#!/usr/bin/env bash
# df-run --backend=host end to end, no GPU, driver or Python: the seed
# attention plan blob (make_plan(), block size 128) runs on the host
# backend with examples/seed/attention_handlers.c compiled as a shared
# object; the output is checked against a float64 reference
# (make_attention_ref), the op log and the cost estimate are inspected,
# and every new option is tried with bad input.
# usage: df_run_host_test.sh DF_RUN ATTENTION_SO ROGUE_SO PARTIAL_SO MAKE_SEED_BLOB MAKE_REF WORKDIR
set -u
df_run=$1 handlers=$2 rogue=$3 partial=$4 make_blob=$5 make_ref=$6 work=$7
rm -rf "$work" && mkdir -p "$work"
failures=0
out="$work/last.out"

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# run EXPECTED_RC PATTERN ARGS...: df-run's exit status and output (also
# kept in $out for further checks).
run() {
  local want=$1 pattern=$2
  shift 2
  "$df_run" "$@" >"$out" 2>&1
  local rc=$?
  if [ "$rc" != "$want" ] || ! grep -qE -- "$pattern" "$out"; then
    fail "df-run $* -> rc $rc (want $want), output:"
    sed 's/^/    /' "$out"
    echo "    (expected /$pattern/)"
  else
    echo "ok: $pattern"
  fi
}

# expect PATTERN FILE [COUNT]: FILE has a line matching PATTERN (exactly
# COUNT of them when given).
expect() {
  local pattern=$1 file=$2 count=${3:-}
  local n
  n=$(grep -cE -- "$pattern" "$file")
  if [ -n "$count" ] && [ "$n" != "$count" ]; then
    fail "$file: $n lines match /$pattern/, want $count"
  elif [ -z "$count" ] && [ "$n" = 0 ]; then
    fail "$file: no line matches /$pattern/"
  fi
}

"$make_blob" "$work/seed.dfplan" || exit 1
"$make_blob" "$work/bare.dfplan" bare || exit 1
"$make_ref" "$work" --ref o_ref_replan.bin 300 200 || exit 1
"$make_ref" "$work" 384 256 || exit 1 # the seed plan's lengths

host=(--backend=host --handlers "$handlers" --plan "$work/seed.dfplan" --block-size 128)
qkv=(--tensor "Q=file:$work/q.bin:float16:2x16" --tensor "K=file:$work/k.bin:float16:2x4096x16"
     --tensor "V=file:$work/v.bin:float16:2x4096x16" --tensor O=zeros:float32:2x16)
check=(--check "O=$work/o_ref.bin:0.02:0.002")

# the seed plan on the host: right numbers, op log and cost
run 0 "check O: ok \(32 elements" "${host[@]}" "${qkv[@]}" "${check[@]}" \
  --op-log "$work/log.txt" --cost
expect "plan: 4 SMs, cluster 2, 13 instructions, 7 slots, 6 comms; staging 336 B, flags 28 B" "$out"
expect "host backend \(no CUDA driver\): 4 virtual CTAs, cluster 2, 1 thread per CTA" "$out"
expect "handlers: 4 from $handlers" "$out"
expect "op log: 19 records \(13 instructions, 6 comms\) written to $work/log.txt" "$out"
expect "^cost model: F=40 cycles/instruction R=0.0625 cycles/byte cluster_latency=200 hbm_latency=1000$" "$out" 1
expect "^cta [0-3]: instructions=[0-9]+ comms=[0-9]+ comm_bytes=[0-9]+ busy=[0-9.]+ finish=[0-9.]+$" "$out" 4
expect "^cta 0: instructions=4 comms=3 comm_bytes=144 busy=169.00 finish=1172.00$" "$out" 1
expect "^total: instructions=9 comm_bytes=288 busy=378.00 makespan=2255.00 critical_cta=3$" "$out" 1
# one record per executed instruction (EXITs included, as the backend
# writes them: 9 dispatched + 4 EXIT = the plan's 13) and per comm (6)
log="$work/log.txt"
[ -s "$log" ] || fail "no op log written"
expect "^[0-9]+ instr cta=[0-3] pos=[0-9]+ instr=[0-9]+ opcode=[a-z_]+ handler=([0-9]+|-) bytes=[0-9]+$" "$log" 13
expect " instr .* opcode=exit handler=- " "$log" 4
expect " instr .* opcode=(iter|reduce|finalize) handler=[0-9]+ " "$log" 9
expect "^[0-9]+ comm cta=[0-3] pos=[0-9]+ instr=[0-9]+ comm=[0-5] kind=[a-z_]+ src_slot=[0-9]+ dst_slot=[0-9]+ bytes=48 peer=[0-3]$" "$log" 6
expect "^0 instr cta=0 pos=0 instr=0 opcode=iter handler=0 bytes=0$" "$log" 1
[ "$(wc -l <"$log")" = 19 ] || fail "op log has $(wc -l <"$log") lines, want 19"

# the cost estimate does not need the op log
run 0 "^total: instructions=9 comm_bytes=288 busy=378.00 makespan=2255.00 critical_cta=3$" \
  "${host[@]}" "${qkv[@]}" --cost
# a wrong reference fails the check (exit 1)
run 1 "check O: FAILED: [0-9]+ of 32 elements outside rtol 0.02 atol 0.002" "${host[@]}" "${qkv[@]}" \
  --check "O=$work/o_ref_replan.bin:0.02:0.002"
# multi-threaded CTAs, repeated runs, saving and staging
run 0 "check O: ok" "${host[@]}" "${qkv[@]}" "${check[@]}" --threads 4
expect "4 threads per CTA" "$out"
run 0 "3 runs \(1 warm-up, df_host_run, host clock\): min" "${host[@]}" "${qkv[@]}" "${check[@]}" \
  --iters 3 --warmup 1
run 0 "saved O to $work/o.bin" "${host[@]}" "${qkv[@]}" --save "O=$work/o.bin" \
  --staging-out "$work/staging.bin"
expect "saved 336 staging bytes to $work/staging.bin" "$out"
[ "$(stat -c %s "$work/o.bin" 2>/dev/null)" = 128 ] || fail "saved O size"
[ "$(stat -c %s "$work/staging.bin" 2>/dev/null)" = 336 ] || fail "staging size"
run 0 "check O: ok" --backend=host --handlers "$handlers" --plan "$work/seed.dfplan" \
  --block-size 128 "${qkv[@]}" --check "O=$work/o.bin:0:0"
# re-planned through lib/Plan for other lengths, same handlers
run 0 "check O: ok" "${host[@]}" "${qkv[@]}" --check "O=$work/o_ref_replan.bin:0.02:0.002" \
  --replan kv=300,200 --task-extents 2
expect "re-planned kv for 2 lengths" "$out"
run 0 "check O: ok" "${host[@]}" "${qkv[@]}" --check "O=$work/o_ref_replan.bin:0.02:0.002" \
  --replan kv=300,200 --task-extents 2 --policy cluster_local --strategy streaming
# a blob recording transfer-tile-bytes=16 and reduce-strategy=auto under
# 200 bytes: the re-plan repeats both (all_at_once needs 368 bytes here,
# streaming 112), every comm moves one 16-byte tile of a 48-byte slot
"$make_blob" "$work/choices.dfplan" choices || exit 1
run 0 "check O: ok" --backend=host --handlers "$handlers" --plan "$work/choices.dfplan" \
  --block-size 128 "${qkv[@]}" --check "O=$work/o_ref_replan.bin:0.02:0.002" \
  --replan kv=300,200 --task-extents 2 --op-log "$work/choices.txt"
expect "re-plan repeats transfer_tile_bytes=16 reduce-strategy=auto shared_memory_limit=200 policy=round_robin" "$out" 1
expect "auto memory choice: cluster_local/streaming \(CTA [0-9]+ needs 112 bytes\)" "$out" 1
expect " comm .* bytes=16 " "$work/choices.txt"
expect " comm .* bytes=(32|48) " "$work/choices.txt" 0
run 2 "the plan was compiled with reduce-strategy=auto \(shared memory limit 200 bytes, from policy round_robin\), which re-plans repeat; --policy / --strategy cannot override it" \
  --backend=host --handlers "$handlers" --plan "$work/choices.dfplan" --block-size 128 \
  "${qkv[@]}" --replan kv=300,200 --task-extents 2 --strategy all_at_once
# the compiled plan itself runs as written
run 0 "check O: ok" --backend=host --handlers "$handlers" --plan "$work/choices.dfplan" \
  --block-size 128 "${qkv[@]}" "${check[@]}"
# tensors by index when the blob carries no program
run 0 "check 3: ok" --backend host --handlers "$handlers" --plan "$work/bare.dfplan" --block-size 128 \
  --tensor "0=file:$work/q.bin:float16:2x16" --tensor "1=file:$work/k.bin:float16:2x4096x16" \
  --tensor "2=file:$work/v.bin:float16:2x4096x16" --tensor 3=zeros:float32:2x16 \
  --check "3=$work/o_ref.bin:0.02:0.002"
run 2 "cannot re-plan: the plan carries no program" --backend=host --handlers "$handlers" \
  --plan "$work/bare.dfplan" --replan kv=300,200 --block-size 128
# no CUDA driver: the CUDA path says so, the host backend still runs
run 2 "no CUDA driver: cannot load /nonexistent/libcuda.so.1" --driver /nonexistent/libcuda.so.1 \
  --kernel "$work/seed.dfplan" --plan "$work/seed.dfplan"
run 0 "check O: ok" "${host[@]}" "${qkv[@]}" "${check[@]}"

# a handler the host backend diagnoses: exit 3 with the report; the op log
# up to the failure is still written. The rogue split_kv is exported as
# dataflow_handler_0_split_kv next to a harmless split_kv: the packed
# symbol must win.
run 3 "diagnosed the plan \(arena\)" --backend=host --handlers "$rogue" --plan "$work/seed.dfplan" \
  --block-size 128 "${qkv[@]}" "${check[@]}" --op-log "$work/rogue.txt"
expect "handler 0 'split_kv'\): the handler wrote outside its memory: into the shared control region" "$out"
expect "op log: [0-9]+ records" "$out"
[ -f "$work/rogue.txt" ] || fail "no op log written for the diagnosed run"
if grep -q "check O" "$out"; then fail "a diagnosed run must not check outputs"; fi

# bad input for each new option
run 2 "--backend=host needs --handlers FILE.so" --backend=host --plan "$work/seed.dfplan"
run 2 "--backend=host needs --plan" --backend=host --handlers "$handlers"
run 2 "--backend: 'bogus' is not a backend \(cuda or host\)" --backend=bogus --plan "$work/seed.dfplan"
run 2 "--backend: 'gpu' is not a backend \(cuda or host\)" --backend gpu
run 2 "--handlers $partial: handler 1 'combine' \(reduce\): symbol 'dataflow_handler_1_combine' not found in the host handler library \(looked for dataflow_handler_1_combine, combine\)" \
  --backend=host --handlers "$partial" --plan "$work/seed.dfplan" "${qkv[@]}"
run 2 "--handlers: cannot load the host handler library: .*none.so" --backend=host \
  --handlers "$work/none.so" --plan "$work/seed.dfplan"
run 2 "--handlers: cannot load the host handler library: .*seed.dfplan" --backend=host \
  --handlers "$work/seed.dfplan" --plan "$work/seed.dfplan"
run 2 "--op-log needs --backend=host" --kernel k --plan p --op-log "$work/x.txt"
run 2 "--cost needs --backend=host" --kernel k --plan p --cost
run 2 "--handlers needs --backend=host" --kernel k --plan p --handlers "$handlers"
run 2 "--threads needs --backend=host" --kernel k --plan p --threads 2
run 2 "--cost takes no value" --backend=host --cost=yes
run 2 "--threads: '0' is not an integer >= 1" --backend=host --threads 0
run 2 "--threads: 5000 is more than the host backend's 1024" --backend=host --threads 5000
run 2 "--op-log needs a value" --backend=host --op-log
run 2 "--kernel is for --backend=cuda" --backend=host --handlers "$handlers" --plan p --kernel k
run 2 "--driver is for --backend=cuda" --backend=host --handlers "$handlers" --plan p --driver d
run 2 "--op-log: cannot create '$work/no/such/log.txt'" "${host[@]}" "${qkv[@]}" \
  --op-log "$work/no/such/log.txt"
run 2 "tensor 'O' is not bound \(use --tensor O=SPEC\)" "${host[@]}" \
  --tensor Q=zeros:float16:2x16 --tensor K=zeros:float16:2x4096x16 --tensor V=zeros:float16:2x4096x16
run 2 "plan: cannot open '$work/none.dfplan'" --backend=host --handlers "$handlers" \
  --plan "$work/none.dfplan"

if [ "$failures" != 0 ]; then
  echo "$failures df-run host case(s) failed"
  exit 1
fi
echo "df-run --backend=host: all cases passed"
