"""The open database and what every part of the store reads: campaigns, their
plans, the machines they ran on."""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any

from allocmark import files, units
from allocmark.errors import StoreError
from allocmark.model import Campaign, Machine
from allocmark.request import CampaignPlan
from allocmark.store import campaign_plan, codec, schema, seal

# A campaign that ended: all its runs done ("finished"), or stopped because its own
# command fails under the baseline ("failed"); nothing is left to resume of either.
ENDED = ("finished", "failed")
ROOM = 1 << 20  # bytes free below which a write error of SQLite's is the disk's


class StoreFull(StoreError):
    """The filesystem holding the database has no room for the next write; what is
    stored is intact (SQLite's transaction failed whole)."""


def is_full(error: sqlite3.Error, path: Path) -> bool:
    """Does `error` mean that the disk under `path` is full? SQLITE_FULL, or an I/O
    error while the filesystem has (almost) no room: growing the WAL's index fails so."""
    name = getattr(error, "sqlite_errorname", "")
    if name == "SQLITE_FULL":
        return True
    return name.startswith("SQLITE_IOERR") and free_bytes(path) < ROOM


def free_bytes(path: Path) -> int:
    try:
        st = os.statvfs(path.absolute().parent)
    except OSError:
        return ROOM  # nothing known: not called full
    return st.f_bavail * st.f_frsize


def filesystem(path: Path) -> str:
    """Where `path` lives: its mount point, the filesystem's size and what is free."""
    where = path.absolute().parent
    while not os.path.ismount(where) and where != where.parent:
        where = where.parent
    try:
        st = os.statvfs(where)
    except OSError:
        return str(where)
    return (
        f"{where} (a filesystem of {units.size_text(st.f_blocks * st.f_frsize)}, "
        f"{units.size_text(st.f_bavail * st.f_frsize)} free)"
    )


class Base:
    """A results database. Opening never changes results already stored."""

    db: sqlite3.Connection

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
        files.protect(path)  # no output of this process ever goes over it
        if not self.readonly:
            files.directory(path.parent, parents=True, what="--db")
            _create_private(path)
            files.protect(path)
        try:
            self.db = self._connect()
            self.db.execute("PRAGMA foreign_keys = ON")
            schema.prepare(self.db, path, self.readonly)
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

    def campaigns(self) -> list[Campaign]:
        rows = self.db.execute(
            "SELECT c.id, c.name, c.status, c.created, c.baseline, "
            "(SELECT COUNT(*) FROM plan p WHERE p.campaign_id = c.id), "
            "(SELECT COUNT(*) FROM runs r WHERE r.campaign_id = c.id) "
            "FROM campaigns c ORDER BY c.id"
        ).fetchall()
        return [_campaign(r) for r in rows]

    def campaign(self, cid: int | None = None, unfinished: bool = False) -> Campaign:
        """Campaign `cid`, or the newest one (the newest unfinished one if asked: not
        finished, nor stopped because its command fails)."""
        found = [
            c
            for c in self.campaigns()
            if (cid is None or c.id == cid) and not (unfinished and c.status in ENDED)
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
            "plan": json.loads(campaign_plan.dumps(self.campaign_plan(cid))),
        }

    def campaign_plan(self, cid: int) -> CampaignPlan:
        """How campaign `cid` runs, as planned (older plans migrated as they are read)."""
        row = self.db.execute("SELECT settings_json FROM campaigns WHERE id=?", (cid,)).fetchone()
        if row is None:
            raise StoreError(f"{self.path}: no campaign {cid} in this database")
        return campaign_plan.loads(row[0], f"{self.path}: campaign {cid}")

    def save_campaign_plan(self, cid: int, plan: CampaignPlan) -> None:
        with self.db:
            self.db.execute(
                "UPDATE campaigns SET settings_json=? WHERE id=?", (campaign_plan.dumps(plan), cid)
            )
            self.reseal(cid)

    def reseal(self, cid: int) -> None:
        """Sign the campaign's plan and allocators as this user's (seal.py): called
        where this allocmark wrote them, or the user approved them (--yes)."""
        self.db.execute(
            "UPDATE campaigns SET seal=? WHERE id=?",
            (seal.seal_campaign(seal.key(), self.campaign_message(cid)), cid),
        )

    def campaign_message(self, cid: int) -> bytes:
        """What the campaign's seal covers, as stored."""
        row = self.db.execute("SELECT settings_json FROM campaigns WHERE id=?", (cid,)).fetchone()
        settings = str(row[0]) if row else ""
        plan_id = self.campaign_plan(cid).plan_id
        allocators = [
            (str(n), str(spec), str(sha))
            for n, spec, sha in self.db.execute(
                "SELECT name, spec_json, sha256 FROM allocators WHERE campaign_id=?", (cid,)
            )
        ]
        return seal.campaign_message(plan_id, settings, allocators)

    def sealed(self, cid: int) -> bool:
        """Whether the campaign's plan and allocators verify under this user's key."""
        row = self.db.execute("SELECT seal FROM campaigns WHERE id=?", (cid,)).fetchone()
        return bool(row) and seal.campaign_verifies(self.campaign_message(cid), row[0])

    def machine_facts(self, cid: int) -> dict[str, Any]:
        row = self.db.execute(
            "SELECT m.facts_json FROM campaigns c JOIN machines m "
            "ON m.id = c.machine_id WHERE c.id=?",
            (cid,),
        ).fetchone()
        return codec.mapping(row[0]) if row else {}


def _create_private(path: Path) -> None:
    """A new database is made 0600 before SQLite opens it (SQLite gives its -wal and
    -shm files the database's mode): it holds every stored command and environment."""
    try:
        files.create(path, 0o600)
    except IsADirectoryError:
        return  # the caller's check says "is a directory"
    except OSError as e:  # the place, not SQLite: say so (SQLite said "unable to open")
        raise StoreError(
            f"{path}: cannot create the results database there ({e.strerror or e}); "
            "give --db a path in a directory you can write, e.g. results/allocmark.db"
        ) from None


def _campaign(r: tuple[Any, ...]) -> Campaign:
    """A campaigns row, each column of its type (a hand-edited one is a StoreError)."""
    return Campaign(
        codec.integer(r[0]),
        codec.text(r[1]),
        codec.text(r[2]),
        codec.number(r[3]),
        codec.text_or_none(r[4]),
        codec.integer(r[5]),
        codec.integer(r[6]),
    )
