"""Release to release: each version of a family against the one before it.

For every family with two or more versions in a campaign (allocators/lineage.py:
crate builds, Debian's builds and a user's git revisions each a line of their own),
each consecutive pair is compared on every row, on speed (time, or throughput where
the time is fixed) and on peak RSS: the newer version's values over the older's,
paired by block like every ratio of the report (analyze.row_ratio). A family's
ratios are judged as one family by Holm's rule, so that noise alone makes any of
its changes "decided" at most 5 % of the time however many versions it has; the
verdict is the report's (faster/slower/same within the margin/undecided). This is
the seed's version table with the noise taken out: a single run per version, as the
seed had, cannot tell Ruby's ±7 % peak-RSS noise from a change.

A campaign whose question is release to release (request.Precision.question "releases":
a suite that says so, a user's revisions alone) adds blocks until every change is decided:
`open_versions` says, per row, which versions a change still open needs in the next
block (run/rounds.py), and `deciding` which ratios decide the row (answer/forecast.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from allocmark import stats
from allocmark.allocators import lineage
from allocmark.answer import analyze

SPEED, MEMORY = "speed", "peak_rss_kib"


@dataclass(frozen=True)
class Change:
    """The newer version over the older on one row and metric."""

    family: str
    series: str  # "crate", "Debian", "git", ...
    older: str  # allocator names
    newer: str
    row: str  # the row's label
    metric: str  # "time_s", "ops_per_s" (a fixed-time row's speed) or "peak_rss_kib"
    ratio: stats.Ratio | None  # newer / older (None: a side has no numbers)
    verdict: stats.Verdict | None

    @property
    def decided(self) -> bool:
        return self.verdict is not None and self.verdict.differs


# The last comparison's changes: a round of a release-to-release campaign asks for them
# twice (run/rounds.py's blocks, forecast.py's forecast), each a sequential ratio per
# change. A Comparison is frozen, and this holds it, so its identity names it.
_LAST: list[tuple[analyze.Comparison, tuple[Change, ...]]] = []


def changes(comp: analyze.Comparison) -> list[Change]:
    """Every consecutive pair of every line of every family, per row and metric."""
    if _LAST and _LAST[0][0] is comp:
        return list(_LAST[0][1])
    found = _changes(comp)
    _LAST[:] = [(comp, tuple(found))]
    return found


def _present(comp: analyze.Comparison) -> dict[str, lineage.Lineage]:
    """The lineages of the allocators the comparison has."""
    return {a: lin for a, lin in comp.lineages.items() if a in comp.allocators}


def _changes(comp: analyze.Comparison) -> list[Change]:
    out: list[Change] = []
    for family, kinds in lines(_present(comp)).items():
        raw = [
            _pending(comp, family, kind, old, new, row)
            for kind, names in kinds.items()
            for old, new in itertools.pairwise(names)
            for row in comp.rows
        ]
        out += _as_family(comp, [c for pair in raw for c in pair])
    return out


def lines(lineages: dict[str, lineage.Lineage]) -> dict[str, dict[str, list[str]]]:
    """family -> series -> its versions (allocator names) in version order: the lines
    whose consecutive versions are compared (a line of one version has no change)."""
    out: dict[str, dict[str, list[str]]] = {}
    for family, entries in lineage.families(lineages).items():
        kinds = out.setdefault(family, {})
        for name, lin in entries:
            kinds.setdefault(lin.series, []).append(name)
    return out


def block_lines(lineages: dict[str, lineage.Lineage]) -> tuple[tuple[str, ...], ...]:
    """Every line of two or more versions: what a block of a release-to-release
    campaign runs one version after the other (run/plan.ordered)."""
    return tuple(
        tuple(n) for kinds in lines(lineages).values() for n in kinds.values() if len(n) > 1
    )


def _pending(
    comp: analyze.Comparison, family: str, kind: str, old: str, new: str, row: analyze.Row
) -> list[Change]:
    found = []
    for group in ("time_s", MEMORY):
        older, newer = row.cells[group].get(old), row.cells[group].get(new)
        if older is None or newer is None:
            continue
        metric = group
        if group == "time_s" and (older.fixed or newer.fixed):
            metric = "ops_per_s"
            older, newer = row.cells.get(metric, {}).get(old), row.cells.get(metric, {}).get(new)
            if older is None or newer is None:
                continue
        ratio = analyze.row_ratio(comp, row, newer, older)
        found.append(Change(family, kind, old, new, row.label, metric, ratio, None))
    return found


def _as_family(comp: analyze.Comparison, found: Sequence[Change]) -> list[Change]:
    """Holm over the family's ratios, then each ratio's verdict at its level."""
    tested = [c for c in found if c.ratio is not None]
    judged = dict(
        zip(map(id, tested), stats.holm([c.ratio for c in tested if c.ratio]), strict=True)
    )
    out = []
    for c in found:
        r = judged.get(id(c))
        v = stats.verdict(r, comp.margin, c.metric in analyze.HIGHER_IS_BETTER) if r else None
        out.append(Change(c.family, c.series, c.older, c.newer, c.row, c.metric, r, v))
    return out


@dataclass(frozen=True)
class Open:
    """What release to release still needs: per row label, the versions of its
    changes still undecided (both ends of each) and the lines they lie on, each in
    version order (a block runs a line's versions one after the other, rounds.py), and
    the count of such changes."""

    versions: dict[str, frozenset[str]]
    undecided: int  # changes undecided, or without a ratio (a side failed)
    changes: int
    lines: dict[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)


def open_versions(comp: analyze.Comparison, found: Sequence[Change] | None = None) -> Open:
    """The versions whose changes (`found`, else all of comp's) more blocks could still
    decide, per row, and their lines."""
    found = changes(comp) if found is None else found
    rows = {r.label: r for r in comp.rows}
    need: dict[str, set[str]] = {}
    for c in found:
        if c.verdict is stats.Verdict.UNDECIDED or (c.ratio is None and _runnable(rows[c.row], c)):
            need.setdefault(c.row, set()).update((c.older, c.newer))
    undecided = sum(c.verdict is None or c.verdict is stats.Verdict.UNDECIDED for c in found)
    versions = {k: frozenset(v) for k, v in need.items()}
    return Open(versions, undecided, len(found), _lines(comp, versions))


def _lines(
    comp: analyze.Comparison, versions: dict[str, frozenset[str]]
) -> dict[str, tuple[tuple[str, ...], ...]]:
    """Per row, each line's versions among `versions`, oldest first."""
    every = block_lines(_present(comp))
    out = {
        row: tuple(kept for line in every if (kept := tuple(a for a in line if a in wanted)))
        for row, wanted in versions.items()
    }
    return {row: found for row, found in out.items() if found}


def _runnable(row: analyze.Row, c: Change) -> bool:
    """A change without a ratio yet that blocks can give one: both versions have runs on
    the row and none failed (a failed side has no number to pair)."""
    cells = [row.cells.get(c.metric, {}).get(a) for a in (c.older, c.newer)]
    return all(x is not None and x.values and not x.failures for x in cells)


def deciding(found: Sequence[Change], row: analyze.Row) -> list[Change]:
    """The changes (of `found`, judged as families) that decide `row`."""
    return [c for c in found if c.row == row.label]
