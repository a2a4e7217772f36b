"""The HTML page's figures: each a Plotly figure written as plain JSON (data and
layout) from the comparison, drawn in the browser by the plotly.js bundle the page
carries once (vendor/). Building the JSON here, rather than through the plotly
Python package's validated Figure objects or matplotlib's SVG, is what lets the page
be written in a fraction of a second: both of those took seconds a figure. The
figures are the ones plots.py draws for `--plots` and Markdown, from the same
helpers; every allocator has the one colour fmt.colour gives it, in both."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from allocmark.answer.analyze import Comparison
from allocmark.answer.findings import Findings
from allocmark.report import fmt, panels, plotly_json as kit, versions
from allocmark.report.panels import Series
from allocmark.report.plotly_json import Figure, Json

MAX_PANELS = panels.MAX_SCATTER_PANELS


def page_figures(comp: Comparison, found: Findings, series: Series = ()) -> list[Figure]:
    """Every figure the comparison has the data for, the answer's picture first."""
    if not comp.rows:
        return []
    made = [
        time_vs_rss(comp, found),
        *why_parts(comp, found),
        *normalized(comp),
        *scaling(comp),
        *overhead_vs_throughput(comp),
        *across_versions(comp, found),
        rss_over_time(comp, series),
        distributions(comp),
    ]
    return [f for f in made if f is not None]


# ---------------------------------------------------------------------------
# The figures
# ---------------------------------------------------------------------------
def time_vs_rss(comp: Comparison, found: Findings) -> Figure | None:
    """Per row, each allocator's speed and peak RSS against the baseline, with their
    95 % intervals: the recommendation's picture; lower left is better."""
    if comp.baseline is None or len(comp.allocators) < 2:
        return None
    placed = panels.scatter(comp, found)
    if not placed:  # a report read without its findings: no positions to place
        return None
    rows = [row for row, _ in placed]
    base = comp.baseline
    layout, ks = kit.grid([r.label for r in rows], f"peak RSS / {base}", f"time / {base}")
    data: list[Json] = []
    seen: set[str] = set()
    for (row, points), k in zip(placed, ks, strict=True):
        for a, t, r in points:
            data.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "x": [kit.num(r.value)],
                    "y": [kit.num(t.value)],
                    "name": kit.text(a),
                    "legendgroup": kit.text(a),
                    "showlegend": kit.legend_once(seen, a),
                    "marker": {"color": fmt.colour(comp.allocators, a), "size": 8},
                    "error_x": kit.whisker([r.value], [r.low], [r.high]),
                    "error_y": kit.whisker([t.value], [t.low], [t.high]),
                    "hovertemplate": f"<b>{kit.text(a)}</b><br>{kit.text(row.label)}<br>"
                    f"time ×{t.value:.3f} [{t.low:.3f}–{t.high:.3f}]<br>"
                    f"peak RSS ×{r.value:.3f} [{r.low:.3f}–{r.high:.3f}]<extra></extra>",
                    **kit.axes(k),
                }
            )
        kit.one_line(layout, k, "x", 1.0)
        kit.one_line(layout, k, "y", 1.0)
    more = panels.first_rows(rows, comp)
    title = f"Time against peak RSS, 95% intervals; lower left is better{more}"
    return Figure("plot-time-vs-rss", title, tuple(data), layout)


def rss_over_time(comp: Comparison, series: Series) -> Figure | None:
    """Per row, each allocator's RSS over the share of its run that has passed: the
    median of its runs, and a band from the smallest to the largest."""
    rows, cells = panels.rss_cells(comp, series)
    if not rows:
        return None
    layout, ks = kit.grid([r.label for r in rows], "% of the run", "RSS (MiB)")
    at = np.linspace(0.0, 1.0, 41)  # every 2.5 % of the run
    data: list[Json] = []
    seen: set[str] = set()
    for row, k in zip(rows, ks, strict=True):
        by_alloc = cells[(row.workload, row.params)]
        for a in [a for a in comp.allocators if a in by_alloc]:
            curves = np.array([panels.share_of_run(s, at) for s in by_alloc[a]]) / 1024
            colour = fmt.colour(comp.allocators, a)
            # x0 and dx, not an x per point: the same 41 numbers in 300 traces
            common = {"legendgroup": kit.text(a), "x0": 0, "dx": 2.5, **kit.axes(k)}
            data.append(  # the band: the smallest, then the largest filled up to it
                {
                    **common,
                    "y": kit.nums(curves.min(axis=0)),
                    "mode": "lines",
                    "line": {"width": 0},
                    "showlegend": False,
                    "hoverinfo": "skip",
                    "type": "scatter",
                }
            )
            data.append(
                {
                    **common,
                    "y": kit.nums(curves.max(axis=0)),
                    "mode": "lines",
                    "line": {"width": 0},
                    "fill": "tonexty",
                    "fillcolor": colour + "26",
                    "showlegend": False,
                    "hoverinfo": "skip",
                    "type": "scatter",
                }
            )
            data.append(
                {
                    **common,
                    "type": "scatter",
                    "mode": "lines",
                    "y": kit.nums(np.median(curves, axis=0)),
                    "name": kit.text(a),
                    "showlegend": kit.legend_once(seen, a),
                    "line": {"color": colour, "width": 1.5},
                    "hovertemplate": f"<b>{kit.text(a)}</b><br>%{{x:.0f}}% of the run: "
                    f"%{{y:.1f}} MiB (median of {len(curves)} runs)<extra></extra>",
                }
            )
    more = panels.first_rows(rows, comp)
    title = f"RSS over the run: the median of the runs, the band their range{more}"
    return Figure("plot-rss-over-time", title, tuple(data), layout)


def normalized(comp: Comparison) -> list[Figure]:
    """Speed and peak RSS per row relative to the baseline: bars with the ratio's 95 %
    interval; a row of fixed duration shows its time per operation (throughput)."""
    if comp.baseline is None:
        return []
    others = [a for a in comp.allocators if a != comp.baseline]
    out = []
    for metric in ("time_s", "peak_rss_kib"):
        keep, ratios = panels.bars(comp, metric)
        if not keep:
            continue
        labels = [kit.text(panels.cut(comp.rows[i].label)) for i in keep]
        data = []
        for a in others:
            rs = [ratios[a][i] for i in keep]
            vals = [r.value if r else math.nan for r in rs]
            data.append(
                {
                    "type": "bar",
                    "name": kit.text(a),
                    "x": labels,
                    "y": kit.nums(vals),
                    "marker": {"color": fmt.colour(comp.allocators, a)},
                    "error_y": kit.whisker(
                        vals,
                        [r.low if r else math.nan for r in rs],
                        [r.high if r else math.nan for r in rs],
                    ),
                    "hovertemplate": f"<b>{kit.text(a)}</b><br>%{{x}}: ×%{{y:.3f}}<extra></extra>",
                }
            )
        values = [r.value for a in others for r in ratios[a] if r]
        layout = kit.base(460)
        layout["barmode"] = "group"
        layout["xaxis"] = {"tickangle": -30, "automargin": True}
        word = "speed-up" if comp.speedup and metric == "time_s" else "ratio"
        layout["yaxis"] = kit.axis_title(f"{fmt.TITLES[metric].lower()} {word} to {comp.baseline}")
        if max(values) / max(min(values), 1e-9) > 10:
            layout["yaxis"].update(type="log", tickmode="array", tickvals=_doublings(values))
        kit.one_line(layout, "", "y", 1.0)
        title = f"{fmt.TITLES[metric]} relative to {comp.baseline} (95% interval)"
        out.append(Figure(f"plot-normalized-{metric}", title, tuple(data), layout))
    return out


def scaling(comp: Comparison) -> list[Figure]:
    """Throughput against threads, a line per allocator, for each workload run at
    several thread counts; the counts are the axis's ticks."""
    out = []
    for fig in panels.scaling(comp):
        workload, split, threads = fig.workload, fig.panels, fig.counts
        layout, ks = kit.grid([f"{workload} {t}".strip() for t in split], "threads", "Mops/s")
        data: list[Json] = []
        seen: set[str] = set()
        for prow, k in zip(split.values(), ks, strict=True):
            for a in comp.allocators:
                if not (pts := panels.scaling_points(prow, a)):
                    continue
                data.append(
                    {
                        "type": "scatter",
                        "mode": "lines+markers",
                        "x": [x for x, _ in pts],
                        "y": kit.nums([y for _, y in pts]),
                        "name": kit.text(a),
                        "legendgroup": kit.text(a),
                        "showlegend": kit.legend_once(seen, a),
                        "line": {"color": fmt.colour(comp.allocators, a)},
                        **kit.axes(k),
                    }
                )
            layout[f"xaxis{k}"].update({"tickmode": "array", "tickvals": threads})
            if comp.cores and threads[-1] > comp.cores:
                layout["shapes"].append(_past_cores(k, comp.cores, threads[-1]))
        past = f"; shaded: more threads than the {comp.cores} cores" if layout["shapes"] else ""
        title = f"{workload}: thread scaling{past}"
        out.append(Figure(f"plot-scaling-{panels.slug(workload)}", title, tuple(data), layout))
    return out


def _doublings(values: Sequence[float]) -> list[float]:
    """A log axis's ticks: 1 and its doublings and halvings over the values' span."""
    low = math.floor(math.log2(max(min(values), 1e-9)))
    high = math.ceil(math.log2(max(values)))
    return [2.0**k for k in range(low, high + 1)]


def _past_cores(k: str, cores: int, most: int) -> Json:
    return {
        "type": "rect",
        "xref": f"x{k}",
        "yref": f"y{k} domain",
        "x0": cores + 0.5,
        "x1": most + 0.5,
        "y0": 0,
        "y1": 1,
        "fillcolor": "#e6e6e6",
        "line": {"width": 0},
        "layer": "below",
    }


def overhead_vs_throughput(comp: Comparison) -> list[Figure]:
    """Memory overhead against throughput, a point per thread count (its label)."""
    if "overhead_ratio" not in comp.metrics or "ops_per_s" not in comp.metrics:
        return []
    out = []
    for workload, rows in panels.by_workload(comp).items():
        if len(rows) < 2:
            continue
        split = panels.split(rows, "threads")
        x, y = "memory overhead (RSS / requested)", "Mops/s"
        layout, ks = kit.grid([f"{workload} {t}".strip() for t in split], x, y)
        data: list[Json] = []
        seen: set[str] = set()
        for prow, k in zip(split.values(), ks, strict=True):
            for a in comp.allocators:
                if pts := panels.overhead_points(prow, a):
                    data.append(
                        {
                            "type": "scatter",
                            "mode": "lines+markers+text",
                            "x": kit.nums([p[0] for p in pts]),
                            "y": kit.nums([p[1] for p in pts]),
                            "text": [str(p[2]) for p in pts],
                            "textposition": "top right",
                            "textfont": {"size": 9},
                            "name": kit.text(a),
                            "legendgroup": kit.text(a),
                            "showlegend": kit.legend_once(seen, a),
                            "line": {"color": fmt.colour(comp.allocators, a)},
                            **kit.axes(k),
                        }
                    )
        title = f"{workload}: overhead against throughput (labels: threads)"
        out.append(Figure(f"plot-overhead-{panels.slug(workload)}", title, tuple(data), layout))
    return out


def why_parts(comp: Comparison, found: Findings) -> list[Figure]:
    """Each explained difference beside the signals in its units that moved with it."""
    out = []
    for bars in panels.why_bars(found):
        axis, unit, scale, name = bars.axis, bars.unit, bars.scale, bars.name
        mine, signals = bars.differences, bars.signals
        labels = [kit.text(f"{panels.cut(w.label)}: {w.allocator}") for w in mine]
        data: list[Json] = [
            _bars("the difference", labels, [w.delta * scale for w in mine], "#444")
        ]
        for i, signal in enumerate(signals):
            deltas = [
                next((f.delta * scale for f in w.factors if f.words == signal), math.nan)
                for w in mine
            ]
            data.append(_bars(signal, labels, deltas, fmt.SIGNAL_COLOURS[i % 10]))
        layout = kit.base(120 + 22 * len(mine) * (1 + len(signals)) // 2 + 60)
        layout.update(barmode="group", bargap=0.25)
        layout["yaxis"] = {"autorange": "reversed", "automargin": True, "tickfont": {"size": 9}}
        layout["xaxis"] = kit.axis_title(f"{name} against {comp.baseline} ({unit})")
        title = f"Why: each decided {name} difference and what accounts for it"
        out.append(Figure(f"plot-why-{axis}", title, tuple(data), layout))
    return out


def _bars(name: str, labels: list[str], values: list[float], colour: str) -> Json:
    return {
        "type": "bar",
        "orientation": "h",
        "name": kit.text(name),
        "y": labels,
        "x": kit.nums(values),
        "marker": {"color": colour},
    }


def distributions(comp: Comparison) -> Figure | None:
    """Every repetition's time, a strip per allocator, a panel per row."""
    rows = comp.rows[:MAX_PANELS]
    layout, ks = kit.grid([r.label for r in rows], "", "seconds")
    data: list[Json] = []
    seen: set[str] = set()
    for row, k in zip(rows, ks, strict=True):
        for a in comp.allocators:
            values = row.cells["time_s"][a].values
            if values:
                data.append(
                    {
                        "type": "scatter",
                        "mode": "markers",
                        "x": [kit.text(a)] * len(values),
                        "y": kit.nums(values),
                        "name": kit.text(a),
                        "legendgroup": kit.text(a),
                        "showlegend": kit.legend_once(seen, a),
                        "marker": {
                            "color": fmt.colour(comp.allocators, a),
                            "size": 5,
                            "opacity": 0.6,
                        },
                        **kit.axes(k),
                    }
                )
        layout[f"xaxis{k}"]["showticklabels"] = False  # the legend names the strips
    title = f"Time of every repetition{panels.first_rows(rows, comp)}"
    return Figure("plot-distribution-time", title, tuple(data), layout)


def across_versions(comp: Comparison, found: Findings) -> list[Figure]:
    """Per family with two or more versions: a line of two panels (speed, peak RSS)
    per row, each version against the baseline in version order, the decided changes
    from the version before written above their points (versions.py)."""
    out = []
    for fam in versions.families(comp, found):
        titles = [
            f"{r.label}: {versions.what(fam, r, m)}" for r in fam.rows for m in versions.METRICS
        ]
        layout, ks = kit.grid(titles, "", f"/ {comp.baseline}", columns=2)
        data: list[Json] = []
        seen: set[str] = set()
        cells = [(r, m) for r in fam.rows for m in versions.METRICS]
        for (row, metric), k in zip(cells, ks, strict=True):
            for line in versions.lines(fam, row, metric):
                marker, colour, hollow = versions.SERIES[line.series]
                data.append(
                    {
                        "type": "scatter",
                        "mode": "markers" if hollow else "lines+markers",
                        "x": kit.nums(line.xs),
                        "y": kit.nums(line.ys),
                        "error_y": kit.whisker(
                            line.ys,
                            [y - b for y, b in zip(line.ys, line.below, strict=True)],
                            [y + a for y, a in zip(line.ys, line.above, strict=True)],
                        ),
                        "name": kit.text(line.series),
                        "legendgroup": kit.text(line.series),
                        "showlegend": kit.legend_once(seen, line.series),
                        "marker": {
                            "symbol": _SYMBOLS[marker] + ("-open" if hollow else ""),
                            "color": colour,
                            "size": 8,
                        },
                        "line": {"color": colour},
                        **kit.axes(k),
                    }
                )
            for m in versions.marks(fam, row, metric):
                layout["annotations"].append(
                    {
                        "text": m.text,
                        "x": m.x,
                        "y": m.y,
                        "xref": f"x{k}",
                        "yref": f"y{k}",
                        "yshift": 12,
                        "showarrow": False,
                        "font": {"size": 9, "color": "#d62728" if m.worse else "#2ca02c"},
                    }
                )
            ticks = [kit.text(v) for v in fam.versions]
            layout[f"xaxis{k}"].update(
                tickmode="array", tickvals=list(range(len(ticks))), ticktext=ticks
            )
            kit.one_line(layout, k, "y", 1.0)
        name = f"plot-versions-{panels.slug(fam.name)}"
        out.append(Figure(name, versions.title(fam, comp), tuple(data), layout))
    return out


_SYMBOLS = {"o": "circle", "s": "square", "D": "diamond"}
