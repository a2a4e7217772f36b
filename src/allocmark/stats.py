"""Summary statistics. Each function names its method.

Conventions: intervals are 95 %; timings are compared on a log scale (ratios
are what matter, and timing noise is closer to multiplicative than additive).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

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
    if not values:
        raise ValueError("summarize() needs at least one value")
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    low, high = t_interval(mean, sd, len(values))
    return Summary(
        n=len(values),
        median=statistics.median(values),
        mean=mean,
        stdev=sd,
        minimum=min(values),
        maximum=max(values),
        ci_low=low,
        ci_high=high,
        outliers=sum(mad_outliers(values)),
    )


def t_interval(mean: float, sd: float, n: int) -> tuple[float, float]:
    """Student-t 95 % interval of a mean: mean ± t(0.975, n-1) · sd / √n."""
    if n < 2:
        return mean, mean
    half = float(sps.t.ppf(1 - ALPHA / 2, n - 1)) * sd / math.sqrt(n)
    return mean - half, mean + half


def mad_outliers(values: Sequence[float]) -> list[bool]:
    """Modified z-score rule: |0.6745 (x - median) / MAD| > 3.5 flags an outlier.
    With MAD = 0 nothing is flagged (over half the values are equal)."""
    med = statistics.median(values)
    mad = statistics.median(abs(v - med) for v in values)
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
    """Ratio of geometric means of a and b (all values > 0), compared on logs:
    the interval is exp(Δ ± t·SE) with Welch's standard error and Welch–
    Satterthwaite degrees of freedom, and p is Welch's two-sided t-test. None
    when a side is empty or has a value <= 0."""
    if not a or not b or min(a) <= 0 or min(b) <= 0:
        return None
    la, lb = np.log(np.asarray(a, float)), np.log(np.asarray(b, float))
    diff = float(la.mean() - lb.mean())
    va = float(la.var(ddof=1)) / len(la) if len(la) > 1 else 0.0
    vb = float(lb.var(ddof=1)) / len(lb) if len(lb) > 1 else 0.0
    se = math.sqrt(va + vb)
    point = math.exp(diff)
    if len(la) < 2 or len(lb) < 2:  # one run: nothing to test with
        return Ratio(point, point, point, 1.0)
    if se == 0:  # no spread at all: any difference is certain
        return Ratio(point, point, point, 0.0 if diff else 1.0)
    df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1))
    t = float(sps.t.ppf(1 - ALPHA / 2, df))
    p = float(2 * sps.t.sf(abs(diff) / se, df))
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
    mean = statistics.fmean(positive)
    sd = statistics.stdev(positive) if len(positive) > 1 else 0.0
    low, high = t_interval(mean, sd, len(positive))
    return GeoMean(math.exp(mean), math.exp(low), math.exp(high), len(positive))
