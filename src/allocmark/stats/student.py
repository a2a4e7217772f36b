"""Student's t distribution: its quantiles and tail probabilities.

Written here rather than taken from scipy.special (stdtrit, stdtr): importing
scipy.special takes 0.3-0.5 s on this VM, a quarter of what a report over 100,000
runs may take in all (issue 27), for the dozen quantiles a report asks for. The
method is the textbook one: the t tail is a regularized incomplete beta function,
I_x(df/2, 1/2) with x = df / (df + t^2), evaluated by its continued fraction
(modified Lentz; DLMF 8.17.22), and a quantile is found by Newton's method on it,
kept inside a bracket. tests/test_student.py holds it to scipy's to 1e-9.
"""

from __future__ import annotations

import functools
import math
from statistics import NormalDist

_TINY = 1e-300
_EPS = 1e-15


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (converges fast for x < (a+1)/(a+b+2))."""
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 10_000):
        for aa in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h


def incomplete_beta(a: float, b: float, x: float, y: float | None = None) -> float:
    """The regularized incomplete beta function I_x(a, b), 0 <= x <= 1; `y`: 1 - x
    when the caller has it exactly (near x = 1, 1 - x would lose its digits)."""
    y = 1.0 - x if y is None else y
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    front = math.exp(
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    )
    if x < (a + 1) / (a + b + 2):
        return front * _continued_fraction(a, b, x) / a
    return 1.0 - front * _continued_fraction(b, a, y) / b


def tail(df: float, t: float) -> float:
    """P(T > |t|) for Student's t with df degrees of freedom (one tail)."""
    if math.isinf(df):
        return NormalDist().cdf(-abs(t))
    return 0.5 * incomplete_beta(df / 2, 0.5, df / (df + t * t), t * t / (df + t * t))


def cdf(df: float, t: float) -> float:
    """P(T <= t)."""
    return 1.0 - tail(df, t) if t > 0 else tail(df, t)


def _density(df: float, t: float) -> float:
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return math.exp(log_norm - (df + 1) / 2 * math.log1p(t * t / df))


@functools.lru_cache(maxsize=4096)
def quantile(df: float, q: float) -> float:
    """The q quantile of Student's t with df > 0 degrees of freedom, 0 < q < 1."""
    if not 0 < q < 1 or not df > 0:
        raise ValueError(f"quantile({df}, {q}): needs df > 0 and 0 < q < 1")
    if q < 0.5:
        return -quantile(df, 1 - q)
    if q == 0.5:
        return 0.0
    if math.isinf(df):
        return NormalDist().inv_cdf(q)
    # Solved on the mass between 0 and t near the centre, on the upper tail beyond:
    # each keeps its digits where the other would subtract them away.
    near = q <= 0.75
    want = q - 0.5 if near else -(1.0 - q)

    def rising(t: float) -> float:
        return _central(df, t) if near else -tail(df, t)

    low, high = 0.0, max(1.0, NormalDist().inv_cdf(q))
    while rising(high) < want:  # a bracket: rising(low) < want <= rising(high)
        low, high = high, high * 2
    t = (low + high) / 2
    for _ in range(200):
        gap = rising(t) - want
        if abs(gap) <= 1e-16 * abs(want):
            break
        if gap < 0:
            low = t
        else:
            high = t
        step = t - gap / _density(df, t)  # Newton; bisection when it leaves the bracket
        t = step if low < step < high else (low + high) / 2
        if high - low <= 1e-15 * high:
            break
    return t


def _central(df: float, t: float) -> float:
    """P(0 < T < t), t >= 0: I_y(1/2, df/2) / 2 with y = t^2 / (df + t^2)."""
    return 0.5 * incomplete_beta(0.5, df / 2, t * t / (df + t * t), df / (df + t * t))
