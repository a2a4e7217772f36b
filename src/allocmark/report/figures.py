"""The HTML page's figures: each chart (chart.py) as a Plotly figure written as plain
JSON (data and layout), drawn in the browser by the plotly.js bundle the page carries
once (vendor/). Hand-written rather than through the plotly Python package's Figure
objects (they validate every property as they are built) or matplotlib's SVG: both
took seconds a figure, and the page needs only the JSON plotly.js reads. A
translation only: every number, colour and label is the chart's."""

from __future__ import annotations

import itertools
import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from allocmark.report.chart import Chart, Panel, Trace, Whiskers

COLUMNS = 3  # panels per line of a figure
PANEL_PX = 300  # height of one line of panels
BAR_PX = 460  # height of a figure of bars grouped by row
MODES = {"points": "markers", "lines": "lines+markers", "curve": "lines", "strip": "markers"}
SYMBOLS = {"o": "circle", "s": "square", "D": "diamond"}
Json = dict[str, Any]


@dataclass(frozen=True)
class Figure:
    id: str  # the element's id in the page: unique in it
    title: str
    data: tuple[Json, ...]  # Plotly traces
    layout: Json


def page(charts: Sequence[Chart]) -> list[Figure]:
    return [figure(c) for c in charts]


def figure(chart: Chart) -> Figure:
    data: list[Json] = []
    if chart.bars:
        (panel,) = chart.panels
        layout = _bars_layout(panel, chart.across)
        data = [_bar(t) for t in panel.traces]
    else:
        layout = _grid(chart.panels, chart.columns)
        seen: set[str] = set()  # a name's first trace alone shows in the legend
        for i, panel in enumerate(chart.panels):
            k = "" if i == 0 else str(i + 1)
            for t in panel.traces:
                data += _traces(t, k, t.name not in seen)
                seen.add(t.name)
            _panel_marks(layout, panel, k)
    return Figure(f"plot-{chart.name}", _text(chart.title), tuple(data), layout)


def _text(s: str) -> str:
    """A user's string as Plotly shows it: its labels are HTML, so with no "<" in it a
    name can be neither markup nor the end of the page's <script>."""
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _title(title: str) -> str:
    """A panel's title in lines of at most 60 characters (Plotly's <br>), each escaped:
    a row label is never cut (it was at 70 characters, where the parameter that tells
    two rows apart usually is)."""
    return "<br>".join(_text(line) for line in textwrap.wrap(title, 60)[:3])


def _num(x: float) -> float | None:
    """Four significant digits: what a reader can see, a fraction of the page's bytes."""
    if not math.isfinite(x):
        return None
    return float(f"{x:.4g}")


def _nums(xs: Sequence[float]) -> list[float | None]:
    return [_num(float(x)) for x in xs]


def _xs(xs: Sequence[float] | Sequence[str]) -> Json:
    """The x values; an even step as x0 and dx, not a number per point (the same 41
    numbers in 300 traces of RSS over the run)."""
    if all(isinstance(x, str) for x in xs):
        return {"x": [_text(str(x)) for x in xs]}
    nums = [float(x) for x in xs]
    steps = {round(b - a, 9) for a, b in itertools.pairwise(nums)}
    if len(nums) > 2 and len(steps) == 1 and 0 not in steps:
        return {"x0": _num(nums[0]), "dx": _num(nums[1] - nums[0])}
    return {"x": _nums(nums)}


def _whisker(err: Whiskers) -> Json:
    return {
        "type": "data",
        "symmetric": False,
        "array": _nums(err.above),
        "arrayminus": _nums(err.below),
        "thickness": 1,
        "width": 3,
    }


def _traces(t: Trace, k: str, legend: bool) -> list[Json]:
    """A trace on panel k, in the legend or not: its band first (the lowest, then the
    highest filled up to it), then its points."""
    name = _text(t.name)
    axes = {"xaxis": f"x{k}", "yaxis": f"y{k}"}
    out: list[Json] = []
    if t.band:
        edge = {"mode": "lines", "line": {"width": 0}, "showlegend": False, "hoverinfo": "skip"}
        common = {"type": "scatter", "legendgroup": name, **_xs(t.xs), **axes, **edge}
        out.append({**common, "y": _nums(t.band[0])})
        out.append(
            {**common, "y": _nums(t.band[1]), "fill": "tonexty", "fillcolor": t.colour + "26"}
        )
    symbol = SYMBOLS[t.marker]
    marker: Json = {"color": t.colour, "size": 5 if t.style == "strip" else 8}
    if any(t.hollow):
        marker["symbol"] = [symbol + ("-open" if h else "") for h in t.hollow]
    elif symbol != "circle":
        marker["symbol"] = symbol
    if t.style == "strip":
        marker["opacity"] = 0.6
    trace: Json = {
        "type": "scatter",
        "mode": MODES[t.style] + ("+text" if t.texts else ""),
        **_xs(t.xs),
        "y": _nums(t.ys),
        "name": name,
        "legendgroup": name,
        "showlegend": legend,
        "marker": marker,
        "line": {"color": t.colour, "width": 1.5 if t.style == "curve" else 2},
        "hovertemplate": _hover(t),
        **axes,
    }
    if t.texts:
        trace.update(text=[_text(x) for x in t.texts], textposition="top right")
        trace["textfont"] = {"size": 9}
    if t.tips:
        trace["customdata"] = [_text(x).replace("\n", "<br>") for x in t.tips]
    if t.x_err:
        trace["error_x"] = _whisker(t.x_err)
    if t.y_err:
        trace["error_y"] = _whisker(t.y_err)
    return [*out, trace]


def _hover(t: Trace) -> str:
    said = "%{customdata}" if t.tips else "%{x:.4g}, %{y:.4g}"
    note = f"<br>{_text(t.note)}" if t.note else ""
    return f"<b>{_text(t.name)}</b><br>{said}{note}<extra></extra>"


def _bar(t: Trace) -> Json:
    """A trace of bars: vertical, one per row, or horizontal, one per difference."""
    across = t.style == "hbars"
    values, names = ("x", "y") if across else ("y", "x")
    bar: Json = {
        "type": "bar",
        "name": _text(t.name),
        names: [_text(str(x)) for x in t.xs],
        values: _nums(t.ys),
        "marker": {"color": t.colour},
    }
    if across:
        bar["orientation"] = "h"
    else:
        bar["hovertemplate"] = f"<b>{_text(t.name)}</b><br>%{{x}}: ×%{{y:.3f}}<extra></extra>"
    if t.y_err:
        bar["error_y"] = _whisker(t.y_err)
    return bar


def _bars_layout(panel: Panel, across: bool) -> Json:
    if across:  # a line of bars per difference, a bar per trace
        n = len(panel.traces[0].xs) if panel.traces else 0
        layout = _base(120 + 22 * n * len(panel.traces) // 2 + 60)
        layout.update(barmode="group", bargap=0.25)
        layout["yaxis"] = {"autorange": "reversed", "automargin": True, "tickfont": {"size": 9}}
        layout["xaxis"] = _axis_title(panel.x_title)
        return layout
    layout = _base(BAR_PX)
    layout["barmode"] = "group"
    layout["xaxis"] = {"tickangle": -30, "automargin": True}
    layout["yaxis"] = _axis_title(panel.y_title)
    if panel.log_ticks:
        layout["yaxis"].update(type="log", tickmode="array", tickvals=list(panel.log_ticks))
    if "y" in panel.ones:
        _one_line(layout, "", "y")
    return layout


def _grid(panels: Sequence[Panel], columns: int = COLUMNS) -> Json:
    """A layout of one panel per title, `columns` to a line, each with its own axes:
    in pixels, room above a panel for its title, below it for the axis's."""
    n = len(panels)
    cols = max(1, min(columns, n))
    lines = math.ceil(n / cols)
    height = PANEL_PX
    layout: Json = _base(height * lines + 80)
    for i, panel in enumerate(panels):
        line, col = divmod(i, cols)
        k = "" if i == 0 else str(i + 1)
        x0, x1 = col / cols + 0.04, (col + 1) / cols - 0.02
        y1 = 1 - (line * height + 28) / (lines * height)
        y0 = 1 - ((line + 1) * height - 52) / (lines * height)
        layout[f"xaxis{k}"] = {"domain": [x0, x1], "anchor": f"y{k}", **_axis_title(panel.x_title)}
        layout[f"yaxis{k}"] = {"domain": [y0, y1], "anchor": f"x{k}", **_axis_title(panel.y_title)}
        layout["annotations"].append(
            {
                "text": _title(panel.title),
                "xref": f"x{k} domain",
                "yref": f"y{k} domain",
                "x": 0.5,
                "y": 1.0,
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"size": 11},
            }
        )
    return layout


def _panel_marks(layout: Json, panel: Panel, k: str) -> None:
    """What a panel draws beside its traces: its ticks, the baseline's lines, the
    threads past the cores shaded, the versions' changes written above their points."""
    x, y = layout[f"xaxis{k}"], layout[f"yaxis{k}"]
    if panel.ticks:
        x.update(tickmode="array", tickvals=list(panel.ticks))
        if panel.tick_text:
            x["ticktext"] = [_text(t) for t in panel.tick_text]
    if panel.from_zero:
        y["rangemode"] = "tozero"
    for axis in panel.ones:
        _one_line(layout, k, axis)
    if panel.past:
        layout["shapes"].append(_past_cores(k, panel.past, max(panel.ticks)))
    for m in panel.marks:
        layout["annotations"].append(
            {
                "text": _text(m.text),
                "x": m.x,
                "y": m.y,
                "xref": f"x{k}",
                "yref": f"y{k}",
                "yshift": 12,
                "showarrow": False,
                "font": {"size": 9, "color": "#d62728" if m.worse else "#2ca02c"},
            }
        )


def _past_cores(k: str, cores: int, most: float) -> Json:
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


def _base(height: int) -> Json:
    # The legend stands right of the panels, never on the data.
    return {
        "height": height,
        "margin": {"l": 60, "r": 10, "t": 30, "b": 50},
        "template": {"layout": {"plot_bgcolor": "white"}},
        "legend": {"x": 1.01, "xanchor": "left", "y": 1, "font": {"size": 10}},
        "annotations": [],
        "shapes": [],
    }


def _axis_title(words: str) -> Json:
    return {
        "title": {"text": _text(words), "font": {"size": 10}},
        "gridcolor": "#eee",
        "zeroline": False,
    }


def _one_line(layout: Json, k: str, axis: str) -> None:
    """The baseline's 1.0, a grey line across panel k."""
    other = "y" if axis == "x" else "x"
    layout["shapes"].append(
        {
            "type": "line",
            "xref": f"x{k}" if axis == "x" else f"x{k} domain",
            "yref": f"y{k}" if axis == "y" else f"y{k} domain",
            f"{axis}0": 1.0,
            f"{axis}1": 1.0,
            f"{other}0": 0,
            f"{other}1": 1,
            "line": {"color": "#999", "width": 1},
        }
    )
