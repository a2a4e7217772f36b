"""Markdown, CSV and JSON copies of the comparison."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from allocmark.analyze import Comparison
from allocmark.report import fmt

FORMAT_VERSION = 1


FORMATS = ("md", "csv", "json")


def render(fmt: str, comp: Comparison, campaign: dict[str, Any]) -> str:
    """The comparison as text in one of FORMATS."""
    if fmt == "md":
        return markdown(comp)
    if fmt == "csv":
        return csv_text(comp)
    return json_text(comp, campaign)


def markdown(comp: Comparison) -> str:
    out = []
    for metric in comp.metrics:
        title = fmt.TITLES[metric]
        heads = ["workload", *(fmt.header(comp, a) for a in comp.allocators)]
        out.append(f"### {title}\n")
        out.append("| " + " | ".join(heads) + " |")
        out.append("|" + "---|" + "---:|" * len(comp.allocators))
        for row in comp.rows:
            cells = [fmt.cell(metric, row.cells[metric][a]) for a in comp.allocators]
            out.append("| " + " | ".join([row.label, *cells]) + " |")
        geo = [fmt.geomean(comp.geomean[metric][a]) for a in comp.allocators]
        out.append("| " + " | ".join(["**geomean**", *geo]) + " |\n")
    out.append(f"_{fmt.legend(comp)}_\n")
    return "\n".join(out)


_CSV_FIELDS = [
    "workload",
    "params",
    "allocator",
    "partial",
    "metric",
    "runs",
    "state",
    "median",
    "mean",
    "stdev",
    "min",
    "max",
    "ratio_to_baseline",
]


def csv_text(comp: Comparison) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=_CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for cell in _cells(comp):
        writer.writerow({k: "" if v is None else v for k, v in cell.items()})
    return buf.getvalue()


def json_text(comp: Comparison, campaign: dict[str, Any]) -> str:
    doc = {
        "format": "allocmark-report",
        "version": FORMAT_VERSION,
        "campaign": campaign,
        "baseline": comp.baseline,
        "allocators": list(comp.allocators),
        "partial": sorted(comp.partial),
        "cells": list(_cells(comp)),
        "geomean": comp.geomean,
    }
    return json.dumps(doc, indent=2) + "\n"


def _cells(comp: Comparison) -> list[dict[str, Any]]:
    out = []
    for row in comp.rows:
        for metric in comp.metrics:
            for a, c in row.cells[metric].items():
                s = c.summary
                out.append(
                    {
                        "workload": row.workload,
                        "params": json.dumps(dict(row.params)),
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
                        "ratio_to_baseline": c.ratio,
                    }
                )
    return out
