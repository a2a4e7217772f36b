"""A bisect's budget and forecasts (verbs/bisect_budget.py), and how its answer says a
confirmation (verbs/bisect.py), on numbers made here: no runs."""

from __future__ import annotations

import math
import random

import pytest

from allocmark import stats, units
from allocmark.model import AllocatorSpec, Git, GitBuild
from allocmark.stats import fewblock, looks
from allocmark.verbs import bisect, bisect_budget as budget, bisect_step


def _half(n: int, sd: float, alpha: float) -> float:
    """The planned looks' half-width at look n (stats.looks), as the bisect's test."""
    return looks.critical(n, alpha) * sd / math.sqrt(n)


def test_blocks_for_is_the_first_look_whose_interval_clears_zero() -> None:
    sd, alpha = 0.15, 0.05 * 0.9 / 7
    n = budget.blocks_for(math.log(1.10), sd, alpha)
    assert n is not None and n in looks.LOOKS
    before = looks.LOOKS[looks.LOOKS.index(n) - 1]
    assert _half(before, sd, alpha) >= math.log(1.10) > _half(n, sd, alpha)
    smaller = budget.blocks_for(math.log(1.05), sd, alpha)
    assert smaller is not None and smaller > 3 * n  # half the change: about 4× the blocks
    assert budget.blocks_for(0.0, sd, alpha) is None
    assert budget.blocks_for(1e-9, sd, alpha) is None  # past the last look
    # log ratios that tie (a peak RSS in pages): the Bayes-factor sequence's share
    tied = budget.blocks_for(math.log(1.10), sd, alpha, plain=False)
    assert tied is not None
    half = [fewblock.t_star(k, alpha / stats.SPLIT) * sd / math.sqrt(k) for k in (tied - 1, tied)]
    assert half[0] >= math.log(1.10) > half[1]


def test_blocks_for_with_a_margin_counts_the_blocks_to_decide_the_same() -> None:
    sd, alpha, margin = 0.15, 0.006, math.log1p(0.03)
    same = budget.blocks_for(0.0, sd, alpha, margin)
    assert same is not None
    assert _half(same, sd, alpha) < margin
    assert budget.blocks_for(0.01, sd, alpha, margin) > same  # type: ignore[operator]


def test_each_decision_gets_its_weight_of_the_time_left() -> None:
    clock = budget.Clock(600.0, stretch=False)
    start = clock.deadline(1.0, 4 * budget.STEP_WEIGHT + budget.CONFIRM_WEIGHT) - clock.began
    assert start == pytest.approx(600 / 20, rel=0.01)  # 1 of 1 + 4 × 4.5 + 1
    last = clock.deadline(budget.CONFIRM_WEIGHT, 0.0) - clock.began
    assert last == pytest.approx(600, rel=0.01)  # the confirmation may take what is left
    assert budget.Clock(0.0, stretch=False).deadline(1.0, 5.0) == math.inf


def test_only_the_default_budget_stretches_and_never_past_its_cap() -> None:
    given = budget.Clock(600.0, stretch=False)
    assert given.room_for(100.0) and given.budget_s == 600  # it fits: a later share lends
    assert not given.room_for(1000.0) and given.budget_s == 600
    default = budget.Clock(600.0, stretch=True)
    assert default.room_for(100.0) and default.budget_s == 600
    assert default.room_for(1000.0)
    assert default.budget_s == pytest.approx(1200, rel=0.01)  # with 20 % to spare
    assert not default.room_for(budget.STRETCH_MOST_S) and default.budget_s < 1300
    assert not default.room_for(math.inf)
    assert budget.Clock(0.0, stretch=False).room_for(1e9)  # no budget: no limit


def _measured(mean: float, sd: float, n: int, block_s: float, seed: int) -> budget.Measured:
    rng = random.Random(seed)
    return budget.Measured(tuple(rng.gauss(mean, sd) for _ in range(n)), block_s)


def test_a_step_is_forecast_from_the_start_then_from_the_steps() -> None:
    start = _measured(math.log(1.10), 0.15, 400, 0.2, 1)
    first = budget.outlook(1, start, [], 0.006, 120.0)
    assert not first.measured
    assert first.sd == pytest.approx(math.sqrt(3) * start.sd)
    assert budget.effect(start, []) == pytest.approx(abs(start.mean))
    assert first.blocks == budget.blocks_for(start.mean, first.sd, 0.006)
    assert first.seconds == pytest.approx(first.blocks * 0.3)  # type: ignore[operator]
    # a step like good: its statistic sits near -log(BAD/GOOD), with its own noise
    step = _measured(-math.log(1.08), 0.40, 300, 0.25, 2)
    second = budget.outlook(2, start, [step], 0.006, 120.0)
    assert second.measured and second.sd == pytest.approx(step.sd, rel=0.01)
    weighted = (abs(start.mean) * 400 + abs(step.mean) * 300) / 700
    assert budget.effect(start, [step]) == pytest.approx(weighted)
    assert second.seconds == pytest.approx(second.blocks * 0.25)  # type: ignore[operator]


def test_the_rest_of_a_bisect_is_its_steps_and_its_confirmation() -> None:
    start = _measured(math.log(1.10), 0.15, 400, 0.2, 3)
    d = budget.effect(start, [])
    step = budget.blocks_for(d, math.sqrt(3) * start.sd, 0.006)
    pair = budget.blocks_for(d, start.sd, 0.006)
    assert step is not None and pair is not None
    assert budget.rest_s(start, [], 3, 0.006, True) == pytest.approx(3 * step * 0.3 + pair * 0.2)
    assert budget.rest_s(start, [], 0, 0.006, False) == 0
    flat = budget.Measured((0.1, -0.1) * 200, 0.2)  # no change: nothing decides the steps
    assert budget.rest_s(flat, [], 2, 0.006, True) == math.inf


def test_the_noise_line_says_what_the_start_measured() -> None:
    start = budget.Measured((0.1, 0.3, -0.1, 0.2, 0.0, 0.15), 0.5)
    text = budget.noise_text(start, 0.006)
    small = budget.blocks_for(math.log1p(budget.SMALL), start.sd, 0.006)
    assert f"varies by {start.sd:.3f} (sd of the start's 6 blocks, 0.50 s a block)" in text
    assert f"a 5% change needs about {small} blocks" in text


def _step(word: str, ratio: stats.Ratio | None, blocks: int = 40) -> bisect.Step:
    return bisect.Step(7, "tiny@c9", "c" * 40, "v1.0-9-gc", word, ratio, blocks, 0.006, 3.0)


def _ratio(value: float, low: float, high: float) -> stats.Ratio:
    return stats.Ratio(value, low, high, 0.0)


def test_a_culprit_confirmed_against_its_parent_says_its_change() -> None:
    found = bisect.Ended("v1.0-9-gc", "c" * 40, (), "first commit decided unlike good: X", 4, 60)
    spec = _spec("v1.0-8-gp")
    ok = bisect._confirmed(
        found, _step("differs (higher)", _ratio(1.09, 1.08, 1.10)), spec, True, 70, "peak RSS"
    )
    assert ok.confirmed is True
    assert ok.text.endswith(
        "; confirmed: peak RSS +9.0% [+8.0%, +10.0%] against its parent v1.0-8-gp in 40 blocks"
    )
    wrong_way = bisect._confirmed(
        found, _step("differs (lower)", _ratio(0.9, 0.85, 0.95)), spec, True, 70, "time"
    )
    assert wrong_way.confirmed is False and "; not confirmed: against its parent" in wrong_way.text
    same = bisect._confirmed(
        found, _step("same within ±3%", _ratio(1.0, 0.99, 1.01)), spec, True, 70, "time"
    )
    assert same.confirmed is False
    assert same.text.endswith(
        "not confirmed: against its parent v1.0-8-gp same within ±3% (+0.0% [-1.0%, +1.0%])"
    )
    big = bisect._confirmed(
        found, _step("differs (higher)", _ratio(16.6, 12.8, 21.1)), spec, True, 70, "time"
    )
    assert "; confirmed: time ×16.6 [×12.8, ×21.1] against its parent" in big.text
    open_ = bisect._confirmed(
        found, _step("undecided", _ratio(1.05, 0.98, 1.12), 90), spec, True, 70, "time"
    )
    assert "not confirmed: against its parent v1.0-8-gp undecided in 90 blocks" in open_.text


def _spec(describe: str) -> AllocatorSpec:
    origin = Git("/r", "p" * 40, describe, "p" * 40, GitBuild("make", "lib.so"), 8)
    return AllocatorSpec(name="tiny@p", git=origin)


def test_an_undecided_decision_says_the_blocks_and_the_budget_that_would_decide_it() -> None:
    clock = budget.Clock(600.0, stretch=False)
    start = _measured(math.log(1.04), 0.15, 200, 0.2, 5)  # the start: a small change
    share = bisect_step.Share(1.0, 4 * budget.STEP_WEIGHT + 1, left=4)
    n = budget.blocks_for(start.mean, start.sd, 0.006, math.log1p(0.03))
    differ = budget.blocks_for(start.mean, start.sd, 0.006)
    assert n is not None and n == differ  # +4 % lies past the ±3 % margin: never "same"
    before = clock.elapsed()
    text = bisect_step.what_more(start, 0.006, share, clock)
    after = clock.elapsed()
    assert text.startswith(f"at this estimate about {n} blocks would decide it (about ")
    # deciding it different, the rest of the bisect follows: the budget for all of it
    this, rest = bisect_step.needed_s(start, 0.006, share)
    said = {units.duration(t + this + rest, budget=True) for t in (before, after)}
    assert rest > 0 and text.rsplit("give --budget ", 1)[1] in said
    same = budget.Measured(tuple(0.005 * (-1) ** i for i in range(200)), 0.2)
    quiet = bisect_step.what_more(same, 0.006, share, clock)  # the same within ±3 % is near
    assert quiet.startswith("at this estimate about ") and "--budget" not in quiet
    flat = budget.Measured((0.0,) * 50, 0.2)
    assert "no number of blocks up to 100,000" in bisect_step.what_more(
        flat, 0.006, bisect_step.Share(budget.STEP_WEIGHT, 1.0, start=start), clock
    )
    assert "too few blocks" in bisect_step.what_more(
        budget.Measured((0.1,), 0.2), 0.006, share, clock
    )
