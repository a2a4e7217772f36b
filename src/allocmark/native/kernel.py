"""The launcher's "kernel" record (native/run/am_run_kcount.c): the kernel's count of a
run's system calls by kind, read as metrics `syscall_<kind>` (run/kernel.py asks for it).
"""

from __future__ import annotations

import errno
import os
from typing import Any

from allocmark.native.records import RecordError

# The kinds am_run_kcount.c counts, in its order: each a metric `syscall_<kind>`.
KINDS = (
    "all",  # every system call of the run: only asked for by bench/kcount_cost.py
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "brk",
    "madvise",
    "madvise_dontneed",
    "madvise_free",
    "futex",
    "futex_wait",
    "futex_wake",
)
PREFIX = "syscall_"


def metric(kind: str) -> str:
    return PREFIX + kind


def read(fields: dict[str, Any]) -> tuple[dict[str, float], str]:
    """A "kernel" record's counts as metrics, or ({}, why there are none). A record
    whose counts are not exactly KINDS (with "all" or without), as non-negative
    integers, is refused."""
    code = int(fields["errno"])
    if code:
        what = {"tracefs": "its event ids", "open": "its events", "filter": "a filter"}.get(
            str(fields.get("failed")), "a count"
        )
        return {}, f"the kernel would not count the run's system calls ({what}: {_name(code)})"
    counts = fields["counts"]
    if not isinstance(counts, dict) or tuple(counts) not in (KINDS, KINDS[1:]):
        raise RecordError("the kernel record's counts are not the launcher's kinds")
    values = {k: int(v) for k, v in counts.items()}
    if any(v < 0 for v in values.values()):
        raise RecordError("the kernel record holds a negative count")
    return {metric(k): float(v) for k, v in values.items()}, ""


def _name(code: int) -> str:
    return f"{errno.errorcode.get(code, code)}, {os.strerror(code)}"
