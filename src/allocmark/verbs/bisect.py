"""`allocmark bisect`: the commit that changed a metric, between a good and a bad revision.

The commits from GOOD to BAD along BAD's first-parent line (allocators/git.py) are
searched as `git bisect --first-parent` searches them, each step a campaign of its
own in the database (every run stored, reported like any campaign):

1. **Start**: GOOD and BAD in paired blocks, until BAD/GOOD is decided (the paired
   anytime-valid intervals of every verdict, stats.paired_ratio). Same within the
   margin, or undecided when its share of the budget is spent: "no commit decided
   unlike good", with the blocks and the --budget that would decide it.
2. **Each step**: the midpoint candidate C beside GOOD and BAD in each block (their
   order random), until C is decided *like good* or *like bad*: the blocks' log of
   C² / (GOOD · BAD) is C's distance above the geometric middle of the two, positive
   when C is nearer BAD; its interval lying wholly on one side decides. Under either
   answer C sits |log(BAD/GOOD)| / 2 from the middle, but with three runs' noise: a
   step needs about three times the blocks of the start. (Deciding instead whether
   C/GOOD or BAD/C moved the way BAD/GOOD did needs only the start's evidence, but
   with two changes between GOOD and BAD it called a commit after the first change
   "like good" when BAD/C was decided first, and named a commit where nothing
   changed: a step must judge C against both ends at once.) A candidate that does
   not build is skipped, as `git bisect skip` does, and the nearest untried commit
   taken instead.
3. **Confirmation**: the commit found against its parent (decided like good), in
   paired blocks as the start: "confirmed" when decided different the way BAD differs
   from GOOD, its change quoted; else "not confirmed" with what was found.

Time (bisect_budget.py): the budget (10 minutes by default) is shared among the
decisions, each adding blocks until decided or its share is spent; the default budget
stretches when the forecast of a small change needs it. The start's noise is said,
and before each step the blocks and time the noise measured so far says it needs.

Error rate. A wrong step (an interval on the wrong side) is the only way to a wrong
commit; each decision is made at its own level and their sum is the error rate
asked for (5 %): the first `planned` decisions (the start, ⌈log2 N⌉ + 1 steps and
the confirmation) share 90 % of it equally, later ones (after skips) halve the rest
each time. The intervals are anytime-valid, so adding blocks until decided keeps each
level.

With more than one change in the metric between GOOD and BAD, the search ends at
one commit where it crosses the middle, as `git bisect` ends at one transition.
"""

from __future__ import annotations

import dataclasses
import math
import random
import statistics
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import overload

from allocmark import stats
from allocmark.allocators import git
from allocmark.answer import analyze, forecast
from allocmark.errors import UserError
from allocmark.executors.local import Local
from allocmark.model import AllocatorSpec, Git, GitBuild, Note, Prepared, Request, RunSpec
from allocmark.run import campaign, start
from allocmark.stats import fewblock
from allocmark.store import Store
from allocmark.verbs import bisect_budget as budget

# --metric: the report's metric groups, and the words a user types for the two main ones.
METRICS = {
    "time": "time_s",
    "peak_rss": "peak_rss_kib",
    "peak-rss": "peak_rss_kib",
    **{m: m for m in analyze.METRICS},
}
WORDS = {"time_s": "time", "peak_rss_kib": "peak RSS"}  # a metric as a sentence says it
PLANNED_SHARE = 0.9  # of the error rate, for the decisions a bisect without skips makes


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
class Started:
    commits: int  # N: the commits after GOOD up to BAD, one of which is the first unlike good
    bound: int  # ⌈log2 N⌉ + 2: the most steps a bisect with one skip needs
    good: str  # describe
    bad: str
    metric: str
    budget_s: float  # 0: none


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
class Ended:
    """The answer: the first commit decided unlike good, the range left undecided, or
    no commit (BAD was not decided unlike GOOD)."""

    first: str  # describe of the first commit unlike good ("": none found)
    commit: str
    range: tuple[str, ...]  # describes of the commits it may still be (the first LISTED)
    text: str
    steps: int
    seconds: float
    confirmed: bool | None = None  # the culprit against its parent (None: no culprit)
    confirmation: Step | None = None


Event = Note | Started | Step | Ended | budget.Outlook
LISTED = 16


def metric_of(text: str) -> str:
    found = METRICS.get(text)
    if found is None:
        raise UserError(f"--metric {text!r}: choose one of {', '.join(METRICS)}")
    return found


def run(q: Question) -> Iterator[Event]:
    """The bisect, step by step; every step's runs stored in `q.request.db`. A note
    every step repeats (GOOD is partial) is said once."""
    said: set[str] = set()
    for event in _run(q):
        if isinstance(event, Note):
            if event.text in said:
                continue
            said.add(event.text)
        yield event


def _run(q: Question) -> Iterator[Event]:
    clock = budget.Clock(q.budget_s, q.stretch)
    repo = git.normalized(q.repository)
    mirror = git.refreshed(repo)
    chain = git.line(mirror, git.resolve(mirror, q.good), git.resolve(mirror, q.bad))
    if len(chain) < 2:
        raise UserError(f"{q.good} and {q.bad} are the same commit: nothing to bisect")
    name = q.name or _name(repo)
    specs = _Line(mirror, repo, chain, name, q)
    n = len(chain) - 1
    bound = math.ceil(math.log2(n)) + 2 if n > 1 else 2
    levels = Levels(q.error_rate, bound + 1)  # the start, the steps, a skip, the confirmation
    yield Started(n, bound, _described(specs[0]), _described(specs[-1]), q.metric, q.budget_s)
    if q.request.dry_run:  # the revisions resolved and counted: nothing built or run
        return
    store = Store(q.request.db)
    good, bad = specs[0], specs[-1]
    for spec, which in ((good, "GOOD"), (bad, "BAD")):
        notes: list[Note] = []
        try:
            start.revision(spec, notes)
        except git.BuildFailed as e:
            raise UserError(f"{which} must build: {e}") from None
        yield from notes
    after = budget.steps_left(0, n) * budget.STEP_WEIGHT + budget.CONFIRM_WEIGHT
    first = yield from _decide(
        store,
        q,
        [good, bad],
        0,
        levels.next(),
        clock,
        Share(1.0, after, left=budget.steps_left(0, n)),
    )
    if first.word == FAILED:
        raise UserError(
            f"GOOD or BAD fails its runs ({first.detail}): `allocmark report --db "
            f"{store.path}` shows how"
        )
    if not first.word.startswith("differs"):
        yield Ended("", "", (), _nothing(first, specs[0]), 0, clock.elapsed())
        return
    assert first.measured is not None
    yield Note("info", budget.noise_text(first.measured, first.alpha))
    up = first.ratio is not None and first.ratio.value > 1  # BAD's values are above GOOD's
    lo, hi = 0, len(chain) - 1  # chain[lo] decided like good, chain[hi] like bad
    skipped: set[int] = set()
    steps: list[budget.Measured] = []
    number = 0
    while hi - lo > 1:
        i = _candidate(lo, hi, skipped)
        if i is None:
            break
        number += 1
        cand = specs[i]
        notes = []
        try:
            start.revision(cand, notes)
        except git.BuildFailed as e:
            skipped.add(i)
            yield from notes
            yield _skip(number, cand, e)
            continue
        yield from notes
        left = budget.steps_left(lo, hi) - 1
        share = Share(budget.STEP_WEIGHT, left * budget.STEP_WEIGHT + budget.CONFIRM_WEIGHT)
        alpha = levels.next()
        yield budget.outlook(
            number, first.measured, steps, alpha, share.seconds(clock) if q.budget_s else math.inf
        )
        share = dataclasses.replace(share, start=first.measured, steps=tuple(steps), left=left)
        step = yield from _decide(store, q, [good, cand, bad], number, alpha, clock, share, up)
        if step.measured is not None:
            steps.append(step.measured)
        if step.word == FAILED:
            skipped.add(i)  # its runs failed: no number, so no side either
        elif step.word == "like good":
            lo = i
        elif step.word == "like bad":
            hi = i
        else:
            yield _undecided(specs, lo, hi, skipped, number, clock.elapsed(), step)
            return
    found = _found(specs, lo, hi, skipped, number, clock.elapsed())
    if not found.commit:
        yield found
        return
    if lo == 0 and hi == n:  # GOOD and BAD are the culprit and its parent: the start
        yield dataclasses.replace(
            found, confirmed=True, text=found.text + "; the start confirms it"
        )
        return
    check = yield from _decide(
        store,
        q,
        [specs[lo], specs[hi]],
        number + 1,
        levels.next(),
        clock,
        Share(budget.CONFIRM_WEIGHT, 0.0, confirm=False),
        up,
        confirm=True,
    )
    yield _confirmed(found, check, specs[lo], up, clock.elapsed(), WORDS.get(q.metric, q.metric))


def _skip(number: int, cand: AllocatorSpec, e: git.BuildFailed) -> Step:
    return Step(
        number,
        cand.name,
        cand.git.commit if cand.git else "",
        _described(cand),
        "skipped",
        None,
        0,
        0.0,
        0.0,
        detail=f"{e.why}: {_telling(e.tail)}",
    )


def _confirmed(
    found: Ended, check: Step, parent: AllocatorSpec, up: bool, spent: float, metric: str
) -> Ended:
    """The culprit against its parent: confirmed when decided different the way BAD
    differs from GOOD; else said as not confirmed, with what the campaign found."""
    r = check.ratio
    shown = f"{metric} {_change(r)} against its parent {_described(parent)}" if r else ""
    ok = check.word.startswith("differs") and r is not None and (r.value > 1) == up
    if ok:
        text = f"{found.text}; confirmed: {shown} in {check.blocks} blocks"
    else:
        why = check.word if check.word != "undecided" else f"undecided in {check.blocks} blocks"
        text = f"{found.text}; not confirmed: against its parent {_described(parent)} {why}" + (
            f" ({_change(r)})" if r is not None else ""
        )
    return dataclasses.replace(
        found, text=text, confirmed=ok, confirmation=check, seconds=spent, steps=found.steps
    )


def _change(r: stats.Ratio) -> str:
    """A ratio as a signed percentage with its interval, "+9.1% [+8.0%, +10.2%]"; as a
    factor past twice or half, "×16.6 [×12.8, ×21.1]"."""
    if not 0.5 < r.value < 2:
        return f"×{r.value:.3g} [×{r.low:.3g}, ×{r.high:.3g}]"

    def pct(x: float) -> str:
        return f"{(x - 1) * 100:+.1f}%"

    return f"{pct(r.value)} [{pct(r.low)}, {pct(r.high)}]"


def _telling(tail: Sequence[str]) -> str:
    """The line of a failed build's log that says why: its last error, else its last."""
    errors = [t for t in tail if "error" in t.lower() and not t.startswith("make")]
    return (errors or list(tail) or ["no log"])[-1].strip()


def _nothing(first: Step, good: AllocatorSpec) -> str:
    r = first.ratio
    shown = f" (ratio {r.value:.3f}, [{r.low:.3f}, {r.high:.3f}])" if r is not None else ""
    head = f"no commit decided unlike good: {first.describe} against {_described(good)}"
    if first.word == "undecided":
        return f"{head} undecided after {first.blocks} blocks{shown}; {first.detail}"
    return f"{head}: {first.word}{shown}"


def _found(
    specs: Sequence[AllocatorSpec], lo: int, hi: int, skipped: set[int], steps: int, began: float
) -> Ended:
    spent = time.monotonic() - began
    maybe = [i for i in range(lo + 1, hi + 1)]
    if all(i in skipped for i in maybe[:-1]) and len(maybe) > 1:
        names = tuple(_described(specs[i]) for i in maybe)
        return Ended(
            "",
            "",
            names,
            f"the first commit unlike good is one of {', '.join(names)} (the others were skipped)",
            steps,
            spent,
        )
    spec = specs[hi]
    commit = spec.git.commit if spec.git else ""
    return Ended(
        _described(spec),
        commit,
        (),
        f"first commit decided unlike good: {_described(spec)} ({commit[:12]})",
        steps,
        spent,
    )


def _undecided(
    specs: Sequence[AllocatorSpec],
    lo: int,
    hi: int,
    skipped: set[int],
    steps: int,
    began: float,
    step: Step,
) -> Ended:
    left = [i for i in range(lo + 1, hi + 1) if i not in skipped]
    names = tuple(_described(specs[i]) for i in left[:LISTED])
    text = (
        f"undecided between {_described(specs[lo])} (like good) and {_described(specs[hi])} "
        f"(like bad): the first commit unlike good is one of {len(left)}; {step.detail}"
    )
    return Ended("", "", names, text, steps, time.monotonic() - began)


def _candidate(lo: int, hi: int, skipped: set[int]) -> int | None:
    """The midpoint, or the untried commit nearest it (a skip); None: all were skipped."""
    mid = (lo + hi) // 2
    for d in range(hi - lo):
        for i in (mid + d, mid - d):
            if lo < i < hi and i not in skipped:
                return i
    return None


@dataclass
class Levels:
    """Each decision's level: `planned` share PLANNED_SHARE of the error rate equally,
    later ones halve the rest (their sum never exceeds the error rate)."""

    error_rate: float
    planned: int
    made: int = 0

    def next(self) -> float:
        self.made += 1
        if self.made <= self.planned:
            return self.error_rate * PLANNED_SHARE / self.planned
        return self.error_rate * (1 - PLANNED_SHARE) * 0.5 ** (self.made - self.planned)


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


def _decide(
    store: Store,
    q: Question,
    specs: list[AllocatorSpec],
    number: int,
    alpha: float,
    clock: budget.Clock,
    share: Share,
    up: bool = True,
    confirm: bool = False,
) -> Generator[Event, None, Step]:
    """One decision's campaign, a block at a time until decided, its share of the
    budget spent (the default budget stretched when the forecast fits), or at
    q.max_blocks."""
    began = time.monotonic()
    notes: list[Note] = []
    req = dataclasses.replace(
        q.request,
        allocators=(),
        min_blocks=fewblock.MIN_BLOCKS,
        max_blocks=fewblock.MIN_BLOCKS,
        budget_s=0,
        seed=(q.request.seed or 1) + number + (1000 if confirm else 0),
        yes=True,
    )
    started = start.planned(store, req, Fixed(tuple(specs)), notes)
    cid, prepared = started.cid, started.prepared
    yield from notes
    rng = random.Random(cid)
    deadline = clock.deadline(share.weight, share.after)
    ticks: list[float] = []  # seconds each added block took
    last = began
    pair = len(specs) == 2
    while True:
        how = store.campaign_plan(cid)  # as the last step left it
        for event in campaign.steps(store, cid, how, Local(None), prepared.usable):
            if isinstance(event, Note):
                yield event
        values, failed = _values(store, cid, q.metric, [s.name for s in specs])
        now = time.monotonic()
        if len(values) and len(values[0]) > fewblock.MIN_BLOCKS:
            ticks.append(now - last)
        last = now
        if failed:
            word, ratio, detail = FAILED, None, failed
            break
        word, ratio, detail = _verdict(values, alpha, q.metric, up, pair)
        if word != "undecided" or (q.max_blocks and len(values[0]) >= q.max_blocks):
            break
        measured = _measured(values, ticks, now - began)
        if now + measured.block_s > deadline:
            this, rest = _needed_s(measured, alpha, share)
            more = this + rest
            was = clock.budget_s
            if not clock.room_for(more):
                break
            # this decision gets what it needs (20 % spare), the rest is for those after
            deadline = min(now + this * 1.2, clock.began + clock.budget_s)
            if clock.budget_s > was:
                yield Note(
                    "info",
                    f"the default budget stretched to {budget.minutes(clock.budget_s)}: "
                    f"the forecast needs about {budget.minutes(more)} more (--budget caps it)",
                )
        store.extend_plan(cid, _another_block(store, cid, rng))
    blocks = max(len(v) for v in values) if values else 0
    final = _measured(values, ticks, time.monotonic() - began) if values else None
    spec = specs[1] if len(specs) == 3 else specs[-1]
    if word == "undecided" and final is not None:
        detail = _more(final, alpha, share, clock)
    step = Step(
        number,
        spec.name,
        spec.git.commit if spec.git else "",
        _described(spec),
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


def _needed_s(m: budget.Measured, alpha: float, share: Share) -> tuple[float, float]:
    """Seconds from now this decision's estimate needs, and those the decisions after
    it need (inf: at this estimate no number of blocks decides it)."""
    n = budget.blocks_for(m.mean, m.sd, alpha)
    if n is None:
        return math.inf, math.inf
    this = max(n - len(m.logs), 1) * m.block_s
    start_ = share.start or m
    return this, budget.rest_s(start_, share.steps, share.left, alpha, share.confirm)


def _more(m: budget.Measured, alpha: float, share: Share, clock: budget.Clock) -> str:
    """What more blocks would decide, at the estimate so far (the start: different, or
    the same within the margin), and the budget that would let the bisect finish."""
    if len(m.logs) < 2:
        return "too few blocks completed to say what more would do"
    margin = math.log1p(stats.DEFAULT_MARGIN) if share.start is None and share.confirm else 0.0
    n = budget.blocks_for(m.mean, m.sd, alpha, margin)
    if n is None:
        return f"no number of blocks up to {budget.MOST_BLOCKS:,} would decide it at this estimate"
    this = max(n - len(m.logs), 0) * m.block_s
    text = f"at this estimate about {n} blocks would decide it (about {budget.minutes(this)} more)"
    differ = budget.blocks_for(m.mean, m.sd, alpha)
    if differ is None or differ > n:  # decided the same, the bisect would end there
        return text
    total = clock.elapsed() + sum(_needed_s(m, alpha, share))
    if not math.isfinite(total):
        return text
    return f"{text}; the bisect about {budget.minutes(total)} in all: give --budget " + (
        forecast.duration(total, budget=True)
    )


FAILED = "failed"  # a run of the step was not OK: never a number (a candidate is skipped)


def _values(
    store: Store, cid: int, metric: str, names: Sequence[str]
) -> tuple[list[list[float]], str]:
    """Each allocator's metric per block, in block order; or what failed."""
    row = analyze.stored_comparison(store, cid).rows[0]
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
    plan = store.plan(cid)
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


class _Line(Sequence[AllocatorSpec]):
    """The commits from GOOD to BAD as allocators, each made when first asked for (a
    long range is described a commit at a time, not all at once)."""

    def __init__(self, mirror: Path, repo: str, chain: list[str], name: str, q: Question) -> None:
        self.mirror, self.repo, self.chain, self.name, self.q = mirror, repo, chain, name, q
        self.made: dict[int, AllocatorSpec] = {}

    def __len__(self) -> int:
        return len(self.chain)

    @overload
    def __getitem__(self, i: int) -> AllocatorSpec: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[AllocatorSpec]: ...
    def __getitem__(self, i: int | slice) -> AllocatorSpec | Sequence[AllocatorSpec]:
        if isinstance(i, slice):
            return [self[j] for j in range(len(self))[i]]
        i = i % len(self.chain)
        if i not in self.made:
            c = self.chain[i]
            origin = Git(self.repo, c, git.describe(self.mirror, c), c, self.q.build, i)
            self.made[i] = git.spec_of(self.name, _label(origin.describe), origin, self.q.env)
        return self.made[i]


def _name(repository: str) -> str:
    base = Path(repository.rstrip("/")).name.removesuffix(".git") or "mine"
    return git.label_text(base)[:24]


def _label(describe: str) -> str:
    return git.label_text(describe)


def _described(spec: AllocatorSpec) -> str:
    return spec.git.describe if spec.git else spec.name
