"""The recommendation as sentences, the same in every format."""

from __future__ import annotations

from dataclasses import dataclass

from allocmark import stats
from allocmark.answer.forecast import duration
from allocmark.answer.recommend import OVERALL, Answer, Choice, Position


@dataclass(frozen=True)
class Block:
    scope: str
    lines: tuple[str, ...]


def blocks(answers: list[Answer]) -> list[Block]:
    """Over all workloads first (the answer most users want), then each workload."""
    ordered = sorted(answers, key=lambda a: a.scope != OVERALL)
    return [Block(a.scope, tuple(_lines(a))) for a in ordered]


def _lines(a: Answer) -> list[str]:
    out = [lead(a), _pick("time", a.fastest, a), _pick("memory", a.smallest, a)]
    front = ", ".join(c.allocator for c in a.front)
    if len(a.front) > 1:
        out.append(f"trade-off (no other allocator beats these on one axis without losing "
                   f"on the other): {front}")  # fmt: skip
    # Over all workloads an interval spans the workloads' differences: wide there
    # means mixed results more often than too few runs.
    word = "mixed across workloads or inconclusive" if a.scope == OVERALL else "inconclusive"
    for c in a.undecided:
        out.append(f"{word}: {_choice(c)}{_more(c)}")
    if a.others:  # their numbers are in the tables: names are enough here
        names = ", ".join(c.allocator for c in a.others)
        out.append(f"dominated (another allocator beats each on one axis without losing on "
                   f"the other): {names}")  # fmt: skip
    out += [f"not recommended: {name}: {why}" for name, why in a.excluded]
    return out


def lead(a: Answer) -> str:
    """The answer in one sentence a user can act on; the lines after it are the detail."""
    f, s = a.fastest, a.smallest
    if f and s and f.allocator == s.allocator:
        text = f"Use {f.allocator}: {_time(f.time)}, {_rss(f.rss)}"
    elif f and s:
        text = (f"Use {f.allocator} for time ({_time(f.time)}, {_rss(f.rss)}), "
                f"{s.allocator} for memory ({_rss(s.rss)}, {_time(s.time)})")  # fmt: skip
    elif f:
        text = f"Use {f.allocator} for time: {_time(f.time)}, {_rss(f.rss)}"
    elif s:
        text = f"Use {s.allocator} for memory: {_rss(s.rss)}, {_time(s.time)}"
    elif contenders(a):
        text = _undecided(a)
    else:
        text = (f"Keep {a.baseline}: no allocator is significantly faster or smaller by "
                f"more than {a.margin:.0%}{_at_most(a)}")  # fmt: skip
    for axis, tied in (("time", a.tied_time), ("memory", a.tied_rss)):
        if tied:
            text += f"; a tie for {axis}: {', '.join(c.allocator for c in tied)}"
    return text + "."


def contenders(a: Answer) -> list[Choice]:
    """Undecided allocators that could still be better than the baseline by more than
    the margin on an axis (_open_on): while there are any, the answer is undecided,
    never "keep the baseline"."""
    found = {id(c) for axis in ("time", "rss") for c, _ in _open_on(a, axis)}
    return [c for c in a.undecided if id(c) in found]


def _open_on(a: Answer, axis: str) -> list[tuple[Choice, Position]]:
    """The allocators that could still beat the baseline on `axis` ("time", "rss") by
    more than the margin: undecided there, their interval's better end beyond it."""
    bar = 1 / (1 + a.margin)
    return [(c, p) for c in a.undecided if (p := getattr(c, axis)) is not None
            and p.verdict is stats.Verdict.INCONCLUSIVE and p.low < bar]  # fmt: skip


def _undecided(a: Answer) -> str:
    """What was measured when nothing is decided: the leading estimates, and about how
    many blocks (and minutes) more would decide."""
    open_ = {axis: _open_on(a, axis) for axis in ("time", "rss")}
    leads = []
    for axis, found in open_.items():
        best, p = min(found, key=lambda x: x[1].value, default=(None, None))
        if best is not None and p is not None and p.value < 1:
            size = f"{1 / p.value:.2f}× faster" if axis == "time" else \
                f"peak RSS {p.value - 1:+.1%}"  # fmt: skip
            leads.append(f"{best.allocator} {size}")
    text = (f"Undecided after {a.blocks} blocks: no allocator is yet significantly faster "
            f"or smaller than {a.baseline} by more than {a.margin:.0%}")  # fmt: skip
    if leads:
        text += "; leading, not significant yet: " + ", ".join(leads)
    need = [p.blocks_to_decide for found in open_.values() for _, p in found
            if p.blocks_to_decide]  # fmt: skip
    if need and a.block_s > 0:
        more = max(0, max(need) - a.blocks) * a.block_s
        text += f"; about {max(need)} blocks in all (about {duration(more)} more) would decide"
    elif need:
        text += f"; about {max(need)} blocks in all would decide"
    return text


def _at_most(a: Answer) -> str:
    """How much better anything could be, by the best ends of the 95 % intervals."""
    rest = [c for c in (*a.front, *a.undecided, *a.others) if c.allocator != a.baseline]
    time = min((c.time.low for c in rest if c.time), default=1.0)
    rss = min((c.rss.low for c in rest if c.rss), default=1.0)
    # Beyond 10x (or 90 %) an interval's end says only that it is loose.
    if time <= 0.1 or rss <= 0.1:
        return " (too few blocks to bound how much)"
    parts = ([f"{1 / time:.2f}× faster"] if time < 0.995 else []) + (
        [f"{1 - rss:.0%} smaller"] if rss < 0.995 else [])  # fmt: skip
    return f" (at most {' or '.join(parts)})" if parts else ""


def _pick(goal: str, c: Choice | None, a: Answer) -> str:
    if c is None and _open_on(a, "time" if goal == "time" else "rss"):
        return f"for {goal}: undecided after {a.blocks} blocks (see below)"
    if c is None:
        what = "faster" if goal == "time" else "smaller in peak RSS"
        return (f"for {goal}: keep {a.baseline}: no allocator is significantly {what} by "
                f"more than {a.margin:.0%}")  # fmt: skip
    return f"for {goal}: {_choice(c)}"


def _choice(c: Choice) -> str:
    return f"{c.allocator}: {_time(c.time)}, {_rss(c.rss)}"


def _time(p: Position | None) -> str:
    if p is None or p.verdict is stats.Verdict.SAME:
        return _plain("time", p, f"×{p.value:.2f}" if p else "")
    f, lo, hi = stats.inverted(p.value, p.low, p.high) if p.value < 1 else (p.value, p.low, p.high)
    word = "faster" if p.value < 1 else "slower"
    return f"{f:.2f}× {word} [{lo:.2f}–{hi:.2f}]{_maybe(p)}"


def _rss(p: Position | None) -> str:
    if p is None or p.verdict is stats.Verdict.SAME:
        return _plain("peak RSS", p, f"{p.value - 1:+.0%}" if p else "")
    return f"peak RSS {p.value - 1:+.0%} [{p.low - 1:+.0%}–{p.high - 1:+.0%}]{_maybe(p)}"


def _plain(axis: str, p: Position | None, value: str) -> str:
    """No data, or the same as the baseline."""
    return f"{axis} n/a" if p is None else f"{axis} the same ({value})"


def _maybe(p: Position) -> str:
    return " (not significant)" if p.verdict is stats.Verdict.INCONCLUSIVE else ""


def _more(c: Choice) -> str:
    need = [p.blocks_to_decide for p in (c.time, c.rss) if p and p.blocks_to_decide]
    return f"; about {max(need)} blocks in all would decide" if need else ""
