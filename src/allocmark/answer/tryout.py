"""`allocmark try`: one line per allocator (hyperfine style) of a one-command campaign."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from allocmark import stats
from allocmark.answer.analyze import Cell, Comparison, Row, as_cells, cell_of
from allocmark.model import AllocatorRuns, StoredRun


@dataclass(frozen=True)
class TryLine:
    """One allocator's line in `allocmark try` output (hyperfine style)."""

    allocator: str
    partial: bool
    state: str
    wall: stats.Summary | None
    user: stats.Summary | None
    sys: stats.Summary | None
    rss_kib: stats.Summary | None
    time: Cell | None = None  # the paired comparison with the baseline: ratio, verdict
    rss: Cell | None = None


def try_lines(
    data: Sequence[AllocatorRuns] | Sequence[StoredRun], comp: Comparison
) -> list[TryLine]:
    """A line per allocator of a one-command campaign, with its ratios to the baseline."""
    cells = {c.allocator: c for c in as_cells(data) if c.role == "measure"}
    row = comp.rows[0] if comp.rows else None
    return [_try_line(a, cells.get(a), row) for a in comp.allocators]


def _try_line(a: str, runs: AllocatorRuns | None, row: Row | None) -> TryLine:
    wall = cell_of(runs, "wall_s")

    def summ(column: str) -> stats.Summary | None:
        other = cell_of(runs, column)
        return other.summary if wall.summary is not None else None

    return TryLine(
        a,
        runs is not None and runs.partial,
        wall.state,
        wall.summary,
        summ("user_s"),
        summ("sys_s"),
        summ("maxrss_kib"),
        row.cells["time_s"].get(a) if row else None,
        row.cells["peak_rss_kib"].get(a) if row else None,
    )
