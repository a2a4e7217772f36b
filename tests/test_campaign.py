"""The campaign loop with a fake executor: saving, interruption, resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from allocmark import campaign, machine
from allocmark.model import RunResult, RunSpec, RunStatus
from allocmark.store import Store
from tests.fakes import FakeExecutor, specs
from tests.fakes import allocs as fake_allocs


def setup(tmp_path: Path, n: int = 6) -> tuple[Store, int]:
    s = Store(tmp_path / "c.db")
    allocs = fake_allocs("a", "b")
    cid = s.new_campaign("t", 1, machine.current(), [], allocs, [], specs(n), "b")
    return s, cid


def test_every_run_is_saved_and_the_campaign_finishes(tmp_path: Path) -> None:
    s, cid = setup(tmp_path)
    progress: list[tuple[int, int]] = []
    fake = FakeExecutor(crash={2})
    campaign.execute(s, cid, fake, fake_allocs("a", "b"), lambda d, t, *_: progress.append((d, t)))
    assert fake.seen == list(range(6))
    assert progress[-1] == (6, 6)
    assert s.campaign(cid).status == "finished"
    statuses = [r.status for r in s.runs(cid)]
    assert statuses.count(RunStatus.CRASHED) == 1  # the campaign went on after the crash


def test_interrupt_keeps_finished_runs_and_resume_does_the_rest(tmp_path: Path) -> None:
    s, cid = setup(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        campaign.execute(s, cid, FakeExecutor(stop_at=4), fake_allocs("a", "b"))
    assert s.campaign(cid).status == "interrupted"
    assert [r.seq for r in s.runs(cid)] == [0, 1, 2, 3]
    before = [(r.seq, r.wall_s) for r in s.runs(cid)]
    fake = FakeExecutor()
    campaign.execute(s, cid, fake, fake_allocs("a", "b"))
    assert fake.seen == [4, 5]  # nothing redone
    assert [(r.seq, r.wall_s) for r in s.runs(cid)][:4] == before
    assert s.campaign(cid).status == "finished"


class NoisyThenSteady:
    """Wall times: wildly spread for the first runs of each cell, then steady."""

    def __init__(self) -> None:
        self.calls = 0

    def run(self, spec: RunSpec) -> RunResult:
        self.calls += 1
        wall = [1.0, 3.0, 0.3][spec.rep] if spec.rep < 3 else 1.0
        return RunResult(RunStatus.OK, wall_s=wall, maxrss_kib=1000)


def test_adaptive_repetitions_stop_at_max_runs(tmp_path: Path) -> None:
    s = Store(tmp_path / "a.db")
    allocs = fake_allocs("a", "b")
    settings = {"seed": 1, "min_runs": 3, "max_runs": 5, "target_ci": 0.02}
    cid = s.new_campaign("t", 1, machine.current(), [], allocs, [], plan3(), "b", settings)
    fake = NoisyThenSteady()
    campaign.execute(s, cid, fake, allocs)
    runs = s.runs(cid)
    per_cell = {a: sum(r.allocator == a for r in runs) for a in "ab"}
    assert per_cell == {"a": 5, "b": 5}  # never tight: stopped at max_runs
    assert s.campaign(cid).status == "finished"
    assert [r.seq for r in runs] == list(range(10))


def test_adaptive_repetitions_stop_when_tight(tmp_path: Path) -> None:
    s = Store(tmp_path / "b.db")
    allocs = fake_allocs("a", "b")
    settings = {"seed": 1, "min_runs": 3, "max_runs": 50, "target_ci": 0.5}
    cid = s.new_campaign("t", 1, machine.current(), [], allocs, [], plan3(), "b", settings)
    campaign.execute(s, cid, NoisyThenSteady(), allocs)
    counts = {a: sum(r.allocator == a for r in s.runs(cid)) for a in "ab"}
    # 3 noisy runs are loose; steady runs shrink the interval below ±50 % well before 50.
    assert 3 < counts["a"] < 50 and counts["a"] == counts["b"]


def plan3() -> list[RunSpec]:
    """Two allocators x one cell x 3 repetitions, interleaved."""
    return [
        RunSpec(seq=i, allocator="ab"[i % 2], workload="w", params=(), rep=i // 2,
                argv=("true",), env=(), timeout=5)
        for i in range(6)
    ]  # fmt: skip
