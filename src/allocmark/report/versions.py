"""The charts of a family's versions (chart.py's model, drawn by both figures.py and
plots.py): each version's speed and peak RSS against the baseline in version order,
a line per series (crate builds, Debian's, git revisions), and the decided
release-to-release changes (answer/releases.py) written above their points."""

from __future__ import annotations

import math
from dataclasses import dataclass

from allocmark import stats
from allocmark.allocators import lineage
from allocmark.answer import releases
from allocmark.answer.analyze import Comparison, Row
from allocmark.answer.findings import Findings
from allocmark.report.chart import Chart, Mark, Panel, Trace, Whiskers, cut, slug

MAX_VERSION_ROWS = 6
METRICS = ("time_s", "peak_rss_kib")  # speed (time, or throughput where time is fixed), memory
DEBIAN_SHIFT = 0.18  # Debian's builds stand beside the crate's of the same version

# marker ("o" circle, "s" square, "D" diamond), colour, hollow: crate builds, Debian's
# (this system's and other releases'), Debian's that run under another glibc (the C
# library changes too), and revisions of the user's repository.
SERIES = {
    "crate": ("o", "#1f77b4", False),
    "Debian": ("s", "#d62728", False),
    "Debian, under a newer glibc": ("D", "#d62728", True),
    "git": ("o", "#2ca02c", False),
}


@dataclass(frozen=True)
class Family:
    name: str
    entries: tuple[tuple[str, lineage.Lineage], ...]  # (allocator, lineage), version order
    versions: tuple[str, ...]
    rows: tuple[Row, ...]  # the first MAX_VERSION_ROWS
    changes: dict[tuple[str, str, bool], releases.Change]  # (newer, row, speed?): decided


def families(comp: Comparison, found: Findings) -> list[Family]:
    """Every family with two or more versions in the campaign (found.families)."""
    if comp.baseline is None:
        return []
    decided = {(c.newer, c.row, c.metric != releases.MEMORY): c for c in found.changes if c.decided}
    return [
        Family(
            name,
            entries,
            tuple(dict.fromkeys(lin.version for _, lin in entries)),
            tuple(comp.rows[:MAX_VERSION_ROWS]),
            decided,
        )
        for name, entries in found.families
    ]


def _cell_ratio(row: Row, metric: str, a: str) -> stats.Ratio | None:
    cell = row.cells[metric].get(a)
    if metric == "time_s" and cell is not None:
        cell = row.speeds[a]
    return cell.ratio if cell is not None else None


def _x(fam: Family, lin: lineage.Lineage) -> float:
    shift = 0 if lin.series in ("crate", lineage.GIT) else DEBIAN_SHIFT
    return fam.versions.index(lin.version) + shift


def charts(comp: Comparison, found: Findings) -> list[Chart]:
    """Per family with two or more versions in the campaign, a line of two panels
    (speed, peak RSS) per row (the first MAX_VERSION_ROWS); Debian's builds are a line
    of their own (squares), one that runs under a newer glibc hollow diamonds."""
    out = []
    for fam in families(comp, found):
        ticks = tuple(float(i) for i in range(len(fam.versions)))
        names = tuple(cut(v) for v in fam.versions)
        panels = [
            Panel(
                cut(f"{row.label}: {what(fam, row, metric)}"),
                tuple(traces(fam, row, metric)),
                y_title=f"/ {cut(comp.baseline or '')}",
                ticks=ticks,
                tick_text=names,
                ones="y",
                marks=tuple(marks(fam, row, metric)),
            )
            for row in fam.rows
            for metric in METRICS
        ]
        size = (max(6.0, 0.9 * len(fam.versions)), 3.0)
        name = f"versions-{slug(fam.name)}"
        out.append(Chart(name, title(fam, comp), tuple(panels), columns=2, size=size))
    return out


def traces(fam: Family, row: Row, metric: str) -> list[Trace]:
    """A line per series that has a number on the row."""
    out = []
    for series, (marker, colour, hollow) in SERIES.items():
        xs, ys, below, above = [], [], [], []
        for a, lin in fam.entries:
            r = _cell_ratio(row, metric, a)
            if r is None or lin.series != series:
                continue
            xs.append(_x(fam, lin))
            ys.append(r.value)
            bounded = r.low > 0 and math.isfinite(r.high)
            below.append(r.value - r.low if bounded else 0.0)
            above.append(r.high - r.value if bounded else 0.0)
        if xs:
            out.append(
                Trace(
                    series,
                    colour,
                    tuple(xs),
                    tuple(ys),
                    "points" if hollow else "lines",
                    marker=marker,
                    hollow=(hollow,) * len(xs),
                    y_err=Whiskers(tuple(below), tuple(above)),
                )
            )
    return out


def marks(fam: Family, row: Row, metric: str) -> list[Mark]:
    """A decided change from the version before, to write above its point: the
    table's verdicts, where the eye reads the line."""
    out = []
    for a, lin in fam.entries:
        change = fam.changes.get((a, row.label, metric == "time_s"))
        r = _cell_ratio(row, metric, a)
        if change is None or change.ratio is None or r is None:
            continue
        worse = change.verdict is stats.Verdict.WORSE
        out.append(Mark(_x(fam, lin), r.value, f"{change.ratio.value - 1:+.0%}", worse))
    return out


def what(fam: Family, row: Row, metric: str) -> str:
    """What a panel shows: peak RSS, time, or throughput where time is fixed."""
    if metric != "time_s":
        return "peak RSS"
    fixed = any(a in row.cells["time_s"] and row.cells["time_s"][a].fixed for a, _ in fam.entries)
    return "throughput (higher is better)" if fixed else "time"


def title(fam: Family, comp: Comparison) -> str:
    more = (
        f" (first {len(fam.rows)} of {len(comp.rows)} rows)"
        if len(comp.rows) > len(fam.rows)
        else ""
    )
    return f"{cut(fam.name)} by version, against {cut(comp.baseline or '')}; 95% intervals{more}"
