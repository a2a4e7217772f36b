"""The answer: which allocator to use, per workload and over all of them.

From a comparison's ratios to the baseline (time, or throughput where time is
fixed, and peak RSS), each with its interval and verdict: the Pareto front of
time and peak RSS, the best for time and the best for memory (each only when it
beats the baseline significantly and by more than the margin), and the trade-off
in one sentence each. The ratios behind one answer (every allocator's time and
peak RSS) are judged as one family (Holm) at the verdicts' 5 %; a "use" needs its
winner decided again in that family at stats.RECOMMEND_ALPHA (1 %), and one decided
only for a verdict is said as pending, with the blocks a use needs; two allocators
are set against each other by their own paired ratio (a duel), never by their
intervals to the baseline or their point estimates, so the front, the dominated and
the ties say the same thing. An allocator that failed runs, leaves functions to glibc
(partial), or is not meant for speed or memory (a debugging allocator, a wrapper) is
never recommended, and the block says why. With too little data it says so, and about
how many more blocks would decide.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from allocmark import stats
from allocmark.answer import across, analyze, forecast
from allocmark.answer.analyze import Cell, Comparison, Row
from allocmark.answer.positions import (
    Choice as Choice,
    Position as Position,
    lower_is_better,
    pooled,
)
from allocmark.labels import row_key
from allocmark.stats import batch

OVERALL = "all workloads"
FAILED = "its runs failed"  # a position's words for an allocator whose runs failed on a row


@dataclass(frozen=True)
class Excluded:
    """Why an allocator has no position to recommend on a row (or over all rows): a
    role, partial for this program, or its runs failed (`failed`: the cell's state,
    "crashed 2/3"; "" for the other reasons)."""

    why: str
    failed: str = ""


@dataclass(frozen=True)
class Answer:
    scope: str  # a row's label, or OVERALL
    baseline: str
    front: tuple[Choice, ...]  # not dominated on (time, peak RSS), baseline included
    fastest: Choice | None  # faster than the baseline beyond the margin, the most
    smallest: Choice | None  # smaller peak RSS beyond the margin, the most
    undecided: tuple[Choice, ...]  # undecided on time or RSS: more runs could decide
    others: tuple[Choice, ...]  # the rest: off the front and decided
    excluded: tuple[tuple[str, str], ...]  # allocator, why it is not recommended
    margin: float = stats.DEFAULT_MARGIN  # what "beyond the margin" means here
    tied_time: tuple[Choice, ...] = ()  # winners `fastest` is not clearly better than
    tied_rss: tuple[Choice, ...] = ()
    # With no winner on an axis: those decided better beyond the margin for a verdict,
    # not yet at the level a "use" needs (pending()), the lowest first.
    pending_time: tuple[Choice, ...] = ()
    pending_rss: tuple[Choice, ...] = ()
    blocks: int = 0  # blocks behind it (over all workloads: the fewest of a row)
    block_s: float = 0.0  # seconds one more block of its rows takes (their runs' mean times)
    max_blocks: int = 0  # the blocks its campaign may run (0: no cap): no forecast beyond


# a against b on an axis ("time" or "rss"): a/b with its interval, lower is better
Duel = Callable[[Choice, Choice, str], "Position | None"]


def answers(
    comp: Comparison,
    found: Sequence[dict[str, Choice | Excluded]] = (),
    overall: dict[str, Choice | Excluded] | None = None,
) -> list[Answer]:
    """One answer per row, then one over all rows (when there are several); `found`
    (the rows' positions, per_row) and `overall` (overall_positions), when the caller
    has them."""
    if comp.baseline is None or len(comp.allocators) < 2:
        return []
    found = list(found) or per_row(comp)
    duels = [_RowDuel(comp, row) for row in comp.rows]
    _ahead(
        [
            (d, key)
            for d, p in zip(duels, found, strict=True)
            for key in _needed(p, comp.baseline, comp.margin)
        ]
    )
    out = [
        _answer(row.label, comp, p, d, [row])
        for row, p, d in zip(comp.rows, found, duels, strict=True)
    ]
    if len(comp.rows) > 1:
        overall = overall or overall_positions(comp, found)
        pairs = _needed(overall, comp.baseline, comp.margin)
        _ahead([(d, key) for d in duels for key in pairs])
        out.append(_answer(OVERALL, comp, overall, _OverallDuel(comp, found, duels), comp.rows))
    return out


def _pace(rows: Sequence[Row]) -> tuple[int, float]:
    """The fewest blocks of the rows, and what one more block of each costs: the mean
    time of every allocator's runs (for "about N minutes more would decide")."""
    blocks = min((analyze.row_blocks(r) for r in rows), default=0)
    cost = sum(
        c.summary.mean for r in rows for c in r.cells["time_s"].values() if c.summary is not None
    )
    return blocks, cost


def per_row(comp: Comparison) -> list[dict[str, Choice | Excluded]]:
    """positions() of every row: the answer's, the matrix's and the why's."""
    return [positions(comp, row) for row in comp.rows]


def _answer(
    scope: str,
    comp: Comparison,
    positions: dict[str, Choice | Excluded],
    duel: Duel,
    rows: Sequence[Row],
) -> Answer:
    assert comp.baseline is not None
    blocks, block_s = _pace(rows)
    excluded = [(a, e.why) for a, e in positions.items() if isinstance(e, Excluded)]
    usable = [c for c in positions.values() if isinstance(c, Choice)]
    duels = _Duels(duel, comp.margin, comp.baseline)
    front = _front(usable, duels)
    undecided = [c for c in usable if c.allocator != comp.baseline and _open(c)]
    fastest, tied_time = _best(usable, "time", duels)
    smallest, tied_rss = _best(usable, "rss", duels)
    # What is recommended is never called dominated, whatever the front says.
    picked = {c.allocator for c in (fastest, smallest, *tied_time, *tied_rss) if c}
    named = {c.allocator for c in [*front, *undecided]} | {comp.baseline} | picked
    return Answer(
        scope=scope,
        baseline=comp.baseline,
        front=tuple(front),
        fastest=fastest,
        smallest=smallest,
        undecided=tuple(undecided),
        others=tuple(c for c in usable if c.allocator not in named),
        excluded=tuple(sorted(excluded)),
        margin=comp.margin,
        tied_time=tied_time,
        tied_rss=tied_rss,
        pending_time=() if fastest else tuple(pending(usable, "time", comp.margin)),
        pending_rss=() if smallest else tuple(pending(usable, "rss", comp.margin)),
        blocks=blocks,
        block_s=block_s,
        max_blocks=comp.max_blocks,
    )


def _open(c: Choice) -> bool:
    """More runs could change what is said about `c`."""
    return any(p is not None and p.verdict is stats.Verdict.UNDECIDED for p in (c.time, c.rss))


def positions(comp: Comparison, row: Row) -> dict[str, Choice | Excluded]:
    """Each allocator's time and peak RSS against the baseline on `row`, or why it
    has none to recommend (its runs failed; partial for this program). The row's
    ratios to the baseline are judged as one family by Holm: it is wrong anywhere at
    most 5 % of the time."""
    out: dict[str, Choice | Excluded] = {}
    for a in comp.allocators:
        if role := _role(comp, a):
            out[a] = Excluded(role)
            continue
        speed, rss_cell = row.speeds[a], row.cells["peak_rss_kib"][a]
        failed = next((c.state for c in (speed, rss_cell) if c is not None and c.failures), None)
        if failed:
            out[a] = Excluded(f"{FAILED} ({failed})", failed)
            continue
        if a in comp.partial and (why := _partial(comp, row, a)):
            out[a] = Excluded(why)
            continue
        base = a == comp.baseline
        out[a] = Choice(
            a,
            _position(speed, comp, _inverted(comp, row, a), base),
            _position(rss_cell, comp, False, base),
        )
    return out


_ROLES = {
    "debug": "a debugging allocator (hunts heap bugs; not for speed or memory)",
    "wrapper": "a wrapper, not the allocator's own C code (headers, size classes of its own)",
}


def _role(comp: Comparison, a: str) -> str | None:
    """Why `a` is never recommended, whatever its numbers (None: it may be)."""
    role = comp.roles.get(a)
    return None if role is None else _ROLES.get(role, f"role {role!r}")


def _inverted(comp: Comparison, row: Row, a: str) -> bool:
    """Is the speed cell's ratio higher-is-better (a speed-up, a throughput)?"""
    return comp.speedup or (row.cells["time_s"][a].fixed and row.speeds[a] is not None)


def _partial(comp: Comparison, row: Row, a: str) -> str | None:
    """Why a partial allocator is not recommended for this row's program (None: the
    program calls none of what it lacks, so glibc never serves a block of it)."""
    lacks = comp.lacks.get(a, ())
    calls = comp.calls.get(row_key(row.workload, row.params))
    if calls is None:
        return (
            f"partial: it lacks {', '.join(lacks) or 'some functions'} (glibc would "
            "serve them), and whether this program calls them is not known"
        )
    if used := sorted(set(calls) & set(lacks)):
        return (
            f"partial: it lacks {', '.join(used)}, which this program calls: glibc "
            "would serve (or free) blocks of it"
        )
    return None


def _position(cell: Cell | None, comp: Comparison, invert: bool, base: bool) -> Position | None:
    """The cell's ratio as a Position: at its level in the row's Holm family already
    (analyze._as_family), so the table, the matrix and the answer show one interval."""
    if base:
        return Position(1.0, 1.0, 1.0, stats.Verdict.SAME)
    if cell is None or cell.ratio is None:
        return None
    r = cell.ratio
    found = lower_is_better(r, invert, comp.margin, firm=cell.held)
    # A winner decided for a verdict and not yet for a "use" waits on the level a use needs.
    wait = cell.firm if found.pending and cell.firm is not None else r
    return dataclasses.replace(found, blocks_to_decide=_blocks_to_decide(wait, comp.margin))


class _RowDuel:
    """a against b on the row: their own ratio, paired by block, by the method of the
    comparison's ratios (anytime-valid when the campaign added blocks by looking).
    Each ratio is computed once: those _ahead is given in one batch, the rest when
    asked."""

    def __init__(self, comp: Comparison, row: Row) -> None:
        self.comp, self.row = comp, row
        self.ratios: dict[tuple[str, str, str], stats.Ratio | None] = {}

    def cells(self, a: str, b: str, axis: str) -> tuple[Cell | None, Cell | None, bool]:
        if axis == "time":
            return (
                self.row.speeds[a],
                self.row.speeds[b],
                _inverted(self.comp, self.row, a),
            )
        return self.row.cells["peak_rss_kib"][a], self.row.cells["peak_rss_kib"][b], False

    def batchable(
        self, key: tuple[str, str, str]
    ) -> tuple[Sequence[float], Sequence[float]] | None:
        """The blocks of a ratio not computed yet that a batch computes as this would
        (a fixed number of blocks, paired), else None."""
        if key in self.ratios or not self.comp.paired or self.comp.sequential:
            return None
        ca, cb, _ = self.cells(*key)
        if ca is None or cb is None or ca.summary is None or cb.summary is None:
            return None
        return analyze.aligned_blocks(ca, cb)

    def __call__(self, a: Choice, b: Choice, axis: str) -> Position | None:
        ca, cb, invert = self.cells(a.allocator, b.allocator, axis)
        if ca is None or cb is None or ca.summary is None or cb.summary is None:
            return None
        key = (a.allocator, b.allocator, axis)
        if key not in self.ratios:
            paired = analyze.row_ratio(self.comp, self.row, ca, cb) if self.comp.paired else None
            self.ratios[key] = paired
        r = self.ratios[key] or stats.ratio_of(ca.summary, cb.summary)
        return None if r is None else lower_is_better(r, invert, self.comp.margin)


def _ahead(wanted: Sequence[tuple[_RowDuel, tuple[str, str, str]]]) -> None:
    """The ratios `wanted` computed in one batch (batch.paired_ratios: one numpy pass
    where there are many), so that the duels that follow find them."""
    jobs = [(d, key, found) for d, key in wanted if (found := d.batchable(key)) is not None]
    ratios = batch.paired_ratios([found for *_, found in jobs])
    for (d, key, _), r in zip(jobs, ratios, strict=True):
        d.ratios[key] = r


def _needed(
    positions: dict[str, Choice | Excluded], baseline: str, margin: float
) -> list[tuple[str, str, str]]:
    """The duels an answer will likely ask for, as _front and _best ask them: a against
    b (not the baseline: against it the duel is a's position) where the estimates differ
    by the margin, in _front's order, stopping at the first allocator that may dominate
    (its any() stops there when it does). Only a prediction, to batch them: a duel it
    misses is computed when asked, one it adds is a little work spent."""
    usable = [c for c in positions.values() if isinstance(c, Choice)]
    out: list[tuple[str, str, str]] = []

    def asks(a: Choice, b: Choice, axis: str) -> bool:
        if b.allocator == baseline or not _apart(a, b, axis, margin):
            return False
        out.append((a.allocator, b.allocator, axis))
        return True

    both = [c for c in usable if c.time and c.rss]
    for c in both:
        for o in (o for o in both if o is not c):
            faster = asks(o, c, "time")
            if faster:
                asks(c, o, "rss")
            smaller = asks(o, c, "rss")
            if smaller:
                asks(c, o, "time")
            if faster or smaller:
                break
    for axis in ("time", "rss"):
        winners = _winners(usable, axis, margin)
        for c in winners[1:]:
            asks(winners[0], c, axis)
    return out


def _winners(choices: Sequence[Choice], axis: str, margin: float) -> list[Choice]:
    """Those a "use" may name on `axis`: better than the baseline by more than the
    margin (_clearly_better) and decided so at the level a use needs (Position.firm),
    the lowest first."""
    return sorted(
        (c for c in choices if (p := getattr(c, axis)) is not None and _recommendable(p, margin)),
        key=lambda c: getattr(c, axis).value,
    )


def _recommendable(p: Position, margin: float) -> bool:
    return _clearly_better(p, margin) and p.firm is stats.Verdict.BETTER


def pending(choices: Sequence[Choice], axis: str, margin: float) -> list[Choice]:
    """Those decided better than the baseline beyond the margin for a verdict, not yet
    at the level a "use" needs: the lowest first (no "keep the baseline" while any)."""
    return sorted(
        (
            c
            for c in choices
            if (p := getattr(c, axis)) is not None and _clearly_better(p, margin) and p.pending
        ),
        key=lambda c: getattr(c, axis).value,
    )


def _clearly_better(p: Position, margin: float) -> bool:
    """Significantly below 1 (its verdict) and by more than the margin (its estimate)."""
    return p.verdict is stats.Verdict.BETTER and p.value * (1 + margin) < 1


def _apart(a: Choice, b: Choice, axis: str, margin: float) -> bool:
    """a's estimate is below b's by more than the margin on `axis`: only then can a
    beat b (_Duels.beats), and only then is their duel asked for."""
    pa, pb = getattr(a, axis), getattr(b, axis)
    return pa is not None and pb is not None and pa.value * (1 + margin) < pb.value


class _OverallDuel:
    """a against b over these workloads: the geometric mean of their rows' own duels,
    judged as the positions across workloads are (across.pooled)."""

    def __init__(
        self, comp: Comparison, per_row: list[dict[str, Choice | Excluded]], duels: list[_RowDuel]
    ) -> None:
        # The rows' duels are the rows' answers' own: a ratio asked by both is made once.
        self.comp, self.per_row, self.duels = comp, per_row, duels

    def __call__(self, a: Choice, b: Choice, axis: str) -> Position | None:
        cells = []
        for p, row_duel in zip(self.per_row, self.duels, strict=True):
            pa, pb = p[a.allocator], p[b.allocator]
            if not isinstance(pa, Choice) or not isinstance(pb, Choice):
                continue
            d = row_duel(pa, pb, axis)
            cells.append(
                across.RowVerdict(None, False, None)
                if d is None
                else across.RowVerdict(d.ratio, d.inverted, d.verdict)
            )
        found = across.pooled(cells, self.comp.margin, family=1)
        return None if found is None else pooled(found)


def _blocks_to_decide(r: stats.Ratio, margin: float) -> int | None:
    """Blocks in all that would likely decide r (forecast.blocks_to_decide), when more
    than it has."""
    needed = forecast.blocks_to_decide(r, margin)
    return needed if needed is not None and needed > r.df + 1 else None


def overall_positions(
    comp: Comparison, per_row: list[dict[str, Choice | Excluded]]
) -> dict[str, Choice | Excluded]:
    """Over these workloads: each allocator's rows' positions pooled (across.pooled),
    the non-baseline means judged together (their count is the family's size)."""
    out: dict[str, Choice | Excluded] = {}
    judged = [a for a in comp.allocators if a != comp.baseline and not _role(comp, a)]
    family = 2 * max(len(judged), 1)
    for a in comp.allocators:
        if role := _role(comp, a):
            out[a] = Excluded(role)
            continue
        if e := next((x for p in per_row if isinstance(x := p[a], Excluded)), None):
            out[a] = Excluded(f"on some workloads: {e.why}", e.failed)
            continue
        if a == comp.baseline:
            same = Position(1.0, 1.0, 1.0, stats.Verdict.SAME)
            out[a] = Choice(a, same, same)
            continue
        found = [_across(per_row, a, axis, comp.margin, family) for axis in ("time", "rss")]
        out[a] = Choice(a, *found)
    return out


def _across(
    per_row: list[dict[str, Choice | Excluded]], a: str, axis: str, margin: float, family: int
) -> Position | None:
    positions = [getattr(p[a], axis) for p in per_row if isinstance(p[a], Choice)]
    if all(p is None for p in positions):
        return None
    found = across.pooled([_row_verdict(p, firm=False) for p in positions], margin, family)
    firm = across.pooled(
        [_row_verdict(p, firm=True) for p in positions], margin, family, stats.RECOMMEND_ALPHA
    )
    return None if found is None else pooled(found, firm)


def _row_verdict(p: Position | None, firm: bool) -> across.RowVerdict:
    """A row's position for pooling: its verdict, or (`firm`) the one a "use" needs,
    where a "better" without one is not known to hold at that level."""
    if p is None:
        return across.RowVerdict(None, False, None)
    verdict = p.verdict
    if firm:
        verdict = p.firm or (
            stats.Verdict.UNDECIDED if verdict is stats.Verdict.BETTER else verdict
        )
    return across.RowVerdict(p.ratio, p.inverted, verdict)


@dataclass(frozen=True)
class _Duels:
    """Sets two allocators against each other by their duel, each pair once."""

    duel: Duel
    margin: float
    baseline: str
    seen: dict[tuple[str, str, str], Position | None] = dataclasses.field(default_factory=dict)

    def beats(self, a: Choice, b: Choice, axis: str) -> bool:
        """`a` is clearly better (lower) than `b` on `axis`: their own ratio is
        significantly below 1 and its estimate beyond the margin. The one rule for
        the front, the dominated and the ties."""
        if not _apart(a, b, axis, self.margin):
            return False  # not even the estimates differ by the margin: no duel needed
        # Against the baseline, the duel is the position itself.
        head = getattr(a, axis) if b.allocator == self.baseline else self._duel(a, b, axis)
        return head is not None and _clearly_better(head, self.margin)

    def _duel(self, a: Choice, b: Choice, axis: str) -> Position | None:
        """a/b, from b/a when that was computed (the paired intervals are symmetric)."""
        if (b.allocator, a.allocator, axis) in self.seen:
            other = self.seen[(b.allocator, a.allocator, axis)]
            return None if other is None else _turned(other)
        key = (a.allocator, b.allocator, axis)
        if key not in self.seen:
            self.seen[key] = self.duel(a, b, axis)
        return self.seen[key]


def _turned(p: Position) -> Position:
    value, low, high = stats.inverted(p.value, p.low, p.high)
    flip = {stats.Verdict.BETTER: stats.Verdict.WORSE, stats.Verdict.WORSE: stats.Verdict.BETTER}
    return Position(value, low, high, flip.get(p.verdict, p.verdict))


def _dominated(c: Choice, by: Choice, duels: _Duels) -> bool:
    """Another allocator is clearly better on one axis and not clearly worse on the other."""
    return (duels.beats(by, c, "time") and not duels.beats(c, by, "rss")) or (
        duels.beats(by, c, "rss") and not duels.beats(c, by, "time")
    )


def _front(choices: Sequence[Choice], duels: _Duels) -> list[Choice]:
    """Allocators that no other one dominates (see _dominated), fastest first."""
    both = [c for c in choices if c.time and c.rss]
    front = [c for c in both if not any(_dominated(c, o, duels) for o in both if o is not c)]
    return sorted(front, key=lambda c: c.time.value if c.time else 0.0)


def _best(
    choices: Sequence[Choice], axis: str, duels: _Duels
) -> tuple[Choice | None, tuple[Choice, ...]]:
    """The allocator to recommend on `axis`: better than the baseline (its verdict, and
    again at the level a use needs) and by more than the margin (its estimate:
    practical significance), the lowest such, unless a winner it does not beat on
    `axis` beats it on the other axis (_undominated); with the others it does not beat
    in their duel (ties): the other winners, those decided better not yet for a use, and
    the allocators undecided against the baseline that lean better than it."""
    winners = _winners(choices, axis, duels.margin)
    if not winners:
        return None, ()
    pick = _undominated(winners, axis, duels)
    winners = [pick, *(c for c in winners if c is not pick)]
    # Decided better, not yet for a use: another campaign could pick it as the winner.
    close = pending(choices, axis, duels.margin)
    # Undecided against the baseline but leaning better: two runs of one campaign can
    # pick either as the winner, so the answer names it beside the winner unless their
    # duel separates them (never "use A" with B unnamed).
    bar = 1 / (1 + duels.margin)
    leaning = [
        c
        for c in choices
        if c.allocator != duels.baseline
        and (p := getattr(c, axis)) is not None
        and p.verdict is stats.Verdict.UNDECIDED
        and p.value < 1
        and p.low < bar
    ]
    return pick, tuple(
        c for c in [*winners[1:], *close, *leaning] if not duels.beats(pick, c, axis)
    )


def _undominated(winners: Sequence[Choice], axis: str, duels: _Duels) -> Choice:
    """The lowest winner on `axis`, or, where winners it does not beat there (a tie)
    beat it on the other axis, the lowest of those on that axis: never "use A" for time
    while B, as fast by their duel, is decided smaller (A would be dominated)."""
    first, other = winners[0], "rss" if axis == "time" else "time"
    tied = [c for c in winners[1:] if not duels.beats(first, c, axis)]
    better = [c for c in tied if duels.beats(c, first, other)]
    return min(better, key=lambda c: getattr(c, other).value) if better else first
