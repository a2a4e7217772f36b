"""A campaign: verify allocators, plan, then execute and save run by run."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from allocmark import allocators, machine, plan, stats
from allocmark.errors import UserError
from allocmark.execute import Executor
from allocmark.model import (
    AllocatorSpec,
    CellRuns,
    Params,
    RunResult,
    RunSpec,
    RunStatus,
    Verified,
    Workload,
)
from allocmark.store import Store

OnRun = Callable[[int, int, RunSpec, RunResult], None]


@dataclass(frozen=True)
class Prepared:
    """What a campaign will run on, and what it could not use."""

    usable: tuple[Verified, ...]
    unusable: tuple[Verified, ...]
    baseline: str | None


def prepare(specs: Sequence[AllocatorSpec], explicit: bool) -> Prepared:
    """Verify every allocator; one named explicitly must be usable."""
    verified = allocators.verify_all(specs)
    bad = [v for v in verified if not v.usable]
    if explicit and bad:
        v = bad[0]
        raise UserError(f"allocator {v.spec.name!r} is {v.status.value}: {v.reason}")
    usable = [v for v in verified if v.usable]
    if not usable:
        raise UserError("no usable allocator; `allocmark allocators` lists why and how to fix")
    return Prepared(tuple(usable), tuple(bad), allocators.baseline_name(usable))


def start(
    store: Store,
    name: str,
    prepared: Prepared,
    cell_list: Sequence[tuple[Workload, Params]],
    repetitions: int,
    timeout: float,
    seed: int,
    argv: Sequence[str],
    adaptive: Adaptive | None = None,
    profile: int = 0,
) -> int:
    """Plan and save the campaign; nothing runs yet."""
    runs = plan.build(cell_list, prepared.usable, repetitions, timeout, seed, profile)
    used = {w.name: w for w, _ in cell_list}.values()
    settings: dict[str, object] = {"seed": seed, "min_runs": repetitions, "profile": profile}
    if adaptive:
        settings |= {"max_runs": adaptive.max_runs, "target_ci": adaptive.target_ci}
    return store.new_campaign(
        name, seed, machine.current(), argv, prepared.usable, used, runs, prepared.baseline,
        settings,
    )  # fmt: skip


@dataclass(frozen=True)
class Adaptive:
    """Keep adding repetitions to a cell until the 95 % interval of its mean time is
    within ±target_ci (relative), or it has max_runs runs."""

    max_runs: int
    target_ci: float


def execute(
    store: Store,
    cid: int,
    executor: Executor,
    verified: Sequence[Verified],
    on_run: OnRun | None = None,
) -> None:
    """Run what is still pending, saving each run as it ends, then (adaptive campaigns)
    add rounds for the cells whose interval is still too wide. Ctrl-C keeps every
    finished run; a resume picks up the same loop."""
    by_name = {v.spec.name: v for v in verified}
    baselines = store.baseline_rss(cid)
    settings = store.settings(cid)
    try:
        while pending := store.pending(cid):
            total = store.campaign(cid).planned
            done = total - len(pending)
            for spec in pending:
                result = with_overhead(spec, executor.run(spec), baselines)
                store.record(cid, spec, result, by_name[spec.allocator])
                done += 1
                if on_run:
                    on_run(done, total, spec, result)
            if "target_ci" in settings:
                store.extend_plan(cid, more_runs(store, cid, settings))
    except BaseException:
        store.set_status(cid, "interrupted")
        raise
    store.set_status(cid, "finished")


def more_runs(store: Store, cid: int, settings: dict[str, Any]) -> list[RunSpec]:
    """One more interleaved round for every cell that is still loose: all its runs OK,
    fewer than max_runs of them, and its time interval wider than the target."""
    specs = store.plan(cid)
    done = {(c.allocator, c.workload, c.params): c for c in
            store.cells(cid, (), columns=("wall_s",)) if c.role == "measure"}  # fmt: skip
    planned: dict[tuple[str, str, Params], list[RunSpec]] = {}
    for s in specs:
        if s.role == "measure":
            planned.setdefault((s.allocator, s.workload, s.params), []).append(s)
    loose = [
        group[-1]
        for key, group in planned.items()
        if len(group) < settings["max_runs"]
        and _is_loose(done.get(key), len(group), settings["target_ci"])
    ]
    if not loose:
        return []
    rng = random.Random(settings.get("seed", 1) + len(specs))
    rng.shuffle(loose)
    loose.sort(key=lambda s: (s.workload, json.dumps(s.params)))  # cells together, A B C
    nxt = max(s.seq for s in specs) + 1
    return [dataclasses.replace(s, seq=nxt + i, rep=s.rep + 1) for i, s in enumerate(loose)]


def _is_loose(cell: CellRuns | None, planned: int, target: float) -> bool:
    if cell is None or len(cell.statuses) < planned:
        return False  # unfinished cells wait for their runs
    if any(s is not RunStatus.OK for s in cell.statuses):
        return False  # a failing cell gets no more runs
    walls = [w for w in cell.columns["wall_s"] if w is not None]
    return stats.summarize(walls).ci_rel > target


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


def reverify(store: Store, cid: int) -> list[Verified]:
    """The campaign's allocators checked again; a changed library refuses the resume."""
    out = []
    for spec, sha in store.allocator_specs(cid):
        now = allocators.verify(spec)
        if not now.usable or now.sha256 != sha:
            found = now.sha256[:12] if now.sha256 else now.status.value
            raise UserError(
                f"allocator {spec.name!r} changed since campaign {cid} started "
                f"(sha256 {str(sha)[:12]} -> {found}); its runs would not be "
                "comparable: start a new campaign instead of --resume"
            )
        out.append(now)
    return out
