"""Plan inspection: the per-CTA timeline of the seed plan as SVG (standard
library only), PNG through matplotlib when it is installed."""

from __future__ import annotations

import importlib.util
import xml.etree.ElementTree as ET

import pytest

import dataflow as df

from test_dataflow_runtime import make_program, make_reshared_program

SVG = "{http://www.w3.org/2000/svg}"


def _seed_plan():
    return df.schedule(make_program().named("attention"),
                       topology=df.GPUTopology(sm_count=4, cluster_size=2),
                       range_lengths={"kv": [384, 256]}, block_size=128, task_extents=(2,))


def _classes(root, tag: str) -> list:
    return [e.get("class", "") for e in root.iter(SVG + tag)]


def test_seed_plan_svg_has_rows_bars_and_arrows(tmp_path):
    plan = _seed_plan()
    path = plan.plot(tmp_path / "seed.svg")
    root = ET.parse(path).getroot()
    assert root.tag == SVG + "svg"
    rows = [g for g in root.iter(SVG + "g") if g.get("class") == "row"]
    assert [int(g.get("data-sm")) for g in rows] == [0, 1, 2, 3]
    assert [int(g.get("data-cluster")) for g in rows] == [0, 0, 1, 1]
    # one bar per instruction, in its SM's row, in queue order
    assert sum(c.startswith("bar ") for c in _classes(root, "rect")) == len(plan.instructions) == 13
    for g in rows:
        ids = [int(r.get("data-instruction")) for r in g.iter(SVG + "rect")
               if r.get("class", "").startswith("bar ")]
        assert ids == [i.instruction_id for i in plan.queue(int(g.get("data-sm")))]
    # one arrow per transfer: a cluster send 1 -> 3 and HBM sends 2 -> 3, 6 -> 7
    paths = _classes(root, "path")
    assert paths.count("comm cluster") == 1 and paths.count("comm hbm") == 2
    assert plan.to_svg() == path.read_text()


def test_timeline_replays_queues_and_dependencies():
    plan = _seed_plan()
    tl = plan.timeline()
    at = {b.instruction_id: b for b in tl.bars}
    assert not any(b.forced for b in tl.bars)
    for sm in range(tl.sm_count):
        row = [b for b in tl.bars if b.sm == sm]
        assert all(a.end <= b.start for a, b in zip(row, row[1:]))
    assert {(a.source_instruction_id, a.target_instruction_id, a.path) for a in tl.arrows} == {
        (1, 3, "cluster"), (2, 3, "hbm"), (6, 7, "hbm")}
    for a in tl.arrows:
        assert at[a.source_instruction_id].end <= at[a.target_instruction_id].start
    # the reduce of task 1 waits for its partial computed on SM 0 after task 0's finalize
    assert at[7].start == at[6].end == 4 and tl.makespan == 7


def test_reshared_plan_and_packed_plot(tmp_path):
    plan = df.schedule(make_reshared_program().named("moe_reshared"),
                       topology=df.GPUTopology(sm_count=4, cluster_size=2),
                       range_lengths={"expert_tile": [256], "hidden_tile": [256]},
                       block_size=128, task_extents=(1,), include_exit=False)
    packed = df.pack_instruction_plan(plan)
    root = ET.parse(packed.plot(tmp_path / "moe.svg")).getroot()
    assert sum(c.startswith("bar op-reshared") for c in _classes(root, "rect")) == 2
    assert _classes(root, "path").count("comm cluster") == 2
    with pytest.raises(ValueError, match="needs the scheduled plan"):
        df.load_packed_plan(packed.to_blob()).plot(tmp_path / "x.svg")


def test_png_needs_matplotlib(tmp_path):
    plan = _seed_plan()
    if importlib.util.find_spec("matplotlib") is None:
        with pytest.raises(ImportError, match="needs matplotlib"):
            plan.plot(tmp_path / "seed.png")
    else:
        path = plan.plot(tmp_path / "seed.png")
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
