"""The why pass (run/whypass.py): profiled blocks of the decided cells, after the
measured ones, stored apart from every verdict."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from allocmark.answer import stored
from allocmark.run import whypass
from allocmark.store import Store
from tests.conftest import cli
from tests.run.test_first_minutes import budgeted

SAMETHREAD = ("-w", "samethread", "-p", "count=20000", "-p", "rounds=4", "-p", "threads=1")


def _roles(db: Path) -> dict[str, tuple[int, int]]:
    rows = (
        sqlite3.connect(db)
        .execute("SELECT role, count(*), sum(status = 'ok') FROM runs GROUP BY role")
        .fetchall()
    )
    return {role: (n, ok) for role, n, ok in rows}


@pytest.mark.integration
def test_why_runs_profiled_blocks_of_the_decided_cells_apart_from_the_verdicts(
    tmp_path: Path,
) -> None:
    db = tmp_path / "why.db"
    run = cli(
        "run",
        *SAMETHREAD,
        "-a",
        "glibc,mimalloc",
        "-n",
        "6",
        "--max-blocks",
        "6",
        "--why",
        "--db",
        str(db),
    )
    assert run.returncode == 0, run.stderr
    out = " ".join((run.stdout + run.stderr).split())  # as wrapped to the terminal's width
    assert "then a why pass (4 profiled blocks of the rows with a decided difference)" in out
    assert "why pass: 4 profiled blocks of 1 row" in out
    assert _roles(db)["why"] == (8, 8) and _roles(db)["measure"] == (12, 12)
    store = Store(db, create=False)
    assert (store.campaign_plan(1).why_pass or "").startswith("why pass: 4 profiled blocks")
    comp = stored.comparison(store, 1)
    (row,) = comp.rows
    assert all(len(c.values) == 6 for c in row.cells["time_s"].values())  # verdicts: measured only
    whys = json.loads(cli("report", "--db", str(db), "--format", "json").stdout)["why"]
    checked = {s for w in whys for s in w["checked"]}
    assert "prof_inside_s" in checked or not any(w["axis"] == "time" for w in whys)
    assert "prof_slack_kib" in checked or not any(w["axis"] == "rss" for w in whys)
    assert whys, "mimalloc's time and peak RSS differ from glibc's plainly here"


@pytest.mark.integration
def test_auto_skips_a_pass_that_costs_more_than_15_percent_and_no_why_runs_none(
    tmp_path: Path,
) -> None:
    auto, off = tmp_path / "auto.db", tmp_path / "off.db"
    run = cli(
        "run",
        *SAMETHREAD,
        "-a",
        "glibc,mimalloc",
        "-n",
        "6",
        "--max-blocks",
        "6",
        "--db",
        str(auto),
    )
    assert run.returncode == 0, run.stderr
    said = " ".join((run.stdout + run.stderr).split())
    assert "if they add at most 15 % to the time)" in said
    assert "no why pass: 4 profiled blocks of 1 row, about" in said and "(--why runs it)" in said
    assert "why" not in _roles(auto)
    run = cli(
        "run",
        *SAMETHREAD,
        "-a",
        "glibc,mimalloc",
        "-n",
        "6",
        "--max-blocks",
        "6",
        "--no-why",
        "--db",
        str(off),
    )
    assert run.returncode == 0 and "why pass" not in run.stdout + run.stderr
    assert "why" not in _roles(off) and Store(off, create=False).campaign_plan(1).why_pass is None


def test_the_pass_counts_the_decided_cells_as_the_report_will(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planned once the measured blocks are done: with the final looks, which may
    decide what the looks before them did not (a ruby campaign said "no difference was
    decided", then reported two)."""
    asked: list[bool | None] = []
    real = stored.comparison

    def comparison(store: Store, cid: int, *args: object, **kw: object) -> object:
        asked.append(kw.get("finished"))  # type: ignore[arg-type]
        return real(store, cid, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(whypass.stored, "comparison", comparison)
    s, cid = budgeted(tmp_path, 60.0, stretch=False)
    plan = s.campaign_plan(cid)
    whypass.plan(s, cid, dataclasses.replace(plan, why="on"), {})
    assert asked == [True]
