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
    VERBOSITY,
    AllocOpt,
    BlocksOpt,
    BudgetOpt,
    BuildOpt,
    CatalogOpt,
    CommandArg,
    DbOpt,
    DetailOpt,
    DryRunOpt,
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
from allocmark.cli.show import check_output, emit_table, fail_on_failures, front, writing
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
    dry_run: DryRunOpt = False,
) -> None:
    """Run a suite (default: quick) and store every run."""
    from allocmark import api
    from allocmark.report import data

    given = {
        "--suite": suite,
        "-a": alloc,
        "-w": workload,
        "-p": param,
        "-n": reps,
        "--max-blocks": max_blocks,
        "--margin": margin,
        "--budget": budget,
        "--timeout": timeout,
        "--seed": seed,
        "--catalog": catalog,
        "--profile": profile,
        "--memory-limit": memory_limit,
        "--why/--no-why": why,
        "--build": build,
        "--output": output,
    }
    _check_resume(resume, take_over, [k for k, v in given.items() if v not in (None, False)])
    progress = _Progress()
    if resume and dry_run:
        c = api.unfinished(db)
        out().print(
            f"dry run: would resume campaign {c.id} ({c.name}) in {db}: "
            f"{c.planned - c.done} of its {c.planned} runs left; nothing was run",
            highlight=False,
        )
        return
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
            dry_run=dry_run,
        )
        cid = _follow(api.run(req, confirm=progress.ask), db, progress)
    if cid is None:
        return
    store = api.reader(db)
    shown = data.load(store, cid, brief=not detail)
    emit_table(shown, None, detail)
    if store.campaign_plan(cid).sample:
        emit_table(data.load(store, cid, "profile"), None)
    fail_on_failures(shown.comparison)


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
    dry_run: DryRunOpt = False,
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
        dry_run=dry_run,
    )
    cid = _follow(api.run(req), db)
    if cid is None:
        return
    emit_table(data.load(api.reader(db), cid, "profile"), None)
    fail_on_failures(api.comparison(db, cid))


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
            "it stops there); runs that fail are still shown as failed, never as numbers, "
            "and make the exit status 1",
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
    warmup: Annotated[
        int,
        typer.Option(
            "--warmup",
            min=0,
            max=100,
            help="runs of the command under each allocator before the blocks, not measured "
            "(as hyperfine's: warm caches and files)",
        ),
    ] = 0,
    prepare: Annotated[
        str | None,
        typer.Option(
            "--prepare",
            help="a shell command run before each run of the command, not timed (as "
            "hyperfine's), e.g. 'sync' or 'rm -f out.db'",
        ),
    ] = None,
    show_output: Annotated[
        bool,
        typer.Option("--show-output", help="print the command's output of each run"),
    ] = False,
    export_json: Annotated[
        Path | None,
        typer.Option(
            "--export-json",
            help="also write the report as JSON to this file (as `report --format json`)",
        ),
    ] = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Run your own command under every usable allocator and compare."""
    from allocmark import api
    from allocmark.report import data, extra, table

    if prepare is not None and not prepare.strip():
        raise UserError("--prepare '' runs nothing; give a shell command, e.g. --prepare sync")
    if export_json:
        check_output(export_json, "--export-json")
    req = api.Request(
        command=tuple(command),
        env=tuple(env or ()),
        warmup=warmup,
        prepare=prepare or "",
        show_output=show_output,
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
        dry_run=dry_run,
    )
    progress = _Progress()
    cid = _follow(api.run(req, confirm=progress.ask), db, progress)
    if cid is None:
        return
    lines, comp = api.command_lines(db, cid)
    table.try_table(out(), lines, comp)
    store = api.reader(db)
    shown = data.load(store, cid, known=comp)
    table.extra(out(), extra.extras(shown))
    if profile:
        emit_table(data.load(store, cid, "profile"), None)
    if export_json:
        from allocmark.report import render

        with writing(export_json):
            export_json.write_text(render.text(store, cid, "json", "summary", False))
        err().print(f"wrote {export_json}")
    # As hyperfine: a command that failed is an error for scripts, -i or not.
    fail_on_failures(shown.comparison)


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
    budget: Annotated[
        str | None,
        typer.Option(
            "--budget",
            help="the whole bisect's time, shared among its steps, e.g. 10m, 1h; 0 = no "
            "limit (default: 10m, stretched up to 30m when a small change needs it)",
        ),
    ] = None,
    max_blocks: Annotated[
        int | None,
        typer.Option(
            "--max-blocks",
            min=4,
            help="blocks a step may take before it is left undecided (default: its "
            "share of --budget decides)",
        ),
    ] = None,
    timeout: RunTimeoutOpt = 600,
    seed: Annotated[int, typer.Option("--seed", min=0, max=2**31, help="run-order seed")] = 1,
    db: DbOpt = DEFAULT_DB,
    dry_run: DryRunOpt = False,
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
        dry_run=dry_run,
        budget_s=duration(budget),
    )
    for event in api.bisect(repo, good, bad, how, req, metric, error_rate, max_blocks or 0):
        _bisect_line(event)


def _bisect_line(event: api.BisectEvent) -> None:
    from allocmark import api

    if isinstance(event, api.Note):
        err().print(event.text, markup=False, highlight=False, soft_wrap=True)
        return
    if isinstance(event, api.BisectStarted):
        limit = (
            f"a budget of {api.duration(event.budget_s)}" if event.budget_s else "no time budget"
        )
        line = (
            f"bisect on {event.metric}: {event.commits} commits after {event.good} up to "
            f"{event.bad}; at most {event.bound} steps and a confirmation, {limit}"
        )
    elif isinstance(event, api.BisectStep):
        line = _step_line(event)
    elif isinstance(event, api.BisectOutlook):
        line = _outlook_line(event)
    else:
        line = f"{event.text} ({event.steps} steps, {api.duration(event.seconds)})"
    out().print(line, markup=False, highlight=False, soft_wrap=True)


def _outlook_line(o: api.BisectOutlook) -> str:
    """Before a step: what the noise measured so far says it will take."""
    from allocmark import api

    whose = "earlier steps'" if o.measured else "√3 × the start's"
    share = f" of its {api.duration(o.share_s)} share" if o.share_s != float("inf") else ""
    if o.blocks is None:
        expect = "no number of blocks is expected to decide it"
    else:
        expect = f"about {o.blocks} blocks, {api.duration(o.seconds)}{share}"
    return f"step {o.number} expects {expect} (noise {o.sd:.3f} a block, {whose})"


def _step_line(s: api.BisectStep) -> str:
    if s.kind == "confirm":
        return _confirm_line(s)
    head = "start" if s.number == 0 else f"step {s.number}"
    what = f"{s.describe} / good" if s.number else f"{s.describe} (bad) / good"
    r = s.ratio
    shown = f" ×{r.value:.3g} [{r.low:.3g}, {r.high:.3g}]" if r is not None else ""
    blocks = f" in {s.blocks} blocks at {s.alpha:.2%}" if s.blocks else ""
    where = f", campaign {s.campaign}" if s.campaign else ""
    tail = f": {s.detail}" if s.detail and s.word != "undecided" else ""
    return f"{head:<8} {what}:{shown} {s.word}{tail}{blocks} ({s.seconds:.1f} s{where})"


def _confirm_line(s: api.BisectStep) -> str:
    r = s.ratio
    shown = f" ×{r.value:.3g} [{r.low:.3g}, {r.high:.3g}]" if r is not None else ""
    return (
        f"confirm  {s.describe} / its parent:{shown} {s.word} in {s.blocks} blocks at "
        f"{s.alpha:.2%} ({s.seconds:.1f} s, campaign {s.campaign})"
    )


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
    dry_run: DryRunOpt = False,
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
        dry_run=dry_run,
    )
    cid = _follow(api.run(req, selection=api.race(objective, settings)), db)
    if cid is None:
        return
    comp = api.comparison(db, cid)
    table.recommendation(out(), comp)
    front(db, cid)
    fail_on_failures(comp)


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
    dry_run: DryRunOpt = False,
) -> None:
    """The hardening battery: what each allocator does about each heap error, its
    score, and what hardening costs."""
    from allocmark import api
    from allocmark.report import data, extra, table

    chosen = tuple(t.strip() for t in (tests or "").split(",") if t.strip())
    catalogs = tuple(catalog or ())
    req = api.harden_request(
        chosen,
        reps,
        tuple(alloc or ()),
        catalogs,
        timeout_s=timeout,
        db=db,
        yes=yes,
        dry_run=dry_run,
    )
    cid = _follow(api.run(req), db)
    if cid is None:
        return
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
    if cost_cid is None:
        return
    comp = data.load(api.reader(db), cost_cid).comparison
    if comp is not None:
        table.extra(out(), [extra.cost_table(api.hardening_costs(comp), comp.margin)])


def _follow(events: Iterator[api.Event], db: Path, progress: _Progress | None = None) -> int | None:
    """Prints a campaign's notes and progress as it runs; its id at the end (None: a
    dry run, which said what it would run)."""
    from allocmark import api

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        with progress or _Progress() as progress:
            for event in events:
                if isinstance(event, api.Finished):
                    return event.campaign
                if isinstance(event, api.Dry):
                    out().print(_dry_line(event), highlight=False, soft_wrap=True)
                    return None
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
        )

        # Not rich's ETA: blocks are added while a ratio is open, so the runs' total
        # grows and a speed-based ETA resets each round. The forecast's range, capped
        # by the budget, is the time left ("" until the noise is known).
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[left]}"),
        )
        self.level = VERBOSITY["level"]
        self.bar = Progress(*columns, console=err(), transient=False, disable=self.level < 0)
        self.task: TaskID | None = None
        self.precision = "first blocks"
        self.target: float | None = None
        self.warned: set[str] = set()
        self.said_at = 0  # the blocks of the last forecast printed

    def __enter__(self) -> _Progress:
        return self  # the bar starts with the plan: a refusal before it prints no blank line

    def __exit__(self, *exc: object) -> None:
        if self.task is not None:  # rich's stop() prints a line break even if never started
            self.bar.stop()

    def ask(self, question: str) -> bool:
        """A yes/no question on the terminal, the bar paused; False where none can be
        asked (no terminal: a script, CI), so that nothing waits on an answer."""
        if not sys.stdin.isatty():
            return False
        started = self.task is not None
        if started:
            self.bar.stop()
        try:
            return typer.confirm(question, default=True, err=True)
        finally:
            if started:
                self.bar.start()

    def show(self, event: api.Event) -> None:
        from rich.markup import escape

        from allocmark import api
        from allocmark.model import RunStatus
        from allocmark.text import printable

        if isinstance(event, api.Note):
            if self.level >= 0 or event.level == "warning":
                style = "yellow" if event.level == "warning" else "cyan"
                err().print(f"[{style}]{escape(event.text)}[/]")
        elif isinstance(event, api.Planned):
            if self.level >= 0:
                out().print(_plan_line(event), highlight=False)
            self.target = event.precision.margin if event.precision else None
            self.bar.start()
            self.task = self.bar.add_task(
                "running", total=event.total, completed=event.done, left=""
            )
        elif isinstance(event, api.RoundDone):
            more = f", {event.blocks} more blocks" if event.blocks else ", done"
            self.precision = (
                f"{event.ratios - event.undecided} of {event.ratios} ratios "
                f"decided (margin ±{self.target or 0:.0%}){more}"
            )
            if self.task is not None:  # the bar's last words are the campaign's last state
                self.bar.update(self.task, description=self.precision)
                if not event.blocks:  # no more blocks: nothing left to forecast
                    self.bar.update(self.task, left="")
        elif isinstance(event, api.Forecast) and not event.ratios:
            self.precision = "nothing to compare"  # one allocator: no ratio, no forecast
        elif isinstance(event, api.Forecast):
            self.precision = (
                f"{event.ratios - event.undecided} of {event.ratios} ratios "
                f"decided after {event.blocks} blocks"
            )
            # After the first two blocks, then each time the blocks have doubled: a long
            # campaign has a round every few blocks, and its forecast moves slowly.
            if self.level >= 0 and (event.blocks >= 2 * self.said_at or event.blocks <= 2):
                self.said_at = event.blocks
                self.bar.console.print(event.text(), style="dim", highlight=False, soft_wrap=True)
            if self.task is not None and (ends := event.remaining()) is not None:
                self.bar.update(self.task, left=_left(*ends))
            alert = event.alert()
            if alert and alert[0] not in self.warned:  # each kind once
                self.warned.add(alert[0])
                self.bar.console.print(f"[yellow]{escape(alert[1])}[/]", soft_wrap=True)
        elif isinstance(event, api.RunDone) and self.task is not None:
            spec, result = event.spec, event.result
            what = f"{self.precision} | {spec.allocator} {spec.workload}"
            self.bar.update(self.task, completed=event.done, total=event.total, description=what)
            if self.level > 0:
                self.bar.console.print(_run_line(event), soft_wrap=True, markup=False)
            if result.shown:  # try --show-output; the program's text cannot drive the terminal
                self.bar.console.print(
                    "\n".join(printable(x) for x in result.shown.rstrip("\n").split("\n")),
                    soft_wrap=True,
                    markup=False,
                    highlight=False,
                )
            # The battery's crashes are its findings (its matrix shows them).
            if result.status is not RunStatus.OK and spec.workload != api.HARDEN_WORKLOAD:
                params = " ".join(f"{k}={v}" for k, v in spec.params)
                self.bar.console.print(
                    f"{result.status.value}: {spec.allocator} {spec.workload}"
                    f"{' ' + params if params else ''}: {result.detail[:300]}",
                    soft_wrap=True,
                    markup=False,
                )


def _check_resume(resume: bool, take_over: bool, given: list[str]) -> None:
    """--resume runs the campaign as it was planned and signed: an option that would
    change it is refused, not ignored."""
    if take_over and not resume:
        raise UserError("--take-over goes with --resume: `allocmark run --resume --take-over`")
    if resume and given:
        raise UserError(
            f"--resume finishes the campaign as it was planned; drop {', '.join(given)} "
            "(start a new campaign to change them)"
        )


def _run_line(event: api.RunDone) -> str:
    """-v: one run as it ended, what it measured or why it measured nothing."""
    from allocmark.report import fmt
    from allocmark.units import size_text

    spec, result = event.spec, event.result
    params = "".join(f" {k}={v}" for k, v in spec.params)
    head = f"run {event.done}/{event.total}: {spec.allocator} {spec.workload}{params}"
    if result.status.value != "ok":
        return f"{head}: {result.status.value}: {result.detail[:200]}"
    rss = f", peak RSS {size_text(result.maxrss_kib * 1024)}" if result.maxrss_kib else ""
    return f"{head}: ok, {fmt.seconds(result.wall_s)}{rss}"


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
    warm = f", {p.warmup} warm-up" if p.warmup else ""
    return (
        f"campaign {p.campaign}: {_count(p.allocators, 'allocator')}, "
        f"{_count(p.min_blocks, 'block')} of every cell{more}; {p.measured} measured + "
        f"{p.setup} set-up runs (baseline RSS, verification{warm}) to start{_eta(p)} -> {p.db}"
    )


def _left(low: float, high: float) -> str:
    from allocmark import api

    if high <= 0:
        return ""
    if api.duration(low) == api.duration(high):
        return f"left: about {api.duration(high)}"
    return f"left: {api.duration(low)}–{api.duration(high)}"


def _dry_line(d: api.Dry) -> str:
    build = f"; the first use builds {', '.join(d.to_build)}" if d.to_build else ""
    return (
        f"dry run: {d.suite}: {_count(len(d.allocators), 'allocator')} "
        f"({', '.join(d.allocators)}), {_count(d.cells, 'cell')}, {_count(d.blocks, 'block')} "
        f"to start: {d.runs} measured runs{build}; nothing was built, run or stored"
    )


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


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
