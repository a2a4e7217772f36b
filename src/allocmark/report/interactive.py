"""The HTML report's interactive plots (Plotly): time against peak RSS, and RSS over
the run, with tooltips naming the allocator, the workload, the value and its
interval, and zoom. plotly.js is embedded once in the page, so it works offline;
the static matplotlib plots stay for Markdown and `--plots` (plots.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
from markupsafe import Markup

from allocmark.answer import recommend
from allocmark.answer.analyze import Comparison
from allocmark.model import Params, RssSeries
from allocmark.report import plots

COLUMNS = 3  # panels per row of a figure
MAX_PANELS = plots.MAX_SCATTER_PANELS


def script() -> Markup:
    """plotly.js itself, for one <script> element of the page."""
    from plotly.offline import get_plotlyjs

    return Markup(get_plotlyjs().replace("</script", "<\\/script"))  # nosec: a known library


def figures(comp: Comparison, series: plots.Series) -> list[tuple[str, str, Markup]]:
    """(id, title, <div>) of every interactive plot the data has."""
    out = []
    if (scatter := time_vs_rss(comp)) is not None:
        out.append(("plot-time-vs-rss", scatter[0], scatter[1]))
    if (rss := rss_over_time(comp, series)) is not None:
        out.append(("plot-rss-over-time", rss[0], rss[1]))
    return out


def time_vs_rss(comp: Comparison) -> tuple[str, Markup] | None:
    if comp.baseline is None or len(comp.allocators) < 2 or not comp.rows:
        return None
    rows = comp.rows[:MAX_PANELS]
    fig = _grid([r.label for r in rows], "peak RSS / " + comp.baseline, "time / " + comp.baseline)
    for i, row in enumerate(rows):
        for j, (a, c) in enumerate(recommend.positions(comp, row).items()):
            if not isinstance(c, recommend.Choice) or c.time is None or c.rss is None:
                continue
            t, r = c.time, c.rss
            fig.add_scatter(
                x=[r.value],
                y=[t.value],
                mode="markers",
                name=_escaped(a),
                legendgroup=a,
                showlegend=i == 0,
                marker={"color": _colour(j), "size": 9},
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": [r.high - r.value],
                    "arrayminus": [r.value - r.low],
                },
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [t.high - t.value],
                    "arrayminus": [t.value - t.low],
                },
                customdata=[[_escaped(row.label), t.low, t.high, r.low, r.high]],
                hovertemplate=(
                    f"<b>{_escaped(a)}</b><br>%{{customdata[0]}}<br>"
                    "time ×%{y:.3f} [%{customdata[1]:.3f}–%{customdata[2]:.3f}]<br>"
                    "peak RSS ×%{x:.3f} [%{customdata[3]:.3f}–%{customdata[4]:.3f}]"
                    "<extra></extra>"
                ),
                row=i // COLUMNS + 1,
                col=i % COLUMNS + 1,
            )
    fig.add_hline(y=1, line_width=1, line_color="#999")
    fig.add_vline(x=1, line_width=1, line_color="#999")
    title = "time against peak RSS, 95% intervals; lower left is better (hover, zoom)"
    return title, _div(fig, "plot-time-vs-rss")


def rss_over_time(comp: Comparison, series: plots.Series) -> tuple[str, Markup] | None:
    cells: dict[tuple[str, Params], dict[str, list[RssSeries]]] = {}
    for a, w, params, s in series:
        cells.setdefault((w, params), {}).setdefault(a, []).append(s)
    rows = [r for r in comp.rows if (r.workload, r.params) in cells][:MAX_PANELS]
    if not rows:
        return None
    fig = _grid([r.label for r in rows], "% of the run", "RSS (MiB)")
    at = np.linspace(0.0, 1.0, 101)
    for i, row in enumerate(rows):
        by_alloc = cells[(row.workload, row.params)]
        for j, a in enumerate(comp.allocators):
            if a not in by_alloc:
                continue
            curves = np.array([plots.share_of_run(s, at) for s in by_alloc[a]]) / 1024
            fig.add_scatter(
                x=at * 100,
                y=np.median(curves, axis=0),
                mode="lines",
                name=_escaped(a),
                legendgroup=a,
                showlegend=i == 0,
                line={"color": _colour(j), "width": 1.5},
                customdata=np.stack([curves.min(axis=0), curves.max(axis=0)], axis=1),
                hovertemplate=(
                    f"<b>{_escaped(a)}</b><br>{_escaped(row.label)}<br>"
                    "%{x:.0f}% of the run: %{y:.1f} MiB (median of "
                    f"{len(curves)} runs; %{{customdata[0]:.1f}}–"
                    "%{customdata[1]:.1f})<extra></extra>"
                ),
                row=i // COLUMNS + 1,
                col=i % COLUMNS + 1,
            )
    title = "RSS over the run: the median of the runs (hover for the range, zoom)"
    return title, _div(fig, "plot-rss-over-time")


def _grid(titles: list[str], x: str, y: str) -> Any:  # a plotly Figure (untyped)
    from plotly.subplots import make_subplots

    n_rows = (len(titles) + COLUMNS - 1) // COLUMNS
    fig = make_subplots(
        rows=n_rows,
        cols=min(COLUMNS, len(titles)),
        subplot_titles=[_escaped(t[:60]) for t in titles],
        horizontal_spacing=0.06,
        vertical_spacing=min(0.12, 0.3 / n_rows),
    )
    fig.update_xaxes(title_text=_escaped(x), title_font_size=10)
    fig.update_yaxes(title_text=_escaped(y), title_font_size=10)
    fig.update_annotations(font_size=11)
    fig.update_layout(
        height=280 * n_rows + 80,
        margin={"l": 50, "r": 20, "t": 40, "b": 40},
        template="plotly_white",
        legend={"orientation": "h", "y": -0.08},
    )
    return fig


def _div(fig: Any, div_id: str) -> Markup:
    html: str = fig.to_html(
        full_html=False,
        include_plotlyjs=False,
        div_id=div_id,
        config={"displaylogo": False, "responsive": True},
    )
    return Markup(html)  # nosec: Plotly writes the data as JSON; names are escaped (_escaped)


def _escaped(text: str) -> str:
    """A user's string as Plotly shows it: its labels are HTML, and the figure's JSON
    sits in a <script>: with no "<" in it, a name can neither be markup nor end it."""
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
    )


def _colour(i: int) -> str:
    palette = (
        "#1f77b4",
        "#ff7f0e",
        "#2ca02c",
        "#d62728",
        "#9467bd",
        "#8c564b",
        "#e377c2",
        "#7f7f7f",
        "#bcbd22",
        "#17becf",
    )
    return palette[i % len(palette)]
