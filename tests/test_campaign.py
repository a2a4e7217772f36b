"""The campaign loop with a fake executor: saving, interruption, resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from allocmark import campaign, machine
from allocmark.model import RunStatus
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
