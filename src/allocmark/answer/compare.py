"""Regression verdicts between two result sets (two databases, two campaigns, or
runs exports): per cell faster / slower / same / undecided with the ratio and
its interval. Worse is slower (time, throughput) or larger (memory).

Two campaigns are taken at different moments, and a shared machine drifts between
them (the same software read +45 % slower minutes later here). When both sets hold
the baseline allocator, it is the control: each allocator's ratio to it in NEW is
compared with the same ratio in OLD, so that drift cancels, and the control itself
only shows the drift. Without a control the absolute values are compared, and the
report says so."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from allocmark import labels, stats
from allocmark.answer import analyze
from allocmark.errors import UserError
from allocmark.model import AllocatorRuns, Params, StoredRun
from allocmark.store import Store, exchange

Key = tuple[str, str, Params]  # allocator, workload, parameters


@dataclass(frozen=True)
class ResultSet:
    label: str
    cells: tuple[AllocatorRuns, ...]
    baseline: str | None = None  # the campaign's baseline allocator, the control

    @staticmethod
    def of_runs(label: str, runs: Sequence[StoredRun], baseline: str | None = None) -> ResultSet:
        return ResultSet(label, tuple(analyze.as_cells(runs)), baseline)


@dataclass(frozen=True)
class Shift:
    """One cell from the old result set to the new: its change and that change's verdict."""

    workload: str
    params: Params
    label: str  # the row's workload and parameters
    allocator: str  # "a" or "a → b" when two single-allocator sets are compared
    old: analyze.Cell
    new: analyze.Cell
    ratio: stats.Ratio | None  # new / old (of the ratios to the control, when there is one)
    change: float | None  # + worse, - better, as a fraction (0.05 = 5 % worse)
    metric: str = "time_s"
    judged: stats.Verdict | None = None
    control: bool = False  # this is the control itself: its ratio is the machine's drift

    @property
    def verdict(self) -> str:
        """worse / better / same / undecided, "control", or why there is no verdict."""
        if self.control:
            return "control"
        if self.ratio is None or self.change is None or self.judged is None:
            failed = self.old.state if self.old.summary is None else self.new.state
            return f"no verdict ({failed})"
        return self.judged.value

    @property
    def word(self) -> str:
        """The verdict in the metric's own terms: slower/faster or larger/smaller."""
        memory = self.metric in analyze.MEMORY
        words = {
            "worse": "larger" if memory else "slower",
            "better": "smaller" if memory else "faster",
        }
        return words.get(self.verdict, self.verdict)


def load(spec: str) -> ResultSet:
    """PATH.db, PATH.db#CAMPAIGN (default: newest campaign) or a runs JSON export."""
    path_text, _, cid_text = spec.partition("#")
    path = Path(path_text)
    if path.suffix == ".json":
        about, runs = exchange.load_runs(path)
        baseline = about.get("baseline")
        return ResultSet.of_runs(spec, runs, baseline if isinstance(baseline, str) else None)
    if cid_text and not cid_text.isdigit():
        raise UserError(f"{spec!r}: the campaign after '#' must be a number, e.g. results.db#3")
    store = Store(path, create=False)
    campaign = store.campaign(int(cid_text) if cid_text else None)
    cells = store.grouped(campaign.id, analyze.METRIC_NAMES)
    return ResultSet(f"{path}#{campaign.id}", tuple(cells), campaign.baseline)


def control_of(old: ResultSet, new: ResultSet) -> str | None:
    """The baseline both sets ran, if any: the control that cancels drift."""
    if old.baseline is None or old.baseline != new.baseline:
        return None
    names = [{c.allocator for c in s.cells if c.role == "measure"} for s in (old, new)]
    return old.baseline if all(old.baseline in n and len(n) > 1 for n in names) else None


def compare(
    old: ResultSet, new: ResultSet, metric: str = "time_s", margin: float = 0.03
) -> list[Shift]:
    """Match cells by allocator, workload and parameters; when each side holds a single
    allocator and they differ, match by workload and parameters alone."""
    column = analyze.METRICS[metric]
    a_old, a_new = _aligned(_cells(old.cells), _cells(new.cells))
    names_old = {k[0] for k in a_old}
    names_new = {k[0] for k in a_new}
    rename = len(names_old) == len(names_new) == 1 and names_old != names_new
    if rename:
        (o,), (n,) = names_old, names_new
        a_new = {(o, w, p): rs for (_, w, p), rs in a_new.items()}
    keys = sorted(set(a_old) & set(a_new), key=lambda k: (k[1], str(k[2]), k[0]))
    if not keys:
        raise UserError(f"{old.label} and {new.label} have no cell in common to compare")
    named = labels.label_rows(sorted({(w, p) for _, w, p in keys}, key=str))
    sides = _Sides(metric, column, margin, None if rename else control_of(old, new), a_old, a_new)
    raw = [sides.ratio(k, named[(k[1], k[2])], f"{k[0]} → {n}" if rename else k[0]) for k in keys]
    return sides.as_family(raw)


def _cells(cells: Sequence[AllocatorRuns]) -> dict[Key, AllocatorRuns]:
    return {(c.allocator, c.workload, c.params): c for c in cells if c.role == "measure"}


def _aligned(
    old: dict[Key, AllocatorRuns], new: dict[Key, AllocatorRuns]
) -> tuple[dict[Key, AllocatorRuns], dict[Key, AllocatorRuns]]:
    """Both sides keyed without the parameters only one of them has, where that side
    gives them one value throughout: a parameter a later catalog added (idle_ms, at
    its default) does not keep a database from being compared with an older one."""
    names = [{(w, k) for (_, w, p) in side for k, _ in p} for side in (old, new)]
    drop = set()
    for side, mine, theirs in ((old, names[0], names[1]), (new, names[1], names[0])):
        for w, k in mine - theirs:
            if len({dict(p)[k] for (_, wl, p) in side if wl == w}) == 1:
                drop.add((w, k))

    def rekey(side: dict[Key, AllocatorRuns]) -> dict[Key, AllocatorRuns]:
        return {
            (a, w, tuple(kv for kv in p if (w, kv[0]) not in drop)): c
            for (a, w, p), c in side.items()
        }

    return rekey(old), rekey(new)


@dataclass(frozen=True)
class _Sides:
    metric: str
    column: str
    margin: float
    control: str | None
    old: dict[Key, AllocatorRuns]
    new: dict[Key, AllocatorRuns]

    def ratio(self, key: Key, label: str, allocator: str) -> Shift:
        """The cell's ratio new / old (through the control when there is one), unjudged."""
        old, new = (analyze.cell_of(side[key], self.column) for side in (self.old, self.new))
        is_control = key[0] == self.control
        ratio = change = None
        if old.summary is not None and new.summary is not None:
            ratio = (
                self._controlled(key, old, new)
                if self.control and not is_control
                else stats.ratio_of(new.summary, old.summary)
            )
        if ratio is not None:
            higher = self.metric in analyze.HIGHER_IS_BETTER
            change = (1 / ratio.value - 1) if higher else (ratio.value - 1)
        return Shift(
            key[1], key[2], label, allocator, old, new, ratio, change, self.metric, None, is_control
        )

    def as_family(self, verdicts: Sequence[Shift]) -> list[Shift]:
        """The verdicts, judged as one family (Holm): a comparison is a gate, and noise
        alone should trip it at most 5 % of the time in all, not in each cell."""
        judged = [v for v in verdicts if v.ratio is not None and not v.control]
        ratios = stats.holm([v.ratio for v in judged if v.ratio is not None])
        higher = self.metric in analyze.HIGHER_IS_BETTER
        done = {
            id(v): dataclasses.replace(v, ratio=r, judged=stats.verdict(r, self.margin, higher))
            for v, r in zip(judged, ratios, strict=True)
        }
        return [done.get(id(v), v) for v in verdicts]

    def _controlled(self, key: Key, old: analyze.Cell, new: analyze.Cell) -> stats.Ratio | None:
        """(new / control in NEW) / (old / control in OLD)."""
        base = (self.control or "", key[1], key[2])
        if base not in self.old or base not in self.new:
            return None
        ratios = []
        for cell, side in ((new, self.new), (old, self.old)):
            control = analyze.cell_of(side[base], self.column)
            if control.summary is None or cell.summary is None:
                return None
            r = analyze.paired_ratio(cell, control) or stats.ratio_of(cell.summary, control.summary)
            if r is None:
                return None
            ratios.append(r)
        return stats.ratio_of_ratios(ratios[0], ratios[1])


@dataclass(frozen=True)
class Shifts:
    """The shifts counted by verdict, with the worst regression and the control's drift."""

    worse: int
    better: int
    same: int
    undecided: int  # judged, and the interval decided nothing
    unjudged: int  # no verdict possible (a side without numbers)
    worst: Shift | None  # the largest significant regression
    drift: Shift | None = None  # the control's own change, when there is a control


def summarize(verdicts: Sequence[Shift]) -> Shifts:
    regressions = [v for v in verdicts if v.verdict == "worse"]
    worst = max(regressions, key=lambda v: v.change or 0.0, default=None)
    controls = [v for v in verdicts if v.control and v.ratio is not None]
    drift = max(controls, key=lambda v: abs((v.ratio.value if v.ratio else 1) - 1), default=None)
    return Shifts(
        worse=len(regressions),
        better=sum(v.verdict == "better" for v in verdicts),
        same=sum(v.verdict == "same" for v in verdicts),
        undecided=sum(v.verdict == "undecided" for v in verdicts),
        unjudged=sum(v.verdict.startswith("no verdict") for v in verdicts),
        worst=worst,
        drift=drift,
    )


def failing(verdicts: Sequence[Shift], limit: float) -> list[Shift]:
    """Significant regressions larger than `limit` (a fraction: 0.05 = 5 %)."""
    return [v for v in verdicts if v.verdict == "worse" and (v.change or 0.0) > limit]
