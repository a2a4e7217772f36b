"""Printing what a verb made: the report's tables, a text export, a tune's front."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from allocmark.cli.app import err, out, quiet

if TYPE_CHECKING:
    from allocmark.api import Report


def show_report(
    db: Path,
    campaign_id: int | None,
    view: str,
    fmt: str,
    output: Path | None,
    plots_dir: Path | None,
    speedup: bool = False,
    detail: bool = False,
) -> None:
    """The report command: the campaign's report read once, drawn in its format (the
    terminal's, or a file format on stdout or -o), its plot files written, and exit
    status 1 when a row x allocator the terminal shows failed (the table says why)."""
    from rich.console import Console

    from allocmark import api, files
    from allocmark.report import render, table, terminal
    from allocmark.text import printable

    needs = render.needs(fmt) + (render.PLOT_NEEDS if plots_dir else ())
    shown = api.report(db, campaign_id, view, speedup, detail or fmt != "table", needs)
    race = view == "summary" and (p := shown.plan.precision) is not None and p.race
    # A `tune` campaign's terminal report ends on its answer again: the fronts.
    fronts = api.tuned(db, shown.campaign["id"]) if fmt == "table" and race and not output else []
    with contextlib.ExitStack() as stack:
        if output:
            stack.enter_context(writing(output))
        if fmt == "table" and quiet() and view == "summary" and not output:
            table.recommendation(out(), shown.findings)  # -q: the answer alone
        elif fmt == "table":
            f = stack.enter_context(files.writing(output)) if output else None
            console = Console(file=f, width=160, no_color=True, highlight=False) if f else out()
            terminal.draw(console, shown, detail, fronts)
        elif output:
            files.write(output, render.text(shown, fmt))
        else:  # a stored message must not drive the terminal; -o keeps the data as stored
            text = render.text(shown, fmt)
            sys.stdout.write("\n".join(printable(line) for line in text.split("\n")))
    if output:
        err().print(f"wrote {output}")
    if plots_dir:
        with writing(plots_dir):
            made = render.plot_files(shown, plots_dir)
        err().print(f"wrote {len(made)} plot files to {plots_dir}")
    if view == "summary":  # one rule for every format: the export was written first
        fail_on_failures(shown.failed)


def front(db: Path, cid: int) -> None:
    """A `tune` campaign's answer: the Pareto front of settings, as lines to paste."""
    from allocmark import api
    from allocmark.report import table

    table.tune_front(out(), api.tuned(db, cid))


def emit_table(report: Report, detail: bool = False) -> None:
    """The terminal's report (report/terminal.py) on stdout."""
    from allocmark.report import terminal

    terminal.draw(out(), report, detail)


def fail_on_failures(failed: Sequence[str]) -> None:
    """After the output: rows x allocators whose runs failed (Report.failed) make the exit status 1
    (as hyperfine's does for a failing command), naming them; the table above says why."""
    from allocmark.errors import AllocmarkError

    ended = [f for f in failed if f.startswith("campaign ")]
    pairs = [f for f in failed if f not in ended]
    if ended and not pairs:
        raise AllocmarkError(ended[0])
    if pairs:
        shown = "; ".join(pairs[:5]) + (f"; and {len(pairs) - 5} more" if len(pairs) > 5 else "")
        raise AllocmarkError(
            "".join(f"{e}; " for e in ended)
            + f"{len(pairs)} row×allocator pair{'s' if len(pairs) != 1 else ''} without a "
            "result, their "
            f"runs failed: {shown}. The table shows why; `allocmark report --runs --format "
            "csv` lists each run"
        )


def check_output(path: Path, what: str = "-o", db: Path | None = None) -> None:
    """Before any work: a path the output cannot be written to (files.py: never the
    database `db`, never through a link, never in a directory untrusted code or
    others may change, never a directory made for it), said at once."""
    from allocmark import files

    if db is not None:
        files.protect(db)
    files.check(path, what)


def check_directory(path: Path, what: str = "--plots", db: Path | None = None) -> None:
    """--plots DIR: an existing directory, or one made in a directory that exists."""
    from allocmark import files
    from allocmark.errors import UserError

    if db is not None:
        files.protect(db)
    if os.path.lexists(path) and not os.path.isdir(path):
        raise UserError(
            f"{what} {path}: is a file, not a directory; give a directory (made if missing)"
        )
    if os.path.lexists(path):
        files.directory(path, what=what)  # refuses a link, a place others may change
    else:
        files.check(path, what)


@contextlib.contextmanager
def writing(path: Path) -> Iterator[None]:
    """A failure to write `path` (a full disk, a device, /proc) as one line naming it."""
    from allocmark.errors import UserError

    try:
        yield
    except OSError as e:
        raise UserError(
            f"{path}: cannot write: {e.strerror or e}; give a path on a writable disk"
        ) from None
