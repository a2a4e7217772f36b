"""What the figures of both drawings share: rows grouped into panels, the values a
panel shows, labels cut to a length a figure can lay out. plots.py (matplotlib, for
`--plots` and Markdown) and figures.py (Plotly, for the HTML page) draw from these,
so that the two show the same numbers."""

from __future__ import annotations

import dataclasses
import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from allocmark import stats
from allocmark.answer.analyze import Comparison, Row
from allocmark.answer.findings import Findings
from allocmark.answer.positions import Position
from allocmark.answer.recommend import Choice
from allocmark.answer.why import Why
from allocmark.labels import value_text
from allocmark.model import Params, RssSeries

if TYPE_CHECKING:  # matplotlib's import costs the page half a second: plots.py alone pays it
    from matplotlib.figure import Figure

Series = Sequence[tuple[str, str, Params, RssSeries]]  # (allocator, workload, params, series)

MAX_SCATTER_PANELS = 12  # rows drawn as panels of one figure
WHY_MOST = 24  # explained differences drawn, the largest first
TEXT_MAX = 80  # characters of one label; names are at most 64, a crafted database's may not be


@dataclass(frozen=True)
class Plot:
    """One matplotlib figure (plots.py), written as name.svg and name.png."""

    name: str  # file stem
    title: str
    figure: Figure


def wrapped(label: str, width: int = 48) -> str:
    """A row label on lines narrow enough for a panel's title."""
    return "\n".join(textwrap.wrap(label, width)) or label


def cut(text: str) -> str:
    """At most TEXT_MAX characters, keeping the start and the end."""
    return text if len(text) <= TEXT_MAX else f"{text[: TEXT_MAX - 12]}…{text[-11:]}"


def slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:64]


def first_rows(shown: Sequence[Row], comp: Comparison) -> str:
    """A title's note when a figure draws only the first rows."""
    return f" (first {len(shown)} of {len(comp.rows)} rows)" if len(comp.rows) > len(shown) else ""


def by_workload(comp: Comparison) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for row in comp.rows:
        out.setdefault(row.workload, []).append(row)
    return out


def split(rows: Sequence[Row], along: str) -> dict[str, list[Row]]:
    """Rows split into panels by the parameters that vary, except `along`."""
    varying = {
        k for r in rows for k, v in r.params if any(dict(o.params).get(k) != v for o in rows)
    }
    out: dict[str, list[Row]] = {}
    for r in rows:
        key = " ".join(f"{k}={value_text(v)}" for k, v in r.params if k in varying - {along})
        out.setdefault(key, []).append(r)
    return out


@dataclass(frozen=True)
class Scaling:
    """One workload's thread-scaling figure: its panels, and the thread counts run."""

    workload: str
    panels: dict[str, list[Row]]  # title -> rows: panels with two thread counts or more
    counts: list[int]


def scaling(comp: Comparison) -> list[Scaling]:
    """A figure per workload run at several thread counts (with its throughput)."""
    if "ops_per_s" not in comp.metrics:
        return []
    out = []
    for workload, rows in by_workload(comp).items():
        found = {
            k: p for k, p in split(rows, "threads").items() if len({threads(r) for r in p}) > 1
        }
        counts = sorted({threads(r) for p in found.values() for r in p})
        if found:
            out.append(Scaling(workload, found, counts))
    return out


def threads(row: Row) -> int:
    return int(dict(row.params).get("threads", 1))


def median(row: Row, metric: str, allocator: str) -> float | None:
    s = row.cells[metric][allocator].summary
    return s.median if s else None


def scaling_points(prow: Sequence[Row], allocator: str) -> list[tuple[int, float]]:
    """(threads, Mops/s) of the allocator on a panel's rows, by thread count."""
    by_threads = sorted(prow, key=threads)
    return [(threads(r), m / 1e6) for r in by_threads if (m := median(r, "ops_per_s", allocator))]


def overhead_points(prow: Sequence[Row], allocator: str) -> list[tuple[float, float, int]]:
    """(memory overhead, Mops/s, threads) of the allocator on a panel's rows."""
    return [
        (o, m / 1e6, threads(r))
        for r in prow
        if (o := median(r, "overhead_ratio", allocator)) is not None
        and (m := median(r, "ops_per_s", allocator)) is not None
    ]


def bars(comp: Comparison, metric: str) -> tuple[list[int], dict[str, list[stats.Ratio | None]]]:
    """The rows a bar figure of `metric` shows (those with a bar: no empty slot) and
    each non-baseline allocator's ratio on every row (shown_ratio)."""
    others = [a for a in comp.allocators if a != comp.baseline]
    ratios = {a: [shown_ratio(comp, row, metric, a) for row in comp.rows] for a in others}
    shown = [j for j in range(len(comp.rows)) if any(ratios[a][j] for a in others)]
    return shown, ratios


def scatter(
    comp: Comparison, findings: Findings
) -> list[tuple[Row, list[tuple[str, Position, Position]]]]:
    """The first MAX_SCATTER_PANELS rows, each with (allocator, time, peak RSS) of every
    allocator placed on both axes: the answer's positions, as the matrices have them."""
    found = findings.positions[:MAX_SCATTER_PANELS]
    return [
        (
            row,
            [
                (c.allocator, c.time, c.rss)
                for c in p.values()
                if isinstance(c, Choice) and c.time is not None and c.rss is not None
            ],
        )
        for row, p in zip(comp.rows, found, strict=False)
    ]


def shown_ratio(comp: Comparison, row: Row, metric: str, allocator: str) -> stats.Ratio | None:
    """The ratio a bar of `metric` shows: a row of fixed duration (larson) has no time
    of its own, so its speed bar is the inverse of its throughput's ratio (time per
    operation), or the throughput's ratio itself when the report shows speed-ups."""
    if metric != "time_s" or not row.cells["time_s"][allocator].fixed:
        return row.cells[metric][allocator].ratio
    cell = row.speed(allocator)
    r = cell.ratio if cell is not None else None
    if r is None or comp.speedup or r.value <= 0:
        return r
    # An interval too few blocks leave unbounded (0 to infinity) stays unbounded.
    low = 1 / r.high if 0 < r.high < math.inf else 0.0
    high = 1 / r.low if r.low > 0 else math.inf
    logs = tuple(-x for x in r.logs)
    return dataclasses.replace(r, value=1 / r.value, low=low, high=high, logs=logs)


def share_of_run(s: RssSeries, at: np.ndarray) -> np.ndarray:
    """The series' RSS (KiB) at each share `at` of its run; runs of different
    lengths line up from start to end."""
    t = np.asarray(s.t_ms, dtype=float)
    length = t[-1] + s.stride * s.period_us / 1000  # the last point covers a stride
    kib: np.ndarray = np.interp(at * length, t, np.asarray(s.kib, dtype=float))
    return kib


def rss_cells(
    comp: Comparison, series: Series
) -> tuple[list[Row], dict[tuple[str, Params], dict[str, list[RssSeries]]]]:
    """The rows with RSS series (at most MAX_SCATTER_PANELS), and each row's series
    by allocator."""
    cells: dict[tuple[str, Params], dict[str, list[RssSeries]]] = {}
    for a, w, params, s in series:
        cells.setdefault((w, params), {}).setdefault(a, []).append(s)
    rows = [r for r in comp.rows if (r.workload, r.params) in cells][:MAX_SCATTER_PANELS]
    return rows, cells


@dataclass(frozen=True)
class WhyBars:
    """A why figure: the decided differences on one axis, largest first, and the
    signals in their units that moved with them."""

    axis: str  # "time" or "rss"
    unit: str  # of the bars: "s" or "MiB"
    scale: float  # from the differences' units (s, KiB) to the bars'
    name: str  # "time", "peak RSS"
    differences: list[Why]
    signals: list[str]  # Factor.words, in the order first met


def why_bars(findings: Findings) -> list[WhyBars]:
    found = [w for w in findings.whys if w.explained]
    out = []
    for axis, unit, scale, name in (
        ("time", "s", 1.0, "time"),
        ("rss", "MiB", 1 / 1024, "peak RSS"),
    ):
        mine = sorted((w for w in found if w.axis == axis), key=lambda w: -abs(w.delta))
        mine = mine[:WHY_MOST]
        signals = list(
            dict.fromkeys(f.words for w in mine for f in w.factors if f.share is not None)
        )
        if mine:
            out.append(WhyBars(axis, unit, scale, name, mine, signals))
    return out
