"""The fault battery: what allocmark must survive, tried the way users and
attackers break things. Each test prints its figures (`make faults` shows them)."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings, strategies as st

from allocmark import allocators, workloads
from allocmark.answer import compare
from allocmark.errors import AllocmarkError, UserError
from allocmark.run import machine, plan, suites
from allocmark.store import SCHEMA_VERSION, Store
from tests.conftest import cli, writable_by_all
from tests.fakes import alive, allocs, specs

TRIALS = int(os.environ.get("AM_FAULT_TRIALS", "50"))


def _open_and_plan(path: str, start: object, problems: object) -> None:
    """One of several processes opening a new database and planning in it."""
    start.wait()  # type: ignore[attr-defined]
    try:
        s = Store(Path(path))
        s.new_campaign("t", 1, machine.current(), ["x"], allocs("a", "b"), [], specs(2), "b")
        s.close()
    except (AllocmarkError, Exception) as e:  # every failure counts, whatever its kind
        problems.put(f"{type(e).__name__}: {e}")  # type: ignore[attr-defined]


def test_concurrent_first_opens_of_a_new_database(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    problems = ctx.Queue()
    failed: list[str] = []
    for trial in range(TRIALS):
        path = tmp_path / f"new{trial}.db"
        start = ctx.Barrier(3)
        procs = [
            ctx.Process(target=_open_and_plan, args=(str(path), start, problems)) for _ in range(3)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
        got = [problems.get() for _ in range(problems.qsize())]
        failed += got
        s = Store(path, create=False)
        assert s.db.execute("SELECT value FROM meta").fetchone()[0] == str(SCHEMA_VERSION)
        assert s.db.execute("SELECT count(*) FROM campaigns").fetchone()[0] == 3 - len(got)
        s.close()
    print(f"\nconcurrent first opens: {TRIALS} trials of 3 processes, {len(failed)} failures")
    assert failed == [], failed[:3]


def _wait_for(path: Path, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while not (path.exists() and path.read_text().strip()):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_no_process_outlives_allocmark_killed_by_sigkill(tmp_path: Path) -> None:
    orphans = 0
    trials = 3
    out = writable_by_all(tmp_path / "out")  # the program writes its pid files there
    for trial in range(trials):
        pidfile = out / f"pid{trial}"
        script = f"sleep 31 & echo $! > {pidfile}; setsid sleep 32 & wait"
        am = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "allocmark",
                "try",
                "-n",
                "1",
                "--db",
                str(tmp_path / "k.db"),
                "--",
                "sh",
                "-c",
                script,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_for(pidfile)
        finally:  # also when the program never wrote it: no allocmark outlives the test
            am.kill()
            am.wait()
        sleeper = int(pidfile.read_text())
        deadline = time.monotonic() + 5
        while alive(sleeper) and time.monotonic() < deadline:
            time.sleep(0.05)
        orphans += alive(sleeper)
        if alive(sleeper):
            os.kill(sleeper, signal.SIGKILL)
    left = subprocess.run(["pgrep", "-f", "^sleep 3[12]$"], capture_output=True, text=True)
    print(
        f"\norphans after kill -9 of allocmark: {orphans} of {trials} runs, "
        f"{len(left.stdout.split())} sleepers of the runs left in all"
    )
    assert orphans == 0 and left.stdout == ""


def test_a_launcher_whose_reader_died_still_ends_its_tree(tmp_path: Path) -> None:
    """The root cause of a kill -9 test that failed 2 times in 20 beside a busy
    process: allocmark dead, the launcher's next record (an image, at an exec of the
    run) met a closed pipe and SIGPIPE killed the launcher before it ended the tree;
    the run's background process went to init. Here the reader is gone from the
    start: the launcher must live on (EPIPE, not SIGPIPE) and, stopped, end it all."""
    from allocmark import native

    pidfile = tmp_path / "pid"
    script = f"sleep 31 & echo $! > {pidfile}; sleep 0.2; /bin/true; wait"
    read, write = os.pipe()
    launcher = subprocess.Popen(
        [str(native.program("am_run")), str(write), "sh", "-c", script],
        env={"PATH": os.defpath, "AM_RUN_WATCH": "1", "AM_RUN_SAMPLE_US": "0"},
        pass_fds=(write,),
        start_new_session=True,
    )
    os.close(write)
    os.close(read)  # as allocmark killed: nothing reads the launcher's records
    try:
        deadline = time.monotonic() + 30
        while not pidfile.exists() and launcher.poll() is None:
            assert time.monotonic() < deadline, "the program never wrote its pid"
            time.sleep(0.05)
        time.sleep(1.0)  # `sleep 0.2` and `/bin/true` were executed: records were written
        # (before the fix: dead by SIGPIPE at the first record, -13)
        assert launcher.poll() is None, f"the launcher ended with {launcher.returncode}"
    finally:
        launcher.send_signal(signal.SIGTERM)  # what allocmark's death sends it
        launcher.wait(30)
    sleeper = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(sleeper) and time.monotonic() < deadline:
        time.sleep(0.05)
    if alive(sleeper):
        os.kill(sleeper, signal.SIGKILL)
        pytest.fail("the run's background process outlived its launcher")


# -- fuzzed suite and catalog files ------------------------------------------------
FUZZ = int(os.environ.get("AM_FUZZ_EXAMPLES", "600"))  # per kind; the battery uses more
_WORKLOADS = ["churn", "larson", "xthread", "samethread", "nosuch", ""]
_PARAMS = ["threads", "count", "size_min", "size_max", "rounds", "seed", "bogus"]
_scalar = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=12),
    st.sampled_from(["1..4", "5..1", "1..2*cores", "0..1000000000", "1..", "[/]", "\x1b[31m"]),
)
_value = st.one_of(
    _scalar,
    st.lists(_scalar, max_size=4),
    st.dictionaries(st.text(max_size=4), _scalar, max_size=2),
)
_run = st.dictionaries(
    st.sampled_from(["workload", "params", "extra"]),
    st.one_of(
        st.sampled_from(_WORKLOADS),
        st.dictionaries(st.sampled_from(_PARAMS), _value, max_size=4),
        _value,
    ),
)
_random_suite = st.dictionaries(
    st.sampled_from(
        [
            "description",
            "allocators",
            "blocks",
            "max_blocks",
            "repetitions",
            "timeout",
            "seed",
            "budget",
            "target_ci",
            "margin",
            "runs",
            "unknown",
        ]
    ),
    st.one_of(_value, st.lists(_run, max_size=3), st.just("all")),
)
_small = st.one_of(
    st.integers(min_value=-3, max_value=5000),
    st.sampled_from(["1..4", "1..2*cores", "5..1", "0..99999", "64..4096"]),
)
_plausible_run = st.fixed_dictionaries(
    {"workload": st.sampled_from(_WORKLOADS[:4])},
    optional={
        "params": st.dictionaries(
            st.sampled_from(_PARAMS), st.one_of(_small, st.lists(_small, max_size=5))
        )
    },
)
_plausible_suite = st.fixed_dictionaries(
    {"runs": st.lists(_plausible_run, min_size=1, max_size=3)},
    optional={
        "blocks": st.integers(min_value=-2, max_value=10**12),
        "repetitions": st.integers(min_value=-2, max_value=10**12),
        "timeout": st.floats(min_value=-1, max_value=1e9),
        "seed": st.integers(min_value=-5, max_value=2**70),
        "budget": st.sampled_from(["2m", "0", "none", "1h30m", "soon"]),
        "target_ci": st.sampled_from(["3%", "0.03", "200%", "x"]),
        "margin": st.sampled_from(["3%", "0.03", "200%", "x"]),
        "allocators": st.one_of(
            st.just("all"),
            st.lists(st.sampled_from(["glibc", "jemalloc", "nosuch", ""]), max_size=3),
        ),
    },
)
_suite = st.one_of(_plausible_suite, _plausible_suite, _random_suite)
_random_entry = st.dictionaries(
    st.sampled_from(
        [
            "description",
            "system",
            "library",
            "package",
            "version",
            "baseline",
            "hidden",
            "env",
            "variant",
            "unknown",
        ]
    ),
    st.one_of(
        _value,
        st.dictionaries(
            st.text(max_size=6),
            st.dictionaries(st.sampled_from(["env", "description"]), _value, max_size=2),
            max_size=2,
        ),
    ),
)
_variant = st.fixed_dictionaries(
    {}, optional={"env": st.dictionaries(st.sampled_from(["X", "Y"]), st.text(max_size=3))}
)
_plausible_entry = st.fixed_dictionaries(
    {},
    optional={
        "library": st.one_of(
            st.just("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"),
            st.lists(st.sampled_from(["/nonexistent.so", "*.so", ""]), max_size=2),
        ),
        "system": st.booleans(),
        "version": st.sampled_from(["probe:jemalloc", "dpkg", "auto", "none", "x"]),
        "env": st.dictionaries(
            st.sampled_from(["MALLOC_CONF", "A", ""]), st.text(max_size=6), max_size=2
        ),
        "variant": st.dictionaries(
            st.sampled_from(["v", "nodecay", "a:b", ""]), _variant, max_size=2
        ),
    },
)
_catalog = st.one_of(
    st.fixed_dictionaries(
        {
            "allocator": st.dictionaries(
                st.sampled_from(["mine", "glibc", "a b", "x:y", ""]), _plausible_entry, max_size=3
            )
        }
    ),
    st.dictionaries(
        st.sampled_from(["allocator", "recipe", "unknown"]),
        st.dictionaries(st.text(max_size=8), _random_entry, max_size=3),
    ),
)


def _as_file(tmp: Path, doc: dict[str, object], damage: bytes) -> Path:
    try:
        text = tomli_w.dumps(doc).encode()
    except (TypeError, ValueError):  # not every generated value is TOML
        text = b"x = 1\n"
    path = tmp / "f.toml"
    path.write_bytes(text + damage)
    return path


@dataclass
class Tally:
    """One fuzz test's examples: accepted, or refused with a message naming the file (or
    saying what else it refuses). A traceback is re-raised: hypothesis shrinks it and
    the test fails."""

    kind: str
    accepted: int = 0
    refused: int = 0

    def attempt(self, path: Path, load: Callable[[], object], *or_says: str) -> None:
        """`or_says`: what a refusal that is not about the file says instead."""
        try:
            load()
            self.accepted += 1
        except UserError as e:
            assert any(t in str(e) for t in (path.name, *or_says)), (
                f"a refusal that names neither the file nor {or_says}: {e}"
            )
            self.refused += 1

    def check(self) -> None:
        """The figures, counted by this test itself: every example ran, and the fuzzer
        reached both sides (a generator that only makes garbage tests one of them)."""
        print(
            f"\nfuzzed {self.kind} files: {self.accepted + self.refused} tried, "
            f"{self.accepted} accepted, {self.refused} refused with a message naming the "
            "file, 0 tracebacks"
        )
        assert 0 < self.accepted + self.refused <= FUZZ
        assert self.accepted > 0 and self.refused > 0


FUZZED = settings(
    max_examples=FUZZ,
    deadline=5000,
    derandomize=True,
    database=None,  # every run tries the same FUZZ examples, none replayed from earlier
    suppress_health_check=[HealthCheck.too_slow],
)


def test_fuzzed_suite_files_load_or_say_why(tmp_path: Path) -> None:
    tally, catalog = Tally("suite"), workloads.load_catalog()

    @FUZZED
    @given(
        doc=_suite, damage=st.sampled_from([b""] * 5 + [b"\xff\xfe", b"[[runs]]\n", b"x = [" * 3])
    )
    def fuzz(doc: dict[str, object], damage: bytes) -> None:
        path = _as_file(tmp_path, doc, damage)

        def load() -> None:
            suite = suites.load_suite(str(path))
            cells = plan.rows(suite, catalog, {})
            plan.check_size(2, len(cells), suite.blocks, confirmed=False)

        tally.attempt(path, load, "add --yes to start it anyway", "fit one campaign")  # its size

    fuzz()
    tally.check()


def test_fuzzed_catalog_files_load_or_say_why(tmp_path: Path) -> None:
    tally = Tally("catalog")

    @FUZZED
    @given(doc=_catalog, damage=st.sampled_from([b""] * 5 + [b"\xff", b"[allocator.x]\n"]))
    def fuzz(doc: dict[str, object], damage: bytes) -> None:
        path = _as_file(tmp_path, doc, damage)
        tally.attempt(path, lambda: allocators.load_catalog([path]))

    fuzz()
    tally.check()


_good_row = {
    "seq": 0,
    "allocator": "glibc",
    "workload": "churn",
    "params": '{"threads": 1}',
    "rep": 0,
    "status": "ok",
    "wall_s": 1.0,
    "user_s": 1.0,
    "sys_s": 0.0,
    "maxrss_kib": 1000,
    "metric.ops": 5.0,
    "label.host": "a",
}
_row = st.one_of(
    st.just(_good_row),
    st.just(_good_row | {"allocator": "jemalloc", "wall_s": 0.8}),
    st.just(_good_row | {"rep": 1, "wall_s": 1.1}),
    # a good row with some of its values replaced, dropped or added to
    st.builds(
        lambda changes, drop: {k: v for k, v in (_good_row | changes).items() if k not in drop},
        st.dictionaries(
            st.sampled_from([*_good_row, "metric.x", "label.y", "colour"]),
            st.one_of(
                _value, st.sampled_from(["ok", "crashed", "{}", "[1]", "{", '{"threads": 2}'])
            ),
            max_size=3,
        ),
        st.sets(st.sampled_from(list(_good_row)), max_size=2),
    ),
    _value,
)
_runs_doc = st.fixed_dictionaries(
    {
        "format": st.sampled_from(["allocmark-runs"] * 5 + ["allocmark-summary", ""]),
        "version": st.sampled_from([1] * 5 + [2, "1", None]),
        "rows": st.one_of(st.lists(_row, max_size=4), st.lists(_row, max_size=4), _value),
    },
    optional={
        "campaign": st.one_of(
            st.fixed_dictionaries({}, optional={"baseline": st.one_of(st.just("glibc"), _scalar)}),
            _value,
        )
    },
)


def test_fuzzed_runs_exports_compare_or_say_why(tmp_path: Path) -> None:
    tally = Tally("runs export")

    @FUZZED
    @given(doc=_runs_doc)
    def fuzz(doc: dict[str, object]) -> None:
        path = tmp_path / "runs.json"
        path.write_text(json.dumps(doc))
        tally.attempt(
            path,
            lambda: compare.compare(compare.load(str(path)), compare.load(str(path)), "time_s"),
        )

    fuzz()
    tally.check()


# -- hostile input: a clean ERROR and exit 2, never a traceback ---------------------
@pytest.fixture(scope="module")
def good_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("good") / "good.db"
    r = cli(
        "run",
        "-w",
        "churn",
        "-a",
        "glibc,glibc:arena2",
        "-n",
        "2",
        "--max-blocks",
        "2",
        "-p",
        "count=1000",
        "--db",
        str(db),
    )
    assert r.returncode == 0, r.stderr
    return db


def _damaged_page(db: Path, tmp: Path) -> Path:
    out = tmp / "damaged.db"
    data = bytearray(db.read_bytes())
    data[4096 * 2 :] = b"\xff" * (len(data) - 4096 * 2)  # all but the schema's pages
    out.write_bytes(bytes(data))
    return out


def _edited(name: str, *statements: str) -> Callable[[Path, Path], Path]:
    """A copy of the good database with `statements` applied to it."""

    def make(db: Path, tmp: Path) -> Path:
        out = tmp / name
        out.write_bytes(db.read_bytes())
        with sqlite3.connect(out) as con:
            for statement in statements:
                con.execute(statement)
        return out

    return make


_hostile_values = _edited(
    "hostile.db",
    "UPDATE runs SET status='weird' WHERE id=1",
    "UPDATE runs SET status='failed', detail='\x1b]0;TITLE\x07\x1b[31mboom' WHERE id=4",
    *(
        f"UPDATE {table} SET {column}='[/]\x1b[31mred' WHERE {column}='glibc:arena2'"
        for table, column in (("runs", "allocator"), ("plan", "allocator"), ("allocators", "name"))
    ),
)
_bad_params = _edited("params.db", "UPDATE runs SET params_json='{bad' WHERE id=2")
_text_number = _edited("number.db", "UPDATE runs SET wall_s='abc' WHERE id=3")


def _file(name: str, data: bytes) -> Callable[[Path, Path], Path]:
    def make(db: Path, tmp: Path) -> Path:
        (tmp / name).write_bytes(data)
        return tmp / name

    return make


HOSTILE = {
    "damaged page, report": (["report", "--db", "{x}"], _damaged_page, "malformed"),
    "damaged page, compare": (["compare", "{x}", "{db}"], _damaged_page, "malformed"),
    "damaged JSON column": (
        ["report", "--db", "{x}", "--runs", "--format", "csv"],
        _bad_params,
        "damaged",
    ),
    "text in a number column": (["compare", "{x}", "{db}"], _text_number, "damaged"),
    "deep runs JSON": (
        ["compare", "{x}", "{db}"],
        _file("deep.json", b"[" * 100000 + b"]" * 100000),
        "nested too deeply",
    ),
    "rows not a list": (
        ["compare", "{x}", "{db}"],
        _file(
            "rows.json", json.dumps({"format": "allocmark-runs", "version": 1, "rows": 5}).encode()
        ),
        "key 'rows'",
    ),
    "invalid UTF-8 suite": (
        ["run", "--suite", "{x}", "--db", "{tmp}/n.db"],
        _file("u.toml", b'description = "\xff"\n'),
        "not UTF-8",
    ),
    "5000-deep TOML": (
        ["run", "--suite", "{x}", "--db", "{tmp}/n.db"],
        _file("d.toml", b"x = " + b"[" * 5000 + b"]" * 5000),
        "nested too deeply",
    ),
    "seed 10^30 in a suite": (
        ["run", "--suite", "{x}", "--db", "{tmp}/n.db"],
        _file("s.toml", b'seed = 1000000000000000000000000000000\n[[runs]]\nworkload = "churn"\n'),
        "key 'seed'",
    ),
    "4-byte ELF": (
        ["run", "-a", "mine={x}", "-w", "churn", "--db", "{tmp}/n.db"],
        _file("tiny.so", b"\x7fELF"),
        "truncated ELF",
    ),
    "0-byte database": (["report", "--db", "{x}"], _file("zero.db", b""), "an empty file"),
}
PLAIN = {
    "--seed 10^20": (["run", "-w", "churn", "--seed", str(10**20), "--db", "{tmp}/n.db"], "--seed"),
    "--timeout inf": (["try", "--timeout", "inf", "--", "true"], "--timeout"),
    "duplicate names": (
        [
            "run",
            "-a",
            "glibc,glibc=/usr/lib/x86_64-linux-gnu/libc.so.6",
            "-w",
            "churn",
            "--db",
            "{tmp}/n.db",
        ],
        "more than once",
    ),
    "unwritable -o": (
        ["report", "--db", "{db}", "--format", "md", "-o", "/proc/no/x.md"],
        "/proc/no",
    ),
    "unwritable --plots": (["report", "--db", "{db}", "--plots", "/proc/no"], "/proc/no"),
    "directory as db": (["report", "--db", "{tmp}"], "is a directory"),
    "/dev/zero as db": (["report", "--db", "/dev/zero"], "not a regular file"),
    "-a ''": (["run", "-a", "", "-w", "churn", "--db", "{tmp}/n.db"], "names no allocator"),
    "-a ','": (["run", "-a", ",", "-w", "churn", "--db", "{tmp}/n.db"], "names no allocator"),
    "-w ''": (["run", "-w", "", "--db", "{tmp}/n.db"], "empty workload name"),
    "suite without runs": (
        ["run", "--suite", "{tmp}/empty.toml", "--db", "{tmp}/n.db"],
        "nothing to run",
    ),
    "-a NAME=DIR": (
        ["run", "-a", "d={tmp}", "-w", "churn", "--db", "{tmp}/n.db"],
        "is a directory, not a shared library",
    ),
    "-a non-ASCII name": (
        ["run", "-a", "é=/usr/lib/x86_64-linux-gnu/libc.so.6", "-w", "churn", "--db", "{tmp}/n.db"],
        "may hold only ASCII",
    ),
    "-a 100-character name": (
        [
            "run",
            "-a",
            "x" * 100 + "=/usr/lib/x86_64-linux-gnu/libc.so.6",
            "-w",
            "churn",
            "--db",
            "{tmp}/n.db",
        ],
        "at most 64",
    ),
    "--timeout nan": (["try", "--timeout", "nan", "--", "true"], "not a number of seconds"),
    "--timeout 0": (["try", "--timeout", "0", "--", "true"], "outside 0.1 s"),
    "resume of a new file": (["run", "--resume", "--db", "{tmp}/n.db"], "no such results"),
    "unknown workload": (["run", "-w", "nosuch", "--db", "{tmp}/n.db"], "nosuch"),
}


def _check_refused(args: list[str], message: str, tmp: Path, **fill: str) -> None:
    argv = [a.format(tmp=tmp, **fill) for a in args]
    r = cli(*argv)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert message in r.stderr, r.stderr


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_files_are_refused_cleanly(case: str, good_db: Path, tmp_path: Path) -> None:
    args, make, message = HOSTILE[case]
    before = good_db.read_bytes()
    x = make(good_db, tmp_path)
    _check_refused(args, message, tmp_path, x=str(x), db=str(good_db))
    assert good_db.read_bytes() == before  # nothing stored is touched
    if case == "0-byte database":
        assert x.stat().st_size == 0


@pytest.mark.parametrize("case", list(PLAIN))
def test_bad_arguments_are_refused_cleanly(case: str, good_db: Path, tmp_path: Path) -> None:
    (tmp_path / "empty.toml").write_text("runs = []\n")
    args, message = PLAIN[case]
    _check_refused(args, message, tmp_path, db=str(good_db))
    assert not (tmp_path / "n.db").exists()  # a refused command creates no file


def test_hostile_values_in_a_database_are_shown_as_text(good_db: Path, tmp_path: Path) -> None:
    db = _hostile_values(good_db, tmp_path)
    for args in (
        ["report", "--db", str(db)],
        ["report", "--db", str(db), "--runs", "--format", "csv"],
        ["report", "--db", str(db), "--format", "html", "-o", str(tmp_path / "h.html")],
        ["compare", str(db), str(good_db)],
    ):
        r = cli(*args)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert "\x1b" not in r.stdout  # the escape is printed, not obeyed
    kept = tmp_path / "runs.csv"  # a CSV file keeps the text inert: controls as \xNN
    r = cli("report", "--db", str(db), "--runs", "--format", "csv", "-o", str(kept))
    assert r.returncode == 0, r.stderr
    assert "\\x1b]0;TITLE" in kept.read_text() and "\x1b" not in kept.read_text()
    exact = tmp_path / "runs.json"  # the JSON export keeps the data as stored
    r = cli("report", "--db", str(db), "--runs", "--format", "json", "-o", str(exact))
    assert r.returncode == 0, r.stderr
    assert "\\u001b]0;TITLE" in exact.read_text()
    table = cli("report", "--db", str(db)).stdout  # headers fold to the cells' width
    assert "[/]\\x1b" in table and "[31mred" in table and "\x1b" not in table


def test_kill_points_then_resume_lose_and_repeat_nothing(tmp_path: Path) -> None:
    from tests.test_cli import count_runs, start_slow_campaign, wait_for_runs

    lost = repeated = 0
    points = (1, 3, 6)
    for point in points:
        db = tmp_path / f"kill{point}.db"
        proc = start_slow_campaign(
            db, "glibc,glibc:arena2", 4, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        wait_for_runs(db, point)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        with sqlite3.connect(db) as con:
            before = con.execute("SELECT seq, started, wall_s FROM runs ORDER BY seq").fetchall()
        r = cli("run", "--resume", "--db", str(db))
        assert r.returncode == 0, r.stderr
        with sqlite3.connect(db) as con:
            after = con.execute("SELECT seq, started, wall_s FROM runs ORDER BY seq").fetchall()
            planned = con.execute("SELECT count(*) FROM plan").fetchone()[0]
        seqs = [s for s, _, _ in after]
        lost += planned - len(set(seqs))
        repeated += len(seqs) - len(set(seqs)) + sum(b not in after for b in before)
        assert count_runs(db) == planned
    print(
        f"\nkill -9 at {len(points)} points, then --resume: {lost} runs lost, "
        f"{repeated} repeated or rewritten"
    )
    assert lost == 0 and repeated == 0


def test_a_flooding_program_costs_neither_disk_nor_memory(tmp_path: Path) -> None:
    import resource

    from allocmark.model import RunSpec
    from allocmark.run import execute

    spec = RunSpec(
        seq=0,
        allocator="x",
        workload="w",
        params=(),
        rep=0,
        env=(),
        argv=("sh", "-c", "yes flooding-the-terminal >&2"),
        timeout=2.0,
    )
    before_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    before_disk = shutil.disk_usage(tempfile.gettempdir()).used
    r = execute.run(spec)
    grew_disk = shutil.disk_usage(tempfile.gettempdir()).used - before_disk
    grew_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before_rss
    print(
        f"\nflooding stderr for {spec.timeout:g} s: {r.metrics['stderr_bytes'] / 1e6:.0f} MB "
        f"written, {max(0, grew_disk) >> 10} KiB more disk in use after the run, "
        f"allocmark's peak RSS +{grew_rss} KiB"
    )
    assert r.status.value == "timeout" and r.metrics["stderr_bytes"] > 10e6
    assert grew_rss < 32 << 10 and grew_disk < 64 << 20  # others share the disk: a margin


# -- the smaller ones ---------------------------------------------------------------
def test_help_shows_percentages_once() -> None:
    text = cli("run", "--help").stdout
    assert "else 3%)" in text and "%%" not in text


def test_a_regression_threshold_above_100_percent_is_accepted(
    good_db: Path, tmp_path: Path
) -> None:
    """A limit above 100 % is taken, and holds: an allocator three times slower (+200 %)
    fails it at 150 % and passes at 250 %. Times are fixed (1 % spread), so that only the
    comparison can fail it."""
    export = tmp_path / "runs.json"
    assert (
        cli(
            "report", "--db", str(good_db), "--runs", "--format", "json", "-o", str(export)
        ).returncode
        == 0
    )
    doc = json.loads(export.read_text())
    for i, row in enumerate(doc["rows"]):
        row["wall_s"] = 0.1 * (1 + (i % 3 - 1) / 100)
    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps(doc))
    for row in doc["rows"]:  # glibc ran in both: the control, against which arena2 is 3x
        row["wall_s"] *= 3 if row["allocator"] == "glibc:arena2" else 1
    after.write_text(json.dumps(doc))
    failed = cli("compare", str(before), str(after), "--fail-above", "150%")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "regression(s) above 150.0%" in failed.stderr
    passed = cli("compare", str(before), str(after), "--fail-above", "250%")
    assert passed.returncode == 0, passed.stdout + passed.stderr


def test_a_path_with_brackets_is_the_file_it_names(tmp_path: Path, good_db: Path) -> None:
    lib = tmp_path / "lib[1].so"
    shutil.copy("/usr/lib/x86_64-linux-gnu/libc.so.6", lib)
    found = allocators.verify(allocators.parse_selection([f"mine={lib}"]).adhoc[0])
    assert found.library == str(lib), found.reason
    db = tmp_path / "r[1].db"
    shutil.copy(good_db, db)
    assert cli("report", "--db", str(db)).returncode == 0


@pytest.mark.parametrize(
    ("text", "outcome"),
    [
        ('timeout = 2.5\n[[runs]]\nworkload = "churn"\n', "accepted"),
        (
            '[[runs]]\nworkload = "churn"\nparams = {threads = "5..1"}\n',
            "the range '5..1' is empty",
        ),
        ('[[runs]]\nworkload = "churn"\nparams = {count = true}\n', "expected an integer"),
    ],
)
def test_suite_values_are_taken_or_refused_by_name(tmp_path: Path, text: str, outcome: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(text)
    try:
        suite = suites.load_suite(str(path))
        plan.rows(suite, workloads.load_catalog(), {})
        got = "accepted"
    except UserError as e:
        got = str(e)
    assert outcome in got


def test_ctrl_c_while_starting_prints_no_traceback(tmp_path: Path) -> None:
    # Delays across start-up (imports, catalog validation, a new database's schema),
    # each with a new database. Once this found a validator pydantic-core left broken
    # and a sound new database called unusable (interrupts.py).
    n = max(4, TRIALS // 5)
    tracebacks, wrong = 0, []
    for i in range(n):
        delay = 0.05 + i * 1.15 / (n - 1)
        p = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "allocmark",
                "run",
                "-w",
                "churn",
                "-a",
                "glibc",
                "--db",
                str(tmp_path / f"c{i}.db"),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
        # Python's own start-up (site, runpy) is not ours to guard: count what is.
        tracebacks += "Traceback" in err and "allocmark" in err
        # 130 or death by SIGINT (-2: what a shell shows as 130 too); 0: it had finished.
        if "Traceback" not in err and p.returncode not in (130, -signal.SIGINT, 0):
            wrong.append(f"{delay:.2f} s: exit {p.returncode}: {err.strip()[-200:]}")
    print(
        f"\nCtrl-C during start-up: {n} delays of 0.05-1.2 s, {tracebacks} tracebacks, "
        f"{len(wrong)} wrong exits"
    )
    assert tracebacks == 0 and wrong == [], wrong


def test_plans_are_counted_before_they_are_built(tmp_path: Path) -> None:
    huge = tmp_path / "huge.toml"
    huge.write_text('blocks = 1000000000\n[[runs]]\nworkload = "churn"\n')
    t0 = time.monotonic()
    _check_refused(
        ["run", "--suite", str(huge), "-a", "glibc", "--db", "{tmp}/n.db"],
        "1,000,000,000 runs",
        tmp_path,
    )
    assert time.monotonic() - t0 < 30  # refused, not built
    _check_refused(
        [
            "run",
            "-w",
            "churn",
            "-a",
            "glibc,glibc:arena2,jemalloc",
            "-n",
            "8000",
            "--db",
            "{tmp}/n.db",
        ],
        "add --yes",
        tmp_path,
    )
    assert not (tmp_path / "n.db").exists() or Store(tmp_path / "n.db").campaigns() == []


def test_an_immutable_database_is_read(good_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "immutable.db"
    shutil.copy(good_db, db)
    if subprocess.run(["chattr", "+i", str(db)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not allowed here")
    try:
        r = cli("report", "--db", str(db))
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert "Answer: " in r.stdout
    finally:
        subprocess.run(["chattr", "-i", str(db)], check=True)


_long_name = _edited(
    "long.db",
    *(
        f"UPDATE {table} SET {column}='{'x' * 100_000}' WHERE {column}='glibc:arena2'"
        for table, column in (("runs", "allocator"), ("plan", "allocator"), ("allocators", "name"))
    ),
)


def test_plot_files_beside_a_csv_have_every_figure(good_db: Path, tmp_path: Path) -> None:
    """A CSV reads no answers, the plot files do: the answer's picture is drawn there
    as it is beside the terminal's table."""
    written = []
    for fmt in ("csv", "table"):
        plots = tmp_path / f"plots-{fmt}"
        r = cli(
            "report",
            "--db",
            str(good_db),
            "--format",
            fmt,
            "-o",
            str(tmp_path / f"report.{fmt}"),
            "--plots",
            str(plots),
        )
        assert r.returncode == 0, r.stderr
        written.append(sorted(p.name for p in plots.iterdir()))
    assert written[0] == written[1] and "time-vs-rss.svg" in written[0]


def test_a_100000_character_name_is_cut_in_the_plots(good_db: Path, tmp_path: Path) -> None:
    from allocmark.report.chart import TEXT_MAX

    db, html, plots = _long_name(good_db, tmp_path), tmp_path / "long.html", tmp_path / "plots"
    r = cli("report", "--db", str(db), "--format", "html", "-o", str(html), "--plots", str(plots))
    assert r.returncode == 0, r.stderr
    # The page's figures (Plotly JSON): every name a trace, a panel or an axis shows.
    page = html.read_text()
    found = re.search(r'<script type="application/json" id="figure-data">(.*?)</script>', page)
    assert found
    shown = [
        text
        for fig in json.loads(found.group(1)).values()
        for text in [
            *(t.get("name", "") for t in fig["data"]),
            *(str(x) for t in fig["data"] for x in (t.get("x") or []) if isinstance(x, str)),
            *(a["text"] for a in fig["layout"].get("annotations", [])),
        ]
    ]
    assert shown and max(len(t) for t in shown) <= TEXT_MAX
    assert any("…" in t for t in shown)  # the name is there, cut in the middle
    # The plot files (matplotlib's SVG text) alike.
    svgs = [p.read_text() for p in plots.glob("*.svg")]
    texts = [t for svg in svgs for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]
    assert svgs and texts and max(len(t) for t in texts) <= TEXT_MAX
    assert any("…" in t for t in texts)
