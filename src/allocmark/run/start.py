"""Request -> plan, in one call: what a `Request` means on this machine (its suite
and rows; the allocators it names and the candidates its selection makes of them,
built and verified in one call, allocators/prepare.py, once every decision here is
made), made once into a `CampaignPlan`, and the campaign stored to run it with the
runs of its first blocks.

`api.run` calls `planned` once, then hands the plan to the loop (campaign.py). What
`tune` races is a `Selection` handed in (verbs/tune.py: each allocator with each of
its settings), never a branch here; a plain campaign's selection is the allocators
as named.
"""

from __future__ import annotations

import dataclasses
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from allocmark import text, workloads
from allocmark.allocators import lineage, prepare
from allocmark.allocators.selection import selected
from allocmark.answer import race, releases
from allocmark.defaults import DEFAULT_MAX_BLOCKS, DEFAULT_MIN_BLOCKS
from allocmark.errors import UserError
from allocmark.model import AllocatorSpec, AppRun, Params, Prepared, Verified, Workload
from allocmark.request import CampaignPlan, Note, Precision, Request
from allocmark.run import machine, plan, runas, suites
from allocmark.stats import fewblock
from allocmark.store import Store, owner, seal


class Selection(Protocol):
    """Which candidates a campaign compares, made of the allocators a request names."""

    @property
    def race(self) -> str:
        """The objective on which candidates are dropped each round ("": none)."""
        ...

    def candidates(
        self, specs: list[AllocatorSpec], explicit: bool, named: bool
    ) -> tuple[list[AllocatorSpec], bool]:
        """The candidates of `specs` (`named`: the user named them, not the suite),
        and whether they are explicit (an unusable one is then an error)."""
        ...

    def taken(self, prepared: Prepared, notes: list[Note]) -> Prepared:
        """The verified candidates kept for the race."""
        ...


@dataclass(frozen=True)
class AsNamed:
    """The allocators as named: each one a candidate, no race."""

    race: str = ""

    def candidates(
        self, specs: list[AllocatorSpec], explicit: bool, named: bool
    ) -> tuple[list[AllocatorSpec], bool]:
        return specs, explicit

    def taken(self, prepared: Prepared, notes: list[Note]) -> Prepared:
        return prepared


AS_NAMED = AsNamed()


@dataclass(frozen=True)
class Started:
    """A campaign stored and ready to run: its id, its plan, what it runs on."""

    cid: int
    campaign: CampaignPlan
    prepared: Prepared


@dataclass(frozen=True)
class Design:
    """A campaign as the request asks for it, before anything is built or run."""

    suite: suites.Suite
    rows: list[tuple[Workload, Params]]
    specs: list[AllocatorSpec]
    explicit: bool
    to_build: tuple[str, ...]  # of the specs, what the first use builds
    precision: Precision | None
    blocks: int


@dataclass(frozen=True)
class Dry:
    """A dry run's finding (`--dry-run`): the campaign that would run, nothing run."""

    suite: str
    allocators: tuple[str, ...]
    to_build: tuple[str, ...]  # of them, what the first use would build
    rows: int
    blocks: int
    runs: int  # measured runs of the first blocks


def design(req: Request, selection: Selection, notes: list[Note]) -> Design:
    """What `req` asks for, checked (suite, rows, allocators named, size), unbuilt."""
    suite, rows = _rows(req, notes)
    named = list(req.allocators) or (
        None if suite.allocators == ("all",) else list(suite.allocators)
    )
    specs, explicit = selection.candidates(
        *selected(named, req.catalogs, req.build), bool(req.allocators)
    )
    to_build = prepare.first_builds(specs)
    precision = (
        None
        if req.sample or req.record
        else _precision(req, suite, selection.race, _question(suite, specs))
    )
    n = planned_blocks(req.min_blocks or suite.blocks, precision)
    plan.check_size(len(specs), len(rows), n, req.yes)  # before building anything
    return Design(suite, rows, specs, explicit, to_build, precision, n)


def dry(req: Request, selection: Selection, notes: list[Note]) -> Dry:
    """The campaign `req` would run, checked as a real one is before it starts: its
    suite, rows and size; every allocator whose library is there verified by the probe
    (it serves malloc: the probe runs under the campaign's identity, as a real run's);
    every library and the database out of the program's reach; an existing database
    usable. Only what the first use builds is left unchecked (it is named)."""
    d = design(req, selection, notes)
    checked = prepare.checked(d.specs, d.explicit, plan.programs(d.rows))
    notes += unusable_notes(checked)
    runas.guard(req.db, [v.library for v in checked.usable if v.library])
    if req.db.exists():
        Store(req.db, create=False).close()  # a usable results database, opened read-only
    return Dry(
        d.suite.name,
        tuple(s.name for s in d.specs),
        d.to_build,
        len(d.rows),
        d.blocks,
        len(d.specs) * len(d.rows) * d.blocks,
    )


def planned(store: Store, req: Request, selection: Selection, notes: list[Note]) -> Started:
    """The campaign `req` asks for, stored and ready to execute, and its allocators."""
    d = design(req, selection, notes)
    suite, rows, precision, n = d.suite, d.rows, d.precision, d.blocks
    # Every decision of run/ is made: the allocators are built and verified in one go.
    prepared = prepare.prepared(
        d.specs, d.explicit, plan.programs(rows), lambda m: notes.append(Note("info", m))
    )
    notes += [Note("warning", f"skipped: {why}") for why in prepared.unbuilt]
    notes += unusable_notes(prepared)
    prepared = selection.taken(prepared, notes)
    # Every library a run loads out of the program's reach, as the store is (a library
    # it could write would be swapped under the stored sha256): refused before storing.
    runas.guard(req.db, [v.library for v in prepared.usable if v.library])
    if len(prepared.usable) < 2 and precision is not None:
        # One allocator: no ratio to decide, so no blocks to add: the blocks asked for.
        precision, n = None, req.min_blocks or suite.blocks
        notes.append(
            Note(
                "info",
                f"one allocator ({prepared.usable[0].spec.name}): nothing to compare; "
                f"{n} block{'s' if n != 1 else ''} of its runs",
            )
        )
    elif req.min_blocks is not None and n > req.min_blocks:
        notes.append(
            Note(
                "info",
                f"-n {req.min_blocks} raised to {n}: no verdict comes before {n} blocks (for "
                f"exactly {req.min_blocks}, and no verdicts, add --max-blocks {req.min_blocks})",
            )
        )
    used = tuple({w.name: w for w, _ in rows}.values())
    campaign = _campaign_plan(req, suite, used, n, precision, prepared)
    if len(prepared.usable) < 2:  # no difference to explain
        campaign = dataclasses.replace(campaign, why="off")
    runs = plan.generate(
        rows,
        prepared.usable,
        n,
        req.timeout_s or suite.timeout,
        campaign.seed,
        req.sample,
        req.memory_limit,
        warmup=req.warmup,
        app=AppRun(prepare=_prepare_argv(req.prepare), show_output=req.show_output),
        lines=_lines(prepared.usable) if precision and precision.question == "releases" else (),
        trace=str(req.record.absolute()) if req.record else "",
    )
    cid = store.new_campaign(
        suite.name,
        campaign.seed,
        machine.current(),
        sys.argv,
        prepared.usable,
        used,
        runs,
        prepared.baseline,
        campaign,
    )
    return Started(cid, campaign, prepared)


def _lines(usable: Sequence[Verified]) -> plan.Lines:
    """Release to release: the lines whose versions a block runs one after the other."""
    found = {v.spec.name: lin for v in usable if (lin := lineage.of(v.spec, v.version))}
    return releases.block_lines(found)


def _prepare_argv(command: str) -> tuple[str, ...]:
    """`try --prepare CMD`: run by the shell, as hyperfine runs it."""
    return ("/bin/sh", "-c", command) if command else ()


def _campaign_plan(
    req: Request,
    suite: suites.Suite,
    used: Sequence[Workload],
    n: int,
    precision: Precision | None,
    prepared: Prepared,
) -> CampaignPlan:
    """How the campaign runs, made once from the request: what every stage reads."""
    # The suite's stated time holds for the suite as it is: not with other allocators or blocks.
    as_sized = not (req.allocators or req.min_blocks or req.max_blocks or req.params)
    return CampaignPlan(
        seed=req.seed if req.seed is not None else suite.seed,
        min_blocks=n,
        plan_id=seal.new_plan_id(),
        sample=req.sample,
        memory_limit=req.memory_limit,
        created_by=owner.creator(),
        fixed_time=tuple((w.name, w.fixed_time) for w in used if w.fixed_time),
        calls=tuple((w.name, tuple(w.calls)) for w in used if w.kind == "native"),
        precision=precision,
        expected_s=suite.expected_s if as_sized else 0.0,
        stop_on_failure=bool(req.command) and not req.ignore_failure,
        why="off" if req.sample or req.record else req.why,
        left_out=prepared.left_out,
    )


def planned_blocks(n: int, precision: Precision | None) -> int:
    """The blocks a campaign plans: at least those a verdict needs (fewblock.MIN_BLOCKS:
    none is possible before) when it adds blocks until decided, so that its first
    verdicts never wait on the budget; else `n` as asked (a fixed number, a profile)."""
    if precision is None or precision.max_blocks < fewblock.MIN_BLOCKS:
        return n
    return max(n, fewblock.MIN_BLOCKS)


def _rows(req: Request, notes: list[Note]) -> tuple[suites.Suite, list[tuple[Workload, Params]]]:
    if req.command:
        notes += pymalloc(req.command, workloads.parse_env(req.env))
        suite = suites.adhoc_suite(
            [], req.min_blocks or DEFAULT_MIN_BLOCKS, req.timeout_s or 600, 1
        )
        return dataclasses.replace(suite, name="try"), [
            (workloads.command_workload(list(req.command), workloads.parse_env(req.env)), ())
        ]
    if req.suite is None and req.workloads:
        suite = suites.adhoc_suite(
            list(req.workloads),
            req.min_blocks or DEFAULT_MIN_BLOCKS,
            req.timeout_s or 600,
            req.seed or 1,
        )
    else:
        suite = suites.load_suite(req.suite or "quick")
        notes += [Note("warning", f"{suite.source}: {d}") for d in suite.deprecated]
        if req.workloads:
            suite = _only(suite, req.workloads)
    rows = plan.rows(suite, workloads.load_catalog(), plan.parse_overrides(list(req.params)))
    rows, skipped = plan.installed(rows, strict=bool(req.workloads))
    notes += [Note("warning", f"skipped: {s}") for s in skipped]
    notes += past_cores(rows, os.cpu_count() or 1)
    if not rows:  # an empty campaign would become the newest, "finished", report
        why = "; ".join(skipped) or "it has no [[runs]] entry"
        raise UserError(f"{suite.source}: nothing to run: {why}")
    return suite, rows


_PYTHON = re.compile(r"python[0-9.]*")


def pymalloc(command: Sequence[str], env: Sequence[tuple[str, str]]) -> list[Note]:
    """A note for a Python program left to pymalloc: Python serves its small objects
    from its own arenas, so the allocator under test sees a small part of its work."""
    words = [os.path.basename(w) for w in command[:2]]  # `python3 x.py`, `env python3 x.py`
    python = _PYTHON.fullmatch(words[0]) or (
        words[0] == "env" and len(words) > 1 and _PYTHON.fullmatch(words[1])
    )
    if not python or dict(env).get("PYTHONMALLOC") == "malloc":
        return []
    return [
        Note(
            "warning",
            f"{command[0]} runs under pymalloc: Python serves its small objects itself, so "
            "the allocator under test sees only its larger blocks and the arenas; to "
            "measure the allocator for all of them, add --env PYTHONMALLOC=malloc",
        )
    ]


def past_cores(rows: Sequence[tuple[Workload, Params]], cores: int) -> list[Note]:
    """A warning when rows run more threads than the machine has cores: there a run
    measures the scheduler's time-slicing as much as the allocator's scaling."""
    over: dict[int, list[str]] = {}
    for w, params in rows:
        threads = dict(params).get("threads")
        if isinstance(threads, int) and threads > cores and w.name not in over.get(threads, []):
            over.setdefault(threads, []).append(w.name)
    if not over:
        return []
    counts = ", ".join(f"threads={t} ({', '.join(names)})" for t, names in sorted(over.items()))
    return [
        Note(
            "warning",
            f"{counts}: more threads than this machine's {cores} cores; "
            "past the cores a run measures time-slicing, not the allocator's scaling "
            "(the scaling plots mark those points)",
        )
    ]


def _only(suite: suites.Suite, wanted: Sequence[str]) -> suites.Suite:
    entries = tuple(e for e in suite.entries if e.workload in wanted)
    have = [e.workload for e in suite.entries]
    if missing := [w for w in wanted if w not in have]:
        hint = text.suggest(missing[0], have)
        raise UserError(
            f"suite {suite.name} has no workload {', '.join(map(repr, missing))}{hint} "
            f"(its workloads: {', '.join(dict.fromkeys(have))}; `allocmark workloads` lists all)"
        )
    return dataclasses.replace(suite, entries=entries)


def _question(suite: suites.Suite, specs: Sequence[AllocatorSpec]) -> str:
    """The suite's question; revisions of a repository alone (`mine@git:R#A..B`, or
    `#v1,v2,v3`) ask release to release."""
    if len(specs) > 1 and all(s.git for s in specs):
        return "releases"
    return suite.question


def _precision(
    req: Request, suite: suites.Suite, race: str, question: str = "baseline"
) -> Precision:
    min_blocks = req.min_blocks or suite.blocks
    margin = req.margin if req.margin is not None else suite.margin
    budget = req.budget_s if req.budget_s is not None else suite.budget_s
    most = next(
        (m for m in (req.max_blocks, suite.max_blocks) if m is not None),
        max(DEFAULT_MAX_BLOCKS, min_blocks),
    )
    if req.max_blocks is None and req.min_blocks is not None and suite.max_blocks:
        most = max(most, min_blocks)  # -n above the suite's cap raises the cap with it
    if most < min_blocks:
        raise UserError(f"--max-blocks {most} is below -n/--blocks {min_blocks}")
    default = req.budget_s is None and not suite.budget_given and budget > 0
    return Precision(
        max_blocks=most,
        margin=margin,
        budget_s=budget,
        race=race,
        stretch=default,
        question=question,
    )


def unusable_notes(prepared: Prepared) -> list[Note]:
    out = [
        Note("warning", f"not used: {v.spec.name} is {v.status.value}: {v.reason}")
        for v in prepared.unusable
    ]
    # tune's candidates share their allocator's library: one warning for all of them
    partial: dict[tuple[str, str], list[str]] = {}
    for v in prepared.usable:
        if v.lacks:
            partial.setdefault((race.default_of(v.spec.name), v.reason), []).append(v.spec.name)
    out += [
        Note("warning", f"warning: {_who(names)} partial: {why}")
        for (_, why), names in partial.items()
    ]
    return out


def _who(names: Sequence[str]) -> str:
    more = len(names) - 1
    return f"{names[0]} and its {more} tuned variants are" if more else f"{names[0]} is"
