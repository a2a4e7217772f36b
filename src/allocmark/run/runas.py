"""What the measured program's identity must not be able to change, and its files.

The identity itself (a campaign's transient uid as root, `--run-as USER`, or none) is
native/identity.py's; here, `guard` checks, by the real path of each and of every
directory above it, that the identity can change none of the protected paths (the
database and its directory, the cache, allocmark's programs and libraries, each
allocator's library) and can read the packaged libraries: a path it could change is
refused with the path named, never run as. `hand_over` gives a run its own directory.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

from allocmark import native
from allocmark.errors import UserError
from allocmark.native.identity import (
    RunAs as RunAs,
    campaign as campaign,
    chosen as chosen,
    transient as transient,
)


def guard(db: Path, libraries: Iterable[str] = ()) -> RunAs | None:
    """The chosen identity, once it is known not to be able to change the store, the
    cache, the packaged programs and libraries or an allocator's library -- by the real
    path of each and every directory above it -- and to be able to read the packaged
    libraries."""
    if db.is_dir():
        raise UserError(f"--db {db}: is a directory; give the database file, e.g. {db}/a.db")
    if db.exists() and not db.is_file():  # /dev/full: no database at all
        raise UserError(
            f"--db {db}: not a regular file; name a database file, e.g. --db results/mine.db"
        )
    user = chosen()
    if user is None:
        return None
    protected = {
        db: "the results database",
        db.parent: "the results database's directory",
        native.cache_root(): "allocmark's cache",
        native.library("libam_who.so").parent: "allocmark's libraries",
        native.program("am_run").parent: "allocmark's programs",
    } | {Path(lib): "an allocator's library" for lib in libraries}
    for path, what in protected.items():
        if (reach := reachable(user, path)) is not None:
            raise UserError(
                f"{path} ({what}) can be changed by {user.name}, the identity the measured "
                f"program runs as, through {reach}: it could change the results; put it "
                "where only root can write (the database in a directory such as "
                "results/), or pass --run-as with a user who cannot write it"
            )
    lib = native.library("libam_who.so")
    if not can_read(user, lib):
        raise UserError(
            f"{lib} (allocmark's libraries) cannot be read by {user.name}, the user "
            "the measured program runs as: install allocmark where every user can "
            "read it, or pass --run-as root"
        )
    return user


def reachable(user: RunAs, path: Path) -> Path | None:
    """The first of `path` (its real path) and the directories above it that `user`
    could change -- write, or rename away and replace -- or None."""
    real = Path(os.path.realpath(path))
    if not real.exists():
        real = real.parent  # a database not made yet: its directory is what counts
    with contextlib.suppress(OSError):
        if can_write(user, real):
            return real
    for above in real.parents:
        with contextlib.suppress(OSError):
            if can_replace(user, above):
                return above
    return None


def _is(user: RunAs, uid: int, group: bool = False) -> bool:
    """Whether `uid` (or a gid: the launcher leaves the program its primary group only,
    am_run.c) is `user`'s; for a campaign's transient identity, whether it is any
    campaign's: another live campaign's program may change what its uid owns, and no
    campaign's data may be where another's program can reach it."""
    if transient(user):
        return transient(RunAs("", uid, uid))
    return uid == (user.gid if group else user.uid)


def _allows(user: RunAs, st: os.stat_result, bits: tuple[int, int, int]) -> bool:
    """Whether the file's mode grants `user` the access whose owner/group/other bits
    are `bits`."""
    if _is(user, st.st_uid):
        return bool(st.st_mode & bits[0])
    if _is(user, st.st_gid, group=True):
        return bool(st.st_mode & bits[1])
    return bool(st.st_mode & bits[2])


_WRITE = (stat.S_IWUSR, stat.S_IWGRP, stat.S_IWOTH)
_READ = (stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH)
_SEARCH = (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)


def can_write(user: RunAs, path: Path) -> bool:
    """Could `user` change `path`: write it, or replace it in its directory?"""
    return _allows(user, path.stat(), _WRITE) or can_replace(user, path)


def can_replace(user: RunAs, path: Path) -> bool:
    """Could `user` put something else at `path`: own it (and so change its mode), or
    rename it away in a directory it can write (which the sticky bit forbids for others'
    files)?"""
    st = path.lstat()
    if _is(user, st.st_uid) or path.parent == path:
        return _is(user, st.st_uid)
    parent = path.parent.stat()
    sticky = bool(parent.st_mode & stat.S_ISVTX)
    return _allows(user, parent, _WRITE) and not sticky


def can_read(user: RunAs, path: Path) -> bool:
    """Could `user` open `path` for reading (every directory above it searchable)?"""
    path = Path(os.path.realpath(path))
    try:
        for above in reversed(path.parents):
            if not _allows(user, above.stat(), _SEARCH):
                return False
        return _allows(user, path.stat(), _READ)
    except OSError:
        return False


def program(name: str) -> str:
    """The file a command's name runs, found as the caller's shell finds it (their
    PATH, their working directory), as an absolute path; and refused if the measured
    program's identity cannot run that exact file (the launcher's own PATH search
    would silently run another: /usr/bin/python3 for root's pyenv python3)."""
    found = shutil.which(name) if "/" not in name else name
    path = os.path.abspath(found or name)
    user = chosen()
    if user is not None and (why := cannot_run(user, Path(path))):
        raise UserError(
            f"{name} is {path}, which {user.name}, the identity the measured program runs "
            f"as, cannot run: {why}. Install it where every user can read it, or pass "
            "--run-as root (or --run-as a user who can run it)"
        )
    return path


def cannot_run(user: RunAs, path: Path, depth: int = 0) -> str:
    """Why `user` cannot execute `path` ("" if it can): a directory above it it may not
    search, the file's mode, or a script's interpreter, in turn."""
    real = Path(os.path.realpath(path))
    try:
        for above in reversed(real.parents):
            if not _allows(user, above.stat(), _SEARCH):
                return f"{above} is closed to it"
        st = real.stat()
        if not _allows(user, st, _SEARCH):
            return f"{real} is not executable by it"
        with open(real, "rb") as f:
            head = f.read(256)
    except OSError as e:
        return f"{real}: {e.strerror or e}"
    if head.startswith(b"#!") and depth < 4:
        if not _allows(user, st, _READ):
            return f"{real} is a script it cannot read"
        words = head[2:].split(b"\n")[0].split()
        if words:
            return cannot_run(user, Path(os.fsdecode(words[0])), depth + 1)
    return ""


def hand_over(user: RunAs | None, *paths: Path) -> None:
    """Make a run's own files and directories the user's: the program writes there."""
    if user is None:
        return
    for path in paths:
        os.chown(path, user.uid, user.gid)
        path.parent.chmod(0o711)  # the run's directory: passable, not listable
