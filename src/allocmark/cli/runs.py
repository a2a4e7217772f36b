"""The verbs that run a campaign of the user's choosing: run, profile, try; and the
options they share with the verbs that search (verbs.py)."""

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
    DetailOpt,
    DispatcherOpt,
    DryRunOpt,
    LibraryOpt,
    MarginOpt,
    MaxBlocksOpt,
    MemoryOpt,
    ParamOpt,
    ProfileOpt,
    RunTimeoutOpt,
    SampleOpt,
    SchedulerOpt,
    SeedOpt,
    SuiteBlocksOpt,
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
    placed,
    quiet,
    size,
)
from allocmark.cli.progress import Bar, follow
from allocmark.cli.show import check_output, emit_table, fail_on_failures, writing
from allocmark.defaults import DEFAULT_DB, DEFAULT_MIN_BLOCKS
from allocmark.errors import UserError

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
    blocks: SuiteBlocksOpt = None,
    max_blocks: MaxBlocksOpt = None,
    margin: MarginOpt = None,
    budget: BudgetOpt = None,
    timeout: TimeoutOpt = None,
    seed: SeedOpt = None,
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
    executor: DispatcherOpt = "local",
    scheduler: SchedulerOpt = None,
    yes: YesOpt = False,
    memory_limit: MemoryOpt = None,
    detail: DetailOpt = False,
    why: WhyOpt = None,
    build: BuildOpt = None,
    library: LibraryOpt = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Run a suite (default: quick) and store every run."""
    from allocmark import api

    given = {
        "--suite": suite,
        "-a": alloc,
        "-w": workload,
        "-p": param,
        "-n": blocks,
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
        "--library": library,
    }
    _check_resume(resume, take_over, [k for k, v in given.items() if v not in (None, False)])
    progress = Bar()
    if resume and dry_run:
        c = api.unfinished(db)
        out().print(
            f"dry run: would resume campaign {c.id} ({c.name}) in {db}: "
            f"{c.planned - c.done} of its {c.planned} runs left; nothing was run",
            highlight=False,
        )
        return
    if resume:
        cid = follow(
            api.resume(db, executor, scheduler, take_over, yes, progress.ask), db, progress
        )
    else:
        req = api.Request(
            suite=suite,
            allocators=tuple(alloc or ()),
            workloads=names(workload),
            params=tuple(param or ()),
            min_blocks=blocks,
            max_blocks=max_blocks,
            margin=fraction(margin, "--margin"),
            budget_s=duration(budget),
            timeout_s=timeout,
            seed=seed,
            catalogs=tuple(catalog or ()),
            sample=sample if profile else 0,
            db=db,
            dispatcher=executor,
            scheduler=scheduler,
            yes=yes,
            memory_limit=size(memory_limit),
            why=_why(why),
            build=git_build(build, library),
            dry_run=dry_run,
        )
        cid = follow(api.run(req, confirm=progress.ask), db, progress)
    if cid is None:
        return
    shown = api.report(db, cid, detail=detail)
    if quiet():  # -q: the answer alone
        from allocmark.report import table

        table.recommendation(out(), shown.findings)
        fail_on_failures(shown.failed)
        return
    emit_table(shown, detail)
    if shown.plan.sample:
        emit_table(api.report(db, cid, "profile"))
    fail_on_failures(shown.failed)


@app.command("profile")
def profile_cmd(
    command: CommandArg = None,
    alloc: AllocOpt = None,
    workload: WorkloadOpt = None,
    param: ParamOpt = None,
    blocks: BlocksOpt = 1,
    sample: SampleOpt = 1024,
    timeout: RunTimeoutOpt = 600,
    db: DbOpt = DEFAULT_DB,
    catalog: CatalogOpt = None,
    executor: DispatcherOpt = "local",
    scheduler: SchedulerOpt = None,
    yes: YesOpt = False,
    memory_limit: MemoryOpt = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Profile what each allocator does inside a workload or your program (mmprof style),
    side by side."""
    from allocmark import api

    chosen = one_target(workload, command, "profile")
    req = api.Request(
        workloads=chosen,
        command=placed(command),
        allocators=tuple(alloc or ()),
        params=tuple(param or ()),
        min_blocks=blocks,
        timeout_s=timeout,
        seed=1,
        catalogs=tuple(catalog or ()),
        sample=sample,
        db=db,
        dispatcher=executor,
        scheduler=scheduler,
        yes=yes,
        memory_limit=size(memory_limit),
        dry_run=dry_run,
    )
    cid = follow(api.run(req), db)
    if cid is None:
        return
    emit_table(api.report(db, cid, "profile"))
    fail_on_failures(api.failures(api.comparison(db, cid)))


@app.command("try")
def try_cmd(
    command: Annotated[list[str], typer.Argument(help="your program and its arguments, after --")],
    alloc: AllocOpt = None,
    blocks: BlocksOpt = DEFAULT_MIN_BLOCKS,
    max_blocks: MaxBlocksOpt = None,
    margin: MarginOpt = None,
    budget: BudgetOpt = None,
    timeout: RunTimeoutOpt = 600,
    db: DbOpt = DEFAULT_DB,
    catalog: CatalogOpt = None,
    executor: DispatcherOpt = "local",
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
    library: LibraryOpt = None,
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
    from allocmark.report import extra, table

    if prepare is not None and not prepare.strip():
        raise UserError("--prepare '' runs nothing; give a shell command, e.g. --prepare sync")
    if export_json:
        check_output(export_json, "--export-json", db)
    req = api.Request(
        command=placed(command),
        env=tuple(env or ()),
        warmup=warmup,
        prepare=prepare or "",
        show_output=show_output,
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
        memory_limit=size(memory_limit),
        sample=sample if profile else 0,
        ignore_failure=ignore,
        why=_why(why),
        build=git_build(build, library),
        dry_run=dry_run,
    )
    progress = Bar()
    cid = follow(api.run(req, confirm=progress.ask), db, progress)
    if cid is None:
        return
    shown = api.report(db, cid)
    comp = shown.comparison
    if not quiet():  # -q: the answer alone
        table.try_table(out(), api.command_lines(db, cid, comp), comp, shown.findings)
        table.extra(out(), extra.extras(shown))
        if profile:
            emit_table(api.report(db, cid, "profile"))
    table.recommendation(out(), shown.findings)  # as the docs say: it ends with the answer
    if export_json:
        from allocmark import files
        from allocmark.report import render

        with writing(export_json):
            files.write(export_json, render.text(shown, "json"), what="--export-json")
        err().print(f"wrote {export_json}")
    # As hyperfine: a command that failed is an error for scripts, -i or not.
    fail_on_failures(shown.failed)


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


def git_build(build: str | None, library: str | None) -> api.GitBuild | None:
    """--build and --library, together or not at all."""
    from allocmark import api

    if build is None and library is None:
        return None
    if not build or not library:
        raise UserError(
            "--build and --library go together: the command that builds a "
            "revision and the library it makes (relative to the checkout)"
        )
    return api.GitBuild(build, library)


def _why(flag: bool | None) -> str:
    """--why: "on"; --no-why: "off"; neither: "auto" (when it adds at most 15 %)."""
    return "auto" if flag is None else "on" if flag else "off"
