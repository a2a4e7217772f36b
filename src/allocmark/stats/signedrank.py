"""The exact Wilcoxon signed-rank test over blocks, and its interval.

Written here rather than taken from scipy.stats.wilcoxon: scipy's exact method
gives no interval, and falls back to a normal approximation when log ratios tie
or are 0 (equal peak RSS, the rule for A/A), where this one stays exact. stats.py
builds its ratios on these functions (paired_ratio)."""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

ALPHA = 1 - 0.95  # stats.ALPHA, the same float


@functools.lru_cache(maxsize=256)
def null_counts(weights: tuple[int, ...]) -> tuple[int, ...]:
    """How many of the 2^n sign assignments give each sum of the positive `weights`:
    the exact null distribution of the signed-rank statistic (weights: ranks)."""
    counts = [1] + [0] * sum(weights)
    top = 0
    for w in weights:
        top += w
        for total in range(top, w - 1, -1):
            counts[total] += counts[total - w]
    return tuple(counts)


@functools.lru_cache(maxsize=1024)
def cut(n: int, alpha: float) -> int:
    """How many Walsh averages to drop from each end for a 1 - alpha interval: the
    largest c with P(T+ <= c - 1) <= alpha/2 under the null (0: no finite interval)."""
    counts, c, below = null_counts(tuple(range(1, n + 1))), 0, 0
    while below + counts[c] <= alpha / 2 * 2**n:
        below += counts[c]
        c += 1
    return c


def interval(logs: Sequence[float], alpha: float = ALPHA) -> tuple[float, float, float]:
    """The Hodges–Lehmann estimate of the centre of the blocks' log ratios (the median
    of their Walsh averages (x_i + x_j)/2, i <= j) and the exact 1 - alpha interval
    from inverting the signed-rank test: [W_(c), W_(M+1-c)] of the M sorted averages
    (Hollander & Wolfe). Too few blocks for any interval: (estimate, -inf, inf)."""
    c = cut(len(logs), alpha)
    centre, low, high = _walsh_picks(logs, c)
    return (centre, -math.inf, math.inf) if c == 0 else (centre, low, high)


def _walsh_picks(logs: Sequence[float], c: int) -> tuple[float, float, float]:
    """walsh_picks() of one sample."""
    centre, low, high = walsh_picks(np.asarray([logs], dtype=np.float64), c)
    return float(centre[0]), float(low[0]), float(high[0])


def walsh_picks(rows: Any, c: int) -> tuple[Any, Any, Any]:
    """Of each row of log ratios (a 2-D array, rows of one length n): the median of its
    Walsh averages and the c-th from each end (c >= 1; else nan). Sorted, not placed by
    np.partition: numpy's vectorised sort of 5,050 averages (100 blocks) takes half the
    time of a partition at these four places (Holm asks for a ratio's interval at
    several levels; a report over 100,000 runs asks thousands). A few rows at a time,
    so that they stay cached."""
    i, j = _pairs(rows.shape[1])
    m = len(i)
    picks = [(m - 1) // 2, m // 2] + ([c - 1, m - c] if c else [])
    found = np.empty((len(rows), len(picks)))
    for at in range(0, len(rows), 64):
        walsh = rows[at : at + 64, i] + rows[at : at + 64, j]  # twice the averages
        walsh.sort(axis=1)
        found[at : at + 64] = walsh[:, picks]
    # Halving is exact in binary floating point: the same numbers as sorting averages.
    centre = (found[:, 0] + found[:, 1]) / 4
    if not c:
        return centre, np.full(len(rows), math.nan), np.full(len(rows), math.nan)
    return centre, found[:, 2] / 2, found[:, 3] / 2


@functools.lru_cache(maxsize=64)
def _pairs(n: int) -> np.ndarray:
    """The index pairs (i, j), i <= j, of n blocks, as two rows."""
    pairs = np.vstack(np.triu_indices(n))
    pairs.flags.writeable = False
    return pairs


EXACT_P_MAX = 50  # blocks up to which p counts every sign assignment


def p_value(logs: Sequence[float]) -> float:
    """The exact two-sided p of the signed-rank test that the logs centre on 0: zeros
    dropped (Wilcoxon's rule), ties given their mid-ranks, every sign assignment of the
    rest counted (doubled ranks keep the sums whole). Above EXACT_P_MAX blocks, the
    normal approximation with the ties' own variance (counting would cost a second per
    tie pattern there; the verdicts come from the interval, exact at any n)."""
    x = [v for v in logs if v != 0]
    if not x:
        return 1.0
    order = sorted(range(len(x)), key=lambda i: abs(x[i]))
    ranks = [0] * len(x)
    i = 0
    while i < len(order):  # mid-ranks of equal |x|, doubled: first + last (1-based)
        j = i
        while j + 1 < len(order) and abs(x[order[j + 1]]) == abs(x[order[i]]):
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = i + j + 2
        i = j + 1
    t = sum(r for r, v in zip(ranks, x, strict=True) if v > 0)
    if len(x) > EXACT_P_MAX:  # each rank counts with probability 1/2: mean Σr/2, var Σr²/4
        z = (t - sum(ranks) / 2) / math.sqrt(sum(r * r for r in ranks) / 4)
        return math.erfc(abs(z) / math.sqrt(2))
    counts = null_counts(tuple(sorted(ranks)))
    total = 1 << len(x)
    low, high = sum(counts[: t + 1]) / total, sum(counts[t:]) / total
    return min(1.0, 2 * min(low, high))


def normal_p_rows(logs: Any) -> list[float]:
    """p_value() above EXACT_P_MAX blocks for every row at once: zeros dropped,
    ties mid-ranked (the first and last place of each run of equal |x|, carried along
    the sorted row), then the normal approximation."""
    import numpy as np

    mags = np.abs(logs)
    order = np.argsort(mags, axis=1, kind="stable")
    s = np.take_along_axis(mags, order, axis=1)
    rows, n = s.shape
    pos = np.broadcast_to(np.arange(n), (rows, n))
    starts = np.ones((rows, n), dtype=bool)
    starts[:, 1:] = s[:, 1:] != s[:, :-1]
    ends = np.ones((rows, n), dtype=bool)
    ends[:, :-1] = starts[:, 1:]
    first = np.maximum.accumulate(np.where(starts, pos, 0), axis=1)
    last = np.flip(
        np.minimum.accumulate(np.flip(np.where(ends, pos, n - 1), axis=1), axis=1), axis=1
    )
    zeros = (s == 0).sum(axis=1, keepdims=True)
    ranks = np.where(s == 0, 0.0, (first + last) / 2 + 1 - zeros)
    signs = np.take_along_axis(np.sign(logs), order, axis=1)
    t = (ranks * (signs > 0)).sum(axis=1)
    var = (ranks * ranks).sum(axis=1) / 4
    out = []
    for ti, mean, v in zip(t.tolist(), (ranks.sum(axis=1) / 2).tolist(), var.tolist(), strict=True):
        out.append(1.0 if v == 0 else math.erfc(abs(ti - mean) / math.sqrt(v) / math.sqrt(2)))
    return out


def hodges_lehmann(logs: Sequence[float]) -> float:
    """The median of the Walsh averages (x_i + x_j)/2, i <= j."""
    return _walsh_picks(logs, 0)[0]


def median_sorted(xs: Sequence[float] | np.ndarray) -> float:
    mid = len(xs) // 2
    m = xs[mid] if len(xs) % 2 else (xs[mid - 1] + xs[mid]) / 2
    return float(m) if isinstance(m, np.floating) else m  # a list's ints stay ints
