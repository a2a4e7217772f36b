"""What a comparison answers, derived once (answer/findings.py): the same answers, whys
and tries as each part computed on its own; a plain value (no store handle, no memo,
no callback) that every format draws; `matrix` says whether a verdict matrix has a
cell to show, as report/matrix.py draws it."""

from __future__ import annotations

import dataclasses
import re
import sys
import typing

import pytest

from allocmark.answer import analyze, findings, recommend, remedy, report, why
from allocmark.model import RunStatus, StoredRun
from allocmark.report import matrix
from tests.answer.test_why import _comparison, _runs
from tests.fakes import stored


def _planted() -> analyze.Comparison:
    """A slower allocator (system CPU, most of it) and a larger one (anonymous memory)."""
    return _comparison(
        _runs("glibc", 0.9, 0.1, 8000, 2000, 1000),
        _runs("mmapper", 0.9, 0.4, 8000, 2000, 5000),
        _runs("padder", 0.9, 0.1, 13000, 2000, 1000),
    )


def test_the_findings_are_what_each_part_says_on_its_own() -> None:
    comp = _planted()
    found = findings.of(comp)
    assert list(found.positions) == recommend.per_row(comp)
    assert list(found.answers) == recommend.answers(comp)
    assert list(found.whys) == why.explain(comp)
    assert list(found.tries) == remedy.tries(comp)
    assert {(w.allocator, w.axis) for w in found.whys} == {("mmapper", "time"), ("padder", "rss")}
    label = comp.rows[0].label
    assert found.explained[(label, "mmapper", "time")].factors[0].signal == "sys_s"
    assert found.overall == {}  # one row: nothing to pool
    assert found.matrix


def test_without_signals_nothing_is_explained_and_the_answer_stands() -> None:
    comp = dataclasses.replace(_planted(), signals=())
    found = findings.of(comp)
    assert found.whys == () and found.tries == ()
    assert found.answers == findings.of(_planted()).answers


def _fields(cls: type) -> dict[str, object]:
    # The module's names, not the class's: a field's default (aging=()) shadows its type's.
    return typing.get_type_hints(cls, vars(sys.modules[cls.__module__]), {})


@pytest.mark.parametrize("cls", [findings.Findings, report.Report, analyze.Comparison])
def test_the_read_side_values_are_plain_and_frozen(cls: type) -> None:
    """No store handle, memo or callback inside: a format draws the value, and
    nothing it draws runs code of answer/ or reads the store."""
    assert dataclasses.fields(cls) and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    for name, hint in _fields(cls).items():
        text = str(hint)
        assert not re.search(r"\b(Callable|Store)\b", text), (cls.__name__, name, text)
    assert not {"kept", "read_signals"} & {f.name for f in dataclasses.fields(cls)}


def test_a_matrix_is_shown_exactly_where_the_findings_say_so() -> None:
    """findings.matrix is what the terminal decides on (glance or tables) and what
    report/matrix.py draws: never a glance without a matrix, nor tables in its stead."""
    two = [stored("glibc", 1.0, rep=b) for b in range(3)] + [
        stored("je", 0.5, rep=b) for b in range(3)
    ]
    alone: list[StoredRun] = [stored("glibc", 1.0, rep=b) for b in range(3)]
    failed = [r._replace(status=RunStatus.CRASHED) if r.allocator == "je" else r for r in two]
    cases = [
        _planted(),
        analyze.compare(two, ["glibc", "je"], "glibc"),
        analyze.compare(alone, ["glibc"], "glibc"),
        analyze.compare(two, ["glibc", "je"], None),
        analyze.compare(failed, ["glibc", "je"], "glibc"),
        analyze.NOTHING,
    ]
    seen = []
    for comp in cases:
        found = findings.of(comp)
        assert found.matrix == bool(matrix.matrices(comp, found)), comp.allocators
        seen.append(found.matrix)
    assert seen == [True, True, False, False, False, False]


def test_a_glance_explains_what_its_sentences_name_and_reads_no_more() -> None:
    """A terminal's glance (brief) shows the matrix and one sentence per row: only the
    differences those sentences name are explained, and where they name none the
    runs' signals are not read at all; without a matrix, every difference is."""
    picked = _comparison(
        _runs("glibc", 0.9, 0.4, 8000, 2000, 5000),
        _runs("quick", 0.9, 0.1, 8000, 2000, 1000),
        _runs("padder", 0.9, 0.4, 13000, 2000, 5000),
    )
    every = findings.of(picked)
    brief = findings.of(picked, brief=True)
    assert {(w.allocator, w.axis) for w in every.whys} >= {("quick", "time"), ("padder", "rss")}
    assert brief.brief and {(w.allocator, w.axis) for w in brief.whys} == {("quick", "time")}
    assert findings.named(brief) == {(picked.rows[0].label, "quick", a) for a in ("time", "rss")}
    assert findings.signals_wanted(findings.judged(picked), brief=True)
    kept = _planted()  # slower and larger only: "keep glibc" names no allocator
    assert not findings.signals_wanted(findings.judged(kept), brief=True)
    assert findings.signals_wanted(findings.judged(kept), brief=False)
    unmatched = analyze.compare(
        [stored("glibc", 1.0, rep=b) for b in range(3)], ["glibc"], "glibc"
    )  # one allocator: nothing set against the baseline, so no why to read signals for
    assert not findings.signals_wanted(findings.judged(unmatched), brief=False)
