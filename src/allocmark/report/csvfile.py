"""The report as CSV: the comparison's summaries, every run, or the profiler's rows."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Sequence
from typing import Any

from allocmark.answer.report import Report
from allocmark.report import rows


def render(report: Report) -> str:
    if report.view == "runs":
        return text(rows.run_rows(report.runs))
    if report.view == "profile":
        return text(rows.profile_table_rows(report.profiles))
    return text([dataclasses.asdict(r) for r in rows.summary_rows(report.comparison)])


def text(table: Sequence[dict[str, Any]]) -> str:
    """RFC 4180, every text field quoted (numbers are not) and made inert (`cell`)."""
    if not table:
        return ""
    buf = io.StringIO()
    writer = csv.DictWriter(
        buf, fieldnames=list(table[0]), lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC
    )
    writer.writeheader()
    for row in table:
        writer.writerow({k: cell(v) for k, v in row.items()})
    return buf.getvalue()


# In a field between double quotes, a shell still reads $, ` and \ (a CSV sourced by
# mistake, or pasted into a script), and a terminal reads control characters: each is
# written as \xNN, as text.printable writes controls. The JSON export keeps them as stored.
_INERT = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, ord("$"), ord("`"), ord("\\")]}
# A cell a spreadsheet would read as a formula starts with one of these (OWASP's list).
_FORMULA = ("=", "+", "-", "@")


def cell(value: Any) -> str | int | float:
    """A value as a CSV field: numbers as they are; text inert, with a leading ' where a
    spreadsheet would read a formula."""
    if value is None:
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    if isinstance(value, dict):  # params: one object in the value, JSON text in a cell
        value = json.dumps(value)
    text = str(value).translate(_INERT)
    return f"'{text}" if text.startswith(_FORMULA) else text
