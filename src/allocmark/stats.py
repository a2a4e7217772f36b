"""Summary statistics. Each function names its method."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Summary:
    n: int
    median: float
    mean: float
    stdev: float  # sample standard deviation (n-1); 0 for a single value
    minimum: float
    maximum: float

    @property
    def half_range_rel(self) -> float:
        """Half the min..max range relative to the median: the ± shown in tables."""
        return (self.maximum - self.minimum) / 2 / self.median if self.median else 0.0


def summarize(values: Sequence[float]) -> Summary:
    if not values:
        raise ValueError("summarize() needs at least one value")
    return Summary(
        n=len(values),
        median=statistics.median(values),
        mean=statistics.fmean(values),
        stdev=statistics.stdev(values) if len(values) > 1 else 0.0,
        minimum=min(values),
        maximum=max(values),
    )


def ratio_stdev(a: Summary, b: Summary) -> float:
    """σ of mean(a)/mean(b) by first-order error propagation (as hyperfine reports it)."""
    if not a.mean or not b.mean:
        return 0.0
    r = a.mean / b.mean
    return r * math.sqrt((a.stdev / a.mean) ** 2 + (b.stdev / b.mean) ** 2)


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean of positive values; None when there are none."""
    positive = [v for v in values if v > 0]
    if not positive:
        return None
    return math.exp(statistics.fmean(math.log(v) for v in positive))
