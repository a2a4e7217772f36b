"""Crafted databases through every reader (issue 52, finding 8): a real campaign's
database, one to three of its stored values replaced by hostile ones (every column of
every table: wrong types, out-of-range numbers, deep or wrong JSON, markup, control
characters, deleted rows), then `report` in every format, `compare` and `run --resume`,
in process. A reader may refuse a database with a clear error (exit 1 or 2); it must
never raise (a traceback), and a resume must never run anything: the database was
planned under another user's key, so nothing of it is signed here.

`make faults` crafts AM_FUZZ_DBS=1000 databases; `make test` fewer. HTML, the slowest
format, reads every HTML_EVERY-th of them (it is a view of the same report value as
JSON, which reads them all)."""

from __future__ import annotations

import contextlib
import io
import math
import os
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from tests.conftest import PYTHON, cli, readable

pytestmark = pytest.mark.integration

EXAMPLES = int(os.environ.get("AM_FUZZ_DBS", "40"))
HTML_EVERY = 5

DEEP = "[" * 100_000 + "]" * 100_000
HOSTILE: list[object] = [
    None,
    0,
    -1,
    2**63 - 1,
    -(2**63),
    1e308,
    math.inf,
    -math.inf,
    math.nan,
    -0.5,
    "",
    "x",
    "[1,2]",
    "{}",
    "[]",
    "null",
    '{"a": [1, {"b": null}]}',
    DEEP,
    '{"version": 99}',
    "<img src=x onerror=alert(1)>",
    "\x1b[31mred\x1b[0m\n\r",
    "glibc",
    "measure",
    "ok",
    "9e999",
    "2026-11-26",
    b"\x00\xff\x01",
]

_value = st.one_of(
    st.sampled_from(HOSTILE),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.binary(max_size=16),
)


def _columns(db: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as con:
        tables = [t for (t,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return [(t, str(c[1])) for t in tables for c in con.execute(f"PRAGMA table_info({t})")]


@pytest.fixture(scope="module")
def planted(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, list[tuple[str, str]]]]:
    """A real campaign (with RSS series and the cell cache a report writes), planned
    under a key of its own: nothing of it is signed by the key the readers run with."""
    where = readable(tmp_path_factory.mktemp("planted"))
    db = where / "base.db"
    elsewhere = {"XDG_CONFIG_HOME": str(where / "planner")}
    r = cli(
        "try",
        *("-a", "glibc,glibc:arena2,jemalloc", "-n", "4", "--max-blocks", "4"),
        *("--db", str(db), "--env", "PYTHONMALLOC=malloc", "--"),
        *(PYTHON, "-c", "x = [bytes(64) for _ in range(200000)]"),
        env=elsewhere,
    )
    assert r.returncode == 0, r.stderr
    assert cli("report", "--db", str(db), env=elsewhere).returncode == 0  # fills the cache
    yield db, _columns(db)
    print(
        f"\ncrafted databases: {TALLY['crafted']} through report (table, md, csv, json; html "
        f"{TALLY['html']}), compare and --resume: {TALLY['refused']} refused with a clear "
        "error, 0 tracebacks, 0 runs"
    )


TALLY = {"crafted": 0, "html": 0, "refused": 0}


_edit = st.tuples(st.integers(min_value=0, max_value=10_000), _value, st.booleans(), st.booleans())


def _craft(
    base: Path,
    to: Path,
    columns: list[tuple[str, str]],
    edits: list[tuple[int, object, bool, bool]],
) -> bool:
    """A copy of `base` with `edits` applied: each picks a column, a value, whether every
    row or the first, and whether to delete that row instead. False: SQLite refused.
    Every example reuses the path: the one before's file, write-ahead log and its index
    go first (an example it left a traceback in still holds them open), so that no
    example reads another's."""
    for old in (to, to.with_name(f"{to.name}-wal"), to.with_name(f"{to.name}-shm")):
        old.unlink(missing_ok=True)
    to.write_bytes(base.read_bytes())
    with contextlib.closing(sqlite3.connect(to)) as con:
        con.execute("UPDATE campaigns SET status='interrupted', owner_json=NULL")
        for pick, value, every, delete in edits:
            table, column = columns[pick % len(columns)]
            first = f"rowid=(SELECT min(rowid) FROM {table})"
            try:
                if delete:
                    con.execute(f"DELETE FROM {table} WHERE {first}")
                else:
                    where = "" if every else f" WHERE {first}"
                    con.execute(f"UPDATE {table} SET {column}=?{where}", (value,))
            except (sqlite3.IntegrityError, sqlite3.OperationalError, OverflowError):
                return False
        con.commit()
    return True


def _in_process(*args: str) -> int:
    """The CLI as `allocmark ARGS` runs it, in this process: its exit code. Anything it
    raises but SystemExit is what a user would see as a traceback, and fails the test."""
    from allocmark import cli as entry

    argv, sys.argv = sys.argv, ["allocmark", *args]
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            entry.main()
        return 0
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 1
    finally:
        sys.argv = argv


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(edits=st.lists(_edit, min_size=1, max_size=3), n=st.integers(min_value=0, max_value=10**6))
def test_crafted_databases_are_clear_errors_never_tracebacks_or_runs(
    planted: tuple[Path, list[tuple[str, str]]],
    tmp_path: Path,
    edits: list[tuple[int, object, bool, bool]],
    n: int,
) -> None:
    base, columns = planted
    db = tmp_path / "crafted.db"
    assume(_craft(base, db, columns, edits))
    TALLY["crafted"] += 1
    TALLY["html"] += n % HTML_EVERY == 0
    out = tmp_path / "out"
    formats = ["table", "md", "csv", "json"] + (["html"] if n % HTML_EVERY == 0 else [])
    for fmt in formats:
        code = _in_process("report", "--db", str(db), "--format", fmt, "-o", f"{out}.{fmt}")
        assert code in (0, 1, 2), (fmt, code)
        TALLY["refused"] += code != 0 and fmt == "json"
        if fmt in ("md", "html") and code == 0:
            assert "<img src=x" not in Path(f"{out}.{fmt}").read_text(errors="replace")
    assert _in_process("compare", str(base), str(db)) in (0, 1, 2)
    with sqlite3.connect(db) as con:
        before = con.execute("SELECT count(*) FROM runs").fetchone()[0]
    code = _in_process("run", "--resume", "--db", str(db))
    assert code in (1, 2), code  # refused: nothing of it is signed by this user
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == before


# The eight tracebacks found by hand (issue 52, finding 8), and markup in a stored name.
NAMED = {
    "labels_json [1,2]": (["UPDATE runs SET labels_json='[1,2]'"], ["report"]),
    "a negative stored margin": (
        ["UPDATE campaigns SET settings_json=json_set(settings_json,'$.precision.margin',-0.5)"],
        ["report"],
    ),
    "an empty RSS series, html": (
        ["UPDATE rss_series SET t_ms=x'', kib=x''"],
        ["report", "--format", "html"],
    ),
    "a text created, html": (
        ["UPDATE campaigns SET created='yesterday'"],
        ["report", "--format", "html"],
    ),
    "a 100,000-deep spec_json": ([f"UPDATE allocators SET spec_json='{DEEP}'"], ["report"]),
    "wall_s 9e999": (["UPDATE runs SET wall_s=9e999"], ["compare"]),
    "noise re-runs of -9e999 (their tally)": (
        ["INSERT OR REPLACE INTO metrics SELECT id, 'noise_reruns', -9e999 FROM runs"],
        ["report"],
    ),
    "a kept tally of the noise re-runs of -Infinity": (
        [
            "INSERT OR REPLACE INTO cell_cache SELECT campaign_id, "
            '\'["tally", "noise_reruns", "measure"]\', count(*) || \':\' || max(id), '
            '\'{"format": 2, "rows": [[1, 1, -Infinity]]}\' FROM runs GROUP BY campaign_id'
        ],
        ["report", "--format", "json"],
    ),
    "a 100,000-deep owner_json": (
        [f"UPDATE campaigns SET owner_json='{DEEP}'"],
        ["run", "--resume"],
    ),
}


@pytest.mark.parametrize("case", list(NAMED))
def test_the_crafted_databases_found_by_hand_are_clear_errors(
    planted: tuple[Path, list[tuple[str, str]]], tmp_path: Path, case: str
) -> None:
    base, _ = planted
    edits, command = NAMED[case]
    db = tmp_path / "c.db"
    db.write_bytes(base.read_bytes())
    with contextlib.closing(sqlite3.connect(db)) as con:
        con.execute("UPDATE campaigns SET status='interrupted', owner_json=NULL")
        for edit in edits:
            con.execute(edit)
        con.commit()
    args = (
        ["compare", str(base), str(db)]
        if command == ["compare"]
        else [*command, "--db", str(db), "-o", str(tmp_path / "out")]
        if command[0] == "report"
        else [*command, "--db", str(db)]
    )
    r = cli(*args)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode in (0, 1, 2), r.stderr


def test_markup_in_a_stored_name_is_never_markup(
    planted: tuple[Path, list[tuple[str, str]]], tmp_path: Path
) -> None:
    base, _ = planted
    db = tmp_path / "m.db"
    db.write_bytes(base.read_bytes())
    evil = "<img src=x onerror=alert(1)>"
    with contextlib.closing(sqlite3.connect(db)) as con:
        for table, column in (("allocators", "name"), ("runs", "allocator"), ("plan", "allocator")):
            con.execute(f"UPDATE {table} SET {column}=? WHERE {column}='glibc:arena2'", (evil,))
        con.commit()
    for fmt in ("md", "html"):
        out = tmp_path / f"r.{fmt}"
        r = cli("report", "--db", str(db), "--format", fmt, "-o", str(out))
        assert r.returncode == 0, r.stderr
        text = out.read_text()
        assert "alert(1)" in text and evil not in text, fmt  # shown, never markup
