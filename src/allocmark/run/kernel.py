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
import dataclasses
import functools
import os
from collections.abc import Mapping
from pathlib import Path

from allocmark.model import RunResult
from allocmark.native import kernel

LABEL = "syscalls_uncounted"  # a run's label: why the kernel did not count its calls
APART = "syscalls_counted_apart"  # a run's label: its counts are another run's (apart)
SHARE = kernel.COST_SHARE  # its metric: what counting the counted run cost, of its time

# What counting costs (bench/kcount_cost.py, quiet): a call of a counted kind +234 ns
# (madvise's, three counters: the dearest kind), any other call +44 ns (the kernel's
# slower path, not known here: the other calls are not counted). A measured run whose
# counted calls cost more than BUDGET of its time (a lock or madvise storm: 1.5 million
# futex calls a second cost 20 %) is taken again uncounted, its counts kept from the
# counted one (apart()), so no measured number carries more than that.
PER_CALL_S = 234e-9
BUDGET = 0.01
COUNTED = ("mmap", "munmap", "mremap", "mprotect", "brk", "madvise", "futex")  # one a call
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


def cost_share(metrics: Mapping[str, float], wall_s: float) -> float:
    """What counting cost a run, of its wall time, by its counted calls (PER_CALL_S)."""
    calls = sum(metrics.get(kernel.metric(k), 0.0) for k in COUNTED)
    return calls * PER_CALL_S / wall_s if wall_s > 0 else 0.0


def apart(bare: RunResult, counted: RunResult) -> RunResult:
    """The run taken uncounted (`bare`: its times and sizes), with the counts of the
    counted run of the same cell just before it, said so."""
    share = cost_share(counted.metrics, counted.wall_s)
    counts = {k: v for k, v in counted.metrics.items() if k.startswith(kernel.PREFIX)}
    why = f"in a run of its own just before: counting cost {share:.1%} of its time"
    return dataclasses.replace(
        bare,
        metrics=bare.metrics | counts | {SHARE: share},
        labels={k: v for k, v in bare.labels.items() if k != LABEL} | {APART: why},
    )
