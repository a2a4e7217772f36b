"""Summary statistics. Each function names its method.

Conventions: intervals are 95 %; timings are compared on a log scale (ratios
are what matter, and timing noise is closer to multiplicative than additive).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

LEVEL = 0.95
ALPHA = 1 - LEVEL
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


def summarize(values: Sequence[float]) -> Summary:
    """n, median, mean, σ, min, max, the Student-t 95 % interval of the mean and the
    number of MAD outliers."""
    # Plain Python on purpose: cells hold a handful of values, where numpy's
    # per-call cost dominates, and a report summarises thousands of cells.
    if not values:
        raise ValueError("summarize() needs at least one value")
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
def _t(df: float) -> float:
    """The 97.5 % quantile of Student's t with df degrees of freedom."""
    from scipy import special  # a third of a second to import: only when needed

    return float(special.stdtrit(df, 1 - ALPHA / 2))


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
    p: float  # Welch's t-test on log values; 1.0 when it cannot be computed

    @property
    def significant(self) -> bool:
        return self.p < ALPHA


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
        return Ratio(point, point, point, 0.0 if diff else 1.0)
    df = (va + vb) ** 2 / (va**2 / (a.n - 1) + vb**2 / (b.n - 1))
    t = _t(df)
    from scipy import special

    p = float(2 * special.stdtr(df, -abs(diff) / se))
    return Ratio(point, math.exp(diff - t * se), math.exp(diff + t * se), p)


def ratio_stdev(a: Summary, b: Summary) -> float:
    """σ of mean(a)/mean(b) by first-order error propagation (as hyperfine reports it)."""
    if not a.mean or not b.mean:
        return 0.0
    r = a.mean / b.mean
    return r * math.sqrt((a.stdev / a.mean) ** 2 + (b.stdev / b.mean) ** 2)


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
