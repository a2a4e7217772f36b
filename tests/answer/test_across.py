"""One answer across workloads that agrees with its cells (answer/across.py)."""

from __future__ import annotations

import math
import random

from allocmark import stats
from allocmark.answer import across, analyze, findings, recommend
from allocmark.model import StoredRun
from allocmark.report import answer, matrix
from tests.fakes import stored

BLOCKS = 12


def _runs(allocator: str, workload: str, time: float, rss: int, noise: float) -> list[StoredRun]:
    rng = random.Random(f"{allocator}/{workload}")
    return [
        stored(
            allocator,
            time * rng.uniform(1 - noise, 1 + noise),
            rss=round(rss * rng.uniform(1 - noise, 1 + noise)),
            workload=workload,
            rep=b,
        )
        for b in range(BLOCKS)
    ]


def _comparison(cells: dict[str, dict[str, tuple[float, int, float]]]) -> analyze.Comparison:
    runs = [
        r
        for w, by in cells.items()
        for a, (t, rss, noise) in by.items()
        for r in _runs(a, w, t, rss, noise)
    ]
    return analyze.compare(runs, ["glibc", "big"], "glibc")


def test_larger_on_every_workload_is_decided_larger_over_them() -> None:
    """The demo's contradiction: tcmalloc decided larger on 9 of 9 workloads while the
    answer across them said 'not significant'. Noisy rows (wide intervals) with every
    row decided the same way make a decided answer, whatever their spread."""
    comp = _comparison(
        {
            "a": {"glibc": (1.0, 10000, 0.01), "big": (1.0, 11500, 0.01)},
            "b": {"glibc": (1.0, 10000, 0.01), "big": (1.0, 30000, 0.2)},
            "c": {"glibc": (1.0, 10000, 0.01), "big": (1.0, 40000, 0.3)},
        }
    )
    rows = [p["big"] for p in recommend.per_row(comp)]
    assert all(
        isinstance(c, recommend.Choice)
        and c.rss is not None
        and c.rss.verdict is stats.Verdict.WORSE
        for c in rows
    )
    overall = recommend.overall_positions(comp, recommend.per_row(comp))["big"]
    assert isinstance(overall, recommend.Choice) and overall.rss is not None
    assert overall.rss.verdict is stats.Verdict.WORSE
    assert overall.rss.tally == across.Tally(
        worse=3, low=overall.rss.tally.low, high=overall.rss.tally.high
    )
    assert overall.rss.tally is not None and overall.rss.tally.low is not None
    assert overall.rss.tally.low < 1.2 < 3.5 < (overall.rss.tally.high or 0)
    (top,) = [b for b in answer.blocks(recommend.answers(comp)) if b.scope == recommend.OVERALL]
    said = next(line for line in top.lines if "big:" in line).split("peak RSS", 1)[1]
    assert "not significant" not in said and "(of 3 workloads: larger on 3; decided +15%" in said
    mark = dict(matrix.matrices(comp, findings.of(comp))[1].rows)[matrix.ALL][1]
    assert mark.kind == matrix.WORSE


def test_mixed_workloads_are_counted_and_not_sent_for_more_blocks() -> None:
    comp = _comparison(
        {
            "a": {"glibc": (1.0, 10000, 0.01), "big": (0.7, 10000, 0.01)},
            "b": {"glibc": (1.0, 10000, 0.01), "big": (1.3, 10000, 0.01)},
        }
    )
    overall = recommend.overall_positions(comp, recommend.per_row(comp))["big"]
    assert isinstance(overall, recommend.Choice) and overall.time is not None
    t = overall.time.tally
    assert t is not None and (t.better, t.worse, t.same, t.undecided) == (1, 1, 0, 0)
    lines = answer.blocks(recommend.answers(comp))[0].lines
    said = " ".join(lines)
    assert "of 2 workloads: faster on 1, slower on 1" in said
    assert "would decide" not in lines[0]


def test_pooled_interval_covers_the_mean_of_the_rows_bounds() -> None:
    """Without a unanimous verdict the interval is the geometric mean of the rows'
    bounds at alpha/(2 m k): a row without an interval leaves it unbounded."""
    r1 = stats.paired_ratio([1.1, 1.12, 1.09, 1.11, 1.1, 1.1], [1.0] * 6)
    r2 = stats.paired_ratio([0.99, 1.01, 1.0, 1.02, 0.98, 1.0], [1.0] * 6)
    assert r1 is not None and r2 is not None
    cells = [
        across.RowVerdict(r1, False, stats.Verdict.WORSE),
        across.RowVerdict(r2, False, stats.Verdict.UNDECIDED),
    ]
    found = across.pooled(cells, 0.03, family=2)
    assert found is not None
    alpha = stats.ALPHA / (2 * 2 * 2)
    lows = [stats.at_alpha(r, alpha).low for r in (r1, r2)]
    assert math.isclose(found.low, math.sqrt(lows[0] * lows[1]))
    assert found.low <= found.value <= found.high
    one = stats.paired_ratio([1.1], [1.0])
    unbounded = across.pooled([*cells, across.RowVerdict(one, False, None)], 0.03, family=2)
    assert unbounded is not None and unbounded.high == math.inf
    assert unbounded.verdict is stats.Verdict.UNDECIDED
