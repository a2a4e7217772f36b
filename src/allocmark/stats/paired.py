"""Summary statistics. Each function names its method.

Conventions: intervals are 95 %; timings are compared on a log scale (ratios
are what matter, and timing noise is closer to multiplicative than additive).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from allocmark.stats import signedrank, student

LEVEL = 0.95
ALPHA = 1 - LEVEL
DEFAULT_MARGIN = 0.03  # ±3 %: the default precision target and equivalence margin
# Alpha is split by Bonferroni among the tests whose intervals are intersected
# (docs/statistics.md, "How alpha is split"): a fixed number of blocks, the exact
# signed-rank interval and Student's (fewblock); blocks added until decided, the
# betting sequence, the Bayes-factor sequence (fewblock) and, for a row the budget
# ended undecided, the exact signed-rank interval at the block it ended.
FIXED_SHARES = 2
SPLIT = 3
MAD_LIMIT = 3.5  # modified z-score above which a value is an outlier (Iglewicz & Hoaglin)


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    stdev: float  # sample standard deviation (n-1); 0 for a single value
    minimum: float
    maximum: float
    ci_low: float  # 95 % interval of the mean, Student t; equal to the mean when n < 2
    ci_high: float
    outliers: int  # values flagged by the MAD rule
    log_mean: float = math.nan  # mean and sd of the logs, for ratios (nan if a value <= 0)
    log_sd: float = math.nan

    @property
    def half_range_rel(self) -> float:
        """Half the min..max range relative to the median."""
        return (self.maximum - self.minimum) / 2 / self.median if self.median else 0.0

    @property
    def ci_rel(self) -> float:
        """Half-width of the 95 % interval relative to the mean (inf when n < 2)."""
        if self.n < 2:
            return math.inf
        return (self.ci_high - self.ci_low) / 2 / abs(self.mean) if self.mean else 0.0


# Below this many values plain Python is faster than numpy's per-call cost (most
# cells hold a handful of runs); above it numpy is (a report of 100,000 runs has
# cells of 100). Both compute the same statistics.
VECTOR_MIN = 24


def summarize(values: Sequence[float]) -> Summary:
    """n, median, mean, σ, min, max, the Student-t 95 % interval of the mean and the
    number of MAD outliers."""
    if not values:
        raise ValueError("summarize() needs at least one value")
    n = len(values)
    return _summarize_rows([values], n)[0] if n >= VECTOR_MIN else _summarize_list(values)


def _summarize_list(values: Sequence[float]) -> Summary:
    xs = sorted(values)
    n = len(xs)
    mean, sd = _mean_sd(xs)
    low, high = t_interval(mean, sd, n)
    med = signedrank.median_sorted(xs)
    log_mean, log_sd = _mean_sd([math.log(x) for x in xs]) if xs[0] > 0 else (math.nan, math.nan)
    return Summary(
        n=n,
        median=med,
        mean=mean,
        stdev=sd,
        minimum=xs[0],
        maximum=xs[-1],
        ci_low=low,
        ci_high=high,
        outliers=sum(_mad_flags(xs, med)),
        log_mean=log_mean,
        log_sd=log_sd,
    )


def summarize_many(samples: Sequence[Sequence[float]]) -> list[Summary]:
    """summarize() of each sample; the samples of one length (VECTOR_MIN or more) in
    one numpy pass over a 2-D array: a report summarises thousands of cells."""
    out: list[Summary | None] = [None] * len(samples)
    by_length: dict[int, list[int]] = {}
    for i, sample in enumerate(samples):
        if len(sample) >= VECTOR_MIN:
            by_length.setdefault(len(sample), []).append(i)
        else:
            out[i] = summarize(sample)
    for n, where in by_length.items():
        rows = _summarize_rows([samples[i] for i in where], n)
        for i, summary in zip(where, rows, strict=True):
            out[i] = summary
    return [s for s in out if s is not None]


def _summarize_rows(samples: Sequence[Sequence[float]], n: int) -> list[Summary]:
    """The summary of each row of an n-column array (numpy's mean/std/median cost tens of
    µs a call in argument handling: sort once, then whole-array operations)."""
    import numpy as np

    xs = np.sort(np.asarray(samples, dtype=float), axis=1)
    mean, sd = rows_mean_sd(xs)
    half = _t(n - 1) * sd / math.sqrt(n)
    mid = n // 2
    med = xs[:, mid] if n % 2 else (xs[:, mid - 1] + xs[:, mid]) / 2
    dev = np.abs(xs - med[:, None])
    sorted_dev = np.sort(dev, axis=1)
    mad = sorted_dev[:, mid] if n % 2 else (sorted_dev[:, mid - 1] + sorted_dev[:, mid]) / 2
    outliers = np.where(
        mad > 0, np.count_nonzero(dev > (MAD_LIMIT * mad / 0.6745)[:, None], axis=1), 0
    )
    positive = xs[:, 0] > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        log_mean, log_sd = rows_mean_sd(np.log(np.where(positive[:, None], xs, 1.0)))
    columns = zip(
        mean.tolist(),
        sd.tolist(),
        half.tolist(),
        med.tolist(),
        xs[:, 0].tolist(),
        xs[:, -1].tolist(),
        outliers.tolist(),
        log_mean.tolist(),
        log_sd.tolist(),
        positive.tolist(),
        strict=True,
    )
    return [
        Summary(
            n=n,
            median=md,
            mean=m,
            stdev=sd_,
            minimum=lo,
            maximum=hi,
            ci_low=m - h,
            ci_high=m + h,
            outliers=int(o),
            log_mean=lm if pos else math.nan,
            log_sd=ls if pos else math.nan,
        )
        for m, sd_, h, md, lo, hi, o, lm, ls, pos in columns
    ]


def rows_mean_sd(xs: Any) -> tuple[Any, Any]:
    import numpy as np

    n = xs.shape[1]
    mean = xs.sum(axis=1) / n
    d = xs - mean[:, None]
    return mean, np.sqrt(np.einsum("ij,ij->i", d, d) / (n - 1))


def _mean_sd(xs: Sequence[float]) -> tuple[float, float]:
    """Two-pass mean and sample standard deviation (stable without fsum's cost)."""
    n = len(xs)
    mean = sum(xs) / n
    if n < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((x - mean) * (x - mean) for x in xs) / (n - 1))


def _t(df: float, alpha: float = ALPHA) -> float:
    """The 1 - alpha/2 quantile of Student's t with df degrees of freedom (97.5 %)."""
    return student.quantile(df, 1 - alpha / 2)


def _t_power(df: float) -> float:
    """The 80 % quantile of Student's t: the power term of a detectable difference."""
    return student.quantile(df, 0.80)


def t_interval(mean: float, sd: float, n: int) -> tuple[float, float]:
    """Student-t 95 % interval of a mean: mean ± t(0.975, n-1) · sd / √n."""
    if n < 2:
        return mean, mean
    half = _t(n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


def mad_outliers(values: Sequence[float]) -> list[bool]:
    """Modified z-score rule: |0.6745 (x - median) / MAD| > 3.5 flags an outlier.
    With MAD = 0 nothing is flagged (over half the values are equal)."""
    return _mad_flags(values, signedrank.median_sorted(sorted(values)))


def _mad_flags(values: Sequence[float], med: float) -> list[bool]:
    mad = signedrank.median_sorted(sorted(abs(v - med) for v in values))
    if mad == 0:
        return [False] * len(values)
    return [abs(0.6745 * (v - med) / mad) > MAD_LIMIT for v in values]


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
    sequential: bool = False  # paired: an anytime-valid interval (blocks added by looking)
    final: bool = False  # sequential, at the block the budget ended: also the exact test (SPLIT)

    @property
    def significant(self) -> bool:
        return self.p < self.alpha

    @property
    def half_width(self) -> float:
        """Half the interval's width on the log scale, as a relative margin (0.03 = ±3 %);
        inf when there is no finite interval (too few blocks for the exact test)."""
        if self.df <= 0 or not 0 < self.low <= self.high < math.inf:
            return math.inf
        return math.exp((math.log(self.high) - math.log(self.low)) / 2) - 1

    @property
    def blocks_needed(self) -> int:
        """Blocks before any verdict but inconclusive is possible: the few-block tests'
        least (fewblock.MIN_BLOCKS, 4: Student's interval at alpha/FIXED_SHARES, the
        Bayes-factor sequence at alpha/SPLIT). Those verdicts need blocks that agree in
        size; the tests on signs alone need more (2 · 2^-n below their share)."""
        from allocmark.stats import fewblock

        if not self.sequential:
            return fewblock.MIN_BLOCKS
        return fewblock.blocks_needed(self.alpha / SPLIT)

    @property
    def detectable(self) -> float:
        """The smallest relative difference this data would detect 80 % of the time
        (two-sided t-test at alpha): exp((t(1-alpha/2) + t.80) * SE) - 1."""
        if self.df <= 0 or math.isnan(self.se):
            return math.inf
        return math.exp((_t(self.df, self.alpha) + _t_power(self.df)) * self.se) - 1


def inv(x: float) -> float:
    """1/x for a ratio's bound, where an interval too wide to bound is (0, inf)."""
    return math.inf if x == 0 else 1 / x


def inverted(value: float, low: float, high: float) -> tuple[float, float, float]:
    """A ratio and its interval turned over (a speed-up from a time ratio)."""
    return 1 / value, inv(high), inv(low)


def holm(ratios: Sequence[Ratio]) -> list[Ratio]:
    """The ratios judged as one family by Holm's step-down rule: the smallest p is
    tested at alpha/m, the next at alpha/(m-1), ..., until one is not rejected; each
    rejected ratio's interval is recomputed at the level that rejected it, the rest at
    alpha/(m-r) for r rejected. Noise alone makes any of them faster or slower at most
    5 % of the time, with fewer blocks than Bonferroni (alpha/m for all) needs."""
    m = len(ratios)
    if m <= 1:
        return list(ratios)
    order = sorted(range(m), key=lambda i: ratios[i].p)
    alphas = [0.0] * m
    rejected = 0
    for k, i in enumerate(order):
        level = ALPHA / (m - k)
        if rejected == k and ratios[i].p < level:
            rejected += 1
        alphas[i] = level if rejected > k else ALPHA / (m - rejected)
    return [at_alpha(r, a) for r, a in zip(ratios, alphas, strict=True)]


def at_alpha(r: Ratio, alpha: float) -> Ratio:
    """The ratio's interval at 1 - alpha, by the method that made it."""
    if r.df <= 0 or math.isnan(r.se) or alpha == r.alpha:
        return r
    if r.logs:  # paired: the same interval again, at this alpha
        low, high = _paired_bounds(r.logs, alpha, r.sequential, r.final)
        return dataclasses.replace(r, low=math.exp(low), high=math.exp(high), alpha=alpha)
    half = _t(r.df, alpha) * r.se
    centre = math.log(r.value)
    return dataclasses.replace(
        r, low=math.exp(centre - half), high=math.exp(centre + half), alpha=alpha
    )


class Verdict(StrEnum):
    """What a ratio says, in four words (metric-neutral: worse is slower or larger)."""

    BETTER = "better"  # the interval lies wholly on the good side of 1, not inside ±margin
    WORSE = "worse"
    SAME = "same"  # the interval lies inside ±margin: an equivalence test (TOST at 5 %)
    INCONCLUSIVE = "inconclusive"  # neither: `Ratio.detectable` says how much it could see

    @property
    def differs(self) -> bool:
        """Better or worse: a difference decided (what an explanation is for)."""
        return self in (Verdict.BETTER, Verdict.WORSE)


def verdict(r: Ratio, margin: float, higher_is_better: bool = False) -> Verdict:
    """judge() of a ratio's interval; a ratio without one (one run) is inconclusive."""
    if r.df <= 0:
        return Verdict.INCONCLUSIVE
    return judge(r.low, r.high, margin, higher_is_better)


def judge(low: float, high: float, margin: float, higher_is_better: bool = False) -> Verdict:
    """Equivalence first: same when the interval lies within [1/(1+margin), 1+margin],
    even when it excludes 1 (a difference too small to matter is no difference, as
    criterion's "change within noise threshold"); else better/worse when it excludes
    1; inconclusive otherwise."""
    if low >= 1 / (1 + margin) and high <= 1 + margin:
        return Verdict.SAME
    if low > 1 or high < 1:
        up = low > 1
        return Verdict.BETTER if up == higher_is_better else Verdict.WORSE
    return Verdict.INCONCLUSIVE


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
    intervals are the anytime-valid ones (blocks in the order they ran); `final`: the
    budget ended these blocks undecided, so the exact interval at alpha/SPLIT narrows
    them too. None without a pair or with a value <= 0."""
    if len(a) != len(b):
        raise ValueError("paired_ratio needs one a and one b per block")
    if not a or min(a) <= 0 or min(b) <= 0:
        return None
    logs = _logs(a, b)
    n = len(logs)
    mean, sd = _mean_sd(logs)
    if n < 2:
        point = math.exp(mean)
        return Ratio(point, point, point, 1.0, paired=True, logs=logs)
    if sequential:
        low, high = _paired_bounds(logs, ALPHA, True, final)
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
    low, high = _paired_bounds(logs, ALPHA, False)
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
def _paired_bounds(
    logs: tuple[float, ...], alpha: float, sequential: bool, final: bool = False
) -> tuple[float, float]:
    """The intersection of the intervals alpha is split among (FIXED_SHARES, SPLIT).
    Intervals that do not meet (one of them errs: rarer than alpha) leave the first,
    which assumes the least. Kept: a report judges the same ratios as a family in
    several places (the matrix, the answers), each at Holm's levels."""
    from allocmark.stats import fewblock

    if not sequential:
        share = alpha / FIXED_SHARES
        _, low, high = signedrank.interval(logs, share)
        return _meet((low, high), fewblock.student_interval(logs, share))
    from allocmark.stats import sequential as cs

    share = alpha / SPLIT
    bounds = _meet(cs.interval(logs, share), fewblock.sequence(logs, share))
    if final:
        _, exact_low, exact_high = signedrank.interval(logs, share)
        bounds = _meet(bounds, (exact_low, exact_high))
    return bounds


def _meet(first: tuple[float, float], other: tuple[float, float]) -> tuple[float, float]:
    """Two intervals intersected; `first` alone when they do not meet."""
    low, high = max(first[0], other[0]), min(first[1], other[1])
    return (low, high) if low <= high else first


def _split_p(logs: Sequence[float], final: bool) -> float:
    """The p that matches _paired_bounds: below alpha exactly when one of the
    intervals at alpha/SPLIT excludes 0 (Bonferroni over the tests)."""
    from allocmark.stats import fewblock
    from allocmark.stats import sequential as cs

    p = min(cs.p_value(logs), fewblock.sequence_p(logs))
    if final:
        p = min(p, signedrank.p_value(logs))
    return min(1.0, SPLIT * p)


def _fixed_p(logs: Sequence[float]) -> float:
    """The p that matches _paired_bounds for a fixed number of blocks."""
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
    half = _t(df) * se
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
    t = _t(df)
    p = 2 * student.tail(df, diff / se)
    return Ratio(point, math.exp(diff - t * se), math.exp(diff + t * se), p, se, df)


@dataclass(frozen=True)
class GeoMean:
    value: float
    low: float
    high: float
    n: int


def geomean(values: Sequence[float]) -> GeoMean | None:
    """Geometric mean of positive values with a Student-t 95 % interval computed on
    their logs (each value one observation); None when there are none."""
    positive = [math.log(v) for v in values if v > 0]
    if not positive:
        return None
    mean, sd = _mean_sd(positive)
    low, high = t_interval(mean, sd, len(positive))
    return GeoMean(math.exp(mean), math.exp(low), math.exp(high), len(positive))
