"""A run's profile records: read from the shim's file and summed (its processes, or
the runs of a cell). Records are JSON lines ("prof", records.py), one per process:
fork children and exec'd programs write their own. The raw records are stored
with their run; profiles stored by older allocmark versions are already summed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from allocmark.native import records

HISTOGRAMS = ("sizes", "sizes_sampled", "hist")
PEAK_KEYS = ("peak", "rss", "track_interval")  # not summed over records


# ---------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------
def read(path: Path) -> list[dict[str, Any]]:
    """Every process's "prof" record in the file (none if the file is absent)."""
    if not path.exists():
        return []
    text = records.read_file(path, "the profiler's record file")  # the program's file
    found = records.parse(text, "the profiler's record file")
    return [r.fields for r in found if r.kind == "prof"]


def _empty() -> dict[str, Any]:
    return {
        "api": {},
        "sizes": {},
        "sizes_sampled": {},
        "path": {},
        "hist": {},
        "sys": {},
        "threads_list": [],
    }


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
        {
            "pid": r["pid"],
            "exe": r.get("exe", ""),
            "malloc_calls": r["api"].get("malloc", {}).get("calls", 0),
        }
        for r in ordered
    ]
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
        "threads": {},
        "locks": {},
        "memory": {},
        "processes": [p for r in profiles for p in r.get("processes", [])],
    }
    for r in profiles:
        for kind in ("api", "path", "sys"):
            for name, pairs in r[kind].items():
                _add(out[kind].setdefault(name, {}), pairs)
        for kind in HISTOGRAMS:
            for name, values in r.get(kind, {}).items():
                out[kind][name] = add_lists(out[kind].get(name, []), values)
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
    intervals = [
        r["memory"]["track_interval"] for r in profiles if "track_interval" in r.get("memory", {})
    ]
    if intervals:
        out["memory"]["track_interval"] = max(intervals)
    return out


def _add(to: dict[str, int], pairs: Mapping[str, int]) -> None:
    for k, v in pairs.items():
        to[k] = to.get(k, 0) + v


def add_lists(a: Sequence[float], b: Sequence[float]) -> list[float]:
    n = max(len(a), len(b))
    return [(a[i] if i < len(a) else 0) + (b[i] if i < len(b) else 0) for i in range(n)]


def of_stored(stored: Mapping[str, Any]) -> dict[str, Any]:
    """A run's profile as stored: its raw records, summed here; or (stored before the
    records were kept) the sum itself."""
    if "records" in stored:
        return combine(stored["records"])
    return dict(stored)
