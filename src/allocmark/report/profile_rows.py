"""The profiler's side-by-side table as rows of text, one cell per allocator."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from allocmark.profile import (
    PATHS,
    SYSCALLS,
    TIMED,
    AllocatorProfile,
    Layout,
    count_text,
    layout,
    live_margin,
    timed_words,
    usable_at_peak,
)
from allocmark.report import fmt

Row = tuple[str, str, list[str]]  # section, label, a cell per allocator


def rows(summaries: Sequence[AllocatorProfile], baseline: str | None, runs: int = 1) -> list[Row]:
    """The report's rows; counts are per run (mean over `runs` runs)."""
    base = next((s for s in summaries if s.allocator == baseline), None)
    out: list[Row] = []

    def add(section: str, label: str, cell: Any) -> None:
        out.append((section, label, [cell(s) for s in summaries]))

    calls = "calls per run"
    add(calls, "malloc (new / reuse)", lambda s: _calls_split(s, runs))
    add(calls, "  its sizes (top 2)", _sizes)
    for api in (
        "free",
        "calloc",
        "realloc",
        "posix_memalign",
        "aligned_alloc",
        "malloc_usable_size",
    ):
        if any(s.calls.get(api) for s in summaries):
            add(calls, api, lambda s, a=api: count_text(s.calls.get(a, 0) / runs))
    cycles = "cycles/call: median, p90, p99 (x base)"
    for p in PATHS:
        if any(s.paths[p].samples for s in summaries):
            add(cycles, p.replace("_", " "), lambda s, p=p: _cycles(s, base, p))
    kernel = "system calls per run, the kernel's count (the run's tree)"
    if any(s.kernel for s in summaries):
        for label, kinds in KERNEL_ROWS:
            if any(s.kernel.get(k) for s in summaries for k in kinds):
                add(kernel, label, lambda s, ks=kinds: _kernel(s, ks))
    inside = "time inside them per run, the kernel's (threads summed; a call's mean)"
    for kind in TIMED:
        if any(s.times.get(kind) for s in summaries):
            add(inside, timed_words(kind), lambda s, k=kind: _inside(s, k))
    sys_title = "syscalls in the allocator (cycles)"
    for name in SYSCALLS:
        if any(s.syscalls.get(name, {}).get("in_calls") for s in summaries):
            add(sys_title, name, lambda s, n=name: _sys(s, n, runs))
    locks = "mutexes in the allocator"
    if any(s.locks.get("lock_calls") or s.locks.get("trylock_calls") for s in summaries):
        add(
            locks,
            "lock: calls / contended",
            lambda s: _pair(s.locks, "lock_calls", "contended", runs),
        )
        add(locks, "  waiting, cycles", lambda s: count_text(s.locks.get("wait_cycles", 0) / runs))
        add(
            locks,
            "trylock: calls / failed",
            lambda s: _pair(s.locks, "trylock_calls", "trylock_failed", runs),
        )
    share = "time"
    add(
        share,
        "in the allocator (estimate)",
        lambda s: "n/a" if s.time_share is None else f"{s.time_share:.1%}",
    )
    add(share, "threads", lambda s: count_text(s.threads / runs))
    mem = "memory at the peak of live bytes"
    add(mem, "requested (live)", _live)
    add(mem, "usable (estimated)", lambda s: fmt.size_bytes(usable_at_peak(s)))
    add(mem, "internal fragmentation", _internal)
    add(mem, "RSS", lambda s: fmt.size_bytes(s.memory.get("rss_at_peak_kib", 0) * 1024))
    add(mem, "RSS - usable: the rest", _rest)
    near = "layout near the peak (every block tracked: --sample 1)"
    add(near, "page utilization", lambda s: _use(s, lambda lay: (lay.page_use, lay.pages, "pages")))
    add(near, "line utilization", lambda s: _use(s, lambda lay: (lay.line_use, lay.lines, "lines")))
    add(near, "lines shared by threads", _shared)
    return out


def _use(s: AllocatorProfile, pick: Callable[[Layout], tuple[float, int, str]]) -> str:
    """ "66% of 46 pages": the live requested bytes over the bytes of the pages (lines)
    that hold any of them (docs/profiler.md, "Layout near the peak"); `pick` says which."""
    lay = layout(s)
    if lay is None:
        return "n/a"
    use, held, unit = pick(lay)
    return f"{use:.0%} of {count_text(held)} {unit}"


def _shared(s: AllocatorProfile) -> str:
    lay = layout(s)
    return "n/a" if lay is None else f"{count_text(lay.shared)} ({lay.shared / lay.lines:.1%})"


# The kernel's counts as rows: a label, and the kinds (native/kernel.py) its cell shows.
KERNEL_ROWS = (
    ("mmap / munmap", ("mmap", "munmap")),
    ("mremap", ("mremap",)),
    ("mprotect", ("mprotect",)),
    ("brk", ("brk",)),
    ("madvise: DONTNEED / FREE / all", ("madvise_dontneed", "madvise_free", "madvise")),
    ("futex: waits / wakes / all", ("futex_wait", "futex_wake", "futex")),
)


def _kernel(s: AllocatorProfile, kinds: Sequence[str]) -> str:
    if not s.kernel:
        return "n/a"
    return " / ".join(count_text(s.kernel.get(k, 0.0)) for k in kinds)


def _inside(s: AllocatorProfile, kind: str) -> str:
    """ "36.4 ms (1.8 µs a call)": seconds inside one kind of call, and over its count."""
    if not s.times:
        return "n/a"
    t, n = s.times.get(kind, 0.0), s.kernel.get(kind, 0.0)
    return fmt.seconds(t) + (f" ({t / n * 1e6:,.1f} µs a call)" if n else "")


def _calls_split(s: AllocatorProfile, runs: int) -> str:
    n = s.calls.get("malloc", 0)
    if not n:
        return "0"
    mn = s.paths["malloc_new"].calls
    return f"{count_text(n / runs)} ({mn / n:.0%} / {1 - mn / n:.0%})"


def _sizes(s: AllocatorProfile) -> str:
    total = sum(s.malloc_sizes)
    top = sorted(range(len(s.malloc_sizes)), key=lambda k: -s.malloc_sizes[k])[:2]
    shares = (
        f"{fmt.size_bucket(k)} {s.malloc_sizes[k] / total:.0%}" for k in top if s.malloc_sizes[k]
    )
    return ", ".join(shares) if total else "-"


def _cycles(s: AllocatorProfile, base: AllocatorProfile | None, p: str) -> str:
    st = s.paths[p]
    if st.median is None:
        return "-"
    text = f"{st.median:,.0f}, {st.p90:,.0f}, {st.p99:,.0f}"
    ref = base.paths[p].median if base else None
    if ref and base is not s:
        text += f" ({st.median / ref:.2f}x)"
    return text


def _sys(s: AllocatorProfile, name: str, runs: int) -> str:
    d = s.syscalls.get(name, {})
    n = d.get("in_calls", 0)
    return f"{count_text(n / runs)} ({d.get('in_cycles', 0) / n:,.0f})" if n else "0"


def _pair(d: Mapping[str, int], a: str, b: str, runs: int) -> str:
    return f"{count_text(d.get(a, 0) / runs)} / {count_text(d.get(b, 0) / runs)}"


def _live(s: AllocatorProfile) -> str:
    margin = live_margin(s.memory)
    text = fmt.size_bytes(s.memory.get("peak_requested", 0))
    return f"{text} ±{margin:.1%}" if margin else text


def _internal(s: AllocatorProfile) -> str:
    usable, req = usable_at_peak(s), s.memory.get("peak_requested", 0)
    return f"{fmt.size_bytes(usable - req)} ({(usable - req) / usable:.1%})" if usable else "-"


def _rest(s: AllocatorProfile) -> str:
    rss = s.memory.get("rss_at_peak_kib", 0) * 1024
    return fmt.size_bytes(rss - usable_at_peak(s)) if rss else "-"
