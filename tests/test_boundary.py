"""The trust boundary, tried as an attacker would (docs/security.md): one test per way
through that was found (issue 52, findings 1-10), each written as the attack, through
the CLI as a user runs it, as root. Untrusted: the measured command, an allocator
library and a repository's build, a database from elsewhere."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from allocmark.store import seal
from tests.allocators import tinyrepo
from tests.conftest import FORWARDING, PYTHON, build_so, cli, readable, writable_by_all

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(os.geteuid() != 0, reason="the boundary is drawn when allocmark is root"),
]

QUICK = ("-n", "2", "--max-blocks", "2")


def _try(
    db: Path, *rest: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return cli("try", *QUICK, "--db", str(db), *rest, env=env)


def _runs(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT role, status, detail FROM runs ORDER BY seq").fetchall()


# -- 1: an allocator's code as root -------------------------------------------------
EVIL = """
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
@FORWARDING@
__attribute__((constructor)) static void am_evil(void) {
  char line[64];
  int fd = open("@LOG@", O_WRONLY | O_APPEND);
  int len = snprintf(line, sizeof line, "%ld\\n", (long)geteuid());
  if (fd >= 0 && write(fd, line, (size_t)len) == len) close(fd);
  if (geteuid() == 0) {  /* what an attacker would do as root */
    int own = open("@ROOTED@", O_WRONLY | O_CREAT, 0644);
    if (own >= 0) close(own);
  }
}
"""


def _evil(tmp_path: Path, log: Path, rooted: Path) -> Path:
    source = EVIL.replace("@FORWARDING@", FORWARDING)
    return build_so(
        tmp_path, "evil", source.replace("@LOG@", str(log)).replace("@ROOTED@", str(rooted))
    )


def test_1_an_allocator_constructor_never_runs_as_root(tmp_path: Path) -> None:
    out = writable_by_all(tmp_path / "out")
    log, rooted = out / "euids", out / "rooted"
    log.touch()
    log.chmod(0o666)
    so = _evil(tmp_path, log, rooted)
    r = _try(tmp_path / "t.db", "-a", f"evil={so}", "--", "true")
    assert r.returncode == 0, r.stderr
    euids = log.read_text().split()
    assert euids and "0" not in euids, euids  # the probe and every run: never root
    assert not rooted.exists()
    assert len(set(euids)) == 1  # one identity for the whole campaign


# -- 2: --resume runs an unapproved command when nothing is pending --------------------
def _copy(db: Path, to: Path, *statements: str) -> Path:
    to.write_bytes(db.read_bytes())
    with sqlite3.connect(to) as con:
        con.execute("UPDATE campaigns SET status='interrupted', owner_json=NULL")
        for s in statements:
            con.execute(s)
    return to


def test_2_a_resume_with_nothing_pending_runs_nothing_unsigned(
    finished_db: Path, tmp_path: Path
) -> None:
    out = writable_by_all(tmp_path / "out")
    marker = out / "ran"
    argv = json.dumps(["sh", "-c", f"id > {marker}"])
    why_on = "UPDATE campaigns SET settings_json=json_set(settings_json, '$.why', 'on')"
    db = _copy(finished_db, tmp_path / "w.db", f"UPDATE plan SET argv_json='{argv}'", why_on)
    r = cli("run", "--resume", "--db", str(db))
    assert r.returncode == 2 and "not signed by you" in r.stderr, r.stderr
    assert f"id > {marker}" in r.stderr  # shown whole
    assert not marker.exists()
    # The why pass alone switched on (a plan changed by hand): asked too, nothing runs
    db = _copy(finished_db, tmp_path / "w2.db", why_on)
    r = cli("run", "--resume", "--db", str(db))
    assert r.returncode == 2 and "its plan and allocators" in r.stderr, r.stderr


def test_2_a_stored_allocator_s_environment_is_not_probed_unsigned(
    finished_db: Path, tmp_path: Path
) -> None:
    """An allocator's stored env pointing AM_RUN_GLIBC at a directory whose "loader" is a
    script, or adding an LD_PRELOAD: refused before anything is verified again."""
    out = writable_by_all(tmp_path / "out")
    fake = tmp_path / "glibc"
    fake.mkdir(mode=0o755)
    loader = fake / "ld-linux-x86-64.so.2"
    loader.write_text(f"#!/bin/sh\nid > {out / 'loader'}\n")
    loader.chmod(0o755)
    so = _evil(tmp_path, out / "euids", out / "rooted")
    for n, env in enumerate(([["AM_RUN_GLIBC", str(fake)]], [["LD_PRELOAD", str(so)]])):
        edit = (
            "UPDATE allocators SET spec_json=json_set(spec_json, '$.env', "
            f"json('{json.dumps(env)}')) WHERE name='glibc:arena2'"
        )
        db = _copy(finished_db, tmp_path / f"e{n}.db", edit, "DELETE FROM runs WHERE seq > 5")
        r = cli("run", "--resume", "--db", str(db))
        assert r.returncode == 2 and "not signed by you" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    assert not (out / "loader").exists() and not (out / "rooted").exists()


# -- 3: a build leaves a process behind ------------------------------------------------
def test_3_a_build_s_daemon_dies_with_the_build(tmp_path: Path) -> None:
    repo = tinyrepo.make(readable(tmp_path) / "repo", slow=None, fat=None, broken=None, last=1)
    out = writable_by_all(tmp_path / "out")
    pidfile = out / "daemon.pid"
    build = f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 300' & {tinyrepo.BUILD}"
    r = _try(
        tmp_path / "b.db",
        "-a",
        f"tiny@git:{repo.path}#HEAD",
        "--build",
        build,
        "--library",
        tinyrepo.OUTPUT,
        "--",
        "true",
    )
    assert r.returncode == 0, r.stderr
    deadline = time.monotonic() + 5
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists() or _state(pid) == "Z", "the daemon outlived its build"


HOLD = """
import time
from allocmark import files
with files.scratch("allocmark-run-") as room:
    print(room, flush=True)
    time.sleep(600)
"""


def test_3_a_killed_allocmark_s_room_is_removed_by_the_next_run(tmp_path: Path) -> None:
    """allocmark killed (SIGKILL) runs no clean-up: a run's room (the program's HOME and
    TMPDIR, what it wrote there) stayed in TMPDIR for good (179 of them here after a day
    of tests). The next run removes every room no live allocmark holds; a live one's, one
    just made, and what a link named like a room points to are kept."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(mode=0o700)
    env = {"TMPDIR": str(tmp)}
    holders = [
        subprocess.Popen(
            [sys.executable, "-c", HOLD],
            env=os.environ | env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        rooms = [Path(h.stdout.readline().strip()) for h in holders if h.stdout]
        for room in rooms:
            (room / "written").write_text("by the program")
            os.utime(room, (0, 0))  # made long ago
        holders[0].kill()
        holders[0].wait()
        young = tmp / "allocmark-run-young"  # its maker has not locked it yet
        young.mkdir()
        target = tmp_path / "elsewhere"
        target.mkdir()
        os.utime(target, (0, 0))
        (tmp / "allocmark-run-link").symlink_to(target)
        assert rooms[0].exists() and len(rooms) == 2
        r = _try(tmp_path / "r.db", "-a", "glibc", "--", "true", env=env)
        assert r.returncode == 0, r.stderr
        assert not rooms[0].exists(), "a killed allocmark's room outlived it"
        assert (rooms[1] / "written").exists() and young.exists() and target.exists()
        assert sorted(p.name for p in tmp.iterdir()) == sorted(
            [rooms[1].name, young.name, "allocmark-run-link"]
        )
    finally:
        for h in holders:
            h.kill()
            h.wait()


def _state(pid: int) -> str:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return text[text.rindex(")") + 2]


def test_3_no_two_campaigns_share_an_identity(tmp_path: Path) -> None:
    out = writable_by_all(tmp_path / "out")
    script = tmp_path / "who.py"
    script.write_text(
        f"import os\nopen('{out}/' + str(os.getuid()) + '.' + str(os.getpid()), 'w').close()\n"
    )
    for n in range(2):
        r = _try(tmp_path / f"i{n}.db", "-a", "glibc", "--", PYTHON, str(script))
        assert r.returncode == 0, r.stderr
    uids = {p.name.split(".")[0] for p in out.iterdir()}
    assert len(uids) == 2 and "0" not in uids, uids


# -- 4: the who-directory read as root ------------------------------------------------
PLANT = """
import os, sys
who = os.environ.get("AM_WHO_DIR")
if who:
    if sys.argv[1] == "link":
        os.symlink(sys.argv[2], os.path.join(who, "zz"))
    else:
        os.mkfifo(os.path.join(who, "zz"))
"""


@pytest.mark.parametrize("kind", ["link", "fifo"])
def test_4_a_link_or_fifo_in_the_who_directory_fails_that_run_only(
    tmp_path: Path, kind: str
) -> None:
    secret = tmp_path / "secret"
    secret.write_text("root-only-secret-line\n")
    secret.chmod(0o600)
    script = tmp_path / "plant.py"
    script.write_text(PLANT)
    db = tmp_path / "w.db"
    r = cli(
        "try",
        "-i",
        *QUICK,
        "--db",
        str(db),
        "--",
        PYTHON,
        str(script),
        kind,
        str(secret),
        timeout=120,
    )
    assert "Traceback" not in r.stderr and "root-only-secret-line" not in r.stdout + r.stderr
    runs = _runs(db)
    verify = [run for run in runs if run[0] == "verify"]
    assert verify and all(status == "unverified" for _, status, _ in verify), runs
    said = "a symbolic link" if kind == "link" else "not a regular file"
    assert all(said in detail for _, _, detail in verify), verify
    with sqlite3.connect(db) as con:  # the campaign itself ended as it should
        assert con.execute("SELECT status FROM campaigns").fetchone()[0] == "finished"


# -- 5: the store guard (real paths, ancestors, libraries): tests/run/test_runas.py ------
def test_5_a_database_through_a_link_into_the_program_s_reach_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    safe = tmp_path / "safe"
    safe.mkdir()
    (safe / "l.db").symlink_to(shared / "l.db")
    r = _try(safe / "l.db", "-a", "glibc", "--", "true")
    assert r.returncode == 2 and "can be changed by" in r.stderr, r.stderr
    assert not (shared / "l.db").exists()


def test_5_a_library_in_the_program_s_reach_is_refused_before_anything_is_stored(
    tmp_path: Path,
) -> None:
    """An allocator library in a directory anyone may write (the measured program could
    swap it under its stored sha256) is refused before the campaign is stored: the
    database keeps the campaigns it had, no more."""
    db = tmp_path / "results" / "l.db"
    assert _try(db, "-a", "glibc", "--", "true").returncode == 0
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    library = shared / "libjemalloc.so.2"
    library.write_bytes(Path("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2").read_bytes())
    r = _try(db, "-a", "glibc", "-a", f"mine={library}", "--", "true")
    assert r.returncode == 2 and "(an allocator's library) can be changed by" in r.stderr, r.stderr
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM campaigns").fetchone()[0] == 1


# -- 6: peak RSS of the whole tree -----------------------------------------------------
HIDE = """
import os, time
if os.fork() == 0:
    b = bytearray(160 << 20)
    for i in range(0, len(b), 4096):
        b[i] = 1
    os._exit(0)
time.sleep(1.0)  # the child has exited; it is never waited for
os._exit(0)
"""


def _script_db(tmp_path: Path, text: str) -> Path:
    """`text` as a Python program tried under glibc: the database of the campaign."""
    script, db = tmp_path / "program.py", tmp_path / "program.db"
    script.write_text(text)
    r = _try(db, "-a", "glibc", "--", PYTHON, str(script))
    assert r.returncode == 0, r.stderr
    return db


def test_6_a_child_never_reaped_cannot_hide_its_memory(tmp_path: Path) -> None:
    db = _script_db(tmp_path, HIDE)
    with sqlite3.connect(db) as con:
        peaks = [p for (p,) in con.execute("SELECT maxrss_kib FROM runs WHERE role='measure'")]
    assert peaks and min(peaks) >= 160 * 1024, peaks


# -- 7: exposure -------------------------------------------------------------------------
def test_7_the_database_is_private_and_the_program_gets_no_root_environment(
    tmp_path: Path,
) -> None:
    out = writable_by_all(tmp_path / "out")
    db = tmp_path / "p.db"
    r = _try(
        db,
        "-a",
        "glibc",
        "--env",
        "GIVEN=yes",
        "--",
        "sh",
        "-c",
        f"env > {out}/env.$$",
        env={"AM_TEST_SECRET_TOKEN": "hunter2", "HOME": "/root"},
    )
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    for f in out.iterdir():
        env = dict(line.split("=", 1) for line in f.read_text().splitlines() if "=" in line)
        assert "AM_TEST_SECRET_TOKEN" not in env and env.get("HOME") != "/root", env
        assert env.get("GIVEN") == "yes" and env.get("PATH"), env


def test_7_a_malformed_env_is_a_usage_error(tmp_path: Path) -> None:
    r = _try(tmp_path / "u.db", "--env", "1NOPE", "--", "true")
    assert r.returncode == 2 and "--env '1NOPE': give NAME=VALUE" in r.stderr, r.stderr
    assert not (tmp_path / "u.db").exists()


# -- 9: SIGCONT from the program ---------------------------------------------------------
CONT = """
import os, signal
def parent(pid):
    stat = open(f"/proc/{pid}/stat").read()
    return int(stat[stat.rindex(")") + 2:].split()[1])
launcher = os.getppid()
while launcher > 1 and open(f"/proc/{launcher}/comm").read().strip() != "am_run":
    launcher = parent(launcher)
os.kill(launcher, signal.SIGCONT)  # allowed: same session, whatever the uid
"""


def test_9_a_sigcont_from_the_program_does_not_mark_its_runs(tmp_path: Path) -> None:
    runs = _runs(_script_db(tmp_path, CONT))
    assert runs and all(status == "ok" for _, status, _ in runs), runs


# -- 10: git's own message ---------------------------------------------------------------
def test_10_git_s_dubious_ownership_message_is_shown_whole(tmp_path: Path) -> None:
    repo = tinyrepo.make(readable(tmp_path) / "repo", slow=None, fat=None, broken=None, last=1)
    for p in (repo.path, *repo.path.rglob("*")):
        os.lchown(p, 65534, 65534)  # nobody's
    r = _try(
        tmp_path / "g.db",
        "-a",
        f"tiny@git:{repo.path}#HEAD",
        "--build",
        tinyrepo.BUILD,
        "--library",
        tinyrepo.OUTPUT,
        "--",
        "true",
        env={"ALLOCMARK_CACHE": str(tmp_path / "cache")},
    )
    assert r.returncode != 0
    assert "dubious ownership" in r.stderr and "safe.directory" in r.stderr, r.stderr


def test_the_signing_key_is_never_echoed(tmp_path: Path) -> None:
    """Finding 4's worst case: the first line of the plan signing key, through a link."""
    key = seal.key()
    assert key is not None
    script = tmp_path / "plant.py"
    script.write_text(PLANT)
    r = cli(
        "try",
        "-i",
        *QUICK,
        "--db",
        str(tmp_path / "k.db"),
        "--",
        PYTHON,
        str(script),
        "link",
        str(seal.key_path()),
    )
    assert key.hex() not in r.stdout + r.stderr
