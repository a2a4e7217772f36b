"""The report as Markdown: the comparison's tables, or the profiler's. Markdown lets
raw HTML through, and names come from a database or a command line: every `<` outside
a code block is written as `&lt;` (safe), so no stored name becomes markup."""

from __future__ import annotations

from allocmark.answer.analyze import Comparison
from allocmark.answer.findings import Findings
from allocmark.answer.report import Report
from allocmark.errors import UserError
from allocmark.profile import View
from allocmark.report import answer, extra, fmt, matrix, profile_rows


def render(report: Report) -> str:
    if report.view == "runs":
        raise UserError("--runs lists every run as csv or json: add --format csv (or json)")
    if report.view == "profile":
        return safe("\n".join(_profile(v) for v in report.profiles))
    return safe(
        "\n".join(
            [
                comparison(report.comparison, report.findings),
                *(_extra(t) for t in extra.extras(report)),
            ]
        )
    )


def safe(text: str) -> str:
    """`text` with no raw HTML and no link: outside fenced code blocks `<` becomes
    `&lt;` and `](` becomes `]\\(` (a stored name `[x](javascript:…)` is text, not a
    link); inside one, Markdown shows it as it is and no markup is read."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        out.append(line if fenced else line.replace("<", "&lt;").replace("](", "]\\("))
    return "\n".join(out)


def comparison(comp: Comparison, found: Findings) -> str:
    out = glance(comp, found) + recommendation(found)
    for metric in comp.metrics if comp.rows else ():
        heads = ["workload", *(fmt.header(comp, a) for a in comp.allocators)]
        out.append(f"### {fmt.TITLES[metric]}\n")
        out.append(_row(heads))
        out.append("|" + "---|" + "---:|" * len(comp.allocators))
        for row in comp.rows:
            cells = [
                fmt.cell(metric, row.cells[metric][a], a == comp.baseline) for a in comp.allocators
            ]
            out.append(_row([row.label, *cells]))
        geo = [fmt.geomean(comp.geomean[metric][a]) for a in comp.allocators]
        out.append(_row(["**geomean**", *geo]) + "\n")
    if comp.rows:
        out.append(f"_{fmt.legend(comp)}_\n")
    return "\n".join(out)


def glance(comp: Comparison, findings: Findings) -> list[str]:
    """The answer and the verdict matrices (matrix.py), before every detail."""
    found = matrix.matrices(comp, findings)
    if not found:
        return []
    leads = answer.leads(findings)
    out = [f"**Answer:** {leads[0][1]}\n"] if leads else []
    for m in found:
        out += [
            f"### {m.title}\n",
            _row(["", *m.allocators]),
            "|---|" + "---:|" * len(m.allocators),
        ]
        out += [
            _row([f"**{label}**" if label == matrix.ALL else label, *(x.shown for x in marks)])
            for label, marks in m.rows
        ]
        out.append("")
    out.append(f"_{matrix.legend(comp.margin, found, 'every value below')}_\n")
    out += [f"- **{scope}:** {line}" for scope, line in leads[1:]] + [""]
    return out


def recommendation(found: Findings) -> list[str]:
    """The answer first (recommend.py), as the HTML report has it."""
    blocks = answer.recommendation(found)
    if not blocks:
        return []
    out = ["## Recommendation\n", "_Against the baseline, with 95% intervals._\n"]
    for block in blocks:
        out += [f"**{block.scope}**\n", *(f"- {line}" for line in block.lines), ""]
    if lines := answer.why_lines(found.whys):
        out += [
            "### Why\n",
            "_Each decided difference: what moved with it, paired by block "
            "(95% Holm intervals)._\n",
            "```",
            *lines,
            "```",
            "",
        ]
    return out


def _profile(v: View) -> str:
    params = " ".join(f"{k}={val}" for k, val in v.params)
    runs = f", {v.runs} runs each (counts per run)" if v.runs > 1 else ""
    out = [
        f"### Profile: {v.workload} {params}{runs}".rstrip() + "\n",
        _row(["", *v.allocators]),
        "|---|" + "---:|" * len(v.allocators),
    ]
    section = None
    for sec, label, cells in profile_rows.rows(v.summaries, v.baseline, v.runs):
        if sec != section:
            out.append(_row([f"**{sec}**", *([""] * len(cells))]))
            section = sec
        out.append(_row([label.strip(), *cells]))
    out += ["", *(f"_note: {n}_" for n in v.notes), "", "**Findings**", ""]
    out += [f"- {line}" for line in v.findings] + [""]
    return "\n".join(out)


def _extra(t: extra.Extra) -> str:
    out = [f"### {t.title}\n", _row(list(t.heads)), "|---|" + "---:|" * (len(t.heads) - 1)]
    out += [_row(list(r)) for r in t.rows]
    out += ["", *(f"- {n}" if i else f"_{n}_" for i, n in enumerate(t.notes)), ""]
    return "\n".join(out)


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
