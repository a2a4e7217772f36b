"""A stored campaign's report in any file format: load it once, hand it to the
format's module (markdown, csvfile, jsonfile, html; the terminal's is table.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from allocmark.answer import stored
from allocmark.errors import UserError
from allocmark.report import csvfile, data, jsonfile, markdown
from allocmark.store import Store

# html and plots are imported where they are used: Jinja and matplotlib cost
# start-up time that the other formats should not pay.

TEXT_FORMATS = ("md", "csv", "json", "html")


def text(store: Store, cid: int, fmt: str, view: str = "summary", speedup: bool = False) -> str:
    """The report's `view` (summary, runs or profile) as md, csv, json or html."""
    if fmt not in TEXT_FORMATS:
        raise UserError(f"--format {fmt!r}: choose table, {', '.join(TEXT_FORMATS)}")
    report = data.load(store, cid, view, speedup, with_runs=fmt == "html", extras=fmt != "csv")
    if fmt == "html":
        return _html(report)
    exporters: dict[str, Callable[[data.ReportData], str]] = {
        "md": markdown.render,
        "csv": csvfile.render,
        "json": jsonfile.render,
    }
    return exporters[fmt](report)


def _html(report: data.ReportData) -> str:
    from allocmark.report import html

    if report.view == "runs":
        raise UserError("--runs lists every run as csv or json: add --format csv (or json)")
    return html.render(report)


def plot_files(store: Store, cid: int, directory: Path, speedup: bool = False) -> list[Path]:
    """Every plot of the campaign as SVG and PNG files in `directory`."""
    from allocmark.report import plots

    comp = stored.comparison(store, cid, speedup)
    figures = plots.all_plots(comp, store.rss_series(cid))
    try:
        return plots.save(figures, directory)
    finally:
        plots.close(figures)
