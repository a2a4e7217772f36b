"""A bisect's time: its budget shared among its decisions, and forecasts from the
noise it measured.

A bisect makes a start, about ⌈log2 N⌉ steps and a confirmation. Each decision adds
blocks until decided or until its share of the time left is spent: the time left
divided in the proportion of what each decision costs. A step's statistic (the log of
C² / (GOOD · BAD)) has three runs' noise against the start's two (three times the
variance, so about three times the blocks) and three runs a block against two: a step
weighs STEP_WEIGHT starts. What a decision leaves unspent goes to those after it.

A decision undecided at its deadline goes on when the blocks its estimate needs, and the
forecast of the decisions after it, fit in what the budget has left (it borrows from
their shares); the default budget (DEFAULT_BUDGET_S) stretches to fit them, up to
STRETCH_MOST_S, when the data say a small change needs more. A budget the user gave
never stretches. The intervals hold at any stop (stats.looks, the planned looks'
repeated intervals), so where a decision stops never changes its level.

Forecast (`blocks_for`): stats.blocks_to_decide, the rule every forecast applies,
without its power term: the first planned look n whose interval, at a mean log ratio
d and a spread sd, would exclude 0 — looks.critical(n) · sd / √n < |d| — or lie
within the margin.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from allocmark import stats, units
from allocmark.stats import looks

DEFAULT_BUDGET_S = 600.0
STRETCH_MOST_S = 1800.0  # the default budget stretches to at most this
STEP_WEIGHT = 4.5  # a step's cost in starts: 3 × the blocks, 3/2 × the runs a block
CONFIRM_WEIGHT = 1.0  # the culprit against its parent: a pair, as the start
SMALL = 0.05  # the change the forecast quotes beside this bisect's own


def steps_left(lo: int, hi: int) -> int:
    """The steps a bisection of the commits lo+1..hi has still to make (no skips)."""
    return math.ceil(math.log2(hi - lo)) if hi - lo > 1 else 0


def blocks_for(
    effect: float, sd: float, alpha: float, margin: float = 0.0, plain: bool = True
) -> int | None:
    """The fewest blocks that decide a mean log ratio `effect` at a spread `sd` at
    level alpha (a two-sided interval, as _verdict's): the interval clear of 0, or (a
    `margin`, in logs) wholly within ±margin. `plain`: log ratios that do not tie
    (looks.plain), read at the planned looks; else the Bayes-factor sequence's share.
    None: none up to the last look, or stats.MOST_BLOCKS."""
    if math.isnan(sd) or (effect == 0 and abs(effect) >= margin):
        return None
    target = max(abs(effect), margin - abs(effect))
    return stats.blocks_to_decide(sd, target, alpha, plain, 0)


def most_blocks(plain: bool) -> int:
    """The most blocks a forecast may name (blocks_for's None beyond)."""
    return looks.LOOKS[-1] if plain else stats.MOST_BLOCKS


def spread(logs: Sequence[float]) -> float:
    """The sd of a block's statistic (nan below two blocks)."""
    return statistics.stdev(logs) if len(logs) >= 2 else math.nan


@dataclass(frozen=True)
class Measured:
    """What a decision measured: its statistic per block and the seconds a block took."""

    logs: tuple[float, ...]
    block_s: float  # median seconds a block added after the first took (nan: unknown)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.logs) if self.logs else math.nan

    @property
    def sd(self) -> float:
        return spread(self.logs)


@dataclass
class Clock:
    """The bisect's budget (0: none) and when each decision must stop."""

    budget_s: float
    stretch: bool  # the default budget: it may stretch up to STRETCH_MOST_S
    began: float = field(default_factory=time.monotonic)

    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def left(self) -> float:
        return self.budget_s - self.elapsed() if self.budget_s else math.inf

    def deadline(self, weight: float, after: float) -> float:
        """The monotonic time this decision (of `weight`) stops by, with decisions of
        `after` weight in all still to come; inf without a budget."""
        if not self.budget_s:
            return math.inf
        return time.monotonic() + max(self.left(), 0.0) * weight / (weight + after)

    def room_for(self, more_s: float) -> bool:
        """Do `more_s` seconds from now (20 % spare) fit the budget? The default budget
        is stretched to fit them when they fit within STRETCH_MOST_S."""
        want = self.elapsed() + more_s * 1.2
        if not self.budget_s or want <= self.budget_s:
            return True
        if not self.stretch or want > STRETCH_MOST_S:
            return False
        self.budget_s = want
        return True


@dataclass(frozen=True)
class Outlook:
    """Before a step: the blocks and seconds it is expected to take, from the noise
    measured so far, and the share of the budget it has."""

    number: int
    blocks: int | None  # None: at this noise no number of blocks would decide it
    seconds: float
    share_s: float  # inf: no budget
    sd: float  # the step statistic's spread a block, as measured (or from the start)
    measured: bool  # sd measured on earlier steps (else √3 × the start's)


def step_noise(start: Measured, steps: Sequence[Measured]) -> tuple[float, bool]:
    """The step statistic's sd: pooled over the steps decided so far, else √3 times
    the start's (var(2c - g - b) = 6σ² against var(b - g) = 2σ²)."""
    logs = [x - s.mean for s in steps for x in s.logs]
    n = sum(len(s.logs) - 1 for s in steps if len(s.logs) > 1)
    if n >= 2:
        return math.sqrt(sum(x * x for x in logs) / n), True
    return math.sqrt(3) * start.sd, False


def effect(start: Measured, steps: Sequence[Measured]) -> float:
    """|log(BAD/GOOD)|: the start's mean and each step's |mean| (C sits that far from
    the middle under either answer), weighted by their blocks. The start stops when its
    interval first clears 1, when its estimate tends to run high; the steps temper it."""
    parts = [(abs(start.mean), len(start.logs))] + [(abs(s.mean), len(s.logs)) for s in steps]
    n = sum(k for _, k in parts)
    return sum(m * k for m, k in parts) / n if n else math.nan


def step_block_s(start: Measured, steps: Sequence[Measured]) -> float:
    """Seconds a step's block takes: measured on steps, else 3/2 of the start's."""
    known = [s.block_s for s in steps if not math.isnan(s.block_s)]
    return statistics.median(known) if known else 1.5 * start.block_s


def rest_s(
    start: Measured, steps: Sequence[Measured], left: int, alpha: float, confirm: bool
) -> float:
    """The forecast seconds of `left` more steps and (`confirm`) the confirmation
    (inf: at this noise no number of blocks decides them)."""
    sd, _ = step_noise(start, steps)
    d = effect(start, steps)
    plain = looks.plain(start.logs)
    step = blocks_for(d, sd, alpha, plain=plain) if left else 0
    pair = blocks_for(d, start.sd, alpha, plain=plain) if confirm else 0
    if step is None or pair is None:
        return math.inf
    return left * step * step_block_s(start, steps) + pair * start.block_s


def outlook(
    number: int, start: Measured, steps: Sequence[Measured], alpha: float, share_s: float
) -> Outlook:
    sd, measured = step_noise(start, steps)
    blocks = blocks_for(effect(start, steps), sd, alpha, plain=looks.plain(start.logs))
    seconds = blocks * step_block_s(start, steps) if blocks is not None else math.inf
    return Outlook(number, blocks, seconds, share_s, sd, measured)


def minutes(seconds: float) -> str:
    """A forecast's time as every forecast says it (inf: "no time")."""
    return units.duration(seconds) if math.isfinite(seconds) else "no time"


def noise_text(start: Measured, alpha: float) -> str:
    """The noise the start measured and what it means here: the blocks (and time) a
    SMALL change would need, and those of this change."""
    sd = start.sd
    plain = looks.plain(start.logs)
    small = blocks_for(math.log1p(SMALL), sd, alpha, plain=plain)
    this = blocks_for(start.mean, sd, alpha, plain=plain)
    said = (
        f"a {SMALL:.0%} change needs about {small} blocks ({minutes(small * start.block_s)})"
        if small is not None
        else f"no number of blocks decides a {SMALL:.0%} change"
    )
    return (
        f"noise: a block's log ratio varies by {sd:.3f} (sd of the start's "
        f"{len(start.logs)} blocks, {start.block_s:.2f} s a block); here {said}"
        + (f", this ×{math.exp(start.mean):.3g} about {this} blocks" if this is not None else "")
    )
