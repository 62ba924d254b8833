"""bench/moe/moe_timeline_report.py: the per-CTA table, the makespan, the
n-tile classes and the idle SM time, on a hand-made plan and trace."""
import array
import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "moe" / "moe_timeline_report.py"
_spec = importlib.util.spec_from_file_location("moe_timeline_report", _PATH)
M = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(M)
T = M.T

# Six CTAs in clusters of 2. Cluster 0 (CTAs 0, 1) runs task 0, cluster 1
# (CTAs 2, 3) tasks 1 then 2, cluster 2 (CTAs 4, 5) nothing. A task is
# gate_up (handler 0), the gather (handler S) and down (handler 1).
QUEUES = [[0], [0], [1, 2], [1, 2], [], []]
TASKS = [(5, 0, 64), (2, 64, 3), (7, 67, 40)]  # expert, first row, rows: 8, 1 and 5 tiles


def _dump():
    lines = ["plan: abi_version=8 sm_count=6 cluster_size=2",
             "handler 0: name=moe_gate_up kind=map primary=1",
             "handler 1: name=moe_down kind=map primary=1"]
    instrs, args, coords = [], [], []
    for cta, tasks in enumerate(QUEUES):
        lines.append(f"queue {cta}: offset={len(instrs)} length={3 * len(tasks) + 1}")
        for t in tasks:
            for h in ("0", "S", "1"):
                instrs.append(f"opcode=1 handler_id={h} task_id={t} arg_offset={64 * len(args)} "
                              f"comm_offset=0 comm_count=0 slot_id=0 flags=0x0")
                args.append(f"task_id={t} task_coord_offset={len(coords)} task_coord_count=1 "
                            f"range_begin=0 range_end=0 input_slot_offset=0 input_slot_count=0 "
                            f"output_slot=S")
                coords.append(t)
        instrs.append("opcode=0 handler_id=S task_id=S arg_offset=S comm_offset=0 comm_count=0 "
                      "slot_id=S flags=0x0")
    lines += [f"instr {i}: {x}" for i, x in enumerate(instrs)]
    lines += [f"args {i}: {x}" for i, x in enumerate(args)]
    lines.append("input_slots:")
    lines.append("task_coords: " + " ".join(map(str, coords)))
    return "\n".join(lines) + "\n"


def _handler(top, begin, end_h, end):
    return {T.TOP: top, T.H_BEGIN: begin, T.H_END: end_h, T.END: end}


def _gather(top, end):
    return {T.TOP: top, T.CL_WAIT: end - 100, T.CL_SYNC: end - 50, T.POST_SYNC: end - 20, T.END: end}


# (cta, pc) -> stamps (ns); the first TOP is at 1000 ns
STAMPS = {
    (0, 0): _handler(1000, 1200, 21200, 21500),  # gate_up 20.0 us
    (0, 1): _gather(21600, 25200),  # 3.6 us
    (0, 2): _handler(25300, 25400, 35400, 35500),  # down 10.0, ends 34.5
    (1, 0): _handler(1000, 1100, 25100, 25400),  # 24.0
    (1, 1): _gather(25500, 25600),  # 0.1
    (1, 2): _handler(25700, 25800, 40800, 41000),  # 15.0, ends 40.0
    (2, 0): _handler(1000, 1100, 6100, 6200),  # task 1: 5.0
    (2, 1): _gather(6300, 6500),  # 0.2
    (2, 2): _handler(6600, 6700, 11700, 11800),  # 5.0
    (2, 3): _handler(11900, 12000, 42000, 42100),  # task 2: 30.0
    (2, 4): _gather(42200, 45000),  # 2.8
    (2, 5): _handler(45100, 45200, 57200, 57300),  # 12.0, ends 56.3
    (3, 0): _handler(1000, 1100, 4100, 4200),  # task 1: 3.0
    (3, 1): _gather(4300, 6300),  # 2.0
    (3, 2): _handler(6400, 6500, 12500, 12600),  # 6.0
    (3, 3): _handler(12700, 12800, 44800, 45000),  # task 2: 32.0
    (3, 4): _gather(45100, 45300),  # 0.2
    (3, 5): _handler(45400, 45500, 61500, 61700),  # 16.0, ends 60.7 = the makespan
}


def _trace(stamps):
    tr = array.array("Q", [0] * M.WORDS)
    for (cta, pc), pts in stamps.items():
        for p, v in pts.items():
            tr[((cta * T.INSTRS + pc) * T.POINTS + p) * 2] = v
    return tr


def _report(mode="pow2", stamps=STAMPS):
    tasks = M.read_tasks(array.array("i", [x for t in TASKS for x in (*t, 0)]).tobytes())
    return "\n".join(M.report("tiny t128", M.parse_dump(_dump()), _trace(stamps), tasks, mode))


def test_per_cta_rows_and_makespan():
    text = _report()
    assert "## tiny t128: 3 tasks on 4 of 6 CTAs (clusters of 2), makespan 60.7 us" in text
    assert "| 0 | 0 | 5/64/8 | 20.0 | 3.6 | 10.0 | 34.5 |" in text
    assert "| 1 | 0 | 5/64/8 | 24.0 | 0.1 | 15.0 | 40.0 |" in text
    assert "| 2 | 1 | 2/3/1, 7/40/8 | 5.0, 30.0 | 0.2, 2.8 | 5.0, 12.0 | 56.3 |" in text
    assert "| 3 | 1 | 2/3/1, 7/40/8 | 3.0, 32.0 | 2.0, 0.2 | 6.0, 16.0 | 60.7 |" in text
    latest = [ln.split()[2] for ln in text.splitlines() if ln.startswith("- cta")]
    assert latest == ["3", "2", "1", "0"]
    assert "- cta 3 ends 60.7: cluster 1, 2/3/1 3.0 / 2.0 / 6.0; 7/40/8 32.0 / 0.2 / 16.0" in text


def test_ntile_classes_and_idle():
    text = _report()
    # 1 n-tile: gate_up 5.0, 3.0 us of 3 MB / 2 per CTA; down 5.0, 6.0 of 1.5 MB / 2
    assert "| 1 | 1 | 2 | 4.0/5.0 | 786.4/629.1 | 5.5/6.0 | 286.0/262.1 |" in text
    # 8 n-tiles: tasks 0 and 2, gate_up 20, 24, 30, 32; down 10, 15, 12, 16
    assert "| 8 | 2 | 4 | 27.0/32.0 | 116.5/98.3 | 13.5/16.0 | 116.5/98.3 |" in text
    # idle after the ends 34.5, 40.0, 56.3, 60.7 and two empty CTAs:
    # 26.2 + 20.7 + 4.4 + 0 + 2 x 60.7 = 172.7 of 6 x 60.7
    assert "idle SM time after each CTA's last END: 47.4 % of 6 CTAs x makespan (CTAs with no instruction: 2)" in text


def test_ntile_rules():
    assert [M.ntiles(n) for n in (1, 8, 9, 16, 17, 32, 33, 48, 49, 64, 100)] == [1, 1, 2, 2, 4, 4, 8, 8, 8, 8, 8]
    assert [M.ntiles(n, "nt6") for n in (32, 33, 48, 49)] == [4, 6, 6, 8]
    assert [M.ntiles(n, "fine") for n in (32, 33, 41, 49, 57)] == [4, 5, 6, 7, 8]
    assert M.nt_mode("c4x120n6") == "nt6" and M.nt_mode("c2s6t48") == "nt6"
    assert M.nt_mode("c4x120") == "pow2" and M.nt_mode("c4x120n6", "") == "pow2"
    assert M.nt_mode("x", "-DMOE_NT_FINE") == "fine" and M.nt_mode("x", "-O2 -DMOE_NT6") == "nt6"
    assert M.nt_mode("x", "-DMOE_NT_FINE -DMOE_NT3") == "fine+3"
    assert [M.ntiles(n, "fine+3") for n in (16, 17, 24, 25, 33)] == [2, 3, 3, 4, 5]
    assert [M.ntiles(n, "pow2+3") for n in (24, 33)] == [3, 8]
    text = _report("nt6")
    assert "| 3 | 1 | 2/3/1, 7/40/6 |" in text
    assert "| 6 | 1 | 2 | 31.0/32.0 |" in text and "| 8 | 1 | 2 | 22.0/24.0 |" in text
    with pytest.raises(ValueError, match="n-tile mode"):
        M.ntiles(8, "six")


def test_missing_stamps_and_bad_input_are_errors():
    stamps = dict(STAMPS)
    del stamps[(3, 4)]
    with pytest.raises(ValueError, match="cta 3 pc 4: no TOP/END stamp"):
        _report(stamps=stamps)
    with pytest.raises(ValueError, match="no `plan:` line"):
        M.parse_dump(_dump().split("\n", 1)[1])
    with pytest.raises(ValueError, match="16-byte rows"):
        M.read_tasks(b"\0" * 20)
