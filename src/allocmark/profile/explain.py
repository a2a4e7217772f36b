"""Findings: plain sentences computed from the numbers, and a stored campaign's
profiles as side-by-side views, cell by cell."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from allocmark.model import Profiled
from allocmark.native.kernel import PREFIX as KERNEL_PREFIX, TIME_PREFIX, TIMED
from allocmark.profile.records import merge, of_stored
from allocmark.profile.summary import (
    PATHS,
    AllocatorProfile,
    count_text,
    layout,
    summarize,
    timed_words,
)
from allocmark.units import time_text


# ---------------------------------------------------------------------------
# Findings: plain sentences computed from the numbers
# ---------------------------------------------------------------------------
def findings(
    summaries: Sequence[AllocatorProfile], baseline: str | None, runs: int = 1
) -> list[str]:
    """Plain sentences from the numbers; counts per run."""
    base = next((s for s in summaries if s.allocator == baseline), None)
    out = []
    for s in summaries:
        out += [f"{s.allocator}: {line}" for line in _against(s, base, runs)]
    return out


def _against(s: AllocatorProfile, base: AllocatorProfile | None, runs: int) -> list[str]:
    lines = []
    if s.new + s.reuse:
        lines.append(f"{s.reuse / (s.new + s.reuse):.1%} of allocations reuse an address")
    if s.time_share is not None:
        lines.append(f"~{s.time_share:.1%} of its threads' time inside the allocator (estimated)")
    if s.locks.get("contended", 0) + s.locks.get("trylock_failed", 0):
        keys = ("contended", "trylock_failed", "wait_cycles")
        contended, failed, waiting = (count_text(s.locks.get(k, 0) / runs) for k in keys)
        lines.append(
            f"lock contention per run: {contended} contended acquisitions, "
            f"{failed} failed trylocks, {waiting} cycles waiting"
        )
    if base is None or base is s:
        return lines
    for p in PATHS:
        mine, theirs = s.paths[p].median, base.paths[p].median
        if mine and theirs and (mine / theirs >= 1.5 or mine / theirs <= 1 / 1.5):
            lines.append(
                f"{mine / theirs:.1f}x the {p.replace('_', ' ')} cycles of "
                f"{base.allocator} (median {mine:.0f} vs {theirs:.0f})"
            )
    if s.kernel and base.kernel:
        lines += _kernel_against(s, base)
    else:
        lines += _shim_syscalls_against(s, base, runs)
    if s.times and base.times:
        lines += _times_against(s, base)
    return lines + _layout_against(s, base)


def _shim_syscalls_against(s: AllocatorProfile, base: AllocatorProfile, runs: int) -> list[str]:
    """The system calls the shim saw through the PLT, where the kernel did not count."""
    lines = []
    for name in ("mmap", "munmap", "madvise", "mprotect", "mremap"):
        if name not in s.visible or name not in base.visible:
            continue  # a 0 that only means "not seen" compares nothing
        mine_n = s.syscalls.get(name, {}).get("in_calls", 0)
        theirs_n = base.syscalls.get(name, {}).get("in_calls", 0)
        if mine_n != theirs_n and max(mine_n, theirs_n) >= 10 * runs:
            lines.append(
                f"{_calls(mine_n / runs, name)} per run vs "
                f"{count_text(theirs_n / runs)} for {base.allocator}"
            )
    return lines


# A layout finding: utilization apart by this much (of the pages' or lines' bytes), or
# shared lines _apart.
USE_APART = 0.10


def _layout_against(s: AllocatorProfile, base: AllocatorProfile) -> list[str]:
    """Page and line utilization, and lines shared by threads, against the baseline's."""
    mine, theirs = layout(s), layout(base)
    if mine is None or theirs is None:
        return []
    lines = [
        f"{what} utilization {m:.0%} vs {t:.0%} for {base.allocator} (near the peak)"
        for what, m, t in (
            ("page", mine.page_use, theirs.page_use),
            ("line", mine.line_use, theirs.line_use),
        )
        if abs(m - t) >= USE_APART
    ]
    a, b = mine.shared, theirs.shared
    if _apart(a, b):
        lines.append(
            f"{count_text(a)} lines shared by threads vs {count_text(b)} for {base.allocator}"
        )
    return lines


def _calls(n: float, what: str) -> str:
    """ "1 brk call", "27 brk calls"."""
    text = count_text(n)
    return f"{text} {what} call{'' if text == '1' else 's'}"


def _apart(a: float, b: float) -> bool:
    """Two counts worth a sentence: 1.5x apart or more, and 10 or more in either."""
    return max(a, b) >= 10 and max(a, b) >= 1.5 * max(min(a, b), 1)


def _kernel_against(s: AllocatorProfile, base: AllocatorProfile) -> list[str]:
    """The kernel's counts (already per run) that differ by 1.5x or more and reach 10 a
    run in either: glibc's own calls and raw ones included."""
    lines = []
    for kind in ("mmap", "munmap", "mremap", "mprotect", "brk", "madvise", "futex_wait"):
        mine, theirs = s.kernel.get(kind, 0.0), base.kernel.get(kind, 0.0)
        if _apart(mine, theirs):
            lines.append(
                f"{_calls(mine, kind.replace('_', ' '))} per run vs "
                f"{count_text(theirs)} for {base.allocator} (the kernel's count)"
            )
    return lines


def _times_against(s: AllocatorProfile, base: AllocatorProfile) -> list[str]:
    """The kernel's times inside each kind of call (already per run), apart by the
    counts' rule in milliseconds: 1.5x, and 10 ms a run in either."""
    lines = []
    for kind in TIMED:
        mine, theirs = s.times.get(kind, 0.0), base.times.get(kind, 0.0)
        if _apart(mine * 1000, theirs * 1000):
            lines.append(
                f"{time_text(mine)} inside {timed_words(kind)} per run vs {time_text(theirs)} "
                f"for {base.allocator} (the kernel's timing)"
            )
    return lines


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
    summaries: tuple[AllocatorProfile, ...]  # in the order of `allocators`
    baseline: str | None  # the allocator the others are compared with
    findings: list[str]
    notes: list[str]


def views(
    profiled: Sequence[Profiled],
    libraries: Mapping[str, str | None],
    order: Sequence[str],
    baseline: str | None,
) -> list[View]:
    """Every profiled run's side-by-side view, cell by cell."""
    cells: dict[tuple[str, Any], dict[str, list[Profiled]]] = {}
    for p in profiled:
        cells.setdefault((p.workload, p.params), {}).setdefault(p.allocator, []).append(p)
    out = []
    for (workload, params), by_alloc in cells.items():
        names = [a for a in order if a in by_alloc]
        runs = max(len(v) for v in by_alloc.values())
        summaries = [_summary(a, by_alloc[a], libraries.get(a)) for a in names]
        ref = baseline if baseline in names else (names[0] if names else None)
        sample = of_stored(by_alloc[names[0]][0].profile).get("sample", 1) if names else 1
        notes = _notes(summaries, sample)
        out.append(
            View(
                workload,
                params,
                tuple(names),
                runs,
                tuple(summaries),
                ref,
                findings(summaries, ref, runs),
                notes,
            )
        )
    return out


def _summary(allocator: str, runs: Sequence[Profiled], library: str | None) -> AllocatorProfile:
    """One allocator's runs of a cell summed, with the kernel's counts, mean per run
    (none when a run was not counted)."""
    s = summarize(allocator, merge([of_stored(p.profile) for p in runs]), library)
    missing = next((p.uncounted or "not counted" for p in runs if not p.counts), "")
    if missing:
        return dataclasses.replace(s, uncounted=missing)
    counts, times = _mean(runs, KERNEL_PREFIX), _mean(runs, TIME_PREFIX)
    untimed = next(
        (p.untimed or "not timed" for p in runs if not any(k in p.counts for k in _TIMES)), ""
    )
    return dataclasses.replace(s, kernel=counts, times={} if untimed else times, untimed=untimed)


_TIMES = tuple(TIME_PREFIX + k for k in TIMED)


def _mean(runs: Sequence[Profiled], prefix: str) -> dict[str, float]:
    """The runs' metrics of one prefix, mean per run, by kind."""
    kinds = dict.fromkeys(k for p in runs for k in p.counts if k.startswith(prefix))
    return {
        k.removeprefix(prefix): sum(p.counts.get(k, 0.0) for p in runs) / len(runs) for k in kinds
    }


def _notes(summaries: Sequence[AllocatorProfile], sample: int) -> list[str]:
    """What the numbers mean and what they cannot show, under the table."""
    notes = [f"{s.allocator}: {s.visibility}" for s in summaries]
    notes += [
        f"{s.allocator}: system calls not counted: {s.uncounted}" for s in summaries if s.uncounted
    ]
    if any(s.kernel for s in summaries):
        notes.append(
            "system calls per run: counted by the kernel (syscall tracepoints) over the run's "
            "whole tree, the allocator's own and raw ones included, and the profiler's few"
        )
    notes += [f"{s.allocator}: system calls not timed: {s.untimed}" for s in summaries if s.untimed]
    if any(s.times for s in summaries):
        notes.append(
            "time inside them: the kernel's timing of each call from its entry to its exit "
            "(two samples a call), summed over the run's threads and processes; futex lock "
            "waits: FUTEX_WAIT, asleep on a lock's word (glibc's mutexes and arena locks; "
            "not its joins and condition variables, which wait with FUTEX_WAIT_BITSET)"
        )
    if summaries:
        notes.append(f"hardware counters: {summaries[0].hw}")
    notes.append(
        f"cycles: TSC ticks of 1 call in {sample}, tight around the real call; "
        "'new' = an address never freed before in the process (so never handed "
        "out before), 'reuse' = one freed before; split as the timed calls "
        "were"
    )
    notes.append(_memory_note(summaries))
    for s in summaries:
        notes += [f"{s.allocator}: {gap}" for gap in _gaps(s.memory)]
    return notes


def _memory_note(summaries: Sequence[AllocatorProfile]) -> str:
    interval = max((s.memory.get("track_interval", 0) for s in summaries), default=0)
    if not any("track_interval" in s.memory for s in summaries):
        how = "live requested bytes are exact (recorded by an older shim)"
    elif interval == 0:
        how = "live requested bytes are exact (every block tracked: sample 1)"
    else:
        how = (
            f"live requested bytes are estimated from tracked blocks (one allocated byte in "
            f"{interval:,} picks its block, weighted by its chance; the peak's moment is "
            "picked by half of them and measured by the other half, so that noise does "
            "not pick it; ± is 95%; --sample 1 is exact)"
        )
    layout = (
        "layout: the live blocks' requested bytes over the 4 KiB pages and 64-byte lines "
        "holding any of them, and the lines holding blocks of two threads or more, "
        "taken when live bytes last grew by 1/16 (within 1/16 of the peak)"
        if interval == 0
        else "layout: n/a, it needs every block tracked (--sample 1)"
    )
    return (
        f"memory: {how}; usable sizes are those of the timed calls; RSS includes the "
        f"profiler's bitmap (1/32 of the heap's address span); {layout}"
    )


def _gaps(memory: Mapping[str, int]) -> list[str]:
    """What the shim could not count, so that no number silently lacks a part."""
    gaps = []
    if memory.get("bitmap_full") or memory.get("shadow_full"):
        gaps.append("the bitmap could not be mapped: new/reuse and live bytes are incomplete")
    if memory.get("untracked"):
        gaps.append(
            f"{memory['untracked']:,} blocks could not be tracked (no memory for the "
            "table): live bytes are low"
        )
    if memory.get("layout_missed"):
        gaps.append(
            f"{memory['layout_missed']:,} layout takings had no memory for their copy: "
            "the layout is from an earlier, smaller moment"
        )
    if memory.get("threads_unmerged"):
        gaps.append(
            f"{memory['threads_unmerged']:,} threads alive at exit were not merged "
            "(more than 4,096): their counts are missing"
        )
    return gaps
