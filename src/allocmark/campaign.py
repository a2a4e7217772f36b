"""A campaign: verify allocators, plan, then execute and save run by run."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from allocmark import allocators, machine, plan
from allocmark.errors import UserError
from allocmark.execute import Executor
from allocmark.model import (
    AllocatorSpec,
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
) -> int:
    """Plan and save the campaign; nothing runs yet."""
    runs = plan.build(cell_list, prepared.usable, repetitions, timeout, seed)
    used = {w.name: w for w, _ in cell_list}.values()
    return store.new_campaign(
        name, seed, machine.current(), argv, prepared.usable, used, runs, prepared.baseline
    )


def execute(
    store: Store,
    cid: int,
    executor: Executor,
    verified: Sequence[Verified],
    on_run: OnRun | None = None,
) -> None:
    """Run what is still pending, saving each run as it ends. Ctrl-C keeps every finished run."""
    by_name = {v.spec.name: v for v in verified}
    pending = store.pending(cid)
    total = store.campaign(cid).planned
    done = total - len(pending)
    baselines = store.baseline_rss(cid)
    try:
        for spec in pending:
            result = with_overhead(spec, executor.run(spec), baselines)
            store.record(cid, spec, result, by_name[spec.allocator])
            done += 1
            if on_run:
                on_run(done, total, spec, result)
    except BaseException:
        store.set_status(cid, "interrupted")
        raise
    store.set_status(cid, "finished")


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
    for row in store.allocator_rows(cid):
        spec = _spec_from_json(row["spec_json"])
        now = allocators.verify(spec)
        if not now.usable or now.sha256 != row["sha256"]:
            found = now.sha256[:12] if now.sha256 else now.status.value
            raise UserError(
                f"allocator {spec.name!r} changed since campaign {cid} started "
                f"(sha256 {str(row['sha256'])[:12]} -> {found}); its runs would not be "
                "comparable: start a new campaign instead of --resume"
            )
        out.append(now)
    return out


def _spec_from_json(text: str) -> AllocatorSpec:
    d = json.loads(text)
    d["paths"] = tuple(d["paths"])
    d["env"] = tuple((k, v) for k, v in d["env"])
    return AllocatorSpec(**d)
