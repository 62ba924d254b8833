"""Where one launch of an attention plan spends its time, from the device
runtime's trace (df/rt_trace.h; a kernel linked with the traced runtime,
scripts/gpu/make_runtime_bc.sh -DDF_RT_TRACE) and the plan's dump
(`df-translate --df-plan-dump`). Pure Python, no torch: timeline.py reads
the trace on the GPU machine and calls report().

Per handler: instruction count, handler time, keys and per-SM read rate of
the ranged ones, the wait before the handler (receives), the sends after
it. Then the spread of the iter instructions' end times, the SM time the
handlers use, how long receives take once their data was sent, and the
critical path: from the instruction that ends last,
back through whichever came later of its CTA's previous instruction and
the producers of its inputs."""
import re
import statistics

# df/rt_trace.h
CTAS, INSTRS, POINTS = 132, 64, 10
TOP, CL_WAIT, CL_SYNC, HBM_FLAG, HBM_DONE, H_BEGIN, H_END, POST_SYNC, SEND_MID, END = range(POINTS)
# the diagnostic build's df_rt_diag_buf (df/rt_trace.h)
DIAG_POINTS = 8
DIAG_NAMES = ("KINDS", "GUARD", "STAGE", "RESOLVE", "PREPARE", "SCAN", "POLL", "COPY")
OPCODE_STOP = 0
OPCODE_POOL = 5  # DF_ABI_OP_POOL
ARGS_RECORD_BYTES = 64
KV_BYTES_PER_KEY = 2 * 128 * 2  # K and V rows of one kv head, fp16, D = 128

_LINE = re.compile(r"^(instr|queue|args|handler) (\d+): (.*)$")


def parse_dump(text):
    """The parts of a plan dump the report needs: handlers {id: name},
    queues [(offset, length)], instrs, args [dict] and input_slots [slot]."""
    plan = {"handlers": {}, "queues": [], "instrs": [], "args": [], "input_slots": []}
    for line in text.splitlines():
        if line.startswith("input_slots:"):
            plan["input_slots"] = [int(x) for x in line.split()[1:]]
            continue
        m = _LINE.match(line.strip())
        if not m:
            continue
        kind, idx, rest = m.group(1), int(m.group(2)), m.group(3)
        fields = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
        if kind == "handler":
            plan["handlers"][idx] = fields["name"]
        elif kind == "queue":
            plan["queues"].append((int(fields["offset"]), int(fields["length"])))
        elif kind == "instr":
            plan["instrs"].append({k: (v if v == "S" else int(v, 0)) for k, v in fields.items()})
        elif kind == "args":
            plan["args"].append({k: (v if v == "S" else int(v, 0)) for k, v in fields.items()})
    if not plan["queues"] or not plan["instrs"]:
        raise ValueError("plan dump: no queue or instr lines (not df-translate --df-plan-dump output?)")
    return plan


def stamp(trace, cta, pc, point):
    """%globaltimer (ns) of a point; 0 when the instruction did not pass it."""
    return trace[((cta * INSTRS + pc) * POINTS + point) * 2]


def _pool_instr(trace, cta, pc):
    """A pool instruction's packed index (df/rt_trace.h: its CL_WAIT
    %clock64 stamp holds index + 1), or None for an unused slot."""
    if stamp(trace, cta, pc, TOP) == 0:
        return None
    return trace[((cta * INSTRS + pc) * POINTS + CL_WAIT) * 2 + 1] - 1


def rows(plan, trace):
    """One dict per traced, non-STOP instruction: cta, pc, handler, keys,
    the stamps (ns), its args and its output slot. A pooled plan's
    instructions (docs/pool.md) come from the slots after each queue."""
    out = []
    for cta, (offset, length) in enumerate(plan["queues"][:CTAS]):
        for pc in range(INSTRS):
            if pc < length:
                ins = plan["instrs"][offset + pc]
            else:
                idx = _pool_instr(trace, cta, pc)
                if idx is None:
                    break
                ins = plan["instrs"][idx]
            if ins["opcode"] in (OPCODE_STOP, OPCODE_POOL):
                continue
            st = [stamp(trace, cta, pc, p) for p in range(POINTS)]
            if st[TOP] == 0 or st[END] == 0:
                raise ValueError(f"trace: cta {cta} pc {pc}: no TOP/END stamp (kernel not traced, "
                                 f"or trace from another plan?)")
            a = plan["args"][ins["arg_offset"] // ARGS_RECORD_BYTES]
            keys = a["range_end"] - a["range_begin"] if isinstance(a["range_end"], int) else 0
            inputs = []
            if isinstance(a["input_slot_offset"], int):
                inputs = plan["input_slots"][a["input_slot_offset"]:a["input_slot_offset"]
                                             + a["input_slot_count"]]
            out.append({"cta": cta, "pc": pc, "handler": plan["handlers"].get(ins["handler_id"], "?"),
                        "keys": keys, "st": st, "inputs": inputs, "output": a["output_slot"]})
    if not out:
        raise ValueError("trace: no instruction traced")
    return out


def gap_lines(rs):
    """Per CTA, the time between one instruction's END and the next one's
    TOP (a pool's claims, the record loads) and from its last END to the
    kernel's last END (idle at the end)."""
    by_cta = {}
    for r in rs:
        by_cta.setdefault(r["cta"], []).append(r)
    last = max(r["st"][END] for r in rs)
    gaps, idle = [], []
    for xs in by_cta.values():
        xs.sort(key=lambda r: r["st"][TOP])
        gaps.append(sum(b["st"][TOP] - a["st"][END] for a, b in zip(xs, xs[1:])))
        idle.append(last - xs[-1]["st"][END])
    return [f"per CTA: between instructions {_spread([_us(g) for g in gaps])} us in all, "
            f"idle after its last {_spread([_us(i) for i in idle])} us (min/med/max)"]


def _us(ns):
    return ns / 1000.0


def _spread(xs, fmt="{:.1f}"):
    xs = sorted(xs)
    return "/".join(fmt.format(x) for x in (xs[0], statistics.median(xs), xs[-1]))


def critical_path(rs):
    """Instructions from the last-ending one back to a start with nothing
    before it: at each step the later of the CTA's previous instruction and
    the latest producer (by output slot) that ended before this one began."""
    by_cta = {}
    producers = {}
    for r in rs:
        by_cta.setdefault(r["cta"], []).append(r)
        producers.setdefault(r["output"], []).append(r)
    path = [max(rs, key=lambda r: r["st"][END])]
    while True:
        r = path[-1]
        cands = [p for p in by_cta[r["cta"]] if p["pc"] < r["pc"]][-1:]
        for s in r["inputs"]:
            cands += [p for p in producers.get(s, []) if p is not r and p["st"][END] <= r["st"][H_BEGIN]]
        if not cands:
            return path
        path.append(max(cands, key=lambda p: p["st"][END]))


def balance_lines(iters):
    """The ranged handlers' work against the SMs' rates: each CTA's keys and
    its handler time over them give its rate; had every CTA worked at its
    rate until all keys were done, they would all end at keys / sum of
    rates (the balanced time). Compared with the busiest CTA's handler
    time, it is what an uneven split of equal work costs."""
    keys, busy = {}, {}
    for r in iters:
        keys[r["cta"]] = keys.get(r["cta"], 0) + r["keys"]
        busy[r["cta"]] = busy.get(r["cta"], 0) + r["st"][H_END] - r["st"][H_BEGIN]
    rates = [keys[c] / busy[c] for c in keys if busy[c] > 0]
    if not rates:
        return []
    balanced = sum(keys.values()) / sum(rates)
    most = max(busy.values())
    return [f"ranged handler time per CTA: busiest {_us(most):.1f} us; balanced at the measured "
            f"per-CTA rates {_us(balanced):.1f} us ({100.0 * (most / balanced - 1):.1f} % over)"]


def receive_lines(rs):
    """Instructions that receive from other CTAs: how long after their
    last remote input was sent (the producer's END) and after their own
    TOP the receives were done (CL_SYNC / HBM_DONE), and the time from
    TOP to the first receive point (the work before the waits)."""
    producers = {}
    for r in rs:
        producers.setdefault(r["output"], []).append(r)
    after_ready, after_top, before_wait = [], [], []
    for r in rs:
        st = r["st"]
        done = max(st[CL_SYNC], st[HBM_DONE])
        if not done:
            continue
        ends = [p["st"][END] for s in r["inputs"] for p in producers.get(s, [])
                if p["cta"] != r["cta"] and p["st"][END] <= st[H_BEGIN]]
        if not ends:
            continue
        after_ready.append(_us(done - max(max(ends), st[TOP])))
        after_top.append(_us(done - st[TOP]))
        # the leader stamps a poll only when it polls a flag itself
        waits = [x for x in (st[CL_WAIT], st[HBM_FLAG]) if x]
        if waits:
            before_wait.append(_us(min(waits) - st[TOP]))
    if not after_ready:
        return []
    return [f"receiving instructions: {len(after_ready)}; receives done after the later of the last "
            f"input's send and TOP (min/med/max) {_spread(after_ready)} us; after TOP "
            f"{_spread(after_top)} us; TOP to the first satisfied wait or poll "
            f"{_spread(before_wait) if before_wait else '-'} us"]


def after_lines(rs, least_ns=1000):
    """Instructions whose work after the handler (H_END -> END) took at
    least least_ns: per handler, the post-handler block barrier (H_END ->
    POST_SYNC), the sends' copies and barrier (POST_SYNC -> SEND_MID) and
    the releases (SEND_MID -> END), us min/median/max. Sends stamp
    SEND_MID; without a stamp after POST_SYNC, POST_SYNC -> END counts as
    releases."""
    by = {}
    for r in rs:
        st = r["st"]
        if st[END] - st[H_END] < least_ns:
            continue
        mid = st[SEND_MID] if st[SEND_MID] >= st[POST_SYNC] else st[POST_SYNC]
        by.setdefault(r["handler"], []).append(
            (st[POST_SYNC] - st[H_END], mid - st[POST_SYNC], st[END] - mid))
    out = []
    for h, xs in sorted(by.items()):
        out.append(f"after the handler >= {_us(least_ns):.1f} us: {h} x{len(xs)}: barrier "
                   f"{_spread([_us(x[0]) for x in xs])}, copies to the send's barrier "
                   f"{_spread([_us(x[1]) for x in xs])}, releases {_spread([_us(x[2]) for x in xs])} us")
    return out


def report(name, plan, trace, ctas_used=None):
    """The report of one launch as text lines."""
    rs = rows(plan, trace)
    t0 = min(r["st"][TOP] for r in rs)
    t1 = max(r["st"][END] for r in rs)
    span = t1 - t0
    active = sorted({r["cta"] for r in rs})
    lines = [f"## {name}: {len(rs)} instructions on {len(active)} CTAs, "
             f"first TOP to last END {_us(span):.1f} us"]
    lines.append("| handler | n | handler us (min/med/max) | keys | GB/s per SM (min/med/max) "
                  "| wait before us (min/med/max) | after us (min/med/max) |")
    lines.append("|---|---|---|---|---|---|---|")
    for h in sorted({r["handler"] for r in rs}):
        hs = [r for r in rs if r["handler"] == h]
        dur = [_us(r["st"][H_END] - r["st"][H_BEGIN]) for r in hs]
        keys = sorted({r["keys"] for r in hs})
        rate = "-"
        if keys != [0]:
            rate = _spread([r["keys"] * KV_BYTES_PER_KEY / (r["st"][H_END] - r["st"][H_BEGIN])
                            for r in hs if r["keys"] and r["st"][H_END] > r["st"][H_BEGIN]])
        ks = f"{keys[0]}" if len(keys) == 1 else f"{keys[0]}..{keys[-1]}"
        lines.append(f"| {h} | {len(hs)} | {_spread(dur)} | {ks} | {rate} "
                     f"| {_spread([_us(r['st'][H_BEGIN] - r['st'][TOP]) for r in hs])} "
                     f"| {_spread([_us(r['st'][END] - r['st'][H_END]) for r in hs])} |")
    iters = [r for r in rs if r["keys"]]
    if iters:
        ends = sorted(_us(r["st"][END] - t0) for r in iters)
        q = [ends[int(f * (len(ends) - 1))] for f in (0.0, 0.1, 0.5, 0.9, 1.0)]
        lines.append(f"ranged instructions end at (us after the first TOP; min/p10/median/p90/max): "
                     + "/".join(f"{x:.1f}" for x in q) + f"; the last one ends {_us(span) - q[-1]:.1f} us "
                     f"before the kernel's last END")
        lines += balance_lines(iters)
    busy = sum(r["st"][H_END] - r["st"][H_BEGIN] for r in rs)
    n = ctas_used or CTAS
    lines.append(f"handler time / ({n} SMs x span): {100.0 * busy / (n * span):.1f} %; "
                 f"CTAs with no instruction: {n - len(active)}")
    lines += gap_lines(rs)
    lines += receive_lines(rs)
    lines += after_lines(rs)
    lines.append("critical path (latest first; us after the first TOP: top, handler begin, handler end, end):")
    for r in critical_path(rs):
        s = r["st"]
        lines.append(f"  cta {r['cta']:3d} pc {r['pc']:2d} {r['handler']:<14s} keys {r['keys']:6d}  "
                     f"{_us(s[TOP] - t0):7.1f} {_us(s[H_BEGIN] - t0):7.1f} {_us(s[H_END] - t0):7.1f} "
                     f"{_us(s[END] - t0):7.1f}")
    return lines


def diag_report(name, plan, trace, diag):
    """Lines: per receiving handler, the time (us; min/median/max over its
    instructions) from TOP through every trace and diagnostic point it
    passes, in time order, to H_BEGIN: where the work before its handler
    goes."""
    named = {("T", p): n for p, n in enumerate(
        ("TOP", "CL_WAIT", "CL_SYNC", "HBM_FLAG", "HBM_DONE", "H_BEGIN"))}
    named.update({("D", p): n for p, n in enumerate(DIAG_NAMES)})
    steps = {}
    for r in rows(plan, trace):
        base = r["cta"] * INSTRS + r["pc"]
        marks = [(r["st"][p], ("T", p)) for p in range(H_BEGIN + 1) if r["st"][p]]
        marks += [(diag[base * DIAG_POINTS + p], ("D", p)) for p in range(DIAG_POINTS)
                  if diag[base * DIAG_POINTS + p]]
        marks.sort()
        if len(marks) < 3 or r["handler"] == "gqa_partial":
            continue
        key = (r["handler"], tuple(m[1] for m in marks))
        steps.setdefault(key, []).append([b[0] - a[0] for a, b in zip(marks, marks[1:])])
    out = [f"### {name}: steps before the handler (diagnostic build; us min/median/max)", ""]
    for (handler, seq), runs in sorted(steps.items(), key=lambda kv: (kv[0][0], -len(kv[1]))):
        out.append(f"- {handler} x{len(runs)}: " + ", ".join(
            f"{named[a]}->{named[b]} {_spread([run[i] / 1e3 for run in runs], '{:.2f}')}"
            for i, (a, b) in enumerate(zip(seq, seq[1:]))))
    return out
