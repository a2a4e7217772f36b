"""What a comparison answers, derived once in one downward pass: every row's positions
(recommend.positions, each row's ratios judged as one Holm family), the positions over
all rows, the answers (recommend.answers), the whys of every decided difference
(why.explain), what to try (remedy.tries), the release-to-release changes
(releases.changes) and what hardening costs (hardening.costs). A plain frozen value:
every format draws it and none asks answer/ again."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from allocmark.allocators import lineage
from allocmark.answer import hardening, recommend, releases, remedy, why
from allocmark.answer.analyze import Comparison
from allocmark.answer.recommend import Answer, Choice, Excluded
from allocmark.answer.remedy import Try
from allocmark.answer.why import Why


@dataclass(frozen=True)
class Findings:
    positions: tuple[dict[str, Choice | Excluded], ...]  # per row of the comparison, in its order
    overall: dict[str, Choice | Excluded]  # over all rows (empty with one row or no baseline)
    answers: tuple[Answer, ...]  # one per row, then OVERALL
    whys: tuple[Why, ...]  # every decided difference explained, in row order
    tries: tuple[Try, ...]
    changes: tuple[releases.Change, ...]
    costs: tuple[hardening.Cost, ...]
    # Each family with two or more versions among the allocators: its (allocator,
    # lineage) in version order, as the release changes compare them.
    families: tuple[tuple[str, tuple[tuple[str, lineage.Lineage], ...]], ...] = ()
    # Some row sets a non-baseline allocator against the baseline: a verdict matrix has
    # a cell to show (report/matrix.py draws it; a terminal shows it instead of tables).
    matrix: bool = False
    # A glance's (of()'s `brief`): `whys` holds the differences the answers' sentences
    # name, not every one (and `tries` what those call for).
    brief: bool = False

    @property
    def explained(self) -> Mapping[tuple[str, str, str], Why]:
        """The whys by (row label, allocator, axis): what a sentence names."""
        return {(w.label, w.allocator, w.axis): w for w in self.whys}


NONE = Findings((), {}, (), (), (), (), ())


def of(comp: Comparison, brief: bool = False) -> Findings:
    """The comparison's findings (whys only where it carries its signals). `brief`: a
    glance's, the matrix and its sentences: where there is a matrix to show, only the
    differences those sentences name are explained (every one of a campaign of 100 rows
    of 10 allocators takes seconds); where there is none, every one, as the tables
    shown instead say them all."""
    return explained(judged(comp), comp, brief)


def judged(comp: Comparison) -> Findings:
    """The comparison's answers, without their whys (explained() adds them): what says
    whether a glance needs the runs' signals at all (signals_wanted)."""
    if not comp.rows:
        return NONE
    found = recommend.per_row(comp)
    present = {a: lin for a, lin in comp.lineages.items() if a in comp.allocators}
    judged = comp.baseline is not None and len(comp.allocators) > 1
    overall = recommend.overall_positions(comp, found) if judged and len(comp.rows) > 1 else {}
    return Findings(
        positions=tuple(found),
        overall=overall,
        answers=tuple(recommend.answers(comp, found, overall)),
        whys=(),
        tries=(),
        changes=tuple(releases.changes(comp)),
        costs=tuple(hardening.costs(comp)),
        families=tuple((name, tuple(e)) for name, e in lineage.families(present).items()),
        matrix=judged and _measured(comp, found, overall),
    )


def explained(found: Findings, comp: Comparison, brief: bool = False) -> Findings:
    """`found` (judged(comp)) with the whys of its differences and what they call for."""
    if found is NONE:
        return NONE
    brief = brief and found.matrix
    positions = list(found.positions)
    whys = why.explain(comp, positions, named(found) if brief else None)
    tries = remedy.tries(comp, positions, whys)
    return dataclasses.replace(found, whys=tuple(whys), tries=tuple(tries), brief=brief)


def signals_wanted(found: Findings, brief: bool) -> bool:
    """Whether explained() reads the runs' signals: every why does, a glance's only
    those its sentences name (none, where no answer picks an allocator); nothing is
    explained without an answer (no baseline, or nothing set against it)."""
    return bool(found.answers) and (not (brief and found.matrix) or bool(named(found)))


def named(found: Findings) -> set[tuple[str, str, str]]:
    """The differences an answer's sentence names (report/answer.lead): its fastest's
    and its smallest's, or its pending leaders', on both axes."""
    return {
        (a.scope, c.allocator, axis)
        for a in found.answers
        for c in (a.fastest, a.smallest, *a.pending_time[:1], *a.pending_rss[:1])
        if c is not None
        for axis in ("time", "rss")
    }


def _measured(
    comp: Comparison,
    found: list[dict[str, Choice | Excluded]],
    overall: dict[str, Choice | Excluded],
) -> bool:
    """Has some non-baseline allocator a position (or, not recommended, a ratio of its
    own) on some row?"""
    for row, p in [*zip(comp.rows, found, strict=True), (None, overall)]:
        for a, v in p.items():
            if a == comp.baseline:
                continue
            if isinstance(v, Choice) and (v.time is not None or v.rss is not None):
                return True
            if isinstance(v, Excluded) and row is not None and not v.failed:
                cells = (row.speeds[a], row.cells["peak_rss_kib"].get(a))
                if any(c is not None and c.ratio and c.verdict for c in cells):
                    return True
    return False
