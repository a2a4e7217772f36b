"""The verbs that run things: run, profile, try, tune, harden; and the progress a
running campaign prints."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from allocmark.cli.app import (
    AllocOpt,
    BlocksOpt,
    BudgetOpt,
    BuildOpt,
    CatalogOpt,
    CommandArg,
    DbOpt,
    DetailOpt,
    ExecutorOpt,
    MarginOpt,
    MaxBlocksOpt,
    MemoryOpt,
    OutputOpt,
    ParamOpt,
    ProfileOpt,
    RunTimeoutOpt,
    SampleOpt,
    SchedulerOpt,
    TimeoutOpt,
    WhyOpt,
    WorkloadOpt,
    YesOpt,
    app,
    duration,
    err,
    fraction,
    names,
    one_target,
    out,
    seconds,
    size,
)
from allocmark.cli.show import emit_table, front
from allocmark.defaults import DEFAULT_DB, DEFAULT_MIN_BLOCKS
from allocmark.errors import AllocmarkError, Interrupted, UserError

if TYPE_CHECKING:
    from allocmark import api


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
        typer.Option("-n", "--blocks", min=1, help="blocks per cell (at least)"),
    ] = None,
    max_blocks: MaxBlocksOpt = None,
    margin: MarginOpt = None,
    budget: BudgetOpt = None,
    timeout: TimeoutOpt = None,
    seed: Annotated[
        int | None,
        typer.Option("--seed", min=0, max=2**63 - 1, help="shuffle seed of the run order"),
    ] = None,
    db: DbOpt = DEFAULT_DB,
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
    profile: ProfileOpt = False,
    sample: SampleOpt = 1024,
    executor: ExecutorOpt = "local",
    scheduler: SchedulerOpt = None,
    yes: YesOpt = False,
    memory_limit: MemoryOpt = None,
    detail: DetailOpt = False,
    why: WhyOpt = None,
    build: BuildOpt = None,
    output: OutputOpt = None,
) -> None:
    """Run a suite (default: quick) and store every run."""
    from allocmark import api
    from allocmark.report import data

    progress = _Progress()
    if resume:
        cid = _follow(
            api.resume(db, executor, scheduler, take_over, yes, progress.ask), db, progress
        )
    else:
        req = api.Request(
            suite=suite,
            allocators=tuple(alloc or ()),
            workloads=names(workload),
            params=tuple(param or ()),
            min_blocks=reps,
            max_blocks=max_blocks,
            margin=fraction(margin, "--margin"),
            budget_s=duration(budget),
            timeout_s=timeout,
            seed=seed,
            catalogs=tuple(catalog or ()),
            sample=sample if profile else 0,
            db=db,
            executor=executor,
            scheduler=scheduler,
            yes=yes,
            memory_limit=size(memory_limit),
            why=_why(why),
            build=git_build(build, output),
        )
        cid = _follow(api.run(req, confirm=progress.ask), db, progress)
    store = api.reader(db)
    emit_table(data.load(store, cid, brief=not detail), None, detail)
    if store.campaign_plan(cid).sample:
        emit_table(data.load(store, cid, "profile"), None)


@app.command("profile")
def profile_cmd(
    command: CommandArg = None,
    alloc: AllocOpt = None,
    workload: WorkloadOpt = None,
    param: ParamOpt = None,
    reps: Annotated[int, typer.Option("-n", "--blocks", min=1, help="blocks per cell")] = 1,
    sample: SampleOpt = 1024,
    timeout: RunTimeoutOpt = 600,
    db: DbOpt = DEFAULT_DB,
    catalog: CatalogOpt = None,
    executor: ExecutorOpt = "local",
    scheduler: SchedulerOpt = None,
    yes: YesOpt = False,
    memory_limit: MemoryOpt = None,
) -> None:
    """Profile what each allocator does inside a workload or your program (mmprof style),
    side by side."""
    from allocmark import api
    from allocmark.report import data

    chosen = one_target(workload, command, "profile")
    req = api.Request(
        workloads=chosen,
        command=tuple(command or ()),
        allocators=tuple(alloc or ()),
        params=tuple(param or ()),
        min_blocks=reps,
        timeout_s=timeout,
        seed=1,
        catalogs=tuple(catalog or ()),
        sample=sample,
        db=db,
        executor=executor,
        scheduler=scheduler,
        yes=yes,
        memory_limit=size(memory_limit),
    )
    cid = _follow(api.run(req), db)
    emit_table(data.load(api.reader(db), cid, "profile"), None)


@app.command("try")
def try_cmd(
    command: Annotated[list[str], typer.Argument(help="your program and its arguments, after --")],
    alloc: AllocOpt = None,
    reps: BlocksOpt = DEFAULT_MIN_BLOCKS,
    max_blocks: MaxBlocksOpt = None,
    margin: MarginOpt = None,
    budget: BudgetOpt = None,
    timeout: RunTimeoutOpt = 600,
    db: DbOpt = DEFAULT_DB,
    catalog: CatalogOpt = None,
    executor: ExecutorOpt = "local",
    scheduler: SchedulerOpt = None,
    yes: YesOpt = False,
    ignore: Annotated[
        bool,
        typer.Option(
            "-i",
            "--ignore-failure",
            help="run on when the command fails under the baseline on its first run (else "
            "it stops there), and exit 0 even when every run under an allocator failed",
        ),
    ] = False,
    memory_limit: MemoryOpt = None,
    profile: ProfileOpt = False,
    sample: SampleOpt = 1024,
    why: WhyOpt = None,
    build: BuildOpt = None,
    output: OutputOpt = None,
    env: Annotated[
        list[str] | None,
        typer.Option(
            "--env",
            help="NAME=VALUE the command runs with (repeatable); it gets no other variable "
            "of yours but PATH, the locale, TZ and TERM",
        ),
    ] = None,
) -> None:
    """Run your own command under every usable allocator and compare."""
    from allocmark import api
    from allocmark.report import data, extra, table

    req = api.Request(
        command=tuple(command),
        env=tuple(env or ()),
        allocators=tuple(alloc or ()),
        min_blocks=reps,
        max_blocks=max_blocks,
        margin=fraction(margin, "--margin"),
        budget_s=duration(budget),
        timeout_s=timeout,
        catalogs=tuple(catalog or ()),
        db=db,
        executor=executor,
        scheduler=scheduler,
        yes=yes,
        memory_limit=size(memory_limit),
        sample=sample if profile else 0,
        keep_going=ignore,
        why=_why(why),
        build=git_build(build, output),
    )
    progress = _Progress()
    cid = _follow(api.run(req, confirm=progress.ask), db, progress)
    lines, comp = api.command_lines(db, cid)
    table.try_table(out(), lines, comp)
    store = api.reader(db)
    table.extra(out(), extra.extras(data.load(store, cid, known=comp)))
    if profile:
        emit_table(data.load(store, cid, "profile"), None)
    # As hyperfine: a command that failed is an error for scripts, unless told otherwise.
    if (failed := [f"{x.allocator} ({x.state})" for x in lines if x.wall is None]) and not ignore:
        raise AllocmarkError(
            f"no run succeeded under {', '.join(failed)}; the table shows "
            "why (use -i to exit 0 anyway)"
        )


@app.command("bisect")
def bisect_cmd(
    good: Annotated[str, typer.Argument(help="a revision whose metric is as it should be")],
    bad: Annotated[str, typer.Argument(help="a later revision whose metric changed")],
    command: CommandArg = None,
    repo: Annotated[
        str, typer.Option("--repo", help="the allocator's git repository: a path or a URL")
    ] = ".",
    build: BuildOpt = None,
    output: OutputOpt = None,
    workload: WorkloadOpt = None,
    param: ParamOpt = None,
    metric: Annotated[
        str,
        typer.Option(
            "--metric",
            help="time, peak_rss, or another metric "
            "the workload reports (ops_per_s, rss_mib_s, ...)",
        ),
    ] = "time",
    error_rate: Annotated[
        float,
        typer.Option(
            "--error-rate", help="the chance the whole bisect names a wrong commit, at most"
        ),
    ] = 0.05,
    max_blocks: Annotated[
        int,
        typer.Option(
            "--max-blocks", min=4, help="blocks a step may take before it is left undecided"
        ),
    ] = 30,
    timeout: RunTimeoutOpt = 600,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**31, help="run-order seed")] = 1,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Find the commit of your allocator that changed a metric, between GOOD and BAD
    (each step a campaign: paired blocks until the candidate is decided like good or bad)."""
    from allocmark import api

    chosen = one_target(workload, command, "bisect")
    how = git_build(build, output)
    if how is None:
        raise UserError(
            "bisect needs --build CMD and --output LIB: how a revision is built, "
            "and the library it makes (relative to the checkout)"
        )
    req = api.Request(
        workloads=chosen,
        command=() if chosen else tuple(command or ()),
        params=tuple(param or ()),
        timeout_s=timeout,
        db=db,
        seed=seed,
    )
    for event in api.bisect(repo, good, bad, how, req, metric, error_rate, max_blocks):
        _bisect_line(event)


def _bisect_line(event: api.BisectEvent) -> None:
    from allocmark import api

    if isinstance(event, api.Note):
        err().print(event.text, markup=False, highlight=False)
        return
    if isinstance(event, api.BisectStarted):
        line = (
            f"bisect on {event.metric}: {event.commits} commits after {event.good} up to "
            f"{event.bad}; at most {event.bound} steps"
        )
    elif isinstance(event, api.BisectStep):
        line = _step_line(event)
    else:
        line = f"{event.text} ({event.steps} steps, {event.seconds:.0f} s)"
    out().print(line, markup=False, highlight=False)


def _step_line(s: api.BisectStep) -> str:
    head = "start" if s.number == 0 else f"step {s.number}"
    what = f"{s.describe} / good" if s.number else f"{s.describe} (bad) / good"
    r = s.ratio
    shown = f" ×{r.value:.3g} [{r.low:.3g}, {r.high:.3g}]" if r is not None else ""
    blocks = f" in {s.blocks} blocks at {s.alpha:.2%}" if s.blocks else ""
    where = f", campaign {s.campaign}" if s.campaign else ""
    tail = f": {s.detail}" if s.detail and s.word != "undecided" else ""
    return f"{head:<8} {what}:{shown} {s.word}{tail}{blocks} ({s.seconds:.1f} s{where})"


@app.command("tune")
def tune_cmd(
    command: CommandArg = None,
    workload: WorkloadOpt = None,
    param: ParamOpt = None,
    alloc: AllocOpt = None,
    objective: Annotated[
        str, typer.Option("--objective", help="time, rss or pareto (both)")
    ] = "pareto",
    reps: BlocksOpt = DEFAULT_MIN_BLOCKS,
    max_blocks: MaxBlocksOpt = None,
    margin: MarginOpt = None,
    budget: BudgetOpt = None,
    timeout: TimeoutOpt = None,
    db: DbOpt = DEFAULT_DB,
    catalog: CatalogOpt = None,
    settings: Annotated[
        Path | None,
        typer.Option(
            "--settings",
            help="settings catalog TOML over the built-in one "
            "(schema: `allocmark schema settings`)",
        ),
    ] = None,
    yes: YesOpt = False,
) -> None:
    """Race each allocator's settings (catalog/settings.toml) for your program or a
    workload; print the Pareto front of time and peak RSS as lines to paste."""
    from allocmark import api
    from allocmark.report import table

    chosen = one_target(workload, command, "tune")
    req = api.Request(
        command=tuple(command or ()),
        workloads=chosen,
        params=tuple(param or ()),
        allocators=tuple(alloc or ()),
        min_blocks=reps,
        max_blocks=max_blocks,
        margin=fraction(margin, "--margin"),
        budget_s=duration(budget),
        timeout_s=timeout,
        catalogs=tuple(catalog or ()),
        db=db,
        yes=yes,
    )
    cid = _follow(api.run(req, selection=api.race(objective, settings)), db)
    table.recommendation(out(), api.comparison(db, cid))
    front(db, cid)


@app.command("harden")
def harden_cmd(
    alloc: AllocOpt = None,
    reps: Annotated[
        int,
        typer.Option(
            "-n", "--blocks", min=1, help="blocks: each runs every test once under each allocator"
        ),
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
        typer.Option("--timeout", callback=seconds, help="seconds a test may run (then: hang)"),
    ] = 5.0,
    db: DbOpt = DEFAULT_DB,
    catalog: CatalogOpt = None,
    yes: YesOpt = False,
) -> None:
    """The hardening battery: what each allocator does about each heap error, its
    score, and what hardening costs."""
    from allocmark import api
    from allocmark.report import data, extra, table

    chosen = tuple(t.strip() for t in (tests or "").split(",") if t.strip())
    catalogs = tuple(catalog or ())
    req = api.harden_request(
        chosen, reps, tuple(alloc or ()), catalogs, timeout_s=timeout, db=db, yes=yes
    )
    cid = _follow(api.run(req), db)
    report = data.load(api.reader(db), cid)
    table.extra(out(), extra.extras(report))
    if not cost or report.battery is None:
        return
    more = api.cost_request(report.battery.allocators, db=db, catalogs=catalogs, yes=yes)
    if more is None:
        err().print(
            "no hardened build beside its plain build to cost: e.g. `allocmark alloc "
            "build mimalloc@2.1.7 mimalloc@2.1.7+secure`",
            style="dim",
        )
        return
    cost_cid = _follow(api.run(more), db)
    comp = data.load(api.reader(db), cost_cid).comparison
    if comp is not None:
        table.extra(out(), [extra.cost_table(api.hardening_costs(comp), comp.margin)])


def _follow(events: Iterator[api.Event], db: Path, progress: _Progress | None = None) -> int:
    """Prints a campaign's notes and progress as it runs; its id at the end."""
    from allocmark import api

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        with progress or _Progress() as progress:
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
    """The progress bar and how many ratios are still undecided."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskID,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        )
        self.bar = Progress(*columns, console=err(), transient=False)
        self.task: TaskID | None = None
        self.precision = "first blocks"
        self.target: float | None = None
        self.warned: set[str] = set()
        self.said_at = 0  # the blocks of the last forecast printed

    def __enter__(self) -> _Progress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

    def ask(self, question: str) -> bool:
        """A yes/no question on the terminal, the bar paused; False where none can be
        asked (no terminal: a script, CI), so that nothing waits on an answer."""
        if not sys.stdin.isatty():
            return False
        self.bar.stop()
        try:
            return typer.confirm(question, default=True, err=True)
        finally:
            self.bar.start()

    def show(self, event: api.Event) -> None:
        from rich.markup import escape

        from allocmark import api
        from allocmark.model import RunStatus

        if isinstance(event, api.Note):
            style = "yellow" if event.level == "warning" else "cyan"
            err().print(f"[{style}]{escape(event.text)}[/]")
        elif isinstance(event, api.Planned):
            out().print(_plan_line(event), highlight=False)
            self.target = event.precision.margin if event.precision else None
            self.task = self.bar.add_task("running", total=event.total, completed=event.done)
        elif isinstance(event, api.RoundDone):
            more = f", {event.blocks} more blocks" if event.blocks else ", done"
            self.precision = (
                f"{event.ratios - event.undecided} of {event.ratios} ratios "
                f"decided (margin ±{self.target or 0:.0%}){more}"
            )
        elif isinstance(event, api.Forecast):
            self.precision = (
                f"{event.ratios - event.undecided} of {event.ratios} ratios "
                f"decided after {event.blocks} blocks"
            )
            # After the first two blocks, then each time the blocks have doubled: a long
            # campaign has a round every few blocks, and its forecast moves slowly.
            if event.blocks >= 2 * self.said_at or event.blocks <= 2:
                self.said_at = event.blocks
                self.bar.console.print(event.text(), style="dim", highlight=False, soft_wrap=True)
            alert = event.alert()
            if alert and alert[0] not in self.warned:  # each kind once
                self.warned.add(alert[0])
                self.bar.console.print(f"[yellow]{escape(alert[1])}[/]", soft_wrap=True)
        elif isinstance(event, api.RunDone) and self.task is not None:
            spec, result = event.spec, event.result
            what = f"{self.precision} | {spec.allocator} {spec.workload}"
            self.bar.update(self.task, completed=event.done, total=event.total, description=what)
            # The battery's crashes are its findings (its matrix shows them).
            if result.status is not RunStatus.OK and spec.workload != api.HARDEN_WORKLOAD:
                params = " ".join(f"{k}={v}" for k, v in spec.params)
                self.bar.console.print(
                    f"{result.status.value}: {spec.allocator} {spec.workload}"
                    f"{' ' + params if params else ''}: {result.detail[:300]}",
                    soft_wrap=True,
                    markup=False,
                )


def git_build(build: str | None, output: str | None) -> api.GitBuild | None:
    """--build and --output, together or not at all."""
    from allocmark import api

    if build is None and output is None:
        return None
    if not build or not output:
        raise UserError(
            "--build and --output go together: the command that builds a "
            "revision and the library it makes (relative to the checkout)"
        )
    return api.GitBuild(build, output)


def _why(flag: bool | None) -> str:
    """--why: "on"; --no-why: "off"; neither: "auto" (when it adds at most 15 %)."""
    return "auto" if flag is None else "on" if flag else "off"


def _plan_line(p: api.Planned) -> str:
    from allocmark import api

    if p.done:
        return f"resuming campaign {p.campaign}: {p.total - p.done} runs left{_eta(p)}"
    more = ""
    if p.precision:
        budget = (
            f"{api.duration(p.precision.budget_s)} budget"
            if p.precision.budget_s
            else "no time budget"
        )
        if p.precision.stretch:
            budget += ", the default: stretched if the first verdict needs more"
        more = (
            f", then more blocks until every ratio is faster, slower or the same within "
            f"±{p.precision.margin:.0%} "
            f"(up to {p.precision.max_blocks} blocks, {budget})"
        )
    if p.why != "off":
        more += ", then a why pass (4 profiled blocks of the cells with a decided difference" + (
            ")" if p.why == "on" else ", if they add at most 15 % to the time)"
        )
    return (
        f"campaign {p.campaign}: {p.allocators} allocators, {p.min_blocks} blocks of every "
        f"cell{more}; {p.measured} measured + {p.setup} set-up runs (baseline RSS, "
        f"verification) to start{_eta(p)} -> {p.db}"
    )


def _eta(p: api.Planned) -> str:
    if p.estimate_s is None and p.expected_s:
        from allocmark import api

        return f" (about {api.duration(p.expected_s)} on the 2-core VM this suite was sized on)"
    if p.estimate_s is None:
        return " (time: unknown until the first runs end)"
    t = p.estimate_s
    about = f"{t:.0f} s" if t < 90 else f"{t / 60:.0f} min" if t < 5400 else f"{t / 3600:.1f} h"
    return f" (about {about} at this database's earlier run times)"


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a campaign as cleanly as Ctrl-C
