"""Where runs happen: a campaign hands batches of runs to a dispatcher, the one
`--dispatcher` names (dispatcher(): here, local.py, or on a Dask cluster, dask.py).

A batch is what must run back to back on one machine: one block (every
allocator once, for one row, back to back: its ratios are paired, so its runs
must share the machine and the moment) or one set-up run. The executor side
(`run_batch`) times the calibration loop before a block, takes a spiked run
again, and applies the verification run that covers an application's measured
run; it is the same code here (local.py) and on a cluster worker (dask.py). The
campaign (coordinator) stores what comes back, run by run.

May import: run, allocators, native, model, errors.
Never: api, cli, verbs.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from allocmark.model import Machine, RunResult, RunSpec, RunStatus, Verified
from allocmark.run import kernel
from allocmark.run.execute import Executor

# The noise sentinel: a run during which other processes or the hypervisor took
# more than SPIKE_SHARE of a CPU (beyond SPIKE_SLACK_S, /proc/stat's tick
# granularity) is taken again, at most MAX_RERUNS times.
SPIKE_SHARE = 0.25
SPIKE_SLACK_S = 0.03
MAX_RERUNS = 2


@dataclass(frozen=True)
class Check:
    """What a verification run (role "verify") found for its allocator and cell."""

    seq: int
    status: RunStatus
    detail: str
    labels: dict[str, str]


@dataclass(frozen=True)
class Batch:
    """Runs for one machine, in order. `checks` maps the seq of each measured run
    that a verification run covers to that run's finding (None: it has none)."""

    specs: tuple[RunSpec, ...]
    checks: tuple[tuple[int, Check | None], ...] = ()

    @property
    def is_block(self) -> bool:
        return bool(self.specs) and self.specs[0].role == "measure"


@dataclass(frozen=True)
class Done:
    """One finished run. `spent_s`: the coordinator's time it cost (for budgets);
    `verified` and `machine`: where a worker ran it, if not on the coordinator."""

    spec: RunSpec
    result: RunResult
    spent_s: float
    verified: Verified | None = None
    machine: Machine | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Calibrated:
    """The calibration loop's time, taken before the block starting at `seq`."""

    seq: int
    seconds: float


Event = Done | Calibrated


@runtime_checkable
class Dispatcher(Protocol):
    """Runs batches, somewhere, and reports each run as it ends. A batch it could
    not run (a lost worker) yields nothing: its runs stay pending."""

    def run_batches(self, batches: Sequence[Batch]) -> Iterator[Event]: ...


KINDS = ("local", "dask")  # what --dispatcher names: where a campaign's runs happen


def dispatcher(
    kind: str, scheduler: str | None, verified: Sequence[Verified], executor: Executor | None = None
) -> Dispatcher:
    """The dispatcher --dispatcher names: here, one run at a time (local.py; `executor`
    replaces the real child processes in tests), or on a Dask cluster (dask.py). Every
    campaign, its own or a verb's (bisect, tune, harden), is dispatched through this."""
    if kind == "dask":
        from allocmark.dispatchers.dask import Dask

        return Dask(str(scheduler), list(verified))
    from allocmark.dispatchers.local import Local

    return Local(executor)


def close(d: Dispatcher) -> None:
    """The dispatcher's connections closed, where it holds any (a Dask client)."""
    closing = getattr(d, "close", None)
    if closing:
        closing()


def run_batch(executor: Executor, batch: Batch) -> Iterator[Event]:
    """The executor side: a block's calibration, then its runs in order."""
    if batch.is_block:
        seconds = executor.calibrate()
        if seconds is not None:
            yield Calibrated(batch.specs[0].seq, seconds)
    covered = dict(batch.checks)
    for spec in batch.specs:
        began = time.monotonic()
        result = _run_one(executor, spec, covered)
        yield Done(spec, result, max(time.monotonic() - began, result.wall_s))


def _run_one(executor: Executor, spec: RunSpec, covered: dict[int, Check | None]) -> RunResult:
    if spec.role == "verify":
        return executor.run(spec)
    if spec.seq not in covered:
        return run_steady(executor, spec)  # verifies itself, or needs no check
    return checked(executor, spec, covered[spec.seq])


def checked(executor: Executor, spec: RunSpec, check: Check | None) -> RunResult:
    """A measured run of an application, without libam_who (so that its peak RSS is
    the program's own; the launcher still reads what served malloc in each of its
    images, execute.py), judged also by the verification run of its allocator and cell."""
    if check is not None and check.status is RunStatus.UNVERIFIED:
        why = f"its verification run #{check.seq}: {check.detail}"
        return RunResult(RunStatus.UNVERIFIED, started=time.time(), detail=why)
    bare = without_needless_libc(spec, check)
    result = run_steady(executor, bare)
    if result.status is not RunStatus.OK:
        return result
    if bare is not spec:  # what it ran on: its environment lacked the plan's preload
        dropped = {"preload": "none: libc serves malloc without it (no other allocator loaded)"}
        result = dataclasses.replace(result, labels=result.labels | dropped)
    if check is None or check.status is not RunStatus.OK:
        why = f"not verified: its verification run ended {check.status.value if check else '?'}"
        return dataclasses.replace(result, status=RunStatus.UNVERIFIED, detail=why)
    shadowed = {k: v for k, v in check.labels.items() if k == "also_defines_malloc"}
    return dataclasses.replace(
        result,
        malloc_object=spec.expect_malloc,
        labels=result.labels | shadowed | {"verified_by": f"run {check.seq}"},
    )


def without_needless_libc(spec: RunSpec, check: Check | None) -> RunSpec:
    """glibc's entries preload the C library itself, so that a program linking another
    allocator (Debian's redis links libjemalloc) still runs on glibc's malloc. Where the
    verification run found no other allocator loaded, the measured runs go without that
    preload: the program starts as it does without allocmark (ld.so's extra work showed
    in a tiny program's peak RSS, bench/tiny_rss.py). The launcher reads what served
    malloc in every measured run (run/image.py): were libc not to serve it after all,
    the run is unverified, never a number."""
    preload = dict(spec.env).get("LD_PRELOAD", "")
    libc = os.path.realpath(spec.expect_malloc or "")
    if (
        check is None
        or check.status is not RunStatus.OK
        or "also_defines_malloc" in check.labels
        or not os.path.basename(libc).startswith("libc.so")
        or os.path.realpath(preload) != libc
    ):
        return spec
    return dataclasses.replace(spec, env=tuple(kv for kv in spec.env if kv[0] != "LD_PRELOAD"))


def run_steady(executor: Executor, spec: RunSpec) -> RunResult:
    """The run, taken again (at most MAX_RERUNS times) while other work spikes during it;
    a measured run (not profiled) whose count of system calls cost more than
    kernel.BUDGET of its time is taken again uncounted, with the counted run's counts
    (kernel.apart)."""
    result = _steady(executor, spec)
    over = kernel.cost_share(result.metrics, result.wall_s) > kernel.BUDGET
    # A profiled run's time is the profiler's anyway, and its calls are timed only
    # where they are counted; a recorded run's is the recorder's, and its trace is made.
    plain = spec.role == "measure" and spec.count and not spec.profile and not spec.trace
    if not (plain and over) or result.status is not RunStatus.OK:
        return result
    bare = _steady(executor, dataclasses.replace(spec, count=False))
    return kernel.apart(bare, result) if bare.status is RunStatus.OK else bare


def _steady(executor: Executor, spec: RunSpec) -> RunResult:
    """The run, taken again while other work spikes during it."""
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
