"""The set-up runs a campaign plans before its measured ones: the verification runs
of applications and commands (what serves malloc, checked once per allocator and
row) and the baseline runs whose RSS the overhead ratio subtracts."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from allocmark.dispatchers import Batch, Check
from allocmark.model import Params, RunResult, RunSpec, RunStatus
from allocmark.store import Store


def block_of(spec: RunSpec) -> tuple[str, str, int]:
    """The block a run belongs to: its row (workload, parameters) and its number."""
    return spec.workload, json.dumps(spec.params), spec.rep


class Checks:
    """The verification runs of applications and commands (role "verify": one per
    allocator and row, before its measured runs, with libam_who in every process) and
    what they found. Measured runs they cover carry no verifier, so that the peak RSS
    is the program's own; each is stored as verified by its check, or unverified."""

    def __init__(self, store: Store, cid: int) -> None:
        self.planned = {_cell(s) for s in store.run_specs(cid) if s.role == "verify"}
        self.found = {
            (r.allocator, r.workload, r.params): Check(r.seq, r.status, r.detail, r.labels)
            for r in store.runs(cid, ())
            if r.role == "verify"
        }

    def note(self, spec: RunSpec, result: RunResult) -> None:
        if spec.role == "verify":
            self.found[_cell(spec)] = Check(spec.seq, result.status, result.detail, result.labels)

    def batches(self, specs: Sequence[RunSpec]) -> list[Batch]:
        """Blocks of consecutive measured runs, each with the checks covering it; a
        set-up run is a batch of its own."""
        groups: list[list[RunSpec]] = []
        for s in specs:
            if (
                groups
                and s.role == "measure"
                and groups[-1][-1].role == "measure"
                and block_of(groups[-1][-1]) == block_of(s)
            ):
                groups[-1].append(s)
            else:
                groups.append([s])
        return [
            Batch(
                tuple(g),
                tuple(
                    (s.seq, self.found.get(_cell(s)))
                    for s in g
                    if s.role == "measure" and _cell(s) in self.planned
                ),
            )
            for g in groups
        ]


def _cell(spec: RunSpec) -> tuple[str, str, Params]:
    return spec.allocator, spec.workload, spec.params


def with_overhead(
    spec: RunSpec, result: RunResult, baselines: dict[tuple[str, str], int]
) -> RunResult:
    """Add the memory overhead ratio: (peak RSS - baseline RSS) / peak requested bytes.

    The baseline is the RSS of the same program under the same allocator doing
    nothing; baseline runs come first in every plan and feed `baselines`.
    """
    key = (spec.allocator, spec.workload)
    if result.status is not RunStatus.OK:
        return result
    if spec.role == "baseline":
        baselines[key] = result.maxrss_kib
        return result
    requested = result.metrics.get("peak_requested_bytes", 0.0)
    if key not in baselines or requested <= 0:
        return result
    ratio = (result.maxrss_kib - baselines[key]) * 1024 / requested
    return dataclasses.replace(result, metrics=result.metrics | {"overhead_ratio": ratio})
