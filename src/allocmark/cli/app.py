"""The Typer application, its consoles and the options several verbs share.

Light on purpose: `allocmark --help` imports this, Typer and nothing of the run
stack; each verb imports what it uses when it runs (bench/startup.py)."""

from __future__ import annotations

import functools
import importlib
import io
import math
import os
import re
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, TextIO, cast

import typer

from allocmark import interrupts
from allocmark.defaults import CONFIRM_RUNS, DEFAULT_MAX_BLOCKS, RUN_AS_ENV
from allocmark.errors import UserError

if TYPE_CHECKING:
    from rich.console import Console

# -h as well as --help, in every verb (click hands a group's help names to its verbs).
HELP = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(
    context_settings=HELP,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Benchmark memory allocators: which malloc should my program use, and why?",
)
# What each verb imports when it runs, loaded first with Ctrl-C held (interrupts.py):
# pydantic builds its validators at import, and one interrupted there stays broken
# (the fault battery's Ctrl-C at start-up found a traceback once the imports moved
# from start-up into the verbs). `--help` alone loads none of it.
# (The report modules bring the stages below them: answer's report value and the store.)
_REPORT = (
    "allocmark.report.render",
    "allocmark.report.table",
    "allocmark.report.glance",
    "allocmark.report.extra",
    "allocmark.report.terminal",
)
STACKS: dict[str, tuple[str, ...]] = {
    **{
        verb: ("allocmark.api.campaigns", *_REPORT)
        for verb in ("run", "profile", "try", "tune", "harden", "bisect")
    },
    "report": _REPORT,
    "compare": ("allocmark.api.campaigns", "allocmark.report.table"),
    "allocators": ("allocmark.api", "allocmark.report.catalog"),
    **{verb: ("allocmark.api",) for verb in ("alloc", "workloads", "schema")},
}


def _version(value: bool) -> None:
    if value:
        import importlib.metadata

        try:
            number = importlib.metadata.version("allocmark")
        except importlib.metadata.PackageNotFoundError:  # a source tree never installed
            number = "0+unknown"
        sys.stdout.write(f"allocmark {number}\n")
        raise typer.Exit()


# How much a running campaign says on the terminal: -q its answer and errors only,
# -v every run as it ends too (cli/progress.py reads it).
VERBOSITY = {"level": 0}
# The arguments the application was invoked with, as main() hands them over (its
# deprecated spellings rewritten, -q/-v hoisted): what the checks of the command line
# as a whole read (contradicting flags, a command's place), never sys.argv.
ARGV: list[str] = []


@app.callback()
def _load(
    ctx: typer.Context,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "-q", "--quiet", help="no progress or notes while a campaign runs: its answer only"
        ),
    ] = False,
    verbose: Annotated[
        bool, typer.Option("-v", "--verbose", help="also a line for every run as it ends")
    ] = False,
    run_as: Annotated[
        str | None,
        typer.Option(
            "--run-as",
            help="run as root: the user the measured programs, probes and builds run as "
            "(default: a transient uid of each campaign's own; root: no other user), also "
            f"{RUN_AS_ENV}",
        ),
    ] = None,
) -> None:
    if run_as is not None:
        os.environ[RUN_AS_ENV] = run_as
    if quiet and verbose:
        raise typer.BadParameter("-q and -v contradict each other: give one", param_hint="-q")
    VERBOSITY["level"] = -1 if quiet else 1 if verbose else 0
    _contradictions(ARGV)
    piped_width(os.environ, strict=True)
    if _asks_help(ARGV):
        return  # a verb's --help needs its signature only, not its stack
    with interrupts.held():
        for module in STACKS.get(ctx.invoked_subcommand or "", ()):
            importlib.import_module(module)


def placed(command: list[str] | None) -> tuple[str, ...]:
    """The command as given, refused when allocmark took some of its words as its own
    options (`try -a glibc ./prog -n 5`: the program's -n became allocmark's): the
    command after `--` is never read for options."""
    words = tuple(command or ())
    argv = ARGV
    if not words or "--" in argv:
        return words
    starts = [i for i, w in enumerate(argv) if w == words[0]]
    if any(tuple(argv[i:]) == words for i in starts):
        return words  # the command is the arguments' end, as given
    at = next((i for i in starts if _within(words, argv[i:])), -1)
    if at >= 0:
        taken = [w for w in argv[at + 1 :] if w.startswith("-")]
        raise UserError(
            f"{' '.join(taken) or 'an option'} after {words[0]}: is it allocmark's or your "
            f"program's? Put your command after --: allocmark {' '.join(argv[:at])} -- "
            f"{' '.join(argv[at:])}"
        )
    return words


def _within(words: tuple[str, ...], tail: list[str]) -> bool:
    """Are `words` `tail` in order with some of tail's words taken out?"""
    it = iter(tail)
    return all(w in it for w in words)


def quiet() -> bool:
    """-q: a campaign's answer alone (no progress, notes or tables)."""
    return VERBOSITY["level"] < 0


def _contradictions(argv: list[str]) -> None:
    """`--why --no-why`: a flag and its negation among allocmark's own arguments (the
    last would win silently)."""
    own = argv[: argv.index("--")] if "--" in argv else argv
    for flag in own:
        if flag.startswith("--no-") and f"--{flag[5:]}" in own:
            raise typer.BadParameter(
                f"--{flag[5:]} and {flag} contradict each other: give one", param_hint=flag
            )


def _asks_help(argv: list[str]) -> bool:
    """`--help` or `-h` among allocmark's own arguments; after `--` they are the
    command's."""
    own = argv[: argv.index("--")] if "--" in argv else argv
    return "--help" in own or "-h" in own


alloc_app = typer.Typer(
    context_settings=HELP,
    no_args_is_help=True,
    help="Build allocators from crates.io (see `allocmark allocators`).",
)
app.add_typer(alloc_app, name="alloc")


@functools.cache
def out() -> Console:
    return _console(stderr=False)


@functools.cache
def err() -> Console:
    return _console(stderr=True)


def _console(stderr: bool) -> Console:
    from rich.console import Console

    class Closed(Console):
        """A reader that closed the pipe had enough (`report | head -1`): main() ends
        that as it ends every closed pipe (not a failure), where rich exits 1."""

        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Closed(stderr=stderr)
    # Piped or in a file: tables as wide as ALLOCMARK_WIDTH, else COLUMNS, else 160 (not
    # rich's 80, which wraps every table of a CI log), and no trailing blanks.
    return Closed(file=cast("IO[str]", _Trimmed(stream)), width=piped_width(os.environ))


def piped_width(env: os._Environ[str] | dict[str, str], strict: bool = False) -> int:
    """ALLOCMARK_WIDTH, else COLUMNS (the shell's, often stale: skipped when not a
    width), else 160. `strict`: ALLOCMARK_WIDTH set to something else than a width is
    refused (it is the user's own setting, and it was ignored without a word)."""
    for name in ("ALLOCMARK_WIDTH", "COLUMNS"):
        text = env.get(name, "")
        if text.isdigit() and 40 <= int(text) <= 1000:
            return int(text)
        if strict and name == "ALLOCMARK_WIDTH" and name in env:
            raise UserError(
                f"ALLOCMARK_WIDTH={text!r}: expected a number of columns from 40 to 1000, "
                "e.g. ALLOCMARK_WIDTH=120 (or unset it)"
            )
    return 160


class _Trimmed(io.TextIOBase):
    """A stream without the blanks rich pads each table line with to the width."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(_BLANKS.sub("\n", text))
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.stream.fileno()


_BLANKS = re.compile(r"[ \t]+\n")


AllocOpt = Annotated[
    list[str] | None,
    typer.Option(
        "-a",
        "--allocator",
        help="allocators: NAME[,NAME...], NAME=/path/lib.so[:ENV=VAL,...] "
        "or revisions of a git repository: NAME@git:PATH#REV[,REV...] or NAME@git:PATH#A..B "
        "(with --build and --library)",
    ),
]
BuildOpt = Annotated[
    str | None,
    typer.Option(
        "--build",
        help="how a revision of a repository is built: a shell command "
        "run in a clean checkout of it, e.g. 'make -j2'",
    ),
]
LibraryOpt = Annotated[
    str | None,
    typer.Option(
        "--library",
        help="the library --build makes, relative to the checkout, e.g. build/libmine.so",
    ),
]
CatalogOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--catalog", help="extra allocator catalog TOML file (same schema as the built-in one)"
    ),
]
DbOpt = Annotated[Path, typer.Option("--db", help="results database (SQLite)")]
# One metric vocabulary for every verb (answer/analyze.py's METRIC_WORDS).
MetricOpt = Annotated[
    str,
    typer.Option(
        "--metric",
        help="time, rss (peak RSS), memory-time, end-rss, idle-rss, overhead or throughput",
    ),
]
WorkloadOpt = Annotated[
    list[str] | None, typer.Option("-w", "--workload", help="workloads W[,W...]")
]
CommandArg = Annotated[  # profile, tune: a program after --, or workloads by -w
    list[str] | None,
    typer.Argument(help="your program and its arguments, after -- (or workloads by -w)"),
]
ParamOpt = Annotated[
    list[str] | None, typer.Option("-p", "--param", help="NAME=V[,V...] (repeatable)")
]
# -n: blocks per row (a block runs every allocator once); at least that many where
# blocks are added until the verdicts decide (--max-blocks above it).
BLOCKS_HELP = "blocks per row: each runs every allocator once (at least, below --max-blocks)"
BlocksOpt = Annotated[int, typer.Option("-n", "--blocks", min=1, help=BLOCKS_HELP)]
SuiteBlocksOpt = Annotated[  # run: the suite's own when not given
    int | None, typer.Option("-n", "--blocks", min=1, help=BLOCKS_HELP + " (default: the suite's)")
]
# One seed rule for every verb that orders runs: the suite's seed, else 1.
SeedOpt = Annotated[
    int | None,
    typer.Option(
        "--seed",
        min=0,
        max=2**63 - 1,
        help="seed of the run order, 0 to 2^63-1 (default: the suite's, else 1)",
    ),
]
MaxBlocksOpt = Annotated[
    int | None,
    typer.Option(
        "--max-blocks",
        min=1,
        help=f"at most this many blocks per row "
        f"(default {DEFAULT_MAX_BLOCKS}; equal to -n for exactly n)",
    ),
]
MarginOpt = Annotated[
    str | None,
    typer.Option(
        "--margin",
        help="equivalence margin: add blocks until every ratio is faster, slower or "
        "the same within ±this (default: the suite's, else 3%)",
    ),
]
BudgetOpt = Annotated[
    str | None,
    typer.Option(
        "--budget",
        help="stop adding blocks after this much time, e.g. 2m, 90s, "
        "1h; 0 = no limit (default: the suite's, else 2m)",
    ),
]
DetailOpt = Annotated[
    bool,
    typer.Option(
        "--detail",
        help="every table: each value, ratio, interval and verdict, and "
        "the recommendation's reasons (default: the verdict matrix and the answers)",
    ),
]
ProfileOpt = Annotated[
    bool, typer.Option("--profile", help="under the profiler (libamprof.so): its view too")
]
WhyOpt = Annotated[
    bool | None,
    typer.Option(
        "--why/--no-why",
        help="after the measured blocks, 4 profiled blocks of the "
        "rows with a decided difference, to say why (default: when they add at most "
        "15 % to the campaign's time)",
    ),
]
SampleOpt = Annotated[
    int, typer.Option("--sample", min=1, help="profiler: time 1 allocator call in N")
]
MAX_TIMEOUT = 7 * 86400.0  # a week: a larger timeout is a typo (and inf breaks a resume)


def seconds(value: float | None) -> float | None:
    """--timeout checked here, not by click's range: NaN passes every comparison, and
    click then named the wrong bound."""
    if value is None:
        return None
    if not math.isfinite(value):
        raise typer.BadParameter(f"{value} is not a number of seconds; give e.g. 60")
    if not 0.1 <= value <= MAX_TIMEOUT:
        raise typer.BadParameter(f"{value:g} s is outside 0.1 s … {MAX_TIMEOUT:g} s (a week)")
    return value


TimeoutOpt = Annotated[
    float | None,
    typer.Option("--timeout", callback=seconds, help="seconds per run"),
]
RunTimeoutOpt = Annotated[  # with a default of its own (try, profile)
    float, typer.Option("--timeout", callback=seconds, help="seconds per run")
]
MemoryOpt = Annotated[
    str | None,
    typer.Option(
        "--memory-limit",
        help="memory a run's processes may use together, e.g. 4G; "
        "a run past it is killed and stored as OOM",
    ),
]
YesOpt = Annotated[
    bool,
    typer.Option("--yes", "-y", help=f"start a plan of more than {CONFIRM_RUNS:,} runs"),
]
DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        envvar="ALLOCMARK_DRY_RUN",
        help="check everything and say what would run (allocators, workloads, blocks), "
        "then stop: nothing is built, run or stored",
    ),
]
DispatcherOpt = Annotated[
    str,
    typer.Option("--dispatcher", help="where runs happen: local, or dask (a cluster)"),
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option("--scheduler", help="the Dask scheduler, e.g. tcp://10.0.0.1:8786"),
]


def names(workload: list[str] | None) -> tuple[str, ...]:
    found = [[w.strip() for w in item.split(",")] for item in workload or []]
    if any("" in n for n in found):  # `-w ''` must not mean "the whole suite"
        empty = next(item for item, n in zip(workload or [], found, strict=True) if "" in n)
        raise UserError(
            f"-w {empty!r} has an empty workload name; e.g. -w churn,larson "
            "(see `allocmark workloads`)"
        )
    return tuple(w for n in found for w in n)


def one_target(workload: list[str] | None, command: list[str] | None, verb: str) -> tuple[str, ...]:
    """The workloads of a verb that takes either -w or a program after --."""
    chosen = names(workload)
    if bool(chosen) == bool(command):
        raise UserError(
            f"name the workload(s) to {verb} with -w (e.g. -w xthread), or give "
            "your program after --, one of the two"
        )
    return chosen


def fraction(text: str | None, option: str) -> float | None:
    from allocmark import units

    return units.parse_fraction(text, option) if text is not None else None


def size(text: str | None) -> int:
    from allocmark import units

    return units.parse_size(text) if text is not None else 0


def duration(text: str | None) -> float | None:
    from allocmark import units

    return units.parse_duration(text) if text is not None else None
