"""An anytime-valid interval for paired block ratios: a confidence sequence.

A campaign that adds blocks until each ratio is decided looks at its interval
after every block. A fixed-n interval (the exact signed-rank one in `stats`)
looked at that often says "faster" for two identical allocators far more than
5 % of the time. This interval stays valid at whatever block the campaign stops.

Method: testing by betting (Waudby-Smith & Ramdas 2023, "Estimating means of
bounded random variables by betting", JRSS-B; Shafer & Vovk's game-theoretic
probability). For a candidate centre θ of the blocks' log ratios d_i:

    x_i(θ) = clip((d_i - θ) / c_i, -1, 1)
    K+_n(θ) = Π (1 + λ_i x_i(θ)),   K-_n(θ) = Π (1 - λ_i x_i(θ))

When θ is the true centre and each d_i - θ is as likely positive as negative
given the blocks before it (what the random order inside a block gives under no
difference, and the location-shift model gives elsewhere), x_i is symmetric, so
K+ and K- are non-negative martingales and by Ville's inequality either exceeds
2/α at any block with probability at most α. The interval after n blocks is
every θ neither wealth has reached 2/α at any block so far.

The scale c_i (3 × the standard deviation of the earlier log ratios) and the bet
λ_i (the predictable plug-in of Waudby-Smith & Ramdas, capped at 0.8) come from
earlier blocks only and do not depend on θ, so each wealth is monotone in θ and
the interval is one piece, found by bisection on a grid. The bets are sized for
α = 5 % whatever α a family of comparisons asks for (only the threshold moves),
so that intervals at Holm's levels and the anytime p agree.

Written here rather than taken from `confseq`: its betting intervals are for
means of variables in a known [0, 1]; block log ratios are unbounded, and
clipping them around each candidate centre is what keeps this exact under any
noise this machine makes (bursts, bimodal peak RSS) without a bound on it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

SCALE = 3.0  # c_i: this many standard deviations of the earlier blocks' log ratios
FLOOR = 1e-4  # c_i never below 0.01 % (equal peak RSS: every log ratio 0)
CAP = 0.8  # the largest bet: wealth never falls by more than 80 % in one block
BET_ALPHA = 0.05  # the level the bets are sized for
_GRID = 65
_ROUNDS = 4


def bets(logs: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each block's scale c_i and bet λ_i, from the blocks before it only."""
    n = len(logs)
    c, lam = np.empty(n), np.empty(n)
    mean, m2 = 0.0, 0.0  # Welford's running mean and squares of the log ratios
    xs, xs2 = 0.0, 0.0  # sums of the earlier blocks' clipped centred x, for the bet's variance
    log_term = 2 * math.log(2 / BET_ALPHA)
    for i, d in enumerate(map(float, logs)):
        sd = math.sqrt(m2 / (i - 1)) if i >= 2 else 0.0
        c[i] = max(SCALE * sd, FLOOR)
        spread = xs2 - xs * xs / i if i else 0.0
        var = (0.25 + spread) / (i + 1)
        lam[i] = min(CAP, math.sqrt(log_term / (var * (i + 1) * math.log(i + 2))))
        x = max(-1.0, min(1.0, (d - mean) / c[i]))
        xs, xs2 = xs + x, xs2 + x * x
        delta = d - mean
        mean += delta / (i + 1)
        m2 += delta * (d - mean)
    return c, lam


def _log_wealth(
    d: np.ndarray, c: np.ndarray, lam: np.ndarray, theta: np.ndarray, sign: int
) -> np.ndarray:
    """The largest log wealth reached at any block, for each candidate θ."""
    x = np.clip((d[None, :] - theta[:, None]) / c[None, :], -1.0, 1.0)
    wealth: np.ndarray = np.cumsum(np.log1p(sign * lam * x), axis=1).max(axis=1)
    return wealth


def _bound(d: np.ndarray, c: np.ndarray, lam: np.ndarray, sign: int, alpha: float) -> float:
    """The lower (sign 1) or upper (sign -1) end of the interval: the last θ the
    wealth rejects, refined on a grid (-inf/inf when no θ can be rejected yet)."""
    threshold = math.log(2 / alpha)
    if float(np.cumsum(np.log1p(lam)).max()) < threshold:
        return -math.inf * sign
    low, high = float(d.min() - c.max()), float(d.max() + c.max())
    a, b = (low, high) if sign > 0 else (high, low)  # `a` is rejected, `b` is not
    for _ in range(_ROUNDS):
        grid = np.linspace(a, b, _GRID)
        rejected = np.nonzero(_log_wealth(d, c, lam, grid, sign) >= threshold)[0]
        j = int(rejected.max())
        a, b = float(grid[j]), float(grid[min(j + 1, _GRID - 1)])
    return a


def interval(logs: Sequence[float], alpha: float) -> tuple[float, float]:
    """The 1 - alpha confidence sequence of the logs' centre after all of them."""
    d = np.asarray(logs, dtype=float)
    c, lam = bets(d)
    return _bound(d, c, lam, 1, alpha), _bound(d, c, lam, -1, alpha)


def p_value(logs: Sequence[float]) -> float:
    """The anytime-valid p of "centred on 0": 2 / the larger wealth at θ = 0 (at most
    1), so that p < alpha exactly when 0 is outside interval(logs, alpha)."""
    d = np.asarray(logs, dtype=float)
    c, lam = bets(d)
    zero = np.zeros(1)
    best = max(float(_log_wealth(d, c, lam, zero, sign)[0]) for sign in (1, -1))
    return min(1.0, 2 * math.exp(-best))


def blocks_needed(alpha: float) -> int:
    """Blocks before the interval can be finite: the wealth of bets all won at the cap
    reaches 2/alpha (7 at 5 %)."""
    return math.ceil(math.log(2 / alpha) / math.log1p(CAP) - 1e-12)
