"""The terminal's report: the answer at a glance (the matrices) or, with detail, every
table; then the tables beyond the comparison; a profile's tables. Drawn on a rich
Console from the report value, as every other format is."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console

from allocmark.answer.race import Front
from allocmark.answer.report import Report
from allocmark.report import extra, glance, table


def draw(
    console: Console, report: Report, detail: bool = False, fronts: Sequence[Front] = ()
) -> None:
    """`fronts`: a `tune` campaign's answer, its Pareto fronts as lines to paste."""
    if report.view == "profile":
        table.profiles(console, report.profiles)
        return
    comp, found = report.comparison, report.findings
    every = detail or not found.matrix
    (table.comparison if every else glance.glance)(console, comp, found)
    table.extra(console, extra.extras(report, made=every))
    if fronts:
        table.tune_front(console, fronts)
