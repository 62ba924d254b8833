#!/usr/bin/env python3
"""The decode-attention bench cases of issue 10 and the schedule df uses for
each: sequence lengths from fixed seeds, and a range block size plus
placement chosen by replaying df's all_at_once schedules (REFERENCE 2.4
round_robin; df-schedule defer-reduces and balance-iters) with a simple cost
model (an SM streams its share of ~4 TB/s; fixed costs per partial, reduce
and HBM edge) and taking the smallest modelled makespan (df-schedule
block-size=auto runs the same model and search in lib/Plan/split_auto.c and
picks the same plans, test/unit/test_split.c); every plan's reduces take at
most FAN_IN inputs (reduce trees, not modelled). Each case also lists
alternative plans (`alts`: df-schedule even-split, round_robin for the
skewed batches, and the case's plan with the staged partial handler,
`cflags` -DKV_STAGES=S and a workspace of `workspace_bytes`) that bench.py
measures on the same inputs. CASES_AB=FLAGS adds a twin NAME.ab of every
plan whose handlers are built with FLAGS too (FLAGS;FLAGS2;...: twins .ab,
.ab2, ... one per set): a handler change against
the handler as it is, plan for plan, in one call (with make_carry.sh's
CARRY_PLANS naming the pairs; run Z: CASES_AB=-DKV_EARLY_K=0).

DF_SMS: the card's SM count (default 132, the H200's and H100 SXM's; an
even number: the plans run clusters of 2), as make_carry.sh passes it.

usage: cases.py OUT.json   (also prints one line per case)"""
import heapq
import json
import math
import os
import random
import sys


def card_sms(text):
    """The SM count the plans are made for: DF_SMS, a positive even number."""
    if not text.isdigit() or int(text) < 2 or int(text) % 2:
        sys.exit(f"cases.py: DF_SMS='{text}': the card's SM count, an even number of at "
                 "least 2 (the plans run clusters of 2)")
    return int(text)


SMS = card_sms(os.environ.get("DF_SMS", "132"))
HKV = 8
ROW_BYTES = 2 * 128 * 2          # one K row + one V row of one KV head (fp16)
SM_BYTES_PER_US = 4.0e12 / SMS / 1e6  # an SM's share of ~4 TB/s
ITER_US = 3.0                     # per partial: dispatch, Q load, pipeline fill, merge, send
REDUCE_US, REDUCE_PER_INPUT_US, FINAL_US = 1.0, 0.05, 0.3
HBM_EDGE_US = 1.0                 # partial on another SM: flag + staging copy (parallel)
SHARED_BUDGET = 150 * 1024        # per-CTA slot arena we allow (the kernel has 34 KB static)
INTER_BYTES = 1040


SCHEDULES = {  # name: (balance-iters, defer-reduces)
    "rr": (False, False),         # REFERENCE 2.4 round_robin, reduces in emission order
    "rr_defer": (False, True),    # the same placement, every queue's ITERs first
    "balanced": (True, True),     # longest task first, ITER on the least loaded SM
}


def place(task_lens, block, balance):
    """Per-SM queues of (op, task, block index, rows) as df_schedule emits them."""
    queues = [[] for _ in range(SMS)]
    order = sorted(range(len(task_lens)), key=lambda t: (-task_lens[t], t)) if balance \
        else range(len(task_lens))
    heap = [(0, sm) for sm in range(SMS)]  # (range units, sm), as lib/Plan/schedule.c
    nxt = 0
    for t in order:
        n = task_lens[t]
        blocks = []
        for b in range(0, n, block):
            rows = min(block, n - b)
            if balance:
                units, sm = heapq.heappop(heap)
                heapq.heappush(heap, (units + rows, sm))
            else:
                sm = nxt % SMS
                nxt += 1
            queues[sm].append(("iter", t, len(blocks), rows))
            blocks.append(sm)
        queues[blocks[0]].append(("reduce", t, blocks))
    return queues


def place_even(task_lens, chunks, gran, cost):
    """Per-SM queues of df-schedule even-split (lib/Plan/schedule_even_split.c):
    tasks longest first laid end to end, each as `cost` units then its keys,
    cut into `chunks` equal chunks, each cut moved to the nearest multiple of
    `gran` in its task (or its end; a cut in the cost units to its start)."""
    queues = [[] for _ in range(SMS)]
    order = sorted(range(len(task_lens)), key=lambda t: (-task_lens[t], t))
    total = sum(task_lens) + cost * len(task_lens)
    cut = [total * i // chunks for i in range(chunks + 1)]
    sm_of = (lambda c: c % SMS) if chunks > SMS else (lambda c: c * SMS // chunks)
    pos, c = 0, 0
    for t in order:
        n, cur, pieces = task_lens[t], 0, []
        while c + 1 < chunks and cut[c + 1] <= pos:
            c += 1
        while cur < n:
            e, inside = n, False
            if c + 1 < chunks and cut[c + 1] - pos < cost + n:
                inside = True
                x = cut[c + 1] - pos - cost
                if x <= 0:
                    e = 0
                else:
                    down = x // gran * gran
                    m = down if x - down <= down + gran - x else down + gran
                    e = n if m >= n or n - x < abs(m - x) else m
            if e > cur:
                queues[sm_of(c)].append(("iter", t, len(pieces), e - cur))
                pieces.append(sm_of(c))
                cur = e
            if inside:
                c += 1
        queues[pieces[0]].append(("reduce", t, pieces))
        pos += cost + n
    return queues


def makespan(task_lens, block, balance, defer, even=None):
    """Modelled time (us) and the largest per-CTA slot bytes of the plan
    (even = (chunks, granularity, task cost) for even-split)."""
    queues = place_even(task_lens, *even) if even else place(task_lens, block, balance)
    if defer:  # ITERs first; a reduce of only its own SM's ITERs stays after them
        def first(op, sm):
            return op[0] == "iter" or all(b == sm for b in op[2])
        queues = [[op for op in q if first(op, sm)] + [op for op in q if not first(op, sm)]
                  for sm, q in enumerate(queues)]
    # a reduce holds at most FAN_IN inputs (the plans' reduce trees)
    held = max(sum(INTER_BYTES * (min(len(op[2]), FAN_IN) + 1 if op[0] == "reduce" else 1)
                   for op in q) for q in queues)
    # replay: queues in order, a reduce waits for its inputs
    pos = [0] * SMS
    clock = [0.0] * SMS
    done = {}
    progress = True
    while progress:
        progress = False
        for sm in range(SMS):
            while pos[sm] < len(queues[sm]):
                op = queues[sm][pos[sm]]
                if op[0] == "iter":
                    clock[sm] += ITER_US + op[3] * ROW_BYTES / SM_BYTES_PER_US
                    done[(op[1], op[2])] = (clock[sm], sm)
                else:
                    t, blocks = op[1], op[2]
                    if any((t, i) not in done for i in range(len(blocks))):
                        break
                    start = clock[sm]
                    for i in range(len(blocks)):
                        at, where = done[(t, i)]
                        start = max(start, at + (HBM_EDGE_US if where != sm else 0.0))
                    clock[sm] = start + REDUCE_US + REDUCE_PER_INPUT_US * len(blocks) + FINAL_US
                pos[sm] += 1
                progress = True
    assert all(pos[s] == len(queues[s]) for s in range(SMS)), "replay stuck"
    return max(clock), held


def choose_at(sms, task_lens, schedules=tuple(SCHEDULES)):
    """choose() for `sms` queues sharing the card's bandwidth."""
    global SMS, SM_BYTES_PER_US
    saved = SMS, SM_BYTES_PER_US
    SMS, SM_BYTES_PER_US = sms, SM_BYTES_PER_US * saved[0] / sms
    try:
        return choose(task_lens, schedules)
    finally:
        SMS, SM_BYTES_PER_US = saved


def choose(task_lens, schedules=tuple(SCHEDULES), blocks=None):
    """(block, schedule name, modelled us) with the smallest modelled makespan."""
    best = None
    for name in schedules:
        for block in blocks or range(256, max(task_lens) + 256, 256):
            t, held = makespan(task_lens, block, *SCHEDULES[name])
            if held <= SHARED_BUDGET and (best is None or t < best[2] - 1e-9):
                best = (block, name, t)
    return best


def cases():
    out = []

    def add(name, lens, what):
        out.append({"name": name, "what": what, "lens": lens})

    add("u8x4k", [4096] * 8, "uniform B=8, S=4K")
    add("u8x32k", [32768] * 8, "uniform B=8, S=32K")
    add("u64x4k", [4096] * 64, "uniform B=64, S=4K")
    add("u1x128k", [131072], "uniform B=1, S=128K")
    r = random.Random(1016)
    add("s16", [65536] + [r.randint(512, 4096) for _ in range(15)],
        "skewed B=16: one 64K + 15 uniform in [512, 4096] (seed 1016)")
    r = random.Random(1064)
    add("s64", [32768, 32768] + [min(32768, max(64, int(r.lognormvariate(math.log(2048), 0.9))))
                                 for _ in range(62)],
        "skewed B=64: two 32K + 62 log-normal (median 2K, sigma 0.9; seed 1064)")
    r = random.Random(1032)
    add("s32", [min(32768, max(16, int(r.lognormvariate(math.log(1024), 1.2)))) for _ in range(32)],
        "skewed B=32: log-normal (median 1K, sigma 1.2, synthetic chat-like; seed 1032)")
    for c in out:
        lens = c["lens"]
        c["lmax"] = 1 << max(12, math.ceil(math.log2(max(lens))))
        tl = [n for n in lens for _ in range(HKV)]
        c["block"], c["schedule"], c["model_us"] = choose(tl)
        model_block = c["block"]
        if c["name"] in MEASURED_BLOCK:
            # the model's per-partial cost is a guess; measured better
            c["block"] = MEASURED_BLOCK[c["name"]]
            c["model_us"] = makespan(tl, c["block"], *SCHEDULES[c["schedule"]])[0]
        # reduce trees of at most FAN_IN inputs (a no-op where reduces take
        # fewer): run E, u1x128k 179 -> 163 us, s16 137 -> 129 us
        # and no REDUCE for a task of one block (its FINALIZE reads the
        # partial; an LSE combine of one input is that input): run N, s32
        # 89.2 -> 82.2 us, s16 122.1 -> 118.0, s64 298.8 -> 290.5
        c["opts"] = (sched_opts(*SCHEDULES[c["schedule"]]) + f" reduce-fan-in={FAN_IN}"
                     + " skip-unary-reduce=true")
        c["cflags"] = ""
        c["tokens"] = sum(lens)
        c["kv_bytes"] = sum(lens) * HKV * ROW_BYTES
        # Alternative plans, measured on the case's inputs next to its plan
        # (bench/README.md): even-split for every case; the skewed batches
        # with the reference's round_robin placement and queue order.
        alts = c["alts"] = []

        def alt(suffix, schedule, block, model_us, opts, **extra):
            alts.append({"name": c["name"] + suffix, "schedule": schedule, "block": block,
                         "model_us": model_us, "opts": opts, **extra})
        alt(".even", "even", EVEN_GRAN, even_model(tl, SMS, False), even_opts(SMS, False))
        if c["name"].startswith("s"):
            block, _, t = choose(tl, ("rr",))
            alt(".rr", "rr", block, t, sched_opts(False, False))
        if c["name"] in ("u1x128k", "s16"):
            # the same plan with one reduce per task taking every partial
            alt(".fan0", c["schedule"] + ", one reduce", c["block"], c["model_us"],
                sched_opts(*SCHEDULES[c["schedule"]]))
            # the same with that reduce and its task's finalize fused (one
            # hop after the last partial instead of a tree's two or more)
            alt(".fan0rf", c["schedule"] + ", one reduce, df-fuse no-iter", c["block"], None,
                sched_opts(*SCHEDULES[c["schedule"]]), passes="--df-fuse=no-iter=true")
        if c["name"] == "u8x32k":
            # the case's plan with the partial's K/V staged through a
            # shared-memory ring of S warp steps (handlers built with
            # -DKV_STAGES=S; the partial declares a workspace of
            # STAGED_WARPS rings of S x 8 KB). Run H: 30 % slower than the
            # register path at S = 2 and 3 in every case, so only u8x32k
            # keeps them (bench/README.md)
            for S in STAGES:
                alt(f".st{S}", c["schedule"] + f", {S}-stage ring", c["block"], c["model_us"],
                    c["opts"], cflags=f"-DKV_STAGES={S}",
                    workspace_bytes=STAGED_WARPS * S * STAGE_BYTES)
        if c["name"] in ("u8x32k", "u64x4k", "u1x128k", "s16", "s32") and \
                os.environ.get("CASES_BULK"):
            # (CASES_BULK=1 only) run AC: the case's plan with K/V by one
            # 256-byte bulk copy per row into a ring of S warp steps per
            # warp (-DKV_STAGES=S -DKV_BULK; mbarriers, no registers or L1
            # held by the bytes in flight); the workspace sets the warps:
            # .bkSwW. 2-4 % slower than the register path at 8 warps, much
            # slower with fewer (bench/README.md, run AC)
            for S, W in BULK:
                alt(f".bk{S}w{W}", c["schedule"] + f", bulk ring {S} x {W} warps", c["block"],
                    c["model_us"], c["opts"], **bulk_build(S, W))
        if c["name"] in ("u8x4k", "u8x32k", "u64x4k", "u1x128k"):
            # the case's plan with the partial's K/V loads asking the L2
            # for whole 256-byte rows (.L2::256B, the default before run
            # J; -DKV_L2_HINT)
            alt(".l2hint", c["schedule"] + ", L2::256B loads", c["block"], c["model_us"],
                c["opts"], cflags="-DKV_L2_HINT")
            # and without a hint (-DKV_L2_NONE, the default of runs J-AB;
            # since run AC the loads ask for whole 128-byte lines)
            alt(".l2none", c["schedule"] + ", loads without an L2 hint", c["block"],
                c["model_us"], c["opts"], cflags="-DKV_L2_NONE")
        if c["name"] in ("u8x32k", "u1x128k", "s16", "s32"):
            # the case's plan with the combine resolving its inputs in a
            # loop per element (-DCOMBINE_LOOP, the combine before run M)
            alt(".loop", c["schedule"] + ", loop combine", c["block"], c["model_us"],
                c["opts"], cflags="-DCOMBINE_LOOP")
            # the combine of runs M-N (one table of input pointers, each
            # thread walking max -> weights -> sum per element;
            # -DCOMBINE_TABLE) against the three-step combine of run O
            alt(".table", c["schedule"] + ", run-M table combine", c["block"], c["model_us"],
                c["opts"], cflags="-DCOMBINE_TABLE")
        if c["name"] in ("u1x128k", "s16", "s64"):
            # reduce trees of at most 8 inputs (run M)
            alt(".fan8", c["schedule"] + ", fan-in 8", c["block"], None,
                c["opts"] + " reduce-fan-in=8")
            # the tree's reduces on SMs that run no other reduce of the
            # task (df-schedule reduce-spread; added in run M, not yet
            # measured)
            alt(".spread", c["schedule"] + ", reduce-spread", c["block"], None,
                c["opts"] + " reduce-spread=true")
        if c["name"] in ("u1x128k", "s16", "s32", "s64", "u64x4k"):
            # the plan's records in the kernel image (df-translate
            # --df-embed-plan: .const when they fit 60 KiB, read through the
            # constant cache, which the receives' acquires do not empty)
            alt(".embed", c["schedule"] + ", embedded plan", c["block"], None, c["opts"],
                translate="--df-embed-plan")
        if c["name"] in ("u1x128k", "u8x4k", "s16", "s32", "s64"):
            # HBM direct-global slots (df-layout-slots hbm-direct-global):
            # the partials and combines write their HBM-sent outputs to the
            # global staging themselves and the receivers read them there,
            # so a transfer is a flag, not a copy (run P)
            alt(".direct", c["schedule"] + ", HBM direct-global", c["block"], None, c["opts"],
                layout="per-cta-shared=true hbm-direct-global=true")
        if c["name"] in ("u1x128k", "s16", "s32", "s64"):
            # df-fuse without ITERs: each task's root REDUCE -> FINALIZE as
            # one instruction (a combine+finalize composite), the partials
            # alone (run N: ITER composites spill in the partial's loop)
            alt(".rf", c["schedule"] + ", df-fuse no-iter", c["block"], None, c["opts"],
                passes="--df-fuse=no-iter=true")
        if c["name"].startswith("s"):
            # the plan with every task's REDUCE (before run N), and with
            # df-fuse joining each one-block task's ITER -> FINALIZE
            # (adjacent: defer-reduces leaves what receives nothing after
            # its ITER). Run N: fused 20-30 % slower (the composite spills
            # 640 bytes inside the partial's loop)
            alt(".noskip", c["schedule"] + ", a reduce per task", c["block"], None,
                c["opts"].replace(" skip-unary-reduce=true", ""))
            alt(".fuse", c["schedule"] + ", df-fuse", c["block"], None, c["opts"],
                passes="--df-fuse")
        if c["name"] in ("s32", "s64"):
            # two CTAs of 128 threads per SM (264 queues; 255 registers x
            # 128 threads fit twice in an SM's register file): one CTA's
            # fixed costs (first loads, merge, reduce) overlap the other's
            # stream. Block by the model at 264 SMs of half the bandwidth.
            # Run N: s64 -2 %, s32 the same; u8x4k +25 %, u1x128k +7 %,
            # s16 +9 % (no longer made). Run Q: four CTAs of 64 threads
            # (528 queues) no faster (s32 87.7 against 83.9 us, s64 295.9
            # against 295.5; not kept)
            block, sched, t = choose_at(2 * SMS, tl, (c["schedule"],))
            alt(".x2", sched + ", 2 CTAs/SM x 128 threads", block, t,
                c["opts"] + f" sm-count={2 * SMS}", threads=128)
            if c["name"] == "s32" and os.environ.get("CASES_SWEEP"):
                # (CASES_SWEEP=1 only) .x2 at other blocks, and with each
                # root REDUCE -> FINALIZE fused (df-fuse no-iter)
                for b in (1536, 2560, 3072):
                    alt(f".x2b{b}", sched + f", 2 CTAs/SM x 128 threads, block {b}", b, None,
                        c["opts"] + f" sm-count={2 * SMS}", threads=128)
                for b in (block, 2560):
                    alt(f".x2rf{b}", sched + f", 2 CTAs/SM, df-fuse no-iter, block {b}", b,
                        None, c["opts"] + f" sm-count={2 * SMS}", threads=128,
                        passes="--df-fuse=no-iter=true")
        if c["name"] == "u1x128k":
            # each head's last reduce and its finalize on SMs that run no
            # partial (df-schedule reduce-sms=N): they wait from the start,
            # so the reduce's set-up is done when the last partial lands.
            # 4: the SMs the 128 partials leave free, two heads each, one
            # 16-input reduce (.rs4) or the fan-in-4 tree's root (.rs4f4);
            # 8: one head each, 15 blocks of 8960 keys on 124 SMs (.rs8)
            base = sched_opts(*SCHEDULES[c["schedule"]])
            alt(".rs4", c["schedule"] + ", one reduce per head on 4 free SMs", c["block"], None,
                base + " reduce-sms=4")
            alt(".rs4f4", c["schedule"] + ", tree roots on 4 free SMs", c["block"], None,
                c["opts"] + " reduce-sms=4")
            alt(".rs8", c["schedule"] + ", one reduce per head on 8 SMs", 8960, None,
                base + " reduce-sms=8")
        if c["name"] in ("s16", "s32", "s64", "u1x128k", "u64x4k", "u8x32k"):
            # the instruction pool (df-schedule pool, docs/pool.md): every CTA
            # claims partials longest first, then reduces, at run time, so a
            # slower SM runs fewer; every transfer an HBM flag of a
            # direct-global slot. At the case's block and at 2048 (more,
            # shorter items balance better and cost more claims and
            # combine inputs)
            for b in sorted({c["block"], 2048}):
                alt(".pool" if b == c["block"] else f".poolb{b}",
                    c["schedule"] + f", instruction pool, block {b}", b, None,
                    c["opts"] + " pool=true")
        if c["name"] in ("s16", "s32", "s64", "u1x128k", "u64x4k", "u8x4k"):
            # the pool over tapered even-split pieces (even-split-taper=P):
            # a first batch of one piece per CTA takes P % of the keys,
            # each later batch P % of the rest, down to 512-key pieces, so
            # every CTA starts long and the short pieces at the end even
            # out SMs that stream at different rates; reduces of up to 8
            # inputs. Run T: 10-20 % slower than the case's plan everywhere
            # (u1x128k 155.9 against 141.2 us, s32 .x2pt80 84.5 against
            # 79.5): each extra piece costs its fixed ~3-5 us
            def taper_alt(suffix, p, sms, **extra):
                alt(suffix, f"even, taper {p} %, pool, {sms // SMS} CTA/SM", EVEN_GRAN, None,
                    even_opts(sms, False) + f" even-split-taper={p} pool=true"
                    " reduce-fan-in=8 skip-unary-reduce=true"
                    + ("" if sms == SMS else f" sm-count={sms}"), **extra)
            for p in ((80, 70) if c["name"] == "u1x128k" else (80,)):
                taper_alt(f".pt{p}", p, SMS)
            if c["name"] in ("s32", "s64"):
                taper_alt(".x2pt80", 80, 2 * SMS, threads=128)
        if c["name"] in ("u1x128k", "s16") and os.environ.get("CASES_SWEEP"):
            # (CASES_SWEEP=1 only) the pool at two CTAs of 128 threads per
            # SM and about two pieces per CTA: one CTA's fixed costs per
            # piece (first loads, merge, send, claim) would overlap the
            # other's stream while the claims even out the SMs; reduces of
            # up to 8 inputs. Run T call 4: u1x128k 151.7 (b2048) and
            # 166.0-166.4 (b1536) against 143.6-143.7 for .pool, s16 127.4-
            # 128.6 against 116.2-116.3: the fixed costs do not hide
            for b in ((2048, 1536) if c["name"] == "u1x128k" else (2048,)):
                alt(f".x2poolb{b}", c["schedule"] + f", 2 CTAs/SM, pool, fan-in 8, block {b}",
                    b, None, c["opts"].replace(f"reduce-fan-in={FAN_IN}", "reduce-fan-in=8")
                    + f" sm-count={2 * SMS} pool=true", threads=128)
        if c["name"] in ("s32", "s64"):
            # the pool with two CTAs of 128 threads per SM (as .x2)
            block, sched, _ = choose_at(2 * SMS, tl, (c["schedule"],))
            alt(".x2pool", sched + ", 2 CTAs/SM x 128 threads, instruction pool", block, None,
                c["opts"] + f" sm-count={2 * SMS} pool=true", threads=128)
            if c["name"] == "s32":
                # the pool with reduces of up to 8 inputs (one level
                # here: a shorter chain after the last partial), alone and
                # with each REDUCE -> FINALIZE fused (df-fuse no-iter).
                # Run S: 76.6 and 76.4-77.1 us, the fastest s32 plans
                alt(".x2poolf8", sched + ", 2 CTAs/SM, instruction pool, fan-in 8", block, None,
                    c["opts"] + f" sm-count={2 * SMS} pool=true reduce-fan-in=8", threads=128)
                alt(".x2poolf8rf", sched + ", 2 CTAs/SM, pool, fan-in 8, df-fuse no-iter",
                    block, None, c["opts"] + f" sm-count={2 * SMS} pool=true reduce-fan-in=8",
                    threads=128, passes="--df-fuse=no-iter=true")
            if c["name"] == "s32" and os.environ.get("CASES_SWEEP"):
                # (CASES_SWEEP=1 only) the pool's reduce trees: fan-in 8
                # (one level here) and one reduce per task, at 1 and 2
                # CTAs per SM
                for f in (8, 0):
                    alt(f".poolf{f}", c["schedule"] + f", instruction pool, fan-in {f}",
                        c["block"], None, c["opts"] + f" pool=true reduce-fan-in={f}")
                    if f != 8:
                        alt(f".x2poolf{f}", sched + f", 2 CTAs/SM, instruction pool, fan-in {f}",
                            block, None,
                            c["opts"] + f" sm-count={2 * SMS} pool=true reduce-fan-in={f}",
                            threads=128)
                    if f != 8:
                        alt(f".x2poolf{f}b3072", sched + f", 2 CTAs/SM, pool, fan-in {f}, "
                            "block 3072", 3072, None,
                            c["opts"] + f" sm-count={2 * SMS} pool=true reduce-fan-in={f}",
                            threads=128)
                # and the best of those at other blocks, and with each
                # REDUCE -> FINALIZE fused (df-fuse no-iter)
                for b in (1536, 2560, 3072):
                    alt(f".x2poolf8b{b}", sched + f", 2 CTAs/SM, pool, fan-in 8, block {b}", b,
                        None, c["opts"] + f" sm-count={2 * SMS} pool=true reduce-fan-in=8",
                        threads=128)
                    alt(f".x2poolf8rfb{b}", sched + f", 2 CTAs/SM, pool, fan-in 8, df-fuse "
                        f"no-iter, block {b}", b, None,
                        c["opts"] + f" sm-count={2 * SMS} pool=true reduce-fan-in=8",
                        threads=128, passes="--df-fuse=no-iter=true")
        if c["name"] in ("s32", "s16"):
            # the case's schedule at other block sizes than the model's
            # choice (its per-partial cost is a guess)
            for b in sorted({2048, 3072, 4096, model_block}):
                if b != c["block"]:
                    alt(f".b{b}", c["schedule"], b, makespan(tl, b, *SCHEDULES[c["schedule"]])[0],
                        c["opts"])
        # the case's partials with the handler join (run AF;
        # examples/attention_gqa/gqa_join.h): df schedules the ITERs only
        # (partial-only), the partial that completes a task combines it and
        # writes its O rows; bench.py binds the SeqLens and Join tensors
        # (join = a task's slots: the blocks of LMAX keys)
        # (on clusters of 2 like every plan here, though it sends nothing:
        # without clusters u8x32k, u64x4k and u1x128k were 0.8-4.6 us
        # slower and the skewed cases 0.5-1.8 us faster, run AF call 7)
        alt(".join", c["schedule"] + ", partials + handler join", c["block"], None,
            c["opts"].replace(" skip-unary-reduce=true", "") + " partial-only=true",
            cflags="-DGQA_JOIN", join=-(-c["lmax"] // c["block"]))
        if c["name"] in ("u1x128k", "u8x4k", "u8x32k") and os.environ.get("CASES_PROBES"):
            # the case's partials alone (df-schedule partial-only: no
            # reduces, no output), to time them inside df's kernel against
            # bench/smrate's harness of the same partial (run Z: 6-7 %
            # slower in df's kernel, cause open) and against the .join
            # plan's tail (runs AC-AE timed that tail with the
            # last-arriver probe the join replaced, run AF). Run AE added
            # the uniform cases of 2 blocks per task.
            ponly = c["opts"].replace(" skip-unary-reduce=true", "") + " partial-only=true"
            alt(".partials", c["schedule"] + ", partials only (probe)", c["block"], None, ponly)
        if c["name"] == "u1x128k" and os.environ.get("CASES_PROBES"):
            # timing probe, wrong results (CASES_PROBES=1 only): the
            # partial spins 125 us instead of streaming (run M)
            alt(".spin", c["schedule"] + ", spinning partial (probe)", c["block"], None,
                c["opts"], cflags="-DPARTIAL_SPIN_NS=125000")
            # run AD: the same keys cut evenly over all 132 SMs (4 of them
            # take two pieces) instead of 128 blocks of 8192: what the 4
            # idle SMs would add to the stream
            alt(".evenpartials", "even, partials only (probe)", EVEN_GRAN, None,
                even_opts(SMS, False) + " partial-only=true")
            # run AC: the partials alone with the bulk ring
            bulk = bulk_build(3, 8)
            alt(".bkpartials", c["schedule"] + ", bulk 3x8, partials only (probe)", c["block"],
                None, ponly, **bulk)
        if c["name"] == "u1x128k":
            # fewer, longer pieces (66 SMs, ~8 inputs per reduce) and twice as
            # many (two waves, ~33 inputs per reduce): how much the
            # reduce's input count costs
            alt(".even66", "even 66", EVEN_GRAN, even_model(tl, SMS // 2, False),
                even_opts(SMS // 2, False))
            alt(".even264", "even 264 + defer", EVEN_GRAN, even_model(tl, 2 * SMS, True),
                even_opts(2 * SMS, True))
            # even-split with reduce trees (df-schedule reduce-fan-in; not
            # modelled)
            alt(".even.fan4", "even + fan-in 4", EVEN_GRAN, None,
                even_opts(SMS, False) + f" reduce-fan-in={FAN_IN}")
            alt(".even264.fan4", "even 264 + defer + fan-in 4", EVEN_GRAN, None,
                even_opts(2 * SMS, True) + f" reduce-fan-in={FAN_IN}")
    rt_ab = os.environ.get("CASES_RT_AB")
    if rt_ab:
        # (CASES_RT_AB=FLAGS only) a twin NAME.rt of every plan whose kernel
        # links the device runtime built with FLAGS added
        # (scripts/gpu/make_runtime_bc.sh): an A/B of a runtime change on the
        # same plans in one call
        add_twins(out, [(".rt", f", runtime {rt_ab}", lambda p: {"rt_flags": rt_ab})])
    ab = os.environ.get("CASES_AB")
    if ab:
        # (CASES_AB=FLAGS only) a twin NAME.ab of every case's plan and of
        # every alternative, its handlers built with FLAGS added: an A/B of
        # a handler change on the same plans in one call (make the pairs
        # wanted with CARRY_PLANS); FLAGS;FLAGS2;... makes .ab, .ab2, ...
        def with_flags(f):
            return lambda p: {"cflags": " ".join(x for x in (p.get("cflags", ""), f) if x)}
        flags = [f.strip() for f in ab.split(";") if f.strip()]
        add_twins(out, [(".ab" + (str(i + 1) if i else ""), f", {f}", with_flags(f))
                        for i, f in enumerate(flags)])
    return out


def add_twins(out, twins):
    """For each (suffix, label, extra) of twins, a twin NAME+suffix of every
    case's plan and of every alternative there was before: its schedule +
    label, and the fields extra(plan) returns."""
    for c in out:
        plan = {k: c[k] for k in ("name", "schedule", "block", "model_us", "opts")}
        base = [plan] + c["alts"]
        for suffix, label, extra in twins:
            c["alts"] += [{**p, "name": p["name"] + suffix, "schedule": p["schedule"] + label,
                           **extra(p)} for p in base]


FAN_IN = 4        # most inputs per reduce (df-schedule reduce-fan-in)
# Cases whose block is set by measurement, not by the model: s32 at 3072
# ran 4-6 % faster than the model's 4096 in every call that had both
# (run J 86.6/90.5, run K 86.3/91.8, run M 85.7/90.8 and 89.2/94.1 us); the
# model's block stays as an alternative (.b4096).
MEASURED_BLOCK = {"s32": 3072}
STAGES = (2, 3)   # ring depths of the staged partial's alternatives (.st2, .st3)
STAGED_WARPS = 8  # bench.py's 256 threads
STAGE_BYTES = 8192  # one warp step of K and V (32 lanes x 16 chunks x 16 B)
BULK = ((2, 8), (3, 8), (4, 6), (6, 4))  # (ring depth, warps) of the bulk partial's alternatives
BULK_STAGE_BYTES = 8448  # one warp step of K and V, rows placed without bank conflicts

EVEN_GRAN = 16    # keys: the partial handler's warp step
EVEN_COST = 256   # keys per task: ~ITER_US + reduce + finalize of an SM's stream


def bulk_build(stages, warps):
    """The handler flags and workspace of the bulk-ring partial with
    `warps` rings of `stages` steps (its RING_BYTES: the stages and 128
    bytes of mbarriers)."""
    return dict(cflags=f"-DKV_STAGES={stages} -DKV_BULK",
                workspace_bytes=warps * (stages * BULK_STAGE_BYTES + 128))


def even_model(task_lens, chunks, defer):
    return makespan(task_lens, EVEN_GRAN, False, defer, (chunks, EVEN_GRAN, EVEN_COST))[0]


def sched_opts(balance, defer):
    """df-schedule options (beyond the common ones) of an all_at_once schedule."""
    return f"balance-iters={str(balance).lower()} defer-reduces={str(defer).lower()}"


def even_opts(chunks, defer):
    return (f"even-split=true even-split-granularity={EVEN_GRAN} even-split-chunks={chunks} "
            f"even-split-task-cost={EVEN_COST} defer-reduces={str(defer).lower()}")


if __name__ == "__main__":
    cs = cases()
    with open(sys.argv[1], "w") as f:
        json.dump(cs, f, indent=1)
    for c in cs:
        print(f"{c['name']}: B={len(c['lens'])} tokens={c['tokens']} lmax={c['lmax']} "
              f"block={c['block']} {c['schedule']} model={c['model_us']:.1f}us kv={c['kv_bytes']/1e6:.1f}MB")
        for a in c["alts"]:
            model = "-" if a["model_us"] is None else f"{a['model_us']:.1f}us"
            print(f"  {a['name']}: {a['schedule']} block={a['block']} model={model}")
