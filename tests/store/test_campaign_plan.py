"""The campaign plan as stored: one typed record, versioned; older stores still read
and resume."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from allocmark.errors import StoreError
from allocmark.request import PLAN_VERSION, CampaignPlan, Creator, Precision
from allocmark.store import Store, campaign_plan
from allocmark.store.campaign_plan import from_v1
from tests.conftest import cli

FIXTURE = Path(__file__).parent.parent / "fixtures" / "store-v11-interrupted.db"


def test_a_plan_is_stored_and_read_back_whole() -> None:
    plan = CampaignPlan(
        seed=7,
        min_blocks=4,
        plan_id="p",
        sample=64,
        created_by=Creator("h", 5),
        fixed_time=(("larson", "seconds"),),
        calls=(("churn", ("malloc", "free")),),
        precision=Precision(100, 0.05, 120.0, race="time", stretch=True),
        why="auto",
        left_out=(("jemalloc+x", "no such option"),),
    )
    text = campaign_plan.dumps(plan)
    assert json.loads(text)["version"] == PLAN_VERSION
    assert campaign_plan.loads(text, "here") == plan
    assert plan.sequential and plan.budget_s == 120.0


def test_a_version_1_plan_is_migrated_as_it_is_read() -> None:
    old = {
        "seed": 3,
        "min_runs": 4,  # blocks, as version 1 said them
        "max_runs": 12,
        "target_ci": 0.05,  # the margin's name before its rename
        "profile": 1024,  # the sampling's
        "created_by": {"host": "vm", "uid": 0},
        "fixed_time": {"larson": "seconds"},
        "calls": {"churn": ["malloc"]},
        "left_out": {"glibc+t": "unknown"},
        "budget_s": 60.0,
        "budget_given_s": 30.0,
        "stop_on_failure": True,
        "why": "auto",
        "why_pass": "no why pass: no difference was decided",
    }
    plan = campaign_plan.loads(json.dumps(old), "here")
    assert plan == CampaignPlan(
        seed=3,
        min_blocks=4,
        sample=1024,
        created_by=Creator("vm", 0),
        fixed_time=(("larson", "seconds"),),
        calls=(("churn", ("malloc",)),),
        precision=Precision(12, 0.05, 60.0),
        stop_on_failure=True,
        why="auto",
        why_pass="no why pass: no difference was decided",
        left_out=(("glibc+t", "unknown"),),
        budget_given_s=30.0,
    )
    # A plan without a margin added no blocks: its blocks were fixed.
    fixed = campaign_plan.loads(json.dumps({"seed": 1, "min_runs": 5, "max_runs": 5}), "here")
    assert fixed.precision is None and not fixed.sequential
    assert from_v1({})["min_blocks"] == 0  # an empty plan: every field its default


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "its plan is not JSON"),
        ("[" * 100_000 + "]" * 100_000, "its plan is not JSON"),
        ("[1]", "its plan is not a JSON object"),
        ('{"version": 99}', "its plan has version 99; this allocmark reads versions 1 to"),
        ('{"version": 2, "seed": "x", "min_blocks": 1}', "its plan's seed is wrong"),
        (
            '{"seed": 1, "min_runs": 1, "margin": 0.03, "max_runs": "x"}',
            "its plan's precision.max_blocks is wrong",
        ),
    ],
)
def test_a_damaged_plan_is_a_store_error(text: str, says: str) -> None:
    with pytest.raises(StoreError, match=f"^here: {says}"):
        campaign_plan.loads(text, "here")


def test_a_store_written_before_the_typed_plan_is_read_and_resumed(tmp_path: Path) -> None:
    # The fixture: `allocmark try -a glibc,jemalloc -n 6 --max-runs 12 --budget 1m
    # --no-why -- /bin/sh -c LOOP` by allocmark a33b0a9 (store schema 11, a version-1
    # plan), its last four blocks' runs then removed as Ctrl-C leaves them (status
    # interrupted). Planned on another machine: its runs are not signed by this user.
    db = tmp_path / "old.db"
    shutil.copy(FIXTURE, db)
    db.chmod(0o644)
    with sqlite3.connect(db) as con:
        (raw,) = con.execute("SELECT settings_json FROM campaigns").fetchone()
        assert "version" not in json.loads(raw)
        # Its libraries as this machine has them: what is under test is the plan, and
        # a library that changed refuses the resume (tests/test_cli.py tests that).
        for name, path in con.execute("SELECT name, library FROM allocators").fetchall():
            sha = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            con.execute("UPDATE allocators SET sha256=? WHERE name=?", (sha, name))
    plan = Store(db, create=False).campaign_plan(1)
    assert plan.precision == Precision(12, 0.03, 60.0)
    assert plan.stop_on_failure and plan.created_by == Creator("vm", 0) and plan.min_blocks == 6
    elsewhere = {"XDG_CONFIG_HOME": str(tmp_path / "key")}  # a key that signed nothing
    refused = cli("run", "--resume", "--db", str(db), env=elsewhere)
    assert refused.returncode == 2 and "are not signed by you" in refused.stderr
    assert "says it was planned by user 0 on vm" in refused.stderr
    r = cli("run", "--resume", "--db", str(db), "--yes", env=elsewhere)
    assert r.returncode == 0, r.stderr
    assert "resuming campaign 1: 8 runs left" in r.stdout + r.stderr
    store = Store(db, create=False)
    c = store.campaign(1)
    assert c.status == "finished" and c.done == c.planned >= 18
    assert len({run.rep for run in store.runs(1) if run.role == "measure"}) >= 6
    with sqlite3.connect(db) as con:  # the plan is migrated as it is read, never rewritten
        assert con.execute("SELECT settings_json FROM campaigns").fetchone()[0] == raw
    report = cli("report", "--db", str(db), "--format", "json")
    assert report.returncode == 0, report.stderr
