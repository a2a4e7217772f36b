"""The report as JSON. Every document carries a format name and a version
(exchange.py): a summary, every run (importable by `compare`), or the profiles."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from allocmark.answer import aging, releases, remedy
from allocmark.answer.report import Report
from allocmark.report import answer, rows
from allocmark.schemas.exchange import FORMAT_VERSION, RUNS_FORMAT, SUMMARY_FORMAT, RunsExport
from allocmark.schemas.summary import SummaryExport

PROFILE_FORMAT = "allocmark-profile"
_SCHEMAS: dict[str, type[BaseModel]] = {SUMMARY_FORMAT: SummaryExport, RUNS_FORMAT: RunsExport}


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
    comp, found = report.comparison, report.findings
    # Fields were added (lead, margin, tied_*), none changed: the version stays.
    whys = found.explained
    answers = [
        _plain_answer(dataclasses.asdict(a)) | {"lead": answer.lead(a, whys)} for a in found.answers
    ]
    made = [
        dataclasses.asdict(m) | {"params": dict(m.params), "rest_kib": m.rest} for m in report.made
    ]
    memory = {
        "aging": [_steady(s) for s in report.aging],
        "made_of": made,
        "why": [answer.why_record(w) for w in found.whys],
        "try": [_try(t) for t in found.tries],
        "revisions": {
            a: {
                "repository": g.repository,
                "commit": g.commit,
                "describe": g.describe,
                "revision": g.revision,
            }
            for a, g in comp.revisions.items()
        },
        "releases": [_change(c) for c in found.changes],
    }
    return document(
        SUMMARY_FORMAT,
        report.campaign,
        rows.summary_rows(comp),
        rows.summary_extra(comp) | {"recommendation": answers} | memory,
    )


def _change(c: releases.Change) -> dict[str, Any]:
    r = c.ratio
    return {
        "family": c.family,
        "series": c.series,
        "older": c.older,
        "newer": c.newer,
        "row": c.row,
        "metric": c.metric,
        "verdict": c.verdict.value if c.verdict else None,
        "ratio": None
        if r is None
        else {"value": r.value, "low": r.low, "high": r.high, "alpha": r.alpha},
    }


def _try(t: remedy.Try) -> dict[str, object]:
    """A remedy as the JSON summary carries it."""
    p = t.position
    return {
        "workload": t.why.workload,
        "params": dict(t.why.params),
        "allocator": t.allocator,
        "axis": t.why.axis,
        "try": t.variant,
        "says": t.says,
        "measured": None
        if p is None
        else {"value": p.value, "low": p.low, "high": p.high, "verdict": p.verdict.value},
        "command": t.command,
    }


def _plain_answer(value: Any) -> Any:
    """An answer without its positions' ratios (the blocks' logs: in the rows already)."""
    if isinstance(value, dict):
        return {k: _plain_answer(v) for k, v in value.items() if k != "ratio"}
    if isinstance(value, list | tuple):
        return [_plain_answer(v) for v in value]
    return value


def _steady(s: aging.Steady) -> dict[str, Any]:
    return dataclasses.asdict(s) | {"params": dict(s.params), "text": s.text}


def document(
    kind: str, campaign: dict[str, Any], table: Sequence[dict[str, Any]], extra: dict[str, Any]
) -> str:
    """The export: every document is checked against its schema as it is written (the
    shape is defined once, in schemas/: a field added here and not there fails every
    export, not a test of one)."""
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
