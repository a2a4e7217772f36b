"""From why to what to try: a named cause a setting addresses, and that setting.

When answer/why.py explains a decided difference by a signal that a catalog entry
(catalog/remedies.toml) says a setting addresses (freed pages kept dirty: jemalloc's
decay; never releasing: scudo's release interval; threads' arenas: MALLOC_ARENA_MAX;
huge pages: :nothp), or by a mechanism the kernel's counts name (why.MECHANISMS:
glibc trimming its heap on free, mapping each large block, threads waiting on two
shared arenas), the answer names the variant for the allocator that is worse on that
axis (for a mechanism, the one that makes more of those calls), and the variant's own
position on that workload when the campaign measured it; else the command that would.
A signal must account for most of the difference (why.MOST); a mechanism must be named
(decided and material: why.MATERIAL); a remedy for threads (`threads = true`) is
offered only on a row that runs two or more; one line per workload, allocator and
variant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from allocmark import labels, schemas, tomlfile
from allocmark.answer import recommend
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


def tries(
    comp: Comparison,
    found: Sequence[dict[str, recommend.Choice | recommend.Excluded]] = (),
    whys: Sequence[Why] | None = None,
) -> list[Try]:
    """What to try for each explained difference of the comparison; `found` (the rows'
    positions) and `whys` (why.explain's), when the caller has them."""
    if comp.baseline is None:
        return []
    found = list(found) or recommend.per_row(comp)
    whys = explain(comp, found) if whys is None else whys
    rows = {(r.workload, r.params): p for r, p in zip(comp.rows, found, strict=True)}
    remedies = load() if whys else []
    out: list[Try] = []
    seen = set()
    for w in whys:
        owner = w.allocator if w.delta > 0 else comp.baseline
        # A cause the remedy addresses must account for most of the difference, or be
        # a mechanism the why names: its counts moved with the outcome, so the worse
        # allocator (the owner) is the one that makes more of those calls.
        named = {f.signal for f in w.factors if f.share is not None and f.share >= MOST}
        made = set(w.mechanisms)
        for r in remedies:
            if r.threads and not _threaded(w):
                continue
            cause = named & set(r.signals) or made & set(r.mechanisms)
            if r.axis == w.axis and r.allocator in (owner, "*") and cause:
                variant = r.try_.replace("{name}", owner)
                key = (w.workload, w.params, owner, variant)
                if variant == owner or key in seen:
                    continue
                seen.add(key)
                measured = rows[(w.workload, w.params)].get(variant)
                position = (
                    getattr(measured, w.axis) if isinstance(measured, recommend.Choice) else None
                )
                command = _command(w, comp, owner, variant)
                out.append(Try(w, owner, comp.baseline, variant, r.says, position, command))
                break
    return out


def _threaded(w: Why) -> bool:
    """Does the row run two or more threads, by its `threads` parameter? A row that
    does not say (a command, an application) is not offered a remedy for threads:
    glibc makes a second arena only when a second thread allocates."""
    threads = dict(w.params).get("threads")
    return isinstance(threads, int) and threads > 1


def _command(w: Why, comp: Comparison, owner: str, variant: str) -> str:
    """The run that would measure the variant beside the allocator on this workload."""
    names = dict.fromkeys([comp.baseline or owner, owner, variant])
    params = "".join(f" -p {k}={labels.value_text(v)}" for k, v in w.params)
    if w.workload == COMMAND:
        return f"allocmark try -a {','.join(names)} -- <your command>"
    return f"allocmark run -w {w.workload}{params} -a {','.join(names)}"
