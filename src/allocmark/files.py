"""The one door every file allocmark writes goes through (docs/security.md).

A file is written whole into a new temporary file in its directory (created with
O_EXCL and O_NOFOLLOW through the directory's descriptor), then renamed over its
name: no link is followed, at the file or on its path, and a reader sees all of it or
nothing. The directory is opened along its real path one component at a time with no
link followed, and neither others (the world-writable bit) nor any identity untrusted
code runs as (the whole transient uid range, and a `--run-as` user) may write it or
replace it or any directory above it: what the measured program made under /var/tmp
is never where allocmark writes. A user's output never creates a missing directory
(`--plots DIR` makes DIR alone); allocmark's own directories (its cache, a database's
directory) are made by `directory`. The results database and its -wal, -shm and
-journal (every database this process opened: `protect`), and any existing SQLite
file, are never written over or removed.

Written by hand over os.open's `dir_fd`: Python's file functions follow links and
resolve paths by name at each call, which is the race this module closes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pwd
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Literal, overload

from allocmark.defaults import RUN_AS_ENV, TRANSIENT_BASE, TRANSIENT_COUNT
from allocmark.errors import UserError

SQLITE = b"SQLite format 3\x00"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_protected: set[tuple[int, int]] = set()  # (st_dev, st_ino) of every database opened
_protected_names: set[Path] = set()  # and their real paths, for -wal/-shm not made yet


class Refused(UserError):
    """A file allocmark will not write there: the message says why and what to do."""


def protect(database: Path) -> None:
    """The results database (and its -wal, -shm, -journal) is never written over."""
    real = Path(os.path.realpath(database))
    _protected_names.add(real)
    with contextlib.suppress(OSError):
        st = os.stat(real)
        _protected.add((st.st_dev, st.st_ino))


def _hostile(uid: int) -> bool:
    """Whether `uid` (or a gid) is an identity untrusted code runs as."""
    if TRANSIENT_BASE <= uid < TRANSIENT_BASE + TRANSIENT_COUNT:
        return True
    return uid in _run_as()


def _run_as() -> set[int]:
    """The `--run-as USER` user's uid and gid (not root's): the program's identity."""
    name = os.environ.get(RUN_AS_ENV, "")
    if not name or name == "root" or os.geteuid() != 0:
        return set()
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return set()
    return {entry.pw_uid, entry.pw_gid} - {0}


def _writable_by_others(st: os.stat_result) -> str:
    """Who but us could write into a directory of this status ("" for nobody)."""
    if _hostile(st.st_uid):
        return f"uid {st.st_uid}, an identity untrusted code runs as, owns it"
    if st.st_mode & stat.S_IWOTH:
        return "every user can write it"
    if st.st_mode & stat.S_IWGRP and _hostile(st.st_gid):
        return f"group {st.st_gid}, an identity untrusted code runs as, can write it"
    return ""


def _replaceable(st: os.stat_result) -> str:
    """Who could rename away what this directory holds: a writer of it, unless the
    sticky bit keeps others' entries theirs; its owner always."""
    if _hostile(st.st_uid):
        return f"uid {st.st_uid}, an identity untrusted code runs as, owns it"
    if st.st_mode & stat.S_ISVTX:
        return ""
    if st.st_mode & stat.S_IWOTH:
        return "every user can write it"
    if st.st_mode & stat.S_IWGRP and _hostile(st.st_gid):
        return f"group {st.st_gid}, an identity untrusted code runs as, can write it"
    return ""


def _refuse(path: Path, what: str, why: str) -> Refused:
    return Refused(
        f"{what} {path}: {why}; give a path in a directory only you (or root) can write, "
        "e.g. results/"
    )


@contextlib.contextmanager
def _opened(directory: Path, what: str, target: Path) -> Iterator[int]:
    """The directory's descriptor, reached from / one component at a time with no
    link followed by the kernel: a link on the way is read and walked here, and every
    directory passed through (the one holding a link too) is checked: nobody else may
    change it or replace what it holds."""
    fd = _walk(Path(os.path.abspath(directory)), what, target)
    try:
        if why := _writable_by_others(os.fstat(fd)):
            raise _refuse(target, what, f"{directory}: {why}")
        yield fd
    finally:
        os.close(fd)


_HOPS = 40  # links followed on one path, as the kernel's ELOOP limit


def _walk(path: Path, what: str, target: Path) -> int:
    stack = [os.open("/", _DIR)]  # the directories passed through, for ".."
    names = [Path("/")]
    parts, hops = list(path.parts[1:]), 0
    try:
        while parts:
            part = parts.pop(0)
            if part in ("", "."):
                continue
            if part == "..":
                if len(stack) > 1:
                    os.close(stack.pop())
                    names.pop()
                continue
            here = names[-1]
            if why := _replaceable(os.fstat(stack[-1])):
                raise _refuse(target, what, f"{here}: {why}")
            try:
                st = os.stat(part, dir_fd=stack[-1], follow_symlinks=False)
            except FileNotFoundError:
                raise Refused(
                    f"{what} {target}: the directory {here / part} does not exist; make it "
                    "first (allocmark creates no directory for an output)"
                ) from None
            if stat.S_ISLNK(st.st_mode):
                if _hostile(st.st_uid):
                    raise _refuse(target, what, f"{here / part}: a link of uid {st.st_uid}")
                hops += 1
                if hops > _HOPS:
                    raise _refuse(target, what, f"{path}: too many links")
                link = Path(os.readlink(part, dir_fd=stack[-1]))
                if link.is_absolute():
                    while len(stack) > 1:
                        os.close(stack.pop())
                        names.pop()
                parts = [*link.parts[1 if link.is_absolute() else 0 :], *parts]
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise Refused(f"{what} {target}: {here / part} is not a directory")
            try:
                stack.append(os.open(part, _DIR, dir_fd=stack[-1]))
            except OSError as e:
                raise _refuse(target, what, f"{here / part}: {e.strerror or e}") from None
            names.append(here / part)
        fd = stack.pop()
        return fd
    finally:
        for d in stack:
            os.close(d)


def _check_target(fd: int, name: str, target: Path, what: str) -> None:
    """The name in the directory must be nothing, or a regular file that is no
    database: never a link, a device, a directory or the results."""
    real = Path(os.path.realpath(target.parent)) / name
    for db in _protected_names:
        if real in (db, *(Path(f"{db}{s}") for s in ("-wal", "-shm", "-journal"))):
            raise Refused(f"{what} {target}: that is the results database; give another file")
    try:
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise Refused(f"{what} {target}: is a symbolic link; give the file it names, or another")
    if stat.S_ISDIR(st.st_mode):
        raise Refused(f"{what} {target}: is a directory; give a file name, e.g. {target}/report")
    if stat.S_ISCHR(st.st_mode):
        return  # a device the user names (/dev/null): written as it is, never renamed over
    if not stat.S_ISREG(st.st_mode):
        raise Refused(
            f"{what} {target}: not a regular file; leave out the option to write to the terminal"
        )
    if (st.st_dev, st.st_ino) in _protected:
        raise Refused(f"{what} {target}: that is the results database; give another file")
    with contextlib.suppress(OSError):
        head = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=fd)
        try:
            if os.read(head, len(SQLITE)) == SQLITE:
                raise Refused(
                    f"{what} {target}: is a SQLite database (results, perhaps); "
                    "allocmark never writes over one: give another file"
                )
        finally:
            os.close(head)


def check(path: Path, what: str = "-o") -> None:
    """Whether `path` may be written, said before any work is done (a dry run, a
    report before it is drawn)."""
    path = Path(os.path.abspath(path))
    with _opened(path.parent, what, path) as fd:
        _check_target(fd, path.name, path, what)


@overload
def writing(
    path: Path, mode: int = 0o644, what: str = "-o", binary: Literal[False] = False
) -> contextlib.AbstractContextManager[IO[str]]: ...
@overload
def writing(
    path: Path, mode: int = 0o644, what: str = "-o", *, binary: Literal[True]
) -> contextlib.AbstractContextManager[IO[bytes]]: ...
def writing(
    path: Path, mode: int = 0o644, what: str = "-o", binary: bool = False
) -> contextlib.AbstractContextManager[IO[str]] | contextlib.AbstractContextManager[IO[bytes]]:
    """A file to write `path` through: a new file beside it, renamed over it when the
    block ends without an error, removed when it does not."""
    return _writing(path, mode, what, binary)


@contextlib.contextmanager
def _writing(path: Path, mode: int, what: str, binary: bool) -> Iterator[IO]:  # type: ignore[type-arg]
    path = Path(os.path.abspath(path))
    with _opened(path.parent, what, path) as d:
        _check_target(d, path.name, path, what)
        if _device(d, path.name):
            fd = os.open(path.name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=d)
            with os.fdopen(fd, "wb" if binary else "w") as f:
                yield f
            return
        tmp = f".{path.name[:64]}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, _NEW, mode, dir_fd=d)
        try:
            with os.fdopen(fd, "wb" if binary else "w", closefd=True) as f:
                os.fchmod(f.fileno(), mode)  # whatever the umask: the readers it needs
                yield f
            _check_target(d, path.name, path, what)  # nothing planted meanwhile
            os.rename(tmp, path.name, src_dir_fd=d, dst_dir_fd=d)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=d)
            raise


def _device(fd: int, name: str) -> bool:
    """Whether the name in the directory is a character device (/dev/null, /dev/full)."""
    try:
        return stat.S_ISCHR(os.stat(name, dir_fd=fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


def write(path: Path, data: str | bytes, mode: int = 0o644, what: str = "-o") -> None:
    """`data` as the whole of `path` (see `writing`)."""
    if isinstance(data, bytes):
        with writing(path, mode, what, binary=True) as fb:
            fb.write(data)
    else:
        with writing(path, mode, what) as ft:
            ft.write(data)


def copy(source: Path, path: Path, mode: int = 0o644, owner: int | None = None) -> None:
    """The regular file `source` (opened with no link followed; `owner`'s, when given:
    what a build made, not what it pointed at) as the whole of `path`."""
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as src:
        st = os.fstat(src.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"{source}: not a regular file")
        if owner is not None and st.st_uid != owner:
            raise UserError(f"{source}: not a file the build made (uid {st.st_uid} owns it)")
        with writing(path, mode, "copying to", binary=True) as dst:
            shutil.copyfileobj(src, dst)


def copy_tree(source: Path, path: Path) -> None:
    """allocmark's own tree `source` (its packaged sources) copied to the new `path`
    in a directory nobody else may change; links in it stay links."""
    path = Path(os.path.abspath(path))
    directory(path.parent, parents=True)
    with _opened(path.parent, "copying to", path):
        shutil.copytree(source, path, symlinks=True)


def link_tree(source: Path, path: Path, skip: tuple[str, ...] = ()) -> None:
    """A trusted tree (a toolchain) at `path`, made whole beside it and renamed in:
    each file a hard link to the original (a copy across disks), links kept as links,
    the top-level entries named in `skip` left out."""
    path = Path(os.path.abspath(path))
    staged = path.with_name(f".{path.name}.{secrets.token_hex(4)}")

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst, follow_symlinks=False)
        except OSError:
            shutil.copy2(src, dst, follow_symlinks=False)

    with _opened(path.parent, "the toolchain", path):
        try:
            shutil.copytree(
                source,
                staged,
                symlinks=True,
                copy_function=link,
                ignore=lambda d, names: [n for n in names if Path(d) == source and n in skip],
            )
            rename(staged, path)
        except BaseException:
            shutil.rmtree(staged, ignore_errors=True)
            raise


def directory(path: Path, mode: int = 0o755, parents: bool = False, what: str = "") -> Path:
    """`path` as a directory of allocmark's: made (with the directories above it when
    `parents`) where nobody else may change it, or found there, never a link."""
    path = Path(os.path.abspath(path))
    what = what or "the directory"
    if not os.path.lexists(path):
        if parents and not os.path.lexists(path.parent):
            directory(path.parent, 0o755, True, what)
        with _opened(path.parent, what, path) as d, contextlib.suppress(FileExistsError):
            os.mkdir(path.name, mode, dir_fd=d)
            os.chmod(path.name, mode, dir_fd=d)  # whatever the umask
    with _opened(path, what, path):
        return path


def rename(source: Path, path: Path) -> None:
    """`source` (allocmark's, e.g. a cache entry made whole beside its place) put at
    `path` in one step, what was there removed: both in directories nobody else may
    change."""
    source, path = Path(os.path.abspath(source)), Path(os.path.abspath(path))
    with _opened(source.parent, "moving", source) as s, _opened(path.parent, "moving", path) as d:
        _check_target_any(d, path)
        with contextlib.suppress(OSError):
            st = os.stat(path.name, dir_fd=d, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode) and not os.path.samefile(source, path):
                remove_tree(path)
        os.rename(source.name, path.name, src_dir_fd=s, dst_dir_fd=d)


def _check_target_any(fd: int, path: Path) -> None:
    """For a cache entry: never the results database, never through a link."""
    real = Path(os.path.realpath(path.parent)) / path.name
    if any(real == db or str(real).startswith(f"{db}-") for db in _protected_names):
        raise Refused(f"{path}: that is the results database")
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISLNK(os.stat(path.name, dir_fd=fd, follow_symlinks=False).st_mode):
            raise Refused(f"{path}: is a symbolic link; allocmark does not follow it")


def link(target: Path, path: Path) -> None:
    """A symbolic link at `path` to `target` (relative, within allocmark's cache),
    whatever was at `path` replaced in one step."""
    path = Path(os.path.abspath(path))
    tmp = f".{path.name}.{secrets.token_hex(4)}"
    with _opened(path.parent, "linking", path) as d:
        _check_target_any(d, path.parent / tmp)
        os.symlink(target, tmp, dir_fd=d)
        os.rename(tmp, path.name, src_dir_fd=d, dst_dir_fd=d)


def publish(source: Path, path: Path) -> bool:
    """`source` also named `path` (a hard link) unless something is there already:
    of two processes publishing at once, the first wins (False: not this one)."""
    source, path = Path(os.path.abspath(source)), Path(os.path.abspath(path))
    with _opened(source.parent, "linking", source) as s, _opened(path.parent, "linking", path) as d:
        try:
            os.link(source.name, path.name, src_dir_fd=s, dst_dir_fd=d, follow_symlinks=False)
        except FileExistsError:
            return False
    return True


def extract(archive: Path, path: Path) -> None:
    """A tar archive (a Debian source's upstream tarball) unpacked into the new
    directory `path`, as data only (tarfile's "data" filter: no link out of it, no
    device, no set-user-ID bit)."""
    import tarfile

    directory(path)
    with tarfile.open(archive) as tar:
        tar.extractall(path, filter="data")


def remove(path: Path) -> None:
    """Remove the file `path` (a link itself, never what it names), if it is there."""
    path = Path(os.path.abspath(path))
    with contextlib.suppress(FileNotFoundError), _opened(path.parent, "removing", path) as d:
        os.unlink(path.name, dir_fd=d)


def discard(database: Path) -> None:
    """A results database this process made and stored nothing in, removed with its
    -wal, -shm and -journal (a refused command leaves no file behind)."""
    real = Path(os.path.realpath(database))
    _protected_names.discard(real)
    with _opened(real.parent, "removing", real) as d:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(f"{real.name}{suffix}", dir_fd=d)


def remove_tree(path: Path) -> None:
    """Remove the directory `path` and all it holds (shutil.rmtree works through
    descriptors: no link in it is followed), if it is there."""
    path = Path(os.path.abspath(path))
    if any(db.is_relative_to(path) for db in _protected_names):
        raise Refused(f"{path}: holds the results database; allocmark does not remove it")
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(path)


@contextlib.contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A private directory (0700, allocmark's) for the length of the block: a run's
    room, a build's checkout. Made in allocmark's own TMPDIR, removed with all it holds.
    It is locked (flock) while its allocmark lives: one killed (SIGKILL: no clean-up
    runs) leaves it unlocked, and the next scratch of its kind removes it (`sweep`)."""
    sweep(prefix)
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        fd = os.open(tmp, _DIR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield Path(tmp)
        finally:
            os.close(fd)


STALE_S = 60.0  # a scratch directory younger than this may not be locked yet: kept


def sweep(prefix: str) -> list[Path]:
    """Remove allocmark's scratch directories named `prefix`… that no live allocmark
    holds (its lock is free) and older than STALE_S; the ones removed."""
    base = Path(tempfile.gettempdir())
    gone = []
    with os.scandir(base) as entries:
        found = [e for e in entries if e.name.startswith(prefix)]
    for entry in found:
        with contextlib.suppress(OSError):
            st = entry.stat(follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
                continue
            if time.time() - st.st_mtime < STALE_S:
                continue
            fd = os.open(entry.path, _DIR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # held: its allocmark lives
                remove_tree(Path(entry.path))
                gone.append(Path(entry.path))
            except Refused:
                pass  # it holds the results: kept
            finally:
                os.close(fd)
    return gone


@contextlib.contextmanager
def locked(path: Path) -> Iterator[int]:
    """`path` as a lock file (made if missing, never through a link), held
    exclusively for the block."""
    fd = lock(path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def lock(path: Path, mode: int = 0o600) -> int:
    """A descriptor of the lock file `path` (made if missing, never through a link),
    in a directory nobody else may change; the caller locks and closes it."""
    path = Path(os.path.abspath(path))
    with _opened(path.parent, "the lock", path) as d:
        return os.open(
            path.name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=d
        )


def create(path: Path, mode: int = 0o600, what: str = "--db") -> bool:
    """`path` made empty with `mode` if it is not there (False: it was), for a program
    that then writes it itself (SQLite, the results database)."""
    path = Path(os.path.abspath(path))
    with _opened(path.parent, what, path) as d:
        try:
            os.close(os.open(path.name, _NEW, mode, dir_fd=d))
        except FileExistsError:
            return False
    return True
