"""Campaigns on a Dask cluster: a LocalCluster of two worker processes."""

from __future__ import annotations

import dataclasses
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from allocmark import api
from allocmark.model import RunStatus
from allocmark.store import Store
from tests.conftest import readable

pytestmark = pytest.mark.integration

SMALL = ("count=3000", "rounds=2")


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        resources={"bench": 1},
    ) as c:
        yield c


def _request(db: Path, cluster: LocalCluster, blocks: int = 2) -> api.Request:
    return api.Request(
        workloads=("churn",),
        params=SMALL,
        allocators=("glibc", "glibc:arena2"),
        min_blocks=blocks,
        max_blocks=blocks,
        db=db,
        dispatcher="dask",
        scheduler=cluster.scheduler_address,
    )


def _stored(db: Path) -> list[tuple[object, ...]]:
    """What a campaign stored, run by run, without where and when it ran."""
    with sqlite3.connect(db) as con:
        return sorted(
            con.execute(
                "SELECT seq, allocator, workload, params_json, rep, role, status, malloc_object, "
                "library, sha256, json_extract(labels_json, '$.verified_by') FROM runs"
            ).fetchall()
        )


def test_dask_campaign_stores_what_the_local_executor_stores(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    req = _request(tmp_path / "dask.db", cluster)
    api.run_to_end(req)
    here_req = dataclasses.replace(
        req, dispatcher="local", scheduler=None, db=tmp_path / "local.db"
    )
    api.run_to_end(here_req)
    on_cluster, here = _stored(tmp_path / "dask.db"), _stored(tmp_path / "local.db")
    assert on_cluster == here
    assert {row[6] for row in on_cluster} == {RunStatus.OK.value}
    assert all(row[7] for row in on_cluster if row[5] == "measure")  # verified: what served malloc
    store = Store(tmp_path / "dask.db", create=False)
    hosts = {r.labels.get("host") for r in store.runs(store.campaign().id)}
    assert hosts == {os.uname().nodename}  # every run says where it ran
    assert len(store.calibrations(store.campaign().id)) == 2  # one per block, on the worker


def test_cli_runs_on_the_cluster(cluster: LocalCluster, tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "allocmark",
            "run",
            "-w",
            "churn",
            "-p",
            "count=3000",
            "-p",
            "rounds=1",
            "-a",
            "glibc,glibc:arena2",
            "-n",
            "1",
            "--max-blocks",
            "1",
            "--db",
            str(db),
            "--dispatcher",
            "dask",
            "--scheduler",
            cluster.scheduler_address,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "churn" in done.stdout and "Traceback" not in done.stderr


def test_a_worker_killed_mid_run_loses_no_run(cluster: LocalCluster, tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    req = dataclasses.replace(_request(db, cluster, blocks=6), params=("count=20000", "rounds=4"))
    with Client(cluster.scheduler_address) as client:
        workers = set(client.run(os.getpid).values())
    killed: list[int] = []
    killer = threading.Thread(target=_kill_a_benchmarking_worker, args=(workers, killed))
    killer.start()
    try:
        cid = api.run_to_end(req)
    finally:
        killer.join()
    assert killed, "no worker was caught running a benchmark"
    store = Store(db, create=False)
    runs = store.runs(cid)
    assert sorted(r.seq for r in runs) == [s.seq for s in store.run_specs(cid)]  # each once
    assert {r.status for r in runs} == {RunStatus.OK}


def _kill_a_benchmarking_worker(workers: set[int], killed: list[int], wait_s: float = 60) -> None:
    """SIGKILLs the first worker seen with a benchmark (am_run) running under it."""
    end = time.monotonic() + wait_s
    while time.monotonic() < end and not killed:
        for pid in _am_run_parents() & workers:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
            return
        time.sleep(0.005)


def _am_run_parents() -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        if name == "am_run":
            out.add(int(stat[stat.rindex(")") + 2 :].split()[1]))
    return out


def test_a_worker_runs_the_coordinators_runs_with_its_own_paths() -> None:
    from allocmark.dispatchers import dask
    from allocmark.model import AllocatorSpec, RunSpec, Status, Verified

    spec = AllocatorSpec(name="je", paths=("/usr/lib/libjemalloc.so.2",))
    here = Verified(
        spec,
        Status.OK,
        library="/opt/lib/libjemalloc.so.2",
        served=(("malloc", "/opt/lib/libjemalloc.so.2"),),
    )
    origin = dask._Origin("/coord/allocmark", (("je", spec, "/usr/lib/libjemalloc.so.2"),))
    run = RunSpec(
        seq=3,
        allocator="je",
        workload="churn",
        params=(),
        rep=0,
        argv=("/coord/allocmark/_bin/am_churn", "--count", "5"),
        env=(("LD_PRELOAD", "/usr/lib/libjemalloc.so.2"), ("AM_X", "1")),
        timeout=5,
        expect_malloc="/usr/lib/libjemalloc.so.2",
    )
    moved = dask._translated(run, origin, "/worker/allocmark", here)
    assert moved.argv == ("/worker/allocmark/_bin/am_churn", "--count", "5")
    assert dict(moved.env) == {"LD_PRELOAD": here.preload, "AM_X": "1"}
    assert moved.expect_malloc == here.malloc_object


def test_a_bisect_runs_its_steps_on_the_cluster(
    cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """bisect dispatches its steps' runs as `run` does: with --dispatcher dask, every
    block runs on a worker (the scheduler's task stream has them), and the planted
    commit is found as it is here."""
    from distributed import get_task_stream

    from allocmark.model import GitBuild
    from tests.allocators import tinyrepo

    place = readable(tmp_path_factory.mktemp("dask-git"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ALLOCMARK_CACHE", str(place / "cache"))
        repo = tinyrepo.make(place / "tiny")
        (place / "db").mkdir(mode=0o755)
        req = api.Request(
            workloads=("samethread",),
            params=("count=20000", "rounds=2"),
            db=place / "db" / "b.db",
            dispatcher="dask",
            scheduler=cluster.scheduler_address,
        )
        how = GitBuild(tinyrepo.BUILD, tinyrepo.OUTPUT)
        with Client(cluster.scheduler_address) as client, get_task_stream(client) as stream:
            events = list(api.bisect(str(repo.path), "v1.0", "v2.0", how, req, "time", 0.001))
    ended = events[-1]
    assert isinstance(ended, api.BisectEnded), ended
    assert ended.first == repo.describe(tinyrepo.SLOW), ended.text
    ran = [t for t in stream.data if str(t["key"]).startswith("_on_worker")]
    steps = [e for e in events if isinstance(e, api.BisectStep) and e.word != "skipped"]
    assert len(ran) >= sum(e.blocks for e in steps)  # each block a task on a worker


def test_a_worker_runs_each_campaign_as_an_identity_of_its_own(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No two campaigns share an identity on a worker either: each dispatcher names
    its campaign, and a worker that gets a batch of another campaign sweeps and lets go
    the identity it held (identity.fresh) before it runs any of it."""
    from allocmark.dispatchers import dask

    tokens = set()
    for _ in range(2):
        d = dask.Dask(cluster.scheduler_address, [])
        tokens.add(d.origin.campaign)
        d.close()
    assert len(tokens) == 2 and "" not in tokens
    fresh: list[str] = []
    monkeypatch.setattr(dask.identity, "fresh", lambda: fresh.append("fresh"))
    monkeypatch.setattr(dask, "_CAMPAIGN", [])
    for campaign in ("a", "a", "b", "b", "a"):
        dask._own_identity(campaign)
    assert len(fresh) == 3  # a, then b, then a again: a campaign's batches share one


def test_a_campaign_s_identity_is_let_go_on_the_workers_when_it_ends(
    cluster: LocalCluster,
) -> None:
    """A worker held the ended campaign's identity until another campaign's batch came:
    closing the dispatcher now sweeps it and lets it go on every worker holding it,
    and a process the campaign's code left behind there ends with it."""
    from allocmark.dispatchers import dask

    def held() -> tuple[list[str], int | None]:
        from allocmark.dispatchers import dask
        from allocmark.native import identity

        return list(dask._CAMPAIGN), identity._held[0].who.uid if identity._held else None

    def left_behind(campaign: str) -> int:
        """As a batch of `campaign` would: its identity claimed, a process left under it."""
        from allocmark.dispatchers import dask
        from allocmark.native import identity

        dask._own_identity(campaign)
        who = identity.current()
        assert who is not None
        return subprocess.Popen(["sleep", "600"], user=who.uid, group=who.gid).pid

    d = dask.Dask(cluster.scheduler_address, [])
    other = dask.Dask(cluster.scheduler_address, [])
    with Client(cluster.scheduler_address) as c:
        c.wait_for_workers(2)  # a test before may have killed one: its nanny restarts it
        workers = list(c.scheduler_info()["workers"])
        pid = c.run(left_behind, d.origin.campaign, workers=workers[:1])[workers[0]]
        c.run(left_behind, other.origin.campaign, workers=workers[1:])
        before = c.run(held)
        assert before[workers[0]][0] == [d.origin.campaign] and before[workers[0]][1]
        d.close()
        after = c.run(held)
        assert after[workers[0]] == ([], None)  # swept and let go
        assert after[workers[1]] == before[workers[1]]  # another campaign's: kept
        other.close()
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    """A process that is there and not a zombie (a worker reaps its children late)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
