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
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import overload

from allocmark import stats
from allocmark.allocators import git, prepare
from allocmark.errors import UserError
from allocmark.model import AllocatorSpec, Git
from allocmark.request import Note
from allocmark.run import runas
from allocmark.store import Store
from allocmark.verbs import bisect_budget as budget
from allocmark.verbs.bisect_step import (
    FAILED,
    Question as Question,
    Share,
    Step as Step,
    decide,
    described,
)

WORDS = {"time_s": "time", "peak_rss_kib": "peak RSS"}  # a metric as a sentence says it
PLANNED_SHARE = 0.9  # of the error rate, for the decisions a bisect without skips makes


@dataclass(frozen=True)
class Started:
    commits: int  # N: the commits after GOOD up to BAD, one of which is the first unlike good
    bound: int  # ⌈log2 N⌉ + 2: the most steps a bisect with one skip needs
    good: str  # describe
    bad: str
    metric: str
    budget_s: float  # 0: none


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
    yield Started(n, bound, described(specs[0]), described(specs[-1]), q.metric, q.budget_s)
    if q.request.dry_run:  # the revisions resolved and counted: nothing built or run
        return
    store = Store(q.request.db)
    good, bad = specs[0], specs[-1]
    for spec, which in ((good, "GOOD"), (bad, "BAD")):
        notes: list[Note] = []
        try:
            with runas.campaign():  # a build is untrusted code: an identity of its own
                prepare.revision(spec, _told(notes))
        except git.BuildFailed as e:
            raise UserError(f"{which} must build: {e}") from None
        yield from notes
    after = budget.steps_left(0, n) * budget.STEP_WEIGHT + budget.CONFIRM_WEIGHT
    first = yield from decide(
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
            prepare.revision(cand, _told(notes))
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
        step = yield from decide(store, q, [good, cand, bad], number, alpha, clock, share, up)
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
    check = yield from decide(
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
        described(cand),
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
    shown = f"{metric} {_change(r)} against its parent {described(parent)}" if r else ""
    ok = check.word.startswith("differs") and r is not None and (r.value > 1) == up
    if ok:
        text = f"{found.text}; confirmed: {shown} in {check.blocks} blocks"
    else:
        why = check.word if check.word != "undecided" else f"undecided in {check.blocks} blocks"
        text = f"{found.text}; not confirmed: against its parent {described(parent)} {why}" + (
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
    head = f"no commit decided unlike good: {first.describe} against {described(good)}"
    if first.word == "undecided":
        return f"{head} undecided after {first.blocks} blocks{shown}; {first.detail}"
    return f"{head}: {first.word}{shown}"


def _found(
    specs: Sequence[AllocatorSpec], lo: int, hi: int, skipped: set[int], steps: int, began: float
) -> Ended:
    spent = time.monotonic() - began
    maybe = [i for i in range(lo + 1, hi + 1)]
    if all(i in skipped for i in maybe[:-1]) and len(maybe) > 1:
        names = tuple(described(specs[i]) for i in maybe)
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
        described(spec),
        commit,
        (),
        f"first commit decided unlike good: {described(spec)} ({commit[:12]})",
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
    names = tuple(described(specs[i]) for i in left[:LISTED])
    text = (
        f"undecided between {described(specs[lo])} (like good) and {described(specs[hi])} "
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


def _told(notes: list[Note]) -> prepare.Say:
    """A build's messages, as the notes a step yields."""
    return lambda m: notes.append(Note("info", m))
