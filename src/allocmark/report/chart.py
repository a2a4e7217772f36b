"""What a figure shows, made once for both drawings: a chart is panels of traces, each
trace a named, coloured series of points with its whiskers, band, labels and hollow
points, every string already cut to a length a figure can lay out. charts.py and
versions.py make the charts of a report; figures.py (Plotly JSON, for the HTML page)
and plots.py (matplotlib, for `--plots`) only translate them, so that the two show
the same numbers in the same colours."""

from __future__ import annotations

from dataclasses import dataclass

TEXT_MAX = 80  # characters of one label; names are at most 64, a crafted database's may not be
MAX_PANELS = 12  # rows drawn as panels of one figure

# One colour per allocator, by its place in the comparison, in every figure of every
# format (Plotly's and matplotlib's defaults alike); past ten, the second half is darker.
COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
    "#0b3c5d", "#a34700", "#17601a", "#7c1516", "#4b2c6b",
    "#4a2c24", "#8a2f6e", "#3d3d3d", "#6b6c0f", "#0b6a75",
)  # fmt: skip
# The signals of a why figure: not allocators, so colours of their own.
SIGNAL_COLOURS = (
    "#66c2a5", "#fc8d62", "#8da0cb", "#e78ac3", "#a6d854",
    "#ffd92f", "#e5c494", "#b3b3b3", "#1b9e77", "#d95f02",
)  # fmt: skip

# How a trace is drawn: markers alone, markers joined by a line, a line alone, markers
# at one x per trace (a strip), vertical or horizontal bars grouped by their x.
STYLES = ("points", "lines", "curve", "strip", "bars", "hbars")


@dataclass(frozen=True)
class Whiskers:
    """An interval around each point, as lengths below and above it (0: unbounded)."""

    below: tuple[float, ...]
    above: tuple[float, ...]


@dataclass(frozen=True)
class Trace:
    name: str  # in the legend: an allocator, a series of versions, a signal
    colour: str
    xs: tuple[float, ...] | tuple[str, ...]  # strings: the categories of bars
    ys: tuple[float, ...]  # nan: no value there (no bar)
    style: str = "points"  # one of STYLES
    marker: str = "o"  # "o" circle, "s" square, "D" diamond
    hollow: tuple[bool, ...] = ()  # per point: drawn hollow (past the cores, or the series)
    x_err: Whiskers | None = None
    y_err: Whiskers | None = None
    band: tuple[tuple[float, ...], tuple[float, ...]] | None = None  # lowest, highest per x
    texts: tuple[str, ...] = ()  # written beside each point (its thread count)
    tips: tuple[str, ...] = ()  # per point: what hovering over it says on the page
    note: str = ""  # what hovering over any of its points adds


@dataclass(frozen=True)
class Mark:
    """Text above a point: a decided change from the version before."""

    x: float
    y: float
    text: str  # "+12%"
    worse: bool


@dataclass(frozen=True)
class Panel:
    title: str
    traces: tuple[Trace, ...]
    x_title: str = ""
    y_title: str = ""
    ticks: tuple[float, ...] = ()  # x axis of discrete things (threads, versions): its ticks
    tick_text: tuple[str, ...] = ()  # their names, where they are not the numbers
    ones: str = ""  # the axes ("x", "y") with the baseline's 1.0 drawn across
    past: int = 0  # threads past this many (the cores) are shaded; 0: none
    marks: tuple[Mark, ...] = ()
    log_ticks: tuple[float, ...] = ()  # a log y axis, with these ticks
    from_zero: bool = False  # the y axis starts at 0


@dataclass(frozen=True)
class Chart:
    name: str  # the file's stem; "plot-" + name is the page's element id
    title: str
    panels: tuple[Panel, ...]
    heading: str = ""  # drawn above a plot file's panels where `title` is too long ("": title)
    columns: int = 3  # panels per line
    size: tuple[float, float] = (5.0, 3.8)  # a plot file's panel, in inches

    @property
    def bars(self) -> bool:
        """One panel of grouped bars rather than a grid of panels."""
        return any(t.style in ("bars", "hbars") for p in self.panels for t in p.traces)

    @property
    def across(self) -> bool:
        """Its bars are horizontal: a line of bars per difference (the whys)."""
        return any(t.style == "hbars" for p in self.panels for t in p.traces)

    @property
    def weight(self) -> int:
        """What drawing it costs, roughly: the points it draws."""
        return sum(len(t.ys) * (3 if t.band else 1) + 20 for p in self.panels for t in p.traces)


def cut(text: str) -> str:
    """At most TEXT_MAX characters, keeping the start and the end."""
    return text if len(text) <= TEXT_MAX else f"{text[: TEXT_MAX - 12]}…{text[-11:]}"


def slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:64]
