"""The SQLite store: schema versions, one transaction per run, resume bookkeeping."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from allocmark import store
from allocmark.errors import StoreError
from allocmark.model import RunResult, RunStatus
from allocmark.request import CampaignPlan
from allocmark.run import machine
from allocmark.store import Store, base, cache, owner, schema
from tests.fakes import allocs as fake_allocs, specs


def new(path: Path, n: int = 4) -> tuple[Store, int]:
    s = Store(path)
    cid = s.new_campaign("t", 1, machine.current(), ["x"], fake_allocs("a", "b"), [], specs(n), "b")
    return s, cid


def test_pending_excludes_recorded_runs(tmp_path: Path) -> None:
    s, cid = new(tmp_path / "r.db")
    allocs = {v.spec.name: v for v in fake_allocs("a", "b")}
    for spec in specs(4)[:2]:
        s.record(
            cid,
            spec,
            RunResult(RunStatus.OK, wall_s=1.0, metrics={"ops": 3}),
            allocs[spec.allocator],
        )
    assert [p.seq for p in s.pending(cid)] == [2, 3]
    c = s.campaign(cid)
    assert (c.planned, c.done, c.status) == (4, 2, "running")
    runs = s.runs(cid)
    assert [r.metrics for r in runs] == [{"ops": 3.0}, {"ops": 3.0}]


def test_a_run_cannot_be_recorded_twice(tmp_path: Path) -> None:
    s, cid = new(tmp_path / "r.db")
    a = fake_allocs("b")[0]
    s.record(cid, specs(1)[0], RunResult(RunStatus.OK), a)
    with pytest.raises(sqlite3.IntegrityError):
        s.record(cid, specs(1)[0], RunResult(RunStatus.OK), a)
    assert s.campaign(cid).done == 1  # the failed insert left nothing behind


def test_reopen_keeps_everything(tmp_path: Path) -> None:
    s, cid = new(tmp_path / "r.db")
    s.record(cid, specs(1)[0], RunResult(RunStatus.CRASHED, signal=11), fake_allocs("b")[0])
    s.close()
    again = Store(tmp_path / "r.db", create=False)
    assert again.runs(cid)[0].status is RunStatus.CRASHED
    assert again.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    s, _ = new(path)
    s.db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    s.db.commit()
    s.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match=r"newer allocmark.*schema 99"):
        Store(path)
    assert path.read_bytes() == before


def test_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    with pytest.raises(StoreError, match="not an allocmark database"):
        Store(path)


def test_garbage_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a usable SQLite"):
        Store(path)


def test_missing_database_for_reading(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no such results database"):
        Store(tmp_path / "none.db", create=False)
    assert not (tmp_path / "none.db").exists()


def test_schema_version_is_recorded(tmp_path: Path) -> None:
    s, _ = new(tmp_path / "r.db")
    row = s.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    assert int(row[0]) == store.SCHEMA_VERSION


def test_version_1_database_is_migrated_and_keeps_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    db = sqlite3.connect(path)
    db.executescript(schema._SCHEMA_V1)
    db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    db.execute("INSERT INTO campaigns (id, name, created, status) VALUES (1, 'old', 0, 'finished')")
    db.execute(
        "INSERT INTO runs (campaign_id, seq, allocator, workload, params_json, rep, status, "
        "wall_s, user_s, sys_s, maxrss_kib, partial) VALUES (1, 0, 'glibc', 'churn', '[]', 0, "
        "'ok', 1.5, 1.0, 0.1, 2048, 0)"
    )
    db.commit()
    db.close()
    s = Store(path)
    assert schema.stored_version(s.db, s.path) == store.SCHEMA_VERSION
    (run,) = s.runs(1)
    assert (run.wall_s, run.role, run.labels) == (1.5, "measure", {})


def _cells(s: Store, cid: int) -> dict[tuple[str, str], tuple[float | None, ...]]:
    return {(c.allocator, c.role): c.columns["wall_s"] for c in s.grouped(cid, ("ops",))}


def test_the_cell_cache_never_serves_a_stale_campaign(tmp_path: Path) -> None:
    s, cid = new(tmp_path / "c.db", n=6)
    allocs = {v.spec.name: v for v in fake_allocs("a", "b")}
    plan = specs(6)
    for spec in plan[:3]:
        s.record(cid, spec, RunResult(RunStatus.OK, wall_s=1.0 + spec.seq), allocs[spec.allocator])
    _cells(s, cid)  # while it runs, a campaign's cells are read but not kept
    assert s.db.execute("SELECT count(*) FROM cell_cache").fetchone()[0] == 0
    s.set_status(cid, "interrupted")
    first = _cells(s, cid)
    assert _cells(s, cid) == first  # served from the cache
    assert s.db.execute("SELECT count(*) FROM cell_cache").fetchone()[0] == 1
    s.record(cid, plan[3], RunResult(RunStatus.OK, wall_s=9.0), allocs[plan[3].allocator])
    after = _cells(s, cid)
    assert sum(len(v) for v in after.values()) == 4 and 9.0 in after[(plan[3].allocator, "measure")]
    reopened = Store(tmp_path / "c.db", create=False)
    assert _cells(reopened, cid) == after


def test_a_read_only_database_still_reports(tmp_path: Path) -> None:
    s, cid = new(tmp_path / "ro.db")
    s.record(cid, specs(1)[0], RunResult(RunStatus.OK, wall_s=2.0), fake_allocs("b")[0])
    s.close()
    (tmp_path / "ro.db").chmod(0o444)
    try:
        ro = Store(tmp_path / "ro.db", create=False)
        ro.db.execute("PRAGMA query_only = ON")  # root ignores file modes: say it here too
        assert _cells(ro, cid) == {("b", "measure"): (2.0,)}
    finally:
        (tmp_path / "ro.db").chmod(0o644)


def test_allocator_specs_and_app_runs_read_back_as_they_were_written(tmp_path: Path) -> None:
    from allocmark import allocators
    from allocmark.model import AppRun, MetricParser, Service
    from allocmark.schemas import stored

    for spec in allocators.load_catalog():  # recipes, variants, aliases, env pairs
        assert stored.allocator_spec(stored.dump(spec)) == spec
    parser = MetricParser(name="m", regex="(x)", combine="hmean")
    service = Service(client=("c", "{port}"), stop_signal="SIGINT")
    app = AppRun(parsers=(parser,), service=service, steps=(2, 3))
    assert stored.app_run(stored.dump(app)) == app
    # A spec stored before `aliases`, `hidden` and `recipe` existed still reads.
    old = (
        '{"name": "je", "description": "", "system": false, "paths": ["/x.so"], '
        '"package": null, "version_source": "auto", "env": [["A", "1"]], '
        '"baseline": false, "user": false}'
    )
    spec = stored.allocator_spec(old)
    assert spec.env == (("A", "1"),) and spec.aliases == () and spec.recipe is None


def _own(s: Store, cid: int, o: owner.Owner) -> None:
    with s.db:
        s.db.execute("UPDATE campaigns SET owner_json=? WHERE id=?", (json.dumps(o.as_json()), cid))


def test_a_live_owner_keeps_its_campaign_and_a_dead_one_loses_it(tmp_path: Path) -> None:
    s, cid = new(tmp_path / "r.db")
    me = owner.me()
    with subprocess.Popen(["sleep", "30"]) as other:
        alive = dataclasses.replace(me, pid=other.pid, started=owner._start_ticks(other.pid) or 0)
        _own(s, cid, alive)
        with pytest.raises(StoreError, match=f"being run by process {other.pid} .*kill"):
            s.claim(cid)
        other.kill()
    s.claim(cid)  # it died: taken over
    assert (
        owner.from_json(json.loads(s.db.execute("SELECT owner_json FROM campaigns").fetchone()[0]))
        == me
    )
    s.set_status(cid, "finished")
    assert s.db.execute("SELECT owner_json FROM campaigns").fetchone()[0] is None


def test_an_owner_on_another_machine_is_taken_over_only_when_asked(tmp_path: Path) -> None:
    s, cid = new(tmp_path / "r.db")
    _own(s, cid, dataclasses.replace(owner.me(), host="elsewhere", pid=1))
    with pytest.raises(
        StoreError, match=r"elsewhere, which this machine cannot check.*--take-over"
    ):
        s.claim(cid)
    s.claim(cid, take_over=True)


def test_a_database_that_cannot_be_written_is_read_without_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As root every file is writable: pretend the directory is read-only.
    s, cid = new(tmp_path / "r.db")
    s.record(cid, specs(1)[0], RunResult(RunStatus.OK, wall_s=1.0), fake_allocs("b")[0])
    s.close()
    for leftover in tmp_path.glob("r.db-*"):
        leftover.unlink()
    before = (tmp_path / "r.db").read_bytes()
    monkeypatch.setattr(base.os, "access", lambda *_: False)
    ro = Store(tmp_path / "r.db", create=False)
    assert ro.readonly and ro.campaign(cid).done == 1
    assert len(ro.grouped(cid, ("wall_s",))) == 1  # its cell cache is simply not kept
    ro.close()
    assert (tmp_path / "r.db").read_bytes() == before


def _signed(path: Path, plan_id: str = "p1") -> tuple[Store, int]:
    s = Store(path)
    cid = s.new_campaign(
        "t",
        1,
        machine.current(),
        ["x"],
        fake_allocs("a", "b"),
        [],
        specs(4),
        "b",
        CampaignPlan(seed=1, min_blocks=0, plan_id=plan_id),
    )
    return s, cid


def test_every_planned_run_is_signed_and_a_change_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    s, cid = _signed(tmp_path / "s.db")
    assert s.unsigned(cid) == []  # read back as planned (timeout 5 reads back as 5.0)
    edits = (
        "UPDATE plan SET argv_json='[\"sh\"]' WHERE seq=1",
        'UPDATE plan SET env_json=\'[["BASH_ENV","x"]]\' WHERE seq=2',
        "UPDATE plan SET seq=9 WHERE seq=3",
    )
    for edit in edits:
        s.db.execute(edit)
    assert [r.seq for r in s.unsigned(cid)] == [1, 2, 9]
    # Another campaign's plan_id: its runs cannot be moved into this one.
    s.db.execute("UPDATE campaigns SET settings_json=json_set(settings_json, '$.plan_id', 'p2')")
    assert len(s.unsigned(cid)) == 4


def test_a_key_others_can_read_signs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from allocmark.store import seal

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    s, cid = _signed(tmp_path / "s.db")
    key = seal.key_path()
    assert key.stat().st_mode & 0o777 == 0o600 and s.unsigned(cid) == []
    key.chmod(0o644)  # a key others can read could sign for them
    assert seal.key(create=False) is None and len(s.unsigned(cid)) == 4
    key.chmod(0o600)
    assert s.unsigned(cid) == []
    key.write_text("not hex\n")
    assert seal.key(create=False) is None and len(s.unsigned(cid)) == 4


def test_the_measured_runs_overhead_is_the_time_between_them(tmp_path: Path) -> None:
    """Three measured runs of 1 s starting 1.5 s apart: 0.5 s each beyond its own time,
    whatever the set-up runs before them cost (the budget's `spent` holds those too)."""
    s, cid = new(tmp_path / "r.db")
    allocs = {v.spec.name: v for v in fake_allocs("a", "b")}
    assert s.measured_overhead(cid) is None
    for k, spec in enumerate(specs(3)):
        result = RunResult(RunStatus.OK, wall_s=1.0, started=1000.0 + 1.5 * k)
        s.record(cid, spec, result, allocs[spec.allocator])
    s.add_spent(cid, 60.0)
    assert s.measured_overhead(cid) == 0.5


def test_faults_and_switches_are_read_back_by_run_and_by_cell(tmp_path: Path) -> None:
    """rusage's counts were stored and never read (issue 42): now runs and cells carry
    them, for the answer's why."""
    s, cid = new(tmp_path / "r.db")
    allocs = {v.spec.name: v for v in fake_allocs("a", "b")}
    spec = specs(1)[0]
    s.record(
        cid,
        spec,
        RunResult(RunStatus.OK, wall_s=1.0, minflt=812, majflt=3, nvcsw=14, nivcsw=9),
        allocs[spec.allocator],
    )
    (run,) = s.runs(cid)
    assert (run.minflt, run.majflt, run.nvcsw, run.nivcsw) == (812, 3, 14, 9)
    (cell,) = s.grouped(cid, (), columns=("minflt", "majflt", "nvcsw", "nivcsw"))
    assert cell.columns == {
        "minflt": (812.0,),
        "majflt": (3.0,),
        "nvcsw": (14.0,),
        "nivcsw": (9.0,),
    }


def test_sparse_cells_read_the_metrics_some_runs_lack(tmp_path: Path) -> None:
    """What explains a difference is read in one lookup per run: a metric a run lacks
    is None in its column, as cells() gives it."""
    s, cid = new(tmp_path / "r.db")
    allocs = {v.spec.name: v for v in fake_allocs("a", "b")}
    for spec, metrics in zip(
        specs(4),
        ({"peak_anon_kib": 10.5, "x": 1.0}, {}, {"x": 2.0}, {"peak_anon_kib": 7.0}),
        strict=True,
    ):
        s.record(
            cid, spec, RunResult(RunStatus.OK, wall_s=1.0, metrics=metrics), allocs[spec.allocator]
        )
    names = ("peak_anon_kib", "x")
    sparse = {c.allocator: c.columns for c in s.sparse_grouped(cid, names, ("rep", "wall_s"))}
    dense = {c.allocator: c.columns for c in s.grouped(cid, names, ("rep", "wall_s"))}
    assert sparse == dense
    values = [v for c in sparse.values() for v in c["peak_anon_kib"]]
    assert sorted(values, key=str) == sorted([10.5, None, None, 7.0], key=str)


def test_the_cell_cache_keeps_numbers_exactly_and_reads_no_other_format(tmp_path: Path) -> None:
    s, cid = new(tmp_path / "k.db", n=4)
    allocs = {v.spec.name: v for v in fake_allocs("a", "b")}
    for spec in specs(4):
        wall = 1 / 3 + spec.seq * 1e-17 if spec.seq != 2 else 1e308
        s.record(cid, spec, RunResult(RunStatus.OK, wall_s=wall), allocs[spec.allocator])
    s.set_status(cid, "finished")
    computed = _cells(s, cid)
    assert _cells(s, cid) == computed  # from the packed cache: the same floats
    assert 1e308 in computed[("a", "measure")] + computed[("b", "measure")]
    ops = {c.allocator: c.columns["ops"] for c in s.grouped(cid, ("ops",))}
    assert ops == {"a": (None, None), "b": (None, None)}  # no run has it: None kept
    stored = json.loads(s.db.execute("SELECT rows_json FROM cell_cache").fetchone()[0])
    assert stored["format"] == 2
    # An older allocmark's cache (JSON lists) is not read: the cells are computed again.
    with s.db:
        s.db.execute("UPDATE cell_cache SET rows_json = '[[\"x\"]]'")
    assert _cells(s, cid) == computed
    with s.db:  # a damaged one is a StoreError, as any damaged column is
        s.db.execute(
            """UPDATE cell_cache SET rows_json = '{"format": 2, "rows": [[{"d": "!"}]]}'"""
        )
    with pytest.raises(StoreError):
        _cells(s, cid)


@given(
    st.lists(st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False))),
    st.lists(st.one_of(st.integers(), st.text(), st.none())),
)
def test_a_kept_column_of_numbers_reads_back_as_it_was_and_other_values_are_kept_as_they_are(
    numbers: list[float | None], other: list[object]
) -> None:
    packed = cache._pack(numbers)
    assert isinstance(packed, dict)  # packed as bytes, with the places of the missing
    assert cache._unpacked(json.loads(json.dumps(packed))) == numbers
    assert [type(v) for v in cache._unpacked(packed)] == [type(v) for v in numbers]
    if not all(v is None for v in other):  # an int is not widened to a float
        assert cache._pack(other) is other
    if numbers:  # a kept number that is not finite is a crafted cache: damaged
        with pytest.raises(ValueError):
            cache._unpacked(cache._pack([*numbers, float("inf")]))


def test_a_metric_tally_is_kept_until_the_campaign_gains_a_run(tmp_path: Path) -> None:
    s, cid = new(tmp_path / "m.db", n=4)
    allocs = {v.spec.name: v for v in fake_allocs("a", "b")}
    plan = specs(4)
    for spec in plan[:3]:
        result = RunResult(RunStatus.OK, wall_s=1.0, metrics={"noise_reruns": 2.0})
        s.record(cid, spec, result, allocs[spec.allocator])
    s.set_status(cid, "interrupted")
    assert s.metric_tally(cid, "noise_reruns") == (3, 3, 6.0)
    assert s.metric_tally(cid, "noise_reruns") == (3, 3, 6.0)  # kept
    result = RunResult(RunStatus.OK, wall_s=1.0)
    s.record(cid, plan[3], result, allocs[plan[3].allocator])
    # the new run counts among the runs, not among those re-run: never "7 of 4"
    assert s.metric_tally(cid, "noise_reruns") == (4, 3, 6.0)
