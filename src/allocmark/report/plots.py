"""Plots (matplotlib), each written as SVG and PNG, all drawn from one Comparison."""

from __future__ import annotations

import math
import multiprocessing
import os
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")  # files only: never needs a display

import matplotlib.pyplot as plt
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter, FuncFormatter
from matplotlib.typing import ColorType

from allocmark.answer import why
from allocmark.answer.analyze import Comparison
from allocmark.answer.findings import Findings
from allocmark.report import fmt, panels, release_plots

plt.rcParams.update(
    {
        "text.parse_math": False,  # allocator names are text, never mathtext
        "svg.fonttype": "none",  # text stays text (smaller, searchable, escaped)
        "svg.hashsalt": "allocmark",  # stable ids: the same data gives the same file
        "figure.dpi": 100,
        "axes.grid": True,
        "grid.alpha": 0.3,
    }
)


Plot = panels.Plot
Series = panels.Series


Maker = Callable[[], list[Plot]]


def makers(comp: Comparison, found: Findings, series: Series = ()) -> list[Maker]:
    """What draws each kind of plot the comparison (and the runs' RSS series) has the
    data for, in the order the files are listed."""
    if not comp.rows:  # e.g. only the hardening battery: outcomes, not numbers
        return []
    return [
        lambda: time_vs_rss(comp, found),
        lambda: overhead_vs_throughput(comp),
        lambda: scaling(comp),
        lambda: normalized(comp),
        lambda: release_plots.across_versions(comp, found),
        lambda: distributions(comp),
        lambda: why_parts(comp, found),
        lambda: rss_over_time(comp, series),
    ]


def all_plots(comp: Comparison, found: Findings, series: Series = ()) -> list[Plot]:
    """Every plot that the comparison (and the runs' RSS series) has the data for."""
    return [p for make in makers(comp, found, series) for p in _drawn(make)]


def _drawn(make: Maker) -> list[Plot]:
    plots = make()
    for p in plots:
        _bounded_text(p.figure)
    return plots


# The heaviest kinds first (the answer's scatter, RSS over the run, the distributions,
# the whys: most of a second each on the quick suite), so that two processes that
# take the next kind as each finishes end close together.
HEAVY_FIRST = (0, 7, 5, 6, 1, 3, 2, 4)
_PENDING: list[Maker] = []  # what a forked writer draws: its parent's, by index


def write(comp: Comparison, found: Findings, series: Series, directory: Path) -> list[Path]:
    """Every plot as SVG and PNG files in `directory`, in makers()' order. Laying out
    and rendering take seconds: two forked processes (this machine's two cores) each
    draw and write the next kind of plot until none is left. Forked, they start with
    the comparison already read (nothing is pickled) and end with the call."""
    directory.mkdir(parents=True, exist_ok=True)
    kinds = makers(comp, found, series)
    if len(kinds) < 2 or (os.cpu_count() or 1) < 2:
        return [f for i in range(len(kinds)) for f in _write_kind(i, directory, kinds)]
    _PENDING[:] = kinds
    try:
        order = sorted(range(len(kinds)), key=_heavy_first)
        jobs = [(i, directory) for i in order]
        with multiprocessing.get_context("fork").Pool(2) as pool:
            done = dict(zip(order, pool.imap(_write_pending, jobs), strict=True))
    finally:
        _PENDING.clear()
    return [f for i in range(len(kinds)) for f in done[i]]


def _heavy_first(i: int) -> int:
    return HEAVY_FIRST.index(i) if i in HEAVY_FIRST else len(HEAVY_FIRST) + i


def _write_pending(job: tuple[int, Path]) -> list[Path]:
    return _write_kind(job[0], job[1], _PENDING)


def _write_kind(i: int, directory: Path, kinds: Sequence[Maker]) -> list[Path]:
    plots = _drawn(kinds[i])
    try:
        return save(plots, directory)
    finally:
        close(plots)


TEXT_MAX = panels.TEXT_MAX


def _bounded_text(fig: Figure) -> None:
    """Cut every label longer than TEXT_MAX, keeping its start and end: laying out the
    text of a 100,000-character name (a database from elsewhere) took matplotlib 15 s."""
    for t in fig.findobj(Text):
        if len(t.get_text()) > TEXT_MAX:
            t.set_text(panels.cut(t.get_text()))
    for ax in fig.axes:  # tick labels are set again from their formatter at each draw
        for axis in (ax.xaxis, ax.yaxis):
            if isinstance(f := axis.get_major_formatter(), FixedFormatter):
                f.seq = [panels.cut(str(x)) for x in f.seq]


def save(plots: Sequence[Plot], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for p in plots:
        for ext in ("svg", "png"):
            path = directory / f"{p.name}.{ext}"
            # Each figure is laid out once (tight_layout, legends included): a "tight"
            # bounding box would draw it twice more per file.
            # No date in an SVG's metadata: the same report writes the same file.
            p.figure.savefig(path, metadata={"Date": None} if ext == "svg" else None)
            written.append(path)
    return written


def close(plots: Sequence[Plot]) -> None:
    for p in plots:
        plt.close(p.figure)


def _grid(n: int, width: float = 5.0, height: float = 3.8) -> tuple[Figure, list[Axes]]:
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    flat = [ax for line in axes for ax in line]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


# ---------------------------------------------------------------------------
# The plots
# ---------------------------------------------------------------------------
def time_vs_rss(comp: Comparison, found: Findings) -> list[Plot]:
    """The recommendation's picture: per workload row, each allocator's time and peak
    RSS against the baseline, with their 95 % intervals; lower left is better."""
    if comp.baseline is None or len(comp.allocators) < 2:
        return []
    placed = panels.scatter(comp, found)
    if not placed:  # a report read without its findings: no positions to place
        return []
    rows = [row for row, _ in placed]
    fig, axes = _grid(len(rows), width=4.6, height=3.8)
    for ax, (row, points) in zip(axes, placed, strict=True):
        for a, t, r in points:
            ax.errorbar(
                [r.value],
                [t.value],
                xerr=[[r.value - r.low], [r.high - r.value]],
                yerr=[[t.value - t.low], [t.high - t.value]],
                fmt="o",
                capsize=3,
                color=fmt.colour(comp.allocators, a),
                label=panels.cut(a),
            )
        ax.axhline(1, color="#999", lw=0.8)
        ax.axvline(1, color="#999", lw=0.8)
        ax.set_title(panels.wrapped(row.label), fontsize=9)
        ax.set(
            xlabel=f"peak RSS / {panels.cut(comp.baseline or '')}",
            ylabel=f"time / {panels.cut(comp.baseline or '')}",
        )
    _legend(fig, axes)
    first = panels.first_rows(rows, comp)
    fig.suptitle(f"time against peak RSS, 95% intervals; lower left is better{first}")
    return [Plot("time-vs-rss", fig.get_suptitle(), fig)]


def rss_over_time(comp: Comparison, series: Series) -> list[Plot]:
    """Per row, each allocator's RSS against the share of its run that has passed:
    the median of its runs, and a band from the smallest to the largest."""
    rows, cells = panels.rss_cells(comp, series)
    if not rows:
        return []
    fig, axes = _grid(len(rows), width=4.6, height=3.4)
    at = np.linspace(0.0, 1.0, 101)
    for ax, row in zip(axes, rows, strict=True):
        by_alloc = cells[(row.workload, row.params)]
        for a in [a for a in comp.allocators if a in by_alloc]:
            curves = np.array([panels.share_of_run(s, at) for s in by_alloc[a]]) / 1024
            colour = fmt.colour(comp.allocators, a)
            ax.plot(at * 100, np.median(curves, axis=0), label=panels.cut(a), lw=1.2, color=colour)
            ax.fill_between(
                at * 100, curves.min(axis=0), curves.max(axis=0), color=colour, alpha=0.15, lw=0
            )
        ax.set_title(panels.wrapped(row.label), fontsize=9)
        ax.set(xlabel="% of the run", ylabel="RSS (MiB)")
        ax.set_ylim(bottom=0)
    _legend(fig, axes)
    more = panels.first_rows(rows, comp)
    fig.suptitle(f"RSS over the run: median of the runs, band from smallest to largest{more}")
    return [Plot("rss-over-time", fig.get_suptitle(), fig)]


def overhead_vs_throughput(comp: Comparison) -> list[Plot]:
    """The micromalloc picture: x = memory overhead, y = Mops/s, a colour per
    allocator, a point per thread count, a panel per other parameter set."""
    if "overhead_ratio" not in comp.metrics or "ops_per_s" not in comp.metrics:
        return []
    plots = []
    for workload, rows in panels.by_workload(comp).items():
        if len(rows) < 2:
            continue  # one point per allocator: the tables say it all
        split = panels.split(rows, "threads")
        fig, axes = _grid(len(split))
        for ax, (title, prow) in zip(axes, split.items(), strict=True):
            for a in comp.allocators:
                if pts := panels.overhead_points(prow, a):
                    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                    ax.plot(xs, ys, "o-", label=panels.cut(a), color=fmt.colour(comp.allocators, a))
                    for x, y, t in pts:
                        ax.annotate(
                            f"{t}", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points"
                        )
            ax.set(
                title=panels.wrapped(f"{workload} {title}".strip(), 40),
                xlabel="memory overhead (RSS / requested)",
                ylabel="Mops/s",
            )
            ax.title.set_fontsize(9)
        _legend(fig, axes)
        fig.suptitle(f"{workload}: overhead against throughput (labels: threads)")
        plots.append(Plot(f"overhead-vs-throughput-{workload}", fig.get_suptitle(), fig))
    return plots


def scaling(comp: Comparison) -> list[Plot]:
    """Throughput against threads, a line per allocator, for workloads run at
    several thread counts; the counts are the axis's ticks."""
    plots = []
    for scaled in panels.scaling(comp):
        workload, split, counts = scaled.workload, scaled.panels, scaled.counts
        fig, axes = _grid(len(split))
        for ax, (title, prow) in zip(axes, split.items(), strict=True):
            for a in comp.allocators:
                if pts := panels.scaling_points(prow, a):
                    xs, ys = [x for x, _ in pts], [y for _, y in pts]
                    colour = fmt.colour(comp.allocators, a)
                    ax.plot(xs, ys, "o-", label=panels.cut(a), color=colour)
                    _hollow_past(ax, xs, ys, comp.cores, colour)
            _past_cores(ax, comp.cores, max(panels.threads(r) for r in prow))
            ax.set_xticks(counts)  # threads are counted: no tick between two counts
            ax.set(title=panels.wrapped(f"{workload} {title}".strip(), 40))
            ax.set(xlabel="threads", ylabel="Mops/s")
            ax.title.set_fontsize(9)
        _legend(fig, axes)
        past = (
            f"; shaded: more threads than the {comp.cores} cores"
            if comp.cores and counts[-1] > comp.cores
            else ""
        )
        # said in the caption: the figure's own title has no room beside its legend
        fig.suptitle(f"{workload}: thread scaling")
        plots.append(Plot(f"scaling-{workload}", fig.get_suptitle() + past, fig))
    return plots


def _hollow_past(
    ax: Axes, xs: Sequence[int], ys: Sequence[float], cores: int, color: ColorType
) -> None:
    """Points past the cores drawn hollow: they measure time-slicing, not scaling."""
    past = [(x, y) for x, y in zip(xs, ys, strict=True) if cores and x > cores]
    if past:
        # its colour given: the next allocator's line keeps its place in the colour cycle
        ax.plot(*zip(*past, strict=True), "o", color=color, markerfacecolor="white", zorder=3)


def _past_cores(ax: Axes, cores: int, most: int) -> None:
    """The threads beyond the machine's cores, shaded and named."""
    if not cores or most <= cores:
        return
    ax.axvspan(cores + 0.5, most + 0.5, color="0.9", zorder=0)
    ax.text(
        cores + 0.55,
        0.98,
        f"> {cores} cores:\ntime-slicing",
        va="top",
        fontsize=7,
        color="0.35",
        transform=ax.get_xaxis_transform(),
    )


def normalized(comp: Comparison) -> list[Plot]:
    """Speed and peak RSS per row relative to the baseline: bars with the ratio's
    95 % interval as whiskers, log scale when the ratios span more than 10x; a row
    of fixed duration shows its time per operation (panels.shown_ratio)."""
    if comp.baseline is None or not comp.rows:
        return []
    plots = []
    others = [a for a in comp.allocators if a != comp.baseline]
    for metric in ("time_s", "peak_rss_kib"):
        shown, ratios = panels.bars(comp, metric)
        if not shown:
            continue  # no slot without a bar
        width_in = min(18.0, max(6.0, 0.12 * len(shown) * len(others)))
        fig, ax = plt.subplots(figsize=(width_in, 5.0))
        width = 0.8 / len(others)
        values: list[float] = []
        for i, a in enumerate(others):
            xs, ys, lo, hi = [], [], [], []
            for j, k in enumerate(shown):
                if (r := ratios[a][k]) is not None:
                    xs.append(j + (i - (len(others) - 1) / 2) * width)
                    ys.append(r.value)
                    lo.append(r.value - r.low)
                    hi.append(r.high - r.value)
            values += ys
            colour = fmt.colour(comp.allocators, a)
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=panels.cut(a), color=colour)
        ax.axhline(1.0, color="black", linewidth=0.8)
        if values and max(values) / max(min(values), 1e-9) > 10:
            ax.set_yscale("log")
            # Plain numbers: the default log labels are mathtext, which is off here.
            plain = FuncFormatter(lambda v, _pos: f"{v:g}")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda _v, _pos: ""))
        labels = [panels.cut(comp.rows[j].label) for j in shown]
        ax.set_xticks(range(len(shown)), labels, rotation=30, ha="right", fontsize=8)
        word = "speed-up" if comp.speedup and metric == "time_s" else "ratio"
        ax.set_ylabel(f"{fmt.TITLES[metric].lower()} {word} to {panels.cut(comp.baseline)}")
        _outside(ax)
        title = f"{fmt.TITLES[metric]} relative to {comp.baseline} (95% interval)"
        ax.set_title(title)
        fig.tight_layout()
        plots.append(Plot(f"normalized-{metric}", title, fig))
    return plots


def why_parts(comp: Comparison, found: Findings) -> list[Plot]:
    """Each explained difference (why.py) beside the signals in its units that moved
    with it: the difference's own bar, then one per signal (seconds of CPU for time,
    KiB at the peak for peak RSS), so that "most of it" can be seen at a glance."""
    plots = []
    for bars in panels.why_bars(found):
        axis, unit, scale, title = bars.axis, bars.unit, bars.scale, bars.name
        mine, names = bars.differences, bars.signals
        fig, ax = plt.subplots(figsize=(9.0, 1.5 + 0.3 * len(mine) * (1 + len(names)) / 2))
        height = 0.8 / (1 + len(names))
        for i, w in enumerate(mine):
            ax.barh(
                i, w.delta * scale, height, color="0.3", label="the difference" if i == 0 else None
            )
            for k, name in enumerate(names, 1):
                f = next((f for f in w.factors if f.words == name), None)
                if f is not None:
                    ax.barh(
                        i + k * height,
                        f.delta * scale,
                        height,
                        color=f"C{k - 1}",
                        label=name if not any(x.words == name for x in _seen(mine, i)) else None,
                    )
        labels = [
            textwrap.shorten(w.label, 34, placeholder="…") + f": {panels.cut(w.allocator)}"
            for w in mine
        ]
        ax.set_yticks(range(len(mine)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_xlabel(f"{title} against {panels.cut(comp.baseline or '')} ({unit})")
        _outside(ax)
        name = f"Why: each decided {title} difference and what accounts for it"
        ax.set_title(name, fontsize=10)
        fig.tight_layout()
        plots.append(Plot(f"why-{axis}", name, fig))
    return plots


def _seen(mine: Sequence[why.Why], i: int) -> list[why.Factor]:
    """The factors drawn before difference i (each signal is named in the legend once)."""
    return [f for w in mine[:i] for f in w.factors if f.share is not None]


def distributions(comp: Comparison) -> list[Plot]:
    """Every repetition's time, a strip per allocator, a panel per row."""
    if not comp.rows:
        return []
    fig, axes = _grid(len(comp.rows), width=4.5, height=3.2)
    for ax, row in zip(axes, comp.rows, strict=True):
        for i, a in enumerate(comp.allocators):
            vals = row.cells["time_s"][a].values
            colour = fmt.colour(comp.allocators, a)
            ax.plot([i] * len(vals), vals, "o", alpha=0.6, markersize=4, color=colour)
        names = [panels.cut(a) for a in comp.allocators]
        ax.set_xticks(range(len(comp.allocators)), names, rotation=45, ha="right", fontsize=7)
        ax.set(title=row.label, ylabel="seconds")
        ax.title.set_fontsize(8)
    fig.suptitle("Time of every repetition")
    fig.tight_layout()
    return [Plot("distribution-time", "Time of every repetition", fig)]


def _legend(fig: Figure, axes: Sequence[Axes]) -> None:
    """One legend for the panels, right of them: every allocator any panel drew."""
    named: dict[str, Artist] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            named.setdefault(label, handle)
    right = 1.0
    if named:
        legend = fig.legend(list(named.values()), list(named), loc="upper right", fontsize=7)
        # The panels end where the legend begins, however long the names are.
        width = legend.get_window_extent().width / fig.bbox.width
        right = 1 - min(width + 0.01, 0.5)
    fig.tight_layout(rect=(0, 0, right, 0.95))


def _outside(ax: Axes) -> None:
    """A one-panel figure's legend, right of its data, never on it."""
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
