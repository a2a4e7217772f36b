"""The report as CSV: the comparison's summaries, every run, or the profiler's rows."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

from allocmark.answer.report import Report
from allocmark.report import rows


def render(report: Report) -> str:
    if report.view == "runs":
        return text(rows.run_rows(report.runs))
    if report.view == "profile":
        return text(rows.profile_table_rows(report.profiles))
    return text(rows.summary_rows(report.comparison))


def text(table: Sequence[dict[str, Any]]) -> str:
    if not table:
        return ""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(table[0]), lineterminator="\n")
    writer.writeheader()
    for row in table:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return buf.getvalue()
