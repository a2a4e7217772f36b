"""What the RSS is made of: the allocator's own statistics at the end of a run.

Native workloads report them in their record, and libam_who in the processes of
other programs as they exit (am_stats.h has the schema and what each allocator
gives; of several processes, who.stats keeps the largest). Per cell and
allocator, the median of each quantity over its measured runs, or over its
verification run where measured runs do not carry them (an application's
measured runs run without libam_who).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import computed_field

from allocmark import labels
from allocmark.model import Params
from allocmark.store import Store

# In KiB: dirty (free pages kept, not given back) and cached (free blocks in thread
# caches) are parts of held, where the allocator says them (am_stats.h).
FIELDS = (
    "rss",
    "live",
    "held",
    "metadata",
    "released",
    "mapped",
    "committed",
    "dirty",
    "cached",
)


@dataclass(frozen=True)
class Made:
    """One allocator on one cell, in KiB (None: the allocator does not say)."""

    workload: str
    params: Params
    allocator: str
    source: str  # which statistics: jemalloc, tcmalloc, mimalloc, glibc, mallinfo2
    runs: int
    kib: dict[str, float | None]  # FIELDS -> median
    label: str  # the cell's, among the cells with statistics (labels.label_rows)
    arenas: float | None = None  # how many arenas (median; None: not said)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rest_kib(self) -> float | None:
        """RSS that is neither live, held free nor metadata: the program, its libraries
        and stacks, and what the allocator does not count."""
        parts = [self.kib.get(k) for k in ("rss", "live", "held", "metadata")]
        if any(p is None for p in parts[:3]):
            return None
        rss, live, held, meta = (p or 0.0 for p in parts)
        return rss - live - held - meta


def stored(store: Store, cid: int, order: Sequence[str] = ()) -> list[Made]:
    """Every cell and allocator with statistics, allocators in `order` first."""
    groups: dict[tuple[str, Params, str], dict[str, tuple[tuple[str, ...], Values]]] = {}
    for a, w, params, role, sources, values in store.alloc_stats(cid):
        groups.setdefault((w, params, a), {})[role] = (sources, values)
    rank = {a: i for i, a in enumerate(order)}
    keys = sorted(groups, key=lambda k: (k[0], str(k[1]), rank.get(k[2], len(rank)), k[2]))
    named = labels.label_rows(list(dict.fromkeys((w, p) for w, p, _ in keys)))
    return [_made(w, p, a, groups[(w, p, a)], named[(w, p)]) for w, p, a in keys]


Values = dict[str, list[float]]  # alloc_FIELD_kib -> the runs' values


def _made(
    workload: str,
    params: Params,
    allocator: str,
    by_role: dict[str, tuple[tuple[str, ...], Values]],
    label: str,
) -> Made:
    sources, values = by_role.get("measure") or next(iter(by_role.values()))
    runs = len(values["alloc_rss_kib"])
    kib: dict[str, float | None] = {}
    for f in FIELDS:
        found = values.get(f"alloc_{f}_kib", [])
        kib[f] = statistics.median(found) if found and len(found) == runs else None
    source = sources[0] if len(sources) == 1 else "mixed"
    arenas = values.get("alloc_arenas", [])
    counted = statistics.median(arenas) if arenas and len(arenas) == runs else None
    return Made(workload, params, allocator, source, runs, kib, label, counted)
