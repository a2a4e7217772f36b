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
HIGHER_IS_BETTER = frozenset({"ops_per_s"})


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
    return compare(store.runs(cid), ordered, c.baseline, speedup, target)


def compare(
    runs: Sequence[StoredRun],
    allocators: Sequence[str],
    baseline: str | None,
    speedup: bool = False,
    target_ci: float | None = None,
) -> Comparison:
    """Rows of measured runs (baseline-RSS runs only feed the overhead ratio)."""
    groups: dict[tuple[str, Params], list[StoredRun]] = {}
    for r in runs:
        if r.role == "measure":
            groups.setdefault((r.workload, r.params), []).append(r)
    keys = sorted(groups, key=_row_order)
    labels = label_rows(keys)
    rows = tuple(
        _row(w, p, labels[(w, p)], groups[(w, p)], allocators, baseline, speedup, target_ci)
        for w, p in keys
    )
    return Comparison(
        baseline=baseline,
        allocators=tuple(allocators),
        partial=frozenset(r.allocator for r in runs if r.partial),
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
    runs: Sequence[StoredRun],
    allocators: Sequence[str],
    baseline: str | None,
    speedup: bool,
    target_ci: float | None,
) -> Row:
    cells: dict[str, dict[str, Cell]] = {}
    for metric, get in METRICS.items():
        raw = {a: cell_of([r for r in runs if r.allocator == a], get) for a in allocators}
        base = raw.get(baseline) if baseline else None
        invert = speedup and metric == "time_s"
        target = target_ci if metric == "time_s" else None
        cells[metric] = {a: _finish(c, base, invert, target) for a, c in raw.items()}
    return Row(workload, params, label, cells)


def cell_of(runs: Sequence[StoredRun], get: Getter) -> Cell:
    """A cell's numbers: only when every run is OK and has the metric."""
    bad = Counter(r.status.value for r in runs if r.status is not RunStatus.OK)
    values = [get(r) for r in runs]
    numbers = tuple(v for v in values if v is not None)
    complete = bool(runs) and not bad and len(numbers) == len(values)
    return Cell(
        runs=len(runs),
        failures=tuple(bad.most_common()),
        summary=stats.summarize(numbers) if complete else None,
        values=numbers if complete else (),
    )


def _finish(cell: Cell, base: Cell | None, invert: bool, target: float | None) -> Cell:
    if cell.summary is None:
        return cell
    ratio = None
    if base is not None and base.summary is not None:
        ratio = stats.ratio(base.values, cell.values) if invert else stats.ratio(
            cell.values, base.values)  # fmt: skip
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
    runs: Sequence[StoredRun], allocators: Sequence[str], baseline: str | None
) -> list[TryLine]:
    cells = {a: [r for r in runs if r.allocator == a] for a in allocators}
    walls = {a: cell_of(rs, METRICS["time_s"]) for a, rs in cells.items()}
    base = walls.get(baseline) if baseline else None
    return [_try_line(a, cells[a], walls[a], base) for a in allocators]


def _try_line(a: str, runs: Sequence[StoredRun], wall: Cell, base: Cell | None) -> TryLine:
    ok = wall.summary is not None

    def summ(get: Callable[[StoredRun], float]) -> stats.Summary | None:
        return stats.summarize([get(r) for r in runs]) if ok else None

    speed = sd = None
    significant = False
    if wall.summary is not None and base is not None and base.summary is not None:
        speed = base.summary.mean / wall.summary.mean if wall.summary.mean else None
        sd = stats.ratio_stdev(base.summary, wall.summary)
        test = stats.ratio(base.values, wall.values)
        significant = test is not None and test.significant
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
        significant,
    )
