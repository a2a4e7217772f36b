"""The fault battery's hostile cases (`make faults` prints their figures): a program that
forges the launcher's record or stops or kills the launcher, a campaign database
crafted to run an unplanned command on --resume, and an allocator library whose
constructor reports where it runs. Each case is tried as a user would, through the CLI."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from allocmark.model import Verified
from tests.conftest import FORWARDING, build_so, cli, writable_by_all

pytestmark = pytest.mark.integration

# A hostile benchmark: walks up to its launcher, writes a forged "run" record into every
# pipe of the launcher's and of allocmark's it can open (root can, whatever the
# dumpable flag), then does to the launcher what MODE says.
FORGE = r"""
import os, signal, sys, time
mode = sys.argv[1]
line = (b'{"am":"run","v":4,"status":0,"wall_ns":1000,"utime_us":0,"stime_us":0,'
        b'"maxrss_kib":1,"minflt":0,"majflt":0,"nvcsw":0,"nivcsw":0,"exec_errno":0,'
        b'"oom":0,"limit_by":"none","stopped":0}\n')
if mode == "garbage":
    line = b"garbage from the program\n"

def field(pid, name):
    with open(f"/proc/{pid}/{name}") as f:
        return f.read()

def parent(pid):
    stat = field(pid, "stat")
    return int(stat[stat.rindex(")") + 2:].split()[1])

launcher = os.getppid()
while launcher > 1 and field(launcher, "comm").strip() != "am_run":
    launcher = parent(launcher)
wrote = 0
for owner in ((launcher, parent(launcher)) if not mode.startswith("stop") else ()):
    try:
        fds = os.listdir(f"/proc/{owner}/fd")
    except OSError:
        continue
    for fd in fds:
        try:
            if os.readlink(f"/proc/{owner}/fd/{fd}").startswith("pipe:"):
                w = os.open(f"/proc/{owner}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
                wrote += os.write(w, line) > 0
                os.close(w)
        except OSError:
            pass
sig = {"term": signal.SIGTERM, "kill": signal.SIGKILL, "stop": signal.SIGSTOP,
       "stopcont": signal.SIGSTOP}.get(mode)
try:
    if sig:
        os.kill(launcher, sig)
    if mode == "stopcont":
        time.sleep(0.2)
        os.kill(launcher, signal.SIGCONT)
except PermissionError:  # run as another user than the launcher's
    sys.exit("cannot signal the launcher: PermissionError")
time.sleep(0.3)
"""
FORGERIES = {
    "forged record, then SIGTERM to the launcher": ("term", "stopped by signal 15 (SIGTERM)"),
    "forged record, then SIGKILL to the launcher": ("kill", "killed by signal 9 (SIGKILL)"),
    "forged record beside the launcher's own": ("double", "expected one 'run' record"),
    "a garbage line in the launcher's pipe": ("garbage", "not a JSON record"),
    "launcher stopped (SIGSTOP), then continued": ("stopcont", "stopped (SIGSTOP) and continued"),
    "launcher stopped (SIGSTOP) for good": ("stop", "stopped (SIGSTOP) and never reported"),
}


def _runs(db: Path) -> list[tuple[str, str, str]]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT role, status, detail FROM runs ORDER BY seq").fetchall()


@pytest.mark.parametrize("run_as", ["root", "dropped"])
def test_a_program_cannot_forge_its_result(tmp_path: Path, run_as: str) -> None:
    """As root (`--run-as root`) the program reaches the launcher's pipes and can signal
    it: each run is stored as an error with the reason. Dropped to an unprivileged user
    (the default as root, run/runas.py) it reaches neither: its runs are its own (a
    forged record would say 1 us), or fail where it tried to signal the launcher."""
    if run_as == "dropped" and os.geteuid() != 0:
        pytest.skip("allocmark runs the program as another user only when it runs as root")
    script = tmp_path / "forge.py"
    script.write_text(FORGE)
    env = {"ALLOCMARK_RUN_AS": "root"} if run_as == "root" else None
    forged = total = 0
    for case, (mode, reason) in FORGERIES.items():
        db = tmp_path / f"{mode}.db"
        r = cli(
            "try",
            "-i",
            "-a",
            "glibc",
            "-n",
            "2",
            "--max-blocks",
            "2",
            "--timeout",
            "3",
            "--db",
            str(db),
            "--",
            "/usr/bin/python3",
            str(script),
            mode,
            env=env,
        )
        assert "Traceback" not in r.stderr, r.stderr
        runs = _runs(db)
        total += len(runs)
        # The campaign goes on to its end: every planned run is stored (-i: it ran on
        # past its first failed run); a cell whose runs all failed makes it exit 1.
        failing = any(status != "ok" for role, status, _ in runs if role == "measure")
        assert len(runs) == 3 and r.returncode == (1 if failing else 0), (case, runs, r.stderr)
        if run_as == "root":
            forged += sum(status == "ok" for _, status, _ in runs)
            assert {s for _, s, _ in runs} == {"error"}, (case, runs)
            assert all(reason in detail for _, _, detail in runs), (case, runs)
            assert "ERROR" in r.stdout, (case, r.stdout, r.stderr)
        else:
            forged += sum(wall < 0.25 for wall in _walls(db, "ok"))  # it sleeps 0.3 s
            signals = mode not in ("double", "garbage")
            assert {s for _, s, _ in runs} == ({"failed"} if signals else {"ok"}), (case, runs)
            assert not signals or all("PermissionError" in d for _, _, d in runs), (case, runs)
    print(
        f"\nforged results stored ({run_as}): {forged} of {total} runs of {len(FORGERIES)} "
        "forging programs"
    )
    assert forged == 0


def _walls(db: Path, status: str) -> list[float]:
    with sqlite3.connect(db) as con:
        return [w for (w,) in con.execute("SELECT wall_s FROM runs WHERE status=?", (status,))]


# -- a crafted database on --resume ------------------------------------------------
@pytest.fixture(scope="module")
def command_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished `try` campaign of `true`: cases reopen copies of it as interrupted."""
    db = tmp_path_factory.mktemp("try") / "try.db"
    r = cli(
        "try",
        "-a",
        "glibc,glibc:arena2",
        "-n",
        "2",
        "--max-blocks",
        "2",
        "--db",
        str(db),
        "--",
        "true",
    )
    assert r.returncode == 0, r.stderr
    return db


def _interrupted(db: Path, out: Path, *statements: str) -> Path:
    """A copy of `db` whose last two runs are pending again, `statements` applied."""
    out.write_bytes(db.read_bytes())
    with sqlite3.connect(out) as con:
        last = "SELECT id FROM runs WHERE seq >= (SELECT max(seq) - 1 FROM runs)"
        for table in ("metrics", "rss_series", "profiles"):
            con.execute(f"DELETE FROM {table} WHERE run_id IN ({last})")
        con.execute(f"DELETE FROM runs WHERE id IN ({last})")
        con.execute("UPDATE campaigns SET status='interrupted', owner_json=NULL")
        for statement in statements:
            con.execute(statement)
    return out


def _touch(marker: Path) -> str:
    return json.dumps(["sh", "-c", f"touch {marker}"])


PENDING = "seq >= (SELECT max(seq) - 1 FROM plan)"
ELSEWHERE = (
    "UPDATE campaigns SET settings_json=json_set(settings_json, '$.created_by.host', 'elsewhere')"
)
# Each case: the edits, and what the refusal says.
CRAFTED = {
    "changed argv of one pending run": (
        lambda m: [
            f"UPDATE plan SET argv_json='{_touch(m)}' WHERE seq=(SELECT max(seq) FROM plan)"
        ],
        "cannot be resumed",
    ),
    "changed argv of the whole campaign": (
        lambda m: [
            f"UPDATE plan SET argv_json='{_touch(m)}'",
            f"UPDATE workloads SET argv_json='{_touch(m)}'",
        ],
        "add --yes",
    ),
    "changed argv of the pending runs and of the stored command": (
        lambda m: [
            f"UPDATE plan SET argv_json='{_touch(m)}' WHERE {PENDING}",
            f"UPDATE workloads SET argv_json='{_touch(m)}'",
        ],
        "of one cell",
    ),
    "BASH_ENV added to a pending run": (
        lambda m: [
            f'UPDATE plan SET argv_json=\'["bash","-c","true"]\', env_json=json_insert('
            f"env_json, '$[#]', json_array('BASH_ENV', '{m}.sh')) WHERE {PENDING}"
        ],
        "cannot be resumed",
    ),
    "a --prepare planted in the pending runs": (
        lambda m: [
            f"UPDATE plan SET app_json=json_set(app_json, '$.prepare', json_array('sh', '-c', "
            f"'touch {m}')) WHERE {PENDING}"
        ],
        "of one cell",
    ),
    "pending run renamed to an unknown workload": (
        lambda m: [f"UPDATE plan SET workload='zzz', argv_json='{_touch(m)}' WHERE {PENDING}"],
        "which neither the catalog nor the campaign has",
    ),
}


def test_a_crafted_plan_runs_nothing_without_yes(command_db: Path, tmp_path: Path) -> None:
    ran = tried = 0
    out = writable_by_all(tmp_path / "out")  # a command that ran could leave its marker
    for n, (case, (edits, said)) in enumerate(CRAFTED.items()):
        for where in ("here", "elsewhere"):
            marker = out / f"ran{n}{where}"
            Path(f"{marker}.sh").write_text(f"touch {marker}\n")
            statements = [*edits(marker), *([ELSEWHERE] if where == "elsewhere" else [])]
            db = _interrupted(command_db, tmp_path / f"c{n}{where}.db", *statements)
            r = cli("run", "--resume", "--db", str(db))
            tried += 1
            ran += marker.exists()
            # Nothing of it signed by this user: asked first, what it would run shown whole
            assert r.returncode == 2 and "not signed by you" in r.stderr, (case, where, r.stderr)
            assert "Traceback" not in r.stderr and "add --yes" in r.stderr
            if "BASH_ENV" not in case:
                assert f"touch {marker}" in r.stderr, r.stderr
            assert "LD_PRELOAD=" in r.stderr, r.stderr
            if said == "add --yes":
                continue  # approved, it runs what the user saw: nothing left to refuse
            # Approved with --yes, a run unlike its cell is still refused
            r = cli("run", "--resume", "--yes", "--db", str(db))
            ran += marker.exists()
            assert r.returncode == 2 and said in r.stderr, (case, where, r.stderr)
    print(
        f"\nunplanned commands run: {ran} of {tried} crafted resumes "
        f"({len(CRAFTED)} crafts, each with created_by here and elsewhere)"
    )
    assert ran == 0


def test_a_resume_asks_for_runs_another_key_signed(tmp_path: Path, command_db: Path) -> None:
    db = _interrupted(command_db, tmp_path / "k.db")
    # Signed by this user's key: resumed without a question.
    ok = cli("run", "--resume", "--db", str(db))
    assert ok.returncode == 0, ok.stderr
    # Under another user's key (another config directory), the same plan asks first,
    # whatever created_by says, and runs once confirmed.
    db = _interrupted(command_db, tmp_path / "k2.db")
    other = {"XDG_CONFIG_HOME": str(tmp_path / "other")}
    asked = cli("run", "--resume", "--db", str(db), env=other)
    assert asked.returncode == 2 and "not signed by you" in asked.stderr, asked.stderr
    assert "LD_PRELOAD=" in asked.stderr and "true" in asked.stderr
    assert cli("run", "--resume", "--yes", "--db", str(db), env=other).returncode == 0
    with sqlite3.connect(db) as con:  # the two pending runs ran, and nothing else
        done = con.execute("SELECT count(*) FROM runs").fetchone()[0]
        planned = con.execute("SELECT count(*) FROM plan").fetchone()[0]
        status = con.execute("SELECT status FROM campaigns").fetchone()[0]
    assert done == planned and status == "finished", (done, planned, status)


def test_report_compare_and_export_run_nothing_from_a_database(
    command_db: Path, tmp_path: Path
) -> None:
    marker = writable_by_all(tmp_path / "out") / "ran"  # a command that ran could leave it
    edit = f"UPDATE plan SET argv_json='{_touch(marker)}'"
    db = _interrupted(command_db, tmp_path / "r.db", edit)
    for args in (
        ["report", "--db", str(db)],
        ["report", "--db", str(db), "--runs", "--format", "csv"],
        ["compare", str(db), str(command_db)],
        ["report", "--db", str(db), "--format", "json"],
    ):
        r = cli(*args)
        assert "Traceback" not in r.stderr, (args, r.stderr)
    assert not marker.exists()


# -- an allocator library's constructor ---------------------------------------------
def test_an_allocator_constructor_never_runs_inside_allocmark(tmp_path: Path) -> None:
    log = writable_by_all(tmp_path / "log") / "where"  # the measured runs log there too
    log.touch()
    log.chmod(0o666)
    so = build_so(
        tmp_path,
        "spy",
        f'''
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
void *malloc(size_t n) {{ return __libc_malloc(n); }}
void *calloc(size_t n, size_t m) {{ return __libc_calloc(n, m); }}
void *realloc(void *p, size_t n) {{ return __libc_realloc(p, n); }}
void free(void *p) {{ __libc_free(p); }}
__attribute__((constructor)) static void am_spy(void) {{
  char exe[256] = "", line[320];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) exe[n] = 0;
  int fd = open("{log}", O_WRONLY | O_CREAT | O_APPEND, 0600);
  int len = snprintf(line, sizeof line, "%d %s\\n", (int)getpid(), exe);
  if (fd >= 0 && write(fd, line, (size_t)len) == len) close(fd);
}}
''',
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "allocmark",
            "try",
            "-a",
            f"spy={so}",
            "-n",
            "1",
            "--db",
            str(tmp_path / "s.db"),
            "--",
            "true",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = proc.communicate(timeout=300)
    assert "Traceback" not in err, err
    seen = [line.split(" ", 1) for line in log.read_text().splitlines()]
    inside = [exe for pid, exe in seen if int(pid) == proc.pid or "python" in Path(exe).name]
    print(
        f"\nallocator constructors run inside allocmark: {len(inside)} of {len(seen)} "
        "processes it ran in"
    )
    assert seen and inside == [], seen
    assert os.getpid() not in {int(pid) for pid, _ in seen}


# -- an allocator that forges libam_who's report -------------------------------------
# It serves malloc itself (forwarding to glibc's, so the program runs) and, as each
# process ends, writes libam_who's report for its own pid claiming glibc served it.
FORGED_WHO = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
@FORWARDING@
__attribute__((destructor)) static void am_forge(void) {
  const char *dir = getenv("AM_WHO_DIR"), *libc = "LIBC";
  if (!dir) return;
  char exe[1024] = "", path[4200], line[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) exe[n] = 0;
  snprintf(path, sizeof path, "%s/%d.0", dir, (int)getpid());
  int len = snprintf(line, sizeof line,
      "{\"am\":\"who\",\"v\":2,\"pid\":%d,\"exe\":\"%s\",\"served\":{\"malloc\":\"%s\","
      "\"free\":\"%s\",\"calloc\":\"%s\",\"realloc\":\"%s\"},\"libc\":\"%s\",\"defines\":[]}\n",
      (int)getpid(), exe, libc, libc, libc, libc, libc);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0 && write(fd, line, (size_t)len) == len) close(fd);
}
"""


def test_an_allocator_that_forges_its_identity_is_never_stored_as_glibc(
    tmp_path: Path, installed: dict[str, Verified]
) -> None:
    libc = installed["glibc"].malloc_object
    assert libc
    source = FORGED_WHO.replace("@FORWARDING@", FORWARDING)
    so = build_so(tmp_path, "forge", source.replace("LIBC", os.path.realpath(libc)))
    cases = {  # the program brings the forger in; allocmark was asked for glibc
        "instead of libam_who": ["env", f"LD_PRELOAD={so}", "true"],
        "before allocmark's preloads": ["sh", "-c", f'LD_PRELOAD="{so}:$LD_PRELOAD" exec true'],
    }
    stored = []
    for case, argv in cases.items():
        db = tmp_path / f"{len(stored)}.db"
        r = cli(
            "try", "-i", "-a", "glibc", "-n", "2", "--max-blocks", "2", "--db", str(db), "--", *argv
        )
        # never a number: the cell has no result, and the exit status says so
        assert r.returncode == 1 and "without a result" in r.stderr, (case, r.stderr)
        runs = _runs(db)
        stored += runs
        assert runs and {s for _, s, _ in runs} == {"unverified"}, (case, runs)
        assert all(str(so) in detail for _, _, detail in runs), (case, runs)
    print(
        f"\nruns of a forging allocator stored as glibc: "
        f"{sum(s == 'ok' for _, s, _ in stored)} of {len(stored)}"
    )


# -- a program that goes for the store, the cache and the libraries -------------------
# Tries each and leaves a word in OUT for each it managed: nothing must be there.
ATTACK = r"""
import os, sqlite3, sys
db, cache, lib, out = sys.argv[1:5]
done = []
try:
    with sqlite3.connect(db) as con:
        con.execute("DELETE FROM runs")
    done.append("store")
except sqlite3.Error:
    pass
try:
    os.close(os.open(os.path.join(cache, "planted"), os.O_WRONLY | os.O_CREAT, 0o644))
    done.append("cache")
except OSError:
    pass
try:
    os.close(os.open(lib, os.O_WRONLY))  # opened for writing, never written
    done.append("library")
except OSError:
    pass
with open(os.path.join(out, "reached"), "w") as f:
    f.write(" ".join(done))
"""


def test_a_program_run_by_root_cannot_reach_the_store_the_cache_or_the_libraries(
    tmp_path: Path,
) -> None:
    if os.geteuid() != 0:
        pytest.skip("allocmark runs the program as another user only when it runs as root")
    from allocmark import native

    db, script = tmp_path / "t.db", tmp_path / "attack.py"
    script.write_text(ATTACK)
    out = writable_by_all(tmp_path / "out")
    cache, lib = native.cache_root(), native.library("libam_who.so")
    first = cli("try", "-a", "glibc", "-n", "2", "--max-blocks", "2", "--db", str(db), "--", "true")
    assert first.returncode == 0, first.stderr
    before = _runs(db)
    r = cli(
        "try",
        "-a",
        "glibc",
        "-n",
        "2",
        "--max-blocks",
        "2",
        "--db",
        str(db),
        "--",
        "/usr/bin/python3",
        str(script),
        str(db),
        str(cache),
        str(lib),
        str(out),
    )
    assert r.returncode == 0, r.stderr
    assert (out / "reached").read_text() == ""  # the program ran, and reached nothing
    assert not (cache / "planted").exists()
    with sqlite3.connect(db) as con:
        kept = con.execute(
            "SELECT role, status, detail FROM runs WHERE campaign_id = 1 ORDER BY seq"
        ).fetchall()
    assert kept == before and len(_runs(db)) == 2 * len(before)
    print(
        f"\nwhat a program run by root reached: {(out / 'reached').read_text() or 'nothing'}; "
        f"runs of the earlier campaign kept: {len(before)} of {len(before)}"
    )
