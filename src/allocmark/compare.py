"""Regression verdicts between two result sets (two databases, two campaigns, or
runs exports): per cell worse / better / ≈ with the ratio and its interval. Worse
is slower (time, throughput) or larger (memory)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from allocmark import analyze, exchange, stats
from allocmark.errors import UserError
from allocmark.model import CellRuns, Params, StoredRun
from allocmark.store import Store


@dataclass(frozen=True)
class ResultSet:
    label: str
    cells: tuple[CellRuns, ...]

    @staticmethod
    def of_runs(label: str, runs: Sequence[StoredRun]) -> ResultSet:
        return ResultSet(label, tuple(analyze.as_cells(runs)))


@dataclass(frozen=True)
class Verdict:
    workload: str
    params: Params
    label: str  # the row's workload and parameters
    allocator: str  # "a" or "a → b" when two single-allocator sets are compared
    old: analyze.Cell
    new: analyze.Cell
    ratio: stats.Ratio | None  # new / old
    change: float | None  # + worse, - better, as a fraction (0.05 = 5 % worse)
    metric: str = "time_s"

    @property
    def verdict(self) -> str:
        """worse / better / ≈, or why there is no verdict."""
        if self.ratio is None or self.change is None:
            failed = self.old.state if self.old.summary is None else self.new.state
            return f"no verdict ({failed})"
        if not self.ratio.significant:
            return "≈"
        return "worse" if self.change > 0 else "better"

    @property
    def word(self) -> str:
        """The verdict in the metric's own terms: slower/faster or larger/smaller."""
        memory = self.metric in ("peak_rss_kib", "overhead_ratio")
        words = {"worse": "larger" if memory else "slower",
                 "better": "smaller" if memory else "faster"}  # fmt: skip
        return words.get(self.verdict, self.verdict)


def load(spec: str) -> ResultSet:
    """PATH.db, PATH.db#CAMPAIGN (default: newest campaign) or a runs JSON export."""
    path_text, _, cid_text = spec.partition("#")
    path = Path(path_text)
    if path.suffix == ".json":
        doc = exchange.load(path, exchange.RUNS_FORMAT)
        return ResultSet.of_runs(spec, exchange.runs_from_rows(doc["rows"]))
    if cid_text and not cid_text.isdigit():
        raise UserError(f"{spec!r}: the campaign after '#' must be a number, e.g. results.db#3")
    store = Store(path, create=False)
    campaign = store.campaign(int(cid_text) if cid_text else None)
    cells = store.cells(campaign.id, analyze.METRIC_NAMES)
    return ResultSet(f"{path}#{campaign.id}", tuple(cells))


def compare(old: ResultSet, new: ResultSet, metric: str = "time_s") -> list[Verdict]:
    """Match cells by allocator, workload and parameters; when each side holds a single
    allocator and they differ, match by workload and parameters alone."""
    column = analyze.METRICS[metric]
    a_old, a_new = _cells(old.cells), _cells(new.cells)
    names_old = {k[0] for k in a_old}
    names_new = {k[0] for k in a_new}
    rename = len(names_old) == len(names_new) == 1 and names_old != names_new
    if rename:
        (o,), (n,) = names_old, names_new
        a_new = {(o, w, p): rs for (_, w, p), rs in a_new.items()}
    keys = sorted(set(a_old) & set(a_new), key=lambda k: (k[1], str(k[2]), k[0]))
    if not keys:
        raise UserError(f"{old.label} and {new.label} have no cell in common to compare")
    labels = analyze.label_rows(sorted({(w, p) for _, w, p in keys}, key=str))
    higher_better = metric in analyze.HIGHER_IS_BETTER
    return [
        _verdict(k, labels[(k[1], k[2])], f"{k[0]} → {n}" if rename else k[0],
                 a_old[k], a_new[k], column, higher_better, metric)
        for k in keys
    ]  # fmt: skip


def _cells(cells: Sequence[CellRuns]) -> dict[tuple[str, str, Params], CellRuns]:
    return {(c.allocator, c.workload, c.params): c for c in cells if c.role == "measure"}


def _verdict(
    key: tuple[str, str, Params],
    label: str,
    allocator: str,
    old_runs: CellRuns,
    new_runs: CellRuns,
    column: str,
    higher_better: bool,
    column_metric: str,
) -> Verdict:
    old, new = analyze.cell_of(old_runs, column), analyze.cell_of(new_runs, column)
    ratio = change = None
    if old.summary is not None and new.summary is not None:
        ratio = stats.ratio_of(new.summary, old.summary)
        if ratio is not None:
            change = (1 / ratio.value - 1) if higher_better else (ratio.value - 1)
    return Verdict(key[1], key[2], label, allocator, old, new, ratio, change, column_metric)


@dataclass(frozen=True)
class Summary:
    worse: int
    better: int
    same: int
    undecided: int
    worst: Verdict | None  # the largest significant regression


def summarize(verdicts: Sequence[Verdict]) -> Summary:
    regressions = [v for v in verdicts if v.verdict == "worse"]
    worst = max(regressions, key=lambda v: v.change or 0.0, default=None)
    return Summary(
        worse=len(regressions),
        better=sum(v.verdict == "better" for v in verdicts),
        same=sum(v.verdict == "≈" for v in verdicts),
        undecided=sum(v.verdict.startswith("no verdict") for v in verdicts),
        worst=worst,
    )


def failing(verdicts: Sequence[Verdict], limit: float) -> list[Verdict]:
    """Significant regressions larger than `limit` (a fraction: 0.05 = 5 %)."""
    return [v for v in verdicts if v.verdict == "worse" and (v.change or 0.0) > limit]
