"""compare: two result sets cell by cell, judged as one family."""

from __future__ import annotations

import math
import random

import pytest

from allocmark.answer import compare
from allocmark.errors import UserError
from tests.fakes import stored


def test_compare_judges_its_cells_as_a_family() -> None:
    # Twenty cells of noise, each compared on its own at 95 %, would flag about one;
    # judged as a family, noise flags none in 95 % of such comparisons.
    rng = random.Random(11)
    runs_old, runs_new = [], []
    for cell in range(20):
        params = (("cell", cell),)
        runs_old += [stored("je", w, params=params) for w in _sample(rng, 1.0)]
        runs_new += [stored("je", w, params=params) for w in _sample(rng, 1.0)]
    verdicts = compare.compare(
        compare.ResultSet.of_runs("a", runs_old), compare.ResultSet.of_runs("b", runs_new)
    )
    assert [v.ratio.alpha for v in verdicts if v.ratio] == [pytest.approx(0.05 / 20)] * 20
    assert not [v for v in verdicts if v.verdict in ("worse", "better")]


def _sample(rng: random.Random, center: float, n: int = 10) -> list[float]:
    return [center * math.exp(rng.gauss(0, 0.03)) for _ in range(n)]


def _set(label: str, walls: list[float], allocator: str = "je") -> compare.ResultSet:
    return compare.ResultSet.of_runs(label, [stored(allocator, w) for w in walls])


def test_compare_detects_an_injected_20_percent_slowdown() -> None:
    rng = random.Random(7)
    old, new = _set("old", _sample(rng, 1.0)), _set("new", _sample(rng, 1.2))
    (v,) = compare.compare(old, new)
    assert v.verdict == "worse" and v.word == "slower"
    assert v.change == pytest.approx(0.2, abs=0.03)
    assert compare.failing([v], 0.05) == [v]
    assert compare.failing([v], 0.30) == []


def test_compare_does_not_flag_samples_of_one_distribution() -> None:
    flagged = 0
    for seed in range(40):
        rng = random.Random(seed)
        (v,) = compare.compare(_set("a", _sample(rng, 1.0)), _set("b", _sample(rng, 1.0)))
        flagged += v.verdict in ("worse", "better")
    assert flagged <= 5  # 5 % false positives expected: 2 of 40; 5 is far in the tail


def _campaign(label: str, speed: float, twin: float = 1.0, blocks: int = 8) -> compare.ResultSet:
    """glibc and a twin in blocks; `speed` is how slow the machine was that day."""
    rng = random.Random(label)
    runs = []
    for i in range(blocks):
        block = speed * math.exp(rng.gauss(0, 0.10))  # shared by the block's runs
        runs += [
            stored("glibc", block * math.exp(rng.gauss(0, 0.01)), rep=i),
            stored("twin", block * twin * math.exp(rng.gauss(0, 0.01)), rep=i),
        ]
    return compare.ResultSet.of_runs(label, runs, baseline="glibc")


def test_compare_with_a_control_cancels_the_machines_drift() -> None:
    # The same software, the machine 45 % slower the second time: absolute values
    # say "slower"; through the control the twin's ratio to glibc has not moved.
    old, new = _campaign("old", 1.0), _campaign("new", 1.45)
    verdicts = {v.allocator: v for v in compare.compare(old, new)}
    assert verdicts["glibc"].control and verdicts["glibc"].verdict == "control"
    assert verdicts["glibc"].ratio is not None and verdicts["glibc"].ratio.value > 1.2
    assert verdicts["twin"].verdict in ("same", "undecided")
    s = compare.summarize(list(verdicts.values()))
    assert (s.worse, s.better) == (0, 0) and s.drift is verdicts["glibc"]
    # Without the control in both sets the absolute comparison is all there is.
    lone = compare.ResultSet(new.label, tuple(c for c in new.cells if c.allocator == "twin"))
    assert compare.control_of(old, lone) is None


def test_compare_with_a_control_finds_a_real_change() -> None:
    old, new = _campaign("old", 1.0), _campaign("new", 1.45, twin=1.10)
    twin = next(v for v in compare.compare(old, new) if v.allocator == "twin")
    assert twin.verdict == "worse" and twin.change == pytest.approx(0.10, abs=0.03)


def test_compare_matches_two_single_allocator_sets() -> None:
    rng = random.Random(3)
    old = _set("je", _sample(rng, 1.0), "jemalloc")
    new = _set("je-nodecay", _sample(rng, 0.7), "jemalloc:nodecay")
    (v,) = compare.compare(old, new)
    assert v.allocator == "jemalloc → jemalloc:nodecay" and v.word == "faster"
    s = compare.summarize([v])
    assert (s.worse, s.better, s.same, s.worst) == (0, 1, 0, None)


def test_compare_matches_cells_across_a_parameter_the_catalog_added_later() -> None:
    rng = random.Random(5)
    old = _set("old", _sample(rng, 1.0))  # churn threads=1, from before idle_ms existed
    later = (("idle_ms", 0), ("threads", 1))
    new = compare.ResultSet.of_runs(
        "new", [stored("je", w, params=later) for w in _sample(rng, 1.3)]
    )
    (v,) = compare.compare(old, new)
    assert v.params == (("threads", 1),) and v.word == "slower"
    varied = compare.ResultSet.of_runs(
        "v",
        [  # a sweep of the new parameter: no match
            stored("je", 1.0, params=(("idle_ms", i), ("threads", 1))) for i in (0, 100)
        ],
    )
    with pytest.raises(UserError, match="no cell in common"):
        compare.compare(old, varied)


def test_compare_without_common_cells_is_a_usage_error() -> None:
    a = _set("a", [1.0, 1.0], "x")
    b = compare.ResultSet.of_runs("b", [stored("x", 1.0, workload="other")])
    with pytest.raises(UserError, match="no cell in common"):
        compare.compare(a, b)
