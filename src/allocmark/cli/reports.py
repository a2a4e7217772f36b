"""The reading verbs: report and compare. They read a database, never run anything."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from allocmark.cli import show
from allocmark.cli.app import DbOpt, DetailOpt, MetricOpt, app, err, out
from allocmark.cli.show import check_directory, check_output
from allocmark.defaults import DEFAULT_DB
from allocmark.errors import UserError


@app.command("report")
def report_cmd(
    db: DbOpt = DEFAULT_DB,
    campaign_id: Annotated[
        int | None, typer.Option("--campaign", help="campaign id (default: newest)")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, md, csv, json or html")] = "table",
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="write to this file")
    ] = None,
    speedup: Annotated[
        bool, typer.Option("--speedup", help="time ratios as baseline time / allocator time")
    ] = False,
    runs: Annotated[
        bool, typer.Option("--runs", help="every run instead of the summary (csv or json)")
    ] = False,
    plots_dir: Annotated[
        Path | None, typer.Option("--plots", help="also write the plots (SVG, PNG) here")
    ] = None,
    profiles: Annotated[
        bool, typer.Option("--profile", help="the profiler's view of a profiled campaign")
    ] = False,
    detail: DetailOpt = False,
) -> None:
    """Show or export the report of a stored campaign."""
    from allocmark.report import render

    if fmt not in ("table", *render.TEXT_FORMATS):
        raise UserError(f"--format {fmt!r}: choose table, {', '.join(render.TEXT_FORMATS)}")
    if runs and profiles:
        raise UserError("--runs and --profile are two views: choose one")
    if runs and fmt not in ("csv", "json"):
        raise UserError("--runs lists every run as csv or json: add --format csv (or json)")
    view = "profile" if profiles else "runs" if runs else "summary"
    if output:
        check_output(output, db=db)
    if plots_dir:
        check_directory(plots_dir, db=db)
    show.show_report(db, campaign_id, view, fmt, output, plots_dir, speedup, detail)


@app.command("compare")
def compare_cmd(
    old: Annotated[str, typer.Argument(help="DB, DB#CAMPAIGN or a runs JSON export")],
    new: Annotated[str, typer.Argument(help="DB, DB#CAMPAIGN or a runs JSON export")],
    metric: MetricOpt = "time",
    fail_above: Annotated[
        str | None,
        typer.Option(
            "--fail-above", help="exit 1 if a significant regression exceeds this, e.g. 5%"
        ),
    ] = None,
    margin_text: Annotated[
        str, typer.Option("--margin", help="equivalence margin of 'same', e.g. 3%")
    ] = "3%",
) -> None:
    """Regression verdict between two result sets: faster / slower / same / undecided."""
    from allocmark import api, units
    from allocmark.report import table

    key, deprecated = api.metric_key(metric)
    if deprecated:
        err().print(deprecated, style="yellow", highlight=False)
    # A regression can exceed 100 % (2.5x slower is +150 %).
    limit = (
        units.parse_fraction(fail_above, "--fail-above", 1000.0) if fail_above is not None else None
    )
    margin = units.parse_fraction(margin_text, "--margin")
    found = api.regression(old, new, key, margin, limit)
    table.verdicts(out(), found.verdicts, key, found.old_label, found.new_label, found.control)
    out().print(table.verdict_summary(found.summary, key, found.control, margin), highlight=False)
    if limit is not None and (bad := found.failing):
        err().print(
            f"FAIL: {len(bad)} significant regression(s) above {limit:.1%}", highlight=False
        )
        raise typer.Exit(1)
