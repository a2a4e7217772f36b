"""Steady state of long runs: does an allocator's RSS plateau, or keep growing?

A phased workload (`aging`) records, at the end of each phase, its live requested
bytes and its RSS (phase_NN_live_kib, phase_NN_rss_kib). Live bytes are flat by
design, so RSS that keeps rising is the allocator's: fragmentation, or memory it
never reuses. Per run, the slope of RSS over the second half of its phases (the
first half, and at least the first cycle, warm up; least squares, MiB per
phase); per allocator, the mean slope of its runs with a 95 % Student t
interval over runs (independent), or, for a single run, the regression's own.
A slope is material above NEGLIGIBLE of the RSS per phase: "plateaus" when the
whole interval lies within that, "grows X MiB per phase" (or "shrinks") when it
lies beyond, "undecided" otherwise.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import computed_field

from allocmark import labels
from allocmark.model import Params
from allocmark.store import Store

WARMUP = 3  # phases always left out of the slope: the first cycle of small, large, mixed
NEGLIGIBLE = 0.001  # growth per phase, relative to the RSS, read as none
_PHASE = re.compile(r"phase_(\d+)_(live|rss)_kib")


@dataclass(frozen=True)
class Phase:
    live_mib: float  # median over the runs
    rss_mib: float


@dataclass(frozen=True)
class Steady:
    """One allocator on one phased cell."""

    workload: str
    params: Params
    allocator: str
    runs: int
    phases: tuple[Phase, ...]
    first: int  # the first phase of the slope (from 0)
    slope: float | None  # MiB per phase (None: too few phases)
    low: float | None
    high: float | None
    verdict: str  # "plateaus", "grows", "shrinks" or "undecided"
    label: str  # the cell's, among the campaign's phased cells (labels.label_rows)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def text(self) -> str:
        """ "plateaus (+0.01 MiB per phase [-0.02–+0.03])", "grows 1.2 MiB per phase [...]"."""
        if self.slope is None or self.low is None or self.high is None:
            return "undecided: too few phases for a slope"
        rate = f"{self.slope:+.2f} MiB per phase [{self.low:+.2f}–{self.high:+.2f}]"
        if self.verdict in ("grows", "shrinks"):
            return (
                f"{self.verdict} {abs(self.slope):.2f} MiB per phase "
                f"[{self.low:+.2f}–{self.high:+.2f}]"
            )
        if self.verdict == "undecided":
            return f"undecided: {rate}"
        return f"{self.verdict} ({rate})"


def stored(store: Store, cid: int, order: Sequence[str] = ()) -> list[Steady]:
    """Every phased cell of a campaign, allocators in `order` first."""
    cells: dict[tuple[str, Params, str], list[Mapping[str, float]]] = {}
    for allocator, workload, params, metrics in store.phased(cid):
        cells.setdefault((workload, params, allocator), []).append(metrics)
    rank = {a: i for i, a in enumerate(order)}
    keys = sorted(cells, key=lambda k: (k[0], str(k[1]), rank.get(k[2], len(rank)), k[2]))
    named = labels.label_rows(list(dict.fromkeys((w, p) for w, p, _ in keys)))
    return [steady(w, p, a, cells[(w, p, a)], named[(w, p)]) for w, p, a in keys]


def steady(
    workload: str,
    params: Params,
    allocator: str,
    runs: Sequence[Mapping[str, float]],
    label: str | None = None,
) -> Steady:
    """`label`: the cell's among its siblings (None: the workload's name, a lone cell's)."""
    series = [_series(m) for m in runs]
    n_phases = min(len(s) for s in series)
    phases = tuple(
        Phase(
            float(np.median([s[p][0] for s in series])) / 1024,
            float(np.median([s[p][1] for s in series])) / 1024,
        )
        for p in range(n_phases)
    )
    first = max(WARMUP, n_phases // 2) if n_phases - WARMUP >= 3 else 0
    late = [[rss / 1024 for _, rss in s[first:n_phases]] for s in series]
    slope, low, high = _slope(late)
    verdict = "undecided"
    if slope is not None and low is not None and high is not None:
        level = float(np.mean([np.mean(r) for r in late]))
        material = max(NEGLIGIBLE * level, 1 / 64)  # and never below 16 KiB
        if -material <= low and high <= material:
            verdict = "plateaus"
        elif low > material:
            verdict = "grows"
        elif high < -material:
            verdict = "shrinks"
    return Steady(
        workload,
        params,
        allocator,
        len(runs),
        phases,
        first,
        slope,
        low,
        high,
        verdict,
        workload if label is None else label,
    )


def _series(metrics: Mapping[str, float]) -> list[tuple[float, float]]:
    """(live KiB, RSS KiB) of each phase of one run, in phase order."""
    found: dict[int, dict[str, float]] = {}
    for name, value in metrics.items():
        if m := _PHASE.fullmatch(name):
            found.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return [(v["live"], v["rss"]) for _, v in sorted(found.items()) if len(v) == 2]


def _slope(late: Sequence[Sequence[float]]) -> tuple[float | None, float | None, float | None]:
    """Mean slope (per phase) of the runs' RSS and its 95 % interval."""
    if not late or len(late[0]) < 2:
        return None, None, None
    # scipy.stats takes a third of a second to import: every report would pay it.
    from scipy import stats as sps

    fits = [sps.linregress(np.arange(len(r)), r) for r in late]
    slopes = [float(f.slope) for f in fits]
    mean = float(np.mean(slopes))
    if len(slopes) >= 2:
        half = float(
            sps.t.ppf(0.975, len(slopes) - 1) * np.std(slopes, ddof=1) / math.sqrt(len(slopes))
        )
    elif len(late[0]) >= 3:
        # A perfect line has no error (linregress gives NaN for a flat one).
        half = float(sps.t.ppf(0.975, len(late[0]) - 2) * np.nan_to_num(fits[0].stderr))
    else:
        return mean, None, None
    return mean, mean - half, mean + half
