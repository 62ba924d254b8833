"""Where one launch of a fused-MoE plan spends its time, per CTA, from the
device runtime's trace (df/rt_trace.h; a kernel linked with the traced
runtime, bench/moe/make_moe_trace_carry.sh), the plan's dump
(`df-translate --df-plan-dump`) and the task table (tasks.bin). Pure
Python, no torch: moe_timeline.py reads the trace on the GPU machine and
calls report().

Each task is three instructions on every CTA of its cluster: gate_up
(handler moe_gate_up; its shard of the expert's gate and up rows, sent to
the peers), the reshared gather (handler S: no handler, only the cluster
receives; it passes TOP, CL_WAIT, CL_SYNC, POST_SYNC, END) and down
(handler moe_down). Per CTA: its tasks, the gate_up and down handler times
(H_BEGIN -> H_END), the gather (TOP -> END: mostly waiting for the
slowest peer's gate_up) and its last END. Then the makespan, the
latest-ending CTAs, per n-tile class the handler times and the weight
read rate per SM they imply, and the SM time idle after each CTA's end."""
import array
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "attention"))
import timeline_report as T  # noqa: E402  (the dump parser, rows(), the trace layout)

H, I = 2048, 768  # hidden, intermediate (examples/moe)
TILE = 64  # the handlers' MOE_TT: rows a task reads at most
GATE_UP_BYTES = 2 * I * H * 2  # an expert's gate and up rows, bf16; a CTA reads 1/cluster
DOWN_BYTES = H * I * 2
WORDS = T.CTAS * T.INSTRS * T.POINTS * 2  # df_rt_trace_buf's u64 words
NT_MODES = ("pow2", "nt6", "fine", "pow2+3", "nt6+3", "fine+3")


def parse_dump(text):
    """T.parse_dump's plan plus sm_count and cluster_size (the `plan:`
    line) and task_coords (what the handlers read as their task)."""
    plan = T.parse_dump(text)
    plan["task_coords"] = []
    for line in text.splitlines():
        if line.startswith("plan:"):
            fields = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
            plan["sm_count"] = int(fields["sm_count"])
            plan["cluster_size"] = int(fields["cluster_size"])
        elif line.startswith("task_coords:"):
            plan["task_coords"] = [int(x) for x in line.split()[1:]]
    if "cluster_size" not in plan:
        raise ValueError("plan dump: no `plan:` line with sm_count and cluster_size")
    return plan


def read_tasks(data):
    """tasks.bin (int32 [ntasks][4]: expert, first row, count, 0) as
    [(expert, first, count)]."""
    a = array.array("i", data)
    if len(a) % 4:
        raise ValueError(f"tasks table: {len(data)} bytes is not a whole number of 16-byte rows")
    return [(a[i], a[i + 1], a[i + 2]) for i in range(0, len(a), 4)]


def ntiles(count, mode="pow2"):
    """The handlers' ntiles(): rows (at most TILE) in 8-row tiles, rounded
    up to 1, 2, 4 or 8; mode "nt6" (-DMOE_NT6) makes 5-6 tiles 6, "fine"
    (-DMOE_NT_FINE) keeps 5 to 8 as they are; a "+3" mode (-DMOE_NT3)
    keeps 3."""
    if mode not in NT_MODES:
        raise ValueError(f"n-tile mode {mode!r}, not one of {NT_MODES}")
    nt = (min(count, TILE) + 7) // 8
    mode, _, three = mode.partition("+")
    if three and nt == 3:
        return 3
    if mode == "fine" and nt >= 5:
        return nt
    if mode == "nt6" and nt in (5, 6):
        return 6
    return 1 if nt <= 1 else 2 if nt <= 2 else 4 if nt <= 4 else 8


def nt_mode(variant, cflags=None):
    """The n-tile rule of a variant: from its MOE_CFLAGS when known
    (make_moe_trace_carry.sh writes VARIANT/cflags.txt), else from the
    name (bench/moe/README.md: `n6`, `s6` were built with -DMOE_NT6)."""
    if cflags is not None:
        mode = "fine" if "-DMOE_NT_FINE" in cflags else "nt6" if "-DMOE_NT6" in cflags else "pow2"
        return mode + "+3" if "-DMOE_NT3" in cflags else mode
    return "nt6" if "n6" in variant or "s6" in variant else "pow2"


def _kind(ins, handler):
    if ins["handler_id"] == "S":
        return "gather"
    for k in ("gate_up", "down"):
        if handler.endswith(k):
            return k
    raise ValueError(f"instruction of handler {handler!r}: not a fused-MoE plan?")


def cta_tasks(plan, trace):
    """{cta: [task dict]} in queue order; a task dict holds its task index
    and the stamps (ns) of its gate_up, gather and down instructions."""
    out = {}
    for r in T.rows(plan, trace):
        offset, length = plan["queues"][r["cta"]]
        idx = offset + r["pc"] if r["pc"] < length else T._pool_instr(trace, r["cta"], r["pc"])
        ins = plan["instrs"][idx]
        a = plan["args"][ins["arg_offset"] // T.ARGS_RECORD_BYTES]
        task = plan["task_coords"][a["task_coord_offset"]] if plan["task_coords"] else ins["task_id"]
        kind = _kind(ins, r["handler"])
        ts = out.setdefault(r["cta"], [])
        if not ts or ts[-1]["task"] != task or kind in ts[-1]:
            ts.append({"task": task})
        ts[-1][kind] = r["st"]
    return out


def _handler_ns(st):
    return st[T.H_END] - st[T.H_BEGIN] if st else None


def _us(ns):
    return "-" if ns is None else f"{ns / 1000.0:.1f}"


def _join(xs):
    return ", ".join(xs)


def report(name, plan, trace, tasks, mode="pow2"):
    """The report of one launch as markdown lines. tasks: read_tasks();
    mode: the n-tile rule (ntiles())."""
    cs = plan["cluster_size"]
    by_cta = cta_tasks(plan, trace)
    stamps = [st for ts in by_cta.values() for t in ts for k, st in t.items() if k != "task"]
    t0 = min(st[T.TOP] for st in stamps)
    t1 = max(st[T.END] for st in stamps)
    span = t1 - t0
    ncta = min(len(plan["queues"]), T.CTAS)
    ends = {c: max(st[T.END] for t in ts for k, st in t.items() if k != "task") - t0
            for c, ts in by_cta.items()}

    def label(t):
        e, _, count = tasks[t["task"]]
        return f"{e}/{count}/{ntiles(count, mode)}"

    ntask = len({t["task"] for ts in by_cta.values() for t in ts})
    lines = [f"## {name}: {ntask} tasks on {len(by_cta)} of {ncta} CTAs (clusters of {cs}), "
             f"makespan {_us(span)} us (first TOP to last END)", "",
             "tasks as expert/rows/n-tiles (n-tile rule: " + mode + "); gate_up, down: handler "
             "H_BEGIN->H_END; gather: the reshared instruction's TOP->END (its cluster "
             "receives); end: the CTA's last END after the first TOP; us", "",
             "| cta | cluster | tasks | gate_up | gather | down | end |", "|---|---|---|---|---|---|---|"]
    for c in sorted(by_cta):
        ts = by_cta[c]
        gather = [t["gather"][T.END] - t["gather"][T.TOP] if "gather" in t else None for t in ts]
        lines.append(f"| {c} | {c // cs} | {_join(label(t) for t in ts)} "
                     f"| {_join(_us(_handler_ns(t.get('gate_up'))) for t in ts)} "
                     f"| {_join(_us(g) for g in gather)} "
                     f"| {_join(_us(_handler_ns(t.get('down'))) for t in ts)} | {_us(ends[c])} |")
    lines += ["", f"makespan {_us(span)} us; latest-ending CTAs (end us: cluster, tasks, "
                  "gate_up / gather / down us):"]
    for c in sorted(ends, key=lambda c: -ends[c])[:10]:
        ts = by_cta[c]
        parts = [f"{label(t)} {_us(_handler_ns(t.get('gate_up')))} / "
                 f"{_us(t['gather'][T.END] - t['gather'][T.TOP] if 'gather' in t else None)} / "
                 f"{_us(_handler_ns(t.get('down')))}" for t in ts]
        lines.append(f"- cta {c} ends {_us(ends[c])}: cluster {c // cs}, {'; '.join(parts)}")
    lines += ["", "| n-tiles | tasks | CTA runs | gate_up us (med/max) | GB/s per SM (at med/max) "
                  "| down us (med/max) | GB/s per SM (at med/max) |", "|---|---|---|---|---|---|---|"]
    classes = {}
    for ts in by_cta.values():
        for t in ts:
            classes.setdefault(ntiles(tasks[t["task"]][2], mode), []).append(t)
    for nt in sorted(classes):
        ts = classes[nt]
        cells = []
        for k, nbytes in (("gate_up", GATE_UP_BYTES), ("down", DOWN_BYTES)):
            ns = [_handler_ns(t[k]) for t in ts if k in t]
            if not ns:
                cells += ["-", "-"]
                continue
            med, most = statistics.median(ns), max(ns)
            rate = [f"{nbytes / cs / x:.1f}" if x > 0 else "-" for x in (med, most)]
            cells += [f"{_us(med)}/{_us(most)}", "/".join(rate)]
        lines.append(f"| {nt} | {len({t['task'] for t in ts})} | {len(ts)} | " + " | ".join(cells) + " |")
    idle = sum(span - ends.get(c, 0) for c in range(ncta))
    lines += ["", f"idle SM time after each CTA's last END: {100.0 * idle / (ncta * span):.1f} % of "
                  f"{ncta} CTAs x makespan (CTAs with no instruction: {ncta - len(by_cta)})"]
    return lines
