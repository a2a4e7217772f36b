"""An allocator's place against the baseline, as an answer weighs it: on each axis
(time, or 1/throughput, and peak RSS) a ratio where lower is better, with its interval
and verdict (Position), and an allocator's pair of them (Choice); recommend.py makes
them from a comparison's ratios, or pooled across workloads (across.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from allocmark import stats
from allocmark.answer import across


@dataclass(frozen=True)
class Position:
    """One allocator against the baseline on one axis: a ratio where lower is
    better (time, or 1/throughput, or peak RSS), its interval and verdict."""

    value: float
    low: float
    high: float
    verdict: stats.Verdict
    blocks_to_decide: int | None = None  # about how many more blocks would decide
    # As measured, at its family's level (not turned over); not exported (the blocks'
    # logs: the summary's rows carry the ratio).
    ratio: Annotated[stats.Ratio | None, Field(exclude=True)] = None
    inverted: bool = False  # value, low, high are the ratio turned over (a speed-up)
    tally: across.Tally | None = None  # across workloads: the rows' verdicts counted
    # The verdict at the level a "use" needs (stats.RECOMMEND_ALPHA), where the estimate
    # is better than the baseline's beyond the margin; None elsewhere.
    firm: stats.Verdict | None = None

    @property
    def pending(self) -> bool:
        """Decided better for a verdict, beyond the margin, not yet for a "use"."""
        return stats.pending(self.verdict, self.firm)


@dataclass(frozen=True)
class Choice:
    allocator: str
    time: Position | None
    rss: Position | None


def lower_is_better(
    r: stats.Ratio,
    invert: bool,
    margin: float,
    blocks: int | None = None,
    firm: stats.Verdict | None = None,
) -> Position:
    """A ratio as a Position (a speed-up or throughput ratio turned over); `firm`: its
    verdict at the level a "use" needs (analyze.Cell.held)."""
    bounds = (r.value, r.low, r.high)
    value, low, high = stats.inverted(*bounds) if invert else bounds
    verdict = stats.verdict(r, margin, invert) if r.df > 0 else stats.Verdict.UNDECIDED
    return Position(value, low, high, verdict, blocks, r, invert, firm=firm)


def pooled(p: across.Pooled, firm: across.Pooled | None = None) -> Position:
    held = None if firm is None else firm.verdict
    return Position(p.value, p.low, p.high, p.verdict, tally=p.tally, firm=held)
