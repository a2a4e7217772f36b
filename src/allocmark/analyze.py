"""Turn stored runs into the comparison the report shows."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from allocmark import stats
from allocmark.model import Params, RunStatus, StoredRun
from allocmark.store import Store

Getter = Callable[[StoredRun], float | None]
ALWAYS = ("time_s", "peak_rss_kib")  # shown even when every cell failed

# Column groups of the report, in order. Beyond ALWAYS, a group none of whose
# cells has a number (e.g. overhead for a user's command) is left out.
METRICS: dict[str, Getter] = {
    "time_s": lambda r: r.wall_s,
    "peak_rss_kib": lambda r: float(r.maxrss_kib),
    "overhead_ratio": lambda r: r.metrics.get("overhead_ratio"),
    "ops_per_s": lambda r: r.metrics.get("ops_per_s"),
}


@dataclass(frozen=True)
class Cell:
    """One allocator on one row for one metric."""

    runs: int
    failures: tuple[tuple[str, int], ...]  # status -> count, for runs that are not OK
    summary: stats.Summary | None  # None unless every run is OK and has the metric
    ratio: float | None  # median / baseline median (inverse for speed-ups)

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
    geomean: dict[str, dict[str, float | None]]  # metric -> allocator -> geomean of ratios
    metrics: tuple[str, ...] = tuple(METRICS)  # the groups that have numbers
    speedup: bool = False  # time ratios are baseline / allocator


def _has_numbers(rows: Sequence[Row], metric: str) -> bool:
    return any(c.summary is not None for r in rows for c in r.cells[metric].values())


def stored_comparison(store: Store, cid: int, speedup: bool = False) -> Comparison:
    """The comparison of a stored campaign, baseline first, then the catalog order."""
    c = store.campaign(cid)
    names = [r["name"] for r in store.allocator_rows(cid)]
    ordered = ([c.baseline] if c.baseline in names else []) + [n for n in names if n != c.baseline]
    return compare(store.runs(cid), ordered, c.baseline, speedup)


def compare(
    runs: Sequence[StoredRun],
    allocators: Sequence[str],
    baseline: str | None,
    speedup: bool = False,
) -> Comparison:
    """Rows of measured runs (baseline-RSS runs only feed the overhead ratio)."""
    groups: dict[tuple[str, Params], list[StoredRun]] = {}
    for r in runs:
        if r.role == "measure":
            groups.setdefault((r.workload, r.params), []).append(r)
    keys = sorted(groups, key=_row_order)
    labels = _labels(keys)
    rows = tuple(
        _row(w, p, labels[(w, p)], groups[(w, p)], allocators, baseline, speedup) for w, p in keys
    )
    return Comparison(
        baseline=baseline,
        allocators=tuple(allocators),
        partial=frozenset(r.allocator for r in runs if r.partial),
        rows=rows,
        geomean={m: {a: _geomean(rows, m, a) for a in allocators} for m in METRICS},
        metrics=tuple(m for m in METRICS if m in ALWAYS or _has_numbers(rows, m)),
        speedup=speedup,
    )


def _row(
    workload: str,
    params: Params,
    label: str,
    runs: Sequence[StoredRun],
    allocators: Sequence[str],
    baseline: str | None,
    speedup: bool,
) -> Row:
    cells: dict[str, dict[str, Cell]] = {}
    for metric, get in METRICS.items():
        raw = {a: _cell([r for r in runs if r.allocator == a], get) for a in allocators}
        base = raw.get(baseline) if baseline else None
        invert = speedup and metric == "time_s"
        cells[metric] = {a: _with_ratio(c, base, invert) for a, c in raw.items()}
    return Row(workload, params, label, cells)


def _cell(runs: Sequence[StoredRun], get: Getter) -> Cell:
    bad = Counter(r.status.value for r in runs if r.status is not RunStatus.OK)
    values = [get(r) for r in runs]
    numbers = [v for v in values if v is not None]
    complete = runs and not bad and len(numbers) == len(values)
    summary = stats.summarize(numbers) if complete else None
    return Cell(runs=len(runs), failures=tuple(bad.most_common()), summary=summary, ratio=None)


def _with_ratio(cell: Cell, base: Cell | None, invert: bool = False) -> Cell:
    if cell.summary is None or base is None or base.summary is None:
        return cell
    num, den = (
        (base.summary.median, cell.summary.median)
        if invert
        else (cell.summary.median, base.summary.median)
    )
    if not den:
        return cell
    return Cell(cell.runs, cell.failures, cell.summary, num / den)


def _geomean(rows: Sequence[Row], metric: str, allocator: str) -> float | None:
    ratios = [r.cells[metric][allocator].ratio for r in rows]
    return stats.geomean([x for x in ratios if x is not None])


def _row_order(key: tuple[str, Params]) -> tuple[str, tuple[tuple[str, int, str], ...]]:
    workload, params = key
    return workload, tuple((k, v if isinstance(v, int) else 0, str(v)) for k, v in params)


def _labels(keys: Sequence[tuple[str, Params]]) -> dict[tuple[str, Params], str]:
    """Name each row by its workload and only the parameters that vary within it."""
    out = {}
    for workload, params in keys:
        siblings = [dict(p) for w, p in keys if w == workload]
        varying = [k for k, v in params if any(s.get(k) != v for s in siblings)]
        text = " ".join(f"{k}={_value(v)}" for k, v in params if k in varying)
        out[(workload, params)] = f"{workload} {text}".strip()
    return out


def _value(v: int | str) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


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


def try_lines(
    runs: Sequence[StoredRun], allocators: Sequence[str], baseline: str | None
) -> list[TryLine]:
    cells = {a: [r for r in runs if r.allocator == a] for a in allocators}
    walls = {a: _cell(rs, METRICS["time_s"]) for a, rs in cells.items()}
    base_cell = walls.get(baseline) if baseline else None
    base = base_cell.summary if base_cell else None
    return [_try_line(a, cells[a], walls[a], base) for a in allocators]


def _try_line(a: str, runs: Sequence[StoredRun], wall: Cell, base: stats.Summary | None) -> TryLine:
    ok = wall.summary is not None

    def summ(get: Callable[[StoredRun], float]) -> stats.Summary | None:
        return stats.summarize([get(r) for r in runs]) if ok else None

    speed = sd = None
    if ok and base is not None and wall.summary is not None and wall.summary.mean:
        speed = base.mean / wall.summary.mean
        sd = stats.ratio_stdev(base, wall.summary)
    return TryLine(
        a,
        any(r.partial for r in runs),
        wall.state,
        wall.summary,
        summ(lambda r: r.user_s),
        summ(lambda r: r.sys_s),
        summ(lambda r: float(r.maxrss_kib)),
        speed,
        sd,
    )
