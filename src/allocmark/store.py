"""SQLite store: every run is written in its own transaction the moment it ends."""

from __future__ import annotations

import array
import dataclasses
import json
import os
import sqlite3
import statistics
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from allocmark import interrupts, owner, seal
from allocmark.errors import StoreError
from allocmark.machine import Machine
from allocmark.model import (
    AllocatorSpec,
    Campaign,
    CellRuns,
    Params,
    RssSeries,
    RunResult,
    RunSpec,
    RunStatus,
    Status,
    StoredRun,
    Verified,
    Workload,
)
from allocmark.schemas import stored

SCHEMA_VERSION = 11
# Run columns a cell can carry; rep names the block a run belongs to (pairing).
CELL_COLUMNS = ("wall_s", "user_s", "sys_s", "maxrss_kib", "rep")

# Version 1 as first released; later versions are reached through _MIGRATIONS,
# for new databases too, so that every database goes the same way.
_SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE machines (
  id INTEGER PRIMARY KEY, hostname TEXT, cpu_model TEXT, cores INTEGER, kernel TEXT,
  glibc TEXT, allocmark_version TEXT, python TEXT, facts_json TEXT NOT NULL);
CREATE TABLE campaigns (
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, created REAL NOT NULL, finished REAL,
  status TEXT NOT NULL, seed INTEGER, baseline TEXT, argv_json TEXT,
  machine_id INTEGER REFERENCES machines(id));
CREATE TABLE allocators (
  campaign_id INTEGER NOT NULL REFERENCES campaigns(id), name TEXT NOT NULL,
  status TEXT NOT NULL, library TEXT, sha256 TEXT, version TEXT, lacks_json TEXT,
  env_json TEXT, served_json TEXT, spec_json TEXT NOT NULL, reason TEXT,
  PRIMARY KEY (campaign_id, name));
CREATE TABLE workloads (
  campaign_id INTEGER NOT NULL REFERENCES campaigns(id), name TEXT NOT NULL,
  kind TEXT NOT NULL, description TEXT, argv_json TEXT NOT NULL, params_json TEXT,
  PRIMARY KEY (campaign_id, name));
CREATE TABLE plan (
  campaign_id INTEGER NOT NULL REFERENCES campaigns(id), seq INTEGER NOT NULL,
  allocator TEXT NOT NULL, workload TEXT NOT NULL, params_json TEXT NOT NULL,
  rep INTEGER NOT NULL, argv_json TEXT NOT NULL, env_json TEXT NOT NULL,
  timeout REAL NOT NULL, expect_malloc TEXT, result_fd INTEGER NOT NULL,
  PRIMARY KEY (campaign_id, seq));
CREATE TABLE runs (
  id INTEGER PRIMARY KEY, campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
  seq INTEGER NOT NULL, allocator TEXT NOT NULL, workload TEXT NOT NULL,
  params_json TEXT NOT NULL, rep INTEGER NOT NULL, status TEXT NOT NULL,
  exit_code INTEGER, signal INTEGER, wall_s REAL, user_s REAL, sys_s REAL,
  maxrss_kib INTEGER, minflt INTEGER, majflt INTEGER, nvcsw INTEGER, nivcsw INTEGER,
  started REAL, detail TEXT, malloc_object TEXT, library TEXT, sha256 TEXT, version TEXT,
  partial INTEGER NOT NULL, machine_id INTEGER REFERENCES machines(id),
  UNIQUE (campaign_id, seq));
CREATE TABLE metrics (
  run_id INTEGER NOT NULL REFERENCES runs(id), name TEXT NOT NULL, value REAL NOT NULL,
  PRIMARY KEY (run_id, name));
"""

# Migrations from version N to N+1, applied in order.
_MIGRATIONS: dict[int, str] = {
    # 2: baseline runs (a workload doing nothing, for the overhead ratio) and
    # the text fields of a metrics record.
    1: """
ALTER TABLE plan ADD COLUMN role TEXT NOT NULL DEFAULT 'measure';
ALTER TABLE runs ADD COLUMN role TEXT NOT NULL DEFAULT 'measure';
ALTER TABLE runs ADD COLUMN labels_json TEXT NOT NULL DEFAULT '{}';
""",
    # 3: campaign settings (adaptive repetitions: min/max runs, target interval).
    2: """
ALTER TABLE campaigns ADD COLUMN settings_json TEXT NOT NULL DEFAULT '{}';
""",
    # 4: metrics clustered by (run, name): a report's lookups take one b-tree search.
    3: """
CREATE TABLE metrics_v4 (
  run_id INTEGER NOT NULL REFERENCES runs(id), name TEXT NOT NULL, value REAL NOT NULL,
  PRIMARY KEY (run_id, name)) WITHOUT ROWID;
INSERT INTO metrics_v4 SELECT run_id, name, value FROM metrics;
DROP TABLE metrics;
ALTER TABLE metrics_v4 RENAME TO metrics;
""",
    # 5: applications: output parsers, a service's client, steps (JSON of AppRun).
    4: """
ALTER TABLE plan ADD COLUMN app_json TEXT NOT NULL DEFAULT '{}';
""",
    # 6: profiles (allocmark profile, run --profile): the shim's summed record per run.
    5: """
ALTER TABLE plan ADD COLUMN profile INTEGER NOT NULL DEFAULT 0;
CREATE TABLE profiles (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id), profile_json TEXT NOT NULL);
""",
    # 7: the noise sentinel's calibration loop between blocks, and the time a
    # campaign has spent running (its budget survives a resume).
    6: """
CREATE TABLE calibrations (
  campaign_id INTEGER NOT NULL REFERENCES campaigns(id), after_seq INTEGER NOT NULL,
  at REAL NOT NULL, seconds REAL NOT NULL);
ALTER TABLE campaigns ADD COLUMN spent_s REAL NOT NULL DEFAULT 0;
""",
    # 8: what `cells` read for a report, kept until the campaign has another run:
    # a report over 100,000 runs spent half its time in that one query.
    7: """
CREATE TABLE cell_cache (
  campaign_id INTEGER NOT NULL REFERENCES campaigns(id), query TEXT NOT NULL,
  fingerprint TEXT NOT NULL, rows_json TEXT NOT NULL, PRIMARY KEY (campaign_id, query));
""",
    # 9: the process running a campaign (owner.py), so that a second one cannot;
    # a run's memory limit (bytes, 0: none).
    8: """
ALTER TABLE campaigns ADD COLUMN owner_json TEXT;
ALTER TABLE plan ADD COLUMN memory_limit INTEGER NOT NULL DEFAULT 0;
""",
    # 10: a run's RSS over time, sampled by the launcher (little-endian uint32
    # arrays: at most 512 points of time in ms and RSS in KiB).
    9: """
CREATE TABLE rss_series (
  run_id INTEGER PRIMARY KEY REFERENCES runs(id), period_us INTEGER NOT NULL,
  stride INTEGER NOT NULL, t_ms BLOB NOT NULL, kib BLOB NOT NULL);
""",
    # 11: each planned run's signature (seal.py): a resume runs without a question only
    # what verifies under this user's key.
    10: """
ALTER TABLE plan ADD COLUMN mac TEXT;
""",
}


def _json_or_none(row: tuple[Any, ...] | None) -> object:
    try:
        return json.loads(row[0]) if row and row[0] else None
    except ValueError:
        return None


def _script(db: sqlite3.Connection, script: str) -> None:
    """Run a schema script statement by statement, inside the caller's transaction
    (executescript would commit it first). The scripts hold no ';' in literals."""
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


class Store:
    """A results database. Opening never changes results already stored."""

    def __init__(self, path: Path, create: bool = True) -> None:
        self.path = path
        if not path.exists() and not create:
            raise StoreError(f"{path}: no such results database; create one with `allocmark run`")
        if path.is_dir():
            raise StoreError(f"{path}: is a directory; give the database file, e.g. {path}/a.db")
        if path.exists() and not path.is_file():
            raise StoreError(f"{path}: not a regular file, so not a results database")
        if path.exists() and path.stat().st_size == 0 and not create:
            raise StoreError(f"{path}: an empty file, not a results database (left as it is)")
        # Reports must read a database the user cannot write (an archive, a read-only
        # directory, where WAL cannot create its -shm file).
        self.readonly = not create and not (
            os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)
        )
        if not self.readonly:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = self._connect()
            self.db.execute("PRAGMA foreign_keys = ON")
            self._check_schema()
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{path}: not a usable SQLite results database ({e})") from None

    def _connect(self) -> sqlite3.Connection:
        if not self.readonly:
            return sqlite3.connect(self.path, timeout=30)
        uri = f"file:{urllib.parse.quote(str(self.path.absolute()))}"
        db = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=30)
        try:
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.OperationalError:  # WAL without a -shm it may create: read as is
            db.close()
            return sqlite3.connect(f"{uri}?immutable=1", uri=True, timeout=30)

    def close(self) -> None:
        self.db.close()

    # -- schema ---------------------------------------------------------------
    def _check_schema(self) -> None:
        """Create or migrate the schema in one write transaction that reads the
        version inside it: two processes opening a new database at once must not
        both create it, nor one migrate what the other half created."""
        if self._schema_state() == SCHEMA_VERSION:
            return  # the common case takes no write lock (reports on a busy DB)
        if self.readonly:
            raise StoreError(
                f"{self.path}: written by an older allocmark, not writable here; open it "
                "once where it can be written to upgrade it"
            )
        level = self.db.isolation_level
        self.db.isolation_level = None  # BEGIN/COMMIT below are ours alone
        # Ctrl-C waits the few ms until the schema is whole: interrupted inside a
        # statement, SQLite may roll back by itself, and our ROLLBACK would then fail
        # and report a sound (empty) database as unusable.
        with interrupts.held():
            try:
                self.db.execute("BEGIN IMMEDIATE")
                try:
                    version = self._schema_state()
                    if version == 0:
                        _script(self.db, _SCHEMA_V1)
                        self._set_version(1)
                        version = 1
                    for v in range(version, SCHEMA_VERSION):
                        _script(self.db, _MIGRATIONS[v])
                        self._set_version(v + 1)
                    self.db.execute("COMMIT")
                except BaseException:
                    if self.db.in_transaction:
                        self.db.execute("ROLLBACK")
                    raise
            finally:
                self.db.isolation_level = level
        self._use_wal()

    def _use_wal(self) -> None:
        """WAL (readers never wait for the writer) is set once, after creation: it
        cannot be switched inside a transaction, and the switch gives up at once,
        without the busy timeout, while another process holds the file."""
        deadline = time.monotonic() + 30
        while self.db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            try:
                self.db.execute("PRAGMA journal_mode = WAL")
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def _schema_state(self) -> int:
        """The schema version; 0 for an empty file. Refuses foreign and newer files."""
        tables = {
            r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if not tables:
            return 0
        if "meta" not in tables:
            raise StoreError(f"{self.path}: an SQLite file, but not an allocmark database")
        version = self._schema_version()
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{self.path}: written by a newer allocmark (schema {version}; this one "
                f"reads up to {SCHEMA_VERSION}); upgrade allocmark to read it"
            )
        return version

    def _schema_version(self) -> int:
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        if row is None or not str(row[0]).isdigit():
            raise StoreError(f"{self.path}: allocmark database without a schema version")
        return int(row[0])

    def _set_version(self, v: int) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(v),))

    # -- writing --------------------------------------------------------------
    def new_campaign(
        self,
        name: str,
        seed: int,
        machine: Machine,
        argv: Sequence[str],
        verified: Sequence[Verified],
        workloads: Iterable[Workload],
        plan: Iterable[RunSpec],
        baseline: str | None,
        settings: dict[str, Any] | None = None,
    ) -> int:
        """Campaign, machine, allocators, workloads and the whole plan in one transaction."""
        with self.db:
            mid = self._machine(machine)
            cur = self.db.execute(
                "INSERT INTO campaigns (name, created, status, seed, baseline, argv_json, "
                "machine_id, settings_json, owner_json) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                (
                    name,
                    time.time(),
                    seed,
                    baseline,
                    json.dumps(list(argv)),
                    mid,
                    json.dumps(settings or {}),
                    json.dumps(owner.me().as_json()),
                ),
            )
            cid = int(cur.lastrowid or 0)
            self.db.executemany(
                "INSERT INTO allocators VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [_allocator_row(cid, v) for v in verified],
            )
            self.db.executemany(
                "INSERT INTO workloads VALUES (?,?,?,?,?,?)",
                [_workload_row(cid, w) for w in workloads],
            )
            self._insert_plan(cid, plan)
        return cid

    def _insert_plan(self, cid: int, plan: Iterable[RunSpec]) -> None:
        """Each run signed by this user as it is planned (seal.py)."""
        secret, plan_id = seal.key(), str(self.settings(cid).get("plan_id", ""))
        self.db.executemany(
            "INSERT INTO plan (campaign_id, seq, allocator, workload, params_json, rep, "
            "argv_json, env_json, timeout, expect_malloc, result_fd, role, app_json, profile, "
            "memory_limit, mac) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            # one at a time: plans can be large
            ((*_plan_row(cid, s), seal.sign(secret, plan_id, s)) for s in plan),
        )

    def signed_plan(self, cid: int) -> list[tuple[RunSpec, str | None]]:
        """The whole plan, done or not, in order, each run with its stored signature."""
        rows = self.db.execute(f"SELECT {_PLAN_COLUMNS}, mac FROM plan WHERE campaign_id=? "
                               "ORDER BY seq", (cid,))  # fmt: skip
        return [(_spec_from_row(r), r[-1]) for r in rows]

    def unsigned(self, cid: int) -> list[RunSpec]:
        """The planned runs whose signature does not verify under this user's key."""
        return seal.unsigned(self.signed_plan(cid), self.settings(cid).get("plan_id"))

    def command_argv(self, cid: int, name: str) -> tuple[str, ...] | None:
        """The user's own command of a `try` campaign (workload `name`), as stored."""
        row = self.db.execute(
            "SELECT argv_json FROM workloads WHERE campaign_id=? AND name=? AND kind='command'",
            (cid, name),
        ).fetchone()
        argv = _loads(row[0]) if row else None
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            return None
        return tuple(argv)

    def extend_plan(self, cid: int, more: Sequence[RunSpec]) -> None:
        """Add runs to a campaign's plan (adaptive repetitions), in one transaction."""
        with self.db:
            self._insert_plan(cid, more)

    def _machine(self, m: Machine) -> int:
        facts = json.dumps(dataclasses.asdict(m), sort_keys=True)
        row = self.db.execute("SELECT id FROM machines WHERE facts_json = ?", (facts,)).fetchone()
        if row:
            return int(row[0])
        cur = self.db.execute(
            "INSERT INTO machines (hostname, cpu_model, cores, kernel, glibc, "
            "allocmark_version, python, facts_json) VALUES (?,?,?,?,?,?,?,?)",
            (
                m.hostname,
                m.cpu_model,
                m.cores,
                m.kernel,
                m.glibc,
                m.allocmark_version,
                m.python,
                facts,
            ),
        )
        return int(cur.lastrowid or 0)

    def record(
        self,
        cid: int,
        spec: RunSpec,
        result: RunResult,
        alloc: Verified,
        machine: Machine | None = None,
    ) -> None:
        """Save one finished run and its metrics atomically; `machine`: where it ran,
        if not on the campaign's own machine (a cluster worker)."""
        with self.db:
            mid = (
                (self._machine(machine),)
                if machine
                else self.db.execute(
                    "SELECT machine_id FROM campaigns WHERE id=?", (cid,)
                ).fetchone()
            )
            cur = self.db.execute(
                "INSERT INTO runs (campaign_id, seq, allocator, workload, params_json, rep, "
                "status, exit_code, signal, wall_s, user_s, sys_s, maxrss_kib, minflt, majflt, "
                "nvcsw, nivcsw, started, detail, malloc_object, library, sha256, version, "
                "partial, machine_id, role, labels_json) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    cid,
                    spec.seq,
                    spec.allocator,
                    spec.workload,
                    json.dumps(spec.params),
                    spec.rep,
                    result.status.value,
                    result.exit_code,
                    result.signal,
                    result.wall_s,
                    result.user_s,
                    result.sys_s,
                    result.maxrss_kib,
                    result.minflt,
                    result.majflt,
                    result.nvcsw,
                    result.nivcsw,
                    result.started,
                    result.detail,
                    result.malloc_object,
                    alloc.library,
                    alloc.sha256,
                    alloc.version,
                    int(alloc.status is Status.PARTIAL),
                    mid[0],
                    spec.role,
                    json.dumps(result.labels),
                ),
            )
            self.db.executemany(
                "INSERT INTO metrics VALUES (?,?,?)",
                [(cur.lastrowid, k, v) for k, v in result.metrics.items()],
            )
            if result.profile is not None:
                self.db.execute(
                    "INSERT INTO profiles VALUES (?,?)",
                    (cur.lastrowid, json.dumps(result.profile)),
                )
            if result.rss is not None:
                r = result.rss
                self.db.execute(
                    "INSERT INTO rss_series VALUES (?,?,?,?,?)",
                    (cur.lastrowid, r.period_us, r.stride, _packed(r.t_ms), _packed(r.kib)),
                )

    def profiles(self, cid: int) -> list[tuple[str, str, Params, dict[str, Any]]]:
        """(allocator, workload, params, profile) of every profiled run, in run order."""
        rows = self.db.execute(
            "SELECT r.allocator, r.workload, r.params_json, p.profile_json FROM profiles p "
            "JOIN runs r ON r.id = p.run_id WHERE r.campaign_id=? ORDER BY r.seq",
            (cid,),
        ).fetchall()
        return [(a, w, _params(pj), _loads(prof)) for a, w, pj, prof in rows]

    def rss_series(self, cid: int) -> list[tuple[str, str, Params, RssSeries]]:
        """(allocator, workload, params, series) of every OK measured run that has one."""
        rows = self.db.execute(
            "SELECT r.allocator, r.workload, r.params_json, s.period_us, s.stride, s.t_ms, s.kib "
            "FROM rss_series s JOIN runs r ON r.id = s.run_id "
            "WHERE r.campaign_id=? AND r.status='ok' AND r.role='measure' ORDER BY r.seq",
            (cid,),
        ).fetchall()
        found = []
        for a, w, pj, period, stride, t, kib in rows:
            series = RssSeries(_unpacked(t), _unpacked(kib), int(period), int(stride))
            if len(series.t_ms) != len(series.kib):
                raise StoreError(f"damaged RSS series of a {a} run of {w}: {self.path}")
            found.append((a, w, _params(pj), series))
        return found

    def has_workload(self, cid: int, workload: str) -> bool:
        """Did the campaign plan any run of `workload`? (One indexed lookup.)"""
        row = self.db.execute(
            "SELECT 1 FROM workloads WHERE campaign_id=? AND name=?", (cid, workload)
        ).fetchone()
        return row is not None

    def phased(self, cid: int) -> list[tuple[str, str, Params, dict[str, float]]]:
        """(allocator, workload, params, phase metrics) of every OK measured run of a
        phased workload (one that reports "phases"), in run order."""
        rows = self._kept_rows(cid, '["phased"]', lambda: self.db.execute(
            "SELECT r.id, r.allocator, r.workload, r.params_json, m.name, m.value "
            "FROM runs r JOIN metrics m ON m.run_id = r.id "
            "WHERE r.campaign_id=? AND r.status='ok' AND r.role='measure' "
            "AND r.id IN (SELECT run_id FROM metrics WHERE name='phases') "
            "AND m.name LIKE 'phase\\_%' ESCAPE '\\' ORDER BY r.seq",
            (cid,),
        ).fetchall())  # fmt: skip
        runs: dict[int, tuple[str, str, Params, dict[str, float]]] = {}
        for rid, a, w, pj, name, value in rows:
            runs.setdefault(rid, (a, w, _params(pj), {}))[3][name] = value
        return list(runs.values())

    def alloc_stats(
        self, cid: int
    ) -> list[tuple[str, str, Params, str, tuple[str, ...], dict[str, list[float]]]]:
        """Per (allocator, workload, params, role) of OK measured or verification runs
        (not the baseline runs, which allocate nothing) that have the allocator's
        statistics: their sources and {alloc_* metric: the runs' values}."""
        # Grouped by SQLite, and kept like the cells: a campaign of native runs has
        # statistics in every run.
        rows = self._kept_rows(cid, '["alloc_stats"]', lambda: self._alloc_stat_rows(cid))
        cells: dict[tuple[str, str, str, str], tuple[set[str], dict[str, list[float]]]] = {}
        for a, w, pj, role, name, values, low, high in rows:
            sources, metrics = cells.setdefault((a, w, pj, role), (set(), {}))
            sources |= {str(low or "?"), str(high or "?")}
            metrics[name] = [float(v) for v in str(values).split(",")]
        return [(a, w, _params(pj), role, tuple(sorted(src)), m)
                for (a, w, pj, role), (src, m) in cells.items()
                if "alloc_rss_kib" in m]  # fmt: skip

    def _alloc_stat_rows(self, cid: int) -> list[Any]:
        return self.db.execute(
            "SELECT r.allocator, r.workload, r.params_json, r.role, m.name, "
            "group_concat(m.value), min(json_extract(r.labels_json, '$.alloc_stats')), "
            "max(json_extract(r.labels_json, '$.alloc_stats')) "
            "FROM runs r JOIN metrics m ON m.run_id = r.id "
            "WHERE r.campaign_id=? AND r.status='ok' AND r.role IN ('measure', 'verify') "
            "AND m.name LIKE 'alloc\\_%' ESCAPE '\\' "
            "GROUP BY r.allocator, r.workload, r.params_json, r.role, m.name",
            (cid,),
        ).fetchall()

    def add_spent(self, cid: int, seconds: float) -> None:
        """Count time spent running the campaign against its budget."""
        with self.db:
            self.db.execute("UPDATE campaigns SET spent_s = spent_s + ? WHERE id=?", (seconds, cid))

    def spent(self, cid: int) -> float:
        row = self.db.execute("SELECT spent_s FROM campaigns WHERE id=?", (cid,)).fetchone()
        return float(row[0]) if row else 0.0

    def add_calibration(self, cid: int, after_seq: int, seconds: float) -> None:
        """The calibration loop's time, run between blocks (the noise sentinel)."""
        with self.db:
            self.db.execute(
                "INSERT INTO calibrations VALUES (?,?,?,?)", (cid, after_seq, time.time(), seconds)
            )

    def calibrations(self, cid: int) -> list[float]:
        rows = self.db.execute(
            "SELECT seconds FROM calibrations WHERE campaign_id=? ORDER BY at", (cid,)
        )
        return [float(r[0]) for r in rows]

    def set_status(self, cid: int, status: str) -> None:
        """A finished or interrupted campaign has no owner any more."""
        with self.db:
            self.db.execute(
                "UPDATE campaigns SET status=?, finished=?, owner_json=NULL WHERE id=?",
                (status, time.time() if status == "finished" else None, cid),
            )

    def claim(self, cid: int, take_over: bool = False) -> None:
        """Make this process the campaign's owner, unless another live one is."""
        me = owner.me()
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")  # read and write the owner atomically
            row = self.db.execute("SELECT owner_json FROM campaigns WHERE id=?", (cid,))
            found = owner.from_json(_json_or_none(row.fetchone()))
            if found and found != me and not take_over:
                self._refuse(cid, found)
            self.db.execute(
                "UPDATE campaigns SET owner_json=?, status='running' WHERE id=?",
                (json.dumps(me.as_json()), cid),
            )

    def _refuse(self, cid: int, found: owner.Owner) -> None:
        state = owner.alive(found)
        if state is False:
            return  # its owner died (killed, machine crashed): take it over
        where = f"`allocmark run --resume --db {self.path}`"
        if state is None:
            raise StoreError(
                f"{self.path}: campaign {cid} is owned by {found.describe()}, which this "
                f"machine cannot check; if it no longer runs, take it over with {where[:-1]} "
                "--take-over`"
            )
        raise StoreError(
            f"{self.path}: campaign {cid} is being run by {found.describe()}; wait for it "
            f"to end, or stop it (kill {found.pid}) and resume with {where}"
        )

    # -- reading --------------------------------------------------------------
    def campaigns(self) -> list[Campaign]:
        rows = self.db.execute(
            "SELECT c.id, c.name, c.status, c.created, c.baseline, "
            "(SELECT COUNT(*) FROM plan p WHERE p.campaign_id = c.id), "
            "(SELECT COUNT(*) FROM runs r WHERE r.campaign_id = c.id) "
            "FROM campaigns c ORDER BY c.id"
        ).fetchall()
        return [Campaign(*r) for r in rows]

    def campaign(self, cid: int | None = None, unfinished: bool = False) -> Campaign:
        """Campaign `cid`, or the newest one (the newest unfinished one if asked)."""
        found = [
            c
            for c in self.campaigns()
            if (cid is None or c.id == cid) and not (unfinished and c.status == "finished")
        ]
        if not found:
            what = (
                f"campaign {cid}"
                if cid is not None
                else ("unfinished campaign" if unfinished else "campaign")
            )
            raise StoreError(f"{self.path}: no {what} in this database")
        return found[-1]

    def campaign_info(self, cid: int) -> dict[str, Any]:
        """What an export says about the campaign it comes from."""
        c = self.campaign(cid)
        return dataclasses.asdict(c) | {
            "machine": self.machine_facts(cid),
            "settings": self.settings(cid),
        }

    def settings(self, cid: int) -> dict[str, Any]:
        row = self.db.execute("SELECT settings_json FROM campaigns WHERE id=?", (cid,)).fetchone()
        return dict(_loads(row[0])) if row else {}

    def sample(self, cid: int) -> int:
        """The profiler's 1-in-N sampling of a campaign; 0: not profiled (campaigns
        stored before the setting had one name keep it under "profile")."""
        settings = self.settings(cid)
        return int(settings.get("sample", settings.get("profile", 0)) or 0)

    def plan(self, cid: int) -> list[RunSpec]:
        """The whole plan, done or not, in order."""
        rows = self.db.execute(
            f"SELECT {_PLAN_COLUMNS} FROM plan WHERE campaign_id=? ORDER BY seq", (cid,)
        ).fetchall()
        return [_spec_from_row(r) for r in rows]

    def pending(self, cid: int) -> list[RunSpec]:
        rows = self.db.execute(
            f"SELECT {_PLAN_COLUMNS} FROM plan WHERE campaign_id=? AND seq NOT IN "
            "(SELECT seq FROM runs WHERE campaign_id=?) ORDER BY seq",
            (cid, cid),
        ).fetchall()
        return [_spec_from_row(r) for r in rows]

    def baseline_rss(self, cid: int) -> dict[tuple[str, str], int]:
        """Peak RSS of the campaign's finished baseline runs, by (allocator, workload)."""
        rows = self.db.execute(
            "SELECT allocator, workload, maxrss_kib FROM runs "
            "WHERE campaign_id=? AND role='baseline' AND status='ok'",
            (cid,),
        )
        return {(a, w): int(rss) for a, w, rss in rows}

    def allocator_specs(self, cid: int) -> list[tuple[AllocatorSpec, str | None]]:
        """The campaign's allocators as specified, each with the sha256 it had then."""
        rows = self.db.execute(
            "SELECT spec_json, sha256 FROM allocators WHERE campaign_id=? ORDER BY rowid", (cid,)
        )
        return [(stored.allocator_spec(text), sha) for text, sha in rows]

    def allocator_rows(self, cid: int) -> list[dict[str, Any]]:
        cur = self.db.execute("SELECT * FROM allocators WHERE campaign_id=? ORDER BY rowid", (cid,))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def machine_facts(self, cid: int) -> dict[str, Any]:
        row = self.db.execute(
            "SELECT m.facts_json FROM campaigns c JOIN machines m "
            "ON m.id = c.machine_id WHERE c.id=?",
            (cid,),
        ).fetchone()
        return dict(_loads(row[0])) if row else {}

    def runs(self, cid: int, metrics: Sequence[str] | None = None) -> list[StoredRun]:
        """Every finished run of a campaign, with its metrics (only `metrics`, if given)."""
        # Named metrics come as extra columns (an indexed lookup each, done by
        # SQLite); all metrics come from one scan of the metrics table.
        names = list(metrics) if metrics is not None else []
        picks = "".join(
            ", (SELECT value FROM metrics WHERE run_id = runs.id AND name = ?)" for _ in names
        )
        rows = self.db.execute(
            "SELECT id, seq, allocator, workload, params_json, rep, status, wall_s, user_s, "
            f"sys_s, maxrss_kib, detail, partial, role, labels_json{picks} FROM runs "
            "WHERE campaign_id=? ORDER BY seq",
            (*names, cid),
        ).fetchall()
        values = self._metrics(cid) if metrics is None else {
            r[0]: {n: v for n, v in zip(names, r[15:], strict=True) if v is not None}
            for r in rows
        }  # fmt: skip
        # Many runs share their parameters and labels: parse each text once.
        params: dict[str, Params] = {}
        labels: dict[str, dict[str, str]] = {}
        return [
            StoredRun(
                seq=r[1],
                allocator=r[2],
                workload=r[3],
                params=params.get(r[4]) or params.setdefault(r[4], _params(r[4])),
                rep=r[5],
                status=_status(r[6]),
                wall_s=r[7],
                user_s=r[8],
                sys_s=r[9],
                maxrss_kib=r[10],
                metrics=values.get(r[0], {}),
                detail=r[11] or "",
                partial=bool(r[12]),
                role=r[13],
                labels=labels[r[14]]
                if r[14] in labels
                else labels.setdefault(r[14], _loads(r[14])),
            )
            for r in rows
        ]

    def cells(
        self, cid: int, metrics: Sequence[str], columns: Sequence[str] = CELL_COLUMNS
    ) -> list[CellRuns]:
        """Every cell's runs, column by column, grouped by SQLite itself: a report over
        100,000 runs reads a few thousand rows instead of building 100,000 objects."""
        if not set(columns) <= set(CELL_COLUMNS):
            raise ValueError(f"columns must be among {CELL_COLUMNS}")
        query = json.dumps(["floats", list(metrics), list(columns)])
        rows = self._kept_rows(cid, query, lambda: self._cell_rows(cid, metrics, columns))
        names = (*columns, *metrics)
        hosts = self._hosts({r[6] for r in rows})
        return [
            CellRuns(
                allocator=r[0],
                workload=r[1],
                params=_params(r[2]) + hosts.get(r[6], ()),
                role=r[3],
                partial=bool(r[4]),
                statuses=tuple(_status(x) for x in str(r[5]).split(",")),
                columns={n: tuple(values) for n, values in zip(names, r[7:], strict=True)},
            )
            for r in rows
        ]

    def _cell_rows(
        self, cid: int, metrics: Sequence[str], columns: Sequence[str]
    ) -> list[Sequence[Any]]:
        """The grouped rows, their value columns parsed (so is what the cache keeps)."""
        own = "".join(f", group_concat(ifnull({c}, ''))" for c in columns)
        picks = "".join(
            ", group_concat(ifnull((SELECT value FROM metrics WHERE run_id = r.id AND name = ?),"
            " ''), ',')"
            for _ in metrics
        )
        rows = self.db.execute(
            "SELECT allocator, workload, params_json, role, max(partial), group_concat(status), "
            f"machine_id{own}{picks} FROM runs r WHERE campaign_id=? "
            "GROUP BY allocator, workload, params_json, role, machine_id",
            (*metrics, cid),
        ).fetchall()
        return [[*r[:7], *(list(_floats(text)) for text in r[7:])] for r in rows]

    def _fingerprint(self, cid: int) -> str:
        """Changes whenever the campaign gains a run (runs are only ever added)."""
        n, last = self.db.execute(
            "SELECT count(*), max(id) FROM runs WHERE campaign_id=?", (cid,)
        ).fetchone()
        return f"{n}:{last}"

    def _kept_rows(
        self, cid: int, query: str, compute: Callable[[], list[Any]]
    ) -> list[Sequence[Any]]:
        """`compute()`'s rows, or the rows kept for `query` while the campaign has no
        new run."""
        mark = self._fingerprint(cid)
        rows = self._cached(cid, query, mark)
        if rows is None:
            rows = compute()
            # A running campaign reads its cells every precision round and gains runs
            # in between: caching them then would only write what the next round drops.
            if self.campaign(cid).status != "running":
                self._keep(cid, query, mark, rows)
        return rows

    def _cached(self, cid: int, query: str, mark: str) -> list[Sequence[Any]] | None:
        row = self.db.execute(
            "SELECT rows_json FROM cell_cache WHERE campaign_id=? AND query=? AND fingerprint=?",
            (cid, query, mark),
        ).fetchone()
        return list(_loads(row[0])) if row else None

    def _keep(self, cid: int, query: str, mark: str, rows: list[Sequence[Any]]) -> None:
        """Saves the rows for the next report; a database that cannot be written now
        (read-only, busy) simply gets no cache."""
        try:
            with self.db:
                self.db.execute("INSERT OR REPLACE INTO cell_cache VALUES (?,?,?,?)",
                                (cid, query, mark, json.dumps(rows)))  # fmt: skip
        except sqlite3.OperationalError:
            pass

    def verified_calls(self, cid: int) -> dict[tuple[str, str], tuple[str, ...]]:
        """Per (workload, params JSON): the functions libam_who saw the program call in
        the cell's verification runs (only functions a partial allocator may lack)."""
        out: dict[tuple[str, str], set[str]] = {}
        for workload, params, labels in self.db.execute(
            "SELECT workload, params_json, labels_json FROM runs WHERE campaign_id=? "
            "AND role='verify' AND status='ok'", (cid,)
        ):  # fmt: skip
            calls = _loads(labels).get("calls") if labels else None
            if calls is not None:
                key = (str(workload), json.dumps(_params(params)))
                out.setdefault(key, set()).update(_loads(calls))
        return {k: tuple(sorted(v)) for k, v in out.items()}

    def typical_wall(self) -> dict[str, float]:
        """The median wall time of each workload's recent successful runs."""
        walls: dict[str, list[float]] = {}
        for workload, wall in self.db.execute(
            "SELECT workload, wall_s FROM runs WHERE status='ok' "
            "AND typeof(wall_s) IN ('real', 'integer') "
            "ORDER BY id DESC LIMIT 20000"
        ):
            walls.setdefault(str(workload), []).append(float(wall))
        return {w: statistics.median(v) for w, v in walls.items()}

    def metric_sum(self, cid: int, name: str, role: str = "measure") -> float:
        """The sum of one metric over the campaign's runs of `role` (a rare metric such as
        noise_reruns: one query, not a column of every cell)."""
        row = self.db.execute(
            "SELECT total(m.value) FROM runs r JOIN metrics m ON m.run_id = r.id AND m.name = ? "
            "WHERE r.campaign_id = ? AND r.role = ?",
            (name, cid, role),
        ).fetchone()
        return float(row[0])

    def _hosts(self, ids: set[int | None]) -> dict[int | None, Params]:
        """A campaign that ran on several machines (a cluster) has its cells split by
        machine: a `host` parameter, named by hostname (with the machine's id where
        one host name has several sets of facts). One machine: no parameter."""
        if len(ids) < 2:
            return {}
        names = dict(self.db.execute(
            f"SELECT id, hostname FROM machines WHERE id IN ({','.join('?' * len(ids))})",
            tuple(ids),
        ).fetchall())  # fmt: skip
        unique = len(set(names.values())) == len(names)
        return {i: (("host", names.get(i, "?") if unique else f"{names.get(i, '?')}#{i}"),)
                for i in ids}  # fmt: skip

    def _metrics(self, cid: int) -> dict[int, dict[str, float]]:
        out: dict[int, dict[str, float]] = {}
        for run_id, name, value in self.db.execute(
            "SELECT m.run_id, m.name, m.value FROM metrics m JOIN runs r ON r.id = m.run_id "
            "WHERE r.campaign_id=?",
            (cid,),
        ):
            out.setdefault(run_id, {})[name] = value
        return out


_STATUS = {s.value: s for s in RunStatus}


def _status(stored: object) -> RunStatus:
    """A status this allocmark does not know (a newer one, a hand-edited row) counts
    as an error: never as a measurement."""
    return _STATUS.get(str(stored), RunStatus.ERROR)


def _floats(text: str | None) -> tuple[float | None, ...]:
    """A group_concat of numbers; an empty item is a run without that metric."""
    if text is None:
        return ()
    parts = text.split(",")
    try:
        if "" not in parts:  # the usual case: every run has the value
            return tuple(map(float, parts))
        return tuple(float(x) if x else None for x in parts)
    except ValueError:  # text in a numeric column: edited or corrupted
        raise _damaged(text) from None


def _params(text: str) -> tuple[tuple[str, int | str], ...]:
    try:
        return tuple((k, v) for k, v in _loads(text))
    except (TypeError, ValueError):
        raise _damaged(text) from None


def _packed(values: tuple[int, ...]) -> bytes:
    """Little-endian uint32s, so that a database moves between machines."""
    a = array.array("I", values)
    if sys.byteorder == "big":
        a.byteswap()
    return a.tobytes()


def _unpacked(blob: object) -> tuple[int, ...]:
    if not isinstance(blob, bytes) or len(blob) % 4:
        raise _damaged(blob)
    a = array.array("I", blob)
    if sys.byteorder == "big":
        a.byteswap()
    return tuple(a)


def _loads(text: str) -> Any:
    """A JSON column's value; a damaged one (hand-edited, corrupted) is a StoreError."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        raise _damaged(text) from None


def _damaged(text: object) -> StoreError:
    return StoreError(f"the results database holds a damaged value ({str(text)[:60]!r}); "
                      "it was edited or corrupted: restore it from a copy")  # fmt: skip


def _allocator_row(cid: int, v: Verified) -> tuple[Any, ...]:
    return (
        cid,
        v.spec.name,
        v.status.value,
        v.library,
        v.sha256,
        v.version,
        json.dumps(v.lacks),
        json.dumps(v.child_env()),
        json.dumps(v.served),
        stored.dump(v.spec),
        v.reason,
    )


def _workload_row(cid: int, w: Workload) -> tuple[Any, ...]:
    params = [dataclasses.asdict(p) for p in w.params]
    return (cid, w.name, w.kind, w.description, json.dumps(w.argv), json.dumps(params))


def _plan_row(cid: int, s: RunSpec) -> tuple[Any, ...]:
    return (
        cid,
        s.seq,
        s.allocator,
        s.workload,
        json.dumps(s.params),
        s.rep,
        json.dumps(s.argv),
        json.dumps(s.env),
        s.timeout,
        s.expect_malloc,
        int(s.result_fd),
        s.role,
        stored.dump(s.app),
        int(s.profile),
        s.memory_limit,
    )


# The plan's columns in the order _spec_from_row reads them.
_PLAN_COLUMNS = ("seq, allocator, workload, params_json, rep, argv_json, env_json, timeout, "
                 "expect_malloc, result_fd, role, app_json, profile, memory_limit")  # fmt: skip


def _spec_from_row(r: tuple[Any, ...]) -> RunSpec:
    return RunSpec(
        seq=r[0],
        allocator=r[1],
        workload=r[2],
        params=_params(r[3]),
        rep=r[4],
        argv=tuple(_loads(r[5])),
        env=tuple((k, v) for k, v in _loads(r[6])),
        timeout=r[7],
        expect_malloc=r[8],
        result_fd=bool(r[9]),
        role=r[10],
        app=stored.app_run(r[11]),
        profile=bool(r[12]),
        memory_limit=int(r[13] or 0),
    )
