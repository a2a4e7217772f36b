"""The campaign loop: run what is pending, store each run as it ends, and (precision
campaigns) round after round add blocks until the ratios are decided or the budget
ends; then the why pass. What a round adds is rounds.py's; the set-up runs are
setupruns.py's; `try`'s first run is firstrun.py's; a resume is checked by resume.py
before it comes here."""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass

from allocmark import dispatchers
from allocmark.answer import analyze, forecast, stored
from allocmark.dispatchers import Calibrated, Dispatcher, Done
from allocmark.errors import AllocmarkError
from allocmark.model import RunResult, RunSpec, Verified
from allocmark.request import CampaignPlan, Note, Request
from allocmark.run import whypass
from allocmark.run.execute import Executor
from allocmark.run.firstrun import CommandFails, FirstRun
from allocmark.run.rounds import Stretch, foresee, more_runs, run_costs
from allocmark.run.setupruns import Checks, block_of, with_overhead
from allocmark.store import Store
from allocmark.store.base import StoreFull, filesystem, is_full


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

    undecided: int  # deciding ratios still undecided (of `ratios`)
    ratios: int
    blocks: int


Step = RunDone | RoundDone | forecast.Forecast | Note
FORESEEN = 2  # the first blocks after which a forecast is said: time, then noise too


def execute(
    store: Store,
    cid: int,
    campaign: CampaignPlan,
    verified: Sequence[Verified],
    req: Request,
    executor: Executor | None = None,
    stretch: Stretch | None = None,
) -> Iterator[Step]:
    """steps() on the dispatcher `req` names (--dispatcher, --scheduler), closed after
    (its workers' processes end with it); `executor` replaces the real child processes
    of the local one (tests)."""
    dispatcher = dispatchers.dispatcher(req.dispatcher, req.scheduler, verified, executor)
    try:
        yield from steps(store, cid, campaign, dispatcher, verified, stretch)
    finally:
        dispatchers.close(dispatcher)


def steps(
    store: Store,
    cid: int,
    campaign: CampaignPlan,
    dispatcher: Dispatcher,
    verified: Sequence[Verified],
    stretch: Stretch | None = None,
) -> Iterator[Step]:
    """Run what is still pending, saving each run as it ends, then (precision
    campaigns) add blocks for the rows whose ratios are still undecided, while the
    budget lasts. Ctrl-C keeps every finished run; a resume picks up the same loop.
    Set-up runs (baselines, verification) go first, the baseline's first: measured
    runs depend on them. `campaign`: the campaign's plan as stored; `stretch`: how a
    default budget may grow (rounds.Stretch); `dispatcher`: where the runs happen
    (dispatchers.dispatcher)."""
    loop = _Loop(store, cid, campaign, stretch or Stretch(), verified)
    try:
        while (pending := store.pending(cid)) or (pending := (yield from loop.why_pass())):
            yield from loop.run(pending, dispatcher)
            _require_progress(store, cid, pending)
            if loop.campaign.sequential:
                yield from loop.round()
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


class _Loop:
    """One campaign's loop: its plan (as the stretch and the why pass change it), the
    set-up runs' findings and the time a round spent beyond its runs."""

    def __init__(
        self,
        store: Store,
        cid: int,
        campaign: CampaignPlan,
        stretch: Stretch,
        verified: Sequence[Verified],
    ) -> None:
        self.store, self.cid, self.campaign, self.stretch = store, cid, campaign, stretch
        self.by_name = {v.spec.name: v for v in verified}
        self.baselines = store.baseline_rss(cid)
        self.checks = Checks(store, cid)
        self.first = FirstRun(store, cid, campaign)
        self.started, self.counted = time.monotonic(), 0.0

    def run(self, pending: Sequence[RunSpec], dispatcher: Dispatcher) -> Iterator[Step]:
        """The pending runs, set-up runs first; a forecast after each of the first blocks."""
        total = self.store.campaign(self.cid).planned
        done = total - len(pending)
        self.started, self.counted = time.monotonic(), 0.0
        left = _first_blocks(pending)
        for phase in _phases(pending, self.first.baseline):
            for event in dispatcher.run_batches(self.checks.batches(phase)):
                if isinstance(event, Calibrated):
                    self.store.add_calibration(self.cid, event.seq, event.seconds)
                    continue
                result = self._record(event)
                done += 1
                yield RunDone(done, total, event.spec, result)
                self.first.check(event.spec, result)
                if event.spec.role == "measure" and left.get(event.spec.rep):
                    left[event.spec.rep] -= 1
                    if not left[event.spec.rep]:
                        yield from self._foreseen()

    def _record(self, event: Done) -> RunResult:
        spec = event.spec
        result = with_overhead(spec, event.result, self.baselines)
        verified = event.verified or self.by_name[spec.allocator]
        self.store.record(self.cid, spec, result, verified, event.machine)
        self.store.add_spent(self.cid, event.spent_s)
        self.counted += event.spent_s
        self.checks.note(spec, result)
        return result

    def _foreseen(self, comp: analyze.Comparison | None = None) -> Iterator[Step]:
        """The forecast, after the budget is stretched if it must be."""
        fc = foresee(self.store, self.cid, self.campaign, comp)
        notes, self.campaign = self.stretch.apply(self.store, self.cid, self.campaign, fc)
        yield from notes
        yield foresee(self.store, self.cid, self.campaign, comp) if notes else fc

    def round(self) -> Iterator[Step]:
        """A precision round's end: more blocks where a ratio is undecided."""
        # The budget is the user's time: what a round costs beyond its runs (the
        # calibration loop, saving, deciding) counts too. Counted only by the
        # runs, a campaign of 2 ms runs took 5 minutes on a 2-minute budget.
        self._spend_rest()
        store, cid = self.store, self.cid
        comp = stored.comparison(store, cid)  # one analysis a round
        more, undecided, ratios = more_runs(store, cid, self.campaign, comp)
        # An axis with nothing decided yet (speed, when peak RSS decided at once): the
        # default budget may be what stands in the way.
        precision = self.campaign.precision
        if undecided > 0 and precision and precision.stretch and not self.stretch.declined:
            fc = foresee(store, cid, self.campaign, comp)
            notes, self.campaign = self.stretch.apply(store, cid, self.campaign, fc)
            if notes:
                yield from notes  # a stretched budget pays for more blocks now
                more, undecided, ratios = more_runs(store, cid, self.campaign, comp)
        if not more and self.campaign.sequential:
            # The last round: count as the report will, with its final looks, so the
            # progress's last words and the table agree.
            final = stored.comparison(store, cid, finished=True)
            _, undecided, ratios = more_runs(store, cid, self.campaign, final)
        yield RoundDone(undecided, ratios, len({block_of(s) for s in more}))
        if more:
            yield foresee(store, cid, self.campaign, comp)
        store.extend_plan(cid, more)
        self._spend_rest()

    def _spend_rest(self) -> None:
        rest = time.monotonic() - self.started - self.counted
        self.store.add_spent(self.cid, max(0.0, rest))
        self.started, self.counted = time.monotonic(), 0.0

    def why_pass(self) -> Generator[Note, None, list[RunSpec]]:
        """Once the measured blocks are done: the why pass's runs (whypass.py), planned
        once per campaign, and a note saying what it does."""
        if self.campaign.why == "off" or self.campaign.why_pass is not None:
            return []
        store, cid = self.store, self.cid
        found = whypass.plan(store, cid, self.campaign, run_costs(store, cid))
        self.campaign = store.note_why_pass(cid, found.note)
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


def _first_blocks(pending: Sequence[RunSpec]) -> dict[int, int]:
    """The measured runs of each of the campaign's first FORESEEN blocks still pending:
    when one's count reaches 0, a forecast is said."""
    counts: dict[int, int] = {}
    for s in pending:
        if s.role == "measure" and s.rep < FORESEEN:
            counts[s.rep] = counts.get(s.rep, 0) + 1
    return counts


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
