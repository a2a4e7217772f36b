"""Turn stored runs into the comparison the report shows."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from allocmark import labels, stats
from allocmark.allocators import lineage
from allocmark.model import AllocatorRuns, Git, Params, RunStatus, StoredRun
from allocmark.profile import TIME_PREFIX, TIMED
from allocmark.request import CampaignPlan
from allocmark.stats import batch

ALWAYS = ("time_s", "peak_rss_kib")  # shown even when every cell failed
# The hardening battery's runs are outcomes (harden.py), not times to compare.
BATTERY = "harden"

# Column groups of the report, in order, and the column of AllocatorRuns each reads.
# Beyond ALWAYS, a group none of whose cells has a number (e.g. overhead for a
# user's command) is left out.
METRICS: dict[str, str] = {
    "time_s": "wall_s",
    "peak_rss_kib": "maxrss_kib",
    "rss_mib_s": "rss_mib_s",  # RSS integrated over the run (the launcher's samples)
    "rss_end_kib": "rss_end_kib",  # a native workload's RSS once every block is freed
    "idle_rss_kib": "rss_idle_1s_kib",  # ... and after 1 s of idling (idle_ms)
    "overhead_ratio": "overhead_ratio",
    "ops_per_s": "ops_per_s",
}
HIGHER_IS_BETTER = frozenset({"ops_per_s"})
MEMORY = frozenset({"peak_rss_kib", "rss_mib_s", "rss_end_kib", "idle_rss_kib", "overhead_ratio"})
# Memory groups beyond peak RSS that a brief comparison (the terminal's) leaves
# out above BRIEF_ROWS rows: rich takes ~0.15 s per table of 100 rows x 10 allocators.
SECONDARY = ("rss_mib_s", "rss_end_kib", "idle_rss_kib")
BRIEF_ROWS = 20
# The stored metrics METRICS reads.
METRIC_NAMES = ("rss_mib_s", "rss_end_kib", "rss_idle_1s_kib", "overhead_ratio", "ops_per_s")
# What explains a difference (why.py): run columns and stored metrics of every run.
SIGNAL_COLUMNS = (
    "rep",
    "wall_s",
    "maxrss_kib",
    "user_s",
    "sys_s",
    "minflt",
    "majflt",
    "nvcsw",
    "nivcsw",
)
SIGNAL_METRICS = (
    "peak_anon_kib",
    "peak_file_kib",
    "near_peak_rss_kib",
    "near_peak_dirty_kib",
    "near_peak_lazyfree_kib",
    "near_peak_thp_kib",
    "prof_inside_s",
    "prof_slack_kib",
    # the kernel's counts (run/kernel.py) that name a mechanism (why.KERNEL)
    "syscall_madvise_dontneed",
    "syscall_madvise_free",
    "syscall_mmap",
    "syscall_munmap",
    "syscall_mremap",
    "syscall_brk",
    "syscall_mprotect",
    "syscall_futex_wait",
    "syscall_futex_wake",
    # the kernel's time inside them, on the why pass's profiled runs (why.INSIDE)
    *(TIME_PREFIX + kind for kind in TIMED),
)


def as_cells(data: Sequence[AllocatorRuns] | Sequence[StoredRun]) -> list[AllocatorRuns]:
    """Cells as they are, or runs grouped into cells."""
    if data and isinstance(data[0], StoredRun):
        return AllocatorRuns.of_runs(data, METRIC_NAMES)  # type: ignore[arg-type]
    return list(data)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Cell:
    """One allocator on one row for one metric."""

    runs: int
    failures: tuple[tuple[str, int], ...]  # status -> count, for runs that are not OK
    summary: stats.Summary | None  # None unless every run is OK and has the metric
    values: tuple[float, ...] = ()
    ratio: stats.Ratio | None = None  # to the baseline's cell (inverted for speed-ups)
    loose: bool = False  # its ratio's interval is wider than the precision target
    verdict: stats.Verdict | None = None  # what the ratio says (None without a ratio)
    # A ratio whose estimate is better than the baseline's by more than the margin, again
    # at its level in the row's family at stats.RECOMMEND_ALPHA: what a "use" of it
    # needs decided (None: it leans no such way).
    firm: stats.Ratio | None = None
    held: stats.Verdict | None = None  # firm's verdict (None without firm)
    blocks: tuple[int, ...] = ()  # the block (repetition) of each value, for pairing
    fixed: bool = False  # time fixed by a parameter (duration-bound): not a result

    @property
    def state(self) -> str:
        """ "ok", the worst failure with its count (e.g. "crashed 2/3"), "missing"
        (no run), "fixed" (a duration-bound workload's time) or "n/a" (runs without
        this metric)."""
        if self.fixed:
            return "fixed"
        if self.summary is not None:
            return "ok"
        if self.failures:
            status, count = self.failures[0]
            return f"{status} {count}/{self.runs}"
        return "missing" if self.runs == 0 else "n/a"


@dataclass(frozen=True)
class Row:
    workload: str
    params: Params
    label: str
    cells: dict[str, dict[str, Cell]]  # metric -> allocator -> cell
    final: bool = False  # its budget ended it undecided: the final look (looks.levels)
    # Per allocator, the cell that says how fast it is: its time, or its throughput
    # where time is fixed (None: a fixed time without a throughput). Made with the row.
    speeds: dict[str, Cell | None] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ops = self.cells.get("ops_per_s", {})
        speeds = {a: ops.get(a) if c.fixed else c for a, c in self.cells["time_s"].items()}
        object.__setattr__(self, "speeds", speeds)


@dataclass(frozen=True)
class Comparison:
    baseline: str | None
    allocators: tuple[str, ...]
    partial: frozenset[str]
    rows: tuple[Row, ...]
    geomean: dict[str, dict[str, stats.GeoMean | None]]  # metric -> allocator -> of ratios
    metrics: tuple[str, ...] = tuple(METRICS)  # the groups that have numbers
    speedup: bool = False  # time ratios are baseline / allocator
    margin: float = stats.DEFAULT_MARGIN  # precision target and equivalence margin of the ratios
    paired: bool = True  # ratios from blocks (else Welch on two independent samples)
    sequential: bool = False  # blocks were added until decided: anytime-valid intervals
    noise: Noise | None = None  # the campaign's noise sentinel, when stored
    # What a partial allocator lacks, and which of those functions each row's program
    # calls (None: not known), so that the recommendation can refuse it where it matters.
    lacks: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    calls: dict[tuple[str, str], tuple[str, ...] | None] = dataclasses.field(default_factory=dict)
    left_out: tuple[str, ...] = ()  # groups with data left out of a brief comparison
    # Allocators that are not for speed or memory: "debug", "wrapper" (never recommended).
    roles: dict[str, str] = dataclasses.field(default_factory=dict)
    lineages: dict[str, lineage.Lineage] = dataclasses.field(default_factory=dict)
    revisions: dict[str, Git] = dataclasses.field(default_factory=dict)  # built from git
    cores: int = 0  # of the machine the campaign ran on (0: not known)
    max_blocks: int = 0  # the blocks a row may get (0: no cap known): no forecast beyond it
    # SIGNAL_COLUMNS and SIGNAL_METRICS of every cell: what a why reads (stored.comparison
    # reads them when asked; a CSV never does)
    signals: tuple[AllocatorRuns, ...] = ()


NOTHING = Comparison(None, (), frozenset(), (), {})  # no rows: a view without a summary


@dataclass(frozen=True)
class Noise:
    """What the noise sentinel saw during a campaign."""

    rerun: int  # measured runs taken again because other work spiked during them
    runs: int  # measured runs in all
    attempts: int  # the re-runs in all (a run is taken again up to 3 times)
    calibration: stats.Summary | None  # the fixed CPU loop's seconds, between blocks
    # measured runs taken again uncounted (run/kernel.py: counting them cost more than
    # its BUDGET), and the mean share of their time counting cost the counted ones
    uncounted: int = 0
    count_share: float = 0.0


def margin_of(plan: CampaignPlan) -> float:
    """A campaign's equivalence margin: its precision's, else the default."""
    return (plan.precision.margin if plan.precision else 0.0) or stats.DEFAULT_MARGIN


def compare(
    data: Sequence[AllocatorRuns] | Sequence[StoredRun],
    allocators: Sequence[str],
    baseline: str | None,
    speedup: bool = False,
    margin: float = stats.DEFAULT_MARGIN,
    paired: bool = True,
    fixed_time: dict[str, str] | None = None,
    groups: Sequence[str] | None = None,
    sequential: bool = False,
    finished: bool = False,
) -> Comparison:
    """Rows of measured runs (baseline-RSS runs only feed the overhead ratio). Ratios
    to the baseline are paired by block unless `paired` is False (runs that were not
    taken in blocks: imports, merged campaigns); duration-bound workloads
    (`fixed_time`: workload -> the parameter that sets the duration) have no time
    result. `groups`: only these of METRICS (default: all). `sequential`: blocks were
    added until the ratios decided, so their intervals are the anytime-valid ones;
    `finished` (no block will be added): a row left undecided gets its final look."""
    cells = as_cells(data)
    by_cell: dict[tuple[str, Params], dict[str, AllocatorRuns]] = {}
    for c in cells:
        if c.role == "measure" and c.workload != BATTERY:
            by_cell.setdefault((c.workload, c.params), {})[c.allocator] = c
    keys = sorted(by_cell, key=labels.row_order)
    named = labels.label_rows(keys)
    how = _How(baseline, speedup, margin, paired, sequential and paired)
    wanted = {m: c for m, c in METRICS.items() if groups is None or m in groups}
    raws = [
        _raw(by_cell[key], allocators, time_is_fixed(fixed_time or {}, *key), wanted)
        for key in keys
    ]
    _summarize(raws)
    ratios = _paired(raws, how)
    rows = tuple(
        _row(w, p, named[(w, p)], raw, how, ratios) for (w, p), raw in zip(keys, raws, strict=True)
    )
    if how.sequential and finished:
        rows = tuple(_final_look(row, raw, how) for row, raw in zip(rows, raws, strict=True))
    return Comparison(
        baseline=baseline,
        allocators=tuple(allocators),
        partial=frozenset(c.allocator for c in cells if c.partial),
        rows=rows,
        geomean={m: {a: _geomean(rows, m, a) for a in allocators} for m in wanted},
        metrics=tuple(m for m in wanted if m in ALWAYS or _has_numbers(rows, m)),
        speedup=speedup,
        margin=margin,
        paired=paired,
        sequential=how.sequential,
    )


@dataclass(frozen=True)
class _How:
    """How a row's cells are compared with the baseline's."""

    baseline: str | None
    speedup: bool
    margin: float
    paired: bool
    sequential: bool = False


def time_is_fixed(fixed_time: dict[str, str], workload: str, params: Params) -> bool:
    """Is this cell's time set by a parameter (a duration), so that it is no result?"""
    name = fixed_time.get(workload, "")
    return bool(name) and dict(params).get(name, 0) not in (0, "0")


def _has_numbers(rows: Sequence[Row], metric: str) -> bool:
    return any(c.summary is not None for r in rows for c in r.cells[metric].values())


Raw = dict[str, dict[str, Cell]]  # metric -> allocator -> cell, before its ratio


def _raw(
    by_alloc: dict[str, AllocatorRuns],
    allocators: Sequence[str],
    fixed_time: bool,
    groups: dict[str, str],
) -> Raw:
    """A row's cells with their values (not summarised yet)."""
    raw: Raw = {}
    for metric, column in groups.items():
        cells = {a: _values_of(by_alloc.get(a), column) for a in allocators}
        if fixed_time and metric == "time_s":
            cells = {a: dataclasses.replace(c, fixed=True) for a, c in cells.items()}
        raw[metric] = cells
    return raw


def _summarize(raws: Sequence[Raw]) -> None:
    """Every complete cell's summary, all in one batch (stats.summarize_many)."""
    todo = [
        (cells, a)
        for raw in raws
        for cells in raw.values()
        for a, c in cells.items()
        if c.values and not c.fixed
    ]
    summaries = stats.summarize_many([cells[a].values for cells, a in todo])
    for (cells, a), summary in zip(todo, summaries, strict=True):
        cells[a] = dataclasses.replace(cells[a], summary=summary)


def _pair(cell: Cell, base: Cell | None, metric: str, how: _How) -> tuple[Cell, Cell] | None:
    """(numerator, denominator) of a cell's ratio to the baseline, if it has one."""
    if cell.summary is None or base is None or base.summary is None:
        return None
    return (base, cell) if how.speedup and metric == "time_s" else (cell, base)


def _final_look(row: Row, raw: Raw, how: _How) -> Row:
    """The row again with final looks (looks.levels) when it ended undecided: its budget
    or max_blocks stopped it, not its intervals. Cells with fewer blocks than the row (a
    race dropped them, for what their blocks said) keep the sequence alone."""
    if stats.Verdict.UNDECIDED not in decisions(row, how.baseline, how.margin):
        return row
    final = _paired([raw], how, final=True)
    return dataclasses.replace(
        _row(row.workload, row.params, row.label, raw, how, final), final=True
    )


def deciding(row: Row, baseline: str | None) -> list[Cell]:
    """The cells whose ratios decide a row: time (throughput for a duration-bound
    workload) and peak RSS, of every allocator but the baseline."""
    metric = _speed_metric(row.cells)
    return [
        c
        for m in (metric, "peak_rss_kib")
        for a, c in row.cells.get(m, {}).items()
        if a != baseline
    ]


def decisions(row: Row, baseline: str | None, margin: float) -> list[stats.Verdict | None]:
    """The verdict of each ratio that decides the row, judged as one family (Holm, as
    the recommendation judges them); None for a cell that failed or has no ratio
    (more blocks would not help)."""
    return [None if r is None else stats.verdict(r, margin) for r in family_ratios(row, baseline)]


def family_ratios(row: Row, baseline: str | None) -> list[stats.Ratio | None]:
    """The ratio of each cell that decides the row (`deciding`), the one a campaign
    waits on: at its level in the row's Holm family (_as_family), or where its estimate
    is better than the baseline's beyond the margin, at the level a recommendation
    needs (Cell.firm: a row whose winner is decided for a verdict but not for a "use"
    is not done); None for a cell without one."""
    return [c.firm or c.ratio for c in deciding(row, baseline)]


def _paired(raws: Sequence[Raw], how: _How, final: bool = False) -> dict[int, stats.Ratio | None]:
    """Every cell's paired ratio to the baseline (by id of the cell), in one batch;
    `final`: the final looks of cells with all the row's blocks (one row)."""
    if not how.paired:
        return {}
    jobs: list[tuple[int, tuple[Sequence[float], Sequence[float]]]] = []
    for raw in raws:
        for metric, by_alloc in raw.items():
            base = by_alloc.get(how.baseline) if how.baseline else None
            for cell in by_alloc.values():
                pair = _pair(cell, base, metric, how)
                aligned = aligned_blocks(*pair) if pair else None
                if aligned:
                    jobs.append((id(cell), aligned))
    if how.sequential:
        most = max((len(values[0]) for _, values in jobs), default=0)
        ratios = [
            stats.paired_ratio(*values, sequential=True, final=final and len(values[0]) == most)
            for _, values in jobs
        ]
    else:
        ratios = batch.paired_ratios([values for _, values in jobs])
    return {key: ratio for (key, _), ratio in zip(jobs, ratios, strict=True)}


def _row(
    workload: str,
    params: Params,
    label: str,
    raw: Raw,
    how: _How,
    paired: dict[int, stats.Ratio | None],
) -> Row:
    cells: dict[str, dict[str, Cell]] = {}
    for metric, by_alloc in raw.items():
        base = by_alloc.get(how.baseline) if how.baseline else None
        cells[metric] = {
            a: _finish(c, base, metric, how, paired.get(id(c))) for a, c in by_alloc.items()
        }
    return Row(workload, params, label, _as_family(cells, how))


def _as_family(cells: dict[str, dict[str, Cell]], how: _How) -> dict[str, dict[str, Cell]]:
    """The row's deciding ratios (each allocator's time, or throughput where time is
    fixed, and peak RSS) at their level in the row's Holm family, with their verdicts:
    the one interval every format, the answer and the campaign's stopping rule read.
    The other metrics keep their own 95 % intervals."""
    metric = _speed_metric(cells)
    keys = [
        (m, a)
        for m in (metric, "peak_rss_kib")
        for a, c in cells.get(m, {}).items()
        if a != how.baseline and c.ratio is not None
    ]
    ratios = [cells[m][a].ratio for m, a in keys]
    judged = stats.holm(ratios)  # type: ignore[arg-type]
    strict = stats.holm_levels(ratios, stats.RECOMMEND_ALPHA)  # type: ignore[arg-type]
    out = {m: dict(by_alloc) for m, by_alloc in cells.items()}
    for (m, a), r, level in zip(keys, judged, strict, strict=True):
        higher = m in HIGHER_IS_BETTER or (how.speedup and m == "time_s")
        firm, held = _firm(r, level, higher, how.margin)
        out[m][a] = dataclasses.replace(
            cells[m][a],
            ratio=r,
            loose=r.half_width > how.margin,
            verdict=stats.verdict(r, how.margin, higher),
            firm=firm,
            held=held,
        )
    return out


def _firm(
    r: stats.Ratio, level: float, higher: bool, margin: float
) -> tuple[stats.Ratio | None, stats.Verdict | None]:
    """A ratio leaning better beyond the margin, at the level a "use" needs, and its
    verdict there (Cell.firm, Cell.held); None for one that leans no such way."""
    if not leans_better(r, higher, margin):
        return None, None
    firm = stats.at_alpha(r, level)
    return firm, stats.verdict(firm, margin, higher)


def pending(cell: Cell) -> bool:
    """Decided for a verdict, not yet at the level a "use" needs (stats.pending): the
    campaign waits on it."""
    return stats.pending(cell.verdict, cell.held)


def leans_better(r: stats.Ratio, higher: bool, margin: float) -> bool:
    """The alternative's estimate is better than the baseline's by more than the margin:
    a candidate for "use" (never one that could still be "the same")."""
    better = r.value if higher else 1 / r.value
    return better > 1 + margin


def _speed_metric(cells: dict[str, dict[str, Cell]]) -> str:
    """The metric that says how fast: throughput where time is fixed, else time."""
    return "ops_per_s" if any(c.fixed for c in cells.get("time_s", {}).values()) else "time_s"


def failures(comp: Comparison, skip: str = "") -> list[str]:
    """ "larson: glibc (crashed 4/4)" for each row x allocator whose runs failed, so
    that its cells have no number (a cell is a number only when every run is OK): never
    an answer, and an exit status of 1 in every command that shows it. `skip`: a
    workload whose failures are its findings (the hardening battery's)."""
    found: dict[tuple[str, str], str] = {}
    for row in comp.rows:
        for metric in ("time_s", "peak_rss_kib"):  # a duration-bound row's time is fixed
            for a, c in row.cells.get(metric, {}).items():
                if row.workload != skip and c.failures and c.summary is None and not c.fixed:
                    found.setdefault((row.label, a), f"{row.label}: {a} ({c.state})")
    return list(found.values())


def cell_of(runs: AllocatorRuns | None, column: str) -> Cell:
    """A cell's numbers: only when every run is OK and has the metric."""
    cell = _values_of(runs, column)
    return dataclasses.replace(cell, summary=stats.summarize(cell.values)) if cell.values else cell


def _values_of(runs: AllocatorRuns | None, column: str) -> Cell:
    """A cell's runs and values, without their summary (values only when every run
    is OK and has the metric)."""
    if runs is None:
        return Cell(runs=0, failures=(), summary=None)
    # tuple.count and `in` run in C: a report reads thousands of cells of 100 runs.
    all_ok = runs.statuses.count(RunStatus.OK) == len(runs.statuses)
    bad = Counter() if all_ok else Counter(s.value for s in runs.statuses if s is not RunStatus.OK)
    values = runs.columns.get(column, ())
    numbers = (
        cast(tuple[float, ...], values)
        if None not in values
        else tuple(v for v in values if v is not None)
    )
    complete = bool(runs.statuses) and not bad and len(numbers) == len(runs.statuses)
    reps = runs.columns.get("rep", ())
    blocks = (
        tuple(map(int, cast(tuple[float, ...], reps)))
        if None not in reps
        else tuple(int(r or 0) for r in reps)
    )
    return Cell(
        runs=len(runs.statuses),
        failures=tuple(bad.most_common()),
        summary=None,
        values=numbers if complete else (),
        blocks=blocks if complete and len(reps) == len(numbers) else (),
    )


def _finish(
    cell: Cell, base: Cell | None, metric: str, how: _How, ratio: stats.Ratio | None
) -> Cell:
    """The cell with its ratio to the baseline (the paired one, computed in batch, or
    else Welch's on the two summaries) and its verdict."""
    pair = _pair(cell, base, metric, how)
    if pair is None:
        return cell
    if ratio is None:
        ratio = stats.ratio_of(pair[0].summary, pair[1].summary)  # type: ignore[arg-type]
    if ratio is None:
        return cell
    higher = metric in HIGHER_IS_BETTER or (how.speedup and metric == "time_s")
    return dataclasses.replace(
        cell,
        ratio=ratio,
        loose=ratio.half_width > how.margin,
        verdict=stats.verdict(ratio, how.margin, higher),
    )


def paired_ratio(a: Cell, b: Cell, sequential: bool = False) -> stats.Ratio | None:
    """a/b paired by block (see aligned_blocks); `sequential`: the anytime-valid interval."""
    aligned = aligned_blocks(a, b)
    return stats.paired_ratio(*aligned, sequential=sequential) if aligned else None


def row_ratio(comp: Comparison, row: Row, a: Cell, b: Cell) -> stats.Ratio | None:
    """a/b on a row, paired by block, by the method of the comparison's ratios: a final
    look (stats.SPLIT) on a row that ended undecided, when a and b have all its blocks."""
    aligned = aligned_blocks(a, b)
    if not aligned:
        return None
    most = row_blocks(row)
    final = row.final and len(aligned[0]) == most
    return stats.paired_ratio(*aligned, sequential=comp.sequential, final=final)


def row_blocks(row: Row) -> int:
    """The most blocks any cell of the row has: the blocks the row ran."""
    return max((len(c.blocks) for cells in row.cells.values() for c in cells.values()), default=0)


def aligned_blocks(a: Cell, b: Cell) -> tuple[Sequence[float], Sequence[float]] | None:
    """a's and b's values in the blocks both have, in block order (the order they ran,
    which the anytime-valid interval needs); None with fewer than two such blocks, or
    when a block holds two runs of one cell."""
    if not a.blocks or not b.blocks:
        return None
    if a.blocks == b.blocks and len(set(a.blocks)) == len(a.blocks):  # the usual case
        if len(a.blocks) < 2:
            return None
        if list(a.blocks) == sorted(a.blocks):  # distinct: so strictly in the order they ran
            return a.values, b.values
        order = sorted(range(len(a.blocks)), key=a.blocks.__getitem__)  # the order they ran
        return [a.values[i] for i in order], [b.values[i] for i in order]
    by_a, by_b = (
        dict(zip(a.blocks, a.values, strict=True)),
        dict(zip(b.blocks, b.values, strict=True)),
    )
    if len(by_a) != len(a.values) or len(by_b) != len(b.values):
        return None
    common = sorted(by_a.keys() & by_b.keys())
    if len(common) < 2:
        return None
    return [by_a[k] for k in common], [by_b[k] for k in common]


def _geomean(rows: Sequence[Row], metric: str, allocator: str) -> stats.GeoMean | None:
    ratios = [r.cells[metric][allocator].ratio for r in rows]
    return stats.geomean([x.value for x in ratios if x is not None])
