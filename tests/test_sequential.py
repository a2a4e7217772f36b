"""The anytime-valid interval (sequential.py): valid at every block a campaign may
stop at, nested as blocks come, consistent with its p, and able to say "same"."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from allocmark import sequential, stats

logs = st.lists(st.floats(-0.5, 0.5, allow_nan=False), min_size=2, max_size=40)


def _bursty(rng: random.Random, n: int) -> list[float]:
    """A/A block log ratios: bimodal runs with bursts, each block's two runs in random
    order (so each log ratio is symmetric around 0, and nothing else is assumed)."""

    def run() -> float:
        burst = 1.5 if rng.random() < 0.1 else 1.0
        return math.log(rng.choice((1.0, 1.3)) * burst * rng.lognormvariate(0, 0.05))

    return [run() - run() for _ in range(n)]


def test_aa_is_false_at_most_5_percent_stopping_at_any_block() -> None:
    """A campaign that looks after every block and stops at the first verdict: 600 A/A
    cells of up to 80 blocks. The wealth's running maximum is what any stopping rule
    could have seen, so p over all 80 blocks < 5 % exactly when some block said
    faster or slower."""
    rng = random.Random(26)
    cells = 600
    false = sum(sequential.p_value(_bursty(rng, 80)) < 0.05 for _ in range(cells))
    # Ville's inequality bounds it by 5 % (it is below: the bound is not tight);
    # 4 standard errors above.
    assert false / cells <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / cells)


def test_a_real_difference_is_found_and_same_is_reached() -> None:
    rng = random.Random(7)
    slower = [math.log(1.10) + rng.gauss(0, 0.03) for _ in range(40)]
    low, high = sequential.interval(slower, 0.05)
    assert 0 < low < math.log(1.10) < high
    equal = [rng.gauss(0, 0.01) for _ in range(40)]
    r = stats.paired_ratio([math.exp(x) for x in equal], [1.0] * 40, sequential=True)
    assert r is not None and r.sequential
    assert stats.verdict(r, 0.03) is stats.Verdict.SAME


def test_no_interval_before_the_bets_can_win() -> None:
    six = stats.paired_ratio([1.0] * 6, [2.0] * 6, sequential=True)
    seven = stats.paired_ratio([1.0] * 7, [2.0] * 7, sequential=True)
    assert six is not None and seven is not None
    assert six.blocks_needed == 7 and six.half_width == math.inf
    assert stats.verdict(six, 0.03) is stats.Verdict.INCONCLUSIVE
    assert stats.verdict(seven, 0.03) is stats.Verdict.BETTER
    equal = stats.paired_ratio([5.0] * 7, [5.0] * 7, sequential=True)  # equal peak RSS
    assert equal is not None and stats.verdict(equal, 0.03) is stats.Verdict.SAME


def _tolerance(d: list[float]) -> float:
    """The grid's resolution: the bounds are found to 1/64^4 of the searched range."""
    c, _ = sequential.bets(d)
    return (max(d) - min(d) + 2 * float(c.max())) * 1e-6


@given(logs)
@settings(max_examples=60, deadline=None)
def test_intervals_are_nested_as_blocks_come(d: list[float]) -> None:
    """Each block's interval lies inside the one before: what was ruled out stays out."""
    before = sequential.interval(d[:-1], 0.05)
    after = sequential.interval(d, 0.05)
    tol = _tolerance(d)
    assert after[0] >= before[0] - tol and after[1] <= before[1] + tol


@given(logs)
@settings(max_examples=60, deadline=None)
def test_p_agrees_with_the_interval_and_turning_over_mirrors_it(d: list[float]) -> None:
    low, high = sequential.interval(d, 0.05)
    p = sequential.p_value(d)
    tol = _tolerance(d)
    if low > tol or high < -tol:
        assert p < 0.05
    if low < -tol and high > tol:
        assert p >= 0.05
    mlow, mhigh = sequential.interval([-x for x in d], 0.05)
    assert math.isclose(mlow, -high, abs_tol=tol) or mlow == -high
    assert math.isclose(mhigh, -low, abs_tol=tol) or mhigh == -low


def test_a_smaller_alpha_widens_the_interval() -> None:
    rng = random.Random(3)
    d = [0.05 + rng.gauss(0, 0.02) for _ in range(30)]
    r = stats.paired_ratio([math.exp(x) for x in d], [1.0] * 30, sequential=True)
    assert r is not None
    wide = stats.at_alpha(r, 0.005)
    assert wide.low < r.low and wide.high > r.high and wide.sequential
