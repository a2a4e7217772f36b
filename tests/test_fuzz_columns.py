"""Crafted databases, column by column (issue 65): every JSON column given values of
every other JSON type (and each key of its object, the same), every numeric column
given non-finite and out-of-range values (9e999, -Infinity, 1e308 as a number and as
text), in every row, the first row or the last; each database then goes through every
reading verb in process: `report` as a table, md, csv, json and html, `report --runs`
as csv and json, `compare` both ways, and `run --resume` (bisect's reads are the
report's: stored.comparison). A reader may refuse a database with a clear error; it
never raises (a traceback) and a resume runs nothing.

`make faults` crafts all of them (AM_FUZZ_COLUMNS=all: over 2,000); `make test` every
AM_FUZZ_COLUMNS-th (default 20), a different share on each day (the case list is the
same, the offset is the day's)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
import time
from pathlib import Path

import pytest

from tests.test_fuzz_store import _in_process, planted  # noqa: F401 (a fixture)

pytestmark = pytest.mark.integration

TYPES: list[object] = [
    "[1,2]", "{}", '"x"', "1", "null", "true", "1.5", "[]", '[[1, "x"]]', '{"a": {"b": []}}',
    "1e999",
]  # fmt: skip
INNER: list[object] = [[], {}, "x", 1, None, 1e308, True, [1, "x"]]  # a key of a JSON object
NUMBERS: list[object] = [
    math.inf, -math.inf, 1e308, -1e308, "9e999", "-9e999", "Infinity", "NaN", 2**63 - 1,
]  # fmt: skip
ROWS = ("every", "first", "last")


def _cases(db: Path) -> list[tuple[str, str, str, object]]:
    """(table, column, rows, value) for every column the database has."""
    out: list[tuple[str, str, str, object]] = []
    with contextlib.closing(sqlite3.connect(db)) as con:
        tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            for _, column, kind, *_ in con.execute(f"PRAGMA table_info({table})"):
                if column.endswith("_json"):
                    out += [(table, column, rows, v) for rows in ROWS for v in TYPES]
                    first = con.execute(f"SELECT {column} FROM {table} LIMIT 1").fetchone()
                    with contextlib.suppress(TypeError, ValueError):
                        found = json.loads(first[0]) if first else None
                        keys = list(found) if isinstance(found, dict) else []
                        out += [
                            (table, f"{column}.{key}", "every", v) for key in keys for v in INNER
                        ]
                elif kind in ("INTEGER", "REAL"):
                    out += [(table, column, rows, v) for rows in ROWS for v in NUMBERS]
    return out


def _apply(con: sqlite3.Connection, table: str, column: str, rows: str, value: object) -> None:
    where = {
        "every": "",
        "first": f" WHERE rowid=(SELECT min(rowid) FROM {table})",
        "last": f" WHERE rowid=(SELECT max(rowid) FROM {table})",
    }[rows]
    if "." in column:  # a key inside a JSON object
        column, key = column.split(".", 1)
        path = "$." + json.dumps(key)
        con.execute(
            f"UPDATE {table} SET {column}=json_set({column}, ?, json(?)){where}",
            (path, json.dumps(value)),
        )
    else:
        con.execute(f"UPDATE {table} SET {column}=?{where}", (value,))


def _selected(cases: list[tuple[str, str, str, object]]) -> list[tuple[str, str, str, object]]:
    every = os.environ.get("AM_FUZZ_COLUMNS", "20")
    if every == "all":
        return cases
    step = max(1, int(every))
    return cases[int(time.time() // 86400) % step :: step]


TALLY = {"crafted": 0, "refused": 0}


def test_every_column_crafted_is_a_clear_error_never_a_traceback_or_a_run(
    planted: tuple[Path, list[tuple[str, str]]],  # noqa: F811
    tmp_path: Path,
) -> None:
    base, _ = planted
    cases = _selected(_cases(base))
    assert cases
    db, out = tmp_path / "c.db", tmp_path / "out"
    for n, (table, column, rows, value) in enumerate(cases):
        for old in (db, db.with_name("c.db-wal"), db.with_name("c.db-shm")):
            old.unlink(missing_ok=True)
        db.write_bytes(base.read_bytes())
        with contextlib.closing(sqlite3.connect(db)) as con:
            con.execute("UPDATE campaigns SET status='interrupted', owner_json=NULL")
            try:
                _apply(con, table, column, rows, value)
            except (sqlite3.IntegrityError, sqlite3.OperationalError, OverflowError):
                continue  # SQLite itself refused the value
            con.commit()
        TALLY["crafted"] += 1
        said = f"{table}.{column} ({rows}) = {str(value)[:40]!r}"
        codes = []
        for fmt in ("table", "md", "csv", "json", *(["html"] if n % 8 == 0 else [])):
            codes.append(
                _in_process("report", "--db", str(db), "--format", fmt, "-o", f"{out}.{fmt}")
            )
        for fmt in ("csv", "json"):
            codes.append(
                _in_process("report", "--db", str(db), "--runs", "--format", fmt, "-o", f"{out}.r")
            )
        codes.append(_in_process("compare", str(base), str(db)))
        codes.append(_in_process("compare", str(db), str(base)))
        assert all(c in (0, 1, 2) for c in codes), (said, codes)
        TALLY["refused"] += codes[3] == 2  # the JSON export: the report value itself
        with contextlib.closing(sqlite3.connect(db)) as con:
            before = con.execute("SELECT count(*) FROM runs").fetchone()[0]
        code = _in_process("run", "--resume", "--db", str(db))
        assert code in (1, 2), (said, code)  # refused: nothing of it is signed by this user
        with contextlib.closing(sqlite3.connect(db)) as con:
            assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == before, said
    print(
        f"\ncrafted databases, column by column: {TALLY['crafted']} of {len(_cases(base))} "
        "cases, through report (table, md, csv, json, html), report --runs (csv, json), "
        f"compare both ways and --resume: {TALLY['refused']} refused by the report (its "
        "JSON export) with a clear error, 0 tracebacks, 0 runs"
    )
