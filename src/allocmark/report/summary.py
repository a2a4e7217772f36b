"""The summary export (`report --format json`) and its JSON Schema (`allocmark schema
summary`), drawn from one definition: the report value's own frozen dataclasses,
which pydantic reads as they are declared (answer/: Answer, Choice, Position, Tally,
Why, Factor, Try, Steady, Phase, Made, Change; model.Git; stats.Ratio and GeoMean).
A field added to one of them is in every export and in the schema at once; what a
class derives and the export carries (Why.explained, Why.mechanisms, Factor.degree,
Steady.text, Made.rest_kib) is a pydantic computed field where it is derived; what the export
leaves out says so where it is declared (Position.ratio).

The report adds two texts to the value, each a subclass here: an answer's sentence
(`Led.lead`) and a why's (`Said.text`), as report/answer.py words them. The rows
are the flat table the CSV has too (rows.SummaryRow). Every object is closed (the
schema forbids a field it does not name), but the campaign's own block (its
machine, plan and provenance, as stored).

Version 3: the document is the value's image: a remedy nests the why it answers
(version 2 flattened it), a why carries its label and the signals that moved
undecided, a release change its whole ratio, a revision its build; a verdict not
reached is "undecided" everywhere (version 2: "inconclusive" in the positions).
Version 4: a why names its mechanisms (the kernel's decided counts), a factor carries
the baseline's value and its mechanism.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from pydantic import ConfigDict, Field, TypeAdapter, with_config
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from allocmark import stats
from allocmark.answer import aging, composition, releases, remedy
from allocmark.answer.recommend import Answer
from allocmark.answer.report import Report
from allocmark.answer.why import Why
from allocmark.model import Git
from allocmark.report import answer, rows
from allocmark.schemas.exchange import SUMMARY_FORMAT

VERSION: Final = 4


@dataclass(frozen=True)
class Led(Answer):
    """An answer with its one sentence."""

    lead: str = ""


@dataclass(frozen=True)
class Said(Why):
    """A why with its sentence."""

    text: str = ""


# Infinity stays Infinity (an interval a test could not bound), as Python's json
# writes and reads it, rather than null where the schema says a number.
@with_config(ConfigDict(ser_json_inf_nan="constants", title="allocmark summary export"))
@dataclass(frozen=True)
class Summary:
    """An allocmark summary export: one campaign's report."""

    format: Literal["allocmark-summary"]
    version: Literal[4]
    campaign: dict[str, Any]  # id, name, machine, plan, ... as stored
    baseline: str | None
    allocators: tuple[str, ...]
    partial: tuple[str, ...]
    speedup: bool
    geomean: dict[str, dict[str, stats.GeoMean | None]]  # metric -> allocator
    margin: float
    interval: Literal["anytime-valid", "signed-rank", "welch"]
    recommendation: tuple[Led, ...]
    aging: tuple[aging.Steady, ...]
    made_of: tuple[composition.Made, ...]
    why: tuple[Said, ...]
    try_: Annotated[tuple[remedy.Try, ...], Field(serialization_alias="try")]
    revisions: dict[str, Git]
    releases: tuple[releases.Change, ...]
    rows: tuple[rows.SummaryRow, ...]


def value(report: Report) -> Summary:
    """The report's summary, as the export writes it."""
    comp, found = report.comparison, report.findings
    return Summary(
        format=SUMMARY_FORMAT,
        version=VERSION,
        campaign=report.campaign,
        baseline=comp.baseline,
        allocators=tuple(comp.allocators),
        partial=tuple(sorted(comp.partial)),
        speedup=comp.speedup,
        geomean={m: dict(by) for m, by in comp.geomean.items() if m in comp.metrics},
        margin=comp.margin,
        # How the ratios' intervals were made (docs/statistics.md: "anytime-valid" holds
        # at any stop, the planned looks' or the sequences'); a row's final_look: its
        # budget ended it undecided, and its last block was a look (looks.levels; the
        # exact test where its log ratios tie).
        interval=("anytime-valid" if comp.sequential else "signed-rank")
        if comp.paired
        else "welch",
        recommendation=tuple(
            Led(**_fields(a), lead=answer.lead(a, found.explained)) for a in found.answers
        ),
        aging=tuple(report.aging),
        made_of=tuple(report.made),
        why=tuple(Said(**_fields(w), text=answer.clause(w, most=None)) for w in found.whys),
        try_=tuple(found.tries),
        revisions=dict(comp.revisions),
        releases=tuple(found.changes),
        rows=tuple(rows.summary_rows(comp)),
    )


def render(report: Report) -> str:
    return _adapter().dump_json(value(report), by_alias=True, indent=1).decode() + "\n"


def json_schema() -> dict[str, Any]:
    """What `allocmark schema summary` prints: the export's shape, every object closed."""
    return _adapter().json_schema(mode="serialization", schema_generator=_Closed)


@functools.cache
def _adapter() -> TypeAdapter[Summary]:
    return TypeAdapter(Summary)


def _fields(value: Any) -> dict[str, Any]:
    """A dataclass's own fields, shallow (its nested values as they are)."""
    return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}


class _Closed(GenerateJsonSchema):
    """Every object of the export forbids fields it does not name: a reader learns of
    a field removed or renamed from the schema, not from a missing value."""

    def dataclass_args_schema(self, schema: core_schema.DataclassArgsSchema) -> JsonSchemaValue:
        out = super().dataclass_args_schema(schema)
        out["additionalProperties"] = False
        return out
