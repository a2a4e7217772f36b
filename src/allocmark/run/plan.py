"""The plan: a suite's rows (workload x parameters) x allocators x blocks, as
paired, random-order blocks of `RunSpec`s; the checks a plan must pass."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import shutil
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from allocmark import native, text, workloads
from allocmark.defaults import CONFIRM_RUNS
from allocmark.errors import UserError
from allocmark.model import AppRun, Params, RunSpec, Verified, Workload
from allocmark.run.suites import Suite


def parse_overrides(items: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """`-p threads=1,2,4` -> {"threads": ("1", "2", "4")}."""
    out: dict[str, tuple[str, ...]] = {}
    for item in items:
        key, eq, values = item.partition("=")
        name, listed = key.strip(), tuple(v.strip() for v in values.split(","))
        if not eq or not name or "" in listed:
            raise UserError(f"-p {item!r}: expected NAME=VALUE[,VALUE...], e.g. -p threads=1,2,4")
        if name in out:  # the last one winning is a silent surprise
            raise UserError(
                f"-p {name} is given twice ({name}={','.join(out[name])} and {item}); "
                f"give its values once: -p {name}={','.join((*out[name], *listed))}"
            )
        out[name] = listed
    return out


def rows(
    suite: Suite, catalog: Mapping[str, Workload], overrides: Mapping[str, tuple[str, ...]]
) -> list[tuple[Workload, Params]]:
    """Every (workload, parameter set) of the suite, overrides applied, duplicates dropped."""
    _check_overrides(suite, catalog, overrides)
    out: dict[tuple[str, Params], tuple[Workload, Params]] = {}
    grids: list[tuple[Workload, dict[str, Any]]] = []
    for entry in suite.entries:
        w = catalog.get(entry.workload)
        if w is None:
            raise UserError(
                f"{suite.source}: unknown workload {entry.workload!r}"
                f"{text.suggest(entry.workload, catalog)}; known: {', '.join(catalog)}"
            )
        grids.append(
            (
                w,
                dict(entry.grid)
                | {k: v for k, v in overrides.items() if k in {p.name for p in w.params}},
            )
        )
    _check_row_count(suite, grids)
    for w, grid in grids:
        for combo in itertools.product(*grid.values()):
            params = workloads.resolve_params(w, dict(zip(grid, combo, strict=True)), suite.source)
            out.setdefault((w.name, params), (w, params))
    return list(out.values())


def planned_params(params: Params) -> Params:
    """A row's parameters as planned: without the `host` a cluster's report adds."""
    return tuple(p for p in params if p[0] != "host")


SAMPLE_ENV = "AM_PROF_SAMPLE"  # the profiler shim's 1-in-N sampling
MAX_ROWS = 100_000  # rows (workload x parameters) of one campaign
MAX_RUNS = 1_000_000  # runs of one campaign's first blocks, even with --yes


def _check_row_count(suite: Suite, grids: Sequence[tuple[Workload, dict[str, Any]]]) -> None:
    """Counted before the grids are expanded: a few ranges can multiply to billions."""
    count = sum(math.prod(len(v) for v in grid.values()) for _, grid in grids)
    if count > MAX_ROWS:
        widest = max(grids, key=lambda g: math.prod(len(v) for v in g[1].values()))
        raise UserError(
            f"{suite.source}: the suite expands to {count:,} rows (at most "
            f"{MAX_ROWS:,}); {widest[0].name} alone has "
            f"{' x '.join(f'{len(v)} {k}' for k, v in widest[1].items())}: narrow its ranges"
        )


def check_size(allocators: int, rows: int, blocks: int, confirmed: bool) -> None:
    """Refuse a campaign too large to be what the user meant, before building it."""
    runs = allocators * rows * blocks
    shape = f"{allocators} allocators x {rows} rows x {blocks} blocks"
    if runs > MAX_RUNS:
        raise UserError(
            f"the plan has {runs:,} runs ({shape}); at most {MAX_RUNS:,} fit one campaign: "
            "fewer blocks, parameter values or allocators, or several campaigns"
        )
    if runs > CONFIRM_RUNS and not confirmed:
        raise UserError(
            f"the plan has {runs:,} runs ({shape}) before any added for precision; "
            "add --yes to start it anyway"
        )


def installed(
    row_list: Sequence[tuple[Workload, Params]], strict: bool
) -> tuple[list[tuple[Workload, Params]], list[str]]:
    """The rows whose application is installed, and a note for each that is not.
    With `strict` (the user named the workload) a missing one is an error."""
    keep, notes = [], {}
    for w, params in row_list:
        if lacking := workloads.missing(w):
            note = f"{w.name}: {', '.join(lacking)} not installed; {workloads.install_hint(w)}"
            if strict:
                raise UserError(f"workload {note}")
            notes[w.name] = note
        else:
            keep.append((w, params))
    if not keep and row_list:
        raise UserError(f"nothing to run: {'; '.join(notes.values())}")
    return keep, list(notes.values())


def programs(row_list: Sequence[tuple[Workload, Params]]) -> list[str]:
    """The files the rows run, where a row runs a program of this system (what an
    entry of another glibc is checked against, allocators/prepare.py). allocmark's own
    programs need no check: the probe, built as they are, verifies the entry."""
    found = (
        shutil.which(workloads.expand(w, params)[0]) for w, params in row_list if w.kind != "native"
    )
    return list(dict.fromkeys(p for p in found if p))


def _check_overrides(
    suite: Suite, catalog: Mapping[str, Workload], overrides: Mapping[str, tuple[str, ...]]
) -> None:
    names = {
        p.name for e in suite.entries if e.workload in catalog for p in catalog[e.workload].params
    }
    for key in overrides:
        if key not in names:
            raise UserError(
                f"-p {key}: no selected workload has this parameter{text.suggest(key, names)}; "
                f"its parameters: {', '.join(sorted(names)) or 'none'}"
            )


PLAIN = AppRun()  # what a run of the user's command carries without --prepare


def generate(
    row_list: Sequence[tuple[Workload, Params]],
    allocators: Sequence[Verified],
    blocks: int,
    timeout: float,
    seed: int,
    sample: int = 0,
    memory_limit: int = 0,
    warmup: int = 0,
    app: AppRun = PLAIN,
    lines: Lines = (),
    trace: str = "",
) -> Iterator[RunSpec]:
    """Baselines and verification runs first, then `warmup` unmeasured runs of each
    allocator and row; then each block visits every row, allocators shuffled
    per row (`lines`: a line's versions one after the other, `ordered`). With
    `sample` = N > 0, the measured runs go under the profiler, timing 1 call in N, and
    verify themselves (baselines never do); with `trace`, the measured run is recorded
    and verifies itself, its trace written there. `app`: what the runs of the
    user's command carry (try's --prepare and --show-output).
    Runs are made one at a time as the store takes them: a run spec is a few KiB,
    a plan can have a million."""
    first = _baselines(row_list, allocators, timeout)
    if not sample and not trace:
        first += _verifications(row_list, allocators, timeout, len(first))
    first += _warmups(row_list, allocators, timeout, len(first), warmup)
    sampled = ((SAMPLE_ENV, str(sample)),)
    measured = _measured(row_list, allocators, blocks, timeout, seed, len(first), lines)
    for r in itertools.chain(first, measured):
        if sample and r.role == "measure":
            r = dataclasses.replace(r, profile=True, env=r.env + sampled)
        if trace and r.role == "measure":
            r = dataclasses.replace(r, trace=trace)
        if r.workload == workloads.COMMAND and r.app != app:
            r = dataclasses.replace(r, app=app)
        yield dataclasses.replace(r, memory_limit=memory_limit) if memory_limit else r


def _warmups(
    row_list: Sequence[tuple[Workload, Params]],
    allocators: Sequence[Verified],
    timeout: float,
    first_seq: int,
    count: int,
) -> list[RunSpec]:
    """`count` runs of every allocator and row before the measured blocks (hyperfine's
    --warmup): stored with their role, never measured."""
    runs = itertools.product(range(count), row_list, allocators)
    return [
        dataclasses.replace(_spec(first_seq + i, w, p, a, rep, timeout), role="warmup")
        for i, (rep, (w, p), a) in enumerate(runs)
    ]


def _verifications(
    row_list: Sequence[tuple[Workload, Params]],
    allocators: Sequence[Verified],
    timeout: float,
    first_seq: int,
) -> list[RunSpec]:
    """One run per allocator and application or command row with libam_who in every
    process: it checks what serves malloc, so that the measured runs need no verifier
    (whose pages would count in their peak RSS). It also warms the caches."""
    checked = [(w, p) for w, p in row_list if w.kind != "native"]
    return [
        dataclasses.replace(_spec(first_seq + i, w, p, a, 0, timeout), role="verify")
        for i, ((w, p), a) in enumerate(itertools.product(checked, allocators))
    ]


def _baselines(
    row_list: Sequence[tuple[Workload, Params]], allocators: Sequence[Verified], timeout: float
) -> list[RunSpec]:
    """One run per allocator and native program doing nothing: its RSS is the baseline
    of the memory overhead ratio."""
    natives = {w.name: w for w, _ in row_list if w.kind == "native"}
    pairs = itertools.product(allocators, natives.values())
    return [_baseline(i, w, a, timeout) for i, (a, w) in enumerate(pairs)]


def _baseline(seq: int, w: Workload, a: Verified, timeout: float) -> RunSpec:
    return RunSpec(
        seq=seq,
        allocator=a.spec.name,
        workload=w.name,
        params=(),
        rep=0,
        argv=(str(native.program(w.program)), "--baseline", "1"),
        env=tuple(dict(w.env).items()) + tuple(a.child_env().items()),
        timeout=timeout,
        expect_malloc=a.malloc_object,
        result_fd=True,
        role="baseline",
    )


def _measured(
    row_list: Sequence[tuple[Workload, Params]],
    allocators: Sequence[Verified],
    blocks: int,
    timeout: float,
    seed: int,
    first_seq: int,
    lines: Lines = (),
) -> Iterator[RunSpec]:
    rng = random.Random(seed)
    seq = first_seq
    by_name = {a.spec.name: a for a in allocators}
    for rep in range(blocks):
        groups = list(row_list)
        rng.shuffle(groups)
        for w, params in groups:
            for name in ordered([a.spec.name for a in allocators], lines, rng):
                yield _spec(seq, w, params, by_name[name], rep, timeout)
                seq += 1


Lines = tuple[tuple[str, ...], ...]  # versions of a line, oldest first (answer/releases)


def ordered(names: Sequence[str], lines: Lines, rng: random.Random) -> list[str]:
    """A block's allocators in random order; release to release (`lines`), each line's
    versions one after the other, oldest or newest first at random (the order's own
    effect averages out), lines in random order: a change's two runs a moment apart
    share more of this machine's drift (a block's log ratio varied 0.16 a run apart
    against 0.25 on average on xthread, 0.10 against 0.12 on ruby: versions suite,
    2026-11-26)."""
    if not lines:
        out = list(names)
        rng.shuffle(out)
        return out
    left = set(names)
    chains = []
    for line in lines:
        chain = [a for a in line if a in left]
        left -= set(chain)
        chains.append(chain)
    chains = [c for c in chains if c] + [[a] for a in names if a in left]
    rng.shuffle(chains)
    return [a for chain in chains for a in (reversed(chain) if rng.random() < 0.5 else chain)]


def differs(spec: RunSpec, catalog: Mapping[str, Workload], a: Verified) -> str | None:
    """How a stored run of a catalog workload differs from what the catalog makes of
    its row today (None: it does not), so that a resume never runs a command the
    database alone decided. The user's own command is checked against the campaign's
    (`catalog` holds it as workload "command"); a workload `catalog` lacks, like one
    that differs."""
    w = catalog.get(spec.workload)
    if w is None:
        return (
            f"run {spec.seq} names workload {spec.workload!r}, which neither the catalog "
            "nor the campaign has"
        )
    made = (
        _baseline(spec.seq, w, a, spec.timeout)
        if spec.role == "baseline"
        else _spec(spec.seq, w, spec.params, a, spec.rep, spec.timeout)
    )
    # The profiler's sampling rate is a setting of the run, not part of its command.
    stored = dataclasses.replace(spec, env=tuple(kv for kv in spec.env if kv[0] != SAMPLE_ENV))
    if w.kind == workloads.COMMAND:  # the user's --prepare and --show-output, signed with it
        shown = dataclasses.replace(
            made.app, prepare=stored.app.prepare, show_output=stored.app.show_output
        )
        made = dataclasses.replace(made, app=shown)
    for field in ("argv", "env", "app", "expect_malloc", "result_fd"):
        if (old := getattr(stored, field)) != (new := getattr(made, field)):
            where = f"run {spec.seq} ({spec.workload} on {spec.allocator})"
            return f"{where} would use {field} {old!r}, not the catalog's {new!r}"
    return None


def mixed(specs: Sequence[RunSpec]) -> str | None:
    """Where the runs of one cell (allocator, workload, parameters and role) do not all
    share one command: every block of a cell runs the same thing, so a plan that
    differs within a cell was changed after it was made."""
    seen: dict[tuple[str, str, Params, str], RunSpec] = {}
    for s in specs:
        first = seen.setdefault((s.allocator, s.workload, s.params, s.role), s)
        for field in ("argv", "env", "app", "expect_malloc", "result_fd", "memory_limit"):
            if getattr(first, field) != getattr(s, field):
                return (
                    f"runs {first.seq} and {s.seq} of one cell ({s.workload} on "
                    f"{s.allocator}) differ in {field}"
                )
    return None


def _spec(seq: int, w: Workload, params: Params, a: Verified, rep: int, timeout: float) -> RunSpec:
    # Every kind is verified: native workloads report their malloc themselves,
    # applications and commands through libam_who (see execute.py).
    return RunSpec(
        seq=seq,
        allocator=a.spec.name,
        workload=w.name,
        params=params,
        rep=rep,
        argv=workloads.expand(w, params),
        env=workloads.expand_env(w, params) + tuple(a.child_env().items()),
        timeout=timeout,
        expect_malloc=a.malloc_object,
        result_fd=w.kind == "native",
        app=workloads.expand_app(w, params) if w.kind == "app" else AppRun(),
    )
