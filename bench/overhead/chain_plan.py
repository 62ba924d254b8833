#!/usr/bin/env python3
"""Hand-built chain plan for bench/overhead (plan IR, docs/plan-ir.md).

usage: chain_plan.py BASE.mlir OUT.mlir --length L --kind cluster|hbm
                     [--sms A,B]

BASE is overhead.mlir scheduled by df-schedule for one task of one block
(its df.plan supplies sm_count, cluster_size, block_size and the task
length). Its plan ops are replaced by a chain: I0 = ITER on SM A, then
I1..IL = one-input REDUCEs (variant passthrough) on B, A, B, ..., each
consuming the previous instruction's slot, so every step is one edge
between two CTAs; FINALIZE on the SM of IL; one EXIT per SM. Edges are
cluster_send/cluster_recv pairs (DSMEM; A and B in one cluster) or
hbm_send/hbm_recv pairs (global staging + flag; --kind hbm), epoch k on
edge k. Defaults: cluster A,B = 0,1; hbm A,B = 0,cluster_size (the first
SM of the next cluster)."""
import argparse
import re
import sys


def arr(xs):
    return "array<i64" + (": " + ", ".join(str(x) for x in xs) if xs else "") + ">"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base")
    ap.add_argument("out")
    ap.add_argument("--length", type=int, required=True)
    ap.add_argument("--kind", choices=["cluster", "hbm"], required=True)
    ap.add_argument("--sms")
    a = ap.parse_args()
    text = open(a.base).read().splitlines()
    plan = next((ln for ln in text if '"df.plan"()' in ln), None)
    if plan is None:
        sys.exit(f"chain_plan: {a.base} has no df.plan (run df-schedule first)")

    def attr(name):
        m = re.search(rf"\b{name} = (\d+) : i64", plan)
        if not m:
            sys.exit(f"chain_plan: df.plan of {a.base} has no {name}")
        return int(m.group(1))
    sms, cs, block = attr("sm_count"), attr("cluster_size"), attr("block_size")
    if a.sms:
        sa, sb = (int(x) for x in a.sms.split(","))
    else:
        sa, sb = (0, 1) if a.kind == "cluster" else (0, cs)
    if a.length < 1:
        sys.exit("chain_plan: --length must be at least 1")
    if not (0 <= sa < sms and 0 <= sb < sms and sa != sb):
        sys.exit(f"chain_plan: SMs {sa},{sb} must be two different SMs below sm_count {sms}")
    same_cluster = sa // cs == sb // cs
    if a.kind == "cluster" and not same_cluster:
        sys.exit(f"chain_plan: cluster edges need SMs {sa},{sb} in one cluster of {cs}")

    L = a.length
    sm_of = [sa if k % 2 == 0 else sb for k in range(L + 1)]
    ops = []
    ops.append(f'  "df.instr"() {{id = 0 : i64, inputs = {arr([])}, opcode = "iter", '
               f'operator_id = 0 : i64, operator_kind = "iter", output = 0 : i64, '
               f'range = {arr([0, block])}, sm = {sa} : i64, stage = "partial", task = 0 : i64, '
               f'variant = "generic"}} : () -> ()')
    for k in range(1, L + 1):
        ops.append(f'  "df.instr"() {{id = {k} : i64, inputs = {arr([k - 1])}, opcode = "reduce", '
                   f'operator_id = 1 : i64, operator_kind = "reduce", output = {k} : i64, '
                   f'sm = {sm_of[k]} : i64, stage = "step", task = 0 : i64, '
                   f'variant = "passthrough"}} : () -> ()')
    fin = L + 1
    ops.append(f'  "df.instr"() {{id = {fin} : i64, inputs = {arr([L])}, opcode = "finalize", '
               f'operator_id = 2 : i64, operator_kind = "finalize", sm = {sm_of[L]} : i64, '
               f'stage = "finalize", task = 0 : i64, variant = "none"}} : () -> ()')
    queues = {s: [] for s in range(sms)}
    for k in range(L + 1):
        queues[sm_of[k]].append(k)
    queues[sm_of[L]].append(fin)
    for s in range(sms):
        eid = fin + 1 + s
        ops.append(f'  "df.instr"() {{id = {eid} : i64, inputs = {arr([])}, opcode = "exit", '
                   f'sm = {s} : i64}} : () -> ()')
        queues[s].append(eid)
    for k in range(L + 1):
        ops.append(f'  "df.slot"() {{id = {k} : i64, producer = {k} : i64, '
                   f'role = "{"partial" if k == 0 else "reduced"}", task = 0 : i64, '
                   f'type = "Tok"}} : () -> ()')
    for k in range(1, L + 1):
        p, c = sm_of[k - 1], sm_of[k]
        common = (f'consumer_sm = {c} : i64, dst = {k} : i64, dst_slot = {k - 1} : i64, '
                  f'epoch = {k} : i64')
        tail = (f'phase = 0 : i64, producer_sm = {p} : i64, src = {k - 1} : i64, '
                f'src_slot = {k - 1} : i64')
        if a.kind == "cluster":
            ops.append(f'  "df.comm"() {{{common}, kind = "cluster_send", peer = {c % cs} : i64, '
                       f'{tail}}} : () -> ()')
            ops.append(f'  "df.comm"() {{{common}, kind = "cluster_recv", peer = {p % cs} : i64, '
                       f'{tail}}} : () -> ()')
        else:
            ops.append(f'  "df.comm"() {{{common}, kind = "hbm_send", {tail}}} : () -> ()')
            ops.append(f'  "df.comm"() {{{common}, kind = "hbm_recv", {tail}}} : () -> ()')
    head = [f'  "df.queue"() {{instrs = {arr(queues[s])}, sm = {s} : i64}} : () -> ()'
            for s in range(sms)]
    plan_ops = ('"df.queue"', '"df.instr"', '"df.slot"', '"df.comm"', '"df.packed"')
    out = []
    for ln in text:
        if any(op in ln for op in plan_ops):
            continue
        out.append(ln)
        if ln is plan:
            out.extend(head + ops)
    open(a.out, "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
