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
LOOKS under that null has a distribution of its own (SPENT's last row), and P(alpha) is its
alpha quantile. The repeated confidence interval at look n is mean ± t(1 - P/2) · s/√n;
every look's interval holds at once with probability 1 - alpha, so the interval after
n blocks is the intersection of those of the looks so far, and "same" (within the
margin) may be said from it too. Blocks past the last look wait for the next one.

The final look. Where the budget ends a row undecided (`final`), its last block is a
look too, at the level the planned looks before it left unspent: alpha - spent(k, P),
k the planned looks before it (`final_level`). The looks before it err with
probability spent(k, P) and the final look with at most its level, so all of them
together at most alpha (Bonferroni), whatever the final look's t shares with theirs.
A row of 20-60 cheap, noisy blocks, which Pocock's constant level holds to about
0.5 % at 5 %, is judged at its end at about 2 %: the power the planned looks give up
for the looks it never reached. Where the budget ends is set by how long the blocks
took, the same whichever allocator ran first, not by their signs; and a finished
campaign adds no block after it (a row would have no level left to spend). Near
the last looks, where less than P is left, the final look is held to P and stands in
for the next planned one, which would have spent more.

SPENT is simulated, not the Brownian-motion recursion of the normal theory: with t
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
import tomllib
from collections.abc import Sequence
from importlib import resources

import numpy as np

from allocmark.stats import fewblock, student

# The looks: 4 blocks (fewblock.MIN_BLOCKS), then each about 1.5× the one before.
LOOKS = (4, 6, 9, 13, 19, 28, 42, 63, 94, 141, 211, 316, 474, 711, 1066)
FLOOR = fewblock.FLOOR  # s never below 0.01 % (equal log ratios), as the sequences'
TIE = 1e-12  # log ratios closer than this tie (`plain`)

# SPENT: the error the first k looks spend under the normal null, for k = 1..len(LOOKS):
# log10 P(the smallest Student p over LOOKS[:k] <= p) at log10 p = NULL_FROM,
# NULL_FROM + NULL_STEP, ..., 0; from table(20_000_000, seed=67) (2 min), kept in
# looks.toml. Between two, interpolated (log-log); a step below the first, Bonferroni
# over the k looks (k · p, above it), and between, interpolated. Its last row is the
# whole test's error (`error`), the others what a final look may spend (`final_level`).
NULL_FROM, NULL_STEP = -6.1, 0.1


@functools.cache
def _spent_table() -> tuple[tuple[float, ...], ...]:
    """SPENT, read once, when a look is first judged (not when allocmark starts)."""
    text = resources.files("allocmark.stats").joinpath("looks.toml").read_text()
    rows = tomllib.loads(text)["spent"]
    return tuple(tuple(float(x) for x in row) for row in rows)


def plain(logs: Sequence[float]) -> bool:
    """The stated check: no two of the blocks' log ratios tie (module docstring)."""
    ordered = sorted(logs)
    return all(b - a > TIE for a, b in itertools.pairwise(ordered))


def looks_in(n: int) -> tuple[int, ...]:
    """The planned looks n blocks have reached."""
    return LOOKS[: bisect.bisect_right(LOOKS, n)]


def _before(n: int) -> tuple[int, ...]:
    """The planned looks before block n: those a final look at n comes after."""
    return LOOKS[: bisect.bisect_left(LOOKS, n)]


def next_look(n: int) -> int | None:
    """The first look after n blocks (None past the last)."""
    i = bisect.bisect_right(LOOKS, n)
    return LOOKS[i] if i < len(LOOKS) else None


def spent(k: int, p_min: float) -> float:
    """The probability under the normal null that the smallest p over the first k looks
    is at most p_min (0 for no look)."""
    if p_min <= 0 or k <= 0:
        return 0.0
    if k == 1:
        return min(1.0, p_min)  # one look: Student's p is exact
    x = (math.log10(p_min) - NULL_FROM) / NULL_STEP
    row = _spent_table()[k - 1]
    if x < -1:
        return k * p_min
    if x < 0:  # towards Bonferroni a step below the grid: continuous, as levels need
        bonferroni = math.log10(k) + NULL_FROM - NULL_STEP
        return 10 ** (row[0] + (row[0] - bonferroni) * x)
    i = min(int(x), len(row) - 2)
    y = row[i] + (row[i + 1] - row[i]) * (x - i)
    return min(1.0, 10**y)


def error(p_min: float) -> float:
    """The probability under the normal null that the smallest p over LOOKS is at most
    p_min: the test's p for a sequence whose smallest p is p_min."""
    return spent(len(LOOKS), p_min)


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
def critical(n: int, alpha: float, final: bool = False) -> float:
    """The |t| that decides at a look of n blocks at level alpha (`final`: a final look
    there, at its own level: `levels`)."""
    level = levels(n, alpha, True)[-1][1] if final and n >= LOOKS[0] else nominal(alpha)
    return student.quantile(n - 1, 1 - level / 2)


def _moments(logs: Sequence[float], n: int) -> tuple[float, float]:
    """The mean and the (floored) sd of the first n log ratios."""
    d = logs[:n]
    mean = math.fsum(d) / n
    sd = math.sqrt(math.fsum((x - mean) ** 2 for x in d) / (n - 1))
    return mean, max(sd, FLOOR)


def final_level(k: int, alpha: float) -> float:
    """The level of a final look after k planned looks at level alpha: what those looks
    left unspent, alpha - spent(k, P(alpha)) (Bonferroni: the final look and the looks
    before it err at most alpha together), or P(alpha) where that is more (near the
    last looks: the final look then stands in for the next planned one)."""
    p = nominal(alpha)
    return max(p, alpha - spent(k, p))


def levels(n: int, alpha: float, final: bool = False) -> tuple[tuple[int, float], ...]:
    """The looks n blocks are judged at, with the p each is held to: the planned looks
    reached at P(alpha); `final` (the budget ended the row at n): the planned looks
    before n, and n at final_level."""
    if not final or n < LOOKS[0]:
        return tuple((m, nominal(alpha)) for m in looks_in(n))
    before = _before(n)
    return (*((m, nominal(alpha)) for m in before), (n, final_level(len(before), alpha)))


def interval(logs: Sequence[float], alpha: float, final: bool = False) -> tuple[float, float]:
    """The 1 - alpha repeated confidence interval of the logs' mean after all of them:
    every look's interval intersected (`final`: the last block one, at its own level:
    `levels`); (-inf, inf) before the first look. Looks whose intervals do not meet (an
    error rarer than alpha) leave the last."""
    low, high = -math.inf, math.inf
    last = (low, high)
    for n, level in levels(len(logs), alpha, final):
        mean, sd = _moments(logs, n)
        half = student.quantile(n - 1, 1 - level / 2) * sd / math.sqrt(n)
        last = (mean - half, mean + half)
        low, high = max(low, last[0]), min(high, last[1])
    return (low, high) if low <= high else last


def p_value(logs: Sequence[float], final: bool = False) -> float:
    """The p of "the mean log ratio is 0": below alpha exactly when 0 is outside
    interval(logs, alpha, final) (both levels grow with alpha)."""
    n = len(logs)
    if not final or n < LOOKS[0]:
        ps = [_p(logs, m) for m in looks_in(n)]
        return error(min(ps)) if ps else 1.0
    before = [_p(logs, m) for m in _before(n)]
    planned = error(min(before)) if before else 1.0
    return min(planned, _final_alpha(len(before), _p(logs, n)))


def _p(logs: Sequence[float], n: int) -> float:
    """Student's two-sided p of the first n log ratios' mean."""
    mean, sd = _moments(logs, n)
    return 2 * student.tail(n - 1, mean * math.sqrt(n) / sd)


HIGHEST = 0.5  # final_level grows with alpha up to here (past it, the unspent shrinks)


@functools.lru_cache(maxsize=8192)
def _final_alpha(k: int, p: float) -> float:
    """The least alpha whose final look after k planned looks holds p: final_level
    turned over, by bisection on log10 alpha (final_level grows with alpha)."""
    if final_level(k, HIGHEST) < p:
        return 1.0  # the planned looks' p stands (a p above HIGHEST decides nothing)
    low, high = -30.0, math.log10(HIGHEST)
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (low, mid) if final_level(k, 10**mid) >= p else (mid, high)
    return 10**high


def null_min_p(reps: int, seed: int, chunk: int = 500_000) -> np.ndarray:
    """The smallest two-sided Student p over the first k looks, for k = 1..len(LOOKS)
    (one column each), of `reps` sequences of independent normal log ratios (module
    docstring: a segment's sum and squares, not its blocks)."""
    rng = np.random.default_rng(seed)
    return np.concatenate(
        [_null_chunk(rng, min(chunk, reps - start)) for start in range(0, reps, chunk)]
    )


def _null_chunk(rng: np.random.Generator, m: int) -> np.ndarray:
    """null_min_p for m sequences."""
    from scipy import stats as sst  # only where the table is made or checked

    sizes = np.diff((0, *LOOKS))
    sums = rng.standard_normal((m, len(sizes))) * np.sqrt(sizes)
    within = np.where(sizes > 1, rng.chisquare(np.maximum(sizes - 1, 1), (m, len(sizes))), 0)
    total, squares = np.cumsum(sums, axis=1), np.cumsum(within + sums**2 / sizes, axis=1)
    n = np.asarray(LOOKS, dtype=float)
    sd = np.sqrt((squares - total**2 / n) / (n - 1))
    t = np.abs(total / n) * np.sqrt(n) / sd
    return np.minimum.accumulate(2 * np.asarray(sst.t.sf(t, n - 1)), axis=1)


def table(reps: int, seed: int, chunk: int = 500_000) -> list[list[float]]:
    """SPENT drawn: for each k, log10 of the share of `reps` sequences whose smallest p
    over the first k looks is at most 10^x, for x from NULL_FROM to 0 in NULL_STEP
    (counted chunk by chunk: 20 million sequences do not fit in memory at once). At 20
    million each share of the last row counts 200 sequences or more: its relative error
    under 7 %; the first rows' tails count fewer, and k · p bounds them below the grid."""
    rng = np.random.default_rng(seed)
    steps = round(-NULL_FROM / NULL_STEP)
    grid = np.asarray([10 ** (NULL_FROM + k * NULL_STEP) for k in range(steps + 1)])
    below = np.zeros((len(LOOKS), len(grid)), dtype=np.int64)
    for start in range(0, reps, chunk):
        mins = np.sort(_null_chunk(rng, min(chunk, reps - start)), axis=0)
        for k in range(len(LOOKS)):
            below[k] += np.searchsorted(mins[:, k], grid, side="right")
    return [[round(math.log10(max(int(b), 1) / reps), 5) for b in row] for row in below]
