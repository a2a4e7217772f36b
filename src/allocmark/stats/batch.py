"""Paired ratios of many cells at once: a report over 100,000 runs has thousands of
ratios of 100 blocks (5,050 Walsh averages each), which one numpy pass over a 2-D
array computes several times faster than stats.paired_ratio one by one. The same
numbers: tests/test_stats.py holds the two together."""

from __future__ import annotations

import math
from collections.abc import Sequence

from allocmark.stats import (
    ALPHA,
    FIXED_SHARES,
    VECTOR_MIN,
    Ratio,
    fewblock,
    paired_ratio,
    rows_mean_sd,
    signedrank,
    student,
)


def paired_ratios(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
) -> list[Ratio | None]:
    """paired_ratio() of each pair; pairs of one length (VECTOR_MIN blocks or more, every
    value > 0) in one numpy pass over their Walsh averages (a report of 100,000 runs
    has thousands of ratios of 100 blocks: 5,050 averages each)."""
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
    """paired_ratio() of pairs of n blocks each, their Walsh order statistics picked
    row by row in one pass (signedrank.walsh_picks)."""
    import numpy as np

    # log a - log b, as _logs: exactly antisymmetric (numpy's log may differ from the
    # C library's in the last bit, which moves a bound by as much, never a tie).
    logs = np.log(np.asarray([a for a, _ in pairs], dtype=float)) - np.log(
        np.asarray([b for _, b in pairs], dtype=float)
    )
    share = ALPHA / FIXED_SHARES
    c = signedrank.cut(n, share)
    centre, low, high = signedrank.walsh_picks(logs, c)
    if not c:
        low, high = np.full(len(pairs), -math.inf), np.full(len(pairs), math.inf)
    mean, sd = rows_mean_sd(logs)
    # Student's interval at the other share, intersected (ratios.paired_bounds).
    half = student.quantile(n - 1, 1 - share / 2) * np.maximum(sd, fewblock.FLOOR) / math.sqrt(n)
    meet_low, meet_high = np.maximum(low, mean - half), np.minimum(high, mean + half)
    meets = meet_low <= meet_high
    low, high = np.where(meets, meet_low, low), np.where(meets, meet_high, high)
    centre = np.clip(centre, low, high)
    # The same rule as signed_rank_p: counted up to signedrank.EXACT_P_MAX non-zero log ratios.
    big = (logs != 0).sum(axis=1) > signedrank.EXACT_P_MAX
    normal = signedrank.normal_p_rows(logs) if big.any() else []
    exact = [normal[k] if big[k] else signedrank.p_value(x) for k, x in enumerate(logs.tolist())]
    t = np.abs(mean) * math.sqrt(n) / np.maximum(sd, fewblock.FLOOR)
    ps = [
        min(1.0, FIXED_SHARES * min(e, 2 * student.tail(n - 1, ti)))
        for e, ti in zip(exact, t.tolist(), strict=True)
    ]
    rows = zip(
        logs.tolist(), centre.tolist(), low.tolist(), high.tolist(), sd.tolist(), ps, strict=True
    )
    return [
        Ratio(
            math.exp(ce),
            math.exp(lo),
            math.exp(hi),
            pv,
            s / math.sqrt(n),
            n - 1,
            True,
            logs=tuple(x),
        )
        for x, ce, lo, hi, s, pv in rows
    ]
