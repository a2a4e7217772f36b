"""A campaign's replays beside the recordings they replay (docs/replay.md).

A replay run (the replay workload: a trace `allocmark record` made) reports, beside its
own numbers, what its trace says of the recorded run (am_replay: `trace_*` metrics):
the peak of requested bytes in the recorded order, the recorded run's peak RSS (under
the recorder) and time, and the share of its CPU time inside the allocator. `stored`
gives one line per replay row under the campaign's baseline: those beside the
replays' own medians, so that a report says what a replay measures and how close it
came. Rows of other workloads have no such metrics, and no line."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from allocmark import labels
from allocmark.model import Params, RunStatus, StoredRun
from allocmark.store import Store

RECORDED = "trace_peak_requested_bytes"  # every replay run has it
METRICS = (
    RECORDED,
    "trace_maxrss_kib",
    "trace_alloc_share",
    "replay_calls",
    "replay_waits",
    "peak_requested_bytes",
)


@dataclass(frozen=True)
class Replayed:
    """One replay row under one allocator: the trace's account of the recorded run and
    the replays' medians (None: not in every run)."""

    workload: str
    params: Params
    label: str
    allocator: str
    runs: int
    calls: float
    waits: float
    peak_recorded: float  # bytes, the recorded order's
    peak_replayed: float  # bytes, as the replay measured it
    rss_recorded_kib: float | None  # the recorded run's, under the recorder
    rss_replayed_kib: float
    alloc_share: float | None  # of the recorded run's CPU time (None: not known)


def stored(store: Store, cid: int, allocator: str | None) -> list[Replayed]:
    """A line per replay row, under `allocator` (the baseline; None: none)."""
    if allocator is None or store.metric_tally(cid, RECORDED)[1] == 0:
        return []
    groups: dict[tuple[str, Params], list[StoredRun]] = {}
    for r in store.runs(cid, METRICS):
        mine = r.role == "measure" and r.status is RunStatus.OK and r.allocator == allocator
        if mine and RECORDED in r.metrics:
            groups.setdefault((r.workload, r.params), []).append(r)
    named = labels.label_rows(list(groups))
    return [_line(w, p, named[(w, p)], allocator, runs) for (w, p), runs in groups.items()]


def _line(
    workload: str, params: Params, label: str, allocator: str, runs: Sequence[StoredRun]
) -> Replayed:
    def median(name: str) -> float | None:
        found = [r.metrics[name] for r in runs if name in r.metrics]
        return statistics.median(found) if len(found) == len(runs) else None

    return Replayed(
        workload,
        params,
        label,
        allocator,
        len(runs),
        median("replay_calls") or 0.0,
        median("replay_waits") or 0.0,
        median(RECORDED) or 0.0,
        median("peak_requested_bytes") or 0.0,
        median("trace_maxrss_kib"),
        statistics.median(r.maxrss_kib for r in runs),
        median("trace_alloc_share"),
    )
