"""The command line: parse, call the library, print. Nothing else lives here."""

from __future__ import annotations

import dataclasses
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from allocmark import allocators, analyze, builder, campaign, compare, plan, stats, workloads
from allocmark.errors import AllocmarkError, Interrupted, UserError
from allocmark.execute import LocalExecutor
from allocmark.model import AllocatorSpec, RunResult, RunSpec, RunStatus, Verified
from allocmark.report import render, table
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

DEFAULT_DB = Path("results/allocmark.db")
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


def _specs(alloc: list[str] | None, catalog: list[Path] | None) -> tuple[list[AllocatorSpec], bool]:
    """Selected allocator specs, and whether the user named them explicitly."""
    names, adhoc = allocators.parse_selection(alloc or [])
    chosen = (
        allocators.select(allocators.load_catalog(catalog or []), names)
        if names or not adhoc
        else []
    )
    return chosen + adhoc, bool(alloc)


def _built(specs: list[AllocatorSpec]) -> list[AllocatorSpec]:
    """Builds the recipe entries among `specs` that the cache lacks (first use)."""
    for spec in specs:
        if spec.recipe and not builder.is_built(spec):
            builder.build(spec, say=lambda m: err.print(f"[cyan]{m} (first use)…[/]"))
    return specs


@app.command("allocators")
def allocators_cmd(alloc: AllocOpt = None, catalog: CatalogOpt = None) -> None:
    """List the allocator catalog with what verification found on this machine."""
    specs, _ = _specs(alloc, catalog)
    if not alloc:  # the whole catalog, including what allocmark can build
        specs = [s for s in allocators.load_catalog(catalog or []) if not s.hidden]
    verified = allocators.verify_all(specs)
    table.allocators(out, verified)


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


@dataclasses.dataclass(frozen=True)
class _RunRequest:
    """What `allocmark run` was asked, before any of it is resolved."""

    suite: str | None
    alloc: list[str] | None
    workloads: list[str]
    params: list[str]
    reps: int | None
    timeout: float | None
    seed: int | None
    catalog: list[Path] | None
    precision: _PrecisionOpts | None
    profile: int = 0  # 1-in-N sampling of the profiler; 0 = not profiled


@dataclasses.dataclass(frozen=True)
class _PrecisionOpts:
    """--max-runs, --target-ci and --budget as given (None: the suite's or the default)."""

    max_runs: int | None = None
    target_ci: str | None = None
    budget: str | None = None

    def resolve(self, min_runs: int, suite: plan.Suite | None) -> campaign.Precision:
        target = (plan.parse_fraction(self.target_ci, "--target-ci") if self.target_ci
                  else suite.target_ci if suite else stats.DEFAULT_MARGIN)  # fmt: skip
        budget = (plan.parse_duration(self.budget) if self.budget is not None
                  else suite.budget_s if suite else plan.DEFAULT_BUDGET_S)  # fmt: skip
        most = self.max_runs if self.max_runs is not None else max(DEFAULT_MAX_RUNS, min_runs)
        if most < min_runs:
            raise UserError(f"--max-runs {most} is below --min-runs {min_runs}")
        return campaign.Precision(max_runs=most, target_ci=target, budget_s=budget)


DEFAULT_MAX_RUNS = 50
ProfileOpt = Annotated[
    bool, typer.Option("--profile", help="run under the profiler (libamprof.so) and store it")
]
SampleOpt = Annotated[
    int, typer.Option("--sample", min=1, help="profiler: time 1 allocator call in N")
]
MaxRunsOpt = Annotated[
    int | None,
    typer.Option("--max-runs", min=1, help=f"at most this many blocks per cell "
                 f"(default {DEFAULT_MAX_RUNS}; equal to -n for exactly n)"),
]  # fmt: skip
TargetOpt = Annotated[
    str | None,
    typer.Option("--target-ci", help="add blocks until every ratio's 95%% interval is within "
                 "±this (default: the suite's, else 3%%)"),
]  # fmt: skip
BudgetOpt = Annotated[
    str | None,
    typer.Option("--budget", help="stop adding blocks after this much time, e.g. 2m, 90s, "
                 "1h; 0 = no limit (default: the suite's, else 2m)"),
]  # fmt: skip


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
    target_ci: TargetOpt = None,
    budget: BudgetOpt = None,
    timeout: Annotated[
        float | None, typer.Option("--timeout", min=0.1, help="seconds per run")
    ] = None,
    seed: Annotated[
        int | None, typer.Option("--seed", help="shuffle seed of the run order")
    ] = None,
    db: DbOpt = DEFAULT_DB,
    resume: Annotated[
        bool, typer.Option("--resume", help="finish the newest unfinished campaign in --db")
    ] = False,
    catalog: CatalogOpt = None,
    profile: ProfileOpt = False,
    sample: SampleOpt = 1024,
) -> None:
    """Run a suite (default: quick) and store every run."""
    store = Store(db)
    if resume:
        cid = store.campaign(unfinished=True).id
        verified = campaign.reverify(store, cid)
        out.print(f"resuming campaign {cid}: {len(store.pending(cid))} runs left")
    else:
        request = _RunRequest(
            suite, alloc, [w for item in workload or [] for w in item.split(",") if w],
            param or [], reps, timeout, seed, catalog,
            None if profile else _PrecisionOpts(max_runs, target_ci, budget),
            sample if profile else 0,
        )  # fmt: skip
        verified, cid = _start_run(store, request)
    _execute(store, cid, verified)
    _print_report(store, cid)
    if store.settings(cid).get("profile"):
        _print_profiles(store, cid)


def _start_run(store: Store, req: _RunRequest) -> tuple[list[Verified], int]:
    if req.suite is None and req.workloads:
        suite = plan.adhoc_suite(req.workloads, req.reps or 3, req.timeout or 600, req.seed or 1)
    else:
        suite = plan.load_suite(req.suite or "quick")
        if req.workloads:
            suite = _only(suite, req.workloads)
    cells = plan.cells(suite, workloads.load_catalog(), plan.parse_overrides(req.params))
    cells, skipped = plan.installed(cells, strict=bool(req.workloads))
    for note in skipped:
        err.print(f"[yellow]skipped: {note}[/]")
    named = req.alloc or (None if suite.allocators == ("all",) else list(suite.allocators))
    specs, explicit = _specs(named, req.catalog)
    prepared = campaign.prepare(_built(specs), explicit)
    _print_unusable(prepared)
    n = req.reps or suite.repetitions
    seed = req.seed if req.seed is not None else suite.seed
    precision = req.precision.resolve(n, suite) if req.precision else None
    cid = campaign.start(store, suite.name, prepared, cells, n, req.timeout or suite.timeout,
                         seed, sys.argv, precision, req.profile)  # fmt: skip
    _say_plan(store, cid, len(prepared.usable) * len(cells) * n, precision)
    return list(prepared.usable), cid


def _say_plan(store: Store, cid: int, measured: int, precision: campaign.Precision | None) -> None:
    c = store.campaign(cid)
    more = ""
    if precision:
        budget = f"{precision.budget_s:g} s budget" if precision.budget_s else "no time budget"
        more = (f", then more blocks until every ratio is within ±{precision.target_ci:.0%} "
                f"(up to {precision.max_runs} blocks, {budget})")  # fmt: skip
    out.print(
        f"campaign {cid}: {len(store.allocator_rows(cid))} allocators, "
        f"{store.settings(cid)['min_runs']} blocks of every cell{more}; {measured} measured "
        f"+ {c.planned - measured} set-up runs (baseline RSS, verification) to start "
        f"-> {store.path}",
        highlight=False,
    )


def _only(suite: plan.Suite, wanted: list[str]) -> plan.Suite:
    entries = tuple(e for e in suite.entries if e.workload in wanted)
    if not entries:
        raise UserError(f"suite {suite.name} has no workload {', '.join(wanted)}")
    return dataclasses.replace(suite, entries=entries)


def _print_unusable(prepared: campaign.Prepared) -> None:
    for v in prepared.unusable:
        err.print(f"[yellow]not used: {v.spec.name} is {v.status.value}: {v.reason}[/]")
    for v in prepared.usable:
        if v.lacks:
            err.print(f"[yellow]warning: {v.spec.name} is partial: {v.reason}[/]")


def _execute(store: Store, cid: int, verified: Sequence[Verified]) -> None:
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    target = store.settings(cid).get("target_ci")
    with Progress(*columns, console=err, transient=False) as progress:
        c = store.campaign(cid)
        task = progress.add_task("running", total=c.planned, completed=c.done)
        precision = ["first blocks"]

        def on_round(loosest: float | None, blocks: int) -> None:
            now = "n/a" if loosest is None else f"±{loosest:.1%}"
            more = f", {blocks} more blocks" if blocks else ", done"
            precision[0] = f"loosest {now} (target ±{target:.0%}){more}"

        def on_run(done: int, total: int, spec: RunSpec, result: RunResult) -> None:
            what = f"{precision[0]} | {spec.allocator} {spec.workload}"
            progress.update(task, completed=done, total=total, description=what)
            if result.status is not RunStatus.OK:
                progress.console.print(
                    f"{result.status.value}: {spec.allocator} "
                    f"{spec.workload} {dict(spec.params)}: {result.detail[:300]}",
                    soft_wrap=True,
                    markup=False,
                )

        previous = signal.signal(signal.SIGTERM, _terminate)
        try:
            campaign.execute(store, cid, LocalExecutor(), verified, on_run, on_round)
        except KeyboardInterrupt:
            raise Interrupted(
                f"interrupted: {store.campaign(cid).done} finished runs are saved in "
                f"{store.path}; finish with `allocmark run --resume --db {store.path}`"
            ) from None
        finally:
            signal.signal(signal.SIGTERM, previous)


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a campaign as cleanly as Ctrl-C


def _print_report(store: Store, cid: int) -> None:
    table.comparison(out, analyze.stored_comparison(store, cid))


def _print_profiles(store: Store, cid: int) -> None:
    table.profiles(out, analyze.stored_profiles(store, cid))


@app.command("profile")
def profile_cmd(
    alloc: AllocOpt = None,
    workload: WorkloadOpt = None,
    param: ParamOpt = None,
    reps: Annotated[int, typer.Option("-n", "--repetitions", min=1)] = 1,
    sample: SampleOpt = 1024,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1)] = 600,
    db: DbOpt = DEFAULT_DB,
    catalog: CatalogOpt = None,
) -> None:
    """Profile what each allocator does inside a workload (mmprof style), side by side."""
    names = [w for item in workload or [] for w in item.split(",") if w]
    if not names:
        raise UserError("name the workload(s) to profile with -w, e.g. -w xthread")
    request = _RunRequest(None, alloc, names, param or [], reps, timeout, 1, catalog, None, sample)
    store = Store(db)
    verified, cid = _start_run(store, request)
    _execute(store, cid, verified)
    _print_profiles(store, cid)


@app.command("try")
def try_cmd(
    command: Annotated[list[str], typer.Argument(help="your program and its arguments, after --")],
    alloc: AllocOpt = None,
    reps: Annotated[
        int, typer.Option("-n", "--repetitions", "--min-runs", min=1, help="blocks (at least)")
    ] = 3,
    max_runs: MaxRunsOpt = None,
    target_ci: TargetOpt = None,
    budget: BudgetOpt = None,
    timeout: Annotated[float, typer.Option("--timeout", min=0.1, help="seconds per run")] = 600,
    db: DbOpt = DEFAULT_DB,
    catalog: CatalogOpt = None,
) -> None:
    """Run your own command under every usable allocator and compare."""
    precision = _PrecisionOpts(max_runs, target_ci, budget).resolve(reps, None)
    specs, explicit = _specs(alloc, catalog)
    prepared = campaign.prepare(_built(specs), explicit)
    _print_unusable(prepared)
    store = Store(db)
    w = workloads.command_workload(command)
    cid = campaign.start(store, "try", prepared, [(w, ())], reps, timeout, 1, sys.argv, precision)
    _execute(store, cid, list(prepared.usable))
    comp = analyze.stored_comparison(store, cid)
    cells = store.cells(cid, analyze.METRIC_NAMES)
    table.try_table(out, analyze.try_lines(cells, comp), comp)


@app.command("report")
def report_cmd(
    db: DbOpt = DEFAULT_DB,
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
    if runs and fmt not in ("csv", "json"):
        raise UserError("--runs lists every run as csv or json: add --format csv (or json)")
    store = Store(db, create=False)
    cid = store.campaign(campaign_id).id
    if profiles:
        if not store.settings(cid).get("profile"):
            raise UserError(f"campaign {cid} was not profiled; use `allocmark profile` or "
                            "`allocmark run --profile`")  # fmt: skip
        _print_profiles(store, cid)
        return
    if fmt == "table" and not runs:
        table.comparison(out, analyze.stored_comparison(store, cid, speedup))
    else:
        _emit(render.text(store, cid, fmt, speedup, runs), output)
    if plots_dir:
        files = render.plot_files(store, cid, plots_dir, speedup)
        err.print(f"wrote {len(files)} plot files to {plots_dir}")


def _emit(text: str, output: Path | None) -> None:
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text)
        err.print(f"wrote {output}")
    else:
        sys.stdout.write(text)


@app.command("compare")
def compare_cmd(
    old: Annotated[str, typer.Argument(help="DB, DB#CAMPAIGN or a runs JSON export")],
    new: Annotated[str, typer.Argument(help="DB, DB#CAMPAIGN or a runs JSON export")],
    metric: Annotated[
        str, typer.Option("--metric", help="time, rss, overhead or throughput")
    ] = "time",
    fail_above: Annotated[
        str | None,
        typer.Option(
            "--fail-above", help="exit 1 if a significant regression exceeds this, e.g. 5%%"
        ),
    ] = None,
    target_ci: Annotated[
        str, typer.Option("--target-ci", help="equivalence margin of 'same', e.g. 3%%")
    ] = "3%",
) -> None:
    """Regression verdict between two result sets: faster / slower / same / inconclusive."""
    key = _METRIC_NAMES.get(metric)
    if key is None:
        raise UserError(f"--metric {metric!r}: choose {', '.join(_METRIC_NAMES)}")
    limit = plan.parse_fraction(fail_above, "--fail-above") if fail_above else None
    margin = plan.parse_fraction(target_ci, "--target-ci")
    old_set, new_set = compare.load(old), compare.load(new)
    verdicts = compare.compare(old_set, new_set, key, margin)
    control = next((v.allocator for v in verdicts if v.control), None)
    table.verdicts(out, verdicts, key, old_set.label, new_set.label, control)
    summary = compare.summarize(verdicts)
    out.print(table.verdict_summary(summary, key, control, margin), highlight=False)
    if limit is not None and (bad := compare.failing(verdicts, limit)):
        err.print(f"FAIL: {len(bad)} significant regression(s) above {limit:.1%}", highlight=False)
        raise typer.Exit(1)


_METRIC_NAMES = {
    "time": "time_s",
    "rss": "peak_rss_kib",
    "overhead": "overhead_ratio",
    "throughput": "ops_per_s",
}


def main() -> None:
    try:
        app()  # usage errors are printed by Typer itself, with exit code 2
    except AllocmarkError as e:
        err.print(f"ERROR: {e}", markup=False, highlight=False)
        sys.exit(e.exit_code)
