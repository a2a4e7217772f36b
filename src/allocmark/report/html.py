"""One self-contained HTML page: the answer and its matrices first, then the
recommendation and the figures, then, folded away until clicked, the whys, the
tables, the runs and the provenance.

Every string comes into the page through Jinja's autoescaping; the figures are JSON
(figures.py) that plotly.js, carried once in the page (vendor/), draws in the browser.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Sequence
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup

from allocmark.answer.analyze import Comparison
from allocmark.answer.report import Report
from allocmark.labels import value_text
from allocmark.model import StoredAllocator
from allocmark.profile import View
from allocmark.report import answer, charts, extra, figures, fmt, matrix, profile_rows, rows
from allocmark.report.figures import Figure

MAX_RAW_RUNS = 1000  # beyond this the page points to the CSV export
# The runs' columns a reader compares; the export (--runs) has every metric and label.
RUN_COLUMNS = (
    "seq", "role", "allocator", "workload", "params", "block", "status", "wall_s", "user_s",
    "sys_s", "maxrss_kib", "metric.ops_per_s", "metric.overhead_ratio", "detail",
)  # fmt: skip


def render(report: Report) -> str:
    """The page of a summary (answer, figures, tables, runs) or of a profile (its
    tables and findings), with the campaign's provenance either way."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("allocmark", "report/templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    campaign = report.campaign
    recommendation: list[answer.Block] = []
    baseline = ""
    verdicts: list[dict[str, Any]] = []
    matrices: list[matrix.Matrix] = []
    leads: list[tuple[str, str]] = []
    why_lines: list[str] = []
    drawn: list[Figure] = []
    if report.view == "profile":
        tables, legend = [_profile_table(v) for v in report.profiles], ""
    else:
        comp, found = report.comparison, report.findings
        tables = [_table(comp, m) for m in comp.metrics] if comp.rows else []
        legend = fmt.legend(comp) if comp.rows else ""
        tables += [_extra(t) for t in extra.extras(report)]
        recommendation = answer.recommendation(found)
        baseline = comp.baseline or ""
        why_lines = answer.why_lines(found.whys)
        verdicts = _verdict_counts(comp)
        matrices, leads = matrix.matrices(comp, found), answer.leads(found)
        drawn = figures.page(charts.every(comp, found, report.series))
    return env.get_template("report.html.j2").render(
        title=f"allocmark: {campaign.get('name', '')} (campaign {campaign.get('id', '?')})",
        created=_when(campaign.get("created")),
        campaign=campaign,
        machine=campaign.get("machine", {}),
        allocators=[_allocator(a) for a in report.allocators],
        tables=tables,
        legend=legend,
        recommendation=recommendation,
        why_lines=why_lines,
        baseline=baseline,
        verdicts=verdicts,
        matrices=matrices,
        leads=leads,
        matrix_legend=matrix.legend(comp.margin, matrices, "every value below") if matrices else "",
        all_label=matrix.ALL,
        verdict_words=VERDICT_WORDS,
        tables_open=report.view == "profile",  # a profile's page is its tables
        figures=drawn,
        figure_data=_figure_data(drawn),
        plotly=_plotly() if drawn else "",
        runs=_runs(report),
        runs_total=len(report.runs),
        max_runs=MAX_RAW_RUNS,
    )


def _plotly() -> Markup:
    """plotly.js's basic bundle, for the page's one <script> element of it."""
    js = resources.files("allocmark.report").joinpath("vendor/plotly-basic.min.js").read_text()
    return Markup(js.replace("</script", "<\\/script"))  # nosec: a known library (vendor/)


def _runs(report: Report) -> list[dict[str, Any]]:
    """The first MAX_RAW_RUNS runs, in RUN_COLUMNS (those the campaign has)."""
    every = rows.run_rows(report.runs[:MAX_RAW_RUNS])
    shown = [k for k in RUN_COLUMNS if every and k in every[0]]
    out = [{k: r[k] for k in shown} for r in every]
    for r, run in zip(out, report.runs, strict=False):
        if "params" in r:  # the row's label, shorter than the export's JSON
            r["params"] = " ".join(f"{k}={value_text(v)}" for k, v in run.params)
    return out


def _figure_data(drawn: Sequence[Figure]) -> Markup:
    """The figures' JSON for a <script type="application/json">: "<" written as its
    escape, so no string in it can end the element."""
    spec = {f.id: {"data": f.data, "layout": f.layout} for f in drawn}
    text = json.dumps(spec, separators=(",", ":"), allow_nan=False)
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _when(ts: float | None) -> str:
    if ts is None:
        return ""
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def _verdict_counts(comp: Comparison) -> list[dict[str, Any]]:
    """Per allocator, how many rows said what about time and peak RSS."""
    out = []
    for a in comp.allocators:
        if a == comp.baseline:
            continue
        counts: dict[str, int] = {}
        for row in comp.rows:
            for metric in ("time_s", "peak_rss_kib"):
                c = row.cells[metric][a]
                if c.verdict is not None and not c.fixed:
                    word = fmt.verdict_word(metric, c.verdict)
                    counts[word] = counts.get(word, 0) + 1
        out.append({"allocator": a, "counts": counts})
    return out


VERDICT_WORDS = ("faster", "slower", "smaller", "larger", "same", "undecided")


def _allocator(a: StoredAllocator) -> dict[str, Any]:
    return {
        "name": a.name,
        "status": a.status,
        "version": a.version or "",
        "library": a.library or "",
        "sha256": a.sha256 or "",
        "env": " ".join(f"{k}={v}" for k, v in a.env.items()),
        "lacks": ", ".join(a.lacks),
    }


def _table(comp: Comparison, metric: str) -> dict[str, Any]:
    rows = []
    for row in comp.rows:
        cells = []
        for a in comp.allocators:
            c = row.cells[metric][a]
            sort = c.summary.median if c.summary else None
            cells.append(
                {
                    "text": fmt.cell(metric, c, a == comp.baseline),
                    "sort": sort,
                    "failed": c.summary is None,
                    "cls": "",
                }
            )
        rows.append({"label": row.label, "cells": cells})
    geo = [fmt.geomean(comp.geomean[metric][a]) for a in comp.allocators]
    heads = [fmt.header(comp, a) for a in comp.allocators]
    return {
        "title": fmt.TITLES[metric],
        "first": "workload",
        "heads": heads,
        "rows": rows,
        "geomean": geo,
        "findings": [],
    }


def _extra(t: extra.Extra) -> dict[str, Any]:
    classes = t.classes or tuple(("",) * len(r) for r in t.rows)
    rows = [
        {
            "label": r[0],
            "cells": [
                {"text": c, "sort": fmt.number(c), "failed": False, "cls": k}
                for c, k in zip(r[1:], cls[1:], strict=True)
            ],
        }
        for r, cls in zip(t.rows, classes, strict=True)
    ]
    return {
        "title": t.title,
        "first": t.heads[0],
        "heads": list(t.heads[1:]),
        "rows": rows,
        "geomean": [],
        "findings": list(t.notes),
    }


def _profile_table(v: View) -> dict[str, Any]:
    params = " ".join(f"{k}={val}" for k, val in v.params)
    rows = []
    for section, label, cells in profile_rows.rows(v.summaries, v.baseline, v.runs):
        texts = [{"text": c, "sort": None, "failed": False, "cls": ""} for c in cells]
        rows.append({"label": f"{section}: {label.strip()}", "cells": texts})
    return {
        "title": f"Profile: {v.workload} {params}".rstrip(),
        "first": "",
        "heads": list(v.allocators),
        "rows": rows,
        "geomean": [],
        "findings": [*v.findings, *v.notes],
    }
