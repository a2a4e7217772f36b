"""Markdown, CSV and JSON: the comparison's summaries, and the raw runs.

JSON documents carry a format name and a version; `load` refuses any other.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from allocmark.analyze import Cell, Comparison
from allocmark.errors import UserError
from allocmark.model import RunStatus, StoredRun
from allocmark.report import fmt

FORMAT_VERSION = 1
SUMMARY_FORMAT = "allocmark-summary"
RUNS_FORMAT = "allocmark-runs"
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


def load(path: Path, kind: str) -> dict[str, Any]:
    """A JSON export of `kind`; another format or an unknown version is refused."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not a JSON file ({e})") from None
    if not isinstance(doc, dict) or doc.get("format") != kind:
        found = doc.get("format") if isinstance(doc, dict) else None
        raise UserError(f"{path}: expected an {kind} export, found format {found!r}")
    if doc.get("version") != FORMAT_VERSION:
        raise UserError(
            f"{path}: {kind} version {doc.get('version')!r} is not one this allocmark reads "
            f"({FORMAT_VERSION}); export it again with this version"
        )
    return doc


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
        "loose": c.loose,
    }


def run_rows(runs: Sequence[StoredRun]) -> list[dict[str, Any]]:
    names = sorted({k for r in runs for k in r.metrics})
    labels = sorted({k for r in runs for k in r.labels})
    return [
        {
            "seq": r.seq,
            "role": r.role,
            "allocator": r.allocator,
            "workload": r.workload,
            "params": json.dumps(dict(r.params)),
            "rep": r.rep,
            "status": r.status.value,
            "wall_s": r.wall_s,
            "user_s": r.user_s,
            "sys_s": r.sys_s,
            "maxrss_kib": r.maxrss_kib,
            "partial": r.partial,
            "detail": r.detail,
            **{f"metric.{k}": r.metrics.get(k) for k in names},
            **{f"label.{k}": r.labels.get(k) for k in labels},
        }
        for r in runs
    ]


def runs_from_rows(rows: Sequence[dict[str, Any]]) -> list[StoredRun]:
    """The runs of a runs export, as the store would give them."""
    try:
        return [_run_from_row(r) for r in rows]
    except (KeyError, ValueError, TypeError) as e:
        raise UserError(f"a runs export has a malformed row ({e}); export it again") from None


def _run_from_row(r: dict[str, Any]) -> StoredRun:
    return StoredRun(
        seq=int(r["seq"]),
        allocator=str(r["allocator"]),
        workload=str(r["workload"]),
        params=tuple((k, v) for k, v in json.loads(r["params"]).items()),
        rep=int(r["rep"]),
        status=RunStatus(r["status"]),
        wall_s=float(r["wall_s"]),
        user_s=float(r["user_s"]),
        sys_s=float(r["sys_s"]),
        maxrss_kib=int(r["maxrss_kib"]),
        metrics={
            k[7:]: float(v) for k, v in r.items() if k.startswith("metric.") and v is not None
        },
        detail=str(r.get("detail", "")),
        partial=bool(r.get("partial")),
        role=str(r.get("role", "measure")),
        labels={k[6:]: str(v) for k, v in r.items() if k.startswith("label.") and v is not None},
    )
