"""The anytime-valid interval (sequential.py): valid at every block a campaign may
stop at, nested as blocks come, consistent with its p, and able to say "same"."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings, strategies as st

from allocmark import stats
from allocmark.answer import analyze
from allocmark.model import StoredRun
from allocmark.report import rows
from allocmark.stats import fewblock, sequential
from tests.fakes import stored

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


def test_the_sequences_need_their_blocks_and_the_bayes_factor_fewest() -> None:
    """At alpha/3 the bets must win 9 blocks in a row; the Bayes-factor sequence is
    finite from 4 blocks that agree in size; a final look's exact test needs 7. (Log
    ratios that tie, as here: those that do not are the planned looks', test_looks.)"""
    assert sequential.interval([-math.log(2)] * 8, 0.05 / 3) == (-math.inf, math.inf)
    assert sequential.interval([-math.log(2)] * 9, 0.05 / 3)[1] < 0
    assert fewblock.sequence([-math.log(2)] * 3, 0.05 / 3) == (-math.inf, math.inf)
    assert fewblock.sequence([-math.log(2)] * 4, 0.05 / 3)[1] < 0
    three = stats.paired_ratio([1.0] * 3, [2.0] * 3, sequential=True)
    four = stats.paired_ratio([1.0] * 4, [2.0] * 4, sequential=True)
    assert three is not None and four is not None
    assert three.blocks_needed == 4 and three.half_width == math.inf
    assert stats.verdict(three, 0.03) is stats.Verdict.UNDECIDED
    assert stats.verdict(four, 0.03) is stats.Verdict.BETTER
    # Blocks that disagree in size: the signs alone until the exact look at 7.
    spread = [0.5, 0.9, 0.3, 0.7, 0.5, 0.95, 0.6]
    six = stats.paired_ratio(spread[:6], [1.0] * 6, sequential=True, final=True)
    seven = stats.paired_ratio(spread, [1.0] * 7, sequential=True, final=True)
    assert six is not None and seven is not None
    assert stats.verdict(six, 0.03) is stats.Verdict.UNDECIDED
    assert stats.verdict(seven, 0.03) is stats.Verdict.BETTER
    equal = stats.paired_ratio([5.0] * 8, [5.0] * 8, sequential=True)  # equal peak RSS
    assert equal is not None and stats.verdict(equal, 0.03) is stats.Verdict.SAME


def _budget_end(rng: random.Random, d: list[float]) -> int:
    """Where a budget ends a row: when its runs' durations add up to the budget. A
    block's duration is the sum of its two runs, the same whichever ran first, so the
    end says nothing about the log ratios' signs (here: |d| stands in for it)."""
    budget, spent = rng.uniform(2.0, 12.0), 0.0
    for n, x in enumerate(d, 1):
        spent += 0.1 + abs(x)
        if spent >= budget:
            return max(n, 2)
    return len(d)


def test_aa_is_false_at_most_5_percent_with_a_final_look_where_the_budget_ends() -> None:
    """Looks after every block at alpha/2 (the sequence), then one exact look at alpha/2
    where the budget ended the row: 800 bursty A/A rows. A row is false when either
    said faster or slower: the sequence at any block up to the end (its running
    maximum wealth) or the final exact test. Both together: at most 5 %."""
    rng = random.Random(2611)
    cells = 800
    false = 0
    for _ in range(cells):
        d = _bursty(rng, 150)
        end = _budget_end(rng, d)
        r = stats.paired_ratio(
            [math.exp(x) for x in d[:end]], [1.0] * end, sequential=True, final=True
        )
        assert r is not None and r.final
        false += r.p < stats.ALPHA
    assert false / cells <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / cells)


def test_the_final_look_narrows_the_sequence_and_finds_what_it_missed() -> None:
    """+5 % under 8 % noise, 40 blocks, counted in steps of 2 % (they tie): the
    sequence alone cannot tell; the final look, inside it, says slower."""
    rng = random.Random(5)
    d = [round(math.log(1.05) + rng.gauss(0, 0.08), 2) for _ in range(40)]
    a, b = [math.exp(x) for x in d], [1.0] * 40
    alone = stats.paired_ratio(a, b, sequential=True)
    final = stats.paired_ratio(a, b, sequential=True, final=True)
    assert alone is not None and final is not None
    assert alone.low <= final.low and final.high <= alone.high
    assert stats.verdict(alone, 0.03) is stats.Verdict.UNDECIDED
    assert stats.verdict(final, 0.03) is stats.Verdict.WORSE
    held = stats.at_alpha(final, 0.01)  # a Holm level: both halves at 0.005
    assert held.final and held.low < final.low and held.high > final.high


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


def _rows(allocator: str, workload: str, shift: float, noise: float) -> list[StoredRun]:
    """40 blocks, timed in steps of 1 % (their log ratios tie: the sequences' rows)."""
    rng = random.Random(f"{allocator}/{workload}")
    return [
        stored(
            allocator,
            math.exp(round(shift + rng.gauss(0, noise), 2)),
            rss=1000,
            workload=workload,
            rep=b,
        )
        for b in range(40)
    ]


def test_only_a_finished_campaigns_undecided_rows_get_the_final_look() -> None:
    """A row decided by the sequence keeps it (it stopped for what its blocks said); a
    row still undecided gets the exact look, and only once no block will be added."""
    runs = (
        _rows("glibc", "decided", 0.0, 0.01)
        + _rows("fast", "decided", -0.5, 0.01)
        + _rows("glibc", "open", 0.0, 0.0)
        + _rows("fast", "open", math.log(1.05), 0.08)
    )
    going = analyze.compare(runs, ["glibc", "fast"], "glibc", sequential=True)
    done = analyze.compare(runs, ["glibc", "fast"], "glibc", sequential=True, finished=True)
    by_workload = {r.workload: r for r in done.rows}
    assert not by_workload["decided"].final and by_workload["open"].final
    assert [r.final for r in going.rows] == [False, False]
    was = {r.workload: r.cells["time_s"]["fast"] for r in going.rows}
    now = {r.workload: r.cells["time_s"]["fast"] for r in done.rows}
    assert was["decided"] == now["decided"]
    assert was["open"].verdict is stats.Verdict.UNDECIDED
    assert now["open"].verdict is stats.Verdict.WORSE
    exported = {(r.workload, r.final_look) for r in rows.summary_rows(done)}
    assert exported == {("decided", False), ("open", True)}
