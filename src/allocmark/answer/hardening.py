"""The hardening battery: what each allocator catches, and what hardening costs.

Each test of catalog/hardening.toml runs as its own process (workload `harden`,
native/harden) and says how far it got with "stage" records: "setup" before the
error, "error" once the erroneous call or store has returned, "reveal" once the
allocations after it are done; its final record says what the reveal saw. The
outcome is read from the run, never guessed:

    misuse test     stopped before "error"                 caught at the error
                    stopped after it                       caught later
                    went on, reveal saw damage             corrupted
                    went on, the allocator wrote stderr    reported, went on
                    went on, nothing seen                  not caught
                    killed at its timeout                  hang
    contract test   kept the API's contract                conforming
                    broke it, or stopped                   non-conforming

A randomised check may differ between repetitions: a cell then says how many
of its runs caught the error ("caught 2 of 3").
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path

from allocmark import schemas, stats, tomlfile
from allocmark.answer import analyze
from allocmark.model import RunStatus, StoredRun
from allocmark.schemas.hardening import HardeningFile, Kind, Test
from allocmark.store import Store

WORKLOAD = analyze.BATTERY


class Outcome(StrEnum):
    AT_ERROR = "caught at the error"
    LATER = "caught later"
    REPORTED = "reported, went on"
    MISSED = "not caught"
    CORRUPTED = "corrupted"
    HANG = "hang"
    CONFORMING = "conforming"
    NONCONFORMING = "non-conforming"
    NOT_RUN = "not run"


CAUGHT = frozenset({Outcome.AT_ERROR, Outcome.LATER})
# A test's points for the score: stopping the program counts, a message half.
POINTS = {Outcome.AT_ERROR: 1.0, Outcome.LATER: 1.0, Outcome.REPORTED: 0.5, Outcome.CONFORMING: 1.0}
SHORT = {
    Outcome.AT_ERROR: "caught",
    Outcome.LATER: "later",
    Outcome.REPORTED: "message",
    Outcome.MISSED: "missed",
    Outcome.CORRUPTED: "CORRUPT",
    Outcome.HANG: "hang",
    Outcome.CONFORMING: "ok",
    Outcome.NONCONFORMING: "NO",
    Outcome.NOT_RUN: "n/a",
}


def catalog_file() -> Path:
    return Path(str(resources.files("allocmark") / "catalog" / "hardening.toml"))


@functools.cache
def load() -> HardeningFile:
    path = catalog_file()
    return schemas.validate(HardeningFile, tomlfile.load(path), str(path))


def tests() -> dict[str, Test]:
    return load().test


@dataclass(frozen=True)
class Seen:
    """One run's outcome, and what it was told or showed (the allocator's message,
    the signal, what a contract test saw)."""

    outcome: Outcome
    detail: str = ""


def classify(kind: Kind, run: StoredRun) -> Seen:
    """The outcome of one run of a test of `kind` (see the module's table)."""
    stage, m = run.labels.get("stage", ""), run.metrics
    if run.status is RunStatus.TIMEOUT:
        return Seen(Outcome.HANG, run.detail)
    if run.status not in (RunStatus.OK, RunStatus.CRASHED, RunStatus.FAILED):
        return Seen(Outcome.NOT_RUN, f"{run.status.value}: {run.detail}")
    stopped = run.status is not RunStatus.OK
    if kind is Kind.CONTRACT:
        if stopped:
            return Seen(Outcome.NONCONFORMING, f"stopped: {run.detail}")
        good = m.get("conforming") == 1
        return Seen(
            Outcome.CONFORMING if good else Outcome.NONCONFORMING, run.labels.get("seen", "")
        )
    if stopped:
        return Seen(Outcome.AT_ERROR if stage in ("", "setup") else Outcome.LATER, run.detail)
    damage = [k.replace("_", " ") for k in ("same_block", "overlap", "wrong_contents") if m.get(k)]
    if damage:
        return Seen(Outcome.CORRUPTED, ", ".join(damage))
    if message := run.labels.get("stderr", "").strip():
        return Seen(Outcome.REPORTED, message)
    return Seen(Outcome.MISSED, "read the next owner's data" if m.get("leaked") else "")


@dataclass(frozen=True)
class Trial:
    """One test under one allocator: the outcome of each repetition."""

    test: str
    allocator: str
    seen: tuple[Seen, ...]

    @property
    def outcome(self) -> Outcome:
        """The outcome most runs had (ties: the worse for the user)."""
        counts = {o: sum(s.outcome is o for s in self.seen) for o in Outcome}
        return max(reversed(list(Outcome)), key=lambda o: counts[o])

    @property
    def points(self) -> float:
        return sum(POINTS.get(s.outcome, 0.0) for s in self.seen) / max(1, len(self.seen))

    @property
    def text(self) -> str:
        """ "caught"; for runs that differ, "caught 2 of 3" (or "2 CORRUPT, 1 missed"
        when none caught it)."""
        if len({s.outcome for s in self.seen}) <= 1:
            return SHORT[self.outcome]
        if caught := sum(s.outcome in CAUGHT for s in self.seen):
            return f"caught {caught} of {len(self.seen)}"
        counts = {o: sum(s.outcome is o for s in self.seen) for o in reversed(Outcome)}
        ranked = sorted(counts.items(), key=lambda x: -x[1])  # stable: ties, the worse first
        return ", ".join(f"{n} {SHORT[o]}" for o, n in ranked if n)


@dataclass(frozen=True)
class Score:
    allocator: str
    caught: int  # misuse tests whose every run stopped the program
    misuse: int
    corrupted: int  # misuse tests a run of which went on with damage seen
    kept: int  # contract tests kept in every run
    contract: int
    points: float  # POINTS over all tests, 0..1


@dataclass(frozen=True)
class Matrix:
    tests: tuple[str, ...]  # the catalog's order
    allocators: tuple[str, ...]
    cells: dict[tuple[str, str], Trial]  # (test, allocator)
    kinds: dict[str, Kind]  # test -> what it checks, as the catalog says

    @property
    def scores(self) -> tuple[Score, ...]:
        """Every allocator's score, in the matrix's order."""
        return tuple(self.score(a) for a in self.allocators)

    def score(self, allocator: str) -> Score:
        cells = [c for (_, a), c in self.cells.items() if a == allocator]

        def of(kind: Kind) -> list[Trial]:
            return [c for c in cells if self.kinds.get(c.test) is kind]

        misuse, contract = of(Kind.MISUSE), of(Kind.CONTRACT)
        return Score(
            allocator,
            caught=sum(all(s.outcome in CAUGHT for s in c.seen) for c in misuse),
            misuse=len(misuse),
            corrupted=sum(any(s.outcome is Outcome.CORRUPTED for s in c.seen) for c in misuse),
            kept=sum(all(s.outcome is Outcome.CONFORMING for s in c.seen) for c in contract),
            contract=len(contract),
            points=sum(c.points for c in cells) / max(1, len(cells)),
        )


def matrix(runs: Sequence[StoredRun], order: Sequence[str] = ()) -> Matrix | None:
    """The battery's runs as a tests x allocators matrix (None: the runs have none)."""
    known = tests()
    found: dict[tuple[str, str], list[Seen]] = {}
    for r in runs:
        test = str(dict(r.params).get("test", ""))
        if r.workload != WORKLOAD or r.role != "measure" or test not in known:
            continue
        found.setdefault((test, r.allocator), []).append(classify(known[test].kind, r))
    if not found:
        return None
    names = {a for _, a in found}
    allocators = [a for a in order if a in names] + sorted(names - set(order))
    ordered = tuple(t for t in known if any((t, a) in found for a in names))
    return Matrix(
        ordered,
        tuple(allocators),
        {k: Trial(*k, tuple(v)) for k, v in found.items()},
        {t: known[t].kind for t in ordered},
    )


def stored(store: Store, cid: int, order: Sequence[str] = ()) -> Matrix | None:
    if not store.has_workload(cid, WORKLOAD):
        return None
    names = ["same_block", "overlap", "wrong_contents", "leaked", "conforming"]
    return matrix(store.runs(cid, names), order)


# -- what hardening costs ----------------------------------------------------------------
def pairs(allocators: Sequence[str]) -> list[tuple[str, str]]:
    """(hardened, plain) for every hardened build whose plain build is also there."""
    cost, present = load().cost, set(allocators)
    out = []
    for a in allocators:
        plain = cost.pairs.get(a) or next((a[: -len(s)] for s in cost.strip if a.endswith(s)), None)
        if plain and plain in present:
            out.append((a, plain))
    return out


@dataclass(frozen=True)
class Cost:
    """A hardened build against its plain build on one row (or their geomean)."""

    hardened: str
    plain: str
    label: str  # the row, or "geomean"
    ratios: Mapping[str, stats.Ratio | stats.GeoMean | None]  # metric -> hardened / plain
    verdicts: Mapping[str, stats.Verdict | None]


COST_METRICS = ("time_s", "peak_rss_kib")


def costs(comp: analyze.Comparison) -> list[Cost]:
    """Per pair and row (the battery's own rows left out), hardened / plain in time
    and peak RSS, paired by block, with a verdict; then the pair's geomean."""
    rows = [r for r in comp.rows if r.workload != WORKLOAD]
    out = []
    for hardened, plain in pairs(comp.allocators):
        found: dict[str, list[float]] = {m: [] for m in COST_METRICS}
        for row in rows:
            ratios: dict[str, stats.Ratio | stats.GeoMean | None] = {}
            verdicts: dict[str, stats.Verdict | None] = {}
            for m in COST_METRICS:
                h, p = row.cells[m].get(hardened), row.cells[m].get(plain)
                r = analyze.paired_ratio(h, p) if h and p and h.summary and p.summary else None
                ratios[m], verdicts[m] = r, stats.verdict(r, comp.margin) if r else None
                if r is not None:
                    found[m].append(r.value)
            out.append(Cost(hardened, plain, row.label, ratios, verdicts))
        geo = {m: stats.geomean(v) for m, v in found.items()}
        out.append(Cost(hardened, plain, "geomean", geo, dict.fromkeys(COST_METRICS)))
    return out
