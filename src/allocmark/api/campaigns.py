"""The campaigns side of `api` (see its docstring): run, resume, the answers of a
campaign, the verbs' requests. `allocmark.api` loads it on first use, so that the
listings (`allocmark schema`, `workloads`, `allocators`) start without the stages
a campaign needs."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from allocmark import allocators, dispatchers, files, labels, stats, workloads
from allocmark.allocators import builder
from allocmark.answer import analyze, compare, hardening, recommend, stored, tryout
from allocmark.answer.forecast import Forecast as Forecast  # an event the caller reads
from allocmark.answer.race import Front, against_default, candidate_count, defaults_family
from allocmark.errors import UserError
from allocmark.model import GitBuild, Verified
from allocmark.request import (
    CampaignPlan,
    Note as Note,  # the library's own types, for its callers
    Precision,
    Request as Request,
)
from allocmark.run import campaign, resume as resumed, rounds, runas, start
from allocmark.run.campaign import (
    RoundDone as RoundDone,  # events the caller reads
    RunDone as RunDone,
)
from allocmark.run.execute import Executor
from allocmark.store import Store
from allocmark.units import duration as duration
from allocmark.verbs import bisect as bisection, bisect_budget, tune

EXECUTORS = dispatchers.KINDS  # what --dispatcher names: the dispatchers


@dataclass(frozen=True)
class Planned:
    """The campaign is stored and about to run."""

    campaign: int
    db: Path
    allocators: int
    min_blocks: int
    measured: int  # measured runs of the first blocks
    setup: int  # baseline and verification runs
    total: int  # runs planned so far
    done: int  # runs already finished (a resume)
    precision: Precision | None
    estimate_s: float | None = None  # the pending runs at this database's earlier medians
    expected_s: float = 0.0  # what its suite took where it was sized (0: not said)
    why: str = "off"  # the why pass after the measured blocks: "auto", "on", "off"
    warmup: int = 0  # of `setup`: the warm-up runs (try --warmup)


@dataclass(frozen=True)
class Finished:
    campaign: int


Dry = start.Dry
Event = Note | Planned | RunDone | RoundDone | Forecast | Finished | Dry


def run(
    req: Request,
    executor: Executor | None = None,
    selection: start.Selection = start.AS_NAMED,
    confirm: rounds.Confirm | None = None,
) -> Iterator[Event]:
    """Start the campaign `req` describes and run it, yielding progress: plan, start,
    execute. `selection` makes the candidates of the allocators named (`race`: each
    with every setting `tune` races); `executor` replaces the real child processes of
    the local executor (tests, dry runs); `confirm` asks the user whether a default
    budget may be stretched far (campaign.Stretch; without it, only --yes does). The
    campaign's untrusted code runs under an identity of its own (runas.campaign). A dry
    run (req.dry_run) checks the request as far as its first build and yields what it
    would run (Dry), storing nothing."""
    # A dry run builds nothing and runs no measured program, but it probes every
    # allocator as a real run does: an identity of its own too.
    with runas.campaign():
        req = _check(req)
        notes: list[Note] = []
        if req.command:  # which file runs, as the caller's shell would find it
            notes.append(Note("info", f"the command runs {req.command[0]}"))
        if req.dry_run:
            found = start.dry(req, selection, notes)
            yield from notes
            yield found
            return
        new = not req.db.exists()
        store = Store(req.db)
        try:
            started = start.planned(store, req, selection, notes)
        except BaseException:
            if new:  # a refused command leaves no file behind
                _discard_if_empty(store)
            raise
        usable = list(started.prepared.usable)
        yield from notes
        yield _planned(store, started.cid, started.campaign, usable)
        stretch = rounds.Stretch(yes=req.yes, confirm=confirm)
        yield from campaign.execute(
            store, started.cid, started.campaign, usable, req, executor, stretch
        )
        yield Finished(started.cid)


BisectEvent = bisection.Event  # what `allocmark bisect` says, step by step
BisectStarted = bisection.Started
BisectStep = bisection.Step
BisectEnded = bisection.Ended
BisectOutlook = bisect_budget.Outlook


def bisect(
    repository: str,
    good: str,
    bad: str,
    build: GitBuild,
    req: Request,
    metric: str = "time",
    error_rate: float = 0.05,
    max_blocks: int = 0,
) -> Iterator[BisectEvent]:
    """The first commit between `good` and `bad` whose `metric` is decided unlike
    good's (verbs/bisect.py), step by step, then confirmed against its parent; each
    step a campaign stored in req.db. `req` gives the workload (or command), its
    parameters, timeout and database, and its budget (None: the default, stretched
    when the forecast of a small change needs it; 0: none)."""
    req = _check(req)
    if req.allocators:
        raise UserError("bisect builds its own allocators from the repository: drop -a")
    if not 0 < error_rate < 1:
        raise UserError(f"--error-rate {error_rate}: give a fraction between 0 and 1 (0.05)")
    key, deprecated = labels.metric_key(metric)
    question = bisection.Question(
        repository,
        good,
        bad,
        build,
        req,
        key,
        error_rate,
        max_blocks,
        budget_s=bisect_budget.DEFAULT_BUDGET_S if req.budget_s is None else req.budget_s,
        stretch=req.budget_s is None,
    )
    if deprecated:
        yield Note("warning", deprecated)
    yield from bisection.run(question)


def race(objective: str, settings: Path | None = None) -> start.Selection:
    """The selection `tune` races: every setting of each allocator, on `objective`."""
    return tune.race_of(objective, settings)


def _discard_if_empty(store: Store) -> None:
    """Remove a database this command created, while it holds no campaign."""
    if store.campaigns():
        return
    store.close()
    files.discard(store.path)


def resume(
    db: Path,
    dispatcher: str = "local",
    scheduler: str | None = None,
    take_over: bool = False,
    yes: bool = False,
    confirm: rounds.Confirm | None = None,
) -> Iterator[Event]:
    """Finish the newest unfinished campaign in `db` (allocators verified again, its
    plan checked against the catalog). Refused while another live process runs it;
    `take_over` when its owner is on another machine and known to be gone; `yes` to
    run runs that are not signed by this user (seal.py; the refusal lists them)."""
    req = Request(db=db, dispatcher=dispatcher, scheduler=scheduler, yes=yes)
    with runas.campaign():
        _check(req)
        store = Store(db, create=False)  # a resume of nothing leaves no file behind
        cid = store.campaign(unfinished=True).id
        planned = resumed.check_signed(store, cid, yes)  # before anything stored runs
        verified = resumed.reverify(store, cid)
        resumed.check_resume(store, cid, verified, planned)
        runas.guard(db, [v.library for v in verified if v.library])  # as start.planned
        store.claim(cid, take_over)
        cplan = store.campaign_plan(cid)
        yield _planned(store, cid, cplan, verified)
        stretch = rounds.Stretch(yes=req.yes, confirm=confirm)
        yield from campaign.execute(store, cid, cplan, verified, req, stretch=stretch)
        yield Finished(cid)


def run_to_end(
    req: Request,
    on_event: Callable[[Event], None] | None = None,
    selection: start.Selection = start.AS_NAMED,
) -> int:
    """`run`, consumed: the campaign's id once every run is stored."""
    cid = 0
    for event in run(req, selection=selection):
        if on_event:
            on_event(event)
        if isinstance(event, Finished):
            cid = event.campaign
    return cid


def tuned(db: Path, cid: int | None = None) -> list[Front]:
    """A `tune` campaign's answer: per row, the Pareto front of time and peak RSS as
    (candidate, the command line that runs the program that way)."""
    store = Store(db, create=False)
    cid = store.campaign(cid).id
    comp = stored.comparison(store, cid)
    library = {r.name: r.library or "" for r in store.allocators(cid)}
    specs = {spec.name: spec for spec, _ in store.allocator_specs(cid)}
    argv = {
        (s.allocator, s.workload, json.dumps(s.params)): s.argv
        for s in store.run_specs(cid)
        if s.role == "measure"
    }
    left_out = store.campaign_plan(cid).left_out
    out = []
    for answer in recommend.answers(comp):
        if answer.scope == recommend.OVERALL:
            continue
        row = next(r for r in comp.rows if r.label == answer.scope)
        family = defaults_family(comp, row)
        lines = tuple(
            (
                f"{c.allocator}  {against_default(comp, row, c.allocator, family)}".rstrip(),
                tune.paste_line(
                    specs[c.allocator],
                    library[c.allocator],
                    argv.get((c.allocator, row.workload, json.dumps(row.params)), ()),
                ),
            )
            for c in answer.front
            if c.allocator in specs
        )
        out.append(Front(answer.scope, lines, candidate_count(comp), left_out))
    return out


def comparison(db: Path, cid: int | None = None, speedup: bool = False) -> analyze.Comparison:
    """A stored campaign's report data: rows of cells with medians, ratios, verdicts."""
    store = Store(db, create=False)
    return stored.comparison(store, store.campaign(cid).id, speedup)


def harden_request(
    tests: Sequence[str] = (),
    blocks: int = 3,
    names: Sequence[str] = (),
    catalogs: Sequence[Path] = (),
    **fields: Any,
) -> Request:
    """The hardening battery (hardening.py) as a campaign: every test, or `tests`, in
    `blocks` runs each under the allocators `names` (default: every entry `all` selects,
    the debugging allocators (the reference for "caught at the error") and every
    crate-built one already built: the hardened builds beside their plain builds);
    fields: the rest of the Request."""
    known = hardening.tests()
    if unknown := [t for t in tests if t not in known]:
        raise UserError(
            f"--tests: no test {', '.join(map(repr, unknown))}; the tests: "
            f"{', '.join(known)} (catalog/hardening.toml)"
        )
    if not names:
        specs = allocators.load_catalog(list(catalogs))
        chosen = allocators.select(specs, ["all"])
        chosen += [s for s in specs if s.role == "debug" and not s.hidden and not s.recipe]
        chosen += [s for s in specs if s.recipe and not s.hidden and builder.is_built(s)]
        names = [s.name for s in chosen]
    return Request(
        workloads=(hardening.WORKLOAD,),
        params=(f"test={','.join(tests or known)}",),
        min_blocks=blocks,
        max_blocks=blocks,
        budget_s=0,
        allocators=tuple(names),
        catalogs=tuple(catalogs),
        **fields,
    )


def cost_request(battery: Sequence[str], **fields: Any) -> Request | None:
    """The `hardening` suite for every hardened build and its plain build among the
    `battery`'s allocators (None: no such pair); fields: the rest of the Request."""
    pairs = hardening.pairs(battery)
    if not pairs:
        return None
    names = tuple(dict.fromkeys(a for pair in pairs for a in pair))
    return Request(suite="hardening", allocators=names, **fields)


def command_lines(db: Path, cid: int, comp: analyze.Comparison) -> list[tryout.TryLine]:
    """A `try` campaign's lines, one per allocator (hyperfine's way), their ratios and
    verdicts from its comparison."""
    store = Store(db, create=False)
    return tryout.try_lines(store.grouped(store.campaign(cid).id, analyze.METRIC_NAMES), comp)


@dataclass(frozen=True)
class Regression:
    """`allocmark compare`: the verdicts of two result sets, their labels and summary."""

    verdicts: list[compare.Shift]
    old_label: str
    new_label: str
    control: str | None  # the allocator both sets share as their baseline
    summary: compare.Shifts
    failing: list[compare.Shift]  # significant regressions above the limit


def regression(
    old: str,
    new: str,
    metric: str = "time_s",
    margin: float = stats.DEFAULT_MARGIN,
    limit: float | None = None,
) -> Regression:
    """`allocmark compare`: two result sets (DB, DB#CAMPAIGN or a runs JSON export)
    cell by cell, judged as one family; `limit`: the regressions above it fail."""
    old_set, new_set = compare.load(old), compare.load(new)
    if old_set.cells == new_set.cells:  # the same runs: every cell would be "undecided"
        raise UserError(
            f"{old} and {new} are the same runs ({old_set.label}): compared with itself a "
            "result set decides nothing; give two campaigns, e.g. results.db#1 results.db#2 "
            "(`allocmark report --db FILE --campaign ID` shows each)"
        )
    verdicts = compare.compare(old_set, new_set, metric, margin)
    control = next((v.allocator for v in verdicts if v.control), None)
    bad = compare.failing(verdicts, limit) if limit is not None else []
    return Regression(
        verdicts, old_set.label, new_set.label, control, compare.summarize(verdicts), bad
    )


HARDEN_WORKLOAD = hardening.WORKLOAD  # the battery's workload: its failures are its findings


def _check(req: Request) -> Request:
    """`req` checked before anything is made or run; its command's first word as the
    file it runs (run/runas.py: `program`)."""
    if req.dispatcher not in EXECUTORS:
        raise UserError(f"--dispatcher {req.dispatcher!r}: choose {' or '.join(EXECUTORS)}")
    if req.scheduler and req.dispatcher != "dask":
        raise UserError(
            f"--scheduler {req.scheduler!r} is a Dask scheduler's address: add --dispatcher "
            "dask, or drop --scheduler to run here"
        )
    if req.dispatcher == "dask" and not req.scheduler:
        raise UserError(
            "--dispatcher dask needs --scheduler tcp://HOST:8786 (the address "
            "`dask scheduler` prints)"
        )
    if req.command and (req.workloads or req.suite):
        raise UserError("give either a command or workloads/a suite, not both")
    if req.command:
        workloads.check_command(req.command)  # before any file is made or run started
        req = dataclasses.replace(req, command=(runas.program(req.command[0]), *req.command[1:]))
    runas.guard(req.db)  # the measured program must not reach the store (run/runas.py)
    if req.record is not None:
        req = _recording(req)
    return req


def _recording(req: Request) -> Request:
    """`allocmark record`: one allocator (glibc unless named), one workload or command,
    one run, here; its trace's destination writable before anything runs."""
    assert req.record is not None
    if len(req.allocators) > 1 or any("," in a for a in req.allocators):
        raise UserError(
            f"-a {','.join(req.allocators)}: record under one allocator (replay the trace "
            "under many: allocmark replay FILE -a A,B)"
        )
    if len(req.workloads) > 1 or (not req.workloads and not req.command):
        raise UserError("record one program: a command after --, or one -w WORKLOAD")
    if req.dispatcher != "local" or req.sample:
        raise UserError("record runs here, unprofiled: drop --dispatcher and --sample")
    files.check(req.record, "-o")
    # A run that fails (a server stopped at its timeout) still leaves its trace: the one
    # run is made, and said, whatever its status.
    return dataclasses.replace(
        req,
        allocators=req.allocators or ("glibc",),
        min_blocks=1,
        max_blocks=1,
        why="off",
        ignore_failure=True,
    )


def _planned(store: Store, cid: int, cplan: CampaignPlan, verified: Sequence[Verified]) -> Planned:
    c = store.campaign(cid)
    n = cplan.min_blocks
    specs = store.run_specs(cid)
    cells = len({(s.workload, str(s.params)) for s in specs if s.role == "measure"})
    measured = len(verified) * cells * n
    return Planned(
        cid,
        store.path,
        len(store.allocators(cid)),
        n,
        measured,
        max(0, c.planned - measured),
        c.planned,
        c.done,
        cplan.precision if cplan.sequential else None,
        _estimate(store, cid),
        cplan.expected_s,
        cplan.why,
        sum(s.role == "warmup" for s in specs),
    )


def _estimate(store: Store, cid: int) -> float | None:
    """How long the pending runs take if each costs what the earlier runs of its
    workload cost in this database, start to start (store.typical_cost); None if one
    has none."""
    typical = store.typical_cost()
    typical.pop(workloads.COMMAND, None)  # `try` commands differ: no earlier time holds
    pending = store.pending(cid)
    if not all(s.workload in typical for s in pending):
        return None
    return sum(typical[s.workload] for s in pending)
