"""Fake allocators, plans and runs for tests that start no process."""

from __future__ import annotations

from allocmark.dispatchers import Dispatcher
from allocmark.dispatchers.local import Local
from allocmark.model import (
    AllocatorSpec,
    Params,
    RunResult,
    RunSpec,
    RunStatus,
    Status,
    StoredRun,
    Verified,
)
from allocmark.request import CampaignPlan, Precision
from allocmark.run.campaign import Step, steps
from allocmark.run.rounds import Stretch
from allocmark.store import Store


def allocs(*names: str) -> list[Verified]:
    return [
        Verified(AllocatorSpec(name=n, paths=(f"/x/{n}.so",)), Status.OK, library=f"/x/{n}.so")
        for n in names
    ]


def specs(n: int) -> list[RunSpec]:
    return [
        RunSpec(
            seq=i,
            allocator="a" if i % 2 else "b",
            workload="churn",
            params=(("threads", 1),),
            rep=i // 2,
            argv=("true",),
            env=(),
            timeout=5,
        )
        for i in range(n)
    ]


class FakeExecutor:
    """Returns canned results; raises KeyboardInterrupt at run number `stop_at`."""

    def calibrate(self) -> float | None:
        return 0.01

    def __init__(self, stop_at: int | None = None, crash: set[int] | None = None) -> None:
        self.seen: list[int] = []
        self.stop_at = stop_at
        self.crash = crash or set()

    def run(self, spec: RunSpec) -> RunResult:
        if self.stop_at is not None and len(self.seen) == self.stop_at:
            raise KeyboardInterrupt
        self.seen.append(spec.seq)
        if spec.seq in self.crash:
            return RunResult(RunStatus.CRASHED, signal=11, detail="SIGSEGV")
        return RunResult(RunStatus.OK, wall_s=0.1 * (spec.seq + 1), maxrss_kib=1000)


def stored(
    allocator: str,
    wall: float,
    rss: int = 1024,
    params: Params = (("threads", 1),),
    status: RunStatus = RunStatus.OK,
    workload: str = "churn",
    partial: bool = False,
    rep: int = 0,
    metrics: dict[str, float] | None = None,
) -> StoredRun:
    return StoredRun(
        seq=0,
        allocator=allocator,
        workload=workload,
        params=params,
        rep=rep,
        status=status,
        wall_s=wall,
        user_s=wall,
        sys_s=0.0,
        maxrss_kib=rss,
        metrics=metrics or {},
        detail="",
        partial=partial,
    )


def alive(pid: int) -> bool:
    """A real process check for tests: a zombie has ended, and a process may
    vanish between opening its stat file and reading it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def drive(
    store: Store,
    cid: int,
    executor: object,
    verified: list[Verified],
    stretch: Stretch | None = None,
) -> list[Step]:
    """The campaign loop run to its end (or its exception) on its stored plan."""
    how = store.campaign_plan(cid)
    # A fake one-run executor goes through the local dispatcher, as a campaign's would.
    dispatcher = executor if isinstance(executor, Dispatcher) else Local(executor)  # type: ignore[arg-type]
    return list(steps(store, cid, how, dispatcher, verified, stretch))


def precision_plan(
    min_blocks: int, max_blocks: int, margin: float, budget_s: float = 0.0, stretch: bool = False
) -> CampaignPlan:
    """A campaign adding blocks until decided, as `run` plans one."""
    return CampaignPlan(
        seed=1,
        min_blocks=min_blocks,
        precision=Precision(max_blocks, margin, budget_s, stretch=stretch),
    )
