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

LEVEL = 0.95
ALPHA = 1 - LEVEL
DEFAULT_MARGIN = 0.03  # ±3 %: the default precision target and equivalence margin
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
    med = _median_sorted(xs)
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
    mean, sd = _rows_mean_sd(xs)
    half = _t(n - 1) * sd / math.sqrt(n)
    mid = n // 2
    med = xs[:, mid] if n % 2 else (xs[:, mid - 1] + xs[:, mid]) / 2
    dev = np.abs(xs - med[:, None])
    sorted_dev = np.sort(dev, axis=1)
    mad = sorted_dev[:, mid] if n % 2 else (sorted_dev[:, mid - 1] + sorted_dev[:, mid]) / 2
    outliers = np.where(mad > 0, np.count_nonzero(dev > (MAD_LIMIT * mad / 0.6745)[:, None],
                                                  axis=1), 0)  # fmt: skip
    positive = xs[:, 0] > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        log_mean, log_sd = _rows_mean_sd(np.log(np.where(positive[:, None], xs, 1.0)))
    columns = zip(mean.tolist(), sd.tolist(), half.tolist(), med.tolist(), xs[:, 0].tolist(),
                  xs[:, -1].tolist(), outliers.tolist(), log_mean.tolist(), log_sd.tolist(),
                  positive.tolist(), strict=True)  # fmt: skip
    return [Summary(n=n, median=md, mean=m, stdev=sd_, minimum=lo, maximum=hi, ci_low=m - h,
                    ci_high=m + h, outliers=int(o), log_mean=lm if pos else math.nan,
                    log_sd=ls if pos else math.nan)
            for m, sd_, h, md, lo, hi, o, lm, ls, pos in columns]  # fmt: skip


def _rows_mean_sd(xs: Any) -> tuple[Any, Any]:
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


def _median_sorted(xs: Sequence[float]) -> float:
    mid = len(xs) // 2
    return xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2


@functools.lru_cache(maxsize=4096)
def _t(df: float, alpha: float = ALPHA) -> float:
    """The 1 - alpha/2 quantile of Student's t with df degrees of freedom (97.5 %)."""
    from scipy import special  # a third of a second to import: only when needed

    return float(special.stdtrit(df, 1 - alpha / 2))


@functools.lru_cache(maxsize=4096)
def _t_power(df: float) -> float:
    """The 80 % quantile of Student's t: the power term of a detectable difference."""
    from scipy import special

    return float(special.stdtrit(df, 0.80))


def t_interval(mean: float, sd: float, n: int) -> tuple[float, float]:
    """Student-t 95 % interval of a mean: mean ± t(0.975, n-1) · sd / √n."""
    if n < 2:
        return mean, mean
    half = _t(n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


def mad_outliers(values: Sequence[float]) -> list[bool]:
    """Modified z-score rule: |0.6745 (x - median) / MAD| > 3.5 flags an outlier.
    With MAD = 0 nothing is flagged (over half the values are equal)."""
    return _mad_flags(values, _median_sorted(sorted(values)))


def _mad_flags(values: Sequence[float], med: float) -> list[bool]:
    mad = _median_sorted(sorted(abs(v - med) for v in values))
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

    @property
    def significant(self) -> bool:
        return self.p < self.alpha

    @property
    def half_width(self) -> float:
        """Half the interval's width on the log scale, as a relative margin (0.03 = ±3 %)."""
        if self.df <= 0 or math.isnan(self.se):
            return math.inf
        return math.exp(_t(self.df, self.alpha) * self.se) - 1

    @property
    def detectable(self) -> float:
        """The smallest relative difference this data would detect 80 % of the time
        (two-sided t-test at alpha): exp((t(1-alpha/2) + t.80) * SE) - 1."""
        if self.df <= 0 or math.isnan(self.se):
            return math.inf
        return math.exp((_t(self.df, self.alpha) + _t_power(self.df)) * self.se) - 1


def for_family(r: Ratio, cells: int) -> Ratio:
    """The ratio's interval widened for one of `cells` judged together (Bonferroni:
    each at 1 - alpha/cells), so that noise alone makes any of them faster or slower
    at most 5 % of the time."""
    if cells <= 1 or r.df <= 0 or math.isnan(r.se):
        return r
    alpha = ALPHA / cells
    half = _t(r.df, alpha) * r.se
    centre = math.log(r.value)
    return dataclasses.replace(r, low=math.exp(centre - half), high=math.exp(centre + half),
                               alpha=alpha)  # fmt: skip


class Verdict(StrEnum):
    """What a ratio says, in four words (metric-neutral: worse is slower or larger)."""

    BETTER = "better"  # the interval lies wholly on the good side of 1, not inside ±margin
    WORSE = "worse"
    SAME = "same"  # the interval lies inside ±margin: an equivalence test (TOST at 5 %)
    INCONCLUSIVE = "inconclusive"  # neither: `Ratio.detectable` says how much it could see


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


def paired_ratio(a: Sequence[float], b: Sequence[float]) -> Ratio | None:
    """Geometric mean of a[i]/b[i] over blocks i (values > 0), with a Student-t 95 %
    interval over the blocks' log ratios; p is the one-sample t-test of those logs
    against 0. Pairing removes what a block shares (the machine's state at that
    moment) from the comparison. None without a pair or with a value <= 0."""
    if len(a) != len(b):
        raise ValueError("paired_ratio needs one a and one b per block")
    if not a or min(a) <= 0 or min(b) <= 0:
        return None
    n = len(a)
    if n >= VECTOR_MIN:
        return _paired_rows([(a, b)], n)[0]
    mean, sd = _mean_sd([math.log(x / y) for x, y in zip(a, b, strict=True)])
    point = math.exp(mean)
    if n < 2:
        return Ratio(point, point, point, 1.0, paired=True)
    se = sd / math.sqrt(n)
    if se == 0:
        return Ratio(point, point, point, 0.0 if mean else 1.0, 0.0, n - 1, paired=True)
    from scipy import special

    half = _t(n - 1) * se
    p = float(2 * special.stdtr(n - 1, -abs(mean) / se))
    return Ratio(point, math.exp(mean - half), math.exp(mean + half), p, se, n - 1, True)


def paired_ratio_many(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
) -> list[Ratio | None]:
    """paired_ratio() of each pair; pairs of one length (VECTOR_MIN blocks or more, every
    value > 0) in one numpy pass."""
    out: list[Ratio | None] = [None] * len(pairs)
    by_length: dict[int, list[int]] = {}
    for i, (a, b) in enumerate(pairs):
        if len(a) == len(b) >= VECTOR_MIN and min(a) > 0 and min(b) > 0:
            by_length.setdefault(len(a), []).append(i)
        else:
            out[i] = paired_ratio(a, b)
    for n, where in by_length.items():
        for i, ratio in zip(where, _paired_rows([pairs[i] for i in where], n), strict=True):
            out[i] = ratio
    return out


def _paired_rows(pairs: Sequence[tuple[Sequence[float], Sequence[float]]], n: int) -> list[Ratio]:
    import numpy as np
    from scipy import special

    a = np.asarray([p[0] for p in pairs], dtype=float)
    b = np.asarray([p[1] for p in pairs], dtype=float)
    mean, sd = _rows_mean_sd(np.log(a / b))
    se = sd / math.sqrt(n)
    half = _t(n - 1) * se
    with np.errstate(divide="ignore", invalid="ignore"):
        p = 2 * special.stdtr(n - 1, -np.abs(mean) / se)
    out = []
    for m, s, h, pv in zip(mean.tolist(), se.tolist(), half.tolist(), p.tolist(), strict=True):
        point = math.exp(m)
        if s == 0:
            out.append(Ratio(point, point, point, 0.0 if m else 1.0, 0.0, n - 1, paired=True))
        else:
            out.append(Ratio(point, math.exp(m - h), math.exp(m + h), pv, s, n - 1, True))
    return out


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
    from scipy import special

    half = _t(df) * se
    p = float(2 * special.stdtr(df, -abs(diff) / se))
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
    from scipy import special

    p = float(2 * special.stdtr(df, -abs(diff) / se))
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
