"""The campaign loop with a fake executor: saving, interruption, resume."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from allocmark import stats
from allocmark.answer import forecast, releases, stored as stored_answer
from allocmark.model import (
    AllocatorSpec,
    Git,
    GitBuild,
    RunResult,
    RunSpec,
    RunStatus,
    Status,
    Verified,
)
from allocmark.request import Precision
from allocmark.run import campaign, machine, start
from allocmark.store import Store
from tests.fakes import FakeExecutor, allocs as fake_allocs, drive, precision_plan, specs


def setup(tmp_path: Path, n: int = 6) -> tuple[Store, int]:
    s = Store(tmp_path / "c.db")
    allocs = fake_allocs("a", "b")
    cid = s.new_campaign("t", 1, machine.current(), [], allocs, [], specs(n), "b")
    return s, cid


def test_every_run_is_saved_and_the_campaign_finishes(tmp_path: Path) -> None:
    s, cid = setup(tmp_path)
    progress: list[tuple[int, int]] = []
    fake = FakeExecutor(crash={2})
    events = drive(s, cid, fake, fake_allocs("a", "b"))
    progress += [(e.done, e.total) for e in events if isinstance(e, campaign.RunDone)]
    assert fake.seen == list(range(6))
    assert progress[-1] == (6, 6)
    assert s.campaign(cid).status == "finished"
    statuses = [r.status for r in s.runs(cid)]
    assert statuses.count(RunStatus.CRASHED) == 1  # the campaign went on after the crash


def test_interrupt_keeps_finished_runs_and_resume_does_the_rest(tmp_path: Path) -> None:
    s, cid = setup(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        drive(s, cid, FakeExecutor(stop_at=4), fake_allocs("a", "b"))
    assert s.campaign(cid).status == "interrupted"
    assert [r.seq for r in s.runs(cid)] == [0, 1, 2, 3]
    before = [(r.seq, r.wall_s) for r in s.runs(cid)]
    fake = FakeExecutor()
    drive(s, cid, fake, fake_allocs("a", "b"))
    assert fake.seen == [4, 5]  # nothing redone
    assert [(r.seq, r.wall_s) for r in s.runs(cid)][:4] == before
    assert s.campaign(cid).status == "finished"


class Blocks:
    """a is 0.8 of b in every block; the first blocks are noisy, later ones steady.
    Every run reports `wall` seconds (the budget counts them)."""

    def __init__(self, noisy: int = 3, spike_first: bool = False) -> None:
        self.calls: list[RunSpec] = []
        self.noisy = noisy
        self.spike_first = spike_first

    def calibrate(self) -> float | None:
        return 0.0125

    def run(self, spec: RunSpec) -> RunResult:
        self.calls.append(spec)
        jitter = [1.0, 1.3, 0.75][spec.rep % 3] if spec.rep < self.noisy else 1.0
        wall = (0.8 if spec.allocator == "a" else 1.0) * (jitter if spec.allocator == "a" else 1)
        noise = {"noise_other_cpu_s": 0.9 if self.spike_first and len(self.calls) == 1 else 0.0}
        return RunResult(RunStatus.OK, wall_s=wall, maxrss_kib=1000, metrics=noise)


def precise(
    tmp_path: Path, max_blocks: int, target: float, budget: float = 0.0
) -> tuple[Store, int]:
    s = Store(tmp_path / "p.db")
    how = precision_plan(3, max_blocks, target, budget)
    cid = s.new_campaign(
        "t", 1, machine.current(), [], fake_allocs("a", "b"), [], plan3(), "b", how
    )
    return s, cid


def blocks_of(s: Store, cid: int) -> list[int]:
    return sorted({r.rep for r in s.runs(cid)})


def test_blocks_are_added_until_every_ratio_is_decided(tmp_path: Path) -> None:
    s, cid = precise(tmp_path, max_blocks=50, target=0.03)
    rounds: list[tuple[int, int, int]] = []
    events = drive(s, cid, Blocks(), fake_allocs("a", "b"))
    rounds += [
        (e.undecided, e.ratios, e.blocks) for e in events if isinstance(e, campaign.RoundDone)
    ]
    n = len(blocks_of(s, cid))
    # a is 20 % faster after 3 noisy blocks, and peak RSS is equal: both decided once
    # the anytime-valid interval at alpha/2 can be finite (8 blocks at least), well before 50.
    assert 8 <= n < 50
    assert rounds[0] == (2, 2, 1)  # time and peak RSS undecided, one more block
    assert rounds[-1] == (0, 2, 0)
    comp = stored_answer.comparison(s, cid)
    assert comp.sequential and not comp.rows[0].final  # decided: the sequence alone
    cells = comp.rows[0].cells
    assert cells["time_s"]["a"].verdict is stats.Verdict.BETTER
    assert cells["peak_rss_kib"]["a"].verdict is stats.Verdict.SAME
    runs = s.runs(cid)
    for rep in blocks_of(s, cid):  # every block holds each allocator once
        assert sorted(r.allocator for r in runs if r.rep == rep) == ["a", "b"]
    assert s.campaign(cid).status == "finished"


def test_blocks_stop_at_max_runs(tmp_path: Path) -> None:
    s, cid = precise(tmp_path, max_blocks=5, target=0.0001)
    drive(s, cid, Blocks(noisy=100), fake_allocs("a", "b"))
    assert blocks_of(s, cid) == [0, 1, 2, 3, 4]
    assert [r.seq for r in s.runs(cid)] == list(range(10))
    # max_blocks, not its intervals, ended the row: it gets the final exact look
    comp = stored_answer.comparison(s, cid)
    assert comp.rows[0].final
    assert all(r.final for c in comp.rows[0].cells["time_s"].values() if (r := c.ratio))


def test_blocks_stop_when_the_budget_is_spent(tmp_path: Path) -> None:
    # Each block costs 1.8 s of runs: 5.4 s for the first three, 10 s allow two more.
    s, cid = precise(tmp_path, max_blocks=50, target=0.0001, budget=10.0)
    drive(s, cid, Blocks(noisy=100), fake_allocs("a", "b"))
    assert len(blocks_of(s, cid)) == 5
    assert s.spent(cid) == pytest.approx(9.0, abs=0.5)


def test_a_run_during_a_spike_is_taken_again_and_counted(tmp_path: Path) -> None:
    s, cid = precise(tmp_path, max_blocks=3, target=0.5)
    fake = Blocks(spike_first=True)
    drive(s, cid, fake, fake_allocs("a", "b"))
    assert [c.seq for c in fake.calls[:2]] == [0, 0]  # the spiked first run, again
    first = next(r for r in s.runs(cid) if r.seq == 0)
    assert first.metrics["noise_reruns"] == 1.0
    assert s.calibrations(cid) == [0.0125] * 3  # one before every block


def plan3() -> list[RunSpec]:
    """Two allocators x one cell x 3 repetitions, interleaved."""
    return [
        RunSpec(
            seq=i,
            allocator="ab"[i % 2],
            workload="w",
            params=(),
            rep=i // 2,
            argv=("true",),
            env=(),
            timeout=5,
        )
        for i in range(6)
    ]


class Verifying(Blocks):
    """Runs as Blocks does; a's verification run finds another malloc."""

    def run(self, spec: RunSpec) -> RunResult:
        if spec.role == "verify":
            self.calls.append(spec)
            if spec.allocator == "a":
                return RunResult(RunStatus.UNVERIFIED, detail="malloc in x was served by y")
            return RunResult(RunStatus.OK, labels={"also_defines_malloc": "/lib/z.so"})
        # Measured runs still name their malloc: the launcher reads it from outside them
        # (execute.py leaves libam_who out of a measured run).
        assert spec.expect_malloc == "/x/lib.so"
        return super().run(spec)


def test_verification_runs_decide_for_the_measured_runs(tmp_path: Path) -> None:
    s = Store(tmp_path / "v.db")
    checks = [
        RunSpec(
            seq=i,
            allocator="ab"[i],
            workload="w",
            params=(),
            rep=0,
            argv=("true",),
            env=(),
            timeout=5,
            expect_malloc="/x/lib.so",
            role="verify",
        )
        for i in range(2)
    ]
    measured = [dataclasses.replace(r, seq=r.seq + 2, expect_malloc="/x/lib.so") for r in plan3()]
    cid = s.new_campaign(
        "t", 1, machine.current(), [], fake_allocs("a", "b"), [], checks + measured, "b"
    )
    fake = Verifying()
    drive(s, cid, fake, fake_allocs("a", "b"))
    runs = {r.seq: r for r in s.runs(cid)}
    assert [c.allocator for c in fake.calls if c.role == "measure"] == ["b"] * 3  # a never ran
    for r in runs.values():
        if r.role == "measure" and r.allocator == "a":
            assert r.status is RunStatus.UNVERIFIED and "verification run #0" in r.detail
        elif r.role == "measure":
            assert r.status is RunStatus.OK and r.labels["verified_by"] == "run 1"
            assert r.labels["also_defines_malloc"] == "/lib/z.so"


def test_the_profilers_sampling_has_one_name_and_old_campaigns_still_read(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")

    def sample_of(stored: dict[str, object]) -> int:
        cid = s.new_campaign("t", 1, machine.current(), [], fake_allocs("a"), [], specs(1), "a")
        with s.db:  # as a version-1 plan was stored: a flat object
            s.db.execute(
                "UPDATE campaigns SET settings_json=? WHERE id=?", (json.dumps(stored), cid)
            )
        return s.campaign_plan(cid).sample

    assert sample_of({"sample": 64}) == 64
    assert sample_of({"profile": 1024}) == 1024  # stored before it was renamed
    assert sample_of({}) == 0


VERSIONS = ("t@v1", "t@v2", "t@v3")


class Releases:
    """t@v2 is 30 % faster than t@v1 in every block; t@v3 is t@v2 within ±`wiggle`."""

    def __init__(self, wiggle: float = 0.01) -> None:
        self.calls: list[RunSpec] = []
        self.wiggle = wiggle

    def calibrate(self) -> float | None:
        return 0.0125

    def run(self, spec: RunSpec) -> RunResult:
        self.calls.append(spec)
        wiggle = 1 + self.wiggle * (1, -1, 0.5, -0.5)[spec.rep % 4]
        wall = {"t@v1": 1.0, "t@v2": 0.7, "t@v3": 0.7 * wiggle}[spec.allocator]
        return RunResult(RunStatus.OK, wall_s=wall, maxrss_kib=1000)


def _versions() -> list[Verified]:
    out = []
    for rank, name in enumerate(VERSIONS):
        label = name.partition("@")[2]
        origin = Git("/r", f"{rank:040d}", label, label, GitBuild("make", "lib.so"), rank)
        spec = AllocatorSpec(name=name, paths=(f"/x/{label}.so",), family="t", git=origin)
        out.append(Verified(spec, Status.OK, library=f"/x/{label}.so"))
    return out


def test_release_to_release_blocks_go_to_the_versions_still_open(tmp_path: Path) -> None:
    """The versions suite's question: each version against the one before it. Once
    v1 → v2 is decided (faster, and the same peak RSS), blocks hold only v2 and v3,
    until v2 → v3 is decided the same within the margin."""
    s = Store(tmp_path / "r.db")
    how = dataclasses.replace(
        precision_plan(4, 200, 0.03),
        precision=Precision(200, 0.03, question="releases"),
    )
    first = [RunSpec(i, VERSIONS[i % 3], "w", (), i // 3, ("true",), (), 5) for i in range(12)]
    cid = s.new_campaign("t", 1, machine.current(), [], _versions(), [], first, "t@v1", how)
    fake = Releases()
    events = drive(s, cid, fake, _versions())
    rounds = [(e.undecided, e.ratios) for e in events if isinstance(e, campaign.RoundDone)]
    assert rounds[0][1] == 4  # 2 changes x (time, peak RSS)
    assert rounds[-1] == (0, 4)
    forecasts = [e for e in events if isinstance(e, forecast.Forecast)]
    assert forecasts and all(f.ratios == 4 for f in forecasts)  # the same changes
    # after one block no change has a ratio yet, but a block of all three still costs
    assert forecasts[0].blocks == 1 and forecasts[0].block_s >= 0.7 + 0.7 + 1.0
    by_block: dict[int, set[str]] = {}
    for r in s.runs(cid):
        by_block.setdefault(r.rep, set()).add(r.allocator)
    assert all(by_block[b] == set(VERSIONS) for b in range(4))
    later = [by_block[b] for b in sorted(by_block) if b >= 4]
    assert later and later[-1] == {"t@v2", "t@v3"}
    assert all(b in (set(VERSIONS), {"t@v2", "t@v3"}) for b in later)
    comp = stored_answer.comparison(s, cid)
    assert start._lines(_versions()) == (VERSIONS,)  # a planned block's line, in order
    found = {(c.older, c.newer, c.metric): c.verdict for c in releases.changes(comp)}
    assert found[("t@v1", "t@v2", "time_s")] is stats.Verdict.BETTER
    assert found[("t@v2", "t@v3", "time_s")] is stats.Verdict.SAME
    assert s.campaign(cid).status == "finished"


def test_the_forecast_of_release_to_release_prices_the_open_versions_only(
    tmp_path: Path,
) -> None:
    """Stopped at 8 blocks: v1 → v2 decided, v2 → v3 (±5 % a block) not; one more
    block costs a run of v2 and one of v3 (the costs given), not one of v1."""
    s = Store(tmp_path / "r.db")
    how = dataclasses.replace(
        precision_plan(4, 8, 0.03), precision=Precision(8, 0.03, question="releases")
    )
    first = [RunSpec(i, VERSIONS[i % 3], "w", (), i // 3, ("true",), (), 5) for i in range(12)]
    cid = s.new_campaign("t", 1, machine.current(), [], _versions(), [], first, "t@v1", how)
    drive(s, cid, Releases(wiggle=0.05), _versions())
    comp = stored_answer.comparison(s, cid)
    costs = {("t@v1", "w", ()): 1.0, ("t@v2", "w", ()): 0.7, ("t@v3", "w", ()): 0.75}
    fc = forecast.of(comp, costs, how, 0.0)
    assert (fc.undecided, fc.ratios) == (1, 4)  # v2 → v3's time
    assert fc.block_s == pytest.approx(0.7 + 0.75)
