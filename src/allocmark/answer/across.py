"""One answer across workloads that agrees with its cells.

Over several workloads an allocator's ratio on an axis is the geometric mean of its
rows' ratios over *these* workloads, judged from the uncertainty within each
workload. It is never a one-sample test over the workloads ("a workload like
these"): the spread between workloads is no uncertainty about these, no number of
blocks reduces it, and such a test called "not significant" an allocator decided
larger on every workload.

Two routes decide it; a "better" or "worse" is wrong at most 5 % of the time (alpha;
a recommendation's "better" is judged again at stats.RECOMMEND_ALPHA, its rows' verdicts
at that level too):

- every row decided the same way (better on all, worse on all, the same on all), each
  by its own row's family (at most 5 %): an intersection-union test (Berger 1982). A
  claim about every row needs every row's own test, no correction: a wrong "better on
  every workload" needs a row whose ratio is not better to be decided better, which
  its two-sided test does at most 2.5 % of the time. Its interval is the geometric
  mean of the rows' own bounds (every one of them on the decided side).
- otherwise the rows' intervals at alpha / (2 m k) (k rows; m geometric means judged
  together): all of them cover their ratios at once at least 1 - alpha / (2 m) of the
  time (Bonferroni), and then the mean of the logs lies between the means of their
  bounds. It narrows as every row's blocks are added.

A "same" can be wrong more often in the worst case (each route at its own level:
7.5 %); bench/calibration.py counts them all. With each position comes its tally: on
how many workloads it is decided better, worse, the same or undecided, and the range
of the decided ratios, which the sentences and the matrix show.

Hand-written (no library pools intervals across strata this way); each step is
stated above.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from allocmark import stats


@dataclass(frozen=True)
class Tally:
    """An allocator on one axis across workloads: the rows' verdicts counted, and the
    range of the decided (better or worse) ratios, lower is better."""

    better: int = 0
    worse: int = 0
    same: int = 0
    undecided: int = 0
    low: float | None = None  # the smallest decided ratio
    high: float | None = None  # the largest

    @property
    def rows(self) -> int:
        return self.better + self.worse + self.same + self.undecided

    @property
    def unanimous(self) -> stats.Verdict | None:
        """The verdict every row has, when they all have one decided verdict."""
        counts = {
            stats.Verdict.BETTER: self.better,
            stats.Verdict.WORSE: self.worse,
            stats.Verdict.SAME: self.same,
        }
        found = [v for v, n in counts.items() if n == self.rows > 0]
        return found[0] if found else None


@dataclass(frozen=True)
class RowVerdict:
    """One row's ratio (None: none), turned lower-is-better by `invert`, and the
    verdict its row's family gave it."""

    ratio: stats.Ratio | None
    invert: bool
    verdict: stats.Verdict | None


@dataclass(frozen=True)
class Pooled:
    value: float
    low: float
    high: float
    verdict: stats.Verdict
    tally: Tally


def tally(cells: Sequence[RowVerdict]) -> Tally:
    decided = [
        _bounds(c.ratio, c.invert)[0]
        for c in cells
        if c.ratio is not None and c.verdict is not None and c.verdict.differs
    ]
    count = {v: sum(c.verdict is v for c in cells) for v in stats.Verdict}
    return Tally(
        better=count[stats.Verdict.BETTER],
        worse=count[stats.Verdict.WORSE],
        same=count[stats.Verdict.SAME],
        undecided=len(cells)
        - count[stats.Verdict.BETTER]
        - count[stats.Verdict.WORSE]
        - count[stats.Verdict.SAME],
        low=min(decided, default=None),
        high=max(decided, default=None),
    )


def pooled(
    cells: Sequence[RowVerdict], margin: float, family: int, alpha: float = stats.ALPHA
) -> Pooled | None:
    """The geometric mean of the cells' ratios over these workloads, judged by the two
    routes above; `family`: how many such means are judged together (m); `alpha`: the
    error the routes keep to (the cells' verdicts at that level too). None when no row
    has a ratio."""
    if not cells or all(c.ratio is None for c in cells):
        return None
    counted = tally(cells)
    value = _mean_log([_bounds(c.ratio, c.invert)[0] for c in cells if c.ratio is not None])
    if (unanimous := counted.unanimous) is not None:
        low, high = _pool(cells, alpha=None)
        return Pooled(value, min(low, value), max(high, value), unanimous, counted)
    low, high = _pool(cells, alpha / (2 * max(family, 1) * len(cells)))
    return Pooled(
        value, min(low, value), max(high, value), stats.interval_verdict(low, high, margin), counted
    )


def _pool(cells: Sequence[RowVerdict], alpha: float | None) -> tuple[float, float]:
    """The geometric means of the rows' lower and upper bounds, each at `alpha` (None:
    the level its row's family gave it); (0, inf) when a row has no interval."""
    lows, highs = [], []
    for c in cells:
        r = c.ratio
        if r is None or r.df <= 0:
            return 0.0, math.inf
        r = r if alpha is None else stats.at_alpha(r, alpha)
        _, low, high = _bounds(r, c.invert)
        lows.append(low)
        highs.append(high)
    return _mean_log(lows), _mean_log(highs)


def _bounds(r: stats.Ratio | None, invert: bool) -> tuple[float, float, float]:
    assert r is not None
    return stats.inverted(r.value, r.low, r.high) if invert else (r.value, r.low, r.high)


def _mean_log(xs: Sequence[float]) -> float:
    """exp(mean(log x)): inf when any x is inf, else 0 when any is 0 (a bound a row's
    interval does not have)."""
    if any(x == math.inf for x in xs):
        return math.inf
    if any(x <= 0 for x in xs):
        return 0.0
    return math.exp(sum(math.log(x) for x in xs) / len(xs))
