"""The report as JSON. Every document carries a format name and a version
(exchange.py): a summary (summary.py: the report value's image), every run
(importable by `compare`), or the profiles."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from allocmark.answer.report import Report
from allocmark.report import rows, summary
from allocmark.schemas.exchange import FORMAT_VERSION, RUNS_FORMAT, RunsExport

PROFILE_FORMAT = "allocmark-profile"
_SCHEMAS: dict[str, type[BaseModel]] = {RUNS_FORMAT: RunsExport}


def render(report: Report) -> str:
    if report.view == "runs":
        return document(RUNS_FORMAT, report.campaign, rows.run_rows(report.runs), {})
    if report.view == "profile":
        views = [_view(v) for v in report.profiles]
        return document(
            PROFILE_FORMAT,
            report.campaign,
            rows.profile_table_rows(report.profiles),
            {"profiles": views},
        )
    return summary.render(report)


def document(
    kind: str, campaign: dict[str, Any], table: Sequence[dict[str, Any]], extra: dict[str, Any]
) -> str:
    """A runs or profile export; a runs export is checked against the model `compare`
    reads it with as it is written (schemas/exchange.py: a column added here and not
    there fails every export, not a test of one)."""
    doc = {"format": kind, "version": FORMAT_VERSION, "campaign": campaign, **extra, "rows": table}
    text = json.dumps(doc, indent=1, default=_plain) + "\n"
    if kind in _SCHEMAS:
        _SCHEMAS[kind].model_validate_json(text)
    return text


def _plain(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _view(v: Any) -> dict[str, Any]:
    """A profile view with its numbers (the summaries), its findings and notes."""
    return {
        "workload": v.workload,
        "params": dict(v.params),
        "runs": v.runs,
        "baseline": v.baseline,
        "findings": v.findings,
        "notes": v.notes,
        "summaries": [dataclasses.asdict(s) for s in v.summaries],
    }
