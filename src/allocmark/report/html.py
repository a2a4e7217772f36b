"""One self-contained HTML page: provenance, tables, plots (inline SVG), raw runs.

Every string comes into the page through Jinja's autoescaping; the SVG comes
from matplotlib, which escapes the text it writes.
"""

from __future__ import annotations

import datetime
import io
import json
from collections.abc import Sequence
from typing import Any

import jinja2
from markupsafe import Markup

from allocmark.answer import recommend, remedy, why
from allocmark.answer.analyze import Comparison
from allocmark.profile import View
from allocmark.report import answer, data, extra, fmt, interactive, matrix, profile_rows
from allocmark.report.plots import Plot
from allocmark.store import exchange

MAX_RAW_RUNS = 5000  # beyond this the page points to the CSV export


def render(report: data.ReportData, plots: Sequence[Plot]) -> str:
    """The page of a summary (tables, plots, runs) or of a profile (its tables and
    findings), with the campaign's provenance either way."""
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
    live: list[tuple[str, str, Markup]] = []
    if report.view == "profile":
        tables, legend = [_profile_table(v) for v in report.profiles], ""
    else:
        comp = data.comparison(report)
        tables = [_table(comp, m) for m in comp.metrics] if comp.rows else []
        legend = fmt.legend(comp) if comp.rows else ""
        tables += [_extra(t) for t in extra.extras(report)]
        recommendation = answer.blocks(
            recommend.answers(comp), why.lookup(comp), remedy.tries(comp)
        )
        baseline = comp.baseline or ""
        why_lines = answer.why_lines(why.explain(comp))
        verdicts = _verdict_counts(comp)
        matrices, leads = matrix.matrices(comp), matrix.leads(comp)
        live = interactive.figures(comp, report.series) if comp.rows else []
    # An interactive plot replaces its static drawing (kept for md and --plots).
    replaced = {"plot-time-vs-rss": "time-vs-rss", "plot-rss-over-time": "rss-over-time"}
    static = [p for p in plots if p.name not in {replaced[i] for i, _, _ in live}]
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
        answer_plots=[{"title": p.title, "svg": _svg(p)} for p in static if p.name in FIRST]
        + [{"title": t, "svg": div} for i, t, div in live if i == "plot-time-vs-rss"],
        plots=[{"title": p.title, "svg": _svg(p)} for p in static if p.name not in FIRST]
        + [{"title": t, "svg": div} for i, t, div in live if i != "plot-time-vs-rss"],
        plotly=interactive.script() if live else "",
        runs=exchange.run_rows(report.runs[:MAX_RAW_RUNS]),
        runs_total=len(report.runs),
        max_runs=MAX_RAW_RUNS,
    )


def _when(ts: float | None) -> str:
    if ts is None:
        return ""
    return datetime.datetime.fromtimestamp(ts, datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


FIRST = ("time-vs-rss", "why-time", "why-rss")  # the plots shown with the recommendation


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


VERDICT_WORDS = ("faster", "slower", "smaller", "larger", "same", "inconclusive")


def _allocator(row: dict[str, Any]) -> dict[str, Any]:
    env = json.loads(row.get("env_json") or "{}")
    return {
        "name": row["name"],
        "status": row["status"],
        "version": row.get("version") or "",
        "library": row.get("library") or "",
        "sha256": row.get("sha256") or "",
        "env": " ".join(f"{k}={v}" for k, v in env.items()),
        "lacks": ", ".join(json.loads(row.get("lacks_json") or "[]")),
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


def _svg(plot: Plot) -> Markup:
    buf = io.StringIO()
    plot.figure.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    # Drop the XML prolog and DOCTYPE: inline SVG in HTML starts at <svg.
    return Markup(text[text.index("<svg") :])
