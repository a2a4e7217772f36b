"""A campaign's report (answer.report.Report, read once) in any file format: each
format's module draws it (markdown, csvfile, jsonfile, html; the terminal's is
table.py); plot files are plots.py's; both draw charts.py's charts."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from allocmark.answer.report import Report
from allocmark.errors import UserError
from allocmark.report import csvfile, jsonfile, markdown

# html and plots are imported where they are used: Jinja and matplotlib cost
# start-up time that the other formats should not pay.

TEXT_FORMATS = ("md", "csv", "json", "html")


def needs(fmt: str) -> tuple[str, ...]:
    """What the format draws beyond its view (answer.report.Wanted): html every run and
    the RSS series; every format but CSV the tables beyond the comparison and what the
    comparison answers; the terminal's table all but the runs and the series."""
    if fmt == "csv":
        return ()
    return (*(("runs", "series") if fmt == "html" else ()), "extras", "findings")


# What the plot files draw beyond the comparison (answer.report.Wanted).
PLOT_NEEDS = ("series", "findings")


def text(report: Report, fmt: str) -> str:
    """The report's view (summary, runs or profile) as md, csv, json or html."""
    if fmt not in TEXT_FORMATS:
        raise UserError(f"--format {fmt!r}: choose table, {', '.join(TEXT_FORMATS)}")
    if fmt == "html":
        return _html(report)
    exporters: dict[str, Callable[[Report], str]] = {
        "md": markdown.render,
        "csv": csvfile.render,
        "json": jsonfile.render,
    }
    return exporters[fmt](report)


def _html(report: Report) -> str:
    from allocmark.report import html

    if report.view == "runs":
        raise UserError("--runs lists every run as csv or json: add --format csv (or json)")
    return html.render(report)


def plot_files(report: Report, directory: Path) -> list[Path]:
    """Every plot of the campaign's summary as SVG and PNG files in `directory`."""
    from allocmark.report import charts, plots

    return plots.write(charts.every(report.comparison, report.findings, report.series), directory)
