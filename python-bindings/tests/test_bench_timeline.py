"""bench/attention/timeline_report.py: the dump parser, the per-handler
table and the critical path, on a hand-made plan and trace."""
import array
import importlib.util
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "bench" / "attention" / "timeline_report.py"
_spec = importlib.util.spec_from_file_location("timeline_report", _PATH)
T = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(T)

# Two CTAs: CTA 0 runs a partial (keys 0..1000) then the reduce of both
# partials; CTA 1 runs a partial (keys 1000..3000) and sends it.
DUMP = """plan: abi_version=7 sm_count=2 cluster_size=1
handler 0: name=gqa_partial kind=iter primary=1
handler 1: name=gqa_combine kind=reduce primary=1
queue 0: offset=0 length=3
queue 1: offset=3 length=2
instr 0: opcode=1 handler_id=0 task_id=0 arg_offset=0 comm_offset=0 comm_count=0 slot_id=0 flags=0x0
instr 1: opcode=2 handler_id=1 task_id=0 arg_offset=128 comm_offset=0 comm_count=1 slot_id=2 flags=0x0
instr 2: opcode=0 handler_id=S task_id=S arg_offset=S comm_offset=0 comm_count=0 slot_id=S flags=0x0
instr 3: opcode=1 handler_id=0 task_id=0 arg_offset=64 comm_offset=1 comm_count=1 slot_id=1 flags=0x0
instr 4: opcode=0 handler_id=S task_id=S arg_offset=S comm_offset=0 comm_count=0 slot_id=S flags=0x0
input_slots: 0 1
args 0: task_id=0 range_begin=0 range_end=1000 input_slot_offset=0 input_slot_count=0 output_slot=0
args 1: task_id=0 range_begin=1000 range_end=3000 input_slot_offset=0 input_slot_count=0 output_slot=1
args 2: task_id=0 range_begin=0 range_end=0 input_slot_offset=0 input_slot_count=2 output_slot=2
"""


def _trace(times):
    tr = array.array("Q", [0] * (T.CTAS * T.INSTRS * T.POINTS * 2))
    for (cta, pc), pts in times.items():
        for p, v in pts.items():
            tr[((cta * T.INSTRS + pc) * T.POINTS + p) * 2] = v
    return tr


def _stamps(top, begin, end_h, end):
    return {T.TOP: top, T.H_BEGIN: begin, T.H_END: end_h, T.END: end}


def test_report_tables_and_critical_path():
    plan = T.parse_dump(DUMP)
    assert plan["handlers"] == {0: "gqa_partial", 1: "gqa_combine"}
    assert plan["queues"] == [(0, 3), (3, 2)]
    assert plan["input_slots"] == [0, 1]
    # CTA 1's partial (2000 keys, 1 MB) ends last at 11 us; the reduce
    # waits for it from 6 us to 12 us.
    reduce = _stamps(5600, 12000, 12500, 12600)
    reduce[T.HBM_FLAG], reduce[T.HBM_DONE] = 11500, 11800  # CTA 1's input polled, copied
    tr = _trace({(0, 0): _stamps(1000, 1200, 5000, 5500),
                 (0, 1): reduce,
                 (1, 0): _stamps(1000, 1100, 10600, 11000)})
    text = "\n".join(T.report("tiny", plan, tr, ctas_used=2))
    assert "3 instructions on 2 CTAs, first TOP to last END 11.6 us" in text
    # 2000 keys x 512 B in 9.5 us = 107.8 GB/s; 1000 keys in 3.8 us = 134.7
    assert "| gqa_partial | 2 | 3.8/6.7/9.5 | 1000..2000 | 107.8/121.3/134.7 |" in text
    assert "| gqa_combine | 1 | 0.5/0.5/0.5 | 0 | - | 6.4/6.4/6.4 |" in text
    assert "the last one ends 1.6 us before the kernel's last END" in text
    # rates 1000 / 3.8 and 2000 / 9.5 keys per us: 3000 keys balanced in
    # 3000 / (263.2 + 210.5) = 6.33 us against the busiest CTA's 9.5 us
    assert ("ranged handler time per CTA: busiest 9.5 us; balanced at the measured per-CTA "
            "rates 6.3 us (50.0 % over)") in text
    # the receive was done 0.8 us after CTA 1's send (END 11.0 us), 6.2 us
    # after the reduce's TOP; its poll was satisfied 5.9 us after TOP
    assert ("receiving instructions: 1; receives done after the later of the last input's send "
            "and TOP (min/med/max) 0.8/0.8/0.8 us; after TOP 6.2/6.2/6.2 us; TOP to the first "
            "satisfied wait or poll 5.9/5.9/5.9 us") in text
    path = [ln.split()[:4] for ln in text.splitlines() if ln.startswith("  cta")]
    assert path == [["cta", "0", "pc", "1"], ["cta", "1", "pc", "0"]]


def test_missing_stamps_and_bad_dump_are_errors():
    plan = T.parse_dump(DUMP)
    tr = _trace({(0, 0): _stamps(1000, 1200, 5000, 5500)})
    with pytest.raises(ValueError, match="cta 0 pc 1: no TOP/END stamp"):
        T.report("tiny", plan, tr)
    with pytest.raises(ValueError, match="no queue or instr lines"):
        T.parse_dump("plan: abi_version=7\n")


# The same work as a pooled plan (docs/pool.md): both queues are OP_POOL +
# EXIT; the pool holds the two partials and the reduce. CTA 0 runs the
# first partial and then the reduce, CTA 1 the second partial; their
# trace slots follow the queues (pc 2, 3 on CTA 0; pc 2 on CTA 1) and
# name their instructions in the CL_WAIT clock stamp.
POOL_DUMP = """plan: abi_version=8 sm_count=2 cluster_size=1
handler 0: name=gqa_partial kind=iter primary=1
handler 1: name=gqa_combine kind=reduce primary=1
queue 0: offset=0 length=2
queue 1: offset=2 length=2
instr 0: opcode=5 handler_id=S task_id=1 arg_offset=S comm_offset=4 comm_count=0 slot_id=3 flags=0x3
instr 1: opcode=0 handler_id=S task_id=S arg_offset=S comm_offset=0 comm_count=0 slot_id=S flags=0x0
instr 2: opcode=5 handler_id=S task_id=1 arg_offset=S comm_offset=4 comm_count=0 slot_id=3 flags=0x3
instr 3: opcode=0 handler_id=S task_id=S arg_offset=S comm_offset=0 comm_count=0 slot_id=S flags=0x0
instr 4: opcode=1 handler_id=0 task_id=0 arg_offset=64 comm_offset=0 comm_count=1 slot_id=1 flags=0x0
instr 5: opcode=1 handler_id=0 task_id=0 arg_offset=0 comm_offset=1 comm_count=1 slot_id=0 flags=0x0
instr 6: opcode=2 handler_id=1 task_id=0 arg_offset=128 comm_offset=2 comm_count=2 slot_id=2 flags=0x0
input_slots: 0 1
args 0: task_id=0 range_begin=0 range_end=1000 input_slot_offset=0 input_slot_count=0 output_slot=0
args 1: task_id=0 range_begin=1000 range_end=3000 input_slot_offset=0 input_slot_count=0 output_slot=1
args 2: task_id=0 range_begin=0 range_end=0 input_slot_offset=0 input_slot_count=2 output_slot=2
"""


def test_pool_slots_after_the_queues():
    plan = T.parse_dump(POOL_DUMP)
    tr = _trace({(0, 2): _stamps(1000, 1200, 5000, 5500),
                 (0, 3): _stamps(6000, 11500, 12000, 12100),
                 (1, 2): _stamps(1000, 1100, 10600, 11000)})
    for (cta, pc), instr in {(0, 2): 5, (0, 3): 6, (1, 2): 4}.items():
        tr[((cta * T.INSTRS + pc) * T.POINTS + T.CL_WAIT) * 2 + 1] = instr + 1
    text = "\n".join(T.report("pooled", plan, tr, ctas_used=2))
    assert "3 instructions on 2 CTAs, first TOP to last END 11.1 us" in text
    assert "| gqa_partial | 2 | 3.8/6.7/9.5 | 1000..2000 |" in text
    assert "| gqa_combine | 1 | 0.5/0.5/0.5 | 0 |" in text
    # CTA 0: 0.5 us from the partial's END to the reduce's TOP; CTA 1 none;
    # CTA 1 idles 1.1 us after its last END
    assert "per CTA: between instructions 0.0/0.2/0.5 us in all, idle after its last 0.0/0.6/1.1" in text
