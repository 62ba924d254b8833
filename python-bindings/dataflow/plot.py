"""Plan inspection: a per-CTA timeline of a scheduled plan. Each SM's
queue is a row of bars (instructions in queue order); each transfer is an
arrow from its producer's bar to its consumer's bar, coloured by path
(cluster / DSMEM vs HBM). Positions come from a list-scheduling replay of
the queues with unit durations: an instruction starts when its queue
predecessor has finished and every transfer it receives has been produced.

``to_svg`` writes SVG by hand (standard library only); ``plot`` writes
SVG, or PNG through matplotlib when it is installed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

__all__ = ["TimelineBar", "TimelineArrow", "Timeline", "timeline", "to_svg", "plot"]


@dataclass(frozen=True)
class TimelineBar:
    instruction_id: int
    sm: int
    position: int      # in its queue
    start: int
    end: int
    opcode: str
    label: str
    detail: str
    forced: bool = False  # placed before its inputs (the plan's dependencies are cyclic)


@dataclass(frozen=True)
class TimelineArrow:
    source_instruction_id: int
    target_instruction_id: int
    producer_sm: int
    consumer_sm: int
    path: str          # "cluster" or "hbm"
    kinds: tuple       # comm kinds of the transfer's records
    byte_count: int    # of the transfer; 0 = the whole slot


@dataclass(frozen=True)
class Timeline:
    sm_count: int
    cluster_size: int
    bars: tuple
    arrows: tuple

    @property
    def makespan(self) -> int:
        return max((b.end for b in self.bars), default=0)


def _path(kind: str) -> str:
    return "cluster" if kind.startswith("cluster") else "hbm"


def _arrows(plan) -> tuple:
    """One arrow per transfer (source/target instruction, slots, segment)
    and path; send, receive and release records of a transfer share it."""
    found: dict = {}
    for c in plan.comms:
        kind = c.kind.value
        key = (c.transfer_key, _path(kind))
        if key in found:
            a = found[key]
            found[key] = TimelineArrow(a.source_instruction_id, a.target_instruction_id,
                                       a.producer_sm, a.consumer_sm, a.path,
                                       a.kinds + ((kind,) if kind not in a.kinds else ()),
                                       max(a.byte_count, c.byte_count))
        else:
            found[key] = TimelineArrow(c.source_instruction_id, c.target_instruction_id,
                                       c.producer_sm, c.consumer_sm, _path(kind), (kind,),
                                       c.byte_count)
    return tuple(found.values())


def _describe(ins) -> tuple[str, str]:
    op = ins.opcode.value
    task = "" if ins.task_id is None else f" t{ins.task_id}"
    label = f"{op}{task}"
    parts = [f"instruction {ins.instruction_id}: {op}"]
    if ins.operator_name:
        parts.append(f"handler {ins.operator_name}")
    if ins.task_id is not None:
        parts.append(f"task {ins.task_id} {ins.task_coords}")
    if ins.task_range is not None:
        parts.append(f"range [{ins.task_range[0]}, {ins.task_range[1]})")
    if ins.input_slots:
        parts.append(f"inputs {list(ins.input_slots)}")
    if ins.output_slot is not None:
        parts.append(f"output slot {ins.output_slot}")
    return label, ", ".join(parts)


def timeline(plan) -> Timeline:
    """Replay ``plan``'s queues (unit durations) into bars and arrows."""
    sms = plan.topology.sm_count
    queues = [plan.queue(sm) for sm in range(sms)]
    arrows = _arrows(plan)
    deps: dict = {}
    for a in arrows:
        if a.source_instruction_id != a.target_instruction_id:
            deps.setdefault(a.target_instruction_id, set()).add(a.source_instruction_id)
    queued = {ins.instruction_id for q in queues for ins in q}
    end: dict = {}
    bars = []
    pos = [0] * sms
    free = [0] * sms

    def place(sm: int, forced: bool) -> None:
        ins = queues[sm][pos[sm]]
        ready = [end[d] for d in deps.get(ins.instruction_id, ()) if d in end]
        start = max([free[sm], *ready])
        end[ins.instruction_id] = free[sm] = start + 1
        label, detail = _describe(ins)
        bars.append(TimelineBar(ins.instruction_id, sm, pos[sm], start, start + 1,
                                ins.opcode.value, label, detail, forced))
        pos[sm] += 1

    def waiting(sm: int) -> bool:
        ins = queues[sm][pos[sm]]
        return any(d not in end and d in queued for d in deps.get(ins.instruction_id, ()))

    while any(pos[sm] < len(queues[sm]) for sm in range(sms)):
        progress = False
        for sm in range(sms):
            while pos[sm] < len(queues[sm]) and not waiting(sm):
                place(sm, False)
                progress = True
        if not progress:  # a cycle: place the earliest blocked head anyway
            sm = min((s for s in range(sms) if pos[s] < len(queues[s])),
                     key=lambda s: (free[s], s))
            place(sm, True)
    bars.sort(key=lambda b: (b.sm, b.position))
    shown = {b.instruction_id for b in bars}
    arrows = tuple(a for a in arrows
                   if a.source_instruction_id in shown and a.target_instruction_id in shown)
    return Timeline(sms, plan.topology.cluster_size, tuple(bars), arrows)


# ---- SVG ------------------------------------------------------------------------------------

COLOURS = {"iter": "#8fd19e", "map": "#8fd19e", "reduce": "#f7c873", "reduce_update": "#f7c873",
           "reshared": "#9ecae1", "finalize": "#c7a4e0", "exit": "#d0d0d0",
           "cluster_sync": "#bdbdbd"}
PATH_COLOURS = {"cluster": "#1f77b4", "hbm": "#d62728"}
UNIT, WIDTH, ROW, BAR, LEFT, TOP = 112, 80, 44, 26, 120, 56  # step, bar width, ...


def _x(t: float) -> float:
    return LEFT + t * UNIT


def _y(sm: int) -> float:
    return TOP + sm * ROW


def _title(plan, tl: Timeline) -> str:
    return (f"{getattr(plan.resolved_program(), 'name', 'plan')}: {tl.sm_count} SMs, "
            f"cluster {tl.cluster_size}, {len(tl.bars)} instructions, "
            f"{len(tl.arrows)} transfers")


def to_svg(plan, *, title: str | None = None) -> str:
    """The timeline of ``plan`` as an SVG document: one ``<g class="row">``
    per SM, one ``<rect class="bar ...">`` per instruction, one
    ``<path class="comm cluster|hbm">`` per transfer."""
    tl = timeline(plan)
    width = _x(max(tl.makespan, 1)) + 8
    height = _y(tl.sm_count) + 16
    title = title or _title(plan, tl)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
           f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif" font-size="11">',
           "<defs>"]
    for name, colour in PATH_COLOURS.items():
        out.append(f'<marker id="arrow-{name}" viewBox="0 0 10 10" refX="9" refY="5" '
                   f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
                   f'<path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>')
    out.append("</defs>")
    out.append(f'<text class="title" x="8" y="18" font-size="13">{escape(title)}</text>')
    legend_x = 8
    for name, colour in PATH_COLOURS.items():
        out.append(f'<g class="legend"><line x1="{legend_x}" y1="36" x2="{legend_x + 24}" '
                   f'y2="36" stroke="{colour}" stroke-width="2"/><text x="{legend_x + 28}" '
                   f'y="40">{name} transfer</text></g>')
        legend_x += 130
    for sm in range(tl.sm_count):
        cluster = sm // tl.cluster_size
        shade = "#f4f6fb" if cluster % 2 == 0 else "#fbf7f0"
        y = _y(sm)
        out.append(f'<g class="row" data-sm="{sm}" data-cluster="{cluster}">')
        out.append(f'<rect class="lane" x="0" y="{y}" width="{width:.0f}" height="{ROW}" '
                   f'fill="{shade}"/>')
        out.append(f'<text x="8" y="{y + ROW / 2 + 4}">SM {sm} (cluster {cluster})</text>')
        for b in (b for b in tl.bars if b.sm == sm):
            x, by = _x(b.start), y + (ROW - BAR) / 2
            colour = COLOURS.get(b.opcode, "#e0e0e0")
            stroke = ' stroke="#c00" stroke-dasharray="3,2"' if b.forced else ' stroke="#555"'
            out.append(f'<rect class="bar op-{b.opcode}" data-instruction="{b.instruction_id}" '
                       f'x="{x}" y="{by}" width="{WIDTH}" height="{BAR}" rx="3" '
                       f'fill="{colour}"{stroke}><title>{escape(b.detail)}</title></rect>')
            out.append(f'<text x="{x + 4}" y="{by + BAR / 2 + 4}" pointer-events="none">'
                       f'{escape(b.label)}</text>')
        out.append("</g>")
    at = {b.instruction_id: b for b in tl.bars}
    for a in tl.arrows:
        src, dst = at[a.source_instruction_id], at[a.target_instruction_id]
        x1, y1 = _x(src.start) + WIDTH, _y(src.sm) + ROW / 2
        x2, y2 = _x(dst.start), _y(dst.sm) + ROW / 2
        bend = max(16.0, abs(x2 - x1) / 2)
        colour = PATH_COLOURS[a.path]
        tip = (f"{a.path} transfer: instruction {a.source_instruction_id} (SM {a.producer_sm}) "
               f"-> {a.target_instruction_id} (SM {a.consumer_sm}), {', '.join(a.kinds)}")
        out.append(f'<path class="comm {a.path}" d="M{x1},{y1} C{x1 + bend},{y1} '
                   f'{x2 - bend},{y2} {x2},{y2}" fill="none" stroke="{colour}" '
                   f'stroke-width="1.6" marker-end="url(#arrow-{a.path})">'
                   f'<title>{escape(tip)}</title></path>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _png(plan, path: Path, title: str | None) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("plan.plot: PNG output needs matplotlib; write .svg instead") from None
    tl = timeline(plan)
    fig, ax = plt.subplots(figsize=(2 + tl.makespan * 1.2, 1 + tl.sm_count * 0.5))
    for b in tl.bars:
        ax.barh(b.sm, 0.9, left=b.start + 0.05, height=0.6,
                color=COLOURS.get(b.opcode, "#e0e0e0"), edgecolor="#555")
        ax.text(b.start + 0.1, b.sm, b.label, va="center", fontsize=7)
    at = {b.instruction_id: b for b in tl.bars}
    for a in tl.arrows:
        src, dst = at[a.source_instruction_id], at[a.target_instruction_id]
        ax.annotate("", xy=(dst.start + 0.05, dst.sm), xytext=(src.end - 0.05, src.sm),
                    arrowprops={"arrowstyle": "->", "color": PATH_COLOURS[a.path]})
    ax.set_yticks(range(tl.sm_count), [f"SM {s}" for s in range(tl.sm_count)])
    ax.invert_yaxis()
    ax.set_xlabel("step (unit durations)")
    ax.set_title(title or _title(plan, tl))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot(plan, path, *, title: str | None = None) -> Path:
    """Write the timeline of ``plan`` to ``path``: SVG (any suffix but
    .png), or PNG when the suffix is .png (needs matplotlib)."""
    path = Path(path)
    if path.suffix.lower() == ".png":
        _png(plan, path, title)
    else:
        path.write_text(to_svg(plan, title=title))
    return path
