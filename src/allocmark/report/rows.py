"""Flat rows of a report, shared by the CSV and JSON exports (and every run, as the
runs export has them: `compare` reads them back, store/exchange.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from allocmark import profile
from allocmark.answer.analyze import Cell, Comparison
from allocmark.model import StoredRun
from allocmark.report import fmt, profile_rows


def summary_rows(comp: Comparison) -> list[dict[str, Any]]:
    """One row per workload x parameters x metric x allocator."""
    return [
        _summary_row(comp, row.workload, row.params, metric, a, row.cells[metric][a])
        | {"final_look": row.final}
        for row in comp.rows
        for metric in comp.metrics
        for a in comp.allocators
    ]


# Export column -> attribute of the cell's Summary, and of its Ratio.
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


def _summary_row(
    comp: Comparison, workload: str, params: Any, metric: str, a: str, c: Cell
) -> dict[str, Any]:
    s, r = c.summary, c.ratio
    tested = r is not None and r.df > 0
    return {
        "workload": workload,
        "params": dict(params),
        "allocator": a,
        "partial": a in comp.partial,
        "metric": metric,
        "runs": c.runs,
        "state": c.state,
        **{k: getattr(s, f) if s else None for k, f in _SUMMARY_FIELDS.items()},
        **{k: getattr(r, f) if r else None for k, f in _RATIO_FIELDS.items()},
        "verdict": fmt.verdict_word(metric, c.verdict) or None,
        "ratio_margin": r.half_width if r and tested else None,
        "detectable": r.detectable if r and tested else None,
        "loose": c.loose,
    }


def summary_extra(comp: Comparison) -> dict[str, Any]:
    """What a JSON summary carries besides its rows."""
    geo = {
        m: {
            a: (None if g is None else {"value": g.value, "low": g.low, "high": g.high})
            for a, g in by_alloc.items()
        }
        for m, by_alloc in comp.geomean.items()
        if m in comp.metrics
    }
    return {
        "baseline": comp.baseline,
        "allocators": list(comp.allocators),
        "partial": sorted(comp.partial),
        "speedup": comp.speedup,
        "geomean": geo,
        "margin": comp.margin,
        # How the ratios' intervals were made (docs/statistics.md); a row's final_look:
        # its budget ended it undecided, and the exact test at alpha/2 narrowed it.
        "interval": ("anytime-valid" if comp.sequential else "signed-rank")
        if comp.paired
        else "welch",
    }


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
