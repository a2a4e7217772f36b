"""The kernel's count of the system calls a run makes (native/run/am_run_kcount.c).

The launcher counts, for the run's whole tree, the calls an allocator makes to the
kernel, whether through libc (glibc's own mmap, madvise, brk) or raw (a lock built on
futexes): syscall tracepoints it opens on the program before its exec. Each run's
"kernel" record becomes metrics (`syscall_<kind>`, one per kind: native/kernel.py), or,
where the kernel would not count (not root, no tracefs), a label saying why.

The launcher needs tracefs for the events' ids. A machine that booted without it
mounted (no systemd: a container, a small VM) has it mounted here once, as root, at its
usual place: what `perf stat -e syscalls:...` would need first.
"""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

LABEL = "syscalls_uncounted"  # a run's label: why the kernel did not count its calls
TRACEFS = Path("/sys/kernel/tracing")
_EVENTS = "events/syscalls/sys_enter_madvise/id"


@functools.cache
def prepare() -> str:
    """ "" when the launcher can count (tracefs found, mounted here if need be), else
    why not (each run's label says it; looked at once a process)."""
    if any((root / _EVENTS).is_file() for root in (TRACEFS, Path("/sys/kernel/debug/tracing"))):
        return ""
    if os.geteuid() != 0:
        return "tracefs is not mounted, and only root may mount it"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"nodev", str(TRACEFS).encode(), b"tracefs", 0, None) != 0:
        e = ctypes.get_errno()
        return f"tracefs cannot be mounted at {TRACEFS}: {os.strerror(e)}"
    return "" if (TRACEFS / _EVENTS).is_file() else "tracefs has no syscall events"
