"""Turn stored runs into the comparison the report shows."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from allocmark import profile, stats
from allocmark.model import CellRuns, Params, RunStatus, StoredRun
from allocmark.store import Store

ALWAYS = ("time_s", "peak_rss_kib")  # shown even when every cell failed

# Column groups of the report, in order, and the column of CellRuns each reads.
# Beyond ALWAYS, a group none of whose cells has a number (e.g. overhead for a
# user's command) is left out.
METRICS: dict[str, str] = {
    "time_s": "wall_s",
    "peak_rss_kib": "maxrss_kib",
    "overhead_ratio": "overhead_ratio",
    "ops_per_s": "ops_per_s",
}
HIGHER_IS_BETTER = frozenset({"ops_per_s"})
METRIC_NAMES = ("overhead_ratio", "ops_per_s")  # the stored metrics METRICS reads


def as_cells(data: Sequence[CellRuns] | Sequence[StoredRun]) -> list[CellRuns]:
    """Cells as they are, or runs grouped into cells."""
    if data and isinstance(data[0], StoredRun):
        return CellRuns.of_runs(data, METRIC_NAMES)  # type: ignore[arg-type]
    return list(data)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Cell:
    """One allocator on one row for one metric."""

    runs: int
    failures: tuple[tuple[str, int], ...]  # status -> count, for runs that are not OK
    summary: stats.Summary | None  # None unless every run is OK and has the metric
    values: tuple[float, ...] = ()
    ratio: stats.Ratio | None = None  # to the baseline's cell (inverted for speed-ups)
    loose: bool = False  # its interval never got as tight as the campaign's target

    @property
    def state(self) -> str:
        """ "ok", the worst failure with its count (e.g. "crashed 2/3"), "missing"
        (no run), or "n/a" (runs without this metric)."""
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


@dataclass(frozen=True)
class Comparison:
    baseline: str | None
    allocators: tuple[str, ...]
    partial: frozenset[str]
    rows: tuple[Row, ...]
    geomean: dict[str, dict[str, stats.GeoMean | None]]  # metric -> allocator -> of ratios
    metrics: tuple[str, ...] = tuple(METRICS)  # the groups that have numbers
    speedup: bool = False  # time ratios are baseline / allocator
    target_ci: float | None = None  # the campaign's adaptive target, if it had one


def stored_comparison(store: Store, cid: int, speedup: bool = False) -> Comparison:
    """The comparison of a stored campaign, baseline first, then the catalog order."""
    c = store.campaign(cid)
    names = [r["name"] for r in store.allocator_rows(cid)]
    ordered = ([c.baseline] if c.baseline in names else []) + [n for n in names if n != c.baseline]
    target = store.settings(cid).get("target_ci")
    cells = store.cells(cid, METRIC_NAMES, columns=("wall_s", "maxrss_kib"))
    return compare(cells, ordered, c.baseline, speedup, target)


def stored_profiles(store: Store, cid: int) -> list[profile.View]:
    """The profiler's view of a stored campaign, baseline first."""
    c = store.campaign(cid)
    rows = store.allocator_rows(cid)
    names = [r["name"] for r in rows]
    ordered = ([c.baseline] if c.baseline in names else []) + [n for n in names if n != c.baseline]
    # glibc has no preloaded library: the object that served its malloc is libc.
    libraries = {r["name"]: r["library"] or dict(json.loads(r["served_json"] or "[]")).get("malloc")
                 for r in rows}  # fmt: skip
    return profile.views(store.profiles(cid), libraries, ordered, c.baseline)


def compare(
    data: Sequence[CellRuns] | Sequence[StoredRun],
    allocators: Sequence[str],
    baseline: str | None,
    speedup: bool = False,
    target_ci: float | None = None,
) -> Comparison:
    """Rows of measured runs (baseline-RSS runs only feed the overhead ratio)."""
    cells = as_cells(data)
    groups: dict[tuple[str, Params], dict[str, CellRuns]] = {}
    for c in cells:
        if c.role == "measure":
            groups.setdefault((c.workload, c.params), {})[c.allocator] = c
    keys = sorted(groups, key=_row_order)
    labels = label_rows(keys)
    rows = tuple(
        _row(w, p, labels[(w, p)], groups[(w, p)], allocators, baseline, speedup, target_ci)
        for w, p in keys
    )
    return Comparison(
        baseline=baseline,
        allocators=tuple(allocators),
        partial=frozenset(c.allocator for c in cells if c.partial),
        rows=rows,
        geomean={m: {a: _geomean(rows, m, a) for a in allocators} for m in METRICS},
        metrics=tuple(m for m in METRICS if m in ALWAYS or _has_numbers(rows, m)),
        speedup=speedup,
        target_ci=target_ci,
    )


def _has_numbers(rows: Sequence[Row], metric: str) -> bool:
    return any(c.summary is not None for r in rows for c in r.cells[metric].values())


def _row(
    workload: str,
    params: Params,
    label: str,
    by_alloc: dict[str, CellRuns],
    allocators: Sequence[str],
    baseline: str | None,
    speedup: bool,
    target_ci: float | None,
) -> Row:
    cells: dict[str, dict[str, Cell]] = {}
    for metric, column in METRICS.items():
        raw = {a: cell_of(by_alloc.get(a), column) for a in allocators}
        base = raw.get(baseline) if baseline else None
        invert = speedup and metric == "time_s"
        target = target_ci if metric == "time_s" else None
        cells[metric] = {a: _finish(c, base, invert, target) for a, c in raw.items()}
    return Row(workload, params, label, cells)


def cell_of(runs: CellRuns | None, column: str) -> Cell:
    """A cell's numbers: only when every run is OK and has the metric."""
    if runs is None:
        return Cell(runs=0, failures=(), summary=None)
    bad = Counter(s.value for s in runs.statuses if s is not RunStatus.OK)
    values = runs.columns.get(column, ())
    numbers = tuple(v for v in values if v is not None)
    complete = bool(runs.statuses) and not bad and len(numbers) == len(runs.statuses)
    return Cell(
        runs=len(runs.statuses),
        failures=tuple(bad.most_common()),
        summary=stats.summarize(numbers) if complete else None,
        values=numbers if complete else (),
    )


def _finish(cell: Cell, base: Cell | None, invert: bool, target: float | None) -> Cell:
    if cell.summary is None:
        return cell
    ratio = None
    if base is not None and base.summary is not None:
        pair = (base.summary, cell.summary) if invert else (cell.summary, base.summary)
        ratio = stats.ratio_of(*pair)
    loose = target is not None and cell.summary.ci_rel > target
    return Cell(cell.runs, cell.failures, cell.summary, cell.values, ratio, loose)


def _geomean(rows: Sequence[Row], metric: str, allocator: str) -> stats.GeoMean | None:
    ratios = [r.cells[metric][allocator].ratio for r in rows]
    return stats.geomean([x.value for x in ratios if x is not None])


def _row_order(key: tuple[str, Params]) -> tuple[str, tuple[tuple[str, int, str], ...]]:
    workload, params = key
    return workload, tuple((k, v if isinstance(v, int) else 0, str(v)) for k, v in params)


def label_rows(keys: Sequence[tuple[str, Params]]) -> dict[tuple[str, Params], str]:
    """Name each row by its workload and only the parameters that vary within it."""
    out = {}
    for workload, params in keys:
        siblings = [dict(p) for w, p in keys if w == workload]
        varying = [k for k, v in params if any(s.get(k) != v for s in siblings)]
        text = " ".join(f"{k}={value_text(v)}" for k, v in params if k in varying)
        out[(workload, params)] = f"{workload} {text}".strip()
    return out


def value_text(v: int | str) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


# ---------------------------------------------------------------------------
# `allocmark try`
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class TryLine:
    """One allocator's line in `allocmark try` output (hyperfine style)."""

    allocator: str
    partial: bool
    state: str
    wall: stats.Summary | None
    user: stats.Summary | None
    sys: stats.Summary | None
    rss_kib: stats.Summary | None
    speedup: float | None  # baseline mean time / this mean time
    speedup_sd: float | None
    significant: bool  # Welch's t-test on log times, p < 0.05


def try_lines(
    data: Sequence[CellRuns] | Sequence[StoredRun], allocators: Sequence[str], baseline: str | None
) -> list[TryLine]:
    cells = {c.allocator: c for c in as_cells(data) if c.role == "measure"}
    walls = {a: cell_of(cells.get(a), "wall_s") for a in allocators}
    base = walls.get(baseline) if baseline else None
    return [_try_line(a, cells.get(a), walls[a], base) for a in allocators]


def _try_line(a: str, runs: CellRuns | None, wall: Cell, base: Cell | None) -> TryLine:
    def summ(column: str) -> stats.Summary | None:
        other = cell_of(runs, column)
        return other.summary if wall.summary is not None else None

    speed = sd = None
    significant = False
    if wall.summary is not None and base is not None and base.summary is not None:
        speed = base.summary.mean / wall.summary.mean if wall.summary.mean else None
        sd = stats.ratio_stdev(base.summary, wall.summary)
        test = stats.ratio_of(base.summary, wall.summary)
        significant = test is not None and test.significant
    return TryLine(
        a,
        runs is not None and runs.partial,
        wall.state,
        wall.summary,
        summ("user_s"),
        summ("sys_s"),
        summ("maxrss_kib"),
        speed,
        sd,
        significant,
    )
