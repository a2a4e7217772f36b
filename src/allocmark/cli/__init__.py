"""The command line: parse, call the library, print. Nothing else lives here.

One module per verb family (catalog.py, runs.py, reports.py, show.py) over the shared
app.py; each verb imports the stack it uses when it runs, so that `allocmark --help`
starts at once.

May import: api, report, model, errors, defaults, units, text, interrupts.
Never: allocators, answer, executors, native, profile, run, schemas, stats, store,
tomlfile, verbs, workloads.
"""

from __future__ import annotations

import importlib
import sqlite3
import sys

from allocmark.cli.app import app, err
from allocmark.errors import AllocmarkError
from allocmark.text import printable

# Each module registers its verbs; `--help` lists them in this order.
for _verbs in ("runs", "reports", "catalog"):
    importlib.import_module(f"allocmark.cli.{_verbs}")


# Spellings of options an earlier allocmark had: still accepted, each said to be
# deprecated. "Runs" meant blocks (one run of each allocator per cell); "target CI"
# was the margin.
DEPRECATED = {
    "--repetitions": "--blocks",
    "--min-runs": "--blocks",
    "--max-runs": "--max-blocks",
    "--target-ci": "--margin",
}


def modern(argv: list[str]) -> tuple[list[str], list[str]]:
    """`argv` with each deprecated option spelled as it is now (up to a `--`: what
    follows is the user's command), and a warning for each."""
    out, said = list(argv), []
    for i, arg in enumerate(out):
        if arg == "--":
            break
        name, eq, value = arg.partition("=")
        if name in DEPRECATED:
            out[i] = DEPRECATED[name] + eq + value
            said.append(f"warning: {name} is deprecated: it is {DEPRECATED[name]} now")
    return out, said


def main() -> None:
    argv, said = modern(sys.argv[1:])
    for line in said:
        sys.stderr.write(line + "\n")
    try:
        app(args=argv)  # usage errors are printed by Typer itself, with exit code 2
    except AllocmarkError as e:
        _fail(str(e), e.exit_code)
    except KeyboardInterrupt:  # outside a campaign (which says how to resume)
        _fail("interrupted: nothing was stored", 130)
    except sqlite3.DatabaseError as e:  # a damaged page, a file changed under us, a full disk
        if getattr(e, "sqlite_errorname", "") == "SQLITE_FULL":
            _fail(
                f"the disk holding the results database is full ({e}); what it stores was "
                "not changed: free space, then run the command again",
                2,
            )
        _fail(
            f"the results database cannot be read ({e}); stored runs were not changed: "
            "restore it from a copy, or export what is readable with `report`",
            2,
        )
    except OSError as e:
        if e.filename is None:
            raise
        _fail(f"{e.filename}: {e.strerror or e}", 2)  # an unwritable -o or --plots path


def _fail(message: str, code: int) -> None:
    # Our own line breaks stay; a user's string cannot add any (or terminal escapes).
    text = "\n".join(printable(line) for line in message.split("\n"))
    err().print(f"ERROR: {text}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(code)
