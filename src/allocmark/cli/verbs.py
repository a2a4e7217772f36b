"""The verbs that search and judge, each over campaigns of its own: bisect (the commit
that changed a metric), tune (an allocator's settings), harden (the hardening
battery and what it costs)."""

from __future__ import annotations

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
    DispatcherOpt,
    DryRunOpt,
    LibraryOpt,
    MarginOpt,
    MaxBlocksOpt,
    MetricOpt,
    ParamOpt,
    RunTimeoutOpt,
    SchedulerOpt,
    SeedOpt,
    TimeoutOpt,
    WorkloadOpt,
    YesOpt,
    app,
    duration,
    err,
    fraction,
    one_target,
    out,
    placed,
    seconds,
)
from allocmark.cli.progress import follow
from allocmark.cli.runs import git_build
from allocmark.cli.show import fail_on_failures, front
from allocmark.defaults import DEFAULT_DB, DEFAULT_MIN_BLOCKS
from allocmark.errors import UserError

if TYPE_CHECKING:
    from allocmark import api


@app.command("bisect")
def bisect_cmd(
    good: Annotated[str, typer.Argument(help="a revision whose metric is as it should be")],
    bad: Annotated[str, typer.Argument(help="a later revision whose metric changed")],
    command: CommandArg = None,
    repo: Annotated[
        str, typer.Option("--repo", help="the allocator's git repository: a path or a URL")
    ] = ".",
    build: BuildOpt = None,
    library: LibraryOpt = None,
    workload: WorkloadOpt = None,
    param: ParamOpt = None,
    metric: MetricOpt = "time",
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
    seed: SeedOpt = None,
    db: DbOpt = DEFAULT_DB,
    executor: DispatcherOpt = "local",
    scheduler: SchedulerOpt = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Find the commit of your allocator that changed a metric, between GOOD and BAD
    (each step a campaign: paired blocks until the candidate is decided like good or bad)."""
    from allocmark import api

    chosen = one_target(workload, command, "bisect")
    how = git_build(build, library)
    if how is None:
        raise UserError(
            "bisect needs --build CMD and --library LIB: how a revision is built, "
            "and the library it makes (relative to the checkout)"
        )
    req = api.Request(
        workloads=chosen,
        command=() if chosen else placed(command),
        params=tuple(param or ()),
        timeout_s=timeout,
        db=db,
        seed=seed,
        dry_run=dry_run,
        budget_s=duration(budget),
        dispatcher=executor,
        scheduler=scheduler,
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
    blocks: BlocksOpt = DEFAULT_MIN_BLOCKS,
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
    executor: DispatcherOpt = "local",
    scheduler: SchedulerOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
) -> None:
    """Race each allocator's settings (catalog/settings.toml) for your program or a
    workload; print the Pareto front of time and peak RSS as lines to paste."""
    from allocmark import api
    from allocmark.report import table

    chosen = one_target(workload, command, "tune")
    req = api.Request(
        command=placed(command),
        workloads=chosen,
        params=tuple(param or ()),
        allocators=tuple(alloc or ()),
        min_blocks=blocks,
        max_blocks=max_blocks,
        margin=fraction(margin, "--margin"),
        budget_s=duration(budget),
        timeout_s=timeout,
        catalogs=tuple(catalog or ()),
        db=db,
        dispatcher=executor,
        scheduler=scheduler,
        yes=yes,
        dry_run=dry_run,
    )
    cid = follow(api.run(req, selection=api.race(objective, settings)), db)
    if cid is None:
        return
    shown = api.report(db, cid)
    table.recommendation(out(), shown.findings)
    front(db, cid)
    fail_on_failures(shown.failed)


@app.command("harden")
def harden_cmd(
    alloc: AllocOpt = None,
    blocks: BlocksOpt = 3,
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
    executor: DispatcherOpt = "local",
    scheduler: SchedulerOpt = None,
    yes: YesOpt = False,
    dry_run: DryRunOpt = False,
) -> None:
    """The hardening battery: what each allocator does about each heap error, its
    score, and what hardening costs."""
    from allocmark import api
    from allocmark.report import extra, table

    chosen = tuple(t.strip() for t in (tests or "").split(",") if t.strip())
    catalogs = tuple(catalog or ())
    req = api.harden_request(
        chosen,
        blocks,
        tuple(alloc or ()),
        catalogs,
        timeout_s=timeout,
        db=db,
        dispatcher=executor,
        scheduler=scheduler,
        yes=yes,
        dry_run=dry_run,
    )
    cid = follow(api.run(req), db)
    if cid is None:
        return
    report = api.report(db, cid)
    table.extra(out(), extra.extras(report))
    if not cost or report.battery is None:
        return
    more = api.cost_request(
        report.battery.allocators,
        db=db,
        catalogs=catalogs,
        dispatcher=executor,
        scheduler=scheduler,
        yes=yes,
    )
    if more is None:
        err().print(
            "no hardened build beside its plain build to cost: e.g. `allocmark alloc "
            "build mimalloc@2.1.7 mimalloc@2.1.7+secure`",
            style="dim",
        )
        return
    cost_cid = follow(api.run(more), db)
    if cost_cid is None:
        return
    costed = api.report(db, cost_cid)
    table.extra(out(), [extra.cost_table(costed.findings.costs, costed.comparison.margin)])
