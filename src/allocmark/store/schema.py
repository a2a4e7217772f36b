"""The database's schema: version 1 as first released, the migrations to each later
version, and the one transaction that creates or migrates a file."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from allocmark import interrupts
from allocmark.errors import StoreError

SCHEMA_VERSION = 14

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
    # 3: campaign settings (blocks added until decided: min/max blocks, the margin).
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
    # 12: a campaign's plan (settings_json) is a versioned request.CampaignPlan. No table
    # changes: older plans are migrated as they are read (store/campaign_plan.py); the
    # step is there so that an allocmark of schema 11, which reads the plan as a flat
    # object, refuses a database with newer plans instead of misreading them.
    11: """
UPDATE meta SET value = value WHERE key = 'schema_version'
""",
    # 13: the campaign's seal (seal.py): its plan and its allocators' specs, signed by
    # whoever planned it; a resume runs nothing of a campaign whose seal does not verify.
    12: """
ALTER TABLE campaigns ADD COLUMN seal TEXT
""",
    # 14: a recorded run's trace destination (`allocmark record`; "" for every other run).
    13: """
ALTER TABLE plan ADD COLUMN trace TEXT NOT NULL DEFAULT ''
""",
}


def _script(db: sqlite3.Connection, script: str) -> None:
    """Run a schema script statement by statement, inside the caller's transaction
    (executescript would commit it first). The scripts hold no ';' in literals."""
    for statement in script.split(";"):
        if statement.strip():
            db.execute(statement)


def prepare(db: sqlite3.Connection, path: Path, readonly: bool) -> None:
    """Create or migrate the schema in one write transaction that reads the
    version inside it: two processes opening a new database at once must not
    both create it, nor one migrate what the other half created."""
    if state(db, path) == SCHEMA_VERSION:
        return  # the common case takes no write lock (reports on a busy DB)
    if readonly:
        raise StoreError(
            f"{path}: written by an older allocmark, not writable here; open it "
            "once where it can be written to upgrade it"
        )
    level = db.isolation_level
    db.isolation_level = None  # BEGIN/COMMIT below are ours alone
    # Ctrl-C waits the few ms until the schema is whole: interrupted inside a
    # statement, SQLite may roll back by itself, and our ROLLBACK would then fail
    # and report a sound (empty) database as unusable.
    with interrupts.held():
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                _migrate(db, state(db, path))
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
        finally:
            db.isolation_level = level
    _use_wal(db)


def _migrate(db: sqlite3.Connection, version: int) -> None:
    if version == 0:
        _script(db, _SCHEMA_V1)
        _set_version(db, 1)
        version = 1
    for v in range(version, SCHEMA_VERSION):
        _script(db, _MIGRATIONS[v])
        _set_version(db, v + 1)


def _use_wal(db: sqlite3.Connection) -> None:
    """WAL (readers never wait for the writer) is set once, after creation: it
    cannot be switched inside a transaction, and the switch gives up at once,
    without the busy timeout, while another process holds the file."""
    deadline = time.monotonic() + 30
    while db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
        try:
            db.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def state(db: sqlite3.Connection, path: Path) -> int:
    """The schema version; 0 for an empty file. Refuses foreign and newer files."""
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if not tables:
        return 0
    if "meta" not in tables:
        raise StoreError(f"{path}: an SQLite file, but not an allocmark database")
    version = stored_version(db, path)
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path}: written by a newer allocmark (schema {version}; this one "
            f"reads up to {SCHEMA_VERSION}); upgrade allocmark to read it"
        )
    return version


def stored_version(db: sqlite3.Connection, path: Path) -> int:
    row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    if row is None or not str(row[0]).isdigit():
        raise StoreError(f"{path}: allocmark database without a schema version")
    return int(row[0])


def _set_version(db: sqlite3.Connection, v: int) -> None:
    db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(v),))
