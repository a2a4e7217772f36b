"""From why to what to try: a named cause a setting addresses, and that setting.

When answer/why.py explains a decided difference by a signal that a catalog entry
(catalog/remedies.toml) says a setting addresses (freed pages kept dirty: jemalloc's
decay; never releasing: scudo's release interval; threads' arenas: MALLOC_ARENA_MAX;
huge pages: :nothp), the answer names the variant for the allocator that is worse on
that axis, and the variant's own position on that workload when the campaign
measured it; else the command that would. The cause must account for most of the
difference (why.MOST); one line per workload, allocator and variant.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from allocmark import schemas, tomlfile
from allocmark.answer import analyze, recommend
from allocmark.answer.analyze import Comparison
from allocmark.answer.why import MOST, Why, explain
from allocmark.schemas.remedies import RemediesFile, Remedy
from allocmark.workloads.catalog import COMMAND


@dataclass(frozen=True)
class Try:
    """A variant to try for one explained difference."""

    why: Why
    allocator: str  # whose cost it addresses: the worse one on the axis
    baseline: str
    variant: str
    says: str
    position: recommend.Position | None  # the variant's on this row, when measured
    command: str  # what would measure it


def remedies_file() -> Path:
    return Path(str(resources.files("allocmark") / "catalog" / "remedies.toml"))


def load(path: Path | None = None) -> list[Remedy]:
    path = path or remedies_file()
    return schemas.validate(RemediesFile, tomlfile.load(path), str(path)).remedy


def tries(comp: Comparison) -> list[Try]:
    """What to try for each explained difference of the comparison (kept with it)."""
    return analyze.derived(comp, "tries", lambda: _tries(comp, load()))


def _tries(comp: Comparison, remedies: list[Remedy]) -> list[Try]:
    if comp.baseline is None:
        return []
    rows = {
        (r.workload, r.params): p for r, p in zip(comp.rows, recommend.per_row(comp), strict=True)
    }
    out: list[Try] = []
    seen = set()
    for w in explain(comp):
        owner = w.allocator if w.delta > 0 else comp.baseline
        # A cause the remedy addresses must account for most of the difference.
        named = {f.signal for f in w.factors if f.share is not None and f.share >= MOST}
        for r in remedies:
            if r.axis == w.axis and r.allocator in (owner, "*") and named & set(r.signals):
                variant = r.try_.replace("{name}", owner)
                key = (w.workload, w.params, owner, variant)
                if variant == owner or key in seen:
                    continue
                seen.add(key)
                found = rows[(w.workload, w.params)].get(variant)
                position = getattr(found, w.axis) if isinstance(found, recommend.Choice) else None
                command = _command(w, comp, owner, variant)
                out.append(Try(w, owner, comp.baseline, variant, r.says, position, command))
                break
    return out


def _command(w: Why, comp: Comparison, owner: str, variant: str) -> str:
    """The run that would measure the variant beside the allocator on this workload."""
    names = dict.fromkeys([comp.baseline or owner, owner, variant])
    params = "".join(f" -p {k}={v}" for k, v in w.params)
    if w.workload == COMMAND:
        return f"allocmark try -a {','.join(names)} -- <your command>"
    return f"allocmark run -w {w.workload}{params} -a {','.join(names)}"


def as_record(t: Try) -> dict[str, object]:
    """A remedy as the JSON summary carries it."""
    p = t.position
    return {
        "workload": t.why.workload,
        "params": json.dumps(dict(t.why.params)),
        "allocator": t.allocator,
        "axis": t.why.axis,
        "try": t.variant,
        "says": t.says,
        "measured": None
        if p is None
        else {"value": p.value, "low": p.low, "high": p.high, "verdict": p.verdict.value},
        "command": t.command,
    }
