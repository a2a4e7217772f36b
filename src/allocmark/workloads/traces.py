"""Traces: what `allocmark record` writes and the replay workload reads.

A trace (native/common/am_trace.h, docs/replay.md) is a fixed header, each recorded
thread's calls in chunks, and a JSON summary: what was recorded (the calls, their
threads, the peak of requested bytes in the recorded order, what could not be
replayed) and allocmark's account of the recorded run. A trace may come from
elsewhere, so it is read as untrusted input: the header's fields are bounded and must
agree with the file's size and with the summary, the summary is at most 1 MiB and
every field of it is typed (pydantic); anything else is a clear error naming the file.
Only the header and the summary are read here; the native replayer checks each chunk
and op as it reads them.

A run reads its trace from allocmark's cache (`staged`): the measured program runs
as an identity of the campaign's own, which cannot read the user's files.
"""

from __future__ import annotations

import functools
import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from allocmark import files, native
from allocmark.errors import UserError

MAGIC = b"AMTRACE\0"
VERSION = 1
HEAD = struct.Struct("<8sIIQQQQII")  # am_trace_head
MAX_THREADS = 4096
MAX_SLOTS = 1 << 32
MAX_SUMMARY = 1 << 20
HOW = "make one with `allocmark record -o FILE -- COMMAND`"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Exit(_Strict):
    """What the recorder timed in the process, read at its exit."""

    cpu_ns: int = Field(ge=0)
    wall_ns: int = Field(ge=0)
    tsc_per_us: int = Field(ge=0)
    calls: int = Field(ge=0)
    timed: int = Field(ge=0)
    timed_call_cycles: int = Field(ge=0)
    timed_whole_cycles: int = Field(ge=0)
    flush_cycles: int = Field(ge=0)
    lost: int = Field(ge=0)


class Process(_Strict):
    """A process image the recording holds (a fork's child, an exec)."""

    pid: int = Field(ge=0)
    ppid: int = Field(ge=0)
    events: int = Field(ge=0)
    threads: int = Field(ge=0)
    announced: bool
    exe: str = Field(max_length=4096)
    next_malloc: str = Field(max_length=4096)  # what the recorder's malloc forwarded to
    exit: Exit | None = None


class Recorded(_Strict):
    """allocmark's account of the recorded run (run/record.py)."""

    allocator: str = Field(max_length=4096)
    argv: tuple[str, ...] = Field(max_length=1000)
    status: str = Field(max_length=64)
    wall_s: float = Field(ge=0)
    user_s: float = Field(ge=0)
    sys_s: float = Field(ge=0)
    maxrss_kib: int = Field(ge=0)
    started: float = Field(ge=0)
    allocmark: str = Field(max_length=64)


class Summary(_Strict):
    """The trace's JSON summary (am_trace.c: am_summary)."""

    format: int
    recording_bytes: int = Field(ge=0)
    read_bytes: int = Field(ge=0)
    cut: str = Field(max_length=200)  # why the recording was read no further ("": whole)
    # The recorded process's CPU time inside the allocator (am_trace.c: am_alloc_share)
    alloc_share: float | None = Field(ge=0, le=1)
    process: Process
    processes: tuple[Process, ...] = Field(max_length=64)
    process_count: int = Field(ge=1)
    threads: int = Field(ge=1, le=MAX_THREADS)
    ops: int = Field(ge=0)
    slots: int = Field(ge=0, le=MAX_SLOTS)
    peak_requested_bytes: int = Field(ge=0)
    waits: int = Field(ge=0)
    unknown_frees: int = Field(ge=0)
    unknown_reallocs: int = Field(ge=0)
    conflicts: int = Field(ge=0)
    failed: int = Field(ge=0)
    orphan_threads: int = Field(ge=0)
    live_at_end: int = Field(ge=0)
    calls: dict[str, int] = Field(max_length=16)
    recorded: Recorded | None = None

    @property
    def total_calls(self) -> int:
        return sum(self.calls.values())


@dataclass(frozen=True)
class Trace:
    """A trace read and checked: its header's counts and its summary."""

    path: Path
    size: int
    threads: int
    slots: int
    ops: int
    chunks: int
    summary: Summary

    @property
    def alloc_share(self) -> float | None:
        """The share of the recorded process's CPU time spent inside the allocator,
        from the calls the recorder timed (one in 64 per thread), its own time taken
        out (am_trace computes it); None where the process did not exit or nothing was
        timed."""
        return self.summary.alloc_share


def _refuse(path: Path, why: str) -> UserError:
    return UserError(f"{path}: not a trace allocmark can replay: {why}; {HOW}")


def read(path: Path) -> Trace:
    """The trace at `path`, its header and summary checked (see the module)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise UserError(f"{path}: cannot read the trace: {e.strerror or e}; {HOW}") from None
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(HEAD.size)
        if len(head) < HEAD.size:
            raise _refuse(path, "too short for a trace's header")
        magic, version, threads, slots, ops, chunks, json_at, json_bytes, _ = HEAD.unpack(head)
        if magic != MAGIC:
            raise _refuse(path, "no AMTRACE header")
        if version != VERSION:
            raise _refuse(path, f"format {version}; this allocmark reads format {VERSION}")
        if not (1 <= threads <= MAX_THREADS and slots <= MAX_SLOTS):
            raise _refuse(path, f"{threads} threads and {slots} slots are out of bounds")
        if json_at < HEAD.size or json_bytes > MAX_SUMMARY or json_at + json_bytes != size:
            raise _refuse(path, "its summary is not where its header says (a file cut short?)")
        f.seek(json_at)
        text = f.read(json_bytes)
    try:
        summary = Summary.model_validate_json(text)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "the summary"
        raise _refuse(path, f"its summary's {where}: {first['msg']}") from None
    if summary.format != version or (summary.threads, summary.ops, summary.slots) != (
        threads,
        ops,
        slots,
    ):
        raise _refuse(path, "its summary disagrees with its header")
    return Trace(path, size, threads, slots, ops, chunks, summary)


def staged(path: Path) -> Path:
    """A copy of the trace where every run can read it: allocmark's cache, named by
    its content (a trace used again is copied once, and hashed once while unchanged:
    a plan expands it for every run)."""
    try:
        st = path.stat()
        return _staged(path, st.st_ino, st.st_mtime_ns, st.st_size)
    except OSError as e:
        raise UserError(f"{path}: cannot read the trace: {e.strerror or e}; {HOW}") from None


@functools.cache
def _staged(path: Path, _ino: int, _mtime: int, _size: int) -> Path:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    copy = native.cache_root() / "traces" / f"{digest.hexdigest()[:32]}.trace"
    if not copy.is_file():
        files.directory(copy.parent, parents=True)
        for d in (copy.parent, copy.parent.parent):
            d.chmod(0o755)  # the run's identity enters them
        files.copy(path, copy, 0o644)
        read(copy)  # what was copied is still a trace (the file may have changed meanwhile)
    return copy
