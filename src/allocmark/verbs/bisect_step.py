"""One decision of a bisect (bisect.py): a campaign of its own, GOOD and BAD (the
start), a candidate beside them (a step), or the culprit against its parent (the
confirmation), a block at a time until its statistic is decided at its level, its
share of the budget is spent (bisect_budget.py), or a run of it fails; and what
more blocks would decide when it ends undecided."""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass

from allocmark import dispatchers, stats, units
from allocmark.answer import analyze, stored
from allocmark.errors import UserError
from allocmark.model import AllocatorSpec, GitBuild, Prepared, RunSpec, Verified
from allocmark.request import Note, Request
from allocmark.run import campaign, runas, start
from allocmark.stats import fewblock, looks
from allocmark.store import Store
from allocmark.verbs import bisect_budget as budget


@dataclass(frozen=True)
class Question:
    """What `allocmark bisect` is asked."""

    repository: str
    good: str
    bad: str
    build: GitBuild
    request: Request  # the cell (workload or command), database, timeout; no allocators
    metric: str = "time_s"
    error_rate: float = 0.05
    max_blocks: int = 0  # per decision (0: only the budget ends it)
    budget_s: float = budget.DEFAULT_BUDGET_S  # 0: none
    stretch: bool = True  # the default budget: stretched when the forecast needs it
    name: str = ""  # the allocators' name prefix (default: the repository's)
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Step:
    """One decision (or a skip): a candidate against GOOD and BAD, or the start."""

    number: int  # 0: the start (GOOD against BAD)
    spec: str  # the candidate's allocator name
    commit: str
    describe: str
    word: str  # "like good", "like bad", "undecided", "skipped"; the start: "differs", ...
    ratio: stats.Ratio | None  # candidate / GOOD (the start: BAD / GOOD) on the metric
    blocks: int
    alpha: float  # this decision's level
    seconds: float
    campaign: int = 0
    detail: str = ""  # a skip: the build's failure; undecided: what more blocks would do
    measured: budget.Measured | None = None  # its statistic per block, for the forecast
    kind: str = "step"  # "start", "step" or "confirm" (the culprit against its parent)


@dataclass(frozen=True)
class Share:
    """A decision's part of the budget (its weight against those after it) and what the
    forecast of the decisions after it needs."""

    weight: float
    after: float
    start: budget.Measured | None = None  # the start's (None: this is the start)
    steps: tuple[budget.Measured, ...] = ()
    left: int = 0  # steps after this decision
    confirm: bool = True  # a confirmation after it

    def seconds(self, clock: budget.Clock) -> float:
        return max(clock.left(), 0.0) * self.weight / (self.weight + self.after)


def decide(
    store: Store,
    q: Question,
    specs: list[AllocatorSpec],
    number: int,
    alpha: float,
    clock: budget.Clock,
    share: Share,
    up: bool = True,
    confirm: bool = False,
) -> Generator[Note | Step, None, Step]:
    """One decision's campaign, a block at a time until decided, its share of the
    budget spent (the default budget stretched when the forecast fits), or at
    q.max_blocks; as every campaign, under an identity of its own (its builds too)."""
    with runas.campaign():
        began = time.monotonic()
        notes: list[Note] = []
        req = dataclasses.replace(
            q.request,
            allocators=(),
            min_blocks=fewblock.MIN_BLOCKS,
            max_blocks=fewblock.MIN_BLOCKS,
            budget_s=0,
            # each decision's own order, within the seeds a campaign stores (int64)
            seed=((q.request.seed or 1) + number + (1000 if confirm else 0)) % 2**63,
            yes=True,
        )
        started = start.planned(store, req, Fixed(tuple(specs)), notes)
        cid, prepared = started.cid, started.prepared
        yield from notes
        # The runs go where --dispatcher says, as any campaign's do (dispatchers.dispatcher).
        dispatch = dispatchers.dispatcher(
            q.request.dispatcher, q.request.scheduler, prepared.usable
        )
        try:
            look = Look(alpha, up, began, tuple(prepared.usable))
            found = yield from _blocks(store, q, cid, specs, look, clock, share, dispatch)
        finally:
            dispatchers.close(dispatch)
        word, ratio, detail, values, ticks = found
        blocks = max(len(v) for v in values) if values else 0
        final = _measured(values, ticks, time.monotonic() - began) if values else None
        spec = specs[1] if len(specs) == 3 else specs[-1]
        if word == "undecided" and final is not None:
            detail = what_more(final, alpha, share, clock)
        step = Step(
            number,
            spec.name,
            spec.git.commit if spec.git else "",
            described(spec),
            word,
            ratio,
            blocks,
            alpha,
            time.monotonic() - began,
            cid,
            detail,
            final,
            "confirm" if confirm else "start" if number == 0 else "step",
        )
        yield step
        return step


@dataclass(frozen=True)
class Look:
    """How a decision looks at its blocks: its level, the direction BAD moved, when it
    began, what it runs."""

    alpha: float
    up: bool
    began: float
    usable: tuple[Verified, ...]  # the allocators, as verified when the campaign began


Found = tuple[str, stats.Ratio | None, str, list[list[float]], list[float]]


def _blocks(
    store: Store,
    q: Question,
    cid: int,
    specs: list[AllocatorSpec],
    look: Look,
    clock: budget.Clock,
    share: Share,
    dispatch: dispatchers.Dispatcher,
) -> Generator[Note, None, Found]:
    """The decision's blocks, one at a time until decided, its share of the budget
    spent (the default budget stretched when the forecast fits), or at q.max_blocks:
    (word, ratio, detail, each allocator's values per block, seconds per added block)."""
    rng = random.Random(cid)
    deadline = clock.deadline(share.weight, share.after)
    ticks: list[float] = []  # seconds each added block took
    last = look.began
    pair = len(specs) == 2
    while True:
        how = store.campaign_plan(cid)  # as the last step left it
        for event in campaign.steps(store, cid, how, dispatch, look.usable):
            if isinstance(event, Note):
                yield event
        values, failed = _values(store, cid, q.metric, [s.name for s in specs])
        now = time.monotonic()
        if len(values) and len(values[0]) > fewblock.MIN_BLOCKS:
            ticks.append(now - last)
        last = now
        if failed:
            return FAILED, None, failed, values, ticks
        word, ratio, detail = _verdict(values, look.alpha, q.metric, look.up, pair)
        if word != "undecided" or (q.max_blocks and len(values[0]) >= q.max_blocks):
            return word, ratio, detail, values, ticks
        measured = _measured(values, ticks, now - look.began)
        if now + measured.block_s > deadline:
            this, rest = needed_s(measured, look.alpha, share)
            more = this + rest
            was = clock.budget_s
            if not clock.room_for(more):
                return word, ratio, detail, values, ticks
            # this decision gets what it needs (20 % spare), the rest is for those after
            deadline = min(now + this * 1.2, clock.began + clock.budget_s)
            if clock.budget_s > was:
                yield Note(
                    "info",
                    f"the default budget stretched to {budget.minutes(clock.budget_s)}: "
                    f"the forecast needs about {budget.minutes(more)} more (--budget caps it)",
                )
        store.extend_plan(cid, _another_block(store, cid, rng))


def _measured(values: list[list[float]], ticks: list[float], spent: float) -> budget.Measured:
    """The decision's statistic per block (the start's log BAD/GOOD, a step's log of
    C² / (GOOD · BAD)) and the seconds a block takes."""
    if len(values) == 2:
        logs = [math.log(b) - math.log(g) for g, b in zip(*values, strict=True)]
    else:
        logs = [
            2 * math.log(c) - math.log(g) - math.log(b) for g, c, b in zip(*values, strict=True)
        ]
    n = len(values[0]) if values else 0
    block_s = statistics.median(ticks) if ticks else (spent / n if n else math.nan)
    return budget.Measured(tuple(logs), block_s)


def needed_s(m: budget.Measured, alpha: float, share: Share) -> tuple[float, float]:
    """Seconds from now this decision's estimate needs, and those the decisions after
    it need (inf: at this estimate no number of blocks decides it)."""
    n = budget.blocks_for(m.mean, m.sd, alpha, plain=looks.plain(m.logs))
    if n is None:
        return math.inf, math.inf
    this = max(n - len(m.logs), 1) * m.block_s
    start_ = share.start or m
    return this, budget.rest_s(start_, share.steps, share.left, alpha, share.confirm)


def what_more(m: budget.Measured, alpha: float, share: Share, clock: budget.Clock) -> str:
    """What more blocks would decide, at the estimate so far (the start: different, or
    the same within the margin), and the budget that would let the bisect finish."""
    if len(m.logs) < 2:
        return "too few blocks completed to say what more would do"
    margin = math.log1p(stats.DEFAULT_MARGIN) if share.start is None and share.confirm else 0.0
    plain = looks.plain(m.logs)
    n = budget.blocks_for(m.mean, m.sd, alpha, margin, plain)
    if n is None:
        most = budget.most_blocks(plain)
        return f"no number of blocks up to {most:,} would decide it at this estimate"
    this = max(n - len(m.logs), 0) * m.block_s
    text = f"at this estimate about {n} blocks would decide it (about {budget.minutes(this)} more)"
    differ = budget.blocks_for(m.mean, m.sd, alpha, plain=plain)
    if differ is None or differ > n:  # decided the same, the bisect would end there
        return text
    total = clock.elapsed() + sum(needed_s(m, alpha, share))
    if not math.isfinite(total):
        return text
    return f"{text}; the bisect about {budget.minutes(total)} in all: give --budget " + (
        units.duration(total, budget=True)
    )


FAILED = "failed"  # a run of the step was not OK: never a number (a candidate is skipped)


def _values(
    store: Store, cid: int, metric: str, names: Sequence[str]
) -> tuple[list[list[float]], str]:
    """Each allocator's metric per block, in block order; or what failed."""
    row = stored.comparison(store, cid).rows[0]
    cells = {n: row.cells.get(metric, {}).get(n) for n in names}
    failed = [f"{n}: {c.state}" for n, c in cells.items() if c is not None and c.failures]
    if failed:
        return [], "; ".join(failed)
    if any(c is None or not c.values for c in cells.values()):
        raise UserError(f"--metric {metric}: the workload does not report it")
    if any(c is not None and c.fixed for c in cells.values()):
        raise UserError(
            f"--metric {metric}: this workload's time is set by its duration "
            "parameter; its speed is --metric ops_per_s"
        )
    by = [dict(zip(c.blocks, c.values, strict=True)) for c in cells.values() if c is not None]
    common = sorted(set.intersection(*(set(b) for b in by)))
    return [[b[k] for k in common] for b in by], ""


def _verdict(
    values: list[list[float]], alpha: float, metric: str, up: bool, start_: bool
) -> tuple[str, stats.Ratio | None, str]:
    """The start: BAD/GOOD judged with the margin; a step: C's side of the middle."""
    if len(values[0]) < 2:
        return "undecided", None, ""
    if start_:
        good, bad = values
        r = stats.paired_ratio(bad, good, sequential=True)
        if r is None:
            return "undecided", None, ""
        v = stats.verdict(
            stats.at_alpha(r, alpha), stats.DEFAULT_MARGIN, metric in analyze.HIGHER_IS_BETTER
        )
        if v.differs:
            return "differs (" + ("higher" if r.value > 1 else "lower") + ")", r, ""
        same = v is stats.Verdict.SAME
        return (f"same within ±{stats.DEFAULT_MARGIN:.0%}" if same else "undecided"), r, ""
    good, cand, bad = values
    ends = [g * b for g, b in zip(good, bad, strict=True)]
    side = stats.paired_ratio([c * c for c in cand], ends, sequential=True)
    shown = stats.paired_ratio(cand, good, sequential=True)
    if side is None:
        return "undecided", shown, ""
    side = stats.at_alpha(side, alpha)
    above = side.low > 1
    below = side.high < 1
    if not (above or below):
        return "undecided", shown, ""
    return ("like bad" if above == up else "like good"), shown, ""


def _another_block(store: Store, cid: int, rng: random.Random) -> list[RunSpec]:
    """The last block's measured runs again, as a new block in a new random order."""
    plan = store.run_specs(cid)
    measured = [s for s in plan if s.role == "measure"]
    rep = max(s.rep for s in measured)
    last = [s for s in measured if s.rep == rep]
    rng.shuffle(last)
    nxt = max(s.seq for s in plan) + 1
    return [dataclasses.replace(s, seq=nxt + i, rep=rep + 1) for i, s in enumerate(last)]


@dataclass(frozen=True)
class Fixed:
    """A step's allocators, as built here: the request names none."""

    specs: tuple[AllocatorSpec, ...]
    race: str = ""

    def candidates(
        self, specs: list[AllocatorSpec], explicit: bool, named: bool
    ) -> tuple[list[AllocatorSpec], bool]:
        return list(self.specs), True

    def taken(self, prepared: Prepared, notes: list[Note]) -> Prepared:
        return prepared


def described(spec: AllocatorSpec) -> str:
    return spec.git.describe if spec.git else spec.name
