"""The bad-input battery (issue 53): every case a new user typed or could type, with the
exit code it must end with and the words its message must hold: the value that is
wrong and the fix. None may end in a traceback, and none may be accepted silently
(a refused command creates no database).

Each case is one line of the table below; `{tmp}` is the case's own directory, `{db}`
a finished campaign's database (one `try` of `true`), `{x}` a file the case writes
first. A case whose stdout is `/dev/full` checks what a full disk under the output
does. Exit codes: 2 a usage error, 1 a result with failed runs, 0 success.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import cli

LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6"
QUICK = "-a glibc,jemalloc -w churn -p count=1000 -p rounds=1 --db {tmp}/n.db"


@dataclass(frozen=True)
class Case:
    argv: str  # shell words, after `allocmark`
    code: int
    words: tuple[str, ...]
    files: dict[str, str] = field(default_factory=dict)  # name -> text, under {tmp}
    stdout: str = ""  # "" (captured) or a path the output goes to
    creates: bool = False  # it may create {tmp}/n.db (a campaign ran)


def c(argv: str, code: int, *words: str, **kw: object) -> Case:
    return Case(argv, code, words, **kw)  # type: ignore[arg-type]


SUITE = '[[runs]]\nworkload = "churn"\n'
CASES: dict[str, Case] = {
    # The command line itself
    "--version": c("--version", 0, "allocmark 0"),
    "-h": c("-h", 0, "Usage:", "try"),
    "verb -h": c("try -h", 0, "--warmup", "--prepare", "--show-output", "--export-json"),
    "alloc -h": c("alloc -h", 0, "Usage:"),
    "completion": c("--show-completion bash", 0, "_completion()", "complete -o default"),
    "dry run": c(f"run {QUICK} --dry-run", 0, "dry run: adhoc: 2 allocators", "nothing was"),
    "unknown verb": c("rn", 2, "No such command 'rn'"),
    "-q and -v": c("-q -v allocators", 2, "-q and -v contradict"),
    "unknown option": c("run --blok 3", 2, "No such option: --blok", "--blocks"),
    # -a
    "-a typo": c(f"run {QUICK} -a jemaloc", 2, "'jemaloc'", "did you mean 'jemalloc'"),
    "-a typo of a variant": c("run -w churn -a glibc:arena3", 2, "'glibc:arena3'", "glibc:arena2"),
    "-a empty name": c("run -w churn -a glibc,,jemalloc", 2, "'glibc,,jemalloc'", "empty name"),
    "-a trailing comma": c("run -w churn -a glibc,", 2, "'glibc,'", "empty name"),
    "-a ''": c("run -w churn -a ''", 2, "names no allocator", "-a glibc,jemalloc"),
    "-a twice": c("run -w churn -a glibc,glibc", 2, "'glibc'", "more than once"),
    "-a missing library": c("run -w churn -a mine=/nonexistent/x.so", 2, "/nonexistent/x.so"),
    "-a not a library": c("run -w churn -a mine=/etc/passwd", 2, "/etc/passwd"),
    "-a directory": c("run -w churn -a mine=/tmp", 2, "is a directory, not a shared library"),
    "-a bad name": c(f"run -w churn -a 'my lib={LIBC}'", 2, "'my lib'", "ASCII letters"),
    "-a bad env": c(f"run -w churn -a 'mine={LIBC}:NOEQUALS'", 2, "'NOEQUALS'", "ENV=VALUE"),
    "-a unknown recipe": c("run -w churn -a nosuch@1.0", 2, "no recipe 'nosuch'", "recipes:"),
    "-a recipe typo": c("run -w churn -a mimaloc@2.1.7", 2, "did you mean 'mimalloc'"),
    "-a unknown version": c("run -w churn -a jemalloc@0.0.1", 2, "jemalloc@0.0.1", "versions"),
    "-a git without revisions": c("run -w churn -a 'x@git:/tmp'", 2, "name the revisions"),
    "-a git without --build": c("run -w churn -a 'x@git:/tmp#v1'", 2, "--build"),
    "--build alone": c("run -w churn --build make", 2, "--build and --library go together"),
    "--library alone": c("run -w churn --library x.so", 2, "--build and --library go together"),
    # -w and suites
    "-w typo": c("run -w chrn", 2, "'chrn'", "did you mean 'churn'"),
    "-w ''": c("run -w ''", 2, "empty workload name", "-w churn,larson"),
    "-w empty name": c("run -w churn,,larson", 2, "'churn,,larson'", "empty workload name"),
    "-w unknown": c("run -w nosuch", 2, "'nosuch'", "known:"),
    "--suite typo": c("run --suite quik", 2, "'quik'", "did you mean 'quick'"),
    "--suite unknown": c("run --suite nosuch", 2, "'nosuch'", "built-in suites"),
    "--suite missing file": c("run --suite /nonexistent/s.toml", 2, "/nonexistent/s.toml"),
    "--suite -w not in it": c(
        "run --suite quick -w ruby", 2, "no workload 'ruby'", "its workloads"
    ),
    "--suite -w typo": c("run --suite quick -w lrson", 2, "did you mean 'larson'"),
    "suite bad TOML": c("run --suite {tmp}/s.toml", 2, "s.toml", files={"s.toml": "[[runs]\n"}),
    "suite unknown key": c(
        "run --suite {tmp}/s.toml", 2, "unknown key", files={"s.toml": "speed = 1\n" + SUITE}
    ),
    "suite unknown workload": c(
        "run --suite {tmp}/s.toml",
        2,
        "'chrn'",
        "did you mean 'churn'",
        files={"s.toml": '[[runs]]\nworkload = "chrn"\n'},
    ),
    "suite range beyond 2^64": c(
        "run --suite {tmp}/s.toml",
        2,
        "64-bit",
        "count",
        files={"s.toml": SUITE + '[runs.params]\ncount = "1..99999999999999999999999999"\n'},
    ),
    "suite empty range": c(
        "run --suite {tmp}/s.toml",
        2,
        "'5..1' is empty",
        files={"s.toml": SUITE + '[runs.params]\ncount = "5..1"\n'},
    ),
    "suite empty list": c(
        "run --suite {tmp}/s.toml",
        2,
        "empty list",
        files={"s.toml": SUITE + "[runs.params]\ncount = []\n"},
    ),
    "suite margin 3": c(
        "run --suite {tmp}/s.toml", 2, "margin", files={"s.toml": "margin = 3\n" + SUITE}
    ),
    "suite without runs": c("run --suite {tmp}/s.toml", 2, "nothing to run", files={"s.toml": ""}),
    "suite wrong type": c(
        "run --suite {tmp}/s.toml", 2, "blocks", files={"s.toml": 'blocks = "many"\n' + SUITE}
    ),
    # -p
    "-p without =": c("run -w churn -p count", 2, "'count'", "NAME=VALUE"),
    "-p without name": c("run -w churn -p =3", 2, "'=3'", "NAME=VALUE"),
    "-p without value": c("run -w churn -p count=", 2, "'count='", "NAME=VALUE"),
    "-p empty value": c("run -w churn -p count=1,,2", 2, "'count=1,,2'", "NAME=VALUE"),
    "-p typo": c("run -w churn -p cont=3", 2, "-p cont", "did you mean 'count'"),
    "-p twice": c("run -w churn -p count=3 -p count=4", 2, "given twice", "-p count=3,4"),
    "-p not a number": c("run -w churn -p count=abc", 2, "count", "integer, got 'abc'"),
    "-p below minimum": c("run -w churn -p count=0", 2, "count must be >= 1"),
    "-p beyond 64 bits": c("run -w churn -p count=99999999999999999999999", 2, "64-bit"),
    "-p negative threads": c("run -w churn -p threads=-1", 2, "threads must be >= 1"),
    "-p bad relation": c("run -w churn -p size_min=100 -p size_max=10", 2, "size_min", "size_max"),
    "-p bool": c("run -w aging -p release=maybe", 2, "release", "true or false"),
    "-p for a command": c("try -p count=3 -- true", 2, "No such option: -p"),
    # numbers
    "--margin 3": c("run -w churn --margin 3", 2, "'3'", "a fraction", "3%"),
    "--margin 0": c("run -w churn --margin 0", 2, "'0'", "never be met"),
    "--margin 100%": c("run -w churn --margin 100%", 2, "'100%'", "below 100%"),
    "--margin -1%": c("run -w churn --margin -1%", 2, "'-1%'", "above 0%"),
    "--margin text": c("run -w churn --margin abc", 2, "'abc'", "percentage"),
    "--margin nan": c("run -w churn --margin nan", 2, "'nan'"),
    "--budget huge": c("run -w churn --budget 99999999h", 2, "'99999999h'", "30 days"),
    "--budget text": c("run -w churn --budget abc", 2, "'abc'", "2m, 90s"),
    "--budget negative": c("run -w churn --budget -5m", 2, "'-5m'", "duration"),
    "--budget empty": c("run -w churn --budget ''", 2, "''", "duration"),
    "--timeout 0": c("run -w churn --timeout 0", 2, "outside 0.1 s"),
    "--timeout nan": c("run -w churn --timeout nan", 2, "not a number of seconds"),
    "--timeout inf": c("try --timeout inf -- true", 2, "not a number of seconds"),
    "--timeout a year": c("run -w churn --timeout 31536000", 2, "a week"),
    "--timeout text": c("run -w churn --timeout soon", 2, "'soon'"),
    "-n 0": c("run -w churn -n 0", 2, "-n", "0"),
    "-n text": c("run -w churn -n many", 2, "'many'"),
    "--max-blocks 0": c("run -w churn --max-blocks 0", 2, "--max-blocks"),
    "-n above --max-blocks": c("run -w churn -n 8 --max-blocks 5", 2, "--max-blocks 5", "-n"),
    "--seed negative": c("run -w churn --seed -1", 2, "--seed"),
    "--seed huge": c("run -w churn --seed 99999999999999999999", 2, "--seed"),
    "--memory-limit small": c("run -w churn --memory-limit 1k", 2, "'1k'", "from 1M to 1P"),
    "--memory-limit text": c("run -w churn --memory-limit lots", 2, "'lots'", "512M or 4G"),
    "--memory-limit huge": c("run -w churn --memory-limit 5P", 2, "'5P'", "from 1M to 1P"),
    "--sample 0": c("run -w churn --profile --sample 0", 2, "--sample"),
    "--dispatcher unknown": c("run -w churn --dispatcher cloud", 2, "'cloud'", "local"),
    # --resume
    "--take-over alone": c("run --take-over -w churn", 2, "--take-over goes with --resume"),
    "--resume with -a": c("run --resume -a glibc", 2, "drop -a"),
    "--resume of nothing": c("run --resume --db {tmp}/n.db", 2, "n.db"),
    "--resume without campaign": c("run --resume --db {db}", 2, "no unfinished campaign"),
    # databases
    "--db a directory (run)": c("run -w churn --db {tmp}", 2, "is a directory"),
    "--db a directory (report)": c("report --db {tmp}", 2, "is a directory"),
    "--db missing (report)": c("report --db {tmp}/none.db", 2, "none.db"),
    "--db not SQLite": c("report --db /etc/passwd", 2, "/etc/passwd"),
    "--db garbage": c("report --db {tmp}/g.db", 2, "g.db", files={"g.db": "x" * 5000}),
    "--db empty file": c("report --db {tmp}/e.db", 2, "an empty file", files={"e.db": ""}),
    "--db under /proc": c(
        "run -w churn --db /proc/allocmark.db", 2, "/proc/allocmark.db", "cannot create"
    ),
    "--db a device": c("report --db /dev/zero", 2, "not a regular file"),
    "--campaign unknown": c("report --db {db} --campaign 999", 2, "999"),
    "--campaign text": c("report --db {db} --campaign last", 2, "'last'"),
    # report
    "--format unknown": c("report --db {db} --format xml", 2, "'xml'", "choose table"),
    "--runs and --profile": c("report --db {db} --runs --profile", 2, "choose one"),
    "--runs as a table": c("report --db {db} --runs", 2, "--format csv"),
    "-o /dev/full json": c(
        "report --db {db} --format json -o /dev/full", 2, "/dev/full", "No space left"
    ),
    "-o /dev/full html": c(
        "report --db {db} --format html -o /dev/full", 2, "/dev/full", "No space left"
    ),
    "-o /dev/full csv": c("report --db {db} --format csv -o /dev/full", 2, "/dev/full"),
    "-o /dev/full md": c("report --db {db} --format md -o /dev/full", 2, "/dev/full"),
    "-o /dev/full table": c("report --db {db} -o /dev/full", 2, "/dev/full", "No space left"),
    "-o /proc/version": c(
        "report --db {db} --format json -o /proc/version", 2, "/proc/version", "cannot write"
    ),
    "-o a directory": c("report --db {db} --format md -o {tmp}", 2, "is a directory"),
    "-o under a file": c("report --db {db} -o /etc/passwd/x.md", 2, "is not a directory"),
    "--plots a file": c("report --db {db} --plots /etc/passwd", 2, "/etc/passwd", "is a file"),
    "--plots under /proc": c("report --db {db} --plots /proc/no", 2, "/proc/no"),
    "stdout full (report)": c("report --db {db}", 2, "cannot write the output", stdout="/dev/full"),
    "stdout full (json)": c("report --db {db} --format json", 2, "No space", stdout="/dev/full"),
    "stdout full (allocators)": c("allocators", 2, "cannot write the output", stdout="/dev/full"),
    "stdout full (workloads)": c("workloads", 2, "cannot write the output", stdout="/dev/full"),
    "stdout full (schema)": c("schema suite", 2, "cannot write the output", stdout="/dev/full"),
    # compare
    "compare with itself": c("compare {db} {db}", 2, "the same runs", "two campaigns"),
    "compare campaign with itself": c("compare {db}#1 {db}#1", 2, "the same runs"),
    "compare bad campaign": c("compare {db}#x {db}", 2, "must be a number"),
    "compare missing": c("compare {db} {tmp}/none.db", 2, "none.db"),
    "compare bad metric": c("compare {db} {db} --metric speed", 2, "'speed'", "throughput"),
    "compare --margin 3": c("compare {db} {db} --margin 3", 2, "write 3%"),
    # one rule for every percentage: --fail-above 5 was read as 500 %
    "compare --fail-above 5": c("compare {db} {db} --fail-above 5", 2, "'5'", "write 5%"),
    "--margin ''": c("run -w churn --margin ''", 2, "--margin", "2%"),
    "--memory-limit ''": c("run -w churn --memory-limit ''", 2, "--memory-limit", "512M"),
    "--budget 2": c("run -w churn --budget 2", 2, "'2'", "2s", "2m"),
    "--why --no-why": c("run -w churn --why --no-why", 2, "contradict"),
    "--scheduler alone": c("run -w churn --scheduler tcp://h:1", 2, "--dispatcher dask"),
    "shadowed baseline": c(
        "try -a glibc=/usr/lib/x86_64-linux-gnu/libc.so.6 -- true", 2, "baseline", "glibc-mine"
    ),
    "--env LD_PRELOAD": c("try --env LD_PRELOAD=/x.so -- true", 2, "LD_PRELOAD", "-a mine=/x.so"),
    "option after the command": c("try -a glibc true -n 5", 2, "-n after true", "-- true -n 5"),
    "--db under a file": c("try --db {tmp}/f/x.db -- true", 2, "not a directory", files={"f": ""}),
    "--db a device (try)": c("try --db /dev/full -- true", 2, "not a regular file"),
    "a directory not a repository": c(
        "try -a 'x@git:{tmp}#HEAD' --build make --library x.so -- true", 2, "not a git repository"
    ),
    "compare --fail-above text": c("compare {db} {db} --fail-above lots", 2, "--fail-above"),
    "compare bad JSON": c("compare {tmp}/r.json {db}", 2, "r.json", files={"r.json": "{"}),
    # try
    "try without command": c("try", 2, "Missing argument"),
    "try unknown command": c("try -- nonexistent-cmd-53", 2, "nonexistent-cmd-53", "not found"),
    "try not executable": c("try -- /etc/passwd", 2, "/etc/passwd"),
    "try --env without =": c("try --env FOO -- true", 2, "'FOO'", "NAME=VALUE"),
    "try --env without name": c("try --env =x -- true", 2, "'=x'"),
    "try --prepare empty": c("try --prepare '' -- true", 2, "runs nothing", "--prepare sync"),
    "try --warmup negative": c("try --warmup -1 -- true", 2, "--warmup"),
    "try --warmup huge": c("try --warmup 1000 -- true", 2, "--warmup"),
    "try --export-json dir": c("try --export-json {tmp} -- true", 2, "is a directory"),
    "try -n 0": c("try -n 0 -- true", 2, "-n"),
    "try a failing command": c(
        "try -a glibc,jemalloc --db {tmp}/n.db -- false",
        2,
        "exit code 1",
        "Fix the command",
        "-i",
        creates=True,
    ),
    "try a command past its timeout": c(
        "try -a glibc,jemalloc --timeout 0.3 --db {tmp}/n.db -- sleep 5",
        2,
        "timeout",
        "--timeout SECONDS",
        creates=True,
    ),
    "try -i with every run failing": c(
        "try -i -a glibc,jemalloc --no-why --db {tmp}/n.db -- false",
        1,
        "2 row×allocator pairs without a result",
        "command: glibc (failed 4/4)",
        creates=True,
    ),
    "run with every run failing": c(
        "run -a glibc -w churn -p count=99999999999999 -n 1 --max-blocks 1 --db {tmp}/n.db",
        1,
        "1 row×allocator pair without a result",
        "churn",
        creates=True,
    ),
    # the other verbs
    "profile of nothing": c("profile", 2, "-w", "one of the two"),
    "profile of both": c("profile -w churn -- true", 2, "one of the two"),
    "tune bad objective": c("tune --objective speed -w churn", 2, "'speed'"),
    "tune missing settings": c(
        "tune --settings /nonexistent/s.toml -w churn", 2, "/nonexistent/s.toml"
    ),
    "harden unknown test": c("harden --tests nope", 2, "'nope'", "the tests"),
    "bisect without build": c("bisect v1 v2 -w churn", 2, "--build CMD and --library LIB"),
    "bisect of nothing": c("bisect v1 v2 --build make --library x.so", 2, "one of the two"),
    "bisect missing repo": c(
        "bisect v1 v2 --repo /nonexistent/r --build make --library x.so -w churn",
        2,
        "/nonexistent/r",
    ),
    "bisect error rate": c(
        "bisect v1 v2 --build make --library x.so -w churn --error-rate 2", 2, "--error-rate"
    ),
    "bisect budget": c(
        "bisect v1 v2 --build make --library x.so -w churn --budget soon", 2, "--budget 'soon'"
    ),
    "schema unknown": c("schema nope", 2, "'nope'"),
    "alloc build unknown": c("alloc build nosuch@1", 2, "nosuch"),
    "allocators typo": c("allocators -a jemaloc", 2, "did you mean 'jemalloc'"),
    "allocators missing catalog": c("allocators --catalog /nonexistent/c.toml", 2, "c.toml"),
    "allocators bad catalog": c(
        "allocators --catalog {tmp}/c.toml", 2, "c.toml", files={"c.toml": "[[allocator]\n"}
    ),
    "run bad catalog": c(
        "run -w churn --catalog {tmp}/c.toml", 2, "c.toml", files={"c.toml": "x = \n"}
    ),
}


@pytest.fixture(scope="module")
def done_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished campaign: `try` of `true` under two allocators."""
    db = tmp_path_factory.mktemp("done") / "done.db"
    r = cli("try", "-a", "glibc,jemalloc", "--no-why", "--db", str(db), "--", "true")
    assert r.returncode == 0, r.stderr
    return db


def test_the_battery_is_large_enough() -> None:
    assert len(CASES) >= 120


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input(name: str, done_db: Path, tmp_path: Path) -> None:
    case = CASES[name]
    for file, text in case.files.items():
        (tmp_path / file).write_text(text)
    argv = shlex.split(case.argv.format(tmp=tmp_path, db=done_db))
    if case.stdout:
        with open(case.stdout, "w") as sink:
            done = subprocess.run(
                [sys.executable, "-m", "allocmark", *argv],
                stdout=sink,
                stderr=subprocess.PIPE,
                text=True,
                timeout=300,
                check=False,
            )
        said = done.stderr
    else:
        done = cli(*argv)
        said = done.stdout + done.stderr
    assert "Traceback" not in said, said
    assert done.returncode == case.code, (done.returncode, said[-3000:])
    missing = [w for w in case.words if w not in said]
    assert not missing, (missing, said[-3000:])
    if case.code == 2 and not case.creates:  # refused: nothing was made of it
        assert not (tmp_path / "n.db").exists()
    if case.code:  # the error is one line the user reads first, after the output
        errors = [line for line in said.splitlines() if line.startswith("ERROR:")]
        assert len(errors) <= 1, errors
        assert not said.startswith("\n"), said  # no blank line of a bar never shown


def test_the_readme_says_how_allocmark_gets_on_path() -> None:
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert "on your PATH" in readme and "make demo" in readme


def test_set_up_put_allocmark_on_path() -> None:
    """After `make setup` (which `make test` runs first), a fresh shell finds the
    command of this checkout."""
    found = subprocess.run(
        ["bash", "-lc", "command -v allocmark"],
        capture_output=True,
        text=True,
        env={"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/local/bin:/usr/bin:/bin"}
        | (
            {"PATH": f"{Path.home()}/.local/bin:/usr/local/bin:/usr/bin:/bin"}
            if os.getuid()
            else {}
        ),
        check=False,
    )
    assert found.returncode == 0, found.stderr
    target = Path(found.stdout.strip()).resolve()
    assert (
        target
        == Path(shutil.which("allocmark", path=str(Path(sys.executable).parent)) or "").resolve()
    )


def test_a_width_that_is_not_one_is_refused(done_db: Path) -> None:
    """ALLOCMARK_WIDTH=abc was ignored without a word (COLUMNS, the shell's, still is)."""
    r = cli("report", "--db", str(done_db), env={"ALLOCMARK_WIDTH": "abc"})
    assert r.returncode == 2 and "ALLOCMARK_WIDTH='abc'" in r.stderr, r.stderr
    assert "40 to 1000" in r.stderr and "Traceback" not in r.stderr
    r = cli("report", "--db", str(done_db), env={"COLUMNS": "abc"})
    assert r.returncode == 0, r.stderr


def test_a_closed_pipe_is_not_a_failure(done_db: Path) -> None:
    """`allocmark report | head -1` exited 1, which the docs keep for failed cells."""
    # `true` reads nothing and is gone long before allocmark's first write (its start
    # takes a third of a second): the write meets a closed pipe every time.
    cmd = f"{sys.executable} -m allocmark report --db {done_db} | true"
    r = subprocess.run(
        ["bash", "-c", cmd + "; exit ${PIPESTATUS[0]}"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, (r.returncode, r.stderr)


def test_the_report_of_a_failed_campaign_says_so_and_exits_1(tmp_path: Path) -> None:
    """A campaign whose command failed under the baseline printed an empty table and
    exited 0 when reported; now each format says it and exits 1 (its export first)."""
    db = tmp_path / "f.db"
    r = cli("try", "-a", "glibc,jemalloc", "--db", str(db), "--", "false")
    assert r.returncode == 2 and "Nothing else was run" in r.stderr, r.stderr
    for fmt in ("table", "json", "csv", "md"):
        done = cli("report", "--db", str(db), "--format", fmt)
        assert done.returncode == 1, (fmt, done.returncode, done.stderr)
        assert "campaign 1 failed: its command failed" in done.stderr, (fmt, done.stderr)
        assert "Traceback" not in done.stderr
