"""The race of `tune`: which candidates another one beats clearly enough to drop
before the next round. A candidate is an allocator with one setting changed
("jemalloc{narenas=1}"); its allocator at its defaults is its reference.

The campaign (run/campaign.py) asks this every round; `tune` (verbs/tune.py) names
the candidates; its answer is each row's front (Front), each candidate judged against
its allocator's defaults (against_default).
"""

from __future__ import annotations

from dataclasses import dataclass

from allocmark import stats
from allocmark.answer.analyze import Comparison, Row, row_ratio
from allocmark.answer.recommend import Choice, Position, positions
from allocmark.labels import row_key

OBJECTIVES = ("time", "rss", "pareto")


def default_of(candidate: str) -> str:
    """The allocator a candidate tunes: "jemalloc{narenas=1}" -> "jemalloc"."""
    return candidate.split("{")[0].removesuffix(":nothp")


def dominated(comp: Comparison, objective: str) -> dict[tuple[str, str], set[str]]:
    """Per row (workload, params JSON): the candidates another one beats with
    non-overlapping intervals on the objective (on both axes for "pareto"). The
    baseline is never dropped: every block's ratios are paired with it; nor is an
    allocator at its defaults: each of its settings is judged against it, block by
    block, and a default dropped after three blocks left [0.05–5.9] intervals."""
    return {row_key(r.workload, r.params): _losers(comp, r, objective) for r in comp.rows}


def _losers(comp: Comparison, row: Row, objective: str) -> set[str]:
    live = [c for c in positions(comp, row).values() if isinstance(c, Choice)]
    out = set()
    for c in live:
        if c.allocator not in (comp.baseline, default_of(c.allocator)) and any(
            _beats(o, c, objective) for o in live
        ):
            out.add(c.allocator)
    return out


def _beats(a: Choice, b: Choice, objective: str) -> bool:
    axes = ("time", "rss") if objective == "pareto" else (objective,)
    return all(_clearly_lower(getattr(a, x), getattr(b, x)) for x in axes)


def _clearly_lower(a: Position | None, b: Position | None) -> bool:
    return a is not None and b is not None and a.high < b.low


# -- the answer: each row's front ---------------------------------------------------
@dataclass(frozen=True)
class Front:
    """One row's Pareto front: (candidate and what its setting changes, the line that
    runs the program that way), how many settings were judged together, and those
    left out because the allocator does not take them."""

    scope: str
    lines: tuple[tuple[str, str], ...]
    candidates: int
    left_out: tuple[tuple[str, str], ...] = ()  # (candidate, why) before the race


_AXES = (
    ("time_s", "time", ("faster", "slower")),
    ("peak_rss_kib", "peak RSS", ("smaller", "larger")),
)


def against_default(
    comp: Comparison,
    row: Row,
    candidate: str,
    family: dict[str, dict[str, stats.Ratio]] | None = None,
) -> str:
    """The candidate's time and peak RSS against its own allocator's defaults, paired
    by block: what the setting itself changes, judged with every other candidate's
    (`defaults_family`, computed here when not given)."""
    base = default_of(candidate)
    if base == candidate or base not in comp.allocators:
        return ""
    ratios = (defaults_family(comp, row) if family is None else family).get(candidate, {})
    parts = []
    for metric, label, (better, worse) in _AXES:
        if (r := ratios.get(metric)) is None:
            continue
        verdict = stats.verdict(r, comp.margin)
        word = {stats.Verdict.BETTER: better, stats.Verdict.WORSE: worse}.get(
            verdict, verdict.value
        )
        parts.append(f"{label} ×{r.value:.2f} [{r.low:.2f}–{r.high:.2f}] {word}")
    return f"against {base}'s defaults: " + ", ".join(parts) if parts else ""


def defaults_family(comp: Comparison, row: Row) -> dict[str, dict[str, stats.Ratio]]:
    """Every candidate's time and peak RSS ratio to its own allocator's defaults on the
    row, judged as one family (Holm): with two dozen settings, 95 % intervals alone
    would call about one of them different by chance."""
    found: list[tuple[str, str, stats.Ratio]] = []
    for candidate in comp.allocators:
        base = default_of(candidate)
        if base == candidate or base not in comp.allocators:
            continue
        for metric, _, _ in _AXES:
            r = row_ratio(comp, row, row.cells[metric][candidate], row.cells[metric][base])
            if r is not None:
                found.append((candidate, metric, r))
    out: dict[str, dict[str, stats.Ratio]] = {}
    for (candidate, metric, _), r in zip(found, stats.holm([r for *_, r in found]), strict=True):
        out.setdefault(candidate, {})[metric] = r
    return out


def candidate_count(comp: Comparison) -> int:
    """How many candidates are judged against their allocator's defaults."""
    return sum(
        1 for a in comp.allocators if default_of(a) != a and default_of(a) in comp.allocators
    )
