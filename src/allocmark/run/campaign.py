"""A campaign: verify allocators, plan, then execute and save run by run."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import random
import shlex
import sqlite3
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from allocmark import allocators, stats, workloads
from allocmark.answer import analyze, forecast, race
from allocmark.errors import AllocmarkError, UserError
from allocmark.executors import Batch, Calibrated, Check, Dispatcher
from allocmark.executors.local import Local
from allocmark.model import (
    AllocatorSpec,
    Note,
    Params,
    Prepared,
    RunResult,
    RunSpec,
    RunStatus,
    Verified,
    Workload,
)
from allocmark.run import machine, plan, whypass
from allocmark.run.execute import Executor
from allocmark.store import Store, owner, seal
from allocmark.store.base import StoreFull, filesystem, is_full
from allocmark.text import printable

OnRun = Callable[[int, int, RunSpec, RunResult], None]
OnRound = Callable[[int, int, int], None]  # undecided ratios, deciding ratios, blocks added


def prepare(specs: Sequence[AllocatorSpec], explicit: bool) -> Prepared:
    """Verify every allocator; one named explicitly must be usable."""
    verified = allocators.verify_all(specs)
    bad = [v for v in verified if not v.usable]
    if explicit and bad:
        v = bad[0]
        raise UserError(f"allocator {v.spec.name!r} is {v.status.value}: {v.reason}")
    usable = [v for v in verified if v.usable]
    if not usable:
        raise UserError("no usable allocator; `allocmark allocators` lists why and how to fix")
    return Prepared(tuple(usable), tuple(bad), allocators.baseline_name(usable))


def start(
    store: Store,
    name: str,
    prepared: Prepared,
    cell_list: Sequence[tuple[Workload, Params]],
    repetitions: int,
    timeout: float,
    seed: int,
    argv: Sequence[str],
    precision: Precision | None = None,
    sample: int = 0,
    memory_limit: int = 0,
    expected_s: float = 0.0,
    stop_on_failure: bool = False,
    why: str = "off",
) -> int:
    """Plan and save the campaign; nothing runs yet. `sample` > 0: under the profiler,
    timing 1 allocator call in `sample`; `expected_s`: how long its suite took where it
    was sized (said at the start); `stop_on_failure`: the first run under the baseline
    failing stops the campaign (`try`: the command itself fails); `why`: the why pass
    (whypass.py: "auto", "on", "off")."""
    runs = plan.generate(
        cell_list, prepared.usable, repetitions, timeout, seed, sample, memory_limit
    )
    used = {w.name: w for w, _ in cell_list}.values()
    settings: dict[str, object] = {
        "seed": seed,
        "min_runs": repetitions,
        "sample": sample,
        "created_by": owner.creator(),
        "memory_limit": memory_limit,
        "plan_id": seal.new_plan_id(),
        "fixed_time": {w.name: w.fixed_time for w in used if w.fixed_time},
        "calls": {w.name: list(w.calls) for w in used if w.kind == "native"},
    }
    if precision:
        settings |= dataclasses.asdict(precision)
    if expected_s:
        settings["expected_s"] = expected_s
    if stop_on_failure:
        settings["stop_on_failure"] = True
    if why != "off":
        settings["why"] = why
    if prepared.left_out:
        settings["left_out"] = dict(prepared.left_out)
    return store.new_campaign(
        name,
        seed,
        machine.current(),
        argv,
        prepared.usable,
        used,
        runs,
        prepared.baseline,
        settings,
    )


@dataclass(frozen=True)
class Precision:
    """Add blocks to a cell until every ratio to the baseline that decides it (time,
    or throughput for duration-bound workloads, and peak RSS) is decided (faster,
    slower, or the same within ±margin, by anytime-valid intervals judged as one
    family), the cell has max_runs blocks, or the campaign has spent budget_s seconds
    (0: no budget)."""

    max_runs: int
    margin: float
    budget_s: float = 0.0
    race: str = ""  # `tune`: drop candidates dominated on this objective (race.OBJECTIVES)
    # budget_s is allocmark's default, not the user's: it is stretched to reach the first
    # verdict the forecast says is possible (forecast.Forecast.first_verdict_s).
    stretch: bool = False


@dataclass(frozen=True)
class RunDone:
    """Progress: run `done` of `total` finished (and is stored)."""

    done: int
    total: int
    spec: RunSpec
    result: RunResult


@dataclass(frozen=True)
class RoundDone:
    """Progress: a precision round ended; `blocks` more blocks were planned."""

    undecided: int  # deciding ratios still inconclusive (of `ratios`)
    ratios: int
    blocks: int


Progress = RunDone | RoundDone | forecast.Forecast | Note
FORESEEN = 2  # the first blocks after which a forecast is said: time, then noise too
Confirm = Callable[[str], bool]  # asks the user a yes/no question (False: cannot ask)


def execute(
    store: Store,
    cid: int,
    executor: Executor | Dispatcher,
    verified: Sequence[Verified],
    on_run: OnRun | None = None,
    on_round: OnRound | None = None,
) -> None:
    """`steps` to the end, with callbacks instead of events."""
    for event in steps(store, cid, executor, verified):
        if isinstance(event, RunDone) and on_run:
            on_run(event.done, event.total, event.spec, event.result)
        elif isinstance(event, RoundDone) and on_round:
            on_round(event.undecided, event.ratios, event.blocks)


def steps(
    store: Store,
    cid: int,
    executor: Executor | Dispatcher,
    verified: Sequence[Verified],
    stretch: Stretch | None = None,
) -> Iterator[Progress]:
    """Run what is still pending, saving each run as it ends, then (precision
    campaigns) add blocks for the cells whose ratios are still undecided, while the
    budget lasts. Ctrl-C keeps every finished run; a resume picks up the same loop.
    Set-up runs (baselines, verification) go first, the baseline's first: measured
    runs depend on them. `stretch`: how a default budget may grow (Stretch)."""
    dispatcher = executor if isinstance(executor, Dispatcher) else Local(executor)
    by_name = {v.spec.name: v for v in verified}
    baselines = store.baseline_rss(cid)
    settings = store.settings(cid)
    stretch = stretch or Stretch()
    checks = Checks(store, cid)
    first = FirstRun(store, cid, settings)
    try:
        while (pending := store.pending(cid)) or (pending := (yield from _why_pass(store, cid))):
            total = store.campaign(cid).planned
            done = total - len(pending)
            started, counted = time.monotonic(), 0.0
            left = _first_blocks(pending)
            for phase in _phases(pending, first.baseline):
                for event in dispatcher.run_batches(checks.batches(phase)):
                    if isinstance(event, Calibrated):
                        store.add_calibration(cid, event.seq, event.seconds)
                        continue
                    spec = event.spec
                    result = with_overhead(spec, event.result, baselines)
                    store.record(
                        cid, spec, result, event.verified or by_name[spec.allocator], event.machine
                    )
                    store.add_spent(cid, event.spent_s)
                    counted += event.spent_s
                    checks.note(spec, result)
                    done += 1
                    yield RunDone(done, total, spec, result)
                    first.check(spec, result)
                    if left.get(spec.rep) and spec.role == "measure":
                        left[spec.rep] -= 1
                        if not left[spec.rep]:
                            fc = foresee(store, cid, settings)
                            if notes := list(stretch.apply(store, cid, settings, fc)):
                                yield from notes
                                fc = foresee(store, cid, settings)  # at the new budget
                            yield fc
            _require_progress(store, cid, pending)
            if analyze.is_sequential(settings):
                # The budget is the user's time: what a round costs beyond its runs (the
                # calibration loop, saving, deciding) counts too. Counted only by the
                # runs, a campaign of 2 ms runs took 5 minutes on a 2-minute budget.
                _spend_rest(store, cid, started, counted)
                started = time.monotonic()
                comp = analyze.stored_comparison(store, cid)  # one analysis a round
                more, undecided, ratios = more_runs(store, cid, settings, comp)
                # Nothing decided yet: the default budget may be what stands in the way.
                if undecided == ratios > 0 and settings.get("stretch") and not stretch.declined:
                    fc = foresee(store, cid, settings, comp)
                    if notes := list(stretch.apply(store, cid, settings, fc)):
                        yield from notes  # a stretched budget pays for more blocks now
                        more, undecided, ratios = more_runs(store, cid, settings, comp)
                yield RoundDone(undecided, ratios, len({_block(s) for s in more}))
                if more:
                    yield foresee(store, cid, settings, comp)
                store.extend_plan(cid, more)
                _spend_rest(store, cid, started, 0.0)
    except CommandFails:
        store.set_status(cid, "failed")
        raise
    except sqlite3.Error as e:
        _ended(store, cid, "interrupted")
        if not is_full(e, store.path):
            raise
        raise StoreFull(full_advice(store, cid)) from None
    except BaseException:
        _ended(store, cid, "interrupted")
        raise
    store.set_status(cid, "finished")


def _why_pass(store: Store, cid: int) -> Generator[Note, None, list[RunSpec]]:
    """Once the measured blocks are done: the why pass's runs (whypass.py), planned
    once per campaign, and a note saying what it does."""
    settings = store.settings(cid)
    if "why" not in settings or "why_pass" in settings:
        return []
    found = whypass.plan(store, cid, settings, _run_costs(store, cid))
    store.note_why_pass(cid, found.note)
    if settings["why"] != "off":
        yield Note("info", found.note)
    if found.runs:
        store.extend_plan(cid, found.runs)
    return store.pending(cid)


def _ended(store: Store, cid: int, status: str) -> None:
    """The status set where it can be: on a full disk it cannot, and a resume still
    finds the campaign unfinished (its owner's process is gone)."""
    with contextlib.suppress(sqlite3.Error):
        store.set_status(cid, status)


def full_advice(store: Store, cid: int) -> str:
    """What a full disk means for the campaign: nothing lost, and how to finish it."""
    c = store.campaign(cid)
    return (
        f"no room left for {store.path}: the disk is full at {filesystem(store.path)}. "
        f"Campaign {cid} keeps its {c.done} finished runs, intact ({c.planned - c.done} "
        "to go); free space there, then finish it with "
        f"`allocmark run --resume --db {store.path}`"
    )


class CommandFails(UserError):
    """The campaign's command failed on its first run under the baseline."""


TAIL_LINES = 12  # of a failing first run's exit status and stderr, in its error


class FirstRun:
    """`try`'s first run: the command under the baseline. When it fails, nothing after
    it can be measured (every allocator would fail the same way), so the campaign stops
    there with the command's exit status and the end of its stderr, as hyperfine does;
    `-i` (no `stop_on_failure` setting) runs on. Armed only in a campaign that has not
    run anything yet: a resume has its first run behind it."""

    def __init__(self, store: Store, cid: int, settings: dict[str, Any]) -> None:
        c = store.campaign(cid)
        self.baseline = c.baseline or ""
        self.armed = bool(settings.get("stop_on_failure")) and c.done == 0
        self.db = store.path

    def check(self, spec: RunSpec, result: RunResult) -> None:
        if not self.armed or spec.allocator != self.baseline:
            return
        self.armed = False
        if result.status in (RunStatus.OK, RunStatus.UNVERIFIED):
            return
        line = shlex.join(spec.argv)
        # its own lines, each made printable: the program's text cannot drive the terminal
        tail = [printable(x) for x in result.detail.splitlines()[-TAIL_LINES:]] or ["no detail"]
        raise CommandFails(
            f"`{printable(line)}` {result.status.value} on its first run, under "
            f"{self.baseline}:\n  " + "\n  ".join(tail) + "\n"
            "Nothing else was run: under every allocator it would fail the same way. "
            "Fix the command (it must exit 0), or add -i (`allocmark try -i`) to run it "
            f"under every allocator anyway (this run is kept in {self.db})."
        )


@dataclass
class Stretch:
    """A default budget (Precision.stretch) grown, once, to reach the first verdict the
    forecast says is possible, while no ratio is decided yet: to `FAR_S` in all without
    a word more than a note; beyond, only when `yes` or `confirm` accepts. An explicit
    budget (--budget, a suite's `budget`) is never changed. A note says each stretch."""

    yes: bool = False
    confirm: Confirm | None = None
    declined: bool = False

    def apply(
        self, store: Store, cid: int, settings: dict[str, Any], fc: forecast.Forecast
    ) -> Iterator[Note]:
        if not settings.get("stretch") or self.declined:
            return
        budget = float(settings.get("budget_s") or 0.0)
        need = fc.first_verdict_s()
        # The planned blocks run whatever the budget says: it pays for the ones after.
        if not budget or need is None or fc.first_verdict_blocks() <= fc.planned:
            return
        # A quarter more than the forecast: run times vary, and the last block must fit.
        wanted = fc.spent_s + STRETCH_SLACK * need
        if wanted <= budget:
            return
        new = forecast.budget_seconds(wanted)
        given = float(settings.get("budget_given_s", budget))
        at = f"the first verdict is expected at {fc.first_verdict_blocks()} blocks"
        if new > FAR_S and not self.yes:
            question = (
                f"The default budget ({forecast.duration(given)}) ends before any "
                f"verdict: {at}, about {forecast.duration(fc.spent_s + need)} in all. "
                f"Stretch the budget to {forecast.duration(new)}?"
            )
            if not (self.confirm and self.confirm(question)):
                self.declined = True
                yield Note(
                    "warning",
                    f"the default budget ({forecast.duration(given)}) ends "
                    f"before any verdict: {at}, about "
                    f"{forecast.duration(fc.spent_s + need)} in all; kept (far: more "
                    f"than {forecast.duration(FAR_S)}): --yes stretches it, or --budget "
                    f"{forecast.budget_text(new)} sets it",
                )
                return
        store.stretch_budget(cid, new)
        settings["budget_given_s"] = given
        settings["budget_s"] = new
        yield Note(
            "info",
            f"budget stretched from the default {forecast.duration(given)} to "
            f"{forecast.duration(new)}: {at} (--budget sets it)",
        )


STRETCH_SLACK = 1.25
FAR_S = 300.0  # a stretch beyond this campaign time is asked first (or --yes)


def _first_blocks(pending: Sequence[RunSpec]) -> dict[int, int]:
    """The measured runs of each of the campaign's first FORESEEN blocks still pending:
    when one's count reaches 0, a forecast is said."""
    counts: dict[int, int] = {}
    for s in pending:
        if s.role == "measure" and s.rep < FORESEEN:
            counts[s.rep] = counts.get(s.rep, 0) + 1
    return counts


def foresee(
    store: Store, cid: int, settings: dict[str, Any], comp: analyze.Comparison | None = None
) -> forecast.Forecast:
    """The forecast of the runs so far (forecast.py), from `comp` when the round has it."""
    comp = comp or analyze.stored_comparison(store, cid)
    return forecast.of(
        comp, _run_costs(store, cid, store.measured_overhead(cid)), settings, store.spent(cid)
    )


def _spend_rest(store: Store, cid: int, started: float, counted: float) -> None:
    store.add_spent(cid, max(0.0, time.monotonic() - started - counted))


def _phases(pending: Sequence[RunSpec], baseline: str) -> list[list[RunSpec]]:
    """Set-up runs, the baseline's first (FirstRun checks it), then the measured runs."""
    setup = sorted(
        (s for s in pending if s.role != "measure"), key=lambda s: s.allocator != baseline
    )
    return [p for p in (setup, [s for s in pending if s.role == "measure"]) if p]


def _require_progress(store: Store, cid: int, pending: Sequence[RunSpec]) -> None:
    """Runs a dispatcher lost (their workers kept dying) stay pending, and say so."""
    left = {s.seq for s in store.pending(cid)} & {s.seq for s in pending}
    if left:
        raise AllocmarkError(
            f"{len(left)} runs were lost with their workers and stay pending in {store.path}; "
            f"finish them with `allocmark run --resume --db {store.path}`"
        )


def _block(spec: RunSpec) -> tuple[str, str, int]:
    return spec.workload, json.dumps(spec.params), spec.rep


class Checks:
    """The verification runs of applications and commands (role "verify": one per
    allocator and cell, before its measured runs, with libam_who in every process) and
    what they found. Measured runs they cover carry no verifier, so that the peak RSS
    is the program's own; each is stored as verified by its check, or unverified."""

    def __init__(self, store: Store, cid: int) -> None:
        self.planned = {_cell(s) for s in store.plan(cid) if s.role == "verify"}
        self.found = {
            (r.allocator, r.workload, r.params): Check(r.seq, r.status, r.detail, r.labels)
            for r in store.runs(cid, ())
            if r.role == "verify"
        }

    def note(self, spec: RunSpec, result: RunResult) -> None:
        if spec.role == "verify":
            self.found[_cell(spec)] = Check(spec.seq, result.status, result.detail, result.labels)

    def batches(self, specs: Sequence[RunSpec]) -> list[Batch]:
        """Blocks of consecutive measured runs, each with the checks covering it; a
        set-up run is a batch of its own."""
        groups: list[list[RunSpec]] = []
        for s in specs:
            if (
                groups
                and s.role == "measure"
                and groups[-1][-1].role == "measure"
                and _block(groups[-1][-1]) == _block(s)
            ):
                groups[-1].append(s)
            else:
                groups.append([s])
        return [
            Batch(
                tuple(g),
                tuple(
                    (s.seq, self.found.get(_cell(s)))
                    for s in g
                    if s.role == "measure" and _cell(s) in self.planned
                ),
            )
            for g in groups
        ]


def _cell(spec: RunSpec) -> tuple[str, str, Params]:
    return spec.allocator, spec.workload, spec.params


GROWTH = 8  # a round adds 1/GROWTH of a row's blocks (at least one)


def more_runs(
    store: Store, cid: int, settings: dict[str, Any], comp: analyze.Comparison | None = None
) -> tuple[list[RunSpec], int, int]:
    """More blocks (1/GROWTH of those it has), interleaved, for every row with a
    deciding ratio still undecided and fewer than max_runs blocks, as the budget allows;
    and how many deciding ratios are undecided, of how many. Stopping a row once it is
    decided is sound only because its intervals are anytime-valid (`sequential`):
    with fixed-n intervals, stopping at the first "faster" made false verdicts stay
    (A/A: 7 % false instead of 5 %). A row the budget leaves undecided gets one exact
    look at its end, once the campaign is finished (stats.SPLIT). `comp`: the stored
    comparison, when the caller has it."""
    specs = store.plan(cid)
    comp = comp or analyze.stored_comparison(store, cid)
    open_rows: dict[tuple[str, Params], bool] = {}
    undecided = ratios = 0
    for r in comp.rows:  # a cell run on several machines (a cluster) is open if any part is
        key = (r.workload, plan.planned_params(r.params))
        verdicts = analyze.decisions(r, comp.baseline, comp.margin)
        ratios += len(verdicts)
        # a ratio without runs to judge (every run failed) is not decided either
        undecided += verdicts.count(stats.Verdict.INCONCLUSIVE) + verdicts.count(None)
        can_help = None not in verdicts
        open_rows[key] = open_rows.get(key, False) or (
            can_help and stats.Verdict.INCONCLUSIVE in verdicts
        )
    blocks: dict[tuple[str, Params], list[RunSpec]] = {}
    for s in specs:
        if s.role == "measure":
            blocks.setdefault((s.workload, s.params), []).append(s)
    most = settings["max_runs"]
    todo = [
        key
        for key, group in blocks.items()
        if open_rows.get(key) and len({s.rep for s in group}) < most
    ]
    # Rows share the budget in a random order, not the most undecided first: which
    # rows get blocks stays independent of what their blocks said.
    rng = random.Random(settings.get("seed", 1) + len(specs))
    rng.shuffle(todo)
    left = settings.get("budget_s", 0.0) - store.spent(cid) if settings.get("budget_s") else None
    cost = _run_costs(store, cid)
    # A race (`tune`): candidates another one clearly beats get no more blocks.
    out_of_race = race.dominated(comp, settings["race"]) if settings.get("race") else {}
    nxt = max(s.seq for s in specs) + 1
    out: list[RunSpec] = []
    # A row of n blocks gets n/8 more at once (at least one): looking after every
    # block cost a round of analysis per block, most of a campaign of short runs,
    # and the anytime-valid interval allows any schedule of looks.
    size = {key: len({s.rep for s in blocks[key]}) for key in todo}
    more = {key: max(1, min(size[key] // GROWTH, most - size[key])) for key in todo}
    for j in range(max(more.values(), default=0)):
        for key in todo:
            if j >= more[key]:
                continue
            group = blocks[key]
            latest = {s.allocator: s for s in group}
            members = [
                s
                for s in latest.values()
                if s.allocator not in out_of_race.get(analyze.row_key(*key), set())
            ]
            if left is not None:
                need = sum(cost.get((s.allocator, s.workload, s.params), 0.0) for s in members)
                if need > left:
                    more[key] = j  # out of budget: no more blocks for this row
                    continue
                left -= need
            rep = max(s.rep for s in group) + 1 + j
            rng.shuffle(members)
            out += [
                dataclasses.replace(s, seq=nxt + len(out) + i, rep=rep)
                for i, s in enumerate(members)
            ]
    return out, undecided, ratios


def _run_costs(
    store: Store, cid: int, overhead: float | None = None
) -> dict[tuple[str, str, Params], float]:
    """Seconds one more run of each cell costs: its mean wall time plus the campaign's
    mean overhead per run (start-up, verification, saving: what the budget has spent
    beyond the measured runs' wall time, per run; `overhead` instead when given)."""
    cells = [c for c in store.cells(cid, (), columns=("wall_s",)) if c.role == "measure"]
    runs = sum(len(c.statuses) for c in cells)
    walls = {
        (c.allocator, c.workload, c.params): [w or 0.0 for w in c.columns["wall_s"]] for c in cells
    }
    if overhead is None:
        total_wall = sum(sum(w) for w in walls.values())
        overhead = max(0.0, store.spent(cid) - total_wall) / runs if runs else 0.0
    per_run = overhead
    return {k: sum(w) / len(w) + per_run for k, w in walls.items() if w}


def with_overhead(
    spec: RunSpec, result: RunResult, baselines: dict[tuple[str, str], int]
) -> RunResult:
    """Add the memory overhead ratio: (peak RSS - baseline RSS) / peak requested bytes.

    The baseline is the RSS of the same program under the same allocator doing
    nothing; baseline runs come first in every plan and feed `baselines`.
    """
    key = (spec.allocator, spec.workload)
    if result.status is not RunStatus.OK:
        return result
    if spec.role == "baseline":
        baselines[key] = result.maxrss_kib
        return result
    requested = result.metrics.get("peak_requested_bytes", 0.0)
    if key not in baselines or requested <= 0:
        return result
    ratio = (result.maxrss_kib - baselines[key]) * 1024 / requested
    return dataclasses.replace(result, metrics=result.metrics | {"overhead_ratio": ratio})


def check_resume(store: Store, cid: int, verified: Sequence[Verified], confirmed: bool) -> None:
    """A resume runs what the database says, so it checks what that is. Each pending run
    must be what the catalog (or the campaign's own command) makes of its cell, a run of
    a workload neither knows is refused, and all runs of a cell share one command.
    Then every planned run's signature is verified under this user's key (seal.py):
    anything unsigned, whatever `created_by` claims, is listed with its whole command
    and environment and runs only when confirmed."""
    pending = store.pending(cid)
    catalog = dict(workloads.load_catalog())
    if (command := store.command_argv(cid, workloads.COMMAND)) is not None:
        catalog[workloads.COMMAND] = workloads.command_workload(command)
    by_name = {v.spec.name: v for v in verified}
    signed = store.signed_plan(cid)  # read once: checked for mixed cells, then verified
    problems = [_changed(spec, catalog, by_name) for spec in pending]
    if problem := next((p for p in problems if p), None) or plan.mixed([s for s, _ in signed]):
        raise UserError(
            f"{store.path}: campaign {cid} cannot be resumed: {problem}; it was "
            "changed since it was planned: start a new campaign"
        )
    unsigned = seal.unsigned(signed, store.settings(cid).get("plan_id"))
    if not pending or not unsigned or confirmed:
        return
    origin = store.settings(cid).get("created_by")
    where = (
        f"says it was planned by user {origin.get('uid')} on {origin.get('host')}"
        if isinstance(origin, dict)
        else "does not say who planned it"
    )
    commands = sorted({shown(s) for s in unsigned})
    more = f"\n  ... and {len(commands) - 20} more" if len(commands) > 20 else ""
    raise UserError(
        f"campaign {cid} in {store.path} {where}, and {len(unsigned)} of its runs "
        f"are not signed by you ({seal.key_path()}): changed since they were "
        "planned, or planned elsewhere. Resuming it runs:\n  "
        + "\n  ".join(commands[:20])
        + more
        + "\nadd --yes to run them"
    )


def _changed(spec: RunSpec, catalog: dict[str, Workload], by_name: dict[str, Verified]) -> str:
    a = by_name.get(spec.allocator)
    if a is None:
        return (
            f"run {spec.seq} names allocator {spec.allocator!r}, which the campaign does not have"
        )
    return plan.differs(spec, catalog, a) or ""


def shown(spec: RunSpec) -> str:
    """A run as a shell line: every variable it sets, then its command (and a service's
    client, an app's steps are in its argv)."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in spec.env)
    line = f"{env} {shlex.join(spec.argv)}".strip()
    if spec.app.service:
        line += f"  (client: {shlex.join(spec.app.service.client)})"
    return printable(line)  # a database must not drive the terminal


def reverify(store: Store, cid: int) -> list[Verified]:
    """The campaign's allocators checked again; a changed library refuses the resume."""
    out = []
    for spec, sha in store.allocator_specs(cid):
        now = allocators.verify(spec)
        if not now.usable or now.sha256 != sha:
            found = now.sha256[:12] if now.sha256 else now.status.value
            raise UserError(
                f"allocator {spec.name!r} changed since campaign {cid} started "
                f"(sha256 {str(sha)[:12]} -> {found}); its runs would not be "
                "comparable: start a new campaign instead of --resume"
            )
        out.append(now)
    return out
