"""Which user the measured program runs as, and what it must not be able to write.

Run as root, allocmark runs the measured processes as an unprivileged user, so that a
program or an allocator library (untrusted input) cannot write the results database,
the cache or the libraries later runs load: `--run-as USER` (or ALLOCMARK_RUN_AS),
else the invoking user under sudo (SUDO_USER), else the user `allocmark` that `make
setup` creates; `--run-as root` keeps the old way, with nothing guarded. The launcher
changes to that user in the child, before its exec (am_run.c, AM_RUN_USER); a run's
own directory is handed to it. Not run as root, allocmark cannot change users: the
program runs as allocmark's own user and can write what that user can (docs/setup.md).

Before a campaign runs, `guard` checks that the chosen user can write none of the
protected paths (and can read the packaged libraries): a user who could is refused
with the path named, never run as.
"""

from __future__ import annotations

import functools
import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

from allocmark import native
from allocmark.defaults import (
    RUN_AS_DEFAULT as DEDICATED,  # `make setup` creates it
    RUN_AS_ENV as ENV,
)
from allocmark.errors import UserError


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
    """The user the measured program runs as; None: allocmark's own (not root, or
    `--run-as root`)."""
    return _chosen(os.environ.get(ENV, ""), os.environ.get("SUDO_USER", ""), os.geteuid())


@functools.cache
def _chosen(asked: str, sudo_user: str, euid: int) -> RunAs | None:
    if euid != 0:
        if asked and asked != pwd.getpwuid(euid).pw_name:
            raise UserError(
                f"--run-as {asked}: only root can run the program as another user; "
                "drop --run-as (it then runs as you)"
            )
        return None
    name = asked or (sudo_user if sudo_user and sudo_user != "root" else DEDICATED)
    if name == "root":
        return None
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        fix = (
            "`make setup` creates it (as root), or pass --run-as USER"
            if name == DEDICATED
            else "pass --run-as with an existing user"
        )
        raise UserError(f"--run-as {name}: no such user on this machine: {fix}") from None
    if entry.pw_uid == 0:
        return None
    return RunAs(name, entry.pw_uid, entry.pw_gid)


def guard(db: Path) -> RunAs | None:
    """The chosen user, once it is known not to be able to write the store, the cache
    or the packaged programs and libraries, and to be able to read the latter."""
    user = chosen()
    if user is None:
        return None
    protected = {
        db: "the results database",
        db.parent: "the results database's directory",
        native.cache_root(): "allocmark's cache",
        native.library("libam_who.so").parent: "allocmark's libraries",
        native.program("am_run").parent: "allocmark's programs",
    }
    for path, what in protected.items():
        if path.exists() and can_write(user, path):
            raise UserError(
                f"{path} ({what}) is writable by {user.name}, the user the measured "
                "program runs as, who could change the results: put it where only "
                "root can write (the database in a directory such as results/), or "
                "pass --run-as with a user who cannot write it"
            )
    lib = native.library("libam_who.so")
    if not can_read(user, lib):
        raise UserError(
            f"{lib} (allocmark's libraries) cannot be read by {user.name}, the user "
            "the measured program runs as: install allocmark where every user can "
            "read it, or pass --run-as root"
        )
    return user


def _groups(user: RunAs) -> set[int]:
    """The groups the launcher leaves the program: its primary group only (am_run.c)."""
    return {user.gid}


def _allows(user: RunAs, st: os.stat_result, bits: tuple[int, int, int]) -> bool:
    """Whether the file's mode grants `user` the access whose owner/group/other bits
    are `bits`."""
    if st.st_uid == user.uid:
        return bool(st.st_mode & bits[0])
    if st.st_gid in _groups(user):
        return bool(st.st_mode & bits[1])
    return bool(st.st_mode & bits[2])


_WRITE = (stat.S_IWUSR, stat.S_IWGRP, stat.S_IWOTH)
_READ = (stat.S_IRUSR, stat.S_IRGRP, stat.S_IROTH)
_SEARCH = (stat.S_IXUSR, stat.S_IXGRP, stat.S_IXOTH)


def can_write(user: RunAs, path: Path) -> bool:
    """Could `user` change `path`: write it, or replace it in its directory (which the
    sticky bit forbids for others' files)?"""
    st = path.stat()
    if _allows(user, st, _WRITE):
        return True
    parent = path.parent.stat()
    sticky = bool(parent.st_mode & stat.S_ISVTX) and st.st_uid != user.uid
    return _allows(user, parent, _WRITE) and not sticky and path.parent != path


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


def hand_over(user: RunAs | None, *paths: Path) -> None:
    """Make a run's own files and directories the user's: the program writes there."""
    if user is None:
        return
    for path in paths:
        os.chown(path, user.uid, user.gid)
        path.parent.chmod(0o711)  # the run's directory: passable, not listable
