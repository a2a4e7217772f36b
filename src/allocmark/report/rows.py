"""Flat rows of a report, shared by the CSV and JSON exports (and every run, as the
runs export has them: `compare` reads them back, store/exchange.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from allocmark import profile
from allocmark.answer.analyze import Cell, Comparison, Row
from allocmark.model import StoredRun
from allocmark.report import fmt, profile_rows


@dataclass(frozen=True)
class SummaryRow:
    """One row x metric x allocator: its summary, and its ratio to the baseline (the
    CSV's columns, and the JSON summary's rows)."""

    workload: str
    params: dict[str, int | str]
    allocator: str
    partial: bool
    metric: str
    runs: int
    state: str
    median: float | None
    mean: float | None
    stdev: float | None
    min: float | None
    max: float | None
    ci_low: float | None
    ci_high: float | None
    outliers: int | None
    ratio_to_baseline: float | None
    ratio_low: float | None
    ratio_high: float | None
    p_value: float | None
    significant: bool | None
    verdict: str | None  # as the report says it: faster, slower, larger, same, undecided
    ratio_margin: float | None  # the interval's half-width, relative (0.03: +-3 %)
    detectable: float | None  # the smallest change the test could see
    loose: bool
    final_look: bool  # its budget ended it undecided: its last block was a final look


def summary_rows(comp: Comparison) -> list[SummaryRow]:
    """One row per workload x parameters x metric x allocator."""
    return [
        _summary_row(comp, row, metric, a, row.cells[metric][a])
        for row in comp.rows
        for metric in comp.metrics
        for a in comp.allocators
    ]


# SummaryRow's column -> attribute of the cell's Summary, and of its Ratio.
_SUMMARY_FIELDS = {
    "median": "median",
    "mean": "mean",
    "stdev": "stdev",
    "min": "minimum",
    "max": "maximum",
    "ci_low": "ci_low",
    "ci_high": "ci_high",
    "outliers": "outliers",
}
_RATIO_FIELDS = {
    "ratio_to_baseline": "value",
    "ratio_low": "low",
    "ratio_high": "high",
    "p_value": "p",
    "significant": "significant",
}


def _summary_row(comp: Comparison, row: Row, metric: str, a: str, c: Cell) -> SummaryRow:
    s, r = c.summary, c.ratio
    tested = r is not None and r.df > 0
    return SummaryRow(
        workload=row.workload,
        params=dict(row.params),
        allocator=a,
        partial=a in comp.partial,
        metric=metric,
        runs=c.runs,
        state=c.state,
        **{k: getattr(s, f) if s else None for k, f in _SUMMARY_FIELDS.items()},
        **{k: getattr(r, f) if r else None for k, f in _RATIO_FIELDS.items()},
        verdict=fmt.verdict_word(metric, c.verdict) or None,
        ratio_margin=r.half_width if r and tested else None,
        detectable=r.detectable if r and tested else None,
        loose=c.loose,
        final_look=row.final,
    )


def profile_table_rows(views: tuple[profile.View, ...]) -> list[dict[str, Any]]:
    """The profiler's side-by-side tables as rows: one per view x line x allocator."""
    return [
        {
            "workload": v.workload,
            "params": dict(v.params),
            "runs": v.runs,
            "section": section,
            "line": label.strip(),
            "allocator": a,
            "value": cell,
        }
        for v in views
        for section, label, cells in profile_rows.rows(v.summaries, v.baseline, v.runs)
        for a, cell in zip(v.allocators, cells, strict=True)
    ]


def run_rows(runs: Sequence[StoredRun]) -> list[dict[str, Any]]:
    """The rows of a runs export, as schemas/exchange.py's RunRow describes them
    (built directly: an export of 100,000 runs would spend seconds in the model)."""
    names = sorted({k for r in runs for k in r.metrics})
    labels = sorted({k for r in runs for k in r.labels})
    return [
        {
            "seq": r.seq,
            "role": r.role,
            "allocator": r.allocator,
            "workload": r.workload,
            "params": dict(r.params),
            "block": r.rep,  # the store's column is still named rep
            "status": r.status.value,
            "wall_s": r.wall_s,
            "user_s": r.user_s,
            "sys_s": r.sys_s,
            "maxrss_kib": r.maxrss_kib,
            "minflt": r.minflt,
            "majflt": r.majflt,
            "nvcsw": r.nvcsw,
            "nivcsw": r.nivcsw,
            "partial": r.partial,
            "detail": r.detail,
            **{f"metric.{k}": r.metrics.get(k) for k in names},
            **{f"label.{k}": r.labels.get(k) for k in labels},
        }
        for r in runs
    ]
