"""What a comparison answers, derived once in one downward pass: every row's positions
(recommend.positions, each row's ratios judged as one Holm family), the positions over
all rows, the answers (recommend.answers), the whys of every decided difference
(why.explain), what to try (remedy.tries), the release-to-release changes
(releases.changes) and what hardening costs (hardening.costs). A plain frozen value:
every format draws it and none asks answer/ again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from allocmark.answer import hardening, recommend, releases, remedy, why
from allocmark.answer.analyze import Comparison
from allocmark.answer.recommend import Answer, Choice
from allocmark.answer.remedy import Try
from allocmark.answer.why import Why


@dataclass(frozen=True)
class Findings:
    positions: tuple[dict[str, Choice | str], ...]  # per row of the comparison, in its order
    overall: dict[str, Choice | str]  # over all rows (empty with one row or no baseline)
    answers: tuple[Answer, ...]  # one per row, then OVERALL
    whys: tuple[Why, ...]  # every decided difference explained, in row order
    tries: tuple[Try, ...]
    changes: tuple[releases.Change, ...]
    costs: tuple[hardening.Cost, ...]
    # Some row sets a non-baseline allocator against the baseline: a verdict matrix has
    # a cell to show (report/matrix.py draws it; a terminal shows it instead of tables).
    matrix: bool = False

    @property
    def explained(self) -> Mapping[tuple[str, str, str], Why]:
        """The whys by (row label, allocator, axis): what a sentence names."""
        return {(w.label, w.allocator, w.axis): w for w in self.whys}


NONE = Findings((), {}, (), (), (), (), (), False)


def of(comp: Comparison) -> Findings:
    """The comparison's findings (whys only where it carries its signals)."""
    if not comp.rows:
        return NONE
    found = recommend.per_row(comp)
    judged = comp.baseline is not None and len(comp.allocators) > 1
    whys = why.explain(comp, found)
    overall = recommend.overall_positions(comp, found) if judged and len(comp.rows) > 1 else {}
    return Findings(
        positions=tuple(found),
        overall=overall,
        answers=tuple(recommend.answers(comp, found)),
        whys=tuple(whys),
        tries=tuple(remedy.tries(comp, found, whys)),
        changes=tuple(releases.changes(comp)),
        costs=tuple(hardening.costs(comp)),
        matrix=judged and _measured(comp, found, overall),
    )


def _measured(
    comp: Comparison, found: list[dict[str, Choice | str]], overall: dict[str, Choice | str]
) -> bool:
    """Has some non-baseline allocator a position (or, not recommended, a ratio of its
    own) on some row?"""
    for row, p in [*zip(comp.rows, found, strict=True), (None, overall)]:
        for a, v in p.items():
            if a == comp.baseline:
                continue
            if isinstance(v, Choice) and (v.time is not None or v.rss is not None):
                return True
            if isinstance(v, str) and row is not None and recommend.FAILED not in v:
                cells = (row.speed(a), row.cells["peak_rss_kib"].get(a))
                if any(c is not None and c.ratio and c.verdict for c in cells):
                    return True
    return False
