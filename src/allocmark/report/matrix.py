"""The verdict matrix: the answer at a glance. A row per workload and one for all of
them (the geometric mean), a column per allocator, each cell one glyph and one
number against the baseline: "▲ 1.94×" better, "▼ 1.40×" worse, "= same" within the
margin, "? ▿1.29×" undecided (the estimate, leaning worse). One matrix for speed (time, or
throughput where a workload runs for a set time) and one for peak RSS; the same
cells in the terminal, Markdown and HTML."""

from __future__ import annotations

import math
from dataclasses import dataclass

from allocmark import stats
from allocmark.answer.analyze import Comparison, Row
from allocmark.answer.findings import Findings
from allocmark.answer.recommend import Choice, Excluded, Position

# What each kind of cell looks like: a glyph and a style every format maps.
BETTER, WORSE, SAME, UNDECIDED, BASE, FAILED, NONE = (
    "better",
    "worse",
    "same",
    "undecided",
    "base",
    "failed",
    "none",
)
GLYPHS = {BETTER: "▲", WORSE: "▼", SAME: "=", UNDECIDED: "?", BASE: "", FAILED: "✗", NONE: "·"}
ALL = "all (geomean)"


@dataclass(frozen=True)
class Mark:
    kind: str  # BETTER ... NONE
    text: str  # "1.94×", "same", "±12%", "base", "crashed"

    @property
    def shown(self) -> str:
        glyph = GLYPHS[self.kind]
        return f"{glyph} {self.text}" if glyph and self.text else glyph or self.text


@dataclass(frozen=True)
class Matrix:
    axis: str  # "time", "speed" (time; throughput where time is fixed) or "peak RSS"
    title: str
    allocators: tuple[str, ...]  # the baseline first
    rows: tuple[tuple[str, tuple[Mark, ...]], ...]  # label, a mark per allocator


def legend(margin: float, found: list[Matrix], more: str = "--detail: all values") -> str:
    """What the glyphs say (the partial mark where there is one); `more`: where every
    value and interval is."""
    partial = any("†" in m.text for x in found for _, marks in x.rows for m in marks)
    return (
        f"▲ better ▼ worse (×factor) · = same (±{margin:.0%}) · ? undecided (its "
        "estimate, ▵ leaning better, ▿ worse) · ✗ failed · "
        + ("† partial, not recommended · " if partial else "")
        + more
    )


def matrices(comp: Comparison, found: Findings) -> list[Matrix]:
    """The speed matrix and the peak RSS matrix, each where the campaign has one. The
    cells are the answer's own positions (recommend.py): each row's ratios judged as
    one family by Holm (wrong anywhere in the row at most 5 % of the time), the "all"
    row across these workloads (across.py). One promise per cell: a cell and the
    sentence under the matrix never disagree."""
    if not found.matrix or comp.baseline is None:
        return []
    order = (comp.baseline, *(a for a in comp.allocators if a != comp.baseline))
    labelled: list[tuple[str, dict[str, Choice | Excluded], Row | None]] = [
        (row.label, p, row) for row, p in zip(comp.rows, found.positions, strict=True)
    ]
    if found.overall:
        labelled.append((ALL, found.overall, None))
    out = []
    for axis, name in (("time", _speed_name(comp)), ("rss", "peak RSS")):
        rows = tuple(
            (label, tuple(_mark(comp, p.get(a), a, axis, row) for a in order))
            for label, p, row in labelled
        )
        if all(m.kind in (NONE, BASE, FAILED) for _, marks in rows for m in marks):
            continue  # nothing measured on this axis
        title = f"{SPEED if name == 'speed' else name} against {comp.baseline}"
        out.append(Matrix(name, title, order, rows))
    return out


SPEED = "speed (time; throughput where a workload runs for a set time)"


def _speed_name(comp: Comparison) -> str:
    fixed = any(c.fixed for r in comp.rows for c in r.cells["time_s"].values())
    return "speed" if fixed else "time"


def _mark(
    comp: Comparison,
    found: Choice | Excluded | None,
    allocator: str,
    axis: str,
    row: Row | None,
) -> Mark:
    if isinstance(found, Excluded) and found.failed:  # "crashed 2/3"
        return Mark(FAILED, found.failed.split(" ")[0])
    if isinstance(found, Excluded):  # partial where this program may need more, a role
        return _partial(comp, row, allocator, axis)
    position = getattr(found, axis) if found is not None else None
    if position is None:
        return Mark(NONE, "")
    if allocator == comp.baseline:
        return Mark(BASE, "base")
    return _position_mark(position)


def _partial(comp: Comparison, row: Row | None, allocator: str, axis: str) -> Mark:
    """What the cell's own ratio says (not judged with the answer's family), marked †."""
    cell = (
        None
        if row is None
        else (row.cells["peak_rss_kib"].get(allocator) if axis == "rss" else row.speeds[allocator])
    )
    if cell is None or cell.ratio is None or cell.verdict is None:
        return Mark(NONE, "†")
    r = cell.ratio  # the factor and the half-width read the same either way up
    mark = _position_mark(Position(r.value, r.low, r.high, cell.verdict))
    return Mark(mark.kind, mark.text + "†")


def _position_mark(p: Position) -> Mark:
    """A position (lower is better) as a glyph and a number."""
    if p.verdict is stats.Verdict.SAME:
        return Mark(SAME, "same")
    if p.verdict is stats.Verdict.UNDECIDED:
        return Mark(UNDECIDED, leaning(p.value))
    factor = max(p.value, 1 / p.value) if p.value > 0 else math.inf
    return Mark(BETTER if p.verdict is stats.Verdict.BETTER else WORSE, _factor(factor))


def leaning(value: float) -> str:
    """An undecided position's estimate: the way it leans (▵ better, ▿ worse; lower is
    better) and its factor, "▿1.29×": what was measured, where the glyph in front
    ("?") says that it is not a verdict."""
    if not value > 0:
        return "n/a"
    factor = max(value, 1 / value)
    if factor < 1.005:
        return _factor(factor)
    return ("▵" if value < 1 else "▿") + _factor(factor)


def _factor(x: float) -> str:
    return f"{x:.2f}×" if x < 10 else f"{x:.0f}×"
