"""`allocmark bisect`: the commit that changed a metric, between a good and a bad revision.

The commits from GOOD to BAD along BAD's first-parent line (allocators/git.py) are
searched as `git bisect --first-parent` searches them, each step a campaign of its
own in the database (every run stored, reported like any campaign):

1. **Start**: GOOD and BAD in paired blocks, until BAD/GOOD is decided (the paired
   anytime-valid intervals of every verdict, stats.paired_ratio). Same within the
   margin, or undecided at the most blocks: "no commit decided unlike good".
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

Error rate. A wrong step (an interval on the wrong side) is the only way to a wrong
commit; each decision is made at its own level and their sum is the error rate
asked for (5 %): the first `planned` decisions (the start and ⌈log2 N⌉ + 1 steps)
share 90 % of it equally, later ones (after skips) halve the rest each time. The
intervals are anytime-valid, so adding blocks until decided keeps each level.

With more than one change in the metric between GOOD and BAD, the search ends at
one commit where it crosses the middle, as `git bisect` ends at one transition.
"""

from __future__ import annotations

import dataclasses
import math
import random
import time
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import overload

from allocmark import stats
from allocmark.allocators import git
from allocmark.answer import analyze
from allocmark.errors import UserError
from allocmark.executors.local import Local
from allocmark.model import AllocatorSpec, Git, GitBuild, Note, Prepared, Request, RunSpec
from allocmark.run import campaign, start
from allocmark.stats import fewblock
from allocmark.store import Store

# --metric: the report's metric groups, and the words a user types for the two main ones.
METRICS = {
    "time": "time_s",
    "peak_rss": "peak_rss_kib",
    "peak-rss": "peak_rss_kib",
    **{m: m for m in analyze.METRICS},
}
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
    max_blocks: int = 30  # per step
    name: str = ""  # the allocators' name prefix (default: the repository's)
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Started:
    commits: int  # N: the commits after GOOD up to BAD, one of which is the first unlike good
    bound: int  # ⌈log2 N⌉ + 2: the most steps a bisect with one skip needs
    good: str  # describe
    bad: str
    metric: str


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


Event = Note | Started | Step | Ended
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
    began = time.monotonic()
    repo = git.normalized(q.repository)
    mirror = git.refreshed(repo)
    chain = git.line(mirror, git.resolve(mirror, q.good), git.resolve(mirror, q.bad))
    if len(chain) < 2:
        raise UserError(f"{q.good} and {q.bad} are the same commit: nothing to bisect")
    name = q.name or _name(repo)
    specs = _Line(mirror, repo, chain, name, q)
    n = len(chain) - 1
    levels = Levels(q.error_rate, 2 + math.ceil(math.log2(n)) if n > 1 else 2)
    yield Started(
        n,
        math.ceil(math.log2(n)) + 2 if n > 1 else 2,
        _described(specs[0]),
        _described(specs[-1]),
        q.metric,
    )
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
    first = yield from _decide(store, q, [good, bad], 0, levels.next())
    if first.word == FAILED:
        raise UserError(
            f"GOOD or BAD fails its runs ({first.detail}): `allocmark report --db "
            f"{store.path}` shows how"
        )
    if not first.word.startswith("differs"):
        yield Ended("", "", (), _nothing(first, specs[0]), 0, time.monotonic() - began)
        return
    up = first.ratio is not None and first.ratio.value > 1  # BAD's values are above GOOD's
    lo, hi = 0, len(chain) - 1  # chain[lo] decided like good, chain[hi] like bad
    skipped: set[int] = set()
    steps = 0
    while hi - lo > 1:
        i = _candidate(lo, hi, skipped)
        if i is None:
            break
        steps += 1
        cand = specs[i]
        notes = []
        try:
            start.revision(cand, notes)
        except git.BuildFailed as e:
            skipped.add(i)
            yield from notes
            yield Step(
                steps,
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
            continue
        yield from notes
        step = yield from _decide(store, q, [good, cand, bad], steps, levels.next(), up)
        if step.word == FAILED:
            skipped.add(i)  # its runs failed: no number, so no side either
        elif step.word == "like good":
            lo = i
        elif step.word == "like bad":
            hi = i
        else:
            yield _undecided(specs, lo, hi, skipped, steps, began, step)
            return
    yield _found(specs, lo, hi, skipped, steps, began)


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


def _decide(
    store: Store,
    q: Question,
    specs: list[AllocatorSpec],
    number: int,
    alpha: float,
    up: bool = True,
) -> Generator[Event, None, Step]:
    """One step's campaign, a block at a time until decided or at q.max_blocks."""
    began = time.monotonic()
    notes: list[Note] = []
    req = dataclasses.replace(
        q.request,
        allocators=(),
        min_blocks=fewblock.MIN_BLOCKS,
        max_blocks=fewblock.MIN_BLOCKS,
        budget_s=0,
        seed=(q.request.seed or 1) + number,
        yes=True,
    )
    started = start.planned(store, req, Fixed(tuple(specs)), notes)
    cid, prepared = started.cid, started.prepared
    yield from notes
    rng = random.Random(cid)
    while True:
        how = store.campaign_plan(cid)  # as the last step left it
        for event in campaign.steps(store, cid, how, Local(None), prepared.usable):
            if isinstance(event, Note):
                yield event
        values, failed = _values(store, cid, q.metric, [s.name for s in specs])
        if failed:
            word, ratio, detail = FAILED, None, failed
            break
        word, ratio, detail = _verdict(values, alpha, q.metric, up, len(specs) == 2)
        blocks = len(values[0])
        if word != "undecided" or blocks >= q.max_blocks:
            break
        store.extend_plan(cid, _another_block(store, cid, rng))
    blocks = max(len(v) for v in values) if values else 0
    spec = specs[1] if len(specs) == 3 else specs[-1]
    if word == "undecided":
        detail = _more(values, alpha, len(specs) == 2)
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
    )
    yield step
    return step


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


def _more(values: list[list[float]], alpha: float, start_: bool) -> str:
    """What more blocks would decide, at the estimate so far: the fewest blocks whose
    Bayes-factor interval (fewblock) at this mean and spread would exclude the middle."""
    if len(values[0]) < 2:
        return "too few blocks completed to say what more would do"
    if start_:
        logs = [math.log(b) - math.log(g) for g, b in zip(*values, strict=True)]
    else:
        logs = [
            2 * math.log(c) - math.log(g) - math.log(b) for g, c, b in zip(*values, strict=True)
        ]
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    share = alpha / stats.SPLIT

    def decides(n: int) -> bool:
        return fewblock.t_star(n, share) * sd / math.sqrt(n) < abs(mean)

    if mean == 0 or not decides(MOST_BLOCKS):
        return f"no number of blocks up to {MOST_BLOCKS:,} would decide it at this estimate"
    low, high = len(logs), MOST_BLOCKS  # t*(n)/sqrt(n) falls with n: the first n that decides
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if decides(mid) else (mid, high)
    return f"at this estimate about {high} blocks would decide it (--max-blocks)"


MOST_BLOCKS = 1_000_000


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
