"""The answer: which allocator to use, per workload and over all of them.

From a comparison's ratios to the baseline (time, or throughput where time is
fixed, and peak RSS), each with its interval and verdict: the Pareto front of
time and peak RSS, the best for time and the best for memory (each only when it
beats the baseline significantly), and the trade-off in one sentence each. An
allocator that failed runs or leaves functions to glibc (partial) is never
recommended, and the block says why. With too little data it says so, and about
how many more blocks would decide.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from allocmark import stats
from allocmark.analyze import Cell, Comparison, Row, row_key

OVERALL = "all workloads"


@dataclass(frozen=True)
class Position:
    """One allocator against the baseline on one axis: a ratio where lower is
    better (time, or 1/throughput, or peak RSS), its interval and verdict."""

    value: float
    low: float
    high: float
    verdict: stats.Verdict
    blocks_to_decide: int | None = None  # about how many more blocks would decide


@dataclass(frozen=True)
class Choice:
    allocator: str
    time: Position | None
    rss: Position | None


@dataclass(frozen=True)
class Answer:
    scope: str  # a row's label, or OVERALL
    baseline: str
    front: tuple[Choice, ...]  # not dominated on (time, peak RSS), baseline included
    fastest: Choice | None  # faster than the baseline beyond the margin, the most
    smallest: Choice | None  # smaller peak RSS beyond the margin, the most
    undecided: tuple[Choice, ...]  # inconclusive on time or RSS: more runs could decide
    others: tuple[Choice, ...]  # the rest: off the front and decided
    excluded: tuple[tuple[str, str], ...]  # allocator, why it is not recommended
    margin: float = stats.DEFAULT_MARGIN  # what "beyond the margin" means here
    tied_time: tuple[Choice, ...] = ()  # winners `fastest` is not clearly better than
    tied_rss: tuple[Choice, ...] = ()


def answers(comp: Comparison) -> list[Answer]:
    """One answer per row, then one over all rows (when there are several)."""
    if comp.baseline is None or len(comp.allocators) < 2:
        return []
    per_row = [positions(comp, row) for row in comp.rows]
    out = [_answer(row.label, comp, p) for row, p in zip(comp.rows, per_row, strict=True)]
    if len(comp.rows) > 1:
        out.append(_answer(OVERALL, comp, _overall_positions(comp, per_row)))
    return out


def _answer(scope: str, comp: Comparison, positions: dict[str, Choice | str]) -> Answer:
    assert comp.baseline is not None
    excluded = [(a, why) for a, why in positions.items() if isinstance(why, str)]
    usable = [c for c in positions.values() if isinstance(c, Choice)]
    front = _front(usable, comp.margin)
    undecided = [c for c in usable if c.allocator != comp.baseline and _open(c)]
    fastest, tied_time = _best(usable, "time", comp.margin)
    smallest, tied_rss = _best(usable, "rss", comp.margin)
    # What is recommended is never called dominated, whatever the front says.
    picked = {c.allocator for c in (fastest, smallest, *tied_time, *tied_rss) if c}
    named = {c.allocator for c in [*front, *undecided]} | {comp.baseline} | picked
    return Answer(
        scope=scope,
        baseline=comp.baseline,
        front=tuple(front),
        fastest=fastest,
        smallest=smallest,
        undecided=tuple(undecided),
        others=tuple(c for c in usable if c.allocator not in named),
        excluded=tuple(sorted(excluded)),
        margin=comp.margin,
        tied_time=tied_time,
        tied_rss=tied_rss,
    )


def _open(c: Choice) -> bool:
    """More runs could change what is said about `c`."""
    return any(p is not None and p.verdict is stats.Verdict.INCONCLUSIVE for p in (c.time, c.rss))


def positions(comp: Comparison, row: Row) -> dict[str, Choice | str]:
    """Each allocator's time and peak RSS against the baseline on `row`, or why it
    has none to recommend (its runs failed; partial for this program)."""
    out: dict[str, Choice | str] = {}
    for a in comp.allocators:
        time_cell = row.cells["time_s"][a]
        speed = row.cells.get("ops_per_s", {}).get(a) if time_cell.fixed else time_cell
        rss_cell = row.cells["peak_rss_kib"][a]
        failed = next((c.state for c in (speed, rss_cell) if c is not None and c.failures), None)
        if failed:
            out[a] = f"its runs failed ({failed})"
            continue
        if a in comp.partial and (why := _partial(comp, row, a)):
            out[a] = why
            continue
        invert = comp.speedup or (time_cell.fixed and speed is not None)
        out[a] = Choice(a, _position(speed, comp, invert, a == comp.baseline),
                        _position(rss_cell, comp, False, a == comp.baseline))  # fmt: skip
    return out


def _partial(comp: Comparison, row: Row, a: str) -> str | None:
    """Why a partial allocator is not recommended for this row's program (None: the
    program calls none of what it lacks, so glibc never serves a block of it)."""
    lacks = comp.lacks.get(a, ())
    calls = comp.calls.get(row_key(row.workload, row.params))
    if calls is None:
        return (f"partial: it lacks {', '.join(lacks) or 'some functions'} (glibc would "
                "serve them), and whether this program calls them is not known")  # fmt: skip
    if used := sorted(set(calls) & set(lacks)):
        return (f"partial: it lacks {', '.join(used)}, which this program calls: glibc "
                "would serve (or free) blocks of it")  # fmt: skip
    return None


def _position(cell: Cell | None, comp: Comparison, invert: bool, base: bool) -> Position | None:
    if base:
        return Position(1.0, 1.0, 1.0, stats.Verdict.SAME)
    if cell is None or cell.ratio is None or cell.verdict is None:
        return None
    r = cell.ratio
    bounds = (r.value, r.low, r.high)
    value, low, high = stats.inverted(*bounds) if invert else bounds
    verdict = cell.verdict
    if invert and verdict in (stats.Verdict.BETTER, stats.Verdict.WORSE):
        # A speed-up or throughput ratio says better when it is above 1; here lower is better.
        verdict = verdict if (value < 1) == (verdict is stats.Verdict.BETTER) else _flip(verdict)
    return Position(value, low, high, verdict, _blocks_to_decide(r, comp.margin))


def _flip(v: stats.Verdict) -> stats.Verdict:
    return stats.Verdict.WORSE if v is stats.Verdict.BETTER else stats.Verdict.BETTER


def _blocks_to_decide(r: stats.Ratio, margin: float) -> int | None:
    """Blocks in all that would let the test see the difference it now sees (or,
    when the ratio is about 1, the equivalence margin) 80 % of the time: the
    interval's width shrinks as 1/sqrt(blocks)."""
    seen = r.detectable
    if r.df <= 0 or not math.isfinite(seen):
        return None
    n = r.df + 1
    effect = max(abs(math.log(r.value)), math.log1p(margin))
    needed = max(n * (math.log1p(seen) / effect) ** 2, r.blocks_needed)  # the exact test's least
    return math.ceil(needed) if needed > n else None


def _overall_positions(
    comp: Comparison, per_row: list[dict[str, Choice | str]]
) -> dict[str, Choice | str]:
    """Over all rows: the geometric means of the rows' ratios, with their intervals."""
    out: dict[str, Choice | str] = {}
    speed = "time_s" if comp.geomean.get("time_s") else "ops_per_s"
    for a in comp.allocators:
        if failed := next((p[a] for p in per_row if isinstance(p[a], str)), None):
            out[a] = f"on some workloads: {failed}"
            continue
        base = a == comp.baseline
        out[a] = Choice(a, _geo_position(comp, speed, a, base),
                        _geo_position(comp, "peak_rss_kib", a, base))  # fmt: skip
    return out


def _geo_position(comp: Comparison, metric: str, a: str, base: bool) -> Position | None:
    if base:
        return Position(1.0, 1.0, 1.0, stats.Verdict.SAME)
    g = comp.geomean.get(metric, {}).get(a)
    if g is None:
        return None
    invert = metric == "ops_per_s" or (metric == "time_s" and comp.speedup)
    bounds = (g.value, g.low, g.high)
    value, low, high = stats.inverted(*bounds) if invert else bounds
    return Position(value, low, high, stats.judge(low, high, comp.margin))


def beats(p: Position, q: Position, margin: float) -> bool:
    """`p` is clearly better (lower) than `q`: their intervals do not overlap and the
    estimates differ by more than the margin. The same rule decides the front, the
    dominated and ties, so that no answer says one thing with significance and
    another with point estimates."""
    return p.high < q.low and p.value * (1 + margin) < q.value


def _dominated(c: Choice, by: Choice, margin: float) -> bool:
    """Another allocator is clearly better on one axis and not clearly worse on the other."""
    assert c.time and c.rss and by.time and by.rss
    return (beats(by.time, c.time, margin) and not beats(c.rss, by.rss, margin)) or (
        beats(by.rss, c.rss, margin) and not beats(c.time, by.time, margin))  # fmt: skip


def _front(choices: Sequence[Choice], margin: float) -> list[Choice]:
    """Allocators that no other one dominates (see _dominated), fastest first."""
    both = [c for c in choices if c.time and c.rss]
    front = [c for c in both if not any(_dominated(c, o, margin) for o in both if o is not c)]
    return sorted(front, key=lambda c: c.time.value if c.time else 0.0)


def _best(
    choices: Sequence[Choice], axis: str, margin: float
) -> tuple[Choice | None, tuple[Choice, ...]]:
    """The allocator to recommend on `axis`: better than the baseline (its verdict) and
    by more than the margin (its estimate: practical significance), the lowest such;
    with the others it does not clearly beat (ties)."""
    winners = sorted((c for c in choices if (p := getattr(c, axis)) is not None
                      and p.verdict is stats.Verdict.BETTER and p.value * (1 + margin) < 1),
                     key=lambda c: getattr(c, axis).value)  # fmt: skip
    if not winners:
        return None, ()
    best = getattr(winners[0], axis)
    return winners[0], tuple(c for c in winners[1:] if not beats(best, getattr(c, axis), margin))
