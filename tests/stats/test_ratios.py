"""Summaries, ratios, families and verdicts against values worked out by hand."""

from __future__ import annotations

import dataclasses
import math
import random
import statistics

import pytest
from scipy import special

from allocmark import stats
from allocmark.stats import batch, signedrank, student, summary


def test_summary_and_t_interval() -> None:
    s = stats.summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (s.n, s.median, s.mean, s.minimum, s.maximum) == (5, 3.0, 3.0, 1.0, 5.0)
    assert s.stdev == pytest.approx(math.sqrt(2.5))
    # t(0.975, 4) = 2.776445; half-width = 2.776445 * 1.581139 / sqrt(5) = 1.963243
    assert s.ci_low == pytest.approx(3 - 1.963243, abs=1e-5)
    assert s.ci_high == pytest.approx(3 + 1.963243, abs=1e-5)
    assert s.ci_rel == pytest.approx(1.963243 / 3, abs=1e-5)
    one = stats.summarize([7.0])
    assert (one.ci_low, one.ci_high, one.ci_rel) == (7.0, 7.0, math.inf)


def test_outliers_by_the_modified_z_score() -> None:
    # median 3, deviations 2 1 0 1 97, MAD 1: only 100 has |0.6745 * dev| > 3.5
    assert stats.summarize([1.0, 2.0, 3.0, 4.0, 100.0]).outliers == 1
    assert stats.summarize([1.0, 1.0, 1.0, 1.0, 10.0]).outliers == 0  # MAD 0


def test_ratio_of_geometric_means_and_welch() -> None:
    r = stats.ratio([2.0, 2.2, 1.8], [1.0, 1.1, 0.9])
    assert r is not None
    assert r.value == pytest.approx(2.0)  # every log differs by exactly ln 2
    assert r.low < 2.0 < r.high and r.significant
    same = stats.ratio([1.0, 1.1, 0.9], [1.05, 0.95, 1.0])
    assert same is not None and not same.significant and same.low < 1 < same.high
    single = stats.ratio([2.0], [1.0])
    assert single is not None and single.value == 2.0 and not single.significant
    assert stats.ratio([], [1.0]) is None and stats.ratio([0.0, 1.0], [1.0, 1.0]) is None


def test_geomean_interval() -> None:
    g = stats.geomean([1.0, 4.0])
    assert g is not None and g.value == pytest.approx(2.0) and g.n == 2
    # logs 0 and ln 4: sd = 0.980258, t(0.975, 1) = 12.706205 -> half = 8.807
    assert math.log(g.high) - math.log(g.value) == pytest.approx(8.8074, abs=1e-3)
    assert stats.geomean([]) is None


def test_paired_ratio_and_its_interval() -> None:
    # log ratios ln 0.5, ln 0.5 * 1.1, ln 0.5 / 1.1: centre ln 0.5, sd = ln 1.1
    r = stats.paired_ratio([0.5, 0.55, 0.5 / 1.1], [1.0, 1.0, 1.0])
    assert r is not None and r.paired and r.df == 2
    assert r.value == pytest.approx(0.5)  # Hodges–Lehmann: the median Walsh average
    se = math.log(1.1) / math.sqrt(3)
    assert r.se == pytest.approx(se)
    # Three blocks: too few for any interval (fewblock.MIN_BLOCKS; the exact test's
    # share of 2.5 % needs 7).
    assert (r.low, r.high, r.half_width, r.blocks_needed) == (0.0, math.inf, math.inf, 4)
    # 80 % power, for the blocks a verdict would need: t(0.975, 2) + t(0.80, 2)
    assert r.detectable == pytest.approx(math.exp(5.363313 * se) - 1, rel=1e-5)
    # Four: Student's interval at 2.5 %.
    four = stats.paired_ratio([0.5, 0.55, 0.5 / 1.1, 0.5], [1.0] * 4)
    assert four is not None
    logs = [math.log(x) for x in (0.5, 0.55, 0.5 / 1.1, 0.5)]
    mean, sd = sum(logs) / 4, statistics.stdev(logs)
    half = student.quantile(3, 1 - 0.0125) * sd / 2
    assert (math.log(four.low), math.log(four.high)) == (
        pytest.approx(mean - half),
        pytest.approx(mean + half),
    )
    # Seven blocks: the exact interval at 2.5 % runs from the smallest to the largest
    # Walsh average; Student's lies inside it, and the two intersected are Student's.
    seven = stats.paired_ratio([0.5, 0.55, 0.5 / 1.1, 0.51, 0.49, 0.5, 0.52], [1.0] * 7)
    assert seven is not None
    _, low, high = signedrank.interval(seven.logs, 0.025)
    assert (low, high) == (pytest.approx(math.log(0.5 / 1.1)), pytest.approx(math.log(0.55)))
    assert low < math.log(seven.low) < math.log(seven.high) < high
    one = stats.paired_ratio([1.0], [2.0])
    assert one is not None and (one.value, one.low, one.high, one.df) == (0.5, 0.5, 0.5, 0)
    assert stats.paired_ratio([1.0, 0.0], [1.0, 1.0]) is None


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (1.05, 1.10, stats.Verdict.WORSE),
        (0.80, 0.90, stats.Verdict.BETTER),
        (0.99, 1.02, stats.Verdict.SAME),
        (0.90, 1.02, stats.Verdict.UNDECIDED),
        (1.001, 1.02, stats.Verdict.SAME),  # significant, and inside the margin: same
        (1.001, 1.05, stats.Verdict.WORSE),  # excludes 1, not inside the margin
        (0.95, 0.999, stats.Verdict.BETTER),
    ],
)
def test_four_verdicts(low: float, high: float, expected: stats.Verdict) -> None:
    r = stats.Ratio(math.sqrt(low * high), low, high, 0.5, se=0.01, df=10)
    assert stats.verdict(r, 0.03) is expected
    flipped = {stats.Verdict.WORSE: stats.Verdict.BETTER, stats.Verdict.BETTER: stats.Verdict.WORSE}
    assert stats.verdict(r, 0.03, higher_is_better=True) is flipped.get(expected, expected)


def test_holm_judges_a_family_step_by_step() -> None:
    def r(p: float) -> stats.Ratio:  # 1.03 with the se that gives this p (t, 20 df)
        se = math.log(1.03) / float(special.stdtrit(20, 1 - p / 2))
        half = float(special.stdtrit(20, 0.975)) * se
        return stats.Ratio(1.03, 1.03 * math.exp(-half), 1.03 * math.exp(half), p, se, 20)

    # 0.001 < 0.05/3 and 0.02 < 0.05/2 are rejected; 0.3 is not, and is judged at 0.05/1.
    judged = stats.holm([r(0.3), r(0.001), r(0.02)])
    assert [x.alpha for x in judged] == pytest.approx([0.05, 0.05 / 3, 0.05 / 2])
    wide = judged[1]
    assert math.log(wide.high / wide.value) == pytest.approx(2.613 * wide.se, rel=1e-3)
    # The first not rejected stops it: 0.03 > 0.05/2, so both are judged at 0.05/2.
    judged = stats.holm([r(0.03), r(0.04)])
    assert [x.alpha for x in judged] == pytest.approx([0.025, 0.025])
    assert stats.verdict(r(0.03), 0.03) is stats.Verdict.WORSE
    assert stats.verdict(judged[0], 0.03) is stats.Verdict.UNDECIDED
    assert stats.holm([r(0.5)])[0].alpha == pytest.approx(0.05)


def test_ratio_of_ratios_adds_the_variances() -> None:
    a = stats.Ratio(1.1, 1.0, 1.2, 0.1, se=0.03, df=9)
    b = stats.Ratio(1.0, 0.9, 1.1, 0.9, se=0.04, df=9)
    r = stats.ratio_of_ratios(a, b)
    assert r is not None and r.value == pytest.approx(1.1) and r.se == pytest.approx(0.05)
    # Welch–Satterthwaite: 0.05^4 / (0.03^4/9 + 0.04^4/9)
    assert r.df == pytest.approx(0.05**4 / (0.03**4 / 9 + 0.04**4 / 9))


@pytest.mark.parametrize("seed", range(20))
def test_numpy_and_plain_summaries_agree(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([stats.VECTOR_MIN, 31, 100])
    values = [rng.lognormvariate(0, 0.3) for _ in range(n)]
    if seed % 4 == 0:
        values[rng.randrange(n)] *= 50  # an outlier
    if seed % 5 == 0:
        values = [round(v, 1) for v in values]  # ties, an even count
    fast, plain = stats.summarize(values), summary._summarize_list(values)
    for field in dataclasses.fields(stats.Summary):
        a, b = getattr(fast, field.name), getattr(plain, field.name)
        assert a == pytest.approx(b, rel=1e-12, abs=1e-15), field.name
    other = [v * rng.uniform(0.9, 1.2) for v in values]
    fast_ratio = stats.paired_ratio(values, other)
    plain_mean, plain_sd = summary.mean_sd(
        [math.log(x / y) for x, y in zip(values, other, strict=True)]
    )
    logs = [math.log(x / y) for x, y in zip(values, other, strict=True)]
    centre = signedrank.interval(logs)[0]
    assert fast_ratio is not None and math.log(fast_ratio.value) == pytest.approx(centre)
    assert fast_ratio.se == pytest.approx(plain_sd / math.sqrt(n))
    assert min(logs) <= plain_mean <= max(logs)


@pytest.mark.parametrize("seed", range(10))
def test_batched_paired_ratios_equal_one_at_a_time(seed: int) -> None:
    rng = random.Random(seed)
    pairs = []
    for _ in range(30):
        n = rng.choice([2, 5, stats.VECTOR_MIN, 40])
        a = [rng.lognormvariate(0, 0.2) for _ in range(n)]
        b = [x * rng.uniform(0.8, 1.3) for x in a]
        pairs.append((a, b) if rng.random() < 0.9 else (a, a))  # some with se = 0
    for (a, b), batched in zip(pairs, batch.paired_ratios(pairs), strict=True):
        one = stats.paired_ratio(a, b)
        assert one is not None and batched is not None
        for field in dataclasses.fields(stats.Ratio):
            x, y = getattr(one, field.name), getattr(batched, field.name)
            assert x == pytest.approx(y, rel=1e-12, abs=1e-15) or (x != x and y != y), field.name
