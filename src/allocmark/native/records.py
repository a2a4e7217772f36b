"""The one reader of what allocmark's native parts write.

Every native part writes JSON lines: one object per line, with "am" naming the
kind of record and "v" its version. This module checks both, so that a record
from another build of allocmark is refused with a clear message instead of
being half understood:

    run     am_run: the benchmark's wait status, wall time and rusage
    rss     am_run: the run's resident size over time (before its "run" record)
    image   am_run: what one process image of the run had mapped as it ended
    watch   am_run: how the images were read (after them, before its "run" record)
    kernel  am_run: the kernel's count of the run's system calls (before its "run" record)
    calib   am_run --calibrate: the fixed CPU loop's time
    who     libam_who.so: which object serves each allocation function in a process
    calls   libam_who.so: a function a partial allocator may lack, called by the program
    stats   libam_who.so: the allocator's own statistics as a process exits
    probe   am_probe: what an allocator's library serves, and its version
    result  a native workload's metrics (AM_RESULT_FD)
    stage   native/harden: how far a test got (AM_RESULT_FD, before its "result")
    prof    libamprof.so: one process's profile (profile.py sums and interprets them)
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from allocmark.errors import AllocmarkError

VERSIONS = {
    "run": 4,
    "rss": 3,
    "image": 1,
    "watch": 1,
    "kernel": 2,
    "calib": 1,
    "who": 2,
    "calls": 1,
    "stats": 1,
    "probe": 2,
    "result": 2,
    "stage": 1,
    "prof": 5,
}


FILE_LIMIT = 16 << 20  # bytes of one record file read at the most


def read_file(path: Path, what: str, limit: int = FILE_LIMIT) -> bytes:
    """A record file the measured program could have touched (its identity owns the
    directory), read as untrusted: never through a link, a regular file only (a FIFO
    would block for ever) of one name (a hard link is refused), at most `limit` bytes.
    A bad one is a RecordError that names the file by its name alone, never by what it
    points to or holds."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        why = "a symbolic link" if e.errno == 40 else (e.strerror or "unreadable").lower()
        raise RecordError(f"{what} {path.name} cannot be read: {why}") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise RecordError(f"{what} {path.name} is not a regular file")
        if st.st_nlink != 1:  # one file under many names would be read many times
            raise RecordError(f"{what} {path.name} is a hard link ({st.st_nlink} names)")
        text = f.read(limit + 1)
    if len(text) > limit:
        raise RecordError(f"{what} {path.name} is larger than {limit >> 20} MiB")
    return text


class RecordError(AllocmarkError):
    """A native part wrote something this allocmark cannot read."""


@dataclass(frozen=True)
class Record:
    kind: str
    fields: dict[str, Any]  # everything but "am" and "v"


def parse(text: str | bytes, source: str) -> list[Record]:
    """Every record in `text` (blank lines skipped); RecordError names `source`."""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return [_record(line, n, source) for n, line in enumerate(text.splitlines(), 1) if line.strip()]


def one(text: str | bytes, kind: str, source: str) -> dict[str, Any]:
    """The fields of the single record of `kind` that `source` must have written."""
    return only(parse(text, source), kind, source)


def only(parsed: list[Record], kind: str, source: str) -> dict[str, Any]:
    """The fields of the single record of `kind` among records already parsed."""
    found = [r for r in parsed if r.kind == kind]
    if len(found) != 1:
        raise RecordError(f"{source}: expected one '{kind}' record, found {len(found)}")
    return found[0].fields


def _record(line: str, n: int, source: str) -> Record:
    try:
        data = json.loads(line)
    except json.JSONDecodeError:
        raise RecordError(f"{source}, line {n}: not a JSON record: {line[:120]!r}") from None
    if not isinstance(data, dict) or not isinstance(data.get("am"), str):
        raise RecordError(f'{source}, line {n}: a record needs "am" (its kind): {line[:120]!r}')
    kind, version = data.pop("am"), data.pop("v", None)
    if VERSIONS.get(kind) != version:
        known = VERSIONS.get(kind)
        raise RecordError(
            f"{source}, line {n}: '{kind}' record version {version}, this allocmark reads "
            + (f"version {known}" if known else "no such kind")
            + ": its native parts come from another build; reinstall allocmark"
        )
    return Record(kind, data)
