"""Markdown, CSV and JSON: the comparison's summaries, and the raw runs.

JSON documents carry a format name and a version (see exchange.py).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import Any

from allocmark.analyze import Cell, Comparison
from allocmark.errors import UserError
from allocmark.exchange import FORMAT_VERSION, RUNS_FORMAT, SUMMARY_FORMAT, run_rows
from allocmark.model import StoredRun
from allocmark.report import fmt

FORMATS = ("md", "csv", "json")


def render(fmt_name: str, comp: Comparison, campaign: dict[str, Any]) -> str:
    """The comparison as text in one of FORMATS."""
    if fmt_name == "md":
        return markdown(comp)
    if fmt_name == "csv":
        return csv_text(summary_rows(comp))
    return json_text(SUMMARY_FORMAT, campaign, summary_rows(comp), _summary_extra(comp))


def render_runs(fmt_name: str, runs: Sequence[StoredRun], campaign: dict[str, Any]) -> str:
    """Every stored run, one row each, in CSV or JSON."""
    rows = run_rows(runs)
    if fmt_name == "csv":
        return csv_text(rows)
    if fmt_name != "json":
        raise UserError(f"--format {fmt_name!r}: runs export as csv or json")
    return json_text(RUNS_FORMAT, campaign, rows, {})


def markdown(comp: Comparison) -> str:
    out = []
    for metric in comp.metrics:
        heads = ["workload", *(fmt.header(comp, a) for a in comp.allocators)]
        out.append(f"### {fmt.TITLES[metric]}\n")
        out.append("| " + " | ".join(heads) + " |")
        out.append("|" + "---|" + "---:|" * len(comp.allocators))
        for row in comp.rows:
            cells = [
                fmt.cell(metric, row.cells[metric][a], a == comp.baseline) for a in comp.allocators
            ]
            out.append("| " + " | ".join([row.label, *cells]) + " |")
        geo = [fmt.geomean(comp.geomean[metric][a]) for a in comp.allocators]
        out.append("| " + " | ".join(["**geomean**", *geo]) + " |\n")
    out.append(f"_{fmt.legend(comp)}_\n")
    return "\n".join(out)


def csv_text(rows: Sequence[dict[str, Any]]) -> str:
    if not rows:
        return ""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()


def json_text(
    kind: str, campaign: dict[str, Any], rows: Sequence[dict[str, Any]], extra: dict[str, Any]
) -> str:
    doc = {"format": kind, "version": FORMAT_VERSION, "campaign": campaign, **extra, "rows": rows}
    return json.dumps(doc, indent=1) + "\n"


def _summary_extra(comp: Comparison) -> dict[str, Any]:
    geo = {
        m: {a: (None if g is None else {"value": g.value, "low": g.low, "high": g.high})
            for a, g in by_alloc.items()}
        for m, by_alloc in comp.geomean.items() if m in comp.metrics
    }  # fmt: skip
    return {
        "baseline": comp.baseline,
        "allocators": list(comp.allocators),
        "partial": sorted(comp.partial),
        "speedup": comp.speedup,
        "geomean": geo,
    }


def summary_rows(comp: Comparison) -> list[dict[str, Any]]:
    """One row per workload x parameters x metric x allocator."""
    return [
        _summary_row(comp, row.workload, row.params, metric, a, row.cells[metric][a])
        for row in comp.rows
        for metric in comp.metrics
        for a in comp.allocators
    ]


def _summary_row(
    comp: Comparison, workload: str, params: Any, metric: str, a: str, c: Cell
) -> dict[str, Any]:
    s, r = c.summary, c.ratio
    return {
        "workload": workload,
        "params": json.dumps(dict(params)),
        "allocator": a,
        "partial": a in comp.partial,
        "metric": metric,
        "runs": c.runs,
        "state": c.state,
        "median": s.median if s else None,
        "mean": s.mean if s else None,
        "stdev": s.stdev if s else None,
        "min": s.minimum if s else None,
        "max": s.maximum if s else None,
        "ci_low": s.ci_low if s else None,
        "ci_high": s.ci_high if s else None,
        "outliers": s.outliers if s else None,
        "ratio_to_baseline": r.value if r else None,
        "ratio_low": r.low if r else None,
        "ratio_high": r.high if r else None,
        "p_value": r.p if r else None,
        "significant": r.significant if r else None,
        "verdict": fmt.verdict_word(metric, c.verdict) or None,
        "ratio_margin": r.half_width if r and r.df > 0 else None,
        "detectable": r.detectable if r and r.df > 0 else None,
        "loose": c.loose,
    }
