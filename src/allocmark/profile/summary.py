"""Numbers read off a profile: per-path cycle quantiles, calls split into new and
reuse, sizes, syscalls and locks, memory at the peak of live bytes. Profiles from
older records (versions 1-3: no sampled sizes, no sampled new/reuse) still
summarise."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from allocmark import native
from allocmark.profile.records import add_lists

PATHS = ("malloc_new", "malloc_reuse", "free", "calloc", "realloc", "aligned", "usable_size")
SYSCALLS = ("mmap", "munmap", "mremap", "madvise", "mprotect", "brk", "sbrk")
ALLOCATING = (
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
)


def shim_library() -> str:
    return str(native.library("libamprof.so"))


# ---------------------------------------------------------------------------
# Numbers read off a profile
# ---------------------------------------------------------------------------
def bucket_low(b: int) -> int:
    """The smallest cycle count in histogram bucket b (4 buckets per power of two)."""
    if b < 4:
        return b
    k, m = (b + 4) // 4, (b + 4) % 4
    return (4 + m) << (k - 2)


def quantile(hist: Sequence[int], q: float) -> float | None:
    """The q-quantile of a cycle histogram, interpolated inside its bucket."""
    total = sum(hist)
    if total == 0:
        return None
    want, seen = q * total, 0
    for b, count in enumerate(hist):
        if count and seen + count >= want:
            lo, hi = bucket_low(b), bucket_low(b + 1)
            return lo + (hi - lo) * (want - seen) / count
        seen += count
    return float(bucket_low(len(hist)))


@dataclass(frozen=True)
class PathStats:
    calls: int  # calls on this path (new/reuse split from the API counts)
    samples: int
    median: float | None
    p90: float | None
    p99: float | None


@dataclass(frozen=True)
class AllocatorProfile:
    """What the report shows for one allocator."""

    allocator: str
    paths: dict[str, PathStats]
    calls: dict[str, int]  # API -> calls
    new: int
    reuse: int
    syscalls: dict[str, dict[str, int]]  # name -> in_calls, in_cycles, out_calls, ...
    locks: dict[str, int]
    time_share: float | None  # estimated cycles inside the allocator / thread cycles
    threads: int
    memory: dict[str, int]
    processes: int
    hw: str  # hardware counters: why they are not shown
    visibility: str  # which of the allocator's syscalls and locks the shim can see
    visible: frozenset[str] = frozenset()  # their names
    malloc_sizes: tuple[float, ...] = ()  # calls per power-of-two size bucket
    # The kernel's count of the runs' system calls (run/kernel.py), mean per run, by kind
    # ({} when any run was not counted: `uncounted` says why).
    kernel: Mapping[str, float] = field(default_factory=dict)
    uncounted: str = ""
    # Seconds inside those calls (native/kernel.py TIMED), mean per run, by kind ({} when
    # any run was not timed).
    times: Mapping[str, float] = field(default_factory=dict)
    untimed: str = ""  # why there are no times where there are counts


def new_and_reuse(pairs: Mapping[str, int]) -> tuple[int, int]:
    """An API's calls split into new and reuse: by the share among its sampled calls
    (record 2; exact when every call is sampled), or counted on every call (record 1)."""
    if "sampled_new" not in pairs:
        return pairs.get("new", 0), pairs.get("reuse", 0)
    seen = pairs["sampled_new"] + pairs.get("sampled_reuse", 0)
    if seen == 0:
        return 0, 0
    new = round(pairs.get("calls", 0) * pairs["sampled_new"] / seen)
    return new, pairs.get("calls", 0) - new


def summarize(allocator: str, prof: Mapping[str, Any], library: str | None) -> AllocatorProfile:
    api = prof["api"]
    calls = {name: v.get("calls", 0) for name, v in api.items()}
    split = {a: new_and_reuse(api.get(a, {})) for a in ALLOCATING}
    new = sum(n for n, _ in split.values())
    reuse = sum(r for _, r in split.values())
    path_calls = {
        "malloc_new": split["malloc"][0],
        "malloc_reuse": split["malloc"][1],
        "free": calls.get("free", 0),
        "calloc": calls.get("calloc", 0),
        "realloc": calls.get("realloc", 0) + calls.get("reallocarray", 0),
        "aligned": sum(
            calls.get(a, 0)
            for a in ("posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc")
        ),
        "usable_size": calls.get("malloc_usable_size", 0),
    }
    paths = {}
    for p in PATHS:
        hist = prof["hist"].get(p, [])
        samples = prof["path"].get(p, {}).get("samples", 0)
        q = [quantile(hist, x) for x in (0.5, 0.9, 0.99)]
        paths[p] = PathStats(path_calls[p], samples, q[0], q[1], q[2])
    threads = prof.get("threads", {})
    share = threads["alloc_cycles"] / threads["cycles"] if threads.get("cycles") else None
    seen = visibility(library)
    return AllocatorProfile(
        allocator=allocator,
        paths=paths,
        calls=calls,
        new=new,
        reuse=reuse,
        syscalls=prof["sys"],
        locks=prof.get("locks", {}),
        time_share=share,
        threads=threads.get("count", 0),
        memory=prof.get("memory", {}),
        processes=len(prof.get("processes", [])),
        hw=hw_state(prof.get("hw_errno", 0)),
        visibility=seen[0],
        visible=seen[1],
        malloc_sizes=tuple(size_histogram(prof, "malloc")),
    )


def size_histogram(prof: Mapping[str, Any], api: str) -> list[float]:
    """Calls per power-of-two size bucket (bucket k: [2^(k-1), 2^k) bytes). malloc's
    calls below `fast_bytes` are split as its sampled ones were (record 3; exact when
    every call is sampled); all other calls are counted one by one."""
    exact = [float(n) for n in prof["sizes"].get(api, [])]
    sampled = prof.get("sizes_sampled", {}).get(api, [])
    seen = sum(sampled)
    if not seen:
        return exact
    below = prof["api"].get(api, {}).get("calls", 0) - sum(exact)
    return add_lists(exact, [below * n / seen for n in sampled])


def hw_state(err: int) -> str:
    if err == 0:
        return "available (perf_event_open works) but not read by this version of the shim"
    name = errno.errorcode.get(err, str(err))
    return f"not available on this machine (perf_event_open: {name}); none are shown"


def visibility(library: str | None) -> tuple[str, frozenset[str]]:
    """Which of the allocator's system calls and locks pass through the PLT, where the
    shim sees them: a sentence, and the names."""
    if not library:
        return "unknown library", frozenset()
    imported = _imports(library)
    if imported is None:
        return "unknown (no `nm` to read its imports)", frozenset()
    if os.path.basename(library).startswith("libc.so"):
        return (
            "glibc makes its mmap, munmap, madvise and brk calls and takes its arena "
            "locks inside libc: none is visible to the profiler, its counts are 0 (the "
            "kernel's count sees them)"
        ), frozenset()
    names = (*SYSCALLS, "pthread_mutex_lock", "pthread_mutex_trylock")
    seen = frozenset(n for n in names if n in imported)
    listed = ", ".join(n for n in names if n in seen) or "none"
    return f"visible through the PLT: {listed} (others it never calls, or calls directly)", seen


@cache
def _imports(library: str) -> frozenset[str] | None:
    if not shutil.which("nm"):
        return None
    out = subprocess.run(
        ["nm", "-D", "--undefined-only", library], capture_output=True, text=True, check=False
    ).stdout
    return frozenset(line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip())


def timed_words(kind: str) -> str:
    """What a timed kind (native/kernel.py TIMED) is called: "madvise calls", "futex
    lock waits"."""
    return "futex lock waits" if kind == "futex_lock" else f"{kind} calls"


def count_text(v: float) -> str:
    """A count per run: whole numbers with separators, small means with one decimal."""
    return f"{v:,.0f}" if v >= 10 or v == int(v) else f"{v:.1f}"


def usable_at_peak(s: AllocatorProfile) -> float:
    """Live usable bytes at the peak: the requested ones times the usable/requested
    ratio of the sampled allocations (usable sizes are only asked on those)."""
    m = s.memory
    ratio = m["sampled_usable"] / m["sampled_requested"] if m.get("sampled_requested") else 1.0
    return float(m.get("peak_requested", 0)) * ratio


PAGE, LINE = 4096, 64  # bytes: x86-64's base page and cache line


@dataclass(frozen=True)
class Layout:
    """The live blocks near the peak of live bytes and what holds them (the shim's
    am_prof_layout.c, at sample 1): `pages` and `lines` hold any of their `live`
    requested bytes; `shared` lines hold blocks of two or more threads."""

    live: int
    blocks: int
    pages: int
    lines: int
    shared: int

    @property
    def page_use(self) -> float:
        return self.live / (self.pages * PAGE)

    @property
    def line_use(self) -> float:
        return self.live / (self.lines * LINE)


def layout(s: AllocatorProfile) -> Layout | None:
    """The layout, if every block was tracked (None: not measured)."""
    m = s.memory
    if not m.get("peak_layout_pages") or not m.get("peak_layout_lines"):
        return None
    keys = ("bytes", "blocks", "pages", "lines", "shared_lines")
    return Layout(*(int(m.get(f"peak_layout_{k}", 0)) for k in keys))


def live_margin(memory: Mapping[str, int]) -> float:
    """The 95% margin of the live-bytes estimate at its peak, as a share of it."""
    peak = memory.get("peak_requested", 0)
    return 1.96 * memory.get("peak_requested_sd", 0) / peak if peak else 0.0


def explaining(prof: Mapping[str, Any]) -> dict[str, float]:
    """What a profiled run of the why pass stores to explain a difference (the
    answer's why, answer/why.py), from its summed records: the threads' time inside
    the allocator (estimated from the timed calls, in seconds of the TSC), and the
    live bytes at the peak of live bytes with the usable bytes above them (size-class
    rounding, from the sampled allocations). Not the time outside the allocator: a
    thread's cycles run from its start to its end, waiting included (a main thread
    joining its workers), so it is no share of the run's time. Empty without a TSC
    rate or thread cycles."""
    threads, tsc = prof.get("threads", {}), prof.get("tsc_per_us", 0)
    if not tsc or not threads.get("cycles"):
        return {}
    out = {"prof_inside_s": threads.get("alloc_cycles", 0) / (tsc * 1e6)}
    m = prof.get("memory", {})
    if m.get("peak_requested"):
        ratio = m["sampled_usable"] / m["sampled_requested"] if m.get("sampled_requested") else 1.0
        out["prof_live_kib"] = m["peak_requested"] / 1024
        out["prof_slack_kib"] = m["peak_requested"] * max(ratio - 1, 0.0) / 1024
    return out
