"""Ratios of two allocators' values and their intervals: the paired ratio of blocks
(the exact signed-rank and Student's intervals of a fixed number of blocks; for
blocks added until decided, the planned looks' group-sequential t test, or the
anytime-valid sequences where the log ratios tie; docs/statistics.md), and
the unpaired ratio of two summaries. Timings are compared on a log scale: ratios are
what matter, and timing noise is closer to multiplicative than additive."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from allocmark.stats import signedrank, student
from allocmark.stats.summary import ALPHA, Summary, mean_sd, summarize, t_power, t_quantile

# Alpha is split by Bonferroni among the tests whose intervals are intersected
# (docs/statistics.md, "How alpha is split"): a fixed number of blocks, the exact
# signed-rank interval and Student's (fewblock); blocks added until decided whose log
# ratios tie (looks.plain fails: a quantized metric), the betting sequence, the
# Bayes-factor sequence (fewblock) and, for a row the budget ended undecided, the
# exact signed-rank interval at the block it ended. Blocks added until decided whose
# log ratios do not tie: the planned looks' test (looks.py) alone, at all of alpha.
FIXED_SHARES = 2


SPLIT = 3


# An interval whose ends are further apart than this factor bounds nothing a person
# can act on ("1.78× slower [0.05–68.86]"): it is said as too few blocks instead.
UNBOUNDED_SPAN = 10.0


def bounded(low: float, high: float) -> bool:
    """Do an interval's ends bound the ratio usefully (finite, within UNBOUNDED_SPAN)?"""
    return 0 < low <= high < math.inf and high <= low * UNBOUNDED_SPAN


@dataclass(frozen=True)
class Ratio:
    """mean(a) / mean(b) with its 95 % interval and a significance verdict."""

    value: float
    low: float
    high: float
    p: float  # Student's (paired) or Welch's t-test on log values; 1.0 when it cannot be done
    se: float = math.nan  # standard error of the log ratio
    df: float = 0.0  # its degrees of freedom (0: no test possible)
    paired: bool = False  # from per-block log ratios rather than two independent samples
    alpha: float = ALPHA  # the interval is at 1 - alpha (smaller for a family of cells)
    logs: tuple[float, ...] = ()  # paired: the blocks' log ratios (an interval at another alpha)
    sequential: bool = False  # paired: blocks added by looking (looks.py, or anytime-valid)
    final: bool = False  # sequential, at the block the budget ended: a last look there

    @property
    def significant(self) -> bool:
        return self.p < self.alpha

    @property
    def half_width(self) -> float:
        """Half the interval's width on the log scale, as a relative width (0.03 = ±3 %);
        inf when there is no finite interval (too few blocks for the exact test)."""
        if self.df <= 0 or not 0 < self.low <= self.high < math.inf:
            return math.inf
        return math.exp((math.log(self.high) - math.log(self.low)) / 2) - 1

    @property
    def blocks_needed(self) -> int:
        """Blocks before any verdict but undecided is possible: the few-block tests'
        least (fewblock.MIN_BLOCKS, 4: Student's interval at alpha/FIXED_SHARES, the
        Bayes-factor sequence at alpha/SPLIT). Those verdicts need blocks that agree in
        size; the tests on signs alone need more (2 · 2^-n below their share)."""
        from allocmark.stats import fewblock, looks

        if not self.sequential:
            return fewblock.MIN_BLOCKS
        if looks.plain(self.logs):
            return looks.LOOKS[0]
        return fewblock.blocks_needed(self.alpha / SPLIT)

    @property
    def detectable(self) -> float:
        """The smallest relative difference this data would detect 80 % of the time:
        exp((q + t.80) * SE) - 1, q the multiple of SE the verdict's own test needs (a
        two-sided t-test at alpha; blocks added until decided, the last planned look's
        critical t, or the Bayes-factor sequence's t* where the log ratios tie)."""
        if self.df <= 0 or math.isnan(self.se):
            return math.inf
        return math.exp((self._multiple() + t_power(self.df)) * self.se) - 1

    def _multiple(self) -> float:
        """The |t| that decides these blocks at alpha (detectable's q)."""
        from allocmark.stats import fewblock, looks

        n = len(self.logs)
        if self.sequential and n >= looks.LOOKS[0]:
            if looks.plain(self.logs):  # all n blocks' SE stands in for the last look's
                if self.final:
                    return looks.critical(n, self.alpha, final=True)
                return looks.critical(looks.looks_in(n)[-1], self.alpha)
            star = fewblock.t_star(n, self.alpha / SPLIT)
            if math.isfinite(star):
                return star
        return t_quantile(self.df, self.alpha)


def inv(x: float) -> float:
    """1/x for a ratio's bound, where an interval too wide to bound is (0, inf)."""
    return math.inf if x == 0 else 1 / x


def inverted(value: float, low: float, high: float) -> tuple[float, float, float]:
    """A ratio and its interval turned over (a speed-up from a time ratio)."""
    return 1 / value, inv(high), inv(low)


def paired_ratio(
    a: Sequence[float], b: Sequence[float], sequential: bool = False, final: bool = False
) -> Ratio | None:
    """a[i]/b[i] over blocks i (values > 0), from the blocks' log ratios: the
    Hodges–Lehmann estimate with the intersection of the intervals alpha is split
    among (FIXED_SHARES, SPLIT) and the matching p. Pairing removes what a block shares
    (the machine's state at that moment); the random order inside each block makes a
    log ratio as likely positive as negative when the two do not differ, whatever the
    noise, which is all the exact signed-rank test (signedrank) and the betting
    sequence assume; Student's interval and the Bayes-factor sequence (fewblock) also
    assume normal noise, and decide in a few blocks what those cannot before 6-11.
    se and df stay those of the mean log ratio, for the power estimates
    (`detectable`). `sequential`: blocks were added until the interval decided, so the
    interval is that of the planned looks (looks.py; blocks in the order they ran) or,
    where the log ratios tie, the anytime-valid ones; `final`: the budget ended these
    blocks undecided, so their last block is a final look (looks.levels) or, where they
    tie, the exact interval at alpha/SPLIT narrows the sequences.
    None without a pair or with a value <= 0."""
    if len(a) != len(b):
        raise ValueError("paired_ratio needs one a and one b per block")
    if not a or min(a) <= 0 or min(b) <= 0:
        return None
    logs = _logs(a, b)
    n = len(logs)
    mean, sd = mean_sd(logs)
    if n < 2:
        point = math.exp(mean)
        return Ratio(point, point, point, 1.0, paired=True, logs=logs)
    if sequential:
        low, high = paired_bounds(logs, ALPHA, True, final)
        centre = min(max(signedrank.hodges_lehmann(logs), low), high)
        return Ratio(
            math.exp(centre),
            math.exp(low),
            math.exp(high),
            _split_p(logs, final),
            sd / math.sqrt(n),
            n - 1,
            True,
            logs=logs,
            sequential=True,
            final=final,
        )
    low, high = paired_bounds(logs, ALPHA, False)
    centre = min(max(signedrank.hodges_lehmann(logs), low), high)
    return Ratio(
        math.exp(centre),
        math.exp(low),
        math.exp(high),
        _fixed_p(logs),
        sd / math.sqrt(n),
        n - 1,
        True,
        logs=logs,
    )


@functools.lru_cache(maxsize=8192)
def paired_bounds(
    logs: tuple[float, ...], alpha: float, sequential: bool, final: bool = False
) -> tuple[float, float]:
    """The intersection of the intervals alpha is split among (FIXED_SHARES, SPLIT);
    blocks added until decided whose log ratios do not tie: the planned looks' one.
    Intervals that do not meet (one of them errs: rarer than alpha) leave the first,
    which assumes the least. Kept: a report judges the same ratios as a family in
    several places (the matrix, the answers), each at Holm's levels."""
    from allocmark.stats import fewblock

    if not sequential:
        share = alpha / FIXED_SHARES
        _, low, high = signedrank.interval(logs, share)
        return _meet((low, high), fewblock.student_interval(logs, share))
    from allocmark.stats import looks, sequential as cs

    if looks.plain(logs):
        return looks.interval(logs, alpha, final)
    share = alpha / SPLIT
    bounds = _meet(cs.interval(logs, share), fewblock.sequence(logs, share))
    if final:
        _, exact_low, exact_high = signedrank.interval(logs, share)
        bounds = _meet(bounds, (exact_low, exact_high))
    return bounds


MOST_BLOCKS = 100_000  # a forecast past this (or past the last look) is out of reach


def blocks_to_decide(
    sd: float, target: float, alpha: float, plain: bool, at_least: int, power: float = 0.0
) -> int | None:
    """The one rule for how many blocks decide a ratio whose blocks are added until
    decided: the fewest n >= at_least whose half-width at level alpha, plus `power`
    (a normal quantile, for "likely"), times sd / √n is at most `target` (a log
    distance). `plain` (log ratios that do not tie, looks.plain): n is a planned look
    and its half-width the looks' critical t; else the Bayes-factor sequence's at its
    share alpha/SPLIT. None past the last look, or past MOST_BLOCKS."""
    from allocmark.stats import fewblock, looks

    if plain:
        sd = max(sd, looks.FLOOR)  # as the looks' own intervals floor it

    def enough(n: int) -> bool:
        q = looks.critical(n, alpha) if plain else fewblock.t_star(n, alpha / SPLIT)
        return (q + power) * sd / math.sqrt(n) <= target

    if plain:
        return next((n for n in looks.LOOKS if n >= at_least and enough(n)), None)
    low = high = max(at_least, fewblock.MIN_BLOCKS)
    while not enough(high):  # doubling, then bisection: the half-width falls with n
        if high >= MOST_BLOCKS:
            return None
        low, high = high, min(2 * high, MOST_BLOCKS)
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid + 1, high)
    return high


def _meet(first: tuple[float, float], other: tuple[float, float]) -> tuple[float, float]:
    """Two intervals intersected; `first` alone when they do not meet."""
    low, high = max(first[0], other[0]), min(first[1], other[1])
    return (low, high) if low <= high else first


def _split_p(logs: Sequence[float], final: bool) -> float:
    """The p that matches paired_bounds: below alpha exactly when one of the
    intervals at alpha/SPLIT excludes 0 (Bonferroni over the tests)."""
    from allocmark.stats import fewblock, looks, sequential as cs

    if looks.plain(logs):
        return looks.p_value(logs, final)
    p = min(cs.p_value(logs), fewblock.sequence_p(logs))
    if final:
        p = min(p, signedrank.p_value(logs))
    return min(1.0, SPLIT * p)


def _fixed_p(logs: Sequence[float]) -> float:
    """The p that matches paired_bounds for a fixed number of blocks."""
    from allocmark.stats import fewblock

    return min(1.0, FIXED_SHARES * min(signedrank.p_value(logs), fewblock.student_p(logs)))


def _logs(a: Sequence[float], b: Sequence[float]) -> tuple[float, ...]:
    """The blocks' log ratios as log a - log b: exactly antisymmetric, so that a block
    and its mirror (a/b and b/a) tie in size, as the signed-rank test counts them."""
    return tuple(math.log(x) - math.log(y) for x, y in zip(a, b, strict=True))


def ratio_of_ratios(new: Ratio, old: Ratio) -> Ratio | None:
    """new / old for two independent ratios with standard errors (a control: each
    allocator's ratio to the same baseline, in two campaigns): the log difference with
    Welch's standard error and Welch–Satterthwaite degrees of freedom."""
    if new.df <= 0 or old.df <= 0 or math.isnan(new.se) or math.isnan(old.se):
        return None
    diff = math.log(new.value) - math.log(old.value)
    va, vb = new.se**2, old.se**2
    se = math.sqrt(va + vb)
    point = math.exp(diff)
    if se == 0:
        return Ratio(point, point, point, 0.0 if diff else 1.0, 0.0, 1.0)
    df = (va + vb) ** 2 / (va**2 / new.df + vb**2 / old.df)
    half = t_quantile(df) * se
    p = 2 * student.tail(df, diff / se)
    return Ratio(point, math.exp(diff - half), math.exp(diff + half), p, se, df)


def ratio(a: Sequence[float], b: Sequence[float]) -> Ratio | None:
    """Ratio of geometric means of a and b (all values > 0): see ratio_of."""
    if not a or not b:
        return None
    return ratio_of(summarize(a), summarize(b))


def ratio_of(a: Summary, b: Summary) -> Ratio | None:
    """Ratio of geometric means of two samples (all values > 0), compared on logs:
    the interval is exp(Δ ± t·SE) with Welch's standard error and Welch–
    Satterthwaite degrees of freedom, and p is Welch's two-sided t-test. None
    when a sample has a value <= 0."""
    if math.isnan(a.log_mean) or math.isnan(b.log_mean):
        return None
    diff = a.log_mean - b.log_mean
    va, vb = a.log_sd**2 / a.n, b.log_sd**2 / b.n
    se = math.sqrt(va + vb)
    point = math.exp(diff)
    if a.n < 2 or b.n < 2:  # one run: nothing to test with
        return Ratio(point, point, point, 1.0)
    if se == 0:  # no spread at all: any difference is certain
        return Ratio(point, point, point, 0.0 if diff else 1.0, 0.0, a.n + b.n - 2)
    df = (va + vb) ** 2 / (va**2 / (a.n - 1) + vb**2 / (b.n - 1))
    t = t_quantile(df)
    p = 2 * student.tail(df, diff / se)
    return Ratio(point, math.exp(diff - t * se), math.exp(diff + t * se), p, se, df)
