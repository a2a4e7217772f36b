"""Plotly figures as plain JSON, the building blocks figures.py draws with: a grid of
panels laid out in pixels, the baseline's line, whiskers, a user's text made safe.
Hand-written rather than the plotly Python package's Figure objects: those validate
every property as they are built, which took the page seconds a figure, and the page
needs only the JSON plotly.js reads."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from allocmark.report import panels

COLUMNS = 3  # panels per line of a figure
PANEL_PX = 300  # height of one line of panels
Json = dict[str, Any]


@dataclass(frozen=True)
class Figure:
    id: str  # the element's id in the page: unique in it
    title: str
    data: tuple[Json, ...]  # Plotly traces
    layout: Json


def text(s: str) -> str:
    """A user's string as Plotly shows it, cut to a label's length: its labels are
    HTML, so with no "<" in it a name can be neither markup nor the end of the page's
    <script>."""
    return (
        panels.cut(s)
        .replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
    )


def num(x: float) -> float | None:
    """Four significant digits: what a reader can see, a fraction of the page's bytes."""
    if not math.isfinite(x):
        return None
    return float(f"{x:.4g}")


def nums(xs: Sequence[float] | np.ndarray) -> list[float | None]:
    return [num(float(x)) for x in xs]


def grid(
    titles: Sequence[str], x: str, y: str, height: int = PANEL_PX, columns: int = COLUMNS
) -> tuple[Json, list[str]]:
    """A layout of one panel per title, `columns` to a line, each with its own axes,
    and the axis suffixes ("", "2", ...) the traces name."""
    n = len(titles)
    cols = min(columns, n)
    lines = math.ceil(n / cols)
    layout: Json = base(height * lines + 80)
    names = []
    for i, name in enumerate(titles):
        line, col = divmod(i, cols)
        k = "" if i == 0 else str(i + 1)
        x0, x1 = col / cols + 0.04, (col + 1) / cols - 0.02
        # In pixels: room above a panel for its title, below it for the axis's.
        y1 = 1 - (line * height + 28) / (lines * height)
        y0 = 1 - ((line + 1) * height - 52) / (lines * height)
        layout[f"xaxis{k}"] = {"domain": [x0, x1], "anchor": f"y{k}", **axis_title(x)}
        layout[f"yaxis{k}"] = {"domain": [y0, y1], "anchor": f"x{k}", **axis_title(y)}
        layout["annotations"].append(
            {
                "text": text(name[:70]),
                "xref": f"x{k} domain",
                "yref": f"y{k} domain",
                "x": 0.5,
                "y": 1.0,
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"size": 11},
            }
        )
        names.append(k)
    return layout, names


def base(height: int) -> Json:
    # The legend stands right of the panels, never on the data.
    return {
        "height": height,
        "margin": {"l": 60, "r": 10, "t": 30, "b": 50},
        "template": {"layout": {"plot_bgcolor": "white"}},
        "legend": {"x": 1.01, "xanchor": "left", "y": 1, "font": {"size": 10}},
        "annotations": [],
        "shapes": [],
    }


def axis_title(words: str) -> Json:
    return {
        "title": {"text": text(words), "font": {"size": 10}},
        "gridcolor": "#eee",
        "zeroline": False,
    }


def axes(k: str) -> Json:
    return {"xaxis": f"x{k}", "yaxis": f"y{k}"}


def whisker(values: Sequence[float], lows: Sequence[float], highs: Sequence[float]) -> Json:
    return {
        "type": "data",
        "symmetric": False,
        "array": nums([h - v for v, h in zip(values, highs, strict=True)]),
        "arrayminus": nums([v - lo for v, lo in zip(values, lows, strict=True)]),
        "thickness": 1,
        "width": 3,
    }


def one_line(layout: Json, k: str, axis: str, at: float) -> None:
    """The baseline's 1.0, a grey line across panel k."""
    other = "y" if axis == "x" else "x"
    layout["shapes"].append(
        {
            "type": "line",
            "xref": f"x{k}" if axis == "x" else f"x{k} domain",
            "yref": f"y{k}" if axis == "y" else f"y{k} domain",
            f"{axis}0": at,
            f"{axis}1": at,
            f"{other}0": 0,
            f"{other}1": 1,
            "line": {"color": "#999", "width": 1},
        }
    )


def legend_once(seen: set[str], name: str) -> bool:
    """Is this the first trace of `name` (it alone shows in the legend)?"""
    first = name not in seen
    seen.add(name)
    return first
