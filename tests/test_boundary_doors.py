"""Issue 65's findings, each written as the attack, through the CLI as a user runs it,
as root (docs/security.md: the two doors). Untrusted: the measured command, an
allocator library, a repository's build, a database from elsewhere. Each failed on
7832cb9; the doors themselves are tests/test_doors.py."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
from pathlib import Path

import pytest

from tests.allocators import tinyrepo
from tests.conftest import PYTHON, build_so, cli, readable, writable_by_all
from tests.test_boundary import CONT, _evil as evil_library

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the boundary is drawn when allocmark is root"),
]

QUICK = ("-n", "2", "--max-blocks", "2")
OTHER_CAMPAIGN = 0x5A000000 + 77  # a uid of the transient range: another campaign's


def _try(
    db: Path, *rest: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return cli("try", *QUICK, "--db", str(db), *rest, env=env)


# -- untrusted code outside the door -------------------------------------------------------
def test_tune_s_settings_display_never_runs_the_library_as_root(tmp_path: Path) -> None:
    """`tune -a mimalloc=./evil.so`: the display of the settings ran the library's
    constructors as root (10 times at 7832cb9)."""
    log = writable_by_all(tmp_path / "out") / "euids"
    log.touch()
    log.chmod(0o666)
    so = evil_library(tmp_path, log, tmp_path / "out" / "rooted")
    r = cli(
        "tune", "-a", f"mimalloc={so}", "-n", "1", "--max-blocks", "1", "--budget", "20s",
        "--db", str(tmp_path / "t.db"), "--", "true",
    )  # fmt: skip
    euids = log.read_text().split()
    assert "Traceback" not in r.stderr, r.stderr
    assert euids and "0" not in euids, euids
    assert not (tmp_path / "out" / "rooted").exists()


def test_each_bisect_decision_runs_as_an_identity_of_its_own(tmp_path: Path) -> None:
    """Each decision of a bisect is a campaign: at 7832cb9 they shared one uid claimed
    lazily, so one decision's program could reach the next's."""
    place = readable(tmp_path)
    repo = tinyrepo.make(place / "repo", slow=None, fat=2, broken=None, last=3)
    out = writable_by_all(place / "out")
    script = place / "who.py"
    script.write_text(
        f"import os\nopen('{out}/' + str(os.getuid()) + '.' + str(os.getpid()), 'w').close()\n"
        "b = bytearray(1 << 20)\n"
    )
    r = cli(
        "bisect", "--repo", str(repo.path), "--build", tinyrepo.BUILD,
        "--library", tinyrepo.OUTPUT, "--metric", "rss", "--max-blocks", "6",
        "--db", str(place / "b.db"), repo.commits[0], repo.commits[-1], "--", PYTHON, str(script),
        env={"ALLOCMARK_CACHE": str(place / "cache")}, timeout=600,
    )  # fmt: skip
    assert "Traceback" not in r.stderr, r.stderr
    with sqlite3.connect(place / "b.db") as con:
        campaigns = con.execute("SELECT count(*) FROM campaigns").fetchone()[0]
    uids = {p.name.split(".")[0] for p in out.iterdir()}
    assert campaigns >= 2, r.stdout + r.stderr
    assert "0" not in uids and len(uids) >= campaigns, (uids, campaigns)


def test_a_crate_s_build_never_runs_as_root(tmp_path: Path) -> None:
    """`cargo build` (a crate's build script, the C compiler it drives) ran as root with
    root's environment. The recipe's CC, a wrapper, says whom it ran as."""
    place = readable(tmp_path)
    log = writable_by_all(place / "out") / "euids"
    log.touch()
    log.chmod(0o666)
    wrapper = place / "cc-wrapper"
    wrapper.write_text(
        f'#!/bin/sh\necho "$(id -u) ${{AM_TEST_SECRET_TOKEN:-none}}" >> {log}\nexec cc "$@"\n'
    )
    wrapper.chmod(0o755)
    catalog = place / "mine.toml"
    catalog.write_text(
        '[recipe.mymi]\ncrate = "libmimalloc-sys"\nbackend = "mimalloc"\n'
        f'build_env = {{ CC = "{wrapper}" }}\n'
        '[recipe.mymi.version]\n"2.1.7" = { crate_version = "=0.1.39" }\n'
    )
    r = cli(
        "alloc", "build", "mymi@2.1.7", "--catalog", str(catalog),
        env={"ALLOCMARK_CACHE": str(place / "cache"), "AM_TEST_SECRET_TOKEN": "hunter2"},
        timeout=900,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    said = log.read_text().split("\n")
    assert [x for x in said if x] and all(x.split()[0] != "0" for x in said if x), said
    assert "hunter2" not in log.read_text()


def test_a_build_gets_a_home_and_a_tmpdir_of_its_own(tmp_path: Path) -> None:
    """jemalloc's autogen.sh failed under the campaign's identity: no TMPDIR of its own
    (config.guess: "cannot create a temporary directory in /tmp"); nor may a build see
    root's environment."""
    place = readable(tmp_path)
    repo = tinyrepo.make(place / "repo", slow=None, fat=None, broken=None, last=1)
    build = (
        'test -n "$TMPDIR" && test -w "$TMPDIR" && test "$HOME" != /root && '
        'test -z "$AM_TEST_SECRET_TOKEN" && t=$(mktemp) && rm "$t" && ' + tinyrepo.BUILD
    )
    r = _try(
        place / "b.db", "-a", f"tiny@git:{repo.path}#HEAD", "--build", build,
        "--library", tinyrepo.OUTPUT, "--", "true",
        env={"ALLOCMARK_CACHE": str(place / "cache"), "AM_TEST_SECRET_TOKEN": "hunter2"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "skipped" not in r.stderr, r.stderr


def test_a_campaign_whose_every_revision_is_skipped_is_refused(tmp_path: Path) -> None:
    """Every revision named failed to build (jemalloc 3.6.0, 4.0.0 and 5.2.0 without a
    TMPDIR): the campaign ran glibc, named beside them, alone and exited 0."""
    place = readable(tmp_path)
    repo = tinyrepo.make(place / "repo", slow=None, fat=None, broken=None, last=1)
    r = _try(
        place / "s.db", "-a", f"glibc,tiny@git:{repo.path}#HEAD,HEAD~1",
        "--build", "echo no TMPDIR >&2; exit 3", "--library", tinyrepo.OUTPUT, "--", "true",
        env={"ALLOCMARK_CACHE": str(place / "cache")},
    )  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no revision built" in r.stderr and "no TMPDIR" in r.stderr, r.stderr
    assert not (place / "s.db").exists()


# -- files written through the program's hands, or over the user's data --------------------
def _planted(tmp_path: Path) -> tuple[Path, Path]:
    """What a campaign's program leaves in a world-writable place while its campaign
    lives: a directory of its uid with a link to a root-only file."""
    secret = tmp_path / "secret"
    secret.write_text("root-only\n")
    secret.chmod(0o600)
    shared = writable_by_all(tmp_path / "shared")
    planted = shared / "D"
    planted.mkdir(mode=0o700)
    (planted / "report.json").symlink_to(secret)
    (planted / "plots").symlink_to(tmp_path / "root-only-dir")
    (tmp_path / "root-only-dir").mkdir(mode=0o700)
    for p in (planted / "report.json", planted / "plots", planted):
        os.lchown(p, OTHER_CAMPAIGN, OTHER_CAMPAIGN)
    return planted, secret


@pytest.mark.parametrize(
    "how",
    [
        ("report", "--format", "json", "-o", "{D}/report.json"),
        ("report", "--format", "json", "-o", "{D}/new.json"),
        ("report", "--plots", "{D}/plots"),
        ("report", "--plots", "{D}/fresh"),
    ],
)
def test_an_export_never_follows_the_program_s_link_nor_writes_in_its_directory(
    finished_db: Path, tmp_path: Path, how: tuple[str, ...]
) -> None:
    planted, secret = _planted(tmp_path)
    args = [a.replace("{D}", str(planted)) for a in how]
    r = cli(args[0], "--db", str(finished_db), *args[1:])
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert secret.read_text() == "root-only\n"
    assert list((tmp_path / "root-only-dir").iterdir()) == []
    assert sorted(p.name for p in planted.iterdir()) == ["plots", "report.json"]


def test_try_s_export_never_follows_the_program_s_link(tmp_path: Path) -> None:
    planted, secret = _planted(tmp_path)
    r = _try(tmp_path / "x.db", "--export-json", str(planted / "report.json"), "--", "true")
    assert r.returncode == 2, r.stderr
    assert secret.read_text() == "root-only\n"


def test_a_csv_export_sourced_by_a_shell_runs_nothing(tmp_path: Path) -> None:
    """The program's stderr went raw into the CSV: `$(id > …)` ran as uid 0 when the
    file was sourced."""
    out = writable_by_all(tmp_path / "out")
    mark = tmp_path / "ran"
    said = f"=cmd|' /C calc'!A0\n$(id > {mark})\n`id > {mark}`\n\\\"; id > {mark}; \"\n"
    script = tmp_path / "say.py"
    script.write_text(f"import sys\nsys.stderr.write({said!r})\nsys.exit(3)\n")
    db = tmp_path / "c.db"
    r = _try(db, "-i", "--", PYTHON, str(script))
    assert "Traceback" not in r.stderr, r.stderr
    csv_file = out.parent / "runs.csv"
    r = cli("report", "--db", str(db), "--runs", "--format", "csv", "-o", str(csv_file))
    assert r.returncode == 0, r.stderr
    assert "id > " in csv_file.read_text()  # the words are kept, as data
    subprocess.run(["sh", str(csv_file)], cwd=tmp_path, capture_output=True, check=False)
    subprocess.run(["bash", str(csv_file)], cwd=tmp_path, capture_output=True, check=False)
    assert not mark.exists()
    assert "\n=cmd" not in csv_file.read_text() and ',"=cmd' not in csv_file.read_text()


def test_an_export_never_writes_over_the_results(finished_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "keep.db"
    db.write_bytes(finished_db.read_bytes())
    for fmt in ("md", "json", "table"):
        r = cli("report", "--db", str(db), "--format", fmt, "-o", str(db))
        assert r.returncode == 2 and "results database" in r.stderr, r.stderr
    for suffix in ("-wal", "-shm"):
        r = cli("report", "--db", str(db), "-o", f"{db}{suffix}")
        assert r.returncode == 2, r.stderr
    other = tmp_path / "other.db"  # another results database: not written over either
    other.write_bytes(finished_db.read_bytes())
    r = cli("report", "--db", str(db), "--format", "md", "-o", str(other))
    assert r.returncode == 2, r.stderr
    with sqlite3.connect(db) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] > 0
    assert other.read_bytes()[:16] == b"SQLite format 3\x00"


def test_try_s_export_never_writes_over_its_own_database(finished_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    db.write_bytes(finished_db.read_bytes())
    before = db.read_bytes()
    r = _try(db, "-a", "glibc", "--export-json", str(db), "--", "true")
    assert r.returncode == 2 and "results database" in r.stderr, r.stderr
    assert db.read_bytes() == before  # refused before anything ran


def test_an_output_never_creates_directories(finished_db: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    r = cli("report", "--db", str(finished_db), "-o", str(missing / "dir" / "x.txt"))
    assert r.returncode == 2 and "does not exist" in r.stderr, r.stderr
    assert not missing.exists()


def test_another_live_campaign_s_directory_is_refused(tmp_path: Path) -> None:
    """The guard checked this campaign's uid only: a directory another campaign's
    transient uid owns passed, and its program swapped the database."""
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, OTHER_CAMPAIGN, OTHER_CAMPAIGN)
    r = _try(theirs / "t.db", "-a", "glibc", "--", "true")
    assert r.returncode == 2 and "can be changed by" in r.stderr, r.stderr
    assert not (theirs / "t.db").exists()
    st = theirs.stat()
    assert stat.S_IMODE(st.st_mode) == 0o755


# -- the measured program is the user's, or a clear refusal ---------------------------------
def test_a_command_the_identity_cannot_run_is_refused_not_swapped(tmp_path: Path) -> None:
    """root's pyenv python3 (a directory the campaign's identity cannot enter) first on
    PATH: the launcher's own PATH search ran /usr/bin/python3 instead, silently."""
    out = writable_by_all(tmp_path / "out")
    closed, other = tmp_path / "closed", tmp_path / "other"
    for d, mode, word in ((closed, 0o700, "mine"), (other, 0o755, "another")):
        d.mkdir()
        d.chmod(mode)
        prog = d / "am-test-prog"
        prog.write_text(f"#!/bin/sh\necho {word} > {out}/ran.$$\n")
        prog.chmod(0o755)
    path = f"{closed}:{other}:{os.environ['PATH']}"
    r = _try(tmp_path / "p.db", "-a", "glibc", "--", "am-test-prog", env={"PATH": path})
    assert r.returncode == 2, r.stdout + r.stderr
    assert f"{closed}/am-test-prog" in r.stderr and "--run-as" in r.stderr, r.stderr
    assert list(out.iterdir()) == []  # nothing ran, neither file
    r = _try(
        tmp_path / "q.db", "-a", "glibc", "--", "am-test-prog", env={"PATH": f"{other}:{path}"}
    )
    assert r.returncode == 0, r.stderr
    assert f"the command runs {other}/am-test-prog" in r.stderr + r.stdout


def test_a_failing_prepare_is_said_as_prepare_and_as_whom_it_ran(tmp_path: Path) -> None:
    """`--prepare 'echo x >> /root/log'` failed (the identity cannot write there) and was
    reported as the command failing on its first run: "Fix the command"."""
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    r = _try(tmp_path / "p.db", "-a", "glibc", "--prepare", f"echo x >> {closed}/log", "--", "true")
    assert r.returncode == 2, r.stderr
    assert "--prepare" in r.stderr and "campaign's identity" in r.stderr, r.stderr
    assert "--run-as root" in r.stderr and "Fix the command" not in r.stderr, r.stderr


# -- numbers the program cannot steer --------------------------------------------------------
STEER = """
import ctypes, os, sys, time
out, depth = sys.argv[1], sys.argv[2]
with open(f"{out}/start", "w") as f:
    f.write(repr(time.time()))
deep = depth
os.makedirs(deep, exist_ok=True)
name = os.path.join(deep, "f")
fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o600)
os.ftruncate(fd, 60000 * 8192)
libc = ctypes.CDLL(None)
libc.mmap.restype, libc.mmap.argtypes = ctypes.c_void_p, [
    ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
for i in range(60000):  # PROT_READ, MAP_SHARED; every other page: no two merge
    libc.mmap(None, 4096, 1, 1, fd, i * 8192)
main = os.getpid()
if os.fork() == 0:  # a worker that goes on while the main process exits, until it has
    while os.getppid() == main:  # (then it is the launcher's): its last mark is in the run
        with open(f"{out}/last.{os.getpid()}", "w") as f:
            f.write(repr(time.time()))
        time.sleep(0.005)
    os._exit(0)
time.sleep(0.05)
os._exit(0)  # with every mapping in place: the launcher reads them all at the exit
"""


def test_the_exit_read_is_never_taken_from_a_run_whose_processes_work(tmp_path: Path) -> None:
    """60,000 mappings under a long path and a worker forked before exiting: the
    launcher's exit read (seconds) was taken from wall_s while the worker worked."""
    out = writable_by_all(tmp_path / "out")
    deep = writable_by_all(tmp_path / "deep") / "/".join(["d" * 250] * 15)
    script = tmp_path / "steer.py"
    script.write_text(STEER)
    db = tmp_path / "s.db"
    r = cli(
        "try", "-n", "1", "--max-blocks", "1", "-a", "glibc", "--db", str(db),
        "--", PYTHON, str(script), str(out), str(deep), timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    with sqlite3.connect(db) as con:
        walls = [w for (w,) in con.execute("SELECT wall_s FROM runs WHERE role='measure'")]
    start = float((out / "start").read_text())
    worked = max(float(p.read_text() or 0) for p in out.glob("last.*")) - start
    assert walls and min(walls) >= worked - 0.05, (walls, worked)  # 0.05: the clocks' grain


HARDLINK = """
import os, sys
who = os.environ.get("AM_WHO_DIR")
if who:
    line = b'{"am":"calls","v":1,"fn":"valloc"}\\n'
    with open(os.path.join(who, "calls.1"), "wb") as f:
        f.write(line * (int(sys.argv[1]) // len(line)))
    for i in range(int(sys.argv[2])):
        os.link(os.path.join(who, "calls.1"), os.path.join(who, f"calls.{i + 2}"))
"""


@pytest.mark.parametrize(
    ("size", "links", "said"), [(4 << 20, 8, "hard link"), (15 << 20, 0, "MiB")]
)
def test_the_who_directory_is_read_once_and_bounded(
    tmp_path: Path, size: int, links: int, said: str
) -> None:
    """Hard links to one 16 MiB record file: allocmark's time and memory grew per link
    (16 links: 90 s, 2.1 GB); and many large files were read whole."""
    script = tmp_path / "links.py"
    script.write_text(HARDLINK)
    db = tmp_path / "h.db"
    if not links:  # five large files, no link: 75 MiB in all
        script.write_text(
            HARDLINK.replace("range(int(sys.argv[2]))", "range(0)")
            + (
                "if who:\n    import shutil\n    for i in range(4):\n        shutil.copy("
                "os.path.join(who, 'calls.1'), os.path.join(who, f'calls.{i + 9}'))\n"
            )
        )
    r = cli("try", "-i", *QUICK, "--db", str(db), "--", PYTHON, str(script), str(size), str(links))
    assert "Traceback" not in r.stderr, r.stderr
    with sqlite3.connect(db) as con:
        verify = con.execute("SELECT status, detail FROM runs WHERE role='verify'").fetchall()
    assert verify and all(s == "unverified" and said in d for s, d in verify), verify


# test_boundary's program that finds its launcher, then sends SIGCONT another way
SIGNALS = (
    CONT.split("os.kill(")[0]
    + """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
how = sys.argv[1]
if how == "sigqueue":
    libc.sigqueue(launcher, signal.SIGCONT, ctypes.c_void_p(0))
elif how == "tgkill":
    libc.syscall(234, launcher, launcher, signal.SIGCONT)  # SYS_tgkill
else:  # rt_sigqueueinfo with a forged sender: root
    info = (ctypes.c_int * 32)()
    info[0], info[2] = signal.SIGCONT, -1  # si_signo, si_code = SI_QUEUE
    info[4], info[5] = 1, 0  # si_pid 1, si_uid 0: claims to be root's init
    libc.syscall(129, launcher, signal.SIGCONT, info)  # SYS_rt_sigqueueinfo
"""
)


@pytest.mark.parametrize("how", ["sigqueue", "tgkill", "forged"])
def test_a_sigcont_sent_any_way_by_the_program_does_not_mark_its_runs(
    tmp_path: Path, how: str
) -> None:
    script = tmp_path / "cont.py"
    script.write_text(SIGNALS)
    db = tmp_path / "c.db"
    r = _try(db, "-a", "glibc", "--", PYTHON, str(script), how)
    assert r.returncode == 0, r.stderr
    with sqlite3.connect(db) as con:
        runs = con.execute("SELECT status, detail FROM runs").fetchall()
    assert runs and all(status == "ok" for status, _ in runs), runs


# -- crafted databases through every verb ---------------------------------------------------
@pytest.mark.parametrize(
    ("edit", "verb"),
    [
        ("UPDATE runs SET labels_json='[1,2]'", ("report", "--runs", "--format", "csv")),
        ("UPDATE runs SET labels_json='[1,2]'", ("report", "--runs", "--format", "json")),
        ("UPDATE runs SET wall_s=9e999", ("compare",)),
    ],
)
def test_a_crafted_value_is_a_clear_error_in_every_verb(
    finished_db: Path, tmp_path: Path, edit: str, verb: tuple[str, ...]
) -> None:
    db = tmp_path / "c.db"
    db.write_bytes(finished_db.read_bytes())
    with sqlite3.connect(db) as con:
        con.execute(edit)
        con.execute("DELETE FROM cell_cache")
    other = tmp_path / "o.db"
    r0 = _try(other, "-a", "glibc,glibc:arena2", "--", "true")
    assert r0.returncode == 0, r0.stderr
    args = [*verb, str(db), str(other)] if verb == ("compare",) else [*verb, "--db", str(db)]
    r = cli(*args)
    assert "Traceback" not in r.stderr and r.returncode == 2, r.stderr
    assert "damaged value" in r.stderr, r.stderr


# -- a dry run checks what a real run checks -----------------------------------------------
NOT_MALLOC = "int am_nothing(void) { return 0; }\n"


def test_a_dry_run_checks_what_a_real_run_checks(finished_db: Path, tmp_path: Path) -> None:
    so = build_so(tmp_path, "nomalloc", NOT_MALLOC)
    text = tmp_path / "notes.db"
    text.write_text("not a database\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # not sticky: anybody may swap the library
    lib = shared / "libjemalloc.so.2"
    lib.write_bytes(Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2").read_bytes())
    db = tmp_path / "d.db"
    for args, said in (
        (["-a", f"mine={so}"], "mine"),  # does not serve malloc
        (["-a", f"je={lib}"], "can be changed by"),  # in the program's reach
        (["--db", str(text)], "not a usable SQLite results database"),
        (["--db", str(finished_db), "--export-json", str(finished_db)], "results database"),
        (["--export-json", str(tmp_path / "nonexistent" / "x.json")], "does not exist"),
    ):
        r = cli("try", "--dry-run", "--db", str(db), *args, "--", "true")
        assert r.returncode == 2 and said in r.stderr, (args, r.stdout + r.stderr)
        assert "Traceback" not in r.stderr
    assert not db.exists()
    assert text.read_text() == "not a database\n"
    r = cli("try", "--dry-run", "--db", str(db), "-a", "glibc,jemalloc", "--", "true")
    assert r.returncode == 0, r.stderr
    assert not db.exists()


# -- what a dead campaign left ------------------------------------------------------------
def test_what_a_dead_campaign_s_identity_left_is_swept(tmp_path: Path) -> None:
    """A campaign killed with -9 leaves its uid's lock file, its processes and what its
    program put in the world-writable directories: the next campaign sweeps them."""
    dead = 0x5A000000 + 4242
    ids = Path("/run/allocmark/ids")
    ids.mkdir(parents=True, exist_ok=True)
    (ids / str(dead)).touch()
    left = Path("/var/tmp") / f"am-test-left-{os.getpid()}"
    left.mkdir()
    (left / "report.json").symlink_to("/etc/shadow")
    os.lchown(left / "report.json", dead, dead)
    os.chown(left, dead, dead)
    sleeper = subprocess.Popen(
        ["sleep", "300"], user=dead, group=dead, extra_groups=[], start_new_session=True
    )
    try:
        r = _try(tmp_path / "s.db", "-a", "glibc", "--", "true")
        assert r.returncode == 0, r.stderr
        assert sleeper.wait(timeout=30) == -9  # killed by the sweep
        assert not left.exists() and not (ids / str(dead)).exists()
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
            sleeper.wait()
        if left.exists():
            subprocess.run(["rm", "-rf", str(left)], check=False)


def test_a_stored_name_is_never_a_link_in_markdown(finished_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    db.write_bytes(finished_db.read_bytes())
    evil = "[click](javascript:alert(1))"
    with sqlite3.connect(db) as con:
        for table, column in (("allocators", "name"), ("runs", "allocator"), ("plan", "allocator")):
            con.execute(f"UPDATE {table} SET {column}=? WHERE {column}='glibc:arena2'", (evil,))
    out = tmp_path / "r.md"
    r = cli("report", "--db", str(db), "--format", "md", "-o", str(out))
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "javascript:alert(1)" in text and "](javascript" not in text
