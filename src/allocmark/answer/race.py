"""The race of `tune`: which candidates another one beats clearly enough to drop
before the next round. A candidate is an allocator with one setting changed
("jemalloc{narenas=1}"); its allocator at its defaults is its reference.

The campaign (run/campaign.py) asks this every round; `tune` (verbs/tune.py) names
the candidates and reads the answer.
"""

from __future__ import annotations

from allocmark.answer.analyze import Comparison, Row, row_key
from allocmark.answer.recommend import Choice, Position, positions

OBJECTIVES = ("time", "rss", "pareto")


def default_of(candidate: str) -> str:
    """The allocator a candidate tunes: "jemalloc{narenas=1}" -> "jemalloc"."""
    return candidate.split("{")[0].removesuffix(":nothp")


def dominated(comp: Comparison, objective: str) -> dict[tuple[str, str], set[str]]:
    """Per row (workload, params JSON): the candidates another one beats with
    non-overlapping intervals on the objective (on both axes for "pareto"). The
    baseline is never dropped: every block's ratios are paired with it; nor is an
    allocator at its defaults: each of its settings is judged against it, block by
    block, and a default dropped after three blocks left [0.05–5.9] intervals."""
    return {row_key(r.workload, r.params): _losers(comp, r, objective) for r in comp.rows}


def _losers(comp: Comparison, row: Row, objective: str) -> set[str]:
    live = [c for c in positions(comp, row).values() if isinstance(c, Choice)]
    out = set()
    for c in live:
        if c.allocator not in (comp.baseline, default_of(c.allocator)) and any(
            _beats(o, c, objective) for o in live
        ):
            out.add(c.allocator)
    return out


def _beats(a: Choice, b: Choice, objective: str) -> bool:
    axes = ("time", "rss") if objective == "pareto" else (objective,)
    return all(_clearly_lower(getattr(a, x), getattr(b, x)) for x in axes)


def _clearly_lower(a: Position | None, b: Position | None) -> bool:
    return a is not None and b is not None and a.high < b.low
