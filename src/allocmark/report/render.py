"""A stored campaign's report in any format: the one entry point the CLI calls."""

from __future__ import annotations

from pathlib import Path

from allocmark import analyze
from allocmark.errors import UserError
from allocmark.report import export
from allocmark.store import Store

# html and plots are imported where they are used: matplotlib and Jinja cost
# half a second of start-up that the other formats should not pay.

TEXT_FORMATS = (*export.FORMATS, "html")


def text(store: Store, cid: int, fmt: str, speedup: bool = False, runs: bool = False) -> str:
    """The report (or, with `runs`, every run) as md, csv, json or html text."""
    if fmt not in TEXT_FORMATS:
        raise UserError(f"--format {fmt!r}: choose table, {', '.join(TEXT_FORMATS)}")
    info = store.campaign_info(cid)
    if runs:
        return export.render_runs(fmt, store.runs(cid), info)
    comp = analyze.stored_comparison(store, cid, speedup)
    if fmt != "html":
        return export.render(fmt, comp, info)
    from allocmark.report import html, plots

    figures = plots.all_plots(comp)
    try:
        return html.render(comp, info, store.allocator_rows(cid), store.runs(cid), figures)
    finally:
        plots.close(figures)


def plot_files(store: Store, cid: int, directory: Path, speedup: bool = False) -> list[Path]:
    """Every plot of the campaign as SVG and PNG files in `directory`."""
    from allocmark.report import plots

    figures = plots.all_plots(analyze.stored_comparison(store, cid, speedup))
    try:
        return plots.save(figures, directory)
    finally:
        plots.close(figures)
