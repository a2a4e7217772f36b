"""The verbs of traces: record a program's allocation calls once, replay them under
every allocator (docs/replay.md)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from allocmark.cli.app import (
    AllocOpt,
    BlocksOpt,
    BudgetOpt,
    CatalogOpt,
    CommandArg,
    DbOpt,
    DetailOpt,
    DryRunOpt,
    MarginOpt,
    MaxBlocksOpt,
    MemoryOpt,
    ParamOpt,
    RunTimeoutOpt,
    WorkloadOpt,
    YesOpt,
    app,
    duration,
    fraction,
    one_target,
    out,
    placed,
    size,
)
from allocmark.cli.progress import Bar, follow
from allocmark.cli.show import check_output, emit_table, fail_on_failures
from allocmark.defaults import DEFAULT_DB, DEFAULT_MIN_BLOCKS
from allocmark.units import size_text

if TYPE_CHECKING:
    from allocmark import api


@app.command("record")
def record_cmd(
    output: Annotated[
        Path, typer.Option("-o", "--output", help="the trace to write (replay it with `replay`)")
    ],
    command: CommandArg = None,
    alloc: Annotated[
        str | None,
        typer.Option("-a", "--allocator", help="the allocator it runs under (default: glibc)"),
    ] = None,
    workload: WorkloadOpt = None,
    param: ParamOpt = None,
    env: Annotated[
        list[str] | None,
        typer.Option("--env", help="NAME=VALUE the command runs with (repeatable)"),
    ] = None,
    timeout: RunTimeoutOpt = 600,
    db: DbOpt = DEFAULT_DB,
    catalog: CatalogOpt = None,
    memory_limit: MemoryOpt = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Record every allocation call of your program (or a workload) once, in order, to
    replay it under every allocator without running the program."""
    from allocmark import api

    check_output(output, "-o", db)
    req = api.Request(
        workloads=one_target(workload, command, "record"),
        command=placed(command),
        env=tuple(env or ()),
        allocators=(alloc,) if alloc else (),
        params=tuple(param or ()),
        timeout_s=timeout,
        seed=1,
        catalogs=tuple(catalog or ()),
        db=db,
        memory_limit=size(memory_limit),
        record=output,
        dry_run=dry_run,
    )
    cid = follow(api.run(req), db)
    if cid is None:
        return
    made = api.recording(db, cid)
    if made.trace is not None:
        _said(made, output)
    fail_on_failures(api.failures(api.comparison(db, cid)))


def _said(made: api.Recording, output: Path) -> None:
    """The trace in a few lines: what was recorded, what it costs, how to replay it."""
    assert made.trace is not None
    t, s = made.trace, made.trace.summary
    calls = ", ".join(f"{n:,} {name}" for name, n in sorted(s.calls.items(), key=lambda x: -x[1]))
    program = made.run.workload
    if program == "command":  # the user's: what ran, as the recorder saw it
        program = Path(s.process.exe).name or program
    lines = [
        f"recorded {program} under {made.run.allocator}: {s.total_calls:,} calls "
        f"({calls}) in {t.threads} thread{'s' if t.threads != 1 else ''}, "
        f"{made.run.wall_s:.2f} s, peak RSS {size_text(made.run.maxrss_kib * 1024)}",
        f"peak of requested bytes {size_text(s.peak_requested_bytes)} (in the recorded order)",
    ]
    if (share := t.alloc_share) is not None:
        lines.append(f"allocation was {share:.1%} of its CPU time (1 call in 64 timed)")
    if s.process_count > 1:
        lines.append(
            f"{s.process_count} processes recorded: the trace holds the one with the most "
            f"calls ({s.process.exe or 'pid ' + str(s.process.pid)})"
        )
    if s.unknown_frees or s.unknown_reallocs:
        lines.append(
            f"not replayed: {s.unknown_frees:,} frees and {s.unknown_reallocs:,} reallocs of "
            "blocks the recording did not see handed out"
        )
    if s.cut:
        lines.append(f"the recording was read up to byte {s.read_bytes:,}: {s.cut}")
    per_million = t.size / max(1, s.total_calls) * 1e6
    lines.append(
        f"wrote {output}: {size_text(t.size)} ({size_text(per_million)} per million calls); "
        f"replay it: allocmark replay {output} -a glibc,jemalloc"
    )
    for line in lines:
        out().print(line, highlight=False, soft_wrap=True)


@app.command("replay")
def replay_cmd(
    trace: Annotated[Path, typer.Argument(help="a trace `allocmark record` wrote")],
    alloc: AllocOpt = None,
    blocks: BlocksOpt = DEFAULT_MIN_BLOCKS,
    max_blocks: MaxBlocksOpt = None,
    margin: MarginOpt = None,
    budget: BudgetOpt = None,
    param: ParamOpt = None,
    timeout: RunTimeoutOpt = 600,
    db: DbOpt = DEFAULT_DB,
    catalog: CatalogOpt = None,
    yes: YesOpt = False,
    memory_limit: MemoryOpt = None,
    detail: DetailOpt = False,
    dry_run: DryRunOpt = False,
) -> None:
    """Replay a recorded program's allocation calls under every usable allocator and
    compare (the replay workload: -p touch=false, release=true, idle_ms=N)."""
    from allocmark import api

    api.trace(trace)  # a clear error before anything starts
    req = api.Request(
        workloads=("replay",),
        params=(f"trace={trace}", *(param or ())),
        allocators=tuple(alloc or ()),
        min_blocks=blocks,
        max_blocks=max_blocks,
        margin=fraction(margin, "--margin"),
        budget_s=duration(budget),
        timeout_s=timeout,
        catalogs=tuple(catalog or ()),
        db=db,
        yes=yes,
        memory_limit=size(memory_limit),
        dry_run=dry_run,
    )
    progress = Bar()
    cid = follow(api.run(req, confirm=progress.ask), db, progress)
    if cid is None:
        return
    shown = api.report(db, cid, detail=detail)
    emit_table(shown, detail)
    fail_on_failures(shown.failed)
