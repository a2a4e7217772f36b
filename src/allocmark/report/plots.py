"""Plots (matplotlib), each written as SVG and PNG, all drawn from one Comparison."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")  # files only: never needs a display

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.ticker import FixedFormatter, FuncFormatter
from matplotlib.typing import ColorType

from allocmark import stats
from allocmark.allocators import lineage
from allocmark.answer import recommend, releases, why
from allocmark.answer.analyze import Comparison, Row, value_text
from allocmark.model import Params, RssSeries
from allocmark.report import fmt

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
    name: str  # file stem
    title: str
    figure: Figure


Series = Sequence[tuple[str, str, Params, RssSeries]]  # (allocator, workload, params, series)


def all_plots(comp: Comparison, series: Series = ()) -> list[Plot]:
    """Every plot that the comparison (and the runs' RSS series) has the data for."""
    if not comp.rows:  # e.g. only the hardening battery: outcomes, not numbers
        return []
    makers: list[Callable[[Comparison], list[Plot]]] = [
        time_vs_rss,
        overhead_vs_throughput,
        scaling,
        normalized,
        across_versions,
        distributions,
        why_parts,
    ]
    plots = [p for make in makers for p in make(comp)] + rss_over_time(comp, series)
    for p in plots:
        _bounded_text(p.figure)
    return plots


TEXT_MAX = 80  # characters of one label; names are at most 64, a crafted database's may not be


def _bounded_text(fig: Figure) -> None:
    """Cut every label longer than TEXT_MAX, keeping its start and end: laying out the
    text of a 100,000-character name (a database from elsewhere) took matplotlib 15 s."""
    for t in fig.findobj(Text):
        if len(t.get_text()) > TEXT_MAX:
            t.set_text(_cut(t.get_text()))
    for ax in fig.axes:  # tick labels are set again from their formatter at each draw
        for axis in (ax.xaxis, ax.yaxis):
            if isinstance(f := axis.get_major_formatter(), FixedFormatter):
                f.seq = [_cut(str(x)) for x in f.seq]


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_MAX else f"{text[: TEXT_MAX - 12]}…{text[-11:]}"


def save(plots: Sequence[Plot], directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for p in plots:
        for ext in ("svg", "png"):
            path = directory / f"{p.name}.{ext}"
            p.figure.savefig(path, bbox_inches="tight")
            written.append(path)
    return written


def close(plots: Sequence[Plot]) -> None:
    for p in plots:
        plt.close(p.figure)


# ---------------------------------------------------------------------------
# Grouping helpers: rows of one workload, split by every parameter but one.
# ---------------------------------------------------------------------------
def _by_workload(comp: Comparison) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for row in comp.rows:
        out.setdefault(row.workload, []).append(row)
    return out


def _panels(rows: Sequence[Row], along: str) -> dict[str, list[Row]]:
    """Rows split into panels by the parameters that vary, except `along`."""
    varying = {
        k for r in rows for k, v in r.params if any(dict(o.params).get(k) != v for o in rows)
    }
    out: dict[str, list[Row]] = {}
    for r in rows:
        key = " ".join(f"{k}={value_text(v)}" for k, v in r.params if k in varying - {along})
        out.setdefault(key, []).append(r)
    return out


def _median(row: Row, metric: str, allocator: str) -> float | None:
    s = row.cells[metric][allocator].summary
    return s.median if s else None


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
def time_vs_rss(comp: Comparison) -> list[Plot]:
    """The recommendation's picture: per workload row, each allocator's time and peak
    RSS against the baseline, with their 95 % intervals; lower left is better."""
    if comp.baseline is None or len(comp.allocators) < 2:
        return []
    rows = comp.rows[:MAX_SCATTER_PANELS]
    fig, axes = _grid(len(rows), width=4.6, height=3.8)
    for ax, row in zip(axes, rows, strict=True):
        for a, c in recommend.positions(comp, row).items():
            if not isinstance(c, recommend.Choice) or c.time is None or c.rss is None:
                continue
            t, r = c.time, c.rss
            ax.errorbar(
                [r.value],
                [t.value],
                xerr=[[r.value - r.low], [r.high - r.value]],
                yerr=[[t.value - t.low], [t.high - t.value]],
                fmt="o",
                capsize=3,
                label=_cut(a),
            )
        ax.axhline(1, color="#999", lw=0.8)
        ax.axvline(1, color="#999", lw=0.8)
        ax.set_title(_wrapped(row.label), fontsize=9)
        ax.set(
            xlabel=f"peak RSS / {_cut(comp.baseline or '')}",
            ylabel=f"time / {_cut(comp.baseline or '')}",
        )
    _legend(fig, axes)
    first = _first(rows, comp)
    fig.suptitle(f"time against peak RSS, 95% intervals; lower left is better{first}")
    return [Plot("time-vs-rss", fig.get_suptitle(), fig)]


MAX_SCATTER_PANELS = 12


def rss_over_time(comp: Comparison, series: Series) -> list[Plot]:
    """Per row, each allocator's RSS against the share of its run that has passed:
    the median of its runs, and a band from the smallest to the largest."""
    cells: dict[tuple[str, Params], dict[str, list[RssSeries]]] = {}
    for a, w, params, s in series:
        cells.setdefault((w, params), {}).setdefault(a, []).append(s)
    rows = [r for r in comp.rows if (r.workload, r.params) in cells][:MAX_SCATTER_PANELS]
    if not rows:
        return []
    fig, axes = _grid(len(rows), width=4.6, height=3.4)
    at = np.linspace(0.0, 1.0, 101)
    for ax, row in zip(axes, rows, strict=True):
        by_alloc = cells[(row.workload, row.params)]
        for a in [a for a in comp.allocators if a in by_alloc]:
            curves = np.array([share_of_run(s, at) for s in by_alloc[a]]) / 1024
            (line,) = ax.plot(at * 100, np.median(curves, axis=0), label=_cut(a), lw=1.2)
            ax.fill_between(
                at * 100,
                curves.min(axis=0),
                curves.max(axis=0),
                color=line.get_color(),
                alpha=0.15,
                lw=0,
            )
        ax.set_title(_wrapped(row.label), fontsize=9)
        ax.set(xlabel="% of the run", ylabel="RSS (MiB)")
        ax.set_ylim(bottom=0)
    _legend(fig, axes)
    more = f" (first {len(rows)} of {len(comp.rows)} rows)" if len(comp.rows) > len(rows) else ""
    fig.suptitle(f"RSS over the run: median of the runs, band from smallest to largest{more}")
    return [Plot("rss-over-time", fig.get_suptitle(), fig)]


def _wrapped(label: str) -> str:
    """A row label on lines narrow enough for a panel's title."""
    return "\n".join(textwrap.wrap(label, 48)) or label


def share_of_run(s: RssSeries, at: np.ndarray) -> np.ndarray:
    """The series' RSS (KiB) at each share `at` of its run; runs of different
    lengths line up from start to end."""
    t = np.asarray(s.t_ms, dtype=float)
    length = t[-1] + s.stride * s.period_us / 1000  # the last point covers a stride
    kib: np.ndarray = np.interp(at * length, t, np.asarray(s.kib, dtype=float))
    return kib


def overhead_vs_throughput(comp: Comparison) -> list[Plot]:
    """The micromalloc picture: x = memory overhead, y = Mops/s, a colour per
    allocator, a point per thread count, a panel per other parameter set."""
    if "overhead_ratio" not in comp.metrics or "ops_per_s" not in comp.metrics:
        return []
    plots = []
    for workload, rows in _by_workload(comp).items():
        if len(rows) < 2:
            continue  # one point per allocator: the tables say it all
        panels = _panels(rows, "threads")
        fig, axes = _grid(len(panels))
        for ax, (title, prow) in zip(axes, panels.items(), strict=True):
            for a in comp.allocators:
                pts = [
                    (x, y / 1e6, dict(r.params).get("threads"))
                    for r in prow
                    if (x := _median(r, "overhead_ratio", a)) is not None
                    and (y := _median(r, "ops_per_s", a)) is not None
                ]
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=_cut(a))
                    for x, y, t in pts:
                        ax.annotate(
                            f"{t}", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points"
                        )
            ax.set(
                title=f"{workload} {title}".strip(),
                xlabel="memory overhead (RSS / requested)",
                ylabel="Mops/s",
            )
        _legend(fig, axes)
        fig.suptitle(f"{workload}: overhead against throughput (labels: threads)")
        plots.append(Plot(f"overhead-vs-throughput-{workload}", fig.get_suptitle(), fig))
    return plots


def scaling(comp: Comparison) -> list[Plot]:
    """Throughput against threads, a line per allocator, for workloads run at
    several thread counts."""
    if "ops_per_s" not in comp.metrics:
        return []
    plots = []
    for workload, rows in _by_workload(comp).items():
        if len({dict(r.params).get("threads") for r in rows}) < 2:
            continue
        panels = _panels(rows, "threads")
        fig, axes = _grid(len(panels))
        for ax, (title, prow) in zip(axes, panels.items(), strict=True):
            prow = sorted(prow, key=lambda r: int(dict(r.params).get("threads", 1)))
            for a in comp.allocators:
                xs = [int(dict(r.params)["threads"]) for r in prow if _median(r, "ops_per_s", a)]
                ys = [m / 1e6 for r in prow if (m := _median(r, "ops_per_s", a))]
                if xs:
                    line = ax.plot(xs, ys, "o-", label=_cut(a))[0]
                    _hollow_past(ax, xs, ys, comp.cores, line.get_color())
            _past_cores(ax, comp.cores, max(int(dict(r.params)["threads"]) for r in prow))
            ax.set(title=f"{workload} {title}".strip(), xlabel="threads", ylabel="Mops/s")
        _legend(fig, axes)
        past = (
            f"; shaded: more threads than the {comp.cores} cores"
            if any(int(dict(r.params)["threads"]) > comp.cores for r in rows) and comp.cores
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
    """Time and peak RSS per row relative to the baseline: bars with the ratio's
    95 % interval as whiskers, log scale when the ratios span more than 10x."""
    if comp.baseline is None or not comp.rows:
        return []
    plots = []
    for metric in ("time_s", "peak_rss_kib"):
        others = [a for a in comp.allocators if a != comp.baseline]
        if not others:
            continue
        width_in = min(18.0, max(6.0, 0.12 * len(comp.rows) * len(others)))
        fig, ax = plt.subplots(figsize=(width_in, 5.0))
        width = 0.8 / len(others)
        values: list[float] = []
        for i, a in enumerate(others):
            xs, ys, lo, hi = [], [], [], []
            for j, row in enumerate(comp.rows):
                r = row.cells[metric][a].ratio
                if r is not None:
                    xs.append(j + (i - (len(others) - 1) / 2) * width)
                    ys.append(r.value)
                    lo.append(r.value - r.low)
                    hi.append(r.high - r.value)
            values += ys
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=_cut(a))
        ax.axhline(1.0, color="black", linewidth=0.8)
        if values and max(values) / max(min(values), 1e-9) > 10:
            ax.set_yscale("log")
            # Plain numbers: the default log labels are mathtext, which is off here.
            plain = FuncFormatter(lambda v, _pos: f"{v:g}")
            ax.yaxis.set_major_formatter(plain)
            ax.yaxis.set_minor_formatter(FuncFormatter(lambda _v, _pos: ""))
        ax.set_xticks(
            range(len(comp.rows)),
            [_cut(r.label) for r in comp.rows],
            rotation=30,
            ha="right",
            fontsize=8,
        )
        word = "speed-up" if comp.speedup and metric == "time_s" else "ratio"
        ax.set_ylabel(f"{fmt.TITLES[metric].lower()} {word} to {_cut(comp.baseline or '')}")
        ax.legend(fontsize=7, ncols=2)
        title = f"{fmt.TITLES[metric]} relative to {comp.baseline} (95% interval)"
        ax.set_title(title)
        plots.append(Plot(f"normalized-{metric}", title, fig))
    return plots


WHY_MOST = 24  # explained differences drawn, the largest first


def why_parts(comp: Comparison) -> list[Plot]:
    """Each explained difference (why.py) beside the signals in its units that moved
    with it: the difference's own bar, then one per signal (seconds of CPU for time,
    KiB at the peak for peak RSS), so that "most of it" can be seen at a glance."""
    found = [w for w in why.explain(comp) if w.explained]
    plots = []
    for axis, unit, scale, title in (
        ("time", "s", 1.0, "time"),
        ("rss", "MiB", 1 / 1024, "peak RSS"),
    ):
        mine = sorted((w for w in found if w.axis == axis), key=lambda w: -abs(w.delta))
        mine = mine[:WHY_MOST]
        if not mine:
            continue
        names = list(dict.fromkeys(f.words for w in mine for f in w.factors if f.share is not None))
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
            textwrap.shorten(w.label, 34, placeholder="…") + f": {_cut(w.allocator)}" for w in mine
        ]
        ax.set_yticks(range(len(mine)), labels, fontsize=7)
        ax.invert_yaxis()
        ax.axvline(0, color="black", linewidth=0.8)
        ax.set_xlabel(f"{title} against {_cut(comp.baseline or '')} ({unit})")
        ax.legend(fontsize=7)
        name = f"Why: each decided {title} difference and what accounts for it"
        ax.set_title(name, fontsize=10)
        fig.tight_layout()
        plots.append(Plot(f"why-{axis}", name, fig))
    return plots


def _seen(mine: Sequence[why.Why], i: int) -> list[why.Factor]:
    """The factors drawn before difference i (each signal is named in the legend once)."""
    return [f for w in mine[:i] for f in w.factors if f.share is not None]


MAX_VERSION_ROWS = 6


def across_versions(comp: Comparison) -> list[Plot]:
    """Per family with two or more versions in the campaign: time and peak RSS of each
    version against the baseline, in version order, with 95 % intervals, a row of two
    panels per workload row; Debian's builds are a line of their own (squares), one
    that runs under a newer glibc a hollow diamond."""
    if comp.baseline is None:
        return []
    present = {a: lin for a, lin in comp.lineages.items() if a in comp.allocators}
    plots = []
    steps = releases.changes(comp)
    for family, entries in lineage.families(present).items():
        versions = list(dict.fromkeys(lin.version for _, lin in entries))
        rows = comp.rows[:MAX_VERSION_ROWS]
        size = (max(6.0, 0.9 * len(versions)) * 2, 3.0 * len(rows))
        fig, grid = plt.subplots(len(rows), 2, figsize=size, squeeze=False)
        marks = {(c.newer, c.row, c.metric != releases.MEMORY): c for c in steps if c.decided}
        for line, row in zip(grid, rows, strict=True):
            for ax, metric in zip(line, ("time_s", "peak_rss_kib"), strict=True):
                _version_panel(ax, row, metric, entries, versions)
                _mark_changes(ax, row, metric, entries, versions, marks)
                what = "peak RSS" if metric != "time_s" else _speed_word(row, entries)
                ax.set_title(_wrapped(f"{row.label}: {what}"), fontsize=9)
                ax.set_ylabel(f"/ {_cut(comp.baseline)}")
        grid[0][0].legend(fontsize=7)
        # Under TEXT_MAX for any family name of up to 20 characters.
        # The legend (first panel) tells crate builds, Debian's and those under a newer glibc.
        fig.suptitle(
            f"{family} by version, against {comp.baseline}; 95% intervals{_first(rows, comp)}"
        )
        fig.tight_layout(rect=(0, 0, 1, 0.96))
        plots.append(Plot(f"versions-{_slug(family)}", fig.get_suptitle(), fig))
    return plots


def _first(shown: Sequence[Row], comp: Comparison) -> str:
    return f" (first {len(shown)} of {len(comp.rows)} rows)" if len(comp.rows) > len(shown) else ""


def _version_panel(
    ax: Axes,
    row: Row,
    metric: str,
    entries: Sequence[tuple[str, lineage.Lineage]],
    versions: list[str],
) -> None:
    for series in _SERIES:
        xs, ys, lo, hi = [], [], [], []
        for a, lin in entries:
            # Speed: time, or throughput where the workload's time is fixed (larson).
            cell = row.cells[metric].get(a)
            if metric == "time_s" and cell is not None:
                cell = recommend.speed_cell(row, a)
            r = cell.ratio if cell is not None else None
            if r is None or releases.series(lin) != series:
                continue
            xs.append(
                versions.index(lin.version) + (0 if series in ("crate", lineage.GIT) else 0.18)
            )
            ys.append(r.value)
            # Too few blocks bound nothing (0 to infinity): the point alone, no whisker.
            bounded = r.low > 0 and math.isfinite(r.high)
            lo.append(r.value - r.low if bounded else 0.0)
            hi.append(r.high - r.value if bounded else 0.0)
        if xs:
            style = _SERIES[series]
            ax.errorbar(
                xs,
                ys,
                yerr=[lo, hi],
                fmt=style[0],
                capsize=3,
                color=style[1],
                mfc=style[2] or style[1],
                label=series,
            )
    ax.axhline(1, color="#999", lw=0.8)
    ax.set_xticks(range(len(versions)), [_cut(v) for v in versions], rotation=30, fontsize=8)
    ax.set_xlim(-0.5, len(versions) - 0.3)


def _mark_changes(
    ax: Axes,
    row: Row,
    metric: str,
    entries: Sequence[tuple[str, lineage.Lineage]],
    versions: list[str],
    marks: dict[tuple[str, str, bool], releases.Change],
) -> None:
    """A decided change from the version before (releases.py), written above its point:
    the table's verdicts, where the eye reads the line."""
    for a, lin in entries:
        change = marks.get((a, row.label, metric == "time_s"))
        cell = row.cells[metric].get(a)
        if metric == "time_s" and cell is not None:
            cell = recommend.speed_cell(row, a)
        if change is None or change.ratio is None or cell is None or cell.ratio is None:
            continue
        worse = change.verdict is stats.Verdict.WORSE
        shift = 0 if releases.series(lin) in ("crate", lineage.GIT) else 0.18
        ax.annotate(
            f"{change.ratio.value - 1:+.0%}",
            (versions.index(lin.version) + shift, cell.ratio.value),
            textcoords="offset points",
            xytext=(0, 7),
            ha="center",
            fontsize=7,
            color="#d62728" if worse else "#2ca02c",
        )


# fmt, colour, marker face ("": filled): crate builds, Debian's (this system's and
# other releases'), Debian's that run under another glibc (the C library changes too),
# and revisions of the user's repository.
_SERIES = {
    "crate": ("o-", "#1f77b4", ""),
    "Debian": ("s-", "#d62728", ""),
    "Debian, under a newer glibc": ("D", "#d62728", "white"),
    "git": ("o-", "#2ca02c", ""),
}


def _speed_word(row: Row, entries: Sequence[tuple[str, lineage.Lineage]]) -> str:
    fixed = any(a in row.cells["time_s"] and row.cells["time_s"][a].fixed for a, _ in entries)
    return "throughput (higher is better)" if fixed else "time"


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:64]


def distributions(comp: Comparison) -> list[Plot]:
    """Every repetition's time, a strip per allocator, a panel per row."""
    if not comp.rows:
        return []
    fig, axes = _grid(len(comp.rows), width=4.5, height=3.2)
    for ax, row in zip(axes, comp.rows, strict=True):
        for i, a in enumerate(comp.allocators):
            vals = row.cells["time_s"][a].values
            ax.plot([i] * len(vals), vals, "o", alpha=0.6, markersize=4)
        ax.set_xticks(
            range(len(comp.allocators)),
            [_cut(a) for a in comp.allocators],
            rotation=45,
            ha="right",
            fontsize=7,
        )
        ax.set(title=row.label, ylabel="seconds")
        ax.title.set_fontsize(8)
    fig.suptitle("Time of every repetition")
    fig.tight_layout()
    return [Plot("distribution-time", "Time of every repetition", fig)]


def _legend(fig: Figure, axes: Sequence[Axes]) -> None:
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="upper right", fontsize=7)
    fig.tight_layout(rect=(0, 0, 0.88, 0.95))
