"""The launcher's "kernel" record (native/run/am_run_kcount.c): the kernel's count of a
run's system calls by kind, read as metrics `syscall_<kind>` (run/kernel.py asks for it),
and, on profiled runs (the why pass, `profile`), the time inside some of them
(native/run/am_run_ktime.c: its "times"), read as metrics `systime_<kind>` in seconds.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
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
# The kinds am_run_ktime.c times, in its order: each a metric `systime_<kind>`, seconds
# inside such calls summed over the run's threads (futex_lock: FUTEX_WAIT, asleep on a
# lock's word; not FUTEX_WAIT_BITSET, glibc's joins and condition variables).
TIMED = ("mmap", "munmap", "mremap", "mprotect", "brk", "madvise", "futex_lock")
TIME_PREFIX = "systime_"
UNTIMED = "syscalls_untimed"  # a run's label: why its calls were not timed
# A measured run taken again uncounted (run/kernel.py's BUDGET): what counting the run
# before it cost, of its time (a metric; that run's counts are its own).
COST_SHARE = "syscalls_cost_share"


def metric(kind: str) -> str:
    return PREFIX + kind


@dataclass(frozen=True)
class KernelRecord:
    """A "kernel" record read: its metrics (counts, and times where asked for), why
    there are no counts ("" when counted) and why no times ("" when timed or not asked)."""

    metrics: dict[str, float]
    uncounted: str = ""
    untimed: str = ""


def read(fields: dict[str, Any]) -> KernelRecord:
    """A "kernel" record's counts and times as metrics. A record whose counts are not
    exactly KINDS (with "all" or without), or whose times are not exactly TIMED, as
    non-negative integers, is refused."""
    code = int(fields["errno"])
    if code:
        what = _failed(fields.get("failed"))
        why = f"the kernel would not count the run's system calls ({what}: {_name(code)})"
        return KernelRecord({}, why)
    counts = fields["counts"]
    if not isinstance(counts, dict) or tuple(counts) not in (KINDS, KINDS[1:]):
        raise RecordError("the kernel record's counts are not the launcher's kinds")
    metrics = {metric(k): float(v) for k, v in _naturals(counts).items()}
    times, untimed = _times(fields.get("times"))
    return KernelRecord(metrics | times, untimed=untimed)


def _times(times: Any) -> tuple[dict[str, float], str]:
    """The "times" member: metrics, or why there are none."""
    if times is None:
        return {}, ""
    if not isinstance(times, dict):
        raise RecordError("the kernel record's times are not the launcher's")
    code = int(times["errno"])
    if code:
        what = _failed(times.get("failed"))
        return {}, f"the kernel would not time the run's system calls ({what}: {_name(code)})"
    ns, calls = times["ns"], times["calls"]
    if not all(isinstance(d, dict) and tuple(d) == TIMED for d in (ns, calls)):
        raise RecordError("the kernel record's times are not the launcher's kinds")
    lost = _naturals({"lost": times["lost"], "unpaired": times["unpaired"]})
    if lost["lost"]:
        # Only a lower bound: a time that reads less than it was is no time to compare.
        return {}, f"the kernel lost {lost['lost']:,} of the run's timed system calls"
    return {TIME_PREFIX + k: v / 1e9 for k, v in _naturals(ns).items()}, ""


def _naturals(d: dict[str, Any]) -> dict[str, int]:
    values = {k: int(v) for k, v in d.items()}
    if any(v < 0 for v in values.values()):
        raise RecordError("the kernel record holds a negative number")
    return values


def _failed(failed: Any) -> str:
    return {
        "tracefs": "its event ids",
        "open": "its events",
        "filter": "a filter",
        "ring": "its buffers",
        "memory": "memory",
        "thread": "a thread",
    }.get(str(failed), "a count")


def _name(code: int) -> str:
    return f"{errno.errorcode.get(code, code)}, {os.strerror(code)}"
