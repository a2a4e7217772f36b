"""The profiler's records (libamprof.so, native/shim/am_prof.c): reading, summing
the processes of a run, and the side-by-side comparison with findings.

A record is one JSON line per process ("prof", records.py); fork children and
exec'd programs write their own. A run's profile is their sum, with the peaks
taken as the largest of any one process. Profiles stored from older records
(versions 1-3: no sampled sizes, no sampled new/reuse) still summarise.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from allocmark import native, records

PATHS = ("malloc_new", "malloc_reuse", "free", "calloc", "realloc", "aligned", "usable_size")
SYSCALLS = ("mmap", "munmap", "mremap", "madvise", "mprotect", "brk", "sbrk")
ALLOCATING = ("malloc", "calloc", "realloc", "reallocarray", "posix_memalign",
              "aligned_alloc", "memalign", "valloc", "pvalloc")  # fmt: skip


HISTOGRAMS = ("sizes", "sizes_sampled", "hist")
PEAK_KEYS = ("peak", "rss", "track_interval")  # not summed over records


def shim_library() -> str:
    return str(native.library("libamprof.so"))


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------
def read(path: Path) -> list[dict[str, Any]]:
    """Every process's "prof" record in the file (none if the file is absent)."""
    if not path.exists():
        return []
    found = records.parse(path.read_bytes(), "the profiler's record file")
    return [r.fields for r in found if r.kind == "prof"]


def _empty() -> dict[str, Any]:
    return {"api": {}, "sizes": {}, "sizes_sampled": {}, "path": {}, "hist": {}, "sys": {},
            "threads_list": []}  # fmt: skip


# ---------------------------------------------------------------------------
# A run's profile: the sum of its processes
# ---------------------------------------------------------------------------
def combine(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One profile for a run. The root process (whose parent wrote no record) comes
    first in `processes`; counts and histograms are summed over all of them."""
    pids = {r["pid"] for r in records}
    ordered = sorted(records, key=lambda r: (r["ppid"] in pids, r["pid"]))
    out = merge(ordered)
    out["processes"] = [
        {"pid": r["pid"], "exe": r.get("exe", ""),
         "malloc_calls": r["api"].get("malloc", {}).get("calls", 0)}
        for r in ordered
    ]  # fmt: skip
    return out


def merge(profiles: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Several records (the processes of a run, or the runs of a cell) as one: counts
    and histograms summed, peaks the largest of any one."""
    first: Mapping[str, Any] = profiles[0] if profiles else {}
    out: dict[str, Any] = _empty() | {
        "next_malloc": first.get("next_malloc", ""),
        "sample": first.get("sample", 1),
        "tsc_per_us": max((r.get("tsc_per_us", 0) for r in profiles), default=0),
        "hw_errno": first.get("hw_errno", 0),
        "fast_bytes": first.get("fast_bytes", 0),
        "threads": {}, "locks": {}, "memory": {},
        "processes": [p for r in profiles for p in r.get("processes", [])],
    }  # fmt: skip
    for r in profiles:
        for kind in ("api", "path", "sys"):
            for name, pairs in r[kind].items():
                _add(out[kind].setdefault(name, {}), pairs)
        for kind in HISTOGRAMS:
            for name, values in r.get(kind, {}).items():
                out[kind][name] = _add_lists(out[kind].get(name, []), values)
        _add(out["threads"], r.get("threads", {}))
        _add(out["locks"], r.get("locks", {}))
        out["threads_list"] += r.get("threads_list", [])
        mem = out["memory"]
        for key, value in r.get("memory", {}).items():
            if not key.startswith(PEAK_KEYS):
                mem[key] = mem.get(key, 0) + value
    # The peak and what was measured at it come from one record: the highest.
    memories: list[Mapping[str, int]] = [r.get("memory", {}) for r in profiles]
    top = max(memories, key=lambda m: m.get("peak_requested", 0), default={})
    out["memory"] |= {k: v for k, v in top.items() if k.startswith(PEAK_KEYS)}
    intervals = [r["memory"]["track_interval"] for r in profiles
                 if "track_interval" in r.get("memory", {})]  # fmt: skip
    if intervals:
        out["memory"]["track_interval"] = max(intervals)
    return out


def _add(to: dict[str, int], pairs: Mapping[str, int]) -> None:
    for k, v in pairs.items():
        to[k] = to.get(k, 0) + v


def _add_lists(a: Sequence[float], b: Sequence[float]) -> list[float]:
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n)]


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
class Summary:
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


def summarize(allocator: str, prof: Mapping[str, Any], library: str | None) -> Summary:
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
        "aligned": sum(calls.get(a, 0) for a in ("posix_memalign", "aligned_alloc", "memalign",
                                                  "valloc", "pvalloc")),
        "usable_size": calls.get("malloc_usable_size", 0),
    }  # fmt: skip
    paths = {}
    for p in PATHS:
        hist = prof["hist"].get(p, [])
        samples = prof["path"].get(p, {}).get("samples", 0)
        q = [quantile(hist, x) for x in (0.5, 0.9, 0.99)]
        paths[p] = PathStats(path_calls[p], samples, q[0], q[1], q[2])
    threads = prof.get("threads", {})
    share = threads["alloc_cycles"] / threads["cycles"] if threads.get("cycles") else None
    seen = visibility(library)
    return Summary(
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
    return _add_lists(exact, [below * n / seen for n in sampled])


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
        return ("glibc makes its mmap, munmap, madvise and brk calls and takes its arena "
                "locks inside libc: none is visible, its counts are 0"), frozenset()  # fmt: skip
    names = (*SYSCALLS, "pthread_mutex_lock", "pthread_mutex_trylock")
    seen = frozenset(n for n in names if n in imported)
    listed = ", ".join(n for n in names if n in seen) or "none"
    return f"visible through the PLT: {listed} (others it never calls, or calls directly)", seen


@cache
def _imports(library: str) -> frozenset[str] | None:
    if not shutil.which("nm"):
        return None
    out = subprocess.run(["nm", "-D", "--undefined-only", library], capture_output=True,
                         text=True, check=False).stdout  # fmt: skip
    return frozenset(line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip())


# ---------------------------------------------------------------------------
# Findings: plain sentences computed from the numbers
# ---------------------------------------------------------------------------
def findings(summaries: Sequence[Summary], baseline: str | None, runs: int = 1) -> list[str]:
    """Plain sentences from the numbers; counts per run."""
    base = next((s for s in summaries if s.allocator == baseline), None)
    out = []
    for s in summaries:
        out += [f"{s.allocator}: {line}" for line in _against(s, base, runs)]
    return out


def _against(s: Summary, base: Summary | None, runs: int) -> list[str]:
    lines = []
    if s.new + s.reuse:
        lines.append(f"{s.reuse / (s.new + s.reuse):.1%} of allocations reuse an address")
    if s.time_share is not None:
        lines.append(f"~{s.time_share:.1%} of its threads' time inside the allocator (estimated)")
    if base is None or base is s:
        return lines
    for p in PATHS:
        mine, theirs = s.paths[p].median, base.paths[p].median
        if mine and theirs and (mine / theirs >= 1.5 or mine / theirs <= 1 / 1.5):
            lines.append(f"{mine / theirs:.1f}x the {p.replace('_', ' ')} cycles of "
                         f"{base.allocator} (median {mine:.0f} vs {theirs:.0f})")  # fmt: skip
    for name in ("mmap", "munmap", "madvise", "mprotect", "mremap"):
        if name not in s.visible or name not in base.visible:
            continue  # a 0 that only means "not seen" compares nothing
        mine_n = s.syscalls.get(name, {}).get("in_calls", 0)
        theirs_n = base.syscalls.get(name, {}).get("in_calls", 0)
        if mine_n != theirs_n and max(mine_n, theirs_n) >= 10 * runs:
            lines.append(f"{count_text(mine_n / runs)} {name} calls per run vs "
                         f"{count_text(theirs_n / runs)} for {base.allocator}")  # fmt: skip
    if s.locks.get("contended", 0) + s.locks.get("trylock_failed", 0):
        keys = ("contended", "trylock_failed", "wait_cycles")
        contended, failed, waiting = (count_text(s.locks.get(k, 0) / runs) for k in keys)
        lines.append(f"lock contention per run: {contended} contended acquisitions, "
                     f"{failed} failed trylocks, {waiting} cycles waiting")  # fmt: skip
    return lines


def count_text(v: float) -> str:
    """A count per run: whole numbers with separators, small means with one decimal."""
    return f"{v:,.0f}" if v >= 10 or v == int(v) else f"{v:.1f}"


def usable_at_peak(s: Summary) -> float:
    """Live usable bytes at the peak: the requested ones times the usable/requested
    ratio of the sampled allocations (usable sizes are only asked on those)."""
    m = s.memory
    ratio = m["sampled_usable"] / m["sampled_requested"] if m.get("sampled_requested") else 1.0
    return float(m.get("peak_requested", 0)) * ratio


# ---------------------------------------------------------------------------
# A stored campaign's profiles, cell by cell
# ---------------------------------------------------------------------------
@dataclass(frozen=True)
class View:
    """One workload and parameter set: the allocators side by side, and findings."""

    workload: str
    params: tuple[tuple[str, int | str], ...]
    allocators: tuple[str, ...]
    runs: int
    summaries: tuple[Summary, ...]  # in the order of `allocators`
    baseline: str | None  # the allocator the others are compared with
    findings: list[str]
    notes: list[str]


def views(
    profiled: Sequence[tuple[str, str, Any, dict[str, Any]]],
    libraries: Mapping[str, str | None],
    order: Sequence[str],
    baseline: str | None,
) -> list[View]:
    """`profiled`: (allocator, workload, params, profile) of every profiled run."""
    cells: dict[tuple[str, Any], dict[str, list[dict[str, Any]]]] = {}
    for alloc, workload, params, prof in profiled:
        cells.setdefault((workload, params), {}).setdefault(alloc, []).append(prof)
    out = []
    for (workload, params), by_alloc in cells.items():
        names = [a for a in order if a in by_alloc]
        runs = max(len(v) for v in by_alloc.values())
        summaries = [summarize(a, merge(by_alloc[a]), libraries.get(a)) for a in names]
        ref = baseline if baseline in names else (names[0] if names else None)
        sample = by_alloc[names[0]][0].get("sample", 1) if names else 1
        notes = _notes(summaries, sample)
        out.append(View(workload, params, tuple(names), runs, tuple(summaries), ref,
                        findings(summaries, ref, runs), notes))  # fmt: skip
    return out


def _notes(summaries: Sequence[Summary], sample: int) -> list[str]:
    """What the numbers mean and what they cannot show, under the table."""
    notes = [f"{s.allocator}: {s.visibility}" for s in summaries]
    if summaries:
        notes.append(f"hardware counters: {summaries[0].hw}")
    notes.append(f"cycles: TSC ticks of 1 call in {sample}, tight around the real call; "
                 "'new' = an address never freed before in the process (so never handed "
                 "out before), 'reuse' = one freed before; split as the timed calls "
                 "were")  # fmt: skip
    notes.append(_memory_note(summaries))
    for s in summaries:
        notes += [f"{s.allocator}: {gap}" for gap in _gaps(s.memory)]
    return notes


def _memory_note(summaries: Sequence[Summary]) -> str:
    interval = max((s.memory.get("track_interval", 0) for s in summaries), default=0)
    if not any("track_interval" in s.memory for s in summaries):
        how = "live requested bytes are exact (recorded by an older shim)"
    elif interval == 0:
        how = "live requested bytes are exact (every block tracked: sample 1)"
    else:
        how = (f"live requested bytes are estimated from tracked blocks (one allocated byte in "
               f"{interval:,} picks its block, weighted by its chance; the peak's moment is "
               "picked by half of them and measured by the other half, so that noise does "
               "not pick it; ± is 95%; --sample 1 is exact)")  # fmt: skip
    return (f"memory: {how}; usable sizes are those of the timed calls; RSS includes the "
            "profiler's bitmap (1/32 of the heap's address span)")  # fmt: skip


def live_margin(memory: Mapping[str, int]) -> float:
    """The 95% margin of the live-bytes estimate at its peak, as a share of it."""
    peak = memory.get("peak_requested", 0)
    return 1.96 * memory.get("peak_requested_sd", 0) / peak if peak else 0.0


def _gaps(memory: Mapping[str, int]) -> list[str]:
    """What the shim could not count, so that no number silently lacks a part."""
    gaps = []
    if memory.get("bitmap_full") or memory.get("shadow_full"):
        gaps.append("the bitmap could not be mapped: new/reuse and live bytes are incomplete")
    if memory.get("untracked"):
        gaps.append(f"{memory['untracked']:,} blocks could not be tracked (no memory for the "
                    "table): live bytes are low")  # fmt: skip
    if memory.get("threads_unmerged"):
        gaps.append(f"{memory['threads_unmerged']:,} threads alive at exit were not merged "
                    "(more than 4,096): their counts are missing")  # fmt: skip
    return gaps
