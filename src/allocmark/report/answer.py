"""The recommendation as sentences, the same in every format."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from allocmark import stats, units
from allocmark.answer.across import Tally
from allocmark.answer.findings import Findings
from allocmark.answer.recommend import OVERALL, Answer, Choice, Position
from allocmark.answer.remedy import Try
from allocmark.answer.why import INSIDE, KERNEL, MECHANISMS, Factor, Why
from allocmark.report import fmt
from allocmark.report.fmt import decimals, seconds


@dataclass(frozen=True)
class Block:
    scope: str
    lines: tuple[str, ...]


# The whys a sentence names, by (row label, allocator, axis): Findings.explained
Whys = Mapping[tuple[str, str, str], Why]


def blocks(
    answers: Sequence[Answer], whys: Whys | None = None, tries: Sequence[Try] = ()
) -> list[Block]:
    """Over all workloads first (the answer most users want), then each workload."""
    return [Block(a.scope, tuple(_lines(a, whys, tries))) for a in ordered(answers)]


def recommendation(found: Findings) -> list[Block]:
    """The findings' answers as blocks, each decided difference with its why."""
    return blocks(found.answers, found.explained, found.tries)


def ordered(answers: Sequence[Answer]) -> list[Answer]:
    """Over all workloads first."""
    return sorted(answers, key=lambda a: a.scope != OVERALL)


def leads(found: Findings) -> list[tuple[str, str]]:
    """(scope, one-sentence answer): all workloads first, then each workload."""
    whys = found.explained
    return [(a.scope, lead(a, whys)) for a in ordered(found.answers)]


def _lines(a: Answer, whys: Whys | None, tries: Sequence[Try]) -> list[str]:
    if any(name == a.baseline for name, _ in a.excluded):  # lead() says why no answer
        return [lead(a, whys)] + [f"not recommended: {n}: {why}" for n, why in a.excluded]
    out = [lead(a, whys), _pick("time", a.fastest, a), _pick("memory", a.smallest, a)]
    out += [try_line(t) for t in tries if t.why.label == a.scope]
    front = ", ".join(c.allocator for c in a.front)
    if len(a.front) > 1:
        out.append(
            f"trade-off (no other allocator beats these on one axis without losing "
            f"on the other): {front}"
        )
    word = "undecided over these workloads" if a.scope == OVERALL else "undecided"
    for c in a.undecided:
        out.append(f"{word}: {_choice(c)}{_more((c.time, c.rss), a.max_blocks)}")
    if a.others:  # their numbers are in the tables: names are enough here
        names = ", ".join(c.allocator for c in a.others)
        out.append(
            f"dominated (another allocator beats each on one axis without losing on "
            f"the other): {names}"
        )
    out += [f"not recommended: {name}: {why}" for name, why in a.excluded]
    return out


def lead(a: Answer, whys: Whys | None = None) -> str:
    """The answer in one sentence a user can act on; the lines after it are the detail.
    Each decided difference of a workload's sentence says why (`whys`)."""
    f, s = a.fastest, a.smallest
    if broken := [why for name, why in a.excluded if name == a.baseline]:
        # Nothing is measured against a baseline without numbers: no "keep", no "use".
        return f"No answer: the baseline {a.baseline} has no result: {broken[0]}."

    def said(c: Choice, axis: str) -> str:
        return _because(whys.get((a.scope, c.allocator, axis)) if whys else None)

    def time(c: Choice) -> str:
        return _time(c.time) + said(c, "time")

    def rss(c: Choice) -> str:
        return _rss(c.rss) + said(c, "rss")

    if f and s and f.allocator == s.allocator:
        text = f"Use {f.allocator}: {time(f)}, {rss(f)}"
    elif f and s:
        text = (
            f"Use {f.allocator} for time ({time(f)}, {rss(f)}), "
            f"{s.allocator} for memory ({rss(s)}, {time(s)})"
        )
    elif f:
        text = f"Use {f.allocator} for time: {time(f)}, {rss(f)}"
    elif s:
        text = f"Use {s.allocator} for memory: {rss(s)}, {time(s)}"
    elif a.pending_time or a.pending_rss:
        text = _pending(a, said)
    elif contenders(a):
        text = _undecided(a)
    elif not _choices(a) and a.excluded:  # nothing measured could be recommended
        names = ", ".join(name for name, _ in a.excluded)
        text = f"Keep {a.baseline}: no alternative can be recommended here ({names}: see below)"
    else:
        text = (
            f"Keep {a.baseline}: no allocator is significantly faster or smaller by "
            f"more than {a.margin:.0%}{_at_most(a)}"
        )
    for axis, tied in (("time", a.tied_time), ("memory", a.tied_rss)):
        if tied:
            text += f"; a tie for {axis}: {', '.join(c.allocator for c in tied)}"
    return text + "."


def _pending(a: Answer, said: Callable[[Choice, str], str]) -> str:
    """No "use" yet where the leaders are decided better for a verdict only: what each
    is, the level a use needs, and about how many blocks would reach it."""
    where = " over these workloads" if a.scope == OVERALL else ""
    leaders = [
        f"{c.allocator}: {_time(c.time) if axis == 'time' else _rss(c.rss)}{said(c, axis)}"
        for axis, found in (("time", a.pending_time), ("rss", a.pending_rss))
        for c in found[:1]
    ]
    text = (
        f"No recommendation yet{where}: {'; '.join(leaders)}; decided at a verdict's "
        f"{stats.ALPHA:.0%}, not yet at the {stats.RECOMMEND_ALPHA:.0%} a recommendation needs"
    )
    need = [p.blocks_to_decide for p in _pending_positions(a) if p.blocks_to_decide]
    return text + (_wait(a, max(need), "") if need else "")


def _pending_positions(a: Answer) -> list[Position]:
    """The leaders' positions on the axes they are pending on."""
    return [
        p
        for axis, found in (("time", a.pending_time), ("rss", a.pending_rss))
        for c in found[:1]
        if (p := getattr(c, axis)) is not None
    ]


def _choices(a: Answer) -> list[Choice]:
    """The alternatives that could be recommended: measured, not excluded."""
    return [c for c in (*a.front, *a.undecided, *a.others) if c.allocator != a.baseline]


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
    return [
        (c, p)
        for c in a.undecided
        if (p := getattr(c, axis)) is not None
        and p.verdict is stats.Verdict.UNDECIDED
        and p.low < bar
    ]


def _undecided(a: Answer) -> str:
    """What was measured when nothing is decided: the leading estimates, and about how
    many blocks (and minutes) more would decide."""
    open_ = {axis: _open_on(a, axis) for axis in ("time", "rss")}
    leads: list[str] = []
    lead_positions: list[Position] = []
    for axis, found in open_.items():
        best, p = min(found, key=lambda x: x[1].value, default=(None, None))
        if best is not None and p is not None and p.value < 1:
            lead_positions.append(p)
            size = (
                f"{1 / p.value:.2f}× faster" if axis == "time" else f"peak RSS {p.value - 1:+.1%}"
            )
            leads.append(f"{best.allocator} {size}{_tally(p, axis)}")
    where = " over these workloads" if a.scope == OVERALL else ""
    if worse := _decided_worse(a):
        text = f"Keep {a.baseline} so far{where}: {worse}; undecided: " + ", ".join(
            f"{c.allocator} ({_estimate(c)})" for c in _open_rivals(a)
        )
        lead_positions = []  # no leader said: one wait for every ratio
    else:
        text = (
            f"Undecided{where} after {a.blocks} blocks: no allocator is yet significantly "
            f"faster or smaller than {a.baseline} by more than {a.margin:.0%}"
        )
        if leads:
            text += "; leading, not significant yet: " + ", ".join(leads)
    need = [p.blocks_to_decide for found in open_.values() for _, p in found if p.blocks_to_decide]
    if not need:
        return text
    # The leader's own wait where it is shorter: a ratio on the margin (thousands of
    # blocks) must not read as what the plain one needs.
    first = min((p.blocks_to_decide for p in lead_positions if p.blocks_to_decide), default=0)
    if first and first < max(need):
        text += _wait(a, first, " the leading one")
        return text + _wait(a, max(need), " every one")
    return text + _wait(a, max(need), "")


def _wait(a: Answer, blocks: int, what: str) -> str:
    """ "; about 21 blocks in all (about 3 min more) would decide{what}", and whether the
    campaign may run them."""
    if a.max_blocks and blocks > a.max_blocks:
        return (
            f"; about {blocks} blocks in all would decide{what}, more than the "
            f"{a.max_blocks} this campaign may run (--max-blocks)"
        )
    more = max(0, blocks - a.blocks) * a.block_s
    # The runs' own time; under a second it would read "about 0 s more", which the
    # launcher and the checks around each run make untrue: then no time is said.
    if more >= 1:
        return (
            f"; about {blocks} blocks in all (about {units.duration(more)} more) would decide{what}"
        )
    return f"; about {blocks} blocks in all would decide{what}"


def _rivals(a: Answer) -> list[Choice]:
    """Every allocator of the answer but the baseline, once each."""
    listed = (*a.front, *a.undecided, *a.others)  # the front and the undecided overlap
    return list({c.allocator: c for c in listed if c.allocator != a.baseline}.values())


def _open_rivals(a: Answer) -> list[Choice]:
    """The rivals undecided on either axis: every one the matrix shows as "?"."""
    return [
        c
        for c in _rivals(a)
        if any(p is not None and p.verdict is stats.Verdict.UNDECIDED for p in (c.time, c.rss))
    ]


def _decided_worse(a: Answer) -> str:
    """ "8 of 9 alternatives decided slower and larger", or each axis's count ("8 of 9
    alternatives decided larger in peak RSS, 6 of 9 slower"): counted on each axis as
    the matrix shows it; "" when no rival is decided worse, or one could still beat the
    baseline and none is decided worse on both axes."""
    rivals = _rivals(a)

    def worse(axis: str) -> set[str]:
        return {
            c.allocator
            for c in rivals
            if (p := getattr(c, axis)) is not None and p.verdict is stats.Verdict.WORSE
        }

    slower, larger = worse("time"), worse("rss")
    still = {c.allocator for c in contenders(a)}
    if not (slower | larger) - still:
        return ""
    m = len(rivals)
    if slower == larger:
        return f"{len(slower)} of {m} alternatives decided slower and larger"
    parts = [
        f"{len(n)} of {m}{' alternatives' if not i else ''} decided {word}"
        for i, (n, word) in enumerate(
            sorted(
                [(slower, "slower"), (larger, "larger in peak RSS")],
                key=lambda x: -len(x[0]),
            )
        )
        if n
    ]
    return ", ".join(parts)


def _estimate(c: Choice) -> str:
    """An undecided allocator's estimates, as measured: "1.01× faster, peak RSS -2.4%"."""
    parts = []
    if c.time is not None:
        t = c.time.value
        parts.append(f"{1 / t:.2f}× faster" if t < 1 else f"{t:.2f}× slower")
    if c.rss is not None:
        parts.append(f"peak RSS {c.rss.value - 1:+.1%}")
    return ", ".join(parts) or "no estimate"


def _at_most(a: Answer) -> str:
    """How much better anything could be, by the best ends of the 95 % intervals; an
    interval too wide to bound anything (stats.bounded) says so instead."""
    rest = _choices(a)
    time = min((c.time for c in rest if c.time), key=lambda p: p.low, default=None)
    rss = min((c.rss for c in rest if c.rss), key=lambda p: p.low, default=None)
    if any(p is not None and not stats.bounded(p.low, p.high) for p in (time, rss)):
        return " (too few blocks to bound how much)"
    parts = ([f"{1 / time.low:.2f}× faster"] if time and time.low < 0.995 else []) + (
        [f"{1 - rss.low:.0%} smaller"] if rss and rss.low < 0.995 else []
    )
    return f" (at most {' or '.join(parts)})" if parts else ""


def _pick(goal: str, c: Choice | None, a: Answer) -> str:
    axis = "time" if goal == "time" else "rss"
    waiting = a.pending_time if axis == "time" else a.pending_rss
    if c is None and waiting:
        lead, p = waiting[0], getattr(waiting[0], axis)
        shown = _time(p) if axis == "time" else _rss(p)
        more = _more((p,), a.max_blocks)
        return (
            f"for {goal}: no recommendation yet: {lead.allocator}: {shown}, not yet decided "
            f"at the {stats.RECOMMEND_ALPHA:.0%} a recommendation needs{more}"
        )
    if c is None and _open_on(a, axis):
        return f"for {goal}: undecided after {a.blocks} blocks (see below)"
    if c is None:
        what = "faster" if goal == "time" else "smaller in peak RSS"
        return (
            f"for {goal}: keep {a.baseline}: no allocator is significantly {what} by "
            f"more than {a.margin:.0%}"
        )
    return f"for {goal}: {_choice(c)}"


def _choice(c: Choice) -> str:
    return f"{c.allocator}: {_time(c.time)}, {_rss(c.rss)}"


def _time(p: Position | None) -> str:
    if p is None or p.verdict is stats.Verdict.SAME:
        return _plain("time", p, f"×{p.value:.2f}" if p else "") + _tally(p, "time")
    f, lo, hi = stats.inverted(p.value, p.low, p.high) if p.value < 1 else (p.value, p.low, p.high)
    word = "faster" if p.value < 1 else "slower"
    if not stats.bounded(p.low, p.high):
        return f"{f:.2f}× {word}{_notes(p, 'time', _loose(p))}"
    d = decimals(lo, hi, 2, lambda x, d: f"{x:.{d}f}")
    return f"{f:.{d}f}× {word} [{lo:.{d}f}–{hi:.{d}f}]{_notes(p, 'time')}"


def _rss(p: Position | None) -> str:
    if p is None or p.verdict is stats.Verdict.SAME:
        return _plain("peak RSS", p, f"{p.value - 1:+.0%}" if p else "") + _tally(p, "rss")
    if not stats.bounded(p.low, p.high):
        return f"peak RSS {p.value - 1:+.0%}{_notes(p, 'rss', _loose(p))}"
    d = decimals(p.low - 1, p.high - 1, 0, lambda x, d: f"{x:+.{d}%}")
    return (
        f"peak RSS {p.value - 1:+.{d}%} [{p.low - 1:+.{d}%}–{p.high - 1:+.{d}%}]{_notes(p, 'rss')}"
    )


def _loose(p: Position) -> str:
    """An interval too wide to print (the line's "about N blocks in all would decide"
    says how many more would do)."""
    return fmt.unbounded(len(p.ratio.logs) if p.ratio else 0)


def _tally(p: Position | None, axis: str) -> str:
    """Across workloads: on how many each verdict, and the decided ratios' range."""
    t = p.tally if p is not None else None
    if t is None:
        return ""
    better, worse = ("faster", "slower") if axis == "time" else ("smaller", "larger")
    counts = [
        f"{word} on {n}"
        for word, n in (
            (better, t.better),
            (worse, t.worse),
            ("the same", t.same),
            ("undecided", t.undecided),
        )
        if n
    ]
    return f" (of {t.rows} workloads: {', '.join(counts)}{_span(t, axis)})"


def _span(t: Tally, axis: str) -> str:
    """The decided ratios' range: "; decided +15% to +289%"."""
    if t.low is None or t.high is None:
        return ""
    low, high = _factor(t.low, axis), _factor(t.high, axis)
    return f"; decided {low}" + ("" if low == high else f" to {high}")


def _factor(x: float, axis: str) -> str:
    if axis == "rss":
        return f"{x - 1:+.0%}"
    return f"{1 / x:.2f}× faster" if x < 1 else f"{x:.2f}× slower"


def _plain(axis: str, p: Position | None, value: str) -> str:
    """No data, or the same as the baseline."""
    return f"{axis} n/a" if p is None else f"{axis} the same ({value})"


def _notes(p: Position, axis: str, first: str = "") -> str:
    """ " (not significant; of 9 workloads: ...)": what a position's interval does not
    say; `first`: what stands for an interval too wide to print."""
    notes = [first] if first else []
    notes += ["not significant"] if p.verdict is stats.Verdict.UNDECIDED else []
    notes += [_tally(p, axis)[2:-1]] if p.tally else []
    return f" ({'; '.join(notes)})" if notes else ""


def _more(positions: Sequence[Position | None], cap: int = 0) -> str:
    """ "; about 21 blocks in all would decide" the positions, and whether the campaign
    may run them."""
    need = [p.blocks_to_decide for p in positions if p and p.blocks_to_decide]
    if not need:
        return ""
    beyond = f", more than the {cap} this campaign may run" if cap and max(need) > cap else ""
    return f"; about {max(need)} blocks in all would decide{beyond}"


def _because(w: Why | None) -> str:
    return "" if w is None else f" ({clause(w)})"


def clause(w: Why, most: int | None = 1) -> str:
    """What moved with a decided difference, in a few words: the `most` signals with the
    largest shares (None: all) and a count it came with; or that nothing measured
    accounts for it, what was checked, and the `most` signals that moved undecided
    (--detail names each signal)."""
    shared = [f for f in w.factors if f.share is not None][:most]
    counts = [f for f in w.factors if f.share is None and not f.mechanism][:1]
    mechanisms = [mechanism(w, m) for m in w.mechanisms]
    if not shared:
        said = "not explained by a decided signal: " + (
            f"checked {_checked(w)}" if w.checked else "no signal recorded"
        )
        named = w.moved if most is None else w.moved[: max(1, most)]
        moved = [f"{_part(f)} by its estimate, not decided" for f in named]
        return "; ".join([said, *moved, *mechanisms, *(_count(f) for f in counts)])
    return "; ".join([*(_part(f) for f in shared), *mechanisms, *(_count(f) for f in counts)])


def mechanism(w: Why, key: str) -> str:
    """ "75,050 madvise(MADV_DONTNEED) calls against 48: freed pages given back to the
    kernel, faulted in again when reused": the count of the mechanism that moved the
    most, the allocator's against the baseline's (means over the blocks)."""
    f = max((f for f in w.factors if f.mechanism == key), key=lambda f: abs(math.log(f.ratio)))
    mine = _whole(f.base + f.delta)
    words = f.words[:-1] if mine == "1" else f.words  # "1 futex wait": the words end in s
    return f"{mine} {words} against {_whole(f.base)}: {MECHANISMS[key]}"


def _whole(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 10 else f"{x:.3g}"


_PEAK, _SMAPS = "anonymous and file RSS at the peak", "smaps near the peak"
_GROUPS = {
    "user_s": "CPU",
    "sys_s": "CPU",
    "minflt": "faults",
    "majflt": "faults",
    "nvcsw": "switches",
    "nivcsw": "switches",
    "peak_anon_kib": _PEAK,
    "peak_file_kib": _PEAK,
    "near_peak_dirty_kib": _SMAPS,
    "near_peak_lazyfree_kib": _SMAPS,
    "near_peak_thp_kib": _SMAPS,
    "prof_inside_s": "time inside the allocator",
    "prof_slack_kib": "size-class rounding",
    **{s.name: "system calls" for s in KERNEL},
    **{s.name: "time inside system calls" for s in INSIDE},
}


def _checked(w: Why) -> str:
    return ", ".join(dict.fromkeys(_GROUPS.get(s, s) for s in w.checked))


def _part(f: Factor) -> str:
    """ "+3.1 MiB anonymous at the peak, most of it", "user CPU -0.42 s, most of it"."""
    if f.unit == "KiB":
        return f"{_delta(f)} {f.words}, {f.degree}"
    return f"{f.words} {_delta(f)}, {f.degree}"


def _count(f: Factor) -> str:
    """ "with 0.61× the minor faults" """
    return f"with {f.ratio:.2f}× the {f.words}"


def factor_line(f: Factor) -> str:
    """One signal with its interval, for --detail, Markdown and HTML."""
    return (
        f"{f.words}: ×{f.ratio:.3g} [{f.low:.3g}–{f.high:.3g}], "
        f"{_delta(f)}{'' if f.share is None else f' ({f.share:.0%} of the difference)'}"
    )


def _delta(f: Factor) -> str:
    if f.unit == "KiB":
        return ("+" if f.delta > 0 else "-") + units.size_text(abs(f.delta) * 1024)
    if f.unit == "s":
        return ("+" if f.delta > 0 else "-") + seconds(abs(f.delta))
    return f"{f.delta:+.3g}"


def why_lines(whys: Sequence[Why]) -> list[str]:
    """Every explained difference with each signal's interval: --detail, Markdown, HTML."""
    out = []
    for w in whys:
        outcome = "time" if w.axis == "time" else "peak RSS"
        out.append(f"{w.label}: {w.allocator} {outcome}: {clause(w, most=None)}")
        out += [f"    {factor_line(f)}" for f in w.factors]
    return out


def try_line(t: Try) -> str:
    """ "to try for jemalloc's peak RSS (+18.1 MiB anonymous at the peak, most of it):
    jemalloc:nodecay (why); measured here: peak RSS +12% [...]" or the command."""
    axis = "time" if t.why.axis == "time" else "peak RSS"
    versus = f"{t.why.allocator} against {t.baseline}"
    text = f"to try for {t.allocator}'s {axis} ({versus}: {clause(t.why)}): {t.variant} ({t.says})"
    if t.position is not None:
        shown = _time(t.position) if t.why.axis == "time" else _rss(t.position)
        return f"{text}; measured here: {shown}"
    return f"{text}; measure it: {t.command}"
