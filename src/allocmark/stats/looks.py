"""Planned looks: a group-sequential Student's t test of the blocks' mean log ratio,
with power at the few blocks a program of seconds affords (issue 67).

Why. The anytime-valid sequences (sequential.py, fewblock.py) may be looked at after
every block, and pay for it: at 4 blocks the Bayes-factor sequence needs t ≈ 18 at
5 %/3, where a fixed-n t test needs 3.2; a program of 8 s under six allocators, four
blocks in 4.4 min, decided none of its 1.7× ratios. A campaign does not need to look
after every block: it looks at LOOKS only (each about 1.5× the one before, the blocks
a round adds), and a test that knows its looks in advance spends its error on them
alone.

The test (Pocock 1977, the "nominal significance level" design of Jennison &
Turnbull, *Group Sequential Methods*, 2000, §3.8): at each look n ≤ the blocks so
far, Student's two-sided p of the mean log ratio (n - 1 degrees of freedom); the
ratio differs from 1 at level alpha when the smallest of those p falls below a
nominal level P(alpha), the same at every look. P is what makes the error over all
looks alpha when the blocks' log ratios are independent normal: the smallest p over
LOOKS under that null has a distribution of its own, NULL, and P(alpha) is its
alpha quantile. The repeated confidence interval at look n is mean ± t(1 - P/2) · s/√n;
every look's interval holds at once with probability 1 - alpha, so the interval after
n blocks is the intersection of those of the looks so far, and "same" (within the
margin) may be said from it too. Blocks past the last look wait for the next one,
unless the budget ends the row there (`final`): its last block is then a look in
place of the next planned one. That holds the level: the crossing chance of one look
after the last reached grows with its distance from it, so a look sooner than the
next planned one spends less than it would have; and where the budget ends is set by
how long the blocks took, the same whichever allocator ran first, not by their signs.

NULL is simulated, not the Brownian-motion recursion of the normal theory: with t
at 3 degrees of freedom that recursion's level was 5.5 % for 5 % (200,000 A/A
sequences). The simulation is exact for normal noise: between two looks a segment
of d blocks adds a sum ~ N(0, d) and squares about its own mean ~ chi²(d - 1),
independent, which give every look's t without drawing each block
(`null_min_p`; tests/stats/test_looks.py draws it again and holds the table to it).

What it assumes, and the fallback. Normal noise, as fewblock's tests; heavy tails
make t conservative (Student's t with 3 degrees of freedom as noise: 3.9 % for 5 %),
and the random order inside a block makes a log ratio symmetric about 0 under no
difference, so skew does not err either. What does is noise of few values: a peak
RSS counted in pages whose two runs of a block fall in the same two modes gives log
ratios that tie, and four blocks that tie look like a difference with no noise. So
`plain` is the stated check: log ratios that tie (two equal to 1e-12) are not
judged here but by the distribution-free sequences (ratios.paired_bounds). Two-mode
noise with jitter between its modes escapes the check; its price is the chance that
four blocks fall the same way (2 · 4^-4 = 0.8 % at the first look), as for fewblock.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import math
from collections.abc import Sequence

import numpy as np

from allocmark.stats import fewblock, student

# The looks: 4 blocks (fewblock.MIN_BLOCKS), then each about 1.5× the one before.
LOOKS = (4, 6, 9, 13, 19, 28, 42, 63, 94, 141, 211, 316, 474, 711, 1066)
FLOOR = fewblock.FLOOR  # s never below 0.01 % (equal log ratios), as the sequences'
TIE = 1e-12  # log ratios closer than this tie (`plain`)

# NULL: the distribution of the smallest Student p over LOOKS under the normal null,
# from null_min_p(20_000_000, seed=67) by `table` (2 min): log10 P(smallest p <= p) at
# log10 p = NULL_FROM, NULL_FROM + NULL_STEP, ..., 0. Between two, interpolated
# (log-log); below the first, Bonferroni over the looks (len(LOOKS) · p, above it).
NULL_FROM, NULL_STEP = -6.1, 0.1
NULL = (
    -4.95468,
    -4.84315,
    -4.74473,
    -4.65659,
    -4.55517,
    -4.46218,
    -4.36251,
    -4.26520,
    -4.17198,
    -4.07520,
    -3.97326,
    -3.86886,
    -3.77211,
    -3.66959,
    -3.57065,
    -3.47437,
    -3.37546,
    -3.28129,
    -3.18585,
    -3.08807,
    -2.99198,
    -2.89618,
    -2.80071,
    -2.70267,
    -2.60788,
    -2.51262,
    -2.41852,
    -2.32302,
    -2.22718,
    -2.13261,
    -2.03856,
    -1.94511,
    -1.85163,
    -1.75901,
    -1.66673,
    -1.57516,
    -1.48312,
    -1.39237,
    -1.30236,
    -1.21341,
    -1.12488,
    -1.03765,
    -0.95132,
    -0.86636,
    -0.78267,
    -0.70055,
    -0.62014,
    -0.54183,
    -0.46580,
    -0.39251,
    -0.32261,
    -0.25663,
    -0.19561,
    -0.14051,
    -0.09278,
    -0.05393,
    -0.02555,
    -0.00851,
    -0.00143,
    -0.00005,
    -0.00000,
    0.00000,
)


def plain(logs: Sequence[float]) -> bool:
    """The stated check: no two of the blocks' log ratios tie (module docstring)."""
    ordered = sorted(logs)
    return all(b - a > TIE for a, b in itertools.pairwise(ordered))


def looks_in(n: int, final: bool = False) -> tuple[int, ...]:
    """The looks n blocks have reached; `final`: the budget ended them at n, which is
    then a look too (in place of the next planned one: module docstring)."""
    reached = LOOKS[: bisect.bisect_right(LOOKS, n)]
    if final and n >= LOOKS[0] and reached[-1] != n:
        return (*reached, n)
    return reached


def next_look(n: int) -> int | None:
    """The first look after n blocks (None past the last)."""
    i = bisect.bisect_right(LOOKS, n)
    return LOOKS[i] if i < len(LOOKS) else None


def error(p_min: float) -> float:
    """The probability under the normal null that the smallest p over LOOKS is at most
    p_min: the test's p for a sequence whose smallest p is p_min."""
    if p_min <= 0:
        return 0.0
    x = (math.log10(p_min) - NULL_FROM) / NULL_STEP
    if x < 0:
        return min(1.0, len(LOOKS) * p_min)
    i = min(int(x), len(NULL) - 2)
    y = NULL[i] + (NULL[i + 1] - NULL[i]) * (x - i)
    return min(1.0, 10**y)


@functools.lru_cache(maxsize=1024)
def nominal(alpha: float) -> float:
    """P(alpha): the p each look is held to so that all of them err at most alpha."""
    if alpha <= 0:
        return 0.0
    low, high = -30.0, 0.0  # log10 p, bisection on the monotone error()
    for _ in range(80):
        mid = (low + high) / 2
        low, high = (mid, high) if error(10**mid) <= alpha else (low, mid)
    return 10**low


@functools.lru_cache(maxsize=8192)
def critical(n: int, alpha: float) -> float:
    """The |t| that decides at a look of n blocks at level alpha."""
    return student.quantile(n - 1, 1 - nominal(alpha) / 2)


def _moments(logs: Sequence[float], n: int) -> tuple[float, float]:
    """The mean and the (floored) sd of the first n log ratios."""
    d = logs[:n]
    mean = math.fsum(d) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in d) / (n - 1))
    return mean, max(sd, FLOOR)


def interval(logs: Sequence[float], alpha: float, final: bool = False) -> tuple[float, float]:
    """The 1 - alpha repeated confidence interval of the logs' mean after all of them:
    every look's interval intersected (`final`: the last block one, looks_in);
    (-inf, inf) before the first look. Looks whose intervals do not meet (an error
    rarer than alpha) leave the last."""
    low, high = -math.inf, math.inf
    last = (low, high)
    for n in looks_in(len(logs), final):
        mean, sd = _moments(logs, n)
        half = critical(n, alpha) * sd / math.sqrt(n)
        last = (mean - half, mean + half)
        low, high = max(low, last[0]), min(high, last[1])
    return (low, high) if low <= high else last


def p_value(logs: Sequence[float], final: bool = False) -> float:
    """The p of "the mean log ratio is 0": below alpha exactly when 0 is outside
    interval(logs, alpha, final)."""
    ps = [
        2 * student.tail(n - 1, mean * math.sqrt(n) / sd)
        for n in looks_in(len(logs), final)
        for mean, sd in [_moments(logs, n)]
    ]
    return error(min(ps)) if ps else 1.0


def null_min_p(reps: int, seed: int, chunk: int = 500_000) -> np.ndarray:
    """The smallest two-sided Student p over LOOKS of `reps` sequences of independent
    normal log ratios (module docstring: a segment's sum and squares, not its blocks)."""
    from scipy import stats as sst  # only where the table is made or checked

    rng = np.random.default_rng(seed)
    sizes = np.diff((0, *LOOKS))
    out = []
    for start in range(0, reps, chunk):
        m = min(chunk, reps - start)
        sums = rng.standard_normal((m, len(sizes))) * np.sqrt(sizes)
        within = np.where(sizes > 1, rng.chisquare(np.maximum(sizes - 1, 1), (m, len(sizes))), 0)
        total, squares = np.cumsum(sums, axis=1), np.cumsum(within + sums**2 / sizes, axis=1)
        n = np.asarray(LOOKS, dtype=float)
        sd = np.sqrt((squares - total**2 / n) / (n - 1))
        t = np.abs(total / n) * np.sqrt(n) / sd
        out.append(np.min(2 * np.asarray(sst.t.sf(t, n - 1)), axis=1))
    return np.concatenate(out)


def table(mins: np.ndarray) -> list[float]:
    """NULL from simulated smallest p: log10 of the share at most 10^x, for x from
    NULL_FROM to 0 in NULL_STEP (each share counts 200 sequences or more of 20 million:
    its relative error under 7 %)."""
    ordered = np.sort(mins)
    steps = round(-NULL_FROM / NULL_STEP)
    xs = [NULL_FROM + k * NULL_STEP for k in range(steps + 1)]
    below = np.searchsorted(ordered, [10**x for x in xs], side="right")
    return [round(math.log10(max(int(b), 1) / len(ordered)), 5) for b in below]
