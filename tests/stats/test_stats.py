"""The exact paired test over blocks: its p against scipy and against counting every
sign assignment, its interval against inverting the test, and its error rate on
noise that breaks the t-interval's assumptions."""

from __future__ import annotations

import itertools
import math
import random

from hypothesis import assume, given, settings, strategies as st
from scipy import stats as scipy_stats

from allocmark import stats
from allocmark.stats import batch, signedrank

untied = st.lists(
    st.floats(-1, 1, allow_nan=False).filter(lambda v: abs(v) > 1e-6),
    min_size=1,
    max_size=20,
    unique_by=abs,
)
gritty = st.lists(st.sampled_from([0.0, 0.1, -0.1, 0.2, -0.2, 0.3]), min_size=1, max_size=10)


@given(untied)
@settings(max_examples=200, deadline=None)
def test_p_is_scipys_exact_p_without_ties(x: list[float]) -> None:
    assert math.isclose(
        signedrank.p_value(x), scipy_stats.wilcoxon(x, method="exact").pvalue, rel_tol=1e-9
    )


@given(
    st.lists(
        st.sampled_from([0.0, 0.1, -0.1, 0.2, -0.2, 0.3, 0.5, -0.7]), min_size=51, max_size=120
    )
)
@settings(max_examples=100, deadline=None)
def test_p_over_50_blocks_is_the_normal_approximation_with_ties(x: list[float]) -> None:
    assume(sum(v != 0 for v in x) > signedrank.EXACT_P_MAX)  # else it counts, exactly
    want = scipy_stats.wilcoxon(x, method="approx", zero_method="wilcox").pvalue
    assert math.isclose(signedrank.p_value(x), want, rel_tol=1e-9, abs_tol=1e-12)


def _counted_p(x: list[float]) -> float:
    """Every one of the 2^n sign assignments of the non-zero values, mid-ranked."""
    x = [v for v in x if v != 0]
    if not x:
        return 1.0
    mags = sorted(abs(v) for v in x)
    rank = {m: sum(i + 1 for i, w in enumerate(mags) if w == m) / mags.count(m) for m in mags}
    t = sum(rank[abs(v)] for v in x if v > 0)
    sums = [
        sum(rank[abs(v)] for v, s in zip(x, signs, strict=True) if s)
        for signs in itertools.product((0, 1), repeat=len(x))
    ]
    low = sum(u <= t + 1e-9 for u in sums) / len(sums)
    high = sum(u >= t - 1e-9 for u in sums) / len(sums)
    return min(1.0, 2 * min(low, high))


@given(gritty)
@settings(max_examples=300, deadline=None)
def test_p_with_zeros_and_ties_counts_every_sign_assignment(x: list[float]) -> None:
    assert math.isclose(signedrank.p_value(x), _counted_p(x), rel_tol=1e-9)


@given(
    st.lists(st.integers(-100, 100), min_size=6, max_size=14, unique=True), st.integers(-120, 120)
)
@settings(max_examples=300, deadline=None)
def test_the_interval_is_the_test_inverted(x: list[int], t: int) -> None:
    """theta lies inside the interval exactly when the test of x - theta keeps it. Whole
    x and theta a quarter off a whole: no Walsh average (a multiple of 1/2) is theta, so
    x - theta has no ties and no zeros, and the arithmetic is exact."""
    theta = t + 0.25
    _, low, high = signedrank.interval([float(v) for v in x])
    kept = signedrank.p_value([v - theta for v in x]) > stats.ALPHA
    assert (low <= theta <= high) == kept


def test_signs_alone_need_six_blocks_magnitudes_decide_in_fewer() -> None:
    """Every block 2x faster: the exact test on signs cannot reach 5 % before 6 blocks
    (2 * 2^-5 > 5 %); Student's interval (its share of alpha) decides from 4 blocks that
    agree in size, and not from blocks that do not."""
    assert signedrank.interval([-math.log(2)] * 5)[1] == -math.inf
    assert signedrank.interval([-math.log(2)] * 6)[1] > -math.inf
    three = stats.paired_ratio([1.0] * 3, [2.0] * 3)
    four = stats.paired_ratio([1.0] * 4, [2.0] * 4)
    assert three is not None and four is not None and three.blocks_needed == 4
    assert stats.verdict(three, 0.03) is stats.Verdict.UNDECIDED  # fewblock.MIN_BLOCKS
    assert stats.verdict(four, 0.03) is stats.Verdict.BETTER
    scattered = stats.paired_ratio([1.0, 1.9, 0.6, 1.2], [2.0] * 4)  # 2x, 1.05x, 3.3x faster
    assert scattered is not None and stats.verdict(scattered, 0.03) is stats.Verdict.UNDECIDED
    # A family of 10 cells judges each at 0.5 %: a wider interval, more blocks.
    noisy = stats.paired_ratio([0.5, 0.55, 0.5 / 1.1, 0.51], [1.0] * 4)
    assert noisy is not None and stats.verdict(noisy, 0.03) is stats.Verdict.BETTER
    tight = stats.at_alpha(noisy, 0.0005)
    assert tight.high > noisy.high and stats.verdict(tight, 0.03) is stats.Verdict.UNDECIDED


def test_aa_blocks_under_bimodal_bursty_noise_are_false_at_most_5_percent() -> None:
    """The random order makes each block's log ratio symmetric around 0: the exact test
    holds its level whatever the noise (here bimodal with bursts, where the t-interval's
    normality fails). 4,000 A/A cells of 8 blocks."""
    rng = random.Random(26)

    def run() -> float:
        burst = 1.5 if rng.random() < 0.1 else 1.0  # another process took the core
        return rng.choice((1.0, 1.3)) * burst * rng.lognormvariate(0, 0.05)

    false = 0
    cells = 4000
    for _ in range(cells):
        a, b = [run() for _ in range(8)], [run() for _ in range(8)]
        r = stats.paired_ratio(a, b)
        assert r is not None
        false += stats.verdict(r, 0.0) in (stats.Verdict.BETTER, stats.Verdict.WORSE)
    # Exact level at 8 blocks: 2 * P(T+ <= 3) = 2 * 5/256 = 3.9 %; 4 standard errors above.
    assert false / cells <= 2 * 5 / 256 + 4 * math.sqrt(0.039 * 0.961 / cells)


@given(st.integers(stats.VECTOR_MIN, 90), st.integers(0, 2**32 - 1))
@settings(max_examples=40, deadline=None)
def test_many_ratios_at_once_are_the_ratios_one_by_one(n: int, seed: int) -> None:
    """The numpy path (a report's thousands of cells) against paired_ratio itself, with
    equal peak RSS (zeros) and ties in some pairs."""
    rng = random.Random(seed)
    pairs = []
    for k in range(5):
        a = [rng.choice((100, 101, 102)) if k % 2 else rng.lognormvariate(0, 0.2) for _ in range(n)]
        b = [
            v
            if rng.random() < 0.2
            else rng.choice((100, 101, 102))
            if k % 2
            else rng.lognormvariate(0, 0.2)
            for v in a
        ]
        pairs.append((a, b))
    for many, (a, b) in zip(batch.paired_ratios(pairs), pairs, strict=True):
        one = stats.paired_ratio(a, b)
        assert many is not None and one is not None
        for got, want in (
            (many.value, one.value),
            (many.low, one.low),
            (many.high, one.high),
            (many.p, one.p),
            (many.se, one.se),
        ):
            assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12)
