"""Why a decided difference: the signals every run records, over the same blocks.

Every measured run records, at no cost to what it measures, what can explain its
time and its peak RSS (the launcher, run/launch.py): user and system CPU, minor
and major faults, voluntary and involuntary context switches (rusage of the run's
tree), the anonymous and file-backed parts of the largest sample (statm), and
smaps_rollup read near the peak (private dirty, lazily freed, in huge pages), and,
where the kernel counts them (run/kernel.py; a cost per call: under 0.35 % of real
programs' time, 20 % of a futex storm's: bench/kcount_cost.py),
the system calls of the run's tree by kind, glibc's own and raw ones included: mmap,
munmap, mremap, mprotect, brk, madvise by advice, futex waits and wakes. When the
campaign ran its why pass (run/whypass.py), its profiled blocks add the time inside
the allocator, the time inside each kind of those system calls (the kernel's timing:
futex lock waits are time asleep on a lock's word) and the size-class rounding at the
peak of live bytes, paired over those blocks (a fixed number: the fixed-n tests). The
rule (docs/statistics.md, "Why"):

- only a difference the answer decided (its row's Holm family) is explained;
- a signal counts when its own paired ratio to the baseline's, over the blocks both
  cells have and by the comparison's own method (anytime-valid when blocks were
  added by looking), is decided in the family of the signals checked for that
  difference (Holm, 5 %), and moves the same way as the difference;
- a signal in the outcome's units (seconds of CPU for time; KiB at the peak for peak
  RSS) then accounts for its share of the difference, the mean of its per-block
  differences over the outcome's: "most of it" from one half, "more than all of it"
  beyond ALL (something else went the other way), else "part of it"; a
  count (faults, switches) cannot be converted and is said "with", never "because";
- a decided count of the kernel's names its mechanism (MECHANISMS: pages given back,
  mappings made and unmade, the heap moved by brk, protections changed, lock waits),
  with its counts ("75,050 madvise(MADV_DONTNEED) calls against 48"): only a count
  decided in the same cells, so an undecided one names nothing, and only one that moved
  materially (beyond MATERIAL times, by MATERIAL_CALLS calls a run or more);
- peak RSS is never explained by end-of-run figures (rusage's counts), only by what
  was read at the peak (statm) or near it (smaps_rollup, counted only where it was
  read at 90 % of the peak or more in the median block); never by the RSS at the first
  sample: taken as the exec completes, it fell 540-840 us into churn's CPU time on a
  quiet machine (2-7 MiB of its work in it, more the faster the allocator), before
  its exec or 700 us in beside a busy process, so a fast allocator's growth read as
  "at start-up" (run/launch.py stores it with that CPU time, start_cpu_s);
- a difference no signal accounts for says "not explained by a decided signal", names
  each signal in its units that moved the same way by half of it or more but was not
  decided (with its estimate), and names what was checked.

Counts, sizes and times that can be 0 (major faults, lazily freed pages, a short
run's system CPU) are compared as x + OFFSET (one count, one KiB, one millisecond):
a ratio needs positive values, and so little more changes nothing.
Hand-written: no library attributes paired differences this way; the tests are
stats.paired_ratio's and stats.holm's.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from pydantic import computed_field

from allocmark import stats
from allocmark.answer import recommend
from allocmark.answer.analyze import Comparison, Row
from allocmark.model import AllocatorRuns, Params, RunStatus
from allocmark.profile import TIME_PREFIX, TIMED, timed_words


@dataclass(frozen=True)
class Signal:
    name: str  # the run column or stored metric
    words: str  # what the sentence calls it
    unit: str  # "s", "KiB", or "" (a count: said "with")
    near_peak: bool = False  # read by smaps_rollup near the peak (see the rule)
    profiled: bool = False  # from the why pass's profiled blocks (run/whypass.py)
    mechanism: str = ""  # what the allocator does when this count is decided (MECHANISMS)


# What an allocator does, named when a count of the kernel's (run/kernel.py) moved with
# a decided difference: each key a mechanism, each value what it means for the program.
MECHANISMS = {
    "pages": "freed pages given back to the kernel, faulted in again when reused",
    "maps": "memory mapped and unmapped again and again",
    "heap": "the heap grown and shrunk through brk",
    "protect": "page protections changed (guard pages, a heap grown in place)",
    "locks": "threads waiting for a lock in the kernel (futex)",
}


def _count(kind: str, words: str, mechanism: str) -> Signal:
    """A count of the kernel's, the metric `syscall_<kind>` (run/kernel.py)."""
    return Signal(f"syscall_{kind}", words, "", mechanism=mechanism)


KERNEL = (
    _count("madvise_dontneed", "madvise(MADV_DONTNEED) calls", "pages"),
    _count("madvise_free", "madvise(MADV_FREE) calls", "pages"),
    _count("mmap", "mmap calls", "maps"),
    _count("munmap", "munmap calls", "maps"),
    _count("mremap", "mremap calls", "maps"),
    _count("brk", "brk calls", "heap"),
    _count("mprotect", "mprotect calls", "protect"),
    _count("futex_wait", "futex waits", "locks"),
    _count("futex_wake", "futex wakes", "locks"),
)


# The time inside those calls (futex lock waits: asleep on a lock's word), summed over the
# run's threads, timed by the kernel on the why pass's profiled runs only (run/kernel.py:
# two samples a call, too dear for every run).
INSIDE = tuple(
    Signal(f"{TIME_PREFIX}{kind}", f"time inside {timed_words(kind)}", "s", profiled=True)
    for kind in TIMED
)


TIME = (
    Signal("user_s", "user CPU", "s"),
    Signal("sys_s", "system CPU", "s"),
    Signal("minflt", "minor faults", ""),
    Signal("majflt", "major faults", ""),
    Signal("nvcsw", "voluntary context switches", ""),
    Signal("nivcsw", "involuntary context switches", ""),
    Signal("prof_inside_s", "time inside the allocator", "s", profiled=True),
    *INSIDE,
    *KERNEL,
)
RSS = (
    Signal("peak_anon_kib", "anonymous at the peak", "KiB"),
    Signal("peak_file_kib", "file-backed at the peak", "KiB"),
    Signal("near_peak_dirty_kib", "private dirty near the peak", "KiB", near_peak=True),
    Signal(
        "near_peak_lazyfree_kib", "freed lazily (MADV_FREE) near the peak", "KiB", near_peak=True
    ),
    Signal("near_peak_thp_kib", "in transparent huge pages near the peak", "KiB", near_peak=True),
    Signal(
        "prof_slack_kib", "of size-class rounding at the peak of live bytes", "KiB", profiled=True
    ),
)
MOST = 0.5  # the share of a difference that makes "most of it"
# Beyond this share a signal moved more than the whole difference (something else went
# the other way): "more than all of it", never "most of it".
ALL = 1.1
# What a value that can be 0 is compared with added (x + OFFSET): one count, one KiB,
# one millisecond (rusage's CPU times move by clock ticks of 1-4 ms). One second, as
# at first, drowned a 40 ms difference of system CPU in the added second.
OFFSET = {"": 1.0, "KiB": 1.0, "s": 1e-3}
NEAR = 0.9  # smaps_rollup counts where it was read at this share of the peak
# A mechanism is what an allocator does differently, not a few more calls of what it
# does anyway: its count must have moved beyond this many times (a madvise storm: x2,500;
# a futex lock: x80,000; 18 mmap calls against 13 on a program the storm slowed: x1.4,
# the storm's side effect, named at first) and by this many calls a run.
MATERIAL = 2.0
MATERIAL_CALLS = 100


@dataclass(frozen=True)
class Factor:
    """One signal that moved with a decided difference."""

    signal: str
    words: str
    unit: str
    delta: float  # the allocator's minus the baseline's, mean over the blocks
    ratio: float  # its paired ratio to the baseline's, with the interval that decided it
    low: float
    high: float
    share: float | None  # of the difference, in its units (None: a count)
    base: float = 0.0  # the baseline's value, mean over the blocks
    mechanism: str = ""  # a key of MECHANISMS: what a count of the kernel's says

    @computed_field  # type: ignore[prop-decorator]
    @property
    def degree(self) -> str:
        if self.share is None:
            return "with"
        if self.share >= ALL:
            return "more than all of it"
        return "most of it" if self.share >= MOST else "part of it"


@dataclass(frozen=True)
class Why:
    """A decided difference of one allocator on one row, and what moved with it."""

    workload: str
    params: Params
    label: str
    allocator: str
    axis: str  # "time" or "rss"
    delta: float  # the outcome's difference in its units (s, KiB), mean over the blocks
    factors: tuple[Factor, ...]  # decided, the same way; largest share first
    checked: tuple[str, ...]  # the signals looked at (Signal.name)
    # Signals in the outcome's units that moved the same way by a share of MOST or
    # more but were not decided: what "not explained" must not hide.
    moved: tuple[Factor, ...] = ()

    @computed_field  # type: ignore[prop-decorator]
    @property
    def explained(self) -> bool:
        """Accounted for at least in part by a signal in the outcome's units."""
        return any(f.share is not None for f in self.factors)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def mechanisms(self) -> tuple[str, ...]:
        """What the allocator does, by the kernel's decided counts (MECHANISMS' keys),
        the one that moved the most first."""
        moved = sorted(
            (f for f in self.factors if f.mechanism),
            key=lambda f: -abs(math.log(f.ratio)),
        )
        return tuple(dict.fromkeys(f.mechanism for f in moved))

    @property
    def mostly(self) -> bool:
        return any(f.share is not None and f.share >= MOST for f in self.factors)


def explain(
    comp: Comparison,
    found: Sequence[dict[str, recommend.Choice | recommend.Excluded]] = (),
    only: Collection[tuple[str, str, str]] | None = None,
) -> list[Why]:
    """Every decided time and peak RSS difference of the comparison's rows with what
    moved with it (from comp.signals), in row order; `found`: the rows' positions
    (recommend.per_row), when the caller has them; `only`: just these (row label,
    allocator, axis)."""
    if comp.baseline is None or not comp.paired or not comp.signals:
        return []
    cells = {
        (c.workload, c.params, c.allocator, c.role): c
        for c in comp.signals
        if c.role in ("measure", "why")
    }
    positions = list(found) or recommend.per_row(comp)
    out = []
    for row, p in zip(comp.rows, positions, strict=True):
        for a in comp.allocators:
            for axis in ("time", "rss"):
                if only is not None and (row.label, a, axis) not in only:
                    continue
                if (w := _one(comp, row, p, cells, a, axis)) is not None:
                    out.append(w)
    return out


def _one(
    comp: Comparison,
    row: Row,
    found: dict[str, recommend.Choice | recommend.Excluded],
    cells: dict[tuple[str, Params, str, str], AllocatorRuns],
    a: str,
    axis: str,
) -> Why | None:
    """The why of `a`'s decided difference on `axis` ("time", "rss") on `row`; None
    when it is not decided (or cannot be explained: no signals of its cells)."""
    assert comp.baseline is not None
    if a == comp.baseline:
        return None
    base = cells.get((row.workload, row.params, comp.baseline, "measure"))
    mine = cells.get((row.workload, row.params, a, "measure"))
    choice = found.get(a)
    if base is None or mine is None or not isinstance(choice, recommend.Choice):
        return None
    p = getattr(choice, axis)
    if p is None or not p.verdict.differs:
        return None
    if _fixed(row, a, axis):
        return None
    pb = cells.get((row.workload, row.params, comp.baseline, "why"))
    pa = cells.get((row.workload, row.params, a, "why"))
    return _why(comp, row, a, axis, mine, base, (pa, pb) if pa and pb else None)


def _fixed(row: Row, a: str, axis: str) -> bool:
    """A duration-bound workload's speed is its throughput: no seconds to account for."""
    return axis == "time" and row.cells["time_s"][a].fixed


def _why(
    comp: Comparison,
    row: Row,
    a: str,
    axis: str,
    mine: AllocatorRuns,
    base: AllocatorRuns,
    profiled: tuple[AllocatorRuns, AllocatorRuns] | None,
) -> Why:
    """`profiled`: the allocator's and the baseline's cells of the why pass, if it ran."""
    outcome = "wall_s" if axis == "time" else "maxrss_kib"
    pairs = _pairs(mine, base, outcome)
    delta = _mean_delta(pairs)
    candidates = (
        TIME if axis == "time" else tuple(s for s in RSS if not s.near_peak or _near(mine, base))
    )
    # Blocks added until the outcome was decided stop as soon as it is: its signals'
    # anytime-valid intervals are then often too wide to decide (4 blocks of a 6x
    # system CPU: [1.2-56]). Where the why pass ran, its blocks (a fixed number: the
    # fixed-n tests) are what every signal is judged over instead.
    pass_blocks = profiled is not None and comp.sequential
    tested = []
    for s in candidates:
        if s.profiled and profiled is None:
            continue
        from_pass = profiled is not None and (s.profiled or pass_blocks)
        sp = _pairs(*profiled, s.name) if profiled and from_pass else _pairs(mine, base, s.name)
        if len(sp) < 2 or all(x == 0 and y == 0 for x, y in sp):
            # 0 against 0 in every block (a kind of call neither made) cannot be decided:
            # in the family it would only cost the others power (Tarone 1990).
            continue
        offset = OFFSET[s.unit] if any(x <= 0 or y <= 0 for x, y in sp) else 0.0
        r = stats.paired_ratio(
            [x + offset for x, _ in sp],
            [y + offset for _, y in sp],
            sequential=comp.sequential and not from_pass,
        )
        if r is not None:
            tested.append((s, sp, r))
    # Two families, two kinds of statement: the causes (signals in the outcome's units,
    # said "most" or "part of it") and what came with them (counts, said "with").
    causes = [i for i, (s, _, _) in enumerate(tested) if s.unit]
    counts = [i for i, (s, _, _) in enumerate(tested) if not s.unit]
    judged = dict(zip(causes, stats.holm([tested[i][2] for i in causes]), strict=True))
    judged |= dict(zip(counts, stats.holm([tested[i][2] for i in counts]), strict=True))
    factors, undecided = [], []
    for (s, sp, _), r in zip(tested, (judged[i] for i in range(len(tested))), strict=True):
        moved = _mean_delta(sp)
        same_way = (moved > 0) == (delta > 0) and moved != 0
        share = moved / delta if s.unit and delta else None
        before = statistics.fmean(y for _, y in sp)
        factor = Factor(
            s.name, s.words, s.unit, moved, r.value, r.low, r.high, share, before, s.mechanism
        )
        if s.mechanism and not _material(r, moved):
            continue  # a few more calls of what the allocator does anyway name nothing
        if r.df > 0 and (r.low > 1 or r.high < 1) and same_way:
            factors.append(factor)
        elif same_way and share is not None and share >= MOST:
            undecided.append(factor)
    factors.sort(key=lambda f: (f.share is None, -(f.share or 0.0)))
    undecided.sort(key=lambda f: -(f.share or 0.0))
    return Why(
        row.workload,
        row.params,
        row.label,
        a,
        axis,
        delta,
        tuple(factors),
        tuple(s.name for s, _, _ in tested),
        tuple(undecided),
    )


def _material(r: stats.Ratio, moved: float) -> bool:
    """A count of the kernel's names a mechanism only when it moved by MATERIAL_CALLS
    calls a run or more and its interval is beyond MATERIAL times (or 1/MATERIAL)."""
    return abs(moved) >= MATERIAL_CALLS and (r.low >= MATERIAL or r.high <= 1 / MATERIAL)


def _pairs(mine: AllocatorRuns, base: AllocatorRuns, column: str) -> list[tuple[float, float]]:
    """(allocator's, baseline's) value in every block both have an OK run with it, in
    block order (the order the anytime-valid interval needs)."""
    a, b = _by_block(mine, column), _by_block(base, column)
    return [(a[k], b[k]) for k in sorted(a.keys() & b.keys())]


def _by_block(c: AllocatorRuns, column: str) -> dict[int, float]:
    reps, values = c.columns.get("rep", ()), c.columns.get(column, ())
    out: dict[int, float] = {}
    for rep, value, status in zip(reps, values, c.statuses, strict=False):
        if rep is not None and value is not None and status is RunStatus.OK:
            if int(rep) in out:
                return {}  # two runs of one cell in a block: no pairing
            out[int(rep)] = float(value)
    return out


def _mean_delta(pairs: Sequence[tuple[float, float]]) -> float:
    return statistics.fmean(x - y for x, y in pairs) if pairs else 0.0


def _near(*cells: AllocatorRuns) -> bool:
    """Was smaps_rollup read at NEAR of the peak or more, in the median block, in both
    cells?"""
    for c in cells:
        at, peak = _by_block(c, "near_peak_rss_kib"), _by_block(c, "maxrss_kib")
        shares = [at[k] / peak[k] for k in at.keys() & peak.keys() if peak[k] > 0]
        if not shares or statistics.median(shares) < NEAR:
            return False
    return True
