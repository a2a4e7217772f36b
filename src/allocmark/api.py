"""allocmark as a library: what the command line does, for programs and notebooks.

    from allocmark import api
    req = api.Request(workloads=("samethread",), allocators=("glibc", "jemalloc"))
    cid = api.run_to_end(req)                      # or: for event in api.run(req): ...
    for row in api.comparison(req.db, cid).rows:   # the report's data
        print(row.workload, row.cells["time_s"]["jemalloc"].ratio)

`run` opens a campaign and yields progress events while it runs and stores each
run; `resume` finishes an interrupted one. The CLI's verbs are thin layers over
these functions: they parse, call, and print.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from allocmark import (
    allocators,
    analyze,
    builder,
    campaign,
    compare,
    harden,
    plan,
    recommend,
    stats,
    tryout,
    tune,
    workloads,
)
from allocmark.campaign import Precision, RoundDone, RunDone
from allocmark.defaults import DEFAULT_DB, DEFAULT_MAX_RUNS, DEFAULT_MIN_RUNS
from allocmark.errors import UserError
from allocmark.execute import Executor
from allocmark.executors import Dispatcher
from allocmark.executors.local import Local
from allocmark.forecast import Forecast
from allocmark.model import AllocatorSpec, Params, Verified, Workload
from allocmark.schemas.settings import Family
from allocmark.store import Store

EXECUTORS = ("local", "dask")


@dataclass(frozen=True)
class Request:
    """One campaign: what to run, on which allocators, how precisely, and where.
    Every field has one name and one type from the command line to the store."""

    workloads: tuple[str, ...] = ()  # workload names; none (and no command): the suite's
    command: tuple[str, ...] = ()  # or the user's own program and its arguments
    suite: str | None = None  # built-in suite name or suite .toml file (default: quick)
    allocators: tuple[str, ...] = ()  # NAME[,NAME...] or NAME=/path/lib.so[:ENV=VAL,...]
    params: tuple[str, ...] = ()  # NAME=V[,V...] parameter overrides
    min_runs: int | None = None  # blocks per cell to start with (default: the suite's, or 3)
    max_runs: int | None = None  # at most this many blocks per cell (default DEFAULT_MAX_RUNS)
    margin: float | None = None  # add blocks until every ratio is decided, same within ±this
    budget_s: float | None = None  # stop adding blocks after this long (0: no limit)
    timeout_s: float | None = None  # per run
    seed: int | None = None  # shuffle seed of the run order
    catalogs: tuple[Path, ...] = ()  # extra allocator catalog files
    sample: int = 0  # profile: time 1 allocator call in `sample`; 0: not profiled
    db: Path = DEFAULT_DB
    executor: str = "local"  # "local" or "dask"
    scheduler: str | None = None  # the Dask scheduler's address, for executor "dask"
    yes: bool = False  # start a campaign of more than plan.CONFIRM_RUNS runs
    memory_limit: int = 0  # bytes a run's processes may use together (0: no limit)
    tune: str = ""  # race every allocator's settings on this objective (tune.OBJECTIVES)
    settings: Path | None = None  # tune: a settings catalog over the built-in one


@dataclass(frozen=True)
class Note:
    """Something the user should read: a skipped cell, an unusable allocator, a build."""

    level: str  # "info" or "warning"
    text: str


@dataclass(frozen=True)
class Planned:
    """The campaign is stored and about to run."""

    campaign: int
    db: Path
    allocators: int
    min_runs: int
    measured: int  # measured runs of the first blocks
    setup: int  # baseline and verification runs
    total: int  # runs planned so far
    done: int  # runs already finished (a resume)
    precision: Precision | None
    estimate_s: float | None = None  # the pending runs at this database's earlier medians
    expected_s: float = 0.0  # what its suite took where it was sized (0: not said)


@dataclass(frozen=True)
class Finished:
    campaign: int


Event = Note | Planned | RunDone | RoundDone | Forecast | Finished


def run(req: Request, machine: Executor | None = None) -> Iterator[Event]:
    """Start the campaign `req` describes and run it, yielding progress. `machine`
    replaces the real child processes of the local executor (tests, dry runs)."""
    _check(req)
    new = not req.db.exists()
    store = Store(req.db)
    notes: list[Note] = []
    try:
        cid, prepared = _start(store, req, notes)
    except BaseException:
        if new:  # a refused command leaves no file behind
            _discard_if_empty(store)
        raise
    yield from notes
    yield _planned(store, cid, prepared.usable, req)
    yield from _execute(store, cid, list(prepared.usable), req, machine)


def _discard_if_empty(store: Store) -> None:
    """Remove a database this command created, while it holds no campaign."""
    if store.campaigns():
        return
    store.close()
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{store.path}{suffix}").unlink(missing_ok=True)


def resume(
    db: Path,
    executor: str = "local",
    scheduler: str | None = None,
    take_over: bool = False,
    yes: bool = False,
) -> Iterator[Event]:
    """Finish the newest unfinished campaign in `db` (allocators verified again, its
    plan checked against the catalog). Refused while another live process runs it;
    `take_over` when its owner is on another machine and known to be gone; `yes` to
    run runs that are not signed by this user (seal.py; the refusal lists them)."""
    req = Request(db=db, executor=executor, scheduler=scheduler)
    _check(req)
    store = Store(db, create=False)  # a resume of nothing leaves no file behind
    cid = store.campaign(unfinished=True).id
    verified = campaign.reverify(store, cid)
    campaign.check_resume(store, cid, verified, yes)
    store.claim(cid, take_over)
    yield _planned(store, cid, verified, req)
    yield from _execute(store, cid, verified, req, None)


def run_to_end(req: Request, on_event: Callable[[Event], None] | None = None) -> int:
    """`run`, consumed: the campaign's id once every run is stored."""
    cid = 0
    for event in run(req):
        if on_event:
            on_event(event)
        if isinstance(event, Finished):
            cid = event.campaign
    return cid


def tuned(db: Path, cid: int | None = None) -> list[tune.Front]:
    """A `tune` campaign's answer: per row, the Pareto front of time and peak RSS as
    (candidate, the command line that runs the program that way)."""
    store = Store(db, create=False)
    cid = store.campaign(cid).id
    comp = analyze.stored_comparison(store, cid)
    library = {r["name"]: r.get("library") or "" for r in store.allocator_rows(cid)}
    specs = {spec.name: spec for spec, _ in store.allocator_specs(cid)}
    argv = {(s.allocator, s.workload, json.dumps(s.params)): s.argv
            for s in store.plan(cid) if s.role == "measure"}  # fmt: skip
    left_out = tuple(store.settings(cid).get("left_out", {}).items())
    out = []
    for answer in recommend.answers(comp):
        if answer.scope == recommend.OVERALL:
            continue
        row = next(r for r in comp.rows if r.label == answer.scope)
        family = tune.defaults_family(comp, row)
        lines = tuple((f"{c.allocator}  {tune.against_default(comp, row, c.allocator, family)}"
                       .rstrip(),
                       tune.paste_line(specs[c.allocator], library[c.allocator],
                                       argv.get((c.allocator, row.workload,
                                                 json.dumps(row.params)), ())))
                      for c in answer.front if c.allocator in specs)  # fmt: skip
        out.append(tune.Front(answer.scope, lines, tune.judged(comp), left_out))
    return out


def comparison(db: Path, cid: int | None = None, speedup: bool = False) -> analyze.Comparison:
    """A stored campaign's report data: rows of cells with medians, ratios, verdicts."""
    store = Store(db, create=False)
    return analyze.stored_comparison(store, store.campaign(cid).id, speedup)


def harden_request(
    tests: Sequence[str] = (),
    reps: int = 3,
    names: Sequence[str] = (),
    catalogs: Sequence[Path] = (),
    **fields: Any,
) -> Request:
    """The hardening battery (harden.py) as a campaign: every test, or `tests`, in
    `reps` runs each under the allocators `names` (default: every entry `all` selects,
    the debugging allocators (the reference for "caught at the error") and every
    crate-built one already built: the hardened builds beside their plain builds);
    fields: the rest of the Request."""
    known = harden.tests()
    if unknown := [t for t in tests if t not in known]:
        raise UserError(f"--tests: no test {', '.join(map(repr, unknown))}; the tests: "
                        f"{', '.join(known)} (catalog/hardening.toml)")  # fmt: skip
    if not names:
        specs = allocators.load_catalog(list(catalogs))
        chosen = allocators.select(specs, ["all"])
        chosen += [s for s in specs if s.role == "debug" and not s.hidden and not s.recipe]
        chosen += [s for s in specs if s.recipe and not s.hidden and builder.is_built(s)]
        names = [s.name for s in chosen]
    return Request(workloads=(harden.WORKLOAD,), params=(f"test={','.join(tests or known)}",),
                   min_runs=reps, max_runs=reps, budget_s=0, allocators=tuple(names),
                   catalogs=tuple(catalogs), **fields)  # fmt: skip


def cost_request(battery: Sequence[str], **fields: Any) -> Request | None:
    """The `hardening` suite for every hardened build and its plain build among the
    `battery`'s allocators (None: no such pair); fields: the rest of the Request."""
    pairs = harden.pairs(battery)
    if not pairs:
        return None
    names = tuple(dict.fromkeys(a for pair in pairs for a in pair))
    return Request(suite="hardening", allocators=names, **fields)


def command_lines(
    db: Path, cid: int | None = None
) -> tuple[list[tryout.TryLine], analyze.Comparison]:
    """A `try` campaign's report: a line per allocator (hyperfine's way), and the
    comparison its ratios and verdicts come from."""
    store = Store(db, create=False)
    cid = store.campaign(cid).id
    comp = analyze.stored_comparison(store, cid)
    return tryout.try_lines(store.cells(cid, analyze.METRIC_NAMES), comp), comp


def regressions(
    old: str, new: str, metric: str = "time_s", margin: float = stats.DEFAULT_MARGIN
) -> list[compare.Verdict]:
    """Verdicts between two result sets (DB, DB#CAMPAIGN or a runs JSON export)."""
    return compare.compare(compare.load(old), compare.load(new), metric, margin)


# ---------------------------------------------------------------------------
# Resolution: what the request means on this machine
# ---------------------------------------------------------------------------
def _check(req: Request) -> None:
    if req.executor not in EXECUTORS:
        raise UserError(f"--executor {req.executor!r}: choose {' or '.join(EXECUTORS)}")
    if req.executor == "dask" and not req.scheduler:
        raise UserError("--executor dask needs --scheduler tcp://HOST:8786 (the address "
                        "`dask scheduler` prints)")  # fmt: skip
    if req.command and (req.workloads or req.suite):
        raise UserError("give either a command or workloads/a suite, not both")


def _start(store: Store, req: Request, notes: list[Note]) -> tuple[int, campaign.Prepared]:
    suite, cells = _cells(req, notes)
    named = list(req.allocators) or (None if suite.allocators == ("all",)
                                     else list(suite.allocators))  # fmt: skip
    specs, explicit = selected(named, req.catalogs)
    families = tune.families(req.settings) if req.tune else {}
    if req.tune:
        specs, explicit = _tuned(specs if req.allocators else None, families), True
    n = req.min_runs or suite.repetitions
    plan.check_size(len(specs), len(cells), n, req.yes)  # before building anything
    prepared = campaign.prepare(built(specs, notes), explicit)
    plan.check_glibc(cells, prepared.usable)
    notes += unusable_notes(prepared)
    if req.tune:
        prepared = _taken(prepared, notes, families)
    seed = req.seed if req.seed is not None else suite.seed
    precision = None if req.sample else _precision(req, n, suite)
    # The suite's stated time holds for the suite as it is: not with other allocators or blocks.
    as_sized = not (req.allocators or req.min_runs or req.max_runs or req.params)
    cid = campaign.start(store, suite.name, prepared, cells, n, req.timeout_s or suite.timeout,
                         seed, sys.argv, precision, req.sample, req.memory_limit,
                         suite.expected_s if as_sized else 0.0)  # fmt: skip
    return cid, prepared


def _cells(req: Request, notes: list[Note]) -> tuple[plan.Suite, list[tuple[Workload, Params]]]:
    if req.command:
        suite = plan.adhoc_suite([], req.min_runs or DEFAULT_MIN_RUNS, req.timeout_s or 600, 1)
        return dataclasses.replace(suite, name="try"), [(workloads.command_workload(
            list(req.command)), ())]  # fmt: skip
    if req.suite is None and req.workloads:
        suite = plan.adhoc_suite(list(req.workloads), req.min_runs or DEFAULT_MIN_RUNS,
                                 req.timeout_s or 600, req.seed or 1)  # fmt: skip
    else:
        suite = plan.load_suite(req.suite or "quick")
        if req.workloads:
            suite = _only(suite, req.workloads)
    cells = plan.cells(suite, workloads.load_catalog(), plan.parse_overrides(list(req.params)))
    cells, skipped = plan.installed(cells, strict=bool(req.workloads))
    notes += [Note("warning", f"skipped: {s}") for s in skipped]
    if not cells:  # an empty campaign would become the newest, "finished", report
        why = "; ".join(skipped) or "it has no [[runs]] entry"
        raise UserError(f"{suite.source}: nothing to run: {why}")
    return suite, cells


def _only(suite: plan.Suite, wanted: Sequence[str]) -> plan.Suite:
    entries = tuple(e for e in suite.entries if e.workload in wanted)
    if not entries:
        raise UserError(f"suite {suite.name} has no workload {', '.join(wanted)}")
    return dataclasses.replace(suite, entries=entries)


def _tuned(specs: Sequence[AllocatorSpec] | None, families: dict[str, Family]
           ) -> list[AllocatorSpec]:  # fmt: skip
    """The candidates of `tune`: of the allocators named, or of every catalog entry
    the settings catalog has settings for."""
    if specs is None:
        specs = [s for s in allocators.load_catalog() if s.name in families]
    return tune.specs_for(specs, families)


def _taken(prepared: campaign.Prepared, notes: list[Note], families: dict[str, Family]
           ) -> campaign.Prepared:  # fmt: skip
    """Only the candidates whose setting the allocator takes (tune.check)."""
    checked = tune.check(prepared.usable, families)
    notes += [Note("info", f"left out: {name}: {why}") for name, why in checked.left_out.items()]
    notes += [Note("info", f"{name}'s settings are raced unchecked: {why}")
              for name, why in checked.unchecked.items()]  # fmt: skip
    usable = tuple(v for v in prepared.usable if v.spec.name not in checked.left_out)
    return dataclasses.replace(prepared, usable=usable, left_out=tuple(checked.left_out.items()))


def _precision(req: Request, min_runs: int, suite: plan.Suite) -> Precision:
    margin = req.margin if req.margin is not None else suite.margin
    budget = req.budget_s if req.budget_s is not None else suite.budget_s
    most = next((m for m in (req.max_runs, suite.max_repetitions) if m is not None),
                max(DEFAULT_MAX_RUNS, min_runs))  # fmt: skip
    if req.max_runs is None and req.min_runs is not None and suite.max_repetitions:
        most = max(most, min_runs)  # -n above the suite's cap raises the cap with it
    if most < min_runs:
        raise UserError(f"--max-runs {most} is below --min-runs {min_runs}")
    if req.tune and req.tune not in tune.OBJECTIVES:
        raise UserError(f"--objective {req.tune!r}: choose {', '.join(tune.OBJECTIVES)}")
    return Precision(max_runs=most, margin=margin, budget_s=budget, race=req.tune)


def selected(
    alloc: Sequence[str] | None, catalogs: Sequence[Path]
) -> tuple[list[AllocatorSpec], bool]:
    """Selected allocator specs, and whether the user named them explicitly."""
    names, adhoc = allocators.parse_selection(list(alloc or []))
    chosen = (
        allocators.select(allocators.load_catalog(list(catalogs)), names)
        if names or not adhoc
        else []
    )
    return chosen + adhoc, bool(alloc)


def built(specs: list[AllocatorSpec], notes: list[Note]) -> list[AllocatorSpec]:
    """Builds the recipe entries among `specs` that the cache lacks (first use)."""
    for spec in specs:
        if spec.recipe and not builder.is_built(spec):
            builder.build(spec, say=lambda m: notes.append(Note("info", f"{m} (first use)")))
    return specs


def unusable_notes(prepared: campaign.Prepared) -> list[Note]:
    out = [Note("warning", f"not used: {v.spec.name} is {v.status.value}: {v.reason}")
           for v in prepared.unusable]  # fmt: skip
    # tune's candidates share their allocator's library: one warning for all of them
    partial: dict[tuple[str, str], list[str]] = {}
    for v in prepared.usable:
        if v.lacks:
            partial.setdefault((tune.default_of(v.spec.name), v.reason), []).append(v.spec.name)
    out += [Note("warning", f"warning: {_who(names)} partial: {why}")
            for (_, why), names in partial.items()]  # fmt: skip
    return out


def _who(names: Sequence[str]) -> str:
    more = len(names) - 1
    return f"{names[0]} and its {more} tuned variants are" if more else f"{names[0]} is"


def _planned(store: Store, cid: int, verified: Sequence[Verified], req: Request) -> Planned:
    c = store.campaign(cid)
    settings = store.settings(cid)
    n = settings["min_runs"]
    cells = len({(s.workload, str(s.params)) for s in store.plan(cid) if s.role == "measure"})
    measured = len(verified) * cells * n
    precision = (Precision(settings["max_runs"], analyze.settings_margin(settings),
                           settings["budget_s"])
                 if analyze.is_sequential(settings) else None)  # fmt: skip
    return Planned(cid, store.path, len(store.allocator_rows(cid)), n, measured,
                   max(0, c.planned - measured), c.planned, c.done, precision,
                   _estimate(store, cid), float(settings.get("expected_s", 0.0)))  # fmt: skip


def _estimate(store: Store, cid: int) -> float | None:
    """How long the pending runs take if each lasts as long as the median of the
    earlier runs of its workload in this database; None if one has none."""
    typical = store.typical_wall()
    typical.pop(workloads.COMMAND, None)  # `try` commands differ: no earlier time holds
    pending = store.pending(cid)
    if not all(s.workload in typical for s in pending):
        return None
    return sum(typical[s.workload] for s in pending)


def _execute(
    store: Store, cid: int, verified: list[Verified], req: Request, machine: Executor | None
) -> Iterator[Event]:
    dispatcher = _dispatcher(req, verified, machine)
    try:
        yield from campaign.steps(store, cid, dispatcher, verified)
    finally:
        close = getattr(dispatcher, "close", None)
        if close:
            close()
    yield Finished(cid)


def _dispatcher(req: Request, verified: list[Verified], machine: Executor | None) -> Dispatcher:
    if req.executor == "dask":
        from allocmark.executors.dask import Dask

        return Dask(str(req.scheduler), verified)
    return Local(machine)
