"""Plot files (matplotlib), each chart (chart.py) written as SVG and PNG: a translation
only, every number, colour and label the chart's, as the page's figures (figures.py)
have them."""

from __future__ import annotations

import math
import multiprocessing
import os
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: never needs a display

import matplotlib.pyplot as plt
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter, FuncFormatter

from allocmark import files
from allocmark.report.chart import TEXT_MAX, Chart, Panel, Trace, Whiskers, cut

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


@dataclass(frozen=True)
class Plot:
    """One chart drawn: written as name.svg and name.png."""

    name: str  # file stem
    title: str
    figure: Figure


def drawn(charts: Sequence[Chart]) -> list[Plot]:
    return [draw(c) for c in charts]


_PENDING: list[Chart] = []  # what a forked writer draws: its parent's, by index


def write(charts: Sequence[Chart], directory: Path) -> list[Path]:
    """Every chart as SVG and PNG files in `directory`, in the charts' order. Laying
    out and rendering take seconds: two forked processes (this machine's two cores)
    each draw and write the next chart, the heaviest first, until none is left.
    Forked, they start with the charts already made (nothing is pickled) and end with
    the call."""
    files.directory(directory, what="--plots")  # DIR alone: never the directories above
    if len(charts) < 2 or (os.cpu_count() or 1) < 2:
        return [f for c in charts for f in _write_one(c, directory)]
    _PENDING[:] = charts
    try:
        order = sorted(range(len(charts)), key=lambda i: -charts[i].weight)
        jobs = [(i, directory) for i in order]
        with multiprocessing.get_context("fork").Pool(2) as pool:
            done = dict(zip(order, pool.imap(_write_pending, jobs), strict=True))
    finally:
        _PENDING.clear()
    return [f for i in range(len(charts)) for f in done[i]]


def _write_pending(job: tuple[int, Path]) -> list[Path]:
    return _write_one(_PENDING[job[0]], job[1])


def _write_one(chart: Chart, directory: Path) -> list[Path]:
    plot = draw(chart)
    try:
        return save([plot], directory)
    finally:
        close([plot])


def _bounded_text(fig: Figure) -> None:
    """Cut every label longer than TEXT_MAX, keeping its start and end: laying out the
    text of a 100,000-character name (a database from elsewhere) took matplotlib 15 s.
    The charts' strings are cut already; this holds for what matplotlib joins."""
    for t in fig.findobj(Text):
        if len(t.get_text()) > TEXT_MAX:
            t.set_text(cut(t.get_text()))
    for ax in fig.axes:  # tick labels are set again from their formatter at each draw
        for axis in (ax.xaxis, ax.yaxis):
            if isinstance(f := axis.get_major_formatter(), FixedFormatter):
                f.seq = [cut(str(x)) for x in f.seq]


def save(plots: Sequence[Plot], directory: Path) -> list[Path]:
    files.directory(directory, what="--plots")
    written = []
    for p in plots:
        for ext in ("svg", "png"):
            path = directory / f"{p.name}.{ext}"
            # Each figure is laid out once (tight_layout, legends included): a "tight"
            # bounding box would draw it twice more per file.
            # No date in an SVG's metadata: the same report writes the same file.
            with files.writing(path, what="--plots", binary=True) as f:
                p.figure.savefig(f, format=ext, metadata={"Date": None} if ext == "svg" else None)
            written.append(path)
    return written


def close(plots: Sequence[Plot]) -> None:
    for p in plots:
        plt.close(p.figure)


# ---------------------------------------------------------------------------
# A chart drawn
# ---------------------------------------------------------------------------
def draw(chart: Chart) -> Plot:
    fig = _bars(chart.panels[0], chart.title, chart.across) if chart.bars else _panels(chart)
    _bounded_text(fig)
    return Plot(chart.name, chart.title, fig)


def _panels(chart: Chart) -> Figure:
    """A grid of panels, `columns` to a line, one legend right of them."""
    n = len(chart.panels)
    cols = max(1, min(n, chart.columns))
    lines = math.ceil(n / cols)
    width, height = chart.size
    fig, grid = plt.subplots(lines, cols, figsize=(width * cols, height * lines), squeeze=False)
    axes = [ax for line in grid for ax in line]
    for ax in axes[n:]:
        ax.set_visible(False)
    for ax, panel in zip(axes, chart.panels, strict=False):
        for t in panel.traces:
            _trace(ax, t)
        _panel(ax, panel)
    fig.suptitle(chart.heading or chart.title)
    _legend(fig, axes[:n])
    return fig


def _trace(ax: Axes, t: Trace) -> None:
    xs = [float(x) for x in t.xs]
    style = "-" if t.style == "curve" else t.marker + ("-" if t.style == "lines" else "")
    if t.band:
        ax.fill_between(xs, t.band[0], t.band[1], color=t.colour, alpha=0.15, lw=0)
    hollow = bool(t.hollow) and all(t.hollow)
    if t.x_err or t.y_err:
        ax.errorbar(
            xs,
            t.ys,
            xerr=_lengths(t.x_err),
            yerr=_lengths(t.y_err),
            fmt=style,
            capsize=3,
            color=t.colour,
            mfc="white" if hollow else t.colour,
            label=t.name,
        )
    elif t.style == "strip":
        ax.plot(xs, t.ys, style, alpha=0.6, markersize=4, color=t.colour, label=t.name)
    else:
        face = "white" if hollow else t.colour
        lw = 1.2 if t.style == "curve" else None
        ax.plot(xs, t.ys, style, color=t.colour, markerfacecolor=face, lw=lw, label=t.name)
        if any(t.hollow) and not hollow:  # drawn over the line: in its colour, white inside
            past = [(x, y) for x, y, h in zip(xs, t.ys, t.hollow, strict=True) if h]
            ax.plot(
                *zip(*past, strict=True), "o", color=t.colour, markerfacecolor="white", zorder=3
            )
    for x, y, text in zip(xs, t.ys, t.texts, strict=False):
        ax.annotate(text, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")


def _lengths(err: Whiskers | None) -> list[list[float]] | None:
    return [list(err.below), list(err.above)] if err else None


def _panel(ax: Axes, panel: Panel) -> None:
    ax.set_title(textwrap.fill(panel.title, 44) or panel.title, fontsize=9)
    ax.set(xlabel=panel.x_title, ylabel=panel.y_title)
    if panel.tick_text:
        ax.set_xticks(panel.ticks, panel.tick_text, rotation=30, ha="right", fontsize=7)
        # Debian's builds stand right of their version's tick
        ax.set_xlim(panel.ticks[0] - 0.5, panel.ticks[-1] + 0.7)
    elif panel.ticks:
        ax.set_xticks(panel.ticks)  # counted things: no tick between two counts
    if "x" in panel.ones:
        ax.axvline(1, color="#999", lw=0.8)
    if "y" in panel.ones:
        ax.axhline(1, color="#999", lw=0.8)
    if panel.from_zero:
        ax.set_ylim(bottom=0)
    if panel.past:
        _past_cores(ax, panel.past, max(panel.ticks))
    for m in panel.marks:
        ax.annotate(
            m.text,
            (m.x, m.y),
            textcoords="offset points",
            xytext=(0, 7),
            ha="center",
            fontsize=7,
            color="#d62728" if m.worse else "#2ca02c",
        )


def _past_cores(ax: Axes, cores: int, most: float) -> None:
    """The threads beyond the machine's cores, shaded and named."""
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


def _bars(panel: Panel, title: str, across: bool) -> Figure:
    """Bars grouped by their x: a row's ratios (vertical) or a difference and the
    signals beside it (horizontal)."""
    n, k = len(panel.traces[0].xs), len(panel.traces)
    size = (9.0, 1.5 + 0.3 * n * k / 2) if across else (min(18.0, max(6.0, 0.12 * n * k)), 5.0)
    fig, ax = plt.subplots(figsize=size)
    width = 0.8 / k
    for i, t in enumerate(panel.traces):
        at = [j + (i - (k - 1) / 2) * width for j in range(n)]
        drawn = [(x, y, j) for j, (x, y) in enumerate(zip(at, t.ys, strict=True)) if y == y]
        if not drawn:
            continue
        xs, ys, shown = [d[0] for d in drawn], [d[1] for d in drawn], [d[2] for d in drawn]
        if across:
            ax.barh(xs, ys, width, color=t.colour, label=t.name)
        else:
            e = t.y_err
            err = [[e.below[j] for j in shown], [e.above[j] for j in shown]] if e else None
            ax.bar(xs, ys, width, yerr=err, capsize=2, color=t.colour, label=t.name)
    names = [str(x) for x in panel.traces[0].xs]
    if across:
        ax.set_yticks(range(n), names, fontsize=7)
        ax.invert_yaxis()
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_xlabel(panel.x_title)
    else:
        ax.set_xticks(range(n), names, rotation=30, ha="right", fontsize=8)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_ylabel(panel.y_title)
        if panel.log_ticks:
            ax.set_yscale("log")
            ax.set_yticks(panel.log_ticks)
            # Plain numbers: the default log labels are mathtext, which is off here.
            ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda _v, _pos: ""))
    ax.set_title(title, fontsize=10)
    # The legend right of the data, never on it.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    fig.tight_layout()
    return fig


def _legend(fig: Figure, axes: Sequence[Axes]) -> None:
    """One legend for the panels, right of them: every name any panel drew."""
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
