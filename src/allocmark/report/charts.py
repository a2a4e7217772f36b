"""Every chart of a report (chart.py's model), made once from the comparison, what it
answers and the runs' RSS series: the answer's picture (time against peak RSS), the
whys, the ratios to the baseline, thread scaling, overhead against throughput, a
family's versions (versions.py), RSS over the run and every run's time. The
page (figures.py) and the plot files (plots.py) translate these; neither computes a
value of its own."""

from __future__ import annotations

import dataclasses
import math
import textwrap
from collections.abc import Sequence

import numpy as np

from allocmark import stats
from allocmark.answer.analyze import Comparison, Row
from allocmark.answer.findings import Findings
from allocmark.answer.recommend import Choice
from allocmark.answer.why import Why
from allocmark.labels import label_rows, value_text
from allocmark.model import Params, RssSeries
from allocmark.report import versions
from allocmark.report.chart import (
    COLOURS,
    MAX_PANELS,
    SIGNAL_COLOURS,
    Chart,
    Panel,
    Trace,
    Whiskers,
    cut,
    slug,
)

Series = Sequence[tuple[str, str, Params, RssSeries]]  # (allocator, workload, params, series)

WHY_MOST = 24  # explained differences drawn, the largest first
RSS_POINTS = 41  # every 2.5 % of a run
TITLES = {"time_s": "Time", "peak_rss_kib": "Peak RSS"}


def every(comp: Comparison, found: Findings, series: Series = ()) -> list[Chart]:
    """Every chart the comparison has the data for, the answer's picture first."""
    if not comp.rows:  # e.g. only the hardening battery: outcomes, not numbers
        return []
    return [
        *time_vs_rss(comp, found),
        *why_parts(comp, found),
        *normalized(comp),
        *scaling(comp),
        *overhead_vs_throughput(comp),
        *rss_over_time(comp, series),
        *distributions(comp),
        *versions.charts(comp, found),
    ]


def colours(allocators: Sequence[str]) -> dict[str, str]:
    """Each allocator's colour: the same in every chart of a report."""
    return {a: COLOURS[i % len(COLOURS)] for i, a in enumerate(allocators)}


def _first_rows(shown: int, comp: Comparison) -> str:
    """A title's note when a chart draws only the first rows."""
    return f" (first {shown} of {len(comp.rows)} rows)" if len(comp.rows) > shown else ""


def _by_workload(comp: Comparison) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for row in comp.rows:
        out.setdefault(row.workload, []).append(row)
    return out


def _split(rows: Sequence[Row], along: str) -> dict[str, list[Row]]:
    """Rows split into panels by the parameters that vary, except `along`."""
    varying = {
        k for r in rows for k, v in r.params if any(dict(o.params).get(k) != v for o in rows)
    }
    out: dict[str, list[Row]] = {}
    for r in rows:
        key = " ".join(f"{k}={value_text(v)}" for k, v in r.params if k in varying - {along})
        out.setdefault(key, []).append(r)
    return out


def _threads(row: Row) -> int:
    return int(dict(row.params).get("threads", 1))


def _median(row: Row, metric: str, allocator: str) -> float | None:
    s = row.cells[metric][allocator].summary
    return s.median if s else None


def _around(values: Sequence[float], lows: Sequence[float], highs: Sequence[float]) -> Whiskers:
    return Whiskers(
        tuple(v - lo for v, lo in zip(values, lows, strict=True)),
        tuple(h - v for v, h in zip(values, highs, strict=True)),
    )


# ---------------------------------------------------------------------------
# The charts
# ---------------------------------------------------------------------------
def time_vs_rss(comp: Comparison, found: Findings) -> list[Chart]:
    """Per row (the first MAX_PANELS), each allocator's speed and peak RSS against the
    baseline with their 95 % intervals, where the answer placed them: the
    recommendation's picture; lower left is better."""
    base = comp.baseline
    if base is None or len(comp.allocators) < 2 or not found.positions:
        return []  # a report read without its findings has no positions to place
    colour, panels = colours(comp.allocators), []
    for row, placed in zip(comp.rows, found.positions[:MAX_PANELS], strict=False):
        traces = []
        for c in placed.values():
            if not isinstance(c, Choice) or c.time is None or c.rss is None:
                continue
            t, r = c.time, c.rss
            tip = (
                f"{cut(row.label)}\ntime ×{t.value:.3f} [{t.low:.3f}–{t.high:.3f}]\n"
                f"peak RSS ×{r.value:.3f} [{r.low:.3f}–{r.high:.3f}]"
            )
            traces.append(
                Trace(
                    cut(c.allocator),
                    colour[c.allocator],
                    (r.value,),
                    (t.value,),
                    x_err=_around([r.value], [r.low], [r.high]),
                    y_err=_around([t.value], [t.low], [t.high]),
                    tips=(tip,),
                )
            )
        x, y = f"peak RSS / {cut(base)}", f"time / {cut(base)}"
        panels.append(Panel(cut(row.label), tuple(traces), x, y, ones="xy"))
    more = _first_rows(len(panels), comp)
    title = f"Time against peak RSS, 95% intervals; lower left is better{more}"
    return [Chart("time-vs-rss", title, tuple(panels), size=(4.6, 3.8))]


def rss_over_time(comp: Comparison, series: Series) -> list[Chart]:
    """Per row with RSS series (the first MAX_PANELS), each allocator's RSS against the
    share of its run that has passed: the median of its runs, and a band from the
    smallest to the largest. Runs of different lengths line up from start to end."""
    cells: dict[tuple[str, Params], dict[str, list[RssSeries]]] = {}
    for a, w, params, s in series:
        cells.setdefault((w, params), {}).setdefault(a, []).append(s)
    rows = [r for r in comp.rows if (r.workload, r.params) in cells][:MAX_PANELS]
    if not rows:
        return []
    at = np.linspace(0.0, 1.0, RSS_POINTS)
    xs = tuple(float(x) for x in at * 100)
    colour, panels = colours(comp.allocators), []
    for row in rows:
        by_alloc = cells[(row.workload, row.params)]
        traces = []
        for a in [a for a in comp.allocators if a in by_alloc]:
            mib = np.array([_share_of_run(s, at) for s in by_alloc[a]]) / 1024
            traces.append(
                Trace(
                    cut(a),
                    colour[a],
                    xs,
                    tuple(np.median(mib, axis=0).tolist()),
                    style="curve",
                    band=(tuple(mib.min(axis=0).tolist()), tuple(mib.max(axis=0).tolist())),
                    note=f"median of {len(mib)} runs",
                )
            )
        title = cut(row.label)
        panels.append(Panel(title, tuple(traces), "% of the run", "RSS (MiB)", from_zero=True))
    more = _first_rows(len(rows), comp)
    title = f"RSS over the run: the median of the runs, the band their range{more}"
    return [Chart("rss-over-time", title, tuple(panels), size=(4.6, 3.4))]


def _share_of_run(s: RssSeries, at: np.ndarray) -> np.ndarray:
    """The series' RSS (KiB) at each share `at` of its run."""
    t = np.asarray(s.t_ms, dtype=float)
    length = t[-1] + s.stride * s.period_us / 1000  # the last point covers a stride
    kib: np.ndarray = np.interp(at * length, t, np.asarray(s.kib, dtype=float))
    return kib


def normalized(comp: Comparison) -> list[Chart]:
    """Speed and peak RSS per row relative to the baseline: bars with the ratio's 95 %
    interval, a log axis when the ratios span more than 10x; a row whose every
    allocator lacks a ratio has no slot, and a row of fixed duration shows its time per
    operation (shown_ratio)."""
    base = comp.baseline
    if base is None:
        return []
    others = [a for a in comp.allocators if a != base]
    colour, out = colours(comp.allocators), []
    for metric in ("time_s", "peak_rss_kib"):
        ratios = {a: [shown_ratio(comp, row, metric, a) for row in comp.rows] for a in others}
        keep = [j for j in range(len(comp.rows)) if any(ratios[a][j] for a in others)]
        if not keep:
            continue
        labels = tuple(cut(comp.rows[j].label) for j in keep)
        traces = []
        for a in others:
            rs = [ratios[a][j] for j in keep]
            vals = [r.value if r else math.nan for r in rs]
            lows = [r.low if r else math.nan for r in rs]
            highs = [r.high if r else math.nan for r in rs]
            traces.append(
                Trace(
                    cut(a),
                    colour[a],
                    labels,
                    tuple(vals),
                    style="bars",
                    y_err=_around(vals, lows, highs),
                )
            )
        values = [r.value for a in others for r in ratios[a] if r]
        log = _doublings(values) if max(values) / max(min(values), 1e-9) > 10 else ()
        word = "speed-up" if comp.speedup and metric == "time_s" else "ratio"
        y = f"{TITLES[metric].lower()} {word} to {cut(base)}"
        panel = Panel("", tuple(traces), "", y, ones="y", log_ticks=log)
        title = f"{TITLES[metric]} relative to {cut(base)} (95% interval)"
        out.append(Chart(f"normalized-{metric}", title, (panel,)))
    return out


def shown_ratio(comp: Comparison, row: Row, metric: str, allocator: str) -> stats.Ratio | None:
    """The ratio a bar of `metric` shows: a row of fixed duration (larson) has no time
    of its own, so its speed bar is the inverse of its throughput's ratio (time per
    operation), or the throughput's ratio itself when the report shows speed-ups."""
    if metric != "time_s" or not row.cells["time_s"][allocator].fixed:
        return row.cells[metric][allocator].ratio
    cell = row.speeds[allocator]
    r = cell.ratio if cell is not None else None
    if r is None or comp.speedup or r.value <= 0:
        return r
    # An interval too few blocks leave unbounded (0 to infinity) stays unbounded.
    low = 1 / r.high if 0 < r.high < math.inf else 0.0
    high = 1 / r.low if r.low > 0 else math.inf
    logs = tuple(-x for x in r.logs)
    return dataclasses.replace(r, value=1 / r.value, low=low, high=high, logs=logs)


def _doublings(values: Sequence[float]) -> tuple[float, ...]:
    """A log axis's ticks: 1 and its doublings and halvings over the values' span."""
    low = math.floor(math.log2(max(min(values), 1e-9)))
    high = math.ceil(math.log2(max(values)))
    return tuple(2.0**k for k in range(low, high + 1))


def scaling(comp: Comparison) -> list[Chart]:
    """Throughput against threads, a line per allocator, a chart per workload run at
    several thread counts (a panel per set of its other parameters); the counts are
    the axis's ticks, and thread counts past the machine's cores are shaded and their
    points hollow: they measure time-slicing, not scaling."""
    if "ops_per_s" not in comp.metrics:
        return []
    colour, cores, out = colours(comp.allocators), comp.cores, []
    for workload, rows in _by_workload(comp).items():
        split = {
            k: p for k, p in _split(rows, "threads").items() if len({_threads(r) for r in p}) > 1
        }
        if not split:
            continue
        counts = tuple(float(c) for c in sorted({_threads(r) for p in split.values() for r in p}))
        panels = []
        for key, prow in split.items():
            traces = []
            for a in comp.allocators:
                pts = [
                    (_threads(r), m / 1e6)
                    for r in sorted(prow, key=_threads)
                    if (m := _median(r, "ops_per_s", a))
                ]
                if pts:
                    xs = tuple(float(x) for x, _ in pts)
                    hollow = tuple(bool(cores) and x > cores for x in xs)
                    ys = tuple(y for _, y in pts)
                    traces.append(Trace(cut(a), colour[a], xs, ys, "lines", hollow=hollow))
            most = max(_threads(r) for r in prow)
            past = cores if cores and most > cores else 0
            title = cut(f"{workload} {key}".strip())
            panels.append(Panel(title, tuple(traces), "threads", "Mops/s", counts, past=past))
        heading = f"{cut(workload)}: thread scaling"
        shaded = any(p.past for p in panels)
        note = f"; shaded: more threads than the {cores} cores" if shaded else ""
        name = f"scaling-{slug(workload)}"
        out.append(Chart(name, heading + note, tuple(panels), heading=heading))
    return out


def overhead_vs_throughput(comp: Comparison) -> list[Chart]:
    """The micromalloc picture: memory overhead against Mops/s, a line per allocator
    through a point per thread count (its label), a panel per set of the other
    parameters; a workload of one row is left to the tables."""
    if "overhead_ratio" not in comp.metrics or "ops_per_s" not in comp.metrics:
        return []
    colour, out = colours(comp.allocators), []
    for workload, rows in _by_workload(comp).items():
        if len(rows) < 2:
            continue
        panels = []
        for key, prow in _split(rows, "threads").items():
            traces = []
            for a in comp.allocators:
                pts = [
                    (o, m / 1e6, _threads(r))
                    for r in prow
                    if (o := _median(r, "overhead_ratio", a)) is not None
                    and (m := _median(r, "ops_per_s", a)) is not None
                ]
                if pts:
                    xs, ys = tuple(p[0] for p in pts), tuple(p[1] for p in pts)
                    texts = tuple(str(p[2]) for p in pts)
                    traces.append(Trace(cut(a), colour[a], xs, ys, "lines", texts=texts))
            x = "memory overhead (RSS / requested)"
            panels.append(Panel(cut(f"{workload} {key}".strip()), tuple(traces), x, "Mops/s"))
        title = f"{cut(workload)}: overhead against throughput (labels: threads)"
        out.append(Chart(f"overhead-vs-throughput-{slug(workload)}", title, tuple(panels)))
    return out


def why_parts(comp: Comparison, found: Findings) -> list[Chart]:
    """Each explained difference (the largest WHY_MOST) beside the signals in its units
    that moved with it: the difference's own bar, then one per signal (seconds of CPU
    for time, MiB at the peak for peak RSS), so that "most of it" can be seen at a
    glance."""
    explained = [w for w in found.whys if w.explained]
    out = []
    axes = (("time", "s", 1.0, "time"), ("rss", "MiB", 1 / 1024, "peak RSS"))
    for axis, unit, scale, name in axes:
        mine = sorted((w for w in explained if w.axis == axis), key=lambda w: -abs(w.delta))
        mine = mine[:WHY_MOST]
        if not mine:
            continue
        signals = dict.fromkeys(f.words for w in mine for f in w.factors if f.share is not None)
        labels = tuple(
            f"{row}: {cut(w.allocator)}" for w, row in zip(mine, _why_rows(mine), strict=True)
        )
        deltas = tuple(w.delta * scale for w in mine)
        traces = [Trace("the difference", "#444444", labels, deltas, "hbars")]
        for i, signal in enumerate(signals):
            parts = tuple(
                next((f.delta * scale for f in w.factors if f.words == signal), math.nan)
                for w in mine
            )
            traces.append(Trace(cut(signal), SIGNAL_COLOURS[i % 10], labels, parts, "hbars"))
        x = f"{name} against {cut(comp.baseline or '')} ({unit})"
        title = f"Why: each decided {name} difference and what accounts for it"
        out.append(Chart(f"why-{axis}", title, (Panel("", tuple(traces), x),)))
    return out


WHY_ROW = 34  # characters of a row's name beside a why's bar


def _why_rows(whys: Sequence[Why]) -> list[str]:
    """Each why's row, named as the report names it where that fits, else by the
    parameters that vary among these rows alone: cutting a long name could leave two
    rows reading alike ("churn count=50000 size_min=16…" twice)."""
    among = label_rows(list(dict.fromkeys((w.workload, w.params) for w in whys)))
    return [
        w.label
        if len(w.label) <= WHY_ROW
        else textwrap.shorten(among[(w.workload, w.params)], WHY_ROW, placeholder="…")
        for w in whys
    ]


def distributions(comp: Comparison) -> list[Chart]:
    """Every run's time, a strip per allocator, a panel per row (the first
    MAX_PANELS)."""
    rows = comp.rows[:MAX_PANELS]
    names = tuple(cut(a) for a in comp.allocators)
    ticks = tuple(float(i) for i in range(len(names)))
    colour, panels = colours(comp.allocators), []
    for row in rows:
        traces = [
            Trace(cut(a), colour[a], (float(i),) * len(vals), vals, "strip")
            for i, a in enumerate(comp.allocators)
            if (vals := tuple(row.cells["time_s"][a].values))
        ]
        panels.append(Panel(cut(row.label), tuple(traces), "", "seconds", ticks, names))
    title = f"Time of every run{_first_rows(len(rows), comp)}"
    return [Chart("distribution-time", title, tuple(panels), size=(4.5, 3.2))]
