"""A campaign: verify allocators, plan, then execute and save run by run."""

from __future__ import annotations

import dataclasses
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from allocmark import allocators, analyze, machine, plan
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
    precision: Precision | None = None,
    profile: int = 0,
) -> int:
    """Plan and save the campaign; nothing runs yet."""
    runs = plan.build(cell_list, prepared.usable, repetitions, timeout, seed, profile)
    used = {w.name: w for w, _ in cell_list}.values()
    settings: dict[str, object] = {"seed": seed, "min_runs": repetitions, "profile": profile,
                                   "fixed_time": {w.name: w.fixed_time for w in used
                                                  if w.fixed_time}}  # fmt: skip
    if precision:
        settings |= dataclasses.asdict(precision)
    return store.new_campaign(
        name, seed, machine.current(), argv, prepared.usable, used, runs, prepared.baseline,
        settings,
    )  # fmt: skip


@dataclass(frozen=True)
class Precision:
    """Add blocks to a cell until every ratio to the baseline that decides it (time,
    or throughput for duration-bound workloads, and peak RSS) has a 95 % interval
    within ±target_ci, the cell has max_runs blocks, or the campaign has spent
    budget_s seconds (0: no budget)."""

    max_runs: int
    target_ci: float
    budget_s: float = 0.0


# The noise sentinel: a run during which other processes or the hypervisor took
# more than SPIKE_SHARE of a CPU (beyond SPIKE_SLACK_S, /proc/stat's tick
# granularity) is taken again, at most MAX_RERUNS times.
SPIKE_SHARE = 0.25
SPIKE_SLACK_S = 0.03
MAX_RERUNS = 2

OnRound = Callable[[float | None, int], None]  # loosest ratio half-width, blocks added


def execute(
    store: Store,
    cid: int,
    executor: Executor,
    verified: Sequence[Verified],
    on_run: OnRun | None = None,
    on_round: OnRound | None = None,
) -> None:
    """Run what is still pending, saving each run as it ends, then (precision
    campaigns) add blocks for the cells whose ratios are still too wide, while the
    budget lasts. Ctrl-C keeps every finished run; a resume picks up the same loop."""
    by_name = {v.spec.name: v for v in verified}
    baselines = store.baseline_rss(cid)
    settings = store.settings(cid)
    checks = Checks(store, cid)
    try:
        while pending := store.pending(cid):
            total = store.campaign(cid).planned
            done = total - len(pending)
            block = None
            for spec in pending:
                if spec.role == "measure" and _block(spec) != block:
                    block = _block(spec)
                    _calibrate(store, cid, executor, spec.seq)
                began = time.monotonic()
                result = with_overhead(spec, checks.run(executor, spec), baselines)
                store.record(cid, spec, result, by_name[spec.allocator])
                store.add_spent(cid, max(time.monotonic() - began, result.wall_s))
                done += 1
                if on_run:
                    on_run(done, total, spec, result)
            if "target_ci" in settings:
                more, loosest = more_runs(store, cid, settings)
                if on_round:
                    on_round(loosest, len({_block(s) for s in more}))
                store.extend_plan(cid, more)
    except BaseException:
        store.set_status(cid, "interrupted")
        raise
    store.set_status(cid, "finished")


def _block(spec: RunSpec) -> tuple[str, str, int]:
    return spec.workload, json.dumps(spec.params), spec.rep


def _calibrate(store: Store, cid: int, executor: Executor, seq: int) -> None:
    seconds = executor.calibrate()
    if seconds is not None:
        store.add_calibration(cid, seq, seconds)


@dataclass(frozen=True)
class _Check:
    seq: int
    status: RunStatus
    detail: str
    labels: dict[str, str]


class Checks:
    """The verification runs of applications and commands (role "verify": one per
    allocator and cell, before its measured runs, with libam_who in every process) and
    what they found. Measured runs they cover carry no verifier, so that the peak RSS
    is the program's own; each is stored as verified by its check, or unverified."""

    def __init__(self, store: Store, cid: int) -> None:
        self.planned = {_cell(s): s.seq for s in store.plan(cid) if s.role == "verify"}
        self.found = {(r.allocator, r.workload, r.params):
                      _Check(r.seq, r.status, r.detail, r.labels)
                      for r in store.runs(cid, ()) if r.role == "verify"}  # fmt: skip

    def run(self, executor: Executor, spec: RunSpec) -> RunResult:
        if spec.role == "verify":
            result = executor.run(spec)
            self.found[_cell(spec)] = _Check(spec.seq, result.status, result.detail,
                                             result.labels)  # fmt: skip
            return result
        if spec.role != "measure" or _cell(spec) not in self.planned:
            return _run_steady(executor, spec)  # verifies itself, or needs no check
        check = self.found.get(_cell(spec))
        if check is not None and check.status is RunStatus.UNVERIFIED:
            why = f"its verification run #{check.seq}: {check.detail}"
            return RunResult(RunStatus.UNVERIFIED, started=time.time(), detail=why)
        result = _run_steady(executor, dataclasses.replace(spec, expect_malloc=None))
        if result.status is not RunStatus.OK:
            return result
        if check is None or check.status is not RunStatus.OK:
            why = f"not verified: its verification run ended {check.status.value if check else '?'}"
            return dataclasses.replace(result, status=RunStatus.UNVERIFIED, detail=why)
        shadowed = {k: v for k, v in check.labels.items() if k == "also_defines_malloc"}
        return dataclasses.replace(
            result,
            malloc_object=spec.expect_malloc,
            labels=result.labels | shadowed | {"verified_by": f"run {check.seq}"},
        )


def _cell(spec: RunSpec) -> tuple[str, str, Params]:
    return spec.allocator, spec.workload, spec.params


def _run_steady(executor: Executor, spec: RunSpec) -> RunResult:
    """The run, taken again (at most MAX_RERUNS times) while other work spikes during it."""
    result = executor.run(spec)
    reruns = 0
    while spiked(result) and reruns < MAX_RERUNS:
        reruns += 1
        result = executor.run(spec)
    if not reruns and not spiked(result):
        return result
    labels = result.labels | ({"noise": "spiked in every attempt"} if spiked(result) else {})
    return dataclasses.replace(
        result, metrics=result.metrics | {"noise_reruns": float(reruns)}, labels=labels
    )


def spiked(result: RunResult) -> bool:
    """Did other processes or the hypervisor take a large share of a CPU during it?"""
    other = result.metrics.get("noise_other_cpu_s", 0.0) + result.metrics.get("noise_steal_s", 0.0)
    return result.status is RunStatus.OK and other > SPIKE_SHARE * result.wall_s + SPIKE_SLACK_S


def more_runs(
    store: Store, cid: int, settings: dict[str, Any]
) -> tuple[list[RunSpec], float | None]:
    """One more block, interleaved, for every row still loose and not at max_runs, as
    many as the budget leaves time for; and the loosest ratio's half-width now."""
    specs = store.plan(cid)
    comp = analyze.stored_comparison(store, cid)
    looseness = {(r.workload, r.params): _loosest(r, comp) for r in comp.rows}
    loosest = max((x for x in looseness.values() if x is not None), default=None)
    blocks: dict[tuple[str, Params], list[RunSpec]] = {}
    for s in specs:
        if s.role == "measure":
            blocks.setdefault((s.workload, s.params), []).append(s)
    target = settings["target_ci"]
    loose = [key for key, group in blocks.items()
             if (x := looseness.get(key)) is not None and x > target
             and len({s.rep for s in group}) < settings["max_runs"]]  # fmt: skip
    # Which rows the budget pays for must not depend on their verdicts: giving it to
    # undecided rows first stopped rows as soon as they read faster or slower, and a
    # false verdict then stayed (A/A: 7 % false instead of 5 %).
    rng = random.Random(settings.get("seed", 1) + len(specs))
    rng.shuffle(loose)
    left = settings.get("budget_s", 0.0) - store.spent(cid) if settings.get("budget_s") else None
    cost = _run_costs(store, cid)
    nxt = max(s.seq for s in specs) + 1
    out: list[RunSpec] = []
    for key in loose:
        group = blocks[key]
        rep = max(s.rep for s in group) + 1
        latest = {s.allocator: s for s in group}
        members = list(latest.values())
        if left is not None:
            need = sum(cost.get((s.allocator, s.workload, s.params), 0.0) for s in members)
            if need > left:
                continue
            left -= need
        rng.shuffle(members)
        out += [dataclasses.replace(s, seq=nxt + len(out) + i, rep=rep)
                for i, s in enumerate(members)]  # fmt: skip
    return out, loosest


def _deciding(row: analyze.Row, comp: analyze.Comparison) -> list[analyze.Cell]:
    """The cells whose ratios decide a row: time (throughput for a duration-bound
    workload) and peak RSS, of every allocator but the baseline."""
    metric = "ops_per_s" if any(c.fixed for c in row.cells["time_s"].values()) else "time_s"
    return [c for m in (metric, "peak_rss_kib") for a, c in row.cells[m].items()
            if a != comp.baseline]  # fmt: skip


def _loosest(row: analyze.Row, comp: analyze.Comparison) -> float | None:
    """The widest interval (as ±fraction) among the ratios that decide the row; None when
    a cell failed or has no ratio (more blocks would not help)."""
    cells = _deciding(row, comp)
    if any(c.ratio is None for c in cells):
        return None
    return max((c.ratio.half_width for c in cells if c.ratio), default=None)


def _run_costs(store: Store, cid: int) -> dict[tuple[str, str, Params], float]:
    """Seconds one more run of each cell costs: its mean wall time plus the campaign's
    mean overhead per run (start-up, verification, saving)."""
    cells = [c for c in store.cells(cid, (), columns=("wall_s",)) if c.role == "measure"]
    runs = sum(len(c.statuses) for c in cells)
    walls = {(c.allocator, c.workload, c.params): [w or 0.0 for w in c.columns["wall_s"]]
             for c in cells}  # fmt: skip
    total_wall = sum(sum(w) for w in walls.values())
    per_run = max(0.0, store.spent(cid) - total_wall) / runs if runs else 0.0
    return {k: sum(w) / len(w) + per_run for k, w in walls.items() if w}


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
