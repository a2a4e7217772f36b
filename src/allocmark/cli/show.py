"""Printing what a verb made: the report's tables, a text export, a tune's front."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from allocmark.cli.app import err, out

if TYPE_CHECKING:
    from allocmark import api
    from allocmark.api import Report


def front(db: Path, cid: int) -> None:
    """A `tune` campaign's answer: the Pareto front of settings, as lines to paste."""
    from allocmark import api
    from allocmark.report import table

    table.tune_front(out(), api.tuned(db, cid))


def emit_table(report: Report, output: Path | None, detail: bool = False) -> None:
    """The terminal's report (report/terminal.py) on stdout or (-o) in a file as plain
    text."""
    from rich.console import Console

    from allocmark.report import terminal

    with contextlib.ExitStack() as stack:
        console = out()
        if output:
            stack.enter_context(writing(output))
            output.parent.mkdir(parents=True, exist_ok=True)
            f = stack.enter_context(output.open("w"))
            console = Console(file=f, width=160, no_color=True, highlight=False)
        terminal.draw(console, report, detail)
    if output:
        err().print(f"wrote {output}")


def fail_on_failures(comp: api.Comparison | None) -> None:
    """After the output: cells whose runs failed make the exit status 1 (as hyperfine's
    does for a failing command), naming them; the table above says why."""
    from allocmark import api
    from allocmark.errors import AllocmarkError

    if comp is None:
        return
    failed = api.failed_cells(comp)
    if failed:
        shown = "; ".join(failed[:5]) + (f"; and {len(failed) - 5} more" if len(failed) > 5 else "")
        raise AllocmarkError(
            f"{len(failed)} cell{'s' if len(failed) != 1 else ''} without a result, their "
            f"runs failed: {shown}. The table shows why; `allocmark report --runs --format "
            "csv` lists each run"
        )


def check_output(path: Path, what: str = "-o") -> None:
    """Before a report is drawn: a path it cannot be written to, said at once (not
    after seconds of drawing)."""
    from allocmark.errors import UserError

    if path.is_dir():
        raise UserError(f"{what} {path}: is a directory; give a file name, e.g. {path}/report")
    parent = next((p for p in (path.parent, *path.parent.parents) if p.exists()), Path("/"))
    if not parent.is_dir():
        raise UserError(f"{what} {path}: {parent} is not a directory; give another path")


def check_directory(path: Path, what: str = "--plots") -> None:
    from allocmark.errors import UserError

    if path.exists() and not path.is_dir():
        raise UserError(
            f"{what} {path}: is a file, not a directory; give a directory (made if missing)"
        )
    check_output(path / "x", what)


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


def emit(text: str, output: Path | None) -> None:
    from allocmark.text import printable

    if output:
        with writing(output):
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(text)
        err().print(f"wrote {output}")
    else:  # a stored message must not drive the terminal; -o keeps the data as stored
        sys.stdout.write("\n".join(printable(line) for line in text.split("\n")))
