"""Printing what a verb made: the report's tables, a text export, a tune's front."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from allocmark.cli.app import err, out

if TYPE_CHECKING:
    from allocmark.report import data


def front(db: Path, cid: int) -> None:
    """A `tune` campaign's answer: the Pareto front of settings, as lines to paste."""
    from allocmark import api
    from allocmark.report import table

    table.tune_front(out(), api.tuned(db, cid))


def emit_table(report: data.ReportData, output: Path | None, detail: bool = False) -> None:
    """The terminal's answer at a glance (or, with `detail`, every table), on stdout or
    (-o) in a file as plain text."""
    from rich.console import Console

    from allocmark.report import data, extra, glance, table

    with contextlib.ExitStack() as stack:
        console = out()
        if output:
            output.parent.mkdir(parents=True, exist_ok=True)
            f = stack.enter_context(output.open("w"))
            console = Console(file=f, width=160, no_color=True, highlight=False)
        if report.view == "profile":
            table.profiles(console, report.profiles)
        else:
            comp = data.comparison(report)
            every = detail or not glance.shown(comp)
            (table.comparison if every else glance.glance)(console, comp)
            table.extra(console, extra.extras(report, made=every))
    if output:
        err().print(f"wrote {output}")


def emit(text: str, output: Path | None) -> None:
    from allocmark.text import printable

    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text)
        err().print(f"wrote {output}")
    else:  # a stored message must not drive the terminal; -o keeps the data as stored
        sys.stdout.write("\n".join(printable(line) for line in text.split("\n")))
