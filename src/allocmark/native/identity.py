"""The identity untrusted code runs as, and a way to run it there.

Run as root, allocmark runs everything untrusted -- the measured program, the probe that
loads an allocator (its constructors run there), a repository's build command -- under
an identity of the campaign's own: a transient uid (and gid of the same number) drawn
from TRANSIENT_BASE .. +TRANSIENT_COUNT, which has no passwd entry, owns no file but the
run directories handed to it, and which no other allocmark holds at the same time (a
lock file per uid under IDS, held while the campaign runs). When the campaign ends, and
after each build or probe, every process of that uid is killed (`am_run --sweep`:
kill(-1) as that uid): nothing untrusted code started outlives it, and no campaign's
code can signal or trace another's. `--run-as USER` (ALLOCMARK_RUN_AS) names a real
user instead, whose processes are never swept (they may be the user's own): what a
build or probe starts is then ended by the launcher's tree alone. `--run-as root` runs
everything as root, unguarded. Not root, allocmark cannot change identities.

`contained` runs a command the way a measured run is started: through the launcher
am_run (static, a subreaper that kills its whole tree when the command ends), as the
identity, with no supplementary groups and no new privileges.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import grp
import os
import pwd
import secrets
import signal
import stat
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from allocmark import files, native
from allocmark.defaults import RUN_AS_ENV, TRANSIENT_BASE, TRANSIENT_COUNT
from allocmark.errors import UserError
from allocmark.native import records

ENV = RUN_AS_ENV  # what `allocmark --run-as USER` sets
IDS = Path("/run/allocmark/ids")  # root's: one lock file per transient uid in use
TRANSIENT = "transient"  # what _chosen says when the campaign's own identity is due


@dataclass(frozen=True)
class RunAs:
    """The unprivileged user the measured processes run as."""

    name: str
    uid: int
    gid: int

    @property
    def env(self) -> str:
        """AM_RUN_USER for the launcher."""
        return f"{self.uid}:{self.gid}"


def chosen() -> RunAs | None:
    """The identity the measured program runs as; None: allocmark's own (not root, or
    `--run-as root`)."""
    asked = _chosen(os.environ.get(ENV, ""), os.geteuid())
    return current() if asked == TRANSIENT else asked  # type: ignore[return-value]


@functools.cache
def _chosen(asked: str, euid: int) -> RunAs | str | None:
    if euid != 0:
        if asked and asked != pwd.getpwuid(euid).pw_name:
            raise UserError(
                f"--run-as {asked}: only root can run the program as another user; "
                "drop --run-as (it then runs as you)"
            )
        return None
    if not asked:
        return TRANSIENT
    if asked == "root":
        return None
    try:
        entry = pwd.getpwnam(asked)
    except KeyError:
        raise UserError(
            f"--run-as {asked}: no such user on this machine: pass --run-as with an "
            "existing user, or leave it out (the program then runs as a transient uid "
            "of its campaign's own)"
        ) from None
    if entry.pw_uid == 0:
        return None
    return RunAs(asked, entry.pw_uid, entry.pw_gid)


@dataclass
class _Held:
    """The transient identity this process holds, and the lock that reserves it."""

    who: RunAs
    lock: int


_held: list[_Held] = []


def current() -> RunAs:
    """The transient identity of the campaign under way, claimed on first use."""
    if not _held:
        _held.append(_claim())
    return _held[0].who


def fresh() -> None:
    """A new campaign starts: the identity of the one before is swept and let go, so
    that no two campaigns share one (the next `current()` claims another)."""
    release()


def release() -> None:
    """Kill every process of the transient identity, remove what it left in the
    world-writable directories, then let the uid go (its lock file removed)."""
    while _held:
        held = _held.pop()
        _let_go(held.who, held.lock)


def _let_go(who: RunAs, lock: int) -> None:
    """`who`'s processes killed and leftovers removed, then its lock file, while held:
    a claim checks that the file it locked is still the one at that name."""
    sweep(who)
    _sweep_files(who.uid)
    with contextlib.suppress(OSError):
        files.remove(IDS / str(who.uid))
    os.close(lock)


# Where any user may create files: what a campaign's program left there under its
# identity (a directory, a link for a later export to follow) goes with the identity.
SHARED_DIRS = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))


def _sweep_files(uid: int) -> None:
    for top in SHARED_DIRS:
        with contextlib.suppress(OSError), os.scandir(top) as entries:
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.stat(follow_symlinks=False).st_uid != uid:
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        files.remove_tree(Path(entry.path))
                    else:
                        files.remove(Path(entry.path))


def sweep_stale() -> int:
    """The uids of campaigns that died (a lock file no allocmark holds): their
    processes killed, their leftovers and lock files removed. How many there were."""
    if os.geteuid() != 0 or not IDS.is_dir():
        return 0
    n = 0
    for entry in os.listdir(IDS):
        if not entry.isdigit() or not transient(RunAs("", int(entry), int(entry))):
            continue
        try:
            fd = files.lock(IDS / entry)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)  # a live campaign's
            continue
        _let_go(RunAs(f"uid {entry}", int(entry), int(entry)), fd)
        n += 1
    return n


atexit.register(release)


@contextlib.contextmanager
def campaign() -> Iterator[None]:
    """A campaign's span: a transient identity of its own, swept when it ends."""
    fresh()
    try:
        yield
    finally:
        release()


def _claim() -> _Held:
    """A uid from the transient range that no passwd or group entry names and no other
    allocmark holds; what dead campaigns left (processes, files, their uids' lock
    files) is swept first."""
    _ids_dir()
    sweep_stale()
    for _ in range(64):
        uid = TRANSIENT_BASE + secrets.randbelow(TRANSIENT_COUNT)
        if _named(uid):
            continue
        fd = files.lock(IDS / str(uid))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if not _still_named(fd, IDS / str(uid)):
                raise BlockingIOError  # let go and removed meanwhile: not a claim
        except BlockingIOError:
            os.close(fd)
            continue
        who = RunAs(f"uid {uid}", uid, uid)
        sweep(who)
        return _Held(who, fd)
    raise UserError(f"no free transient uid in {IDS}: too many campaigns at once")


def _still_named(fd: int, path: Path) -> bool:
    """Whether the locked file is the one at `path` (a release unlinks it after)."""
    try:
        a, b = os.fstat(fd), os.lstat(path)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _ids_dir() -> None:
    """IDS, root's alone: a directory others could write would let them hold uids."""
    files.directory(IDS.parent, 0o755, parents=True)
    files.directory(IDS, 0o700)
    for d in (IDS, IDS.parent):
        st = os.lstat(d)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
            raise UserError(f"{d} must be a directory only root can write; remove it")


def _named(uid: int) -> bool:
    """Whether a passwd or group entry already names the number."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        with contextlib.suppress(KeyError):
            lookup(uid)
            return True
    return False


def transient(user: RunAs | None) -> bool:
    """Whether `user` is a campaign's own identity (whose processes may all be killed)."""
    return user is not None and TRANSIENT_BASE <= user.uid < TRANSIENT_BASE + TRANSIENT_COUNT


def sweep(user: RunAs | None) -> None:
    """Kill every process of a transient identity: `am_run --sweep` runs as that uid and
    sends SIGKILL to all it may signal (kill(-1)) until none is left."""
    if not transient(user):
        return
    assert user is not None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            [str(native.program("am_run")), "--sweep"],
            user=user.uid,
            group=user.gid,
            extra_groups=[],
            env={},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
            check=False,
        )


# What untrusted code gets of allocmark's own environment: where programs are, the
# locale, the time zone, the terminal's kind. Nothing else of root's (HOME, tokens,
# XDG_*, SSH_*, ...): the run's HOME and TMPDIR are its own directory (execute.py), and
# what else a program needs is said by its workload, its allocator or `try --env`.
KEPT = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM")


def environment(additions: Mapping[str, str] | Sequence[tuple[str, str]] = ()) -> dict[str, str]:
    """The documented minimal environment (KEPT and LC_*) plus `additions`."""
    env = {k: v for k, v in os.environ.items() if k in KEPT or k.startswith("LC_")}
    env.setdefault("PATH", os.defpath)
    return env | dict(additions)


def start(
    argv: Sequence[str],
    env: Mapping[str, str],
    status_fd: int,
    options: Sequence[str] = (),
    cwd: Path | None = None,
    stdout: int = subprocess.DEVNULL,
    stderr: int = subprocess.DEVNULL,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """THE door: every piece of untrusted code allocmark runs (a measured run, a
    service's server and client, an allocator's probe, a build, `--prepare`, tune's
    settings display) starts here, and nowhere else (tests/test_doors.py reads the
    code for any other process start). It runs `argv` through the static launcher
    am_run (`options` are its own: --steps, --memory-limit), as the campaign's
    identity (`chosen`), in a session of its own, every process it starts ended with
    it; am_run writes its "run" record on `status_fd`. `env` must give the command a
    HOME and a TMPDIR of its own (a run's directory, a build's); LD_PRELOAD in it
    reaches the command only, never the launcher."""
    if "HOME" not in env or "TMPDIR" not in env:
        raise ValueError("untrusted code gets a HOME and a TMPDIR of its own")
    env = {k: v for k, v in env.items() if k != "AM_RUN_USER"}
    if "LD_PRELOAD" in env:
        env["AM_RUN_LD_PRELOAD"] = env.pop("LD_PRELOAD")
    user = chosen()
    if user is not None:
        env["AM_RUN_USER"] = user.env
    return subprocess.Popen(
        [str(native.program("am_run")), str(status_fd), *options, *argv],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,  # its own process group: a timeout ends all of it
        pass_fds=(status_fd, *pass_fds),
    )


@contextlib.contextmanager
def home(prefix: str = "allocmark-home-", handed: bool = True) -> Iterator[Path]:
    """A private directory for a command's HOME and TMPDIR, removed with all it holds
    (0700, in a scratch directory others may pass but not list: no other identity can
    reach it), the identity's at once or, not `handed`, once the caller has filled it
    and given it (`give`): a build's checkout or project."""
    with files.scratch(prefix) as tmp:
        own = files.directory(tmp / "home", 0o700)
        if chosen() is not None:
            tmp.chmod(0o711)  # passable, not listable
            if handed:
                give(own)
        yield own


def version(tool: str, env: Mapping[str, str]) -> str | None:
    """The first line `TOOL --version` prints (None: it cannot say), for a build's
    provenance: through the door, since a recipe's CC is the user's to name."""
    try:
        done = contained([tool, "--version"], env, 60)
    except OSError:
        return None
    lines = done.stdout.decode(errors="replace").splitlines()
    return lines[0] if done.code == 0 and lines else None


def give(tree: Path) -> None:
    """`tree` and all it holds made the identity's (a build's checkout or project): no
    link in it is followed."""
    user = chosen()
    if user is None:
        return
    os.lchown(tree, user.uid, user.gid)
    for root, dirs, names in os.walk(tree):
        for name in (*dirs, *names):
            os.lchown(os.path.join(root, name), user.uid, user.gid)


def owner() -> int:
    """The uid of files untrusted code makes (a build's output must be one of them)."""
    user = chosen()
    return user.uid if user is not None else os.geteuid()


@dataclass(frozen=True)
class Contained:
    """How a contained command ended: its exit code (-N: killed by signal N; None: it
    ran past its timeout and was ended), and its output."""

    code: int | None
    stdout: bytes
    stderr: bytes
    exec_errno: int = 0  # the command could not be started (ENOENT, EACCES): 127 as a shell


def contained(
    argv: Sequence[str],
    env: Mapping[str, str],
    timeout: float,
    cwd: Path | None = None,
    stdout: int | None = subprocess.PIPE,
) -> Contained:
    """`argv` run through the door (`start`) as the untrusted identity (none:
    allocmark's own), every process it starts ended with it, swept after; stderr is
    merged into `stdout` when that is a file. Without a HOME of its own in `env`, the
    command gets a private one (also its TMPDIR) for its length; a TMPDIR missing
    beside a HOME is that HOME."""
    if "HOME" not in env:
        with home() as own:
            return contained(argv, {**env, "HOME": str(own)}, timeout, cwd, stdout)
    env = {"TMPDIR": env["HOME"], **env, "AM_RUN_SAMPLE_US": "0"}
    status_r, status_w = os.pipe()
    try:
        proc = start(
            argv,
            env,
            status_w,
            cwd=cwd,
            stdout=subprocess.PIPE if stdout is None else stdout,
            stderr=subprocess.PIPE if stdout == subprocess.PIPE else subprocess.STDOUT,
        )
    except OSError:
        os.close(status_r)
        raise
    finally:
        os.close(status_w)
    try:
        out, err = proc.communicate(timeout=timeout)
        ended = False
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the launcher ends its whole tree
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        ended = True
    finally:
        with os.fdopen(status_r, "rb") as f:
            record = f.read(1 << 16)
        sweep(chosen())
    code = None if ended else exit_code(proc.returncode, record)
    return Contained(code, out or b"", err or b"", _exec_errno(record) if code == 127 else 0)


def _exec_errno(record: bytes) -> int:
    """The launcher's "run" record's exec_errno (0: the command started)."""
    try:
        found = records.only(records.parse(record, "the launcher's pipe"), "run", "the launcher")
        return int(found.get("exec_errno", 0))
    except (records.RecordError, TypeError, ValueError):
        return 0


def exit_code(launcher: int, record: bytes) -> int:
    """The command's exit code (-N: signal N) from the launcher's "run" record."""
    if launcher != 0:
        return -signal.SIGKILL if launcher < 0 else 127
    try:
        found = records.only(records.parse(record, "the launcher's pipe"), "run", "the launcher")
        if int(found.get("exec_errno", 0)):
            return 127
        status = int(found["status"])
    except (records.RecordError, KeyError, TypeError, ValueError):
        return 127
    return -(status & 0x7F) if status & 0x7F else (status >> 8) & 0xFF
