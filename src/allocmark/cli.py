"""The command line: parse, call the library, print. Nothing else lives here."""

from __future__ import annotations

import contextlib
import json
import math
import signal
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from allocmark import allocators, api, builder, compare, harden, plan, schemas, workloads
from allocmark.campaign import RoundDone, RunDone
from allocmark.errors import AllocmarkError, Interrupted, UserError
from allocmark.model import RunStatus
from allocmark.report import data, extra, fmt, render, table
from allocmark.store import Store

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    help="Benchmark memory allocators: which malloc should my program use, and why?",
)
out = Console()
err = Console(stderr=True)
for _console in (out, err):
    if not _console.is_terminal:  # tables in files and CI logs should not wrap at 80
        _console.width = 160

alloc_app = typer.Typer(
    no_args_is_help=True, help="Build allocators from crates.io (see `allocmark allocators`)."
)
app.add_typer(alloc_app, name="alloc")

AllocOpt = Annotated[
    list[str] | None,
    typer.Option(
        "-a", "--allocator", help="allocators: NAME[,NAME...] or NAME=/path/lib.so[:ENV=VAL,...]"
    ),
]
CatalogOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--catalog", help="extra allocator catalog TOML file (same schema as the built-in one)"
    ),
]
DbOpt = Annotated[Path, typer.Option("--db", help="results database (SQLite)")]
WorkloadOpt = Annotated[
    list[str] | None, typer.Option("-w", "--workload", help="workloads W[,W...]")
]
ParamOpt = Annotated[
    list[str] | None, typer.Option("-p", "--param", help="NAME=V[,V...] (repeatable)")
]


@app.command("allocators")
def allocators_cmd(
    alloc: AllocOpt = None,
    catalog: CatalogOpt = None,
    every: Annotated[
        bool, typer.Option("--all", help="a row per allocator not built yet, too")
    ] = False,
) -> None:
    """List the allocator catalog with what verification found on this machine."""
    specs, _ = api.selected(alloc, catalog or [])
    if not alloc:  # the whole catalog, including what allocmark can build
        specs = [s for s in allocators.load_catalog(catalog or []) if not s.hidden]
    verified = allocators.verify_all(specs)
    table.allocators(out, verified, every or bool(alloc))


@alloc_app.command("build")
def alloc_build_cmd(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="NAME@VERSION[+FLAVOR], FAMILY@* (every version), or FAMILY"),
    ] = None,
    build_all: Annotated[bool, typer.Option("--all", help="every recipe entry")] = False,
    force: Annotated[bool, typer.Option("--force", help="rebuild even if cached")] = False,
    catalog: CatalogOpt = None,
) -> None:
    """Build allocators from their crates.io sys crates into the cache, then verify them."""
    specs = allocators.load_catalog(catalog or [])
    for spec in allocators.to_build(specs, names or [], build_all):
        built = builder.build(spec, force=force, say=lambda m: err.print(f"[cyan]{m}…[/]"))
        v = allocators.verify(spec)
        took = (
            f"built in {built.provenance.get('build_seconds', '?')} s"
            if built.rebuilt
            else "cached"
        )
        out.print(f"{spec.name}: {v.status.value} {v.version or ''} sha256 {(v.sha256 or '')[:12]} "
                  f"({took}) {v.reason}".rstrip())  # fmt: skip


@app.command("workloads")
def workloads_cmd(
    packages: Annotated[
        bool, typer.Option("--packages", help="only print the Debian packages of the apps")
    ] = False,
) -> None:
    """List the workloads, their parameters, and which applications are installed."""
    catalog = workloads.load_catalog().values()
    if packages:
        out.print(" ".join(dict.fromkeys(p for w in catalog for p in w.packages)))
        return
    for w in catalog:
        state = ""
        if w.kind == "app":
            lacking = workloads.missing(w)
            state = (f" [red]missing {', '.join(lacking)}: {workloads.install_hint(w)}[/]"
                     if lacking else " [green]installed[/]")  # fmt: skip
        out.print(f"[bold]{w.name}[/] ({w.kind}): {w.description}{state}")
        for line in workloads.describe_params(w):
            out.print("    " + line, markup=False, highlight=False)


BlocksOpt = Annotated[
    int, typer.Option("-n", "--repetitions", "--min-runs", min=1, help="blocks (at least)")
]
MaxRunsOpt = Annotated[
    int | None,
    typer.Option("--max-runs", min=1, help=f"at most this many blocks per cell "
                 f"(default {api.DEFAULT_MAX_RUNS}; equal to -n for exactly n)"),
]  # fmt: skip
TargetOpt = Annotated[
    str | None,
    typer.Option("--margin", "--target-ci",
                 help="equivalence margin: add blocks until every ratio is faster, slower or "
                 "the same within ±this (default: the suite's, else 3%)"),
]  # fmt: skip
BudgetOpt = Annotated[
    str | None,
    typer.Option("--budget", help="stop adding blocks after this much time, e.g. 2m, 90s, "
                 "1h; 0 = no limit (default: the suite's, else 2m)"),
]  # fmt: skip
SampleOpt = Annotated[
    int, typer.Option("--sample", min=1, help="profiler: time 1 allocator call in N")
]
MAX_TIMEOUT = 7 * 86400.0  # a week: a larger timeout is a typo (and inf breaks a resume)


def _seconds(value: float | None) -> float | None:
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
    typer.Option("--timeout", callback=_seconds, help="seconds per run"),
]
RunTimeoutOpt = Annotated[  # with a default of its own (try, profile)
    float, typer.Option("--timeout", callback=_seconds, help="seconds per run")
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
    typer.Option("--yes", "-y", help=f"start a plan of more than {plan.CONFIRM_RUNS:,} runs"),
]
ExecutorOpt = Annotated[
    str, typer.Option("--executor", help="where runs happen: local, or dask (a cluster)")
]
SchedulerOpt = Annotated[
    str | None,
    typer.Option("--scheduler", help="the Dask scheduler, e.g. tcp://10.0.0.1:8786"),
]


@app.command("run")
def run_cmd(
    suite: Annotated[
        str | None, typer.Option("--suite", help="built-in suite name or suite .toml file")
    ] = None,
    alloc: AllocOpt = None,
    workload: WorkloadOpt = None,
    param: ParamOpt = None,
    reps: Annotated[
        int | None,
        typer.Option("-n", "--repetitions", "--min-runs", min=1, help="blocks per cell (at least)"),
    ] = None,
    max_runs: MaxRunsOpt = None,
    margin: TargetOpt = None,
    budget: BudgetOpt = None,
    timeout: TimeoutOpt = None,
    seed: Annotated[
        int | None,
        typer.Option("--seed", min=0, max=2**63 - 1, help="shuffle seed of the run order"),
    ] = None,
    db: DbOpt = api.DEFAULT_DB,
    resume: Annotated[
        bool, typer.Option("--resume", help="finish the newest unfinished campaign in --db")
    ] = False,
    take_over: Annotated[
        bool,
        typer.Option(
            "--take-over",
            help="with --resume: take a campaign over from an owner "
            "on another machine that no longer runs it",
        ),
    ] = False,
    catalog: CatalogOpt = None,
    profile: Annotated[
        bool, typer.Option("--profile", help="run under the profiler (libamprof.so) and store it")
    ] = False,
    sample: SampleOpt = 1024,
    executor: ExecutorOpt = "local",
    scheduler: SchedulerOpt = None,
    yes: YesOpt = False,
    memory_limit: MemoryOpt = None,
) -> None:
    """Run a suite (default: quick) and store every run."""
    if resume:
        cid = _follow(api.resume(db, executor, scheduler, take_over, yes), db)
    else:
        req = api.Request(
            suite=suite, allocators=tuple(alloc or ()), workloads=_names(workload),
            params=tuple(param or ()), min_runs=reps, max_runs=max_runs,
            margin=_fraction(margin, "--margin"), budget_s=_duration(budget),
            timeout_s=timeout, seed=seed, catalogs=tuple(catalog or ()),
            sample=sample if profile else 0, db=db, executor=executor, scheduler=scheduler,
            yes=yes, memory_limit=_size(memory_limit),
        )  # fmt: skip
        cid = _follow(api.run(req), db)
    store = Store(db, create=False)
    _emit_table(data.load(store, cid, brief=True), None)
    if store.sample(cid):
        _emit_table(data.load(store, cid, "profile"), None)


def _names(workload: list[str] | None) -> tuple[str, ...]:
    names = [[w.strip() for w in item.split(",") if w.strip()] for item in workload or []]
    if any(not n for n in names):  # `-w ''` must not mean "the whole suite"
        raise UserError("-w '' names no workload; e.g. -w churn,larson (see `allocmark workloads`)")
    return tuple(w for n in names for w in n)


def _one_target(
    workload: list[str] | None, command: list[str] | None, verb: str
) -> tuple[str, ...]:
    """The workloads of a verb that takes either -w or a program after --."""
    names = _names(workload)
    if bool(names) == bool(command):
        raise UserError(f"name the workload(s) to {verb} with -w (e.g. -w xthread), or give "
                        "your program after --, one of the two")  # fmt: skip
    return names


def _fraction(text: str | None, option: str) -> float | None:
    return plan.parse_fraction(text, option) if text else None


def _size(text: str | None) -> int:
    return plan.parse_size(text) if text else 0


def _duration(text: str | None) -> float | None:
    return plan.parse_duration(text) if text is not None else None


def _follow(events: Iterator[api.Event], db: Path) -> int:
    """Prints a campaign's notes and progress as it runs; its id at the end."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        with _Progress() as progress:
            for event in events:
                if isinstance(event, api.Finished):
                    return event.campaign
                progress.show(event)
    except KeyboardInterrupt:
        raise Interrupted(
            f"interrupted: finished runs are saved in {db}; "
            f"finish with `allocmark run --resume --db {db}`"
        ) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    raise AllocmarkError("the campaign ended without finishing")  # not reached


class _Progress:
    """The progress bar and the loosest interval of a campaign."""

    def __init__(self) -> None:
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())  # fmt: skip
        self.bar = Progress(*columns, console=err, transient=False)
        self.task: TaskID | None = None
        self.precision = "first blocks"
        self.target: float | None = None

    def __enter__(self) -> _Progress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

    def show(self, event: api.Event) -> None:
        if isinstance(event, api.Note):
            style = "yellow" if event.level == "warning" else "cyan"
            err.print(f"[{style}]{escape(event.text)}[/]")
        elif isinstance(event, api.Planned):
            out.print(_plan_line(event), highlight=False)
            self.target = event.precision.margin if event.precision else None
            self.task = self.bar.add_task("running", total=event.total, completed=event.done)
        elif isinstance(event, RoundDone):
            more = f", {event.blocks} more blocks" if event.blocks else ", done"
            self.precision = (f"{event.undecided} of {event.ratios} ratios undecided "
                              f"(margin ±{self.target or 0:.0%}){more}")  # fmt: skip
        elif isinstance(event, RunDone) and self.task is not None:
            spec, result = event.spec, event.result
            what = f"{self.precision} | {spec.allocator} {spec.workload}"
            self.bar.update(self.task, completed=event.done, total=event.total, description=what)
            # The battery's crashes are its findings (its matrix shows them).
            if result.status is not RunStatus.OK and spec.workload != harden.WORKLOAD:
                self.bar.console.print(
                    f"{result.status.value}: {spec.allocator} {spec.workload} "
                    f"{dict(spec.params)}: {result.detail[:300]}",
                    soft_wrap=True, markup=False,
                )  # fmt: skip


def _plan_line(p: api.Planned) -> str:
    if p.done:
        return f"resuming campaign {p.campaign}: {p.total - p.done} runs left{_eta(p)}"
    more = ""
    if p.precision:
        budget = f"{p.precision.budget_s:g} s budget" if p.precision.budget_s else "no time budget"
        more = (f", then more blocks until every ratio is faster, slower or the same within "
                f"±{p.precision.margin:.0%} "
                f"(up to {p.precision.max_runs} blocks, {budget})")  # fmt: skip
    return (f"campaign {p.campaign}: {p.allocators} allocators, {p.min_runs} blocks of every "
            f"cell{more}; {p.measured} measured + {p.setup} set-up runs (baseline RSS, "
            f"verification) to start{_eta(p)} -> {p.db}")  # fmt: skip


def _eta(p: api.Planned) -> str:
    if p.estimate_s is None:
        return " (time: unknown until the first runs end)"
    t = p.estimate_s
    about = f"{t:.0f} s" if t < 90 else f"{t / 60:.0f} min" if t < 5400 else f"{t / 3600:.1f} h"
    return f" (about {about} at this database's earlier run times)"


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a campaign as cleanly as Ctrl-C


@app.command("profile")
def profile_cmd(
    command: Annotated[
        list[str] | None, typer.Argument(help="or your own program and its arguments, after --")
    ] = None,
    alloc: AllocOpt = None,
    workload: WorkloadOpt = None,
    param: ParamOpt = None,
    reps: Annotated[int, typer.Option("-n", "--repetitions", min=1)] = 1,
    sample: SampleOpt = 1024,
    timeout: RunTimeoutOpt = 600,
    db: DbOpt = api.DEFAULT_DB,
    catalog: CatalogOpt = None,
    executor: ExecutorOpt = "local",
    scheduler: SchedulerOpt = None,
    yes: YesOpt = False,
    memory_limit: MemoryOpt = None,
) -> None:
    """Profile what each allocator does inside a workload or your program (mmprof style),
    side by side."""
    names = _one_target(workload, command, "profile")
    req = api.Request(workloads=names, command=tuple(command or ()), allocators=tuple(alloc or ()),
                      params=tuple(param or ()),
                      min_runs=reps, timeout_s=timeout, seed=1, catalogs=tuple(catalog or ()),
                      sample=sample, db=db, executor=executor, scheduler=scheduler,
                      yes=yes, memory_limit=_size(memory_limit))  # fmt: skip
    cid = _follow(api.run(req), db)
    _emit_table(data.load(Store(db, create=False), cid, "profile"), None)


@app.command("try")
def try_cmd(
    command: Annotated[list[str], typer.Argument(help="your program and its arguments, after --")],
    alloc: AllocOpt = None,
    reps: BlocksOpt = api.DEFAULT_MIN_RUNS,
    max_runs: MaxRunsOpt = None,
    margin: TargetOpt = None,
    budget: BudgetOpt = None,
    timeout: RunTimeoutOpt = 600,
    db: DbOpt = api.DEFAULT_DB,
    catalog: CatalogOpt = None,
    executor: ExecutorOpt = "local",
    scheduler: SchedulerOpt = None,
    yes: YesOpt = False,
    ignore: Annotated[
        bool,
        typer.Option(
            "-i", "--ignore-failure", help="exit 0 even when every run under an allocator failed"
        ),
    ] = False,
    memory_limit: MemoryOpt = None,
    profile: Annotated[
        bool, typer.Option("--profile", help="under the profiler (libamprof.so): its view too")
    ] = False,
    sample: SampleOpt = 1024,
) -> None:
    """Run your own command under every usable allocator and compare."""
    req = api.Request(command=tuple(command), allocators=tuple(alloc or ()), min_runs=reps,
                      max_runs=max_runs, margin=_fraction(margin, "--margin"),
                      budget_s=_duration(budget), timeout_s=timeout,
                      catalogs=tuple(catalog or ()), db=db, executor=executor,
                      scheduler=scheduler, yes=yes, memory_limit=_size(memory_limit),
                      sample=sample if profile else 0)  # fmt: skip
    cid = _follow(api.run(req), db)
    lines, comp = api.command_lines(db, cid)
    table.try_table(out, lines, comp)
    store = Store(db, create=False)
    table.extra(out, extra.extras(data.load(store, cid, known=comp)))
    if profile:
        _emit_table(data.load(store, cid, "profile"), None)
    # As hyperfine: a command that failed is an error for scripts, unless told otherwise.
    if (failed := [f"{x.allocator} ({x.state})" for x in lines if x.wall is None]) and not ignore:
        raise AllocmarkError(f"no run succeeded under {', '.join(failed)}; the table shows "
                             "why (use -i to exit 0 anyway)")  # fmt: skip


@app.command("tune")
def tune_cmd(
    command: Annotated[
        list[str] | None, typer.Argument(help="your program and its arguments, after --")
    ] = None,
    workload: WorkloadOpt = None,
    param: ParamOpt = None,
    alloc: AllocOpt = None,
    objective: Annotated[
        str, typer.Option("--objective", help="time, rss or pareto (both)")
    ] = "pareto",
    reps: BlocksOpt = api.DEFAULT_MIN_RUNS,
    max_runs: MaxRunsOpt = None,
    margin: TargetOpt = None,
    budget: BudgetOpt = None,
    timeout: TimeoutOpt = None,
    db: DbOpt = api.DEFAULT_DB,
    catalog: CatalogOpt = None,
    yes: YesOpt = False,
) -> None:
    """Race each allocator's settings (catalog/settings.toml) for your program or a
    workload; print the Pareto front of time and peak RSS as lines to paste."""
    names = _one_target(workload, command, "tune")
    req = api.Request(command=tuple(command or ()), workloads=names,
                      params=tuple(param or ()), allocators=tuple(alloc or ()), min_runs=reps,
                      max_runs=max_runs, margin=_fraction(margin, "--margin"),
                      budget_s=_duration(budget), timeout_s=timeout,
                      catalogs=tuple(catalog or ()), db=db, yes=yes, tune=objective)  # fmt: skip
    cid = _follow(api.run(req), db)
    table.recommendation(out, api.comparison(db, cid))
    _front(db, cid)


def _front(db: Path, cid: int) -> None:
    table.tune_front(out, api.tuned(db, cid))


@app.command("harden")
def harden_cmd(
    alloc: AllocOpt = None,
    reps: Annotated[
        int, typer.Option("-n", "--repetitions", min=1, help="runs of each test per allocator")
    ] = 3,
    tests: Annotated[
        str | None, typer.Option("--tests", help="TEST[,TEST...] (default: every test)")
    ] = None,
    cost: Annotated[
        bool,
        typer.Option(
            "--cost/--no-cost", help="also time each hardened build against its plain one"
        ),
    ] = True,
    timeout: Annotated[
        float,
        typer.Option("--timeout", callback=_seconds, help="seconds a test may run (then: hang)"),
    ] = 5.0,
    db: DbOpt = api.DEFAULT_DB,
    catalog: CatalogOpt = None,
    yes: YesOpt = False,
) -> None:
    """The hardening battery: what each allocator does about each heap error, its
    score, and what hardening costs."""
    chosen = tuple(t.strip() for t in (tests or "").split(",") if t.strip())
    catalogs = tuple(catalog or ())
    req = api.harden_request(chosen, reps, tuple(alloc or ()), catalogs, timeout_s=timeout,
                             db=db, yes=yes)  # fmt: skip
    cid = _follow(api.run(req), db)
    report = data.load(Store(db, create=False), cid)
    table.extra(out, extra.extras(report))
    if not cost or report.battery is None:
        return
    more = api.cost_request(report.battery.allocators, db=db, catalogs=catalogs, yes=yes)
    if more is None:
        err.print("no hardened build beside its plain build to cost: e.g. `allocmark alloc "
                  "build mimalloc@2.1.7 mimalloc@2.1.7+secure`", style="dim")  # fmt: skip
        return
    cost_cid = _follow(api.run(more), db)
    comp = data.load(Store(db, create=False), cost_cid).comparison
    if comp is not None:
        table.extra(out, [extra.cost_table(harden.costs(comp), comp.margin)])


@app.command("schema")
def schema_cmd(
    kind: Annotated[
        str,
        typer.Argument(
            help="suite, catalog (allocators), workloads, settings or runs (a runs export)"
        ),
    ],
) -> None:
    """Print the JSON Schema of a suite, catalog, settings file or runs export."""
    sys.stdout.write(json.dumps(schemas.json_schema(kind), indent=2) + "\n")


@app.command("report")
def report_cmd(
    db: DbOpt = api.DEFAULT_DB,
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
) -> None:
    """Show or export the report of a stored campaign."""
    if fmt not in ("table", *render.TEXT_FORMATS):
        raise UserError(f"--format {fmt!r}: choose table, {', '.join(render.TEXT_FORMATS)}")
    if runs and profiles:
        raise UserError("--runs and --profile are two views: choose one")
    if runs and fmt not in ("csv", "json"):
        raise UserError("--runs lists every run as csv or json: add --format csv (or json)")
    view = "profile" if profiles else "runs" if runs else "summary"
    store = Store(db, create=False)
    cid = store.campaign(campaign_id).id
    if fmt == "table":
        _emit_table(data.load(store, cid, view, speedup, brief=True), output)
        if view == "summary" and store.settings(cid).get("race") and not output:
            _front(db, cid)  # a `tune` campaign: its answer again
    else:
        _emit(render.text(store, cid, fmt, view, speedup), output)
    if plots_dir:
        files = render.plot_files(store, cid, plots_dir, speedup)
        err.print(f"wrote {len(files)} plot files to {plots_dir}")


def _emit_table(report: data.ReportData, output: Path | None) -> None:
    """The terminal's tables, on stdout or (-o) in a file as plain text."""
    with contextlib.ExitStack() as stack:
        console = out
        if output:
            output.parent.mkdir(parents=True, exist_ok=True)
            f = stack.enter_context(output.open("w"))
            console = Console(file=f, width=160, no_color=True, highlight=False)
        if report.view == "profile":
            table.profiles(console, report.profiles)
        else:
            table.comparison(console, data.comparison(report))
            table.extra(console, extra.extras(report))
    if output:
        err.print(f"wrote {output}")


def _emit(text: str, output: Path | None) -> None:
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text)
        err.print(f"wrote {output}")
    else:  # a stored message must not drive the terminal; -o keeps the data as stored
        sys.stdout.write("\n".join(fmt.printable(line) for line in text.split("\n")))


_METRIC_NAMES = {
    "time": "time_s",
    "rss": "peak_rss_kib",
    "memory-time": "rss_mib_s",
    "end-rss": "end_rss_kib",
    "idle-rss": "idle_rss_kib",
    "overhead": "overhead_ratio",
    "throughput": "ops_per_s",
}


@app.command("compare")
def compare_cmd(
    old: Annotated[str, typer.Argument(help="DB, DB#CAMPAIGN or a runs JSON export")],
    new: Annotated[str, typer.Argument(help="DB, DB#CAMPAIGN or a runs JSON export")],
    metric: Annotated[
        str, typer.Option("--metric", help=f"one of: {', '.join(_METRIC_NAMES)}")
    ] = "time",
    fail_above: Annotated[
        str | None,
        typer.Option(
            "--fail-above", help="exit 1 if a significant regression exceeds this, e.g. 5%"
        ),
    ] = None,
    target_ci: Annotated[
        str, typer.Option("--margin", "--target-ci", help="equivalence margin of 'same', e.g. 3%")
    ] = "3%",
) -> None:
    """Regression verdict between two result sets: faster / slower / same / inconclusive."""
    key = _METRIC_NAMES.get(metric)
    if key is None:
        raise UserError(f"--metric {metric!r}: choose {', '.join(_METRIC_NAMES)}")
    # A regression can exceed 100 % (2.5x slower is +150 %).
    limit = plan.parse_fraction(fail_above, "--fail-above", 1000.0) if fail_above else None
    margin = plan.parse_fraction(target_ci, "--margin")
    old_set, new_set = compare.load(old), compare.load(new)
    verdicts = compare.compare(old_set, new_set, key, margin)
    control = next((v.allocator for v in verdicts if v.control), None)
    table.verdicts(out, verdicts, key, old_set.label, new_set.label, control)
    summary = compare.summarize(verdicts)
    out.print(table.verdict_summary(summary, key, control, margin), highlight=False)
    if limit is not None and (bad := compare.failing(verdicts, limit)):
        err.print(f"FAIL: {len(bad)} significant regression(s) above {limit:.1%}", highlight=False)
        raise typer.Exit(1)


def main() -> None:
    try:
        app()  # usage errors are printed by Typer itself, with exit code 2
    except AllocmarkError as e:
        _fail(str(e), e.exit_code)
    except KeyboardInterrupt:  # outside a campaign (which says how to resume)
        _fail("interrupted: nothing was stored", 130)
    except sqlite3.DatabaseError as e:  # a damaged page, a file changed under us
        _fail(f"the results database cannot be read ({e}); stored runs were not changed: "
              "restore it from a copy, or export what is readable with `report`", 2)  # fmt: skip
    except OSError as e:
        if e.filename is None:
            raise
        _fail(f"{e.filename}: {e.strerror or e}", 2)  # an unwritable -o or --plots path


def _fail(message: str, code: int) -> None:
    # Our own line breaks stay; a user's string cannot add any (or terminal escapes).
    text = "\n".join(fmt.printable(line) for line in message.split("\n"))
    err.print(f"ERROR: {text}", markup=False, highlight=False, soft_wrap=True)
    sys.exit(code)
