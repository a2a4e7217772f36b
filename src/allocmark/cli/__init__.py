"""The command line: parse, call the library, print. Nothing else lives here.

One module per verb family (runs.py: run, profile, try; traces.py: record, replay;
verbs.py: bisect, tune, harden; reports.py: report, compare; catalog.py: the
listings) over the shared app.py, with what they print in show.py (a report) and
progress.py (a running campaign); each verb imports the stack it uses when it runs,
so that `allocmark --help` starts at once.

May import: api, report, model, errors, defaults, units, text, interrupts, files.
Never: allocators, answer, dispatchers, native, profile, run, schemas, stats, store,
tomlfile, verbs, workloads.
"""

from __future__ import annotations

import importlib
import os
import sqlite3
import sys
from typing import Any

import typer

from allocmark.cli.app import ARGV, app, err
from allocmark.errors import AllocmarkError
from allocmark.text import printable

# Each module registers its verbs; `--help` lists them in this order.
for _verbs in ("runs", "traces", "verbs", "reports", "catalog"):
    importlib.import_module(f"allocmark.cli.{_verbs}")


# Spellings of options an earlier allocmark had: still accepted, each said to be
# deprecated. "Runs" meant blocks (one run of each allocator per row); "target CI"
# was the margin.
DEPRECATED = {
    "--repetitions": "--blocks",
    "--min-runs": "--blocks",
    "--max-runs": "--max-blocks",
    "--target-ci": "--margin",
    "--executor": "--dispatcher",  # "executor" is the side that runs one run (issue 66)
}


# Spellings one verb had for what is now another option: `--output` is a written
# file in `report`; a built library was `--output` too in the verbs that build one.
DEPRECATED_IN = {verb: {"--output": "--library"} for verb in ("run", "try", "bisect")}


def modern(argv: list[str]) -> tuple[list[str], list[str]]:
    """`argv` with each deprecated option spelled as it is now (up to a `--`: what
    follows is the user's command), and a warning for each."""
    out, said = list(argv), []
    renamed = DEPRECATED | DEPRECATED_IN.get(_verb(argv), {})
    for i, arg in enumerate(out):
        if arg == "--":
            break
        name, eq, value = arg.partition("=")
        if name in renamed:
            out[i] = renamed[name] + eq + value
            said.append(f"warning: {name} is deprecated: it is {renamed[name]} now")
    return out, said


def _verb(argv: list[str]) -> str:
    """The verb: the first word not an option (--run-as takes the one after it)."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--run-as":
            skip = True
        elif not arg.startswith("-"):
            return arg
    return ""


# Where a user puts them by habit (`allocmark try -q …`, as `pytest -q`): before the
# verb, where the application reads them.
ANYWHERE = ("-q", "--quiet", "-v", "--verbose")


def hoisted(argv: list[str]) -> list[str]:
    """`argv` with -q/-v moved in front of the verb (up to a `--`: the command's own)."""
    end = argv.index("--") if "--" in argv else len(argv)
    flags = [a for a in argv[:end] if a in ANYWHERE]
    return flags + [a for a in argv[:end] if a not in ANYWHERE] + argv[end:]


SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")
COMPLETION = ("--show-completion", "--install-completion")


def named_shell(argv: list[str]) -> None:
    """`--show-completion bash`: the shell named is the one used. Typer's flag takes no
    value and finds the shell among the process's ancestors, which a script, a cron job
    or a CI step may lack ("Shell  not supported."); Typer's switch makes the flag take
    the shell's name instead, when one is given."""
    for i, a in enumerate(argv[:-1]):
        if a in COMPLETION and argv[i + 1] in SHELLS:
            os.environ["_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"] = "1"


def main() -> None:
    argv, said = modern(sys.argv[1:])
    argv = hoisted(argv)
    named_shell(argv)
    for line in said:
        sys.stderr.write(line + "\n")
    ARGV[:] = argv
    try:
        try:
            code = app(args=argv, standalone_mode=False)
        except USAGE as e:  # a usage error: as click prints it, and the value given
            _name_the_value(e, argv)
            e.show()
            code = e.exit_code
        except typer.Abort:  # end of input at a question
            code = 130
        finally:
            sys.stdout.flush()  # here, where a full disk or a closed pipe is caught
        sys.exit(code if isinstance(code, int) else 0)
    except BrokenPipeError:  # `allocmark report | head`: the reader had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)  # not a failure: the exit codes' one rule (docs/cli.md)
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
        if e.filename is not None:  # an unwritable -o or --plots path
            _fail(f"{e.filename}: {e.strerror or e}; give a writable path", 2)
        # Standard output on a full disk or a failing device: say so where it can be read.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        _fail(f"cannot write the output: {e.strerror or e}; write it where there is room", 2)


# Typer's own copy of click's usage errors (it vendors click): found from the one it
# exports, so that no private module is imported.
USAGE: type[Any] = next(k for k in typer.BadParameter.__mro__ if k.__name__ == "ClickException")


def _name_the_value(e: Any, argv: list[str]) -> None:
    """Click says what is wrong with an option's value, never the value: add it."""
    param: Any = getattr(e, "param", None)
    if not isinstance(e, typer.BadParameter) or not hasattr(param, "secondary_opts"):
        return
    opts = [*param.opts, *param.secondary_opts]
    own = argv[: argv.index("--")] if "--" in argv else argv
    for i, arg in enumerate(own):
        name, eq, value = arg.partition("=")
        if eq and name in opts:
            e.message += f" (got {printable(value)!r})"
            return
        if arg in opts and i + 1 < len(own):
            e.message += f" (got {printable(own[i + 1])!r})"
            return


def _fail(message: str, code: int) -> None:
    # Our own line breaks stay; a user's string cannot add any (or terminal escapes).
    text = "\n".join(printable(line) for line in message.split("\n"))
    err().print(f"ERROR: {text}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(code)
