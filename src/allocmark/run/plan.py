"""Suites (TOML) and the plan: allocators x workloads x parameters x repetitions."""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import random
import re
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from allocmark import native, schemas, stats, tomlfile, units, workloads
from allocmark.allocators import debian
from allocmark.defaults import CONFIRM_RUNS
from allocmark.errors import UserError
from allocmark.model import AppRun, Params, RunSpec, Verified, Workload
from allocmark.schemas.suite import SuiteFile, SuiteRun

Grid = tuple[tuple[str, tuple[int | str, ...]], ...]
DEFAULT_BUDGET_S = 120.0  # seconds a campaign may spend adding blocks


@dataclass(frozen=True)
class SuiteEntry:
    workload: str
    grid: Grid  # parameter -> values; lists expand to their cartesian product


@dataclass(frozen=True)
class Suite:
    name: str
    source: str  # file it came from, for error messages
    description: str
    allocators: tuple[str, ...]  # ("all",) = every usable catalog entry and variant
    repetitions: int  # blocks every cell gets at least
    timeout: float
    seed: int
    entries: tuple[SuiteEntry, ...]
    budget_s: float = DEFAULT_BUDGET_S  # more blocks while the campaign's time lasts
    budget_given: bool = False  # budget_s is the file's own, not DEFAULT_BUDGET_S
    margin: float = stats.DEFAULT_MARGIN  # ... until every ratio is decided: same within ±this
    max_repetitions: int | None = None  # blocks a cell gets at most (None: the default)
    expected_s: float = 0.0  # how long it took as it is where it was sized (0: not said)


def suites_dir() -> Path:
    return Path(str(resources.files("allocmark") / "catalog" / "suites"))


def load_suite(name_or_path: str) -> Suite:
    """A built-in suite by name, or a user's suite file by path."""
    path = Path(name_or_path)
    if not (path.suffix == ".toml" or path.exists()):
        path = suites_dir() / f"{name_or_path}.toml"
        if not path.exists():
            known = ", ".join(sorted(p.stem for p in suites_dir().glob("*.toml")))
            raise UserError(
                f"unknown suite {name_or_path!r}; built-in suites: {known} "
                "(or give the path of a suite .toml file)"
            )
    f = schemas.validate(SuiteFile, tomlfile.load(path), str(path))
    allocators = [f.allocators] if isinstance(f.allocators, str) else f.allocators
    return Suite(
        name=path.stem,
        source=str(path),
        description=f.description,
        allocators=tuple(allocators) or ("all",),
        repetitions=f.repetitions,
        timeout=f.timeout,
        seed=f.seed,
        entries=tuple(_entry(r, str(path), ("runs", i)) for i, r in enumerate(f.runs)),
        budget_s=_parsed(f.budget, "budget", units.parse_duration, DEFAULT_BUDGET_S, str(path)),
        budget_given=bool(f.budget),
        margin=_parsed(
            f.margin or f.target_ci,
            "margin" if f.margin else "target_ci",
            units.parse_fraction,
            stats.DEFAULT_MARGIN,
            str(path),
        ),
        max_repetitions=f.max_repetitions,
        expected_s=_parsed(f.expected, "expected", units.parse_duration, 0.0, str(path)),
    )


def _parsed(
    text: str | None, key: str, parse: Callable[[str, str], float], default: float, file: str
) -> float:
    if not text:
        return default
    try:
        return parse(text, key)
    except UserError as e:
        raise schemas.key_error(file, (key,), str(e)) from None


_RANGE = re.compile(r"(\d+)\.\.(\d+)(\*cores)?")


def _expand_range(value: object) -> object:
    """ "1..4" -> [1, 2, 3, 4]; "1..2*cores" scales with this machine. Wide ranges
    keep the powers of two, the cores and the end."""
    if not isinstance(value, str) or not (m := _RANGE.fullmatch(value.replace(" ", ""))):
        return value
    cores = os.cpu_count() or 1
    lo, hi = int(m.group(1)), int(m.group(2)) * (cores if m.group(3) else 1)
    if hi - lo < 8:
        return list(range(lo, hi + 1))
    picks = {lo, hi, cores} | {1 << k for k in range(hi.bit_length())}
    return sorted(v for v in picks if lo <= v <= hi)


def _entry(run: SuiteRun, file: str, loc: tuple[int | str, ...]) -> SuiteEntry:
    grid = []
    for key, value in run.params.items():
        expanded = _expand_range(value)
        values = expanded if isinstance(expanded, list) else [expanded]
        if not values:
            why = (
                f"the range {value!r} is empty: write it low..high"
                if isinstance(value, str)
                else "an empty list runs nothing"
            )
            raise schemas.key_error(file, (*loc, "params", key), why)
        grid.append((key, tuple(values)))
    return SuiteEntry(workload=run.workload, grid=tuple(grid))


def adhoc_suite(names: Sequence[str], repetitions: int, timeout: float, seed: int) -> Suite:
    """Workloads named with -w, each at its defaults."""
    return Suite(
        name="adhoc",
        source="command line",
        description="",
        allocators=("all",),
        repetitions=repetitions,
        timeout=timeout,
        seed=seed,
        entries=tuple(SuiteEntry(n, ()) for n in names),
    )


def parse_overrides(items: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """`-p threads=1,2,4` -> {"threads": ("1", "2", "4")}."""
    out: dict[str, tuple[str, ...]] = {}
    for item in items:
        key, eq, values = item.partition("=")
        if not eq or not key or not values:
            raise UserError(f"-p {item!r}: expected NAME=VALUE[,VALUE...], e.g. -p threads=1,2,4")
        out[key.strip()] = tuple(v.strip() for v in values.split(","))
    return out


# ---------------------------------------------------------------------------
# Planning
# ---------------------------------------------------------------------------
def cells(
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
                f"{suite.source}: unknown workload {entry.workload!r}; known: {', '.join(catalog)}"
            )
        grids.append(
            (
                w,
                dict(entry.grid)
                | {k: v for k, v in overrides.items() if k in {p.name for p in w.params}},
            )
        )
    _check_cell_count(suite, grids)
    for w, grid in grids:
        for combo in itertools.product(*grid.values()):
            params = workloads.resolve_params(w, dict(zip(grid, combo, strict=True)), suite.source)
            out.setdefault((w.name, params), (w, params))
    return list(out.values())


def planned_params(params: Params) -> Params:
    """A cell's parameters as planned: without the `host` a cluster's report adds."""
    return tuple(p for p in params if p[0] != "host")


SAMPLE_ENV = "AM_PROF_SAMPLE"  # the profiler shim's 1-in-N sampling
MAX_CELLS = 100_000  # (workload, parameters) cells of one campaign
MAX_RUNS = 1_000_000  # runs of one campaign's first blocks, even with --yes


def _check_cell_count(suite: Suite, grids: Sequence[tuple[Workload, dict[str, Any]]]) -> None:
    """Counted before the grids are expanded: a few ranges can multiply to billions."""
    count = sum(math.prod(len(v) for v in grid.values()) for _, grid in grids)
    if count > MAX_CELLS:
        widest = max(grids, key=lambda g: math.prod(len(v) for v in g[1].values()))
        raise UserError(
            f"{suite.source}: the suite expands to {count:,} parameter cells (at most "
            f"{MAX_CELLS:,}); {widest[0].name} alone has "
            f"{' x '.join(f'{len(v)} {k}' for k, v in widest[1].items())}: narrow its ranges"
        )


def check_size(allocators: int, cells: int, blocks: int, confirmed: bool) -> None:
    """Refuse a campaign too large to be what the user meant, before building it."""
    runs = allocators * cells * blocks
    shape = f"{allocators} allocators x {cells} cells x {blocks} blocks"
    if runs > MAX_RUNS:
        raise UserError(
            f"the plan has {runs:,} runs ({shape}); at most {MAX_RUNS:,} fit one campaign: "
            "fewer repetitions, parameter values or allocators, or several campaigns"
        )
    if runs > CONFIRM_RUNS and not confirmed:
        raise UserError(
            f"the plan has {runs:,} runs ({shape}) before any added for precision; "
            "add --yes to start it anyway"
        )


def installed(
    cell_list: Sequence[tuple[Workload, Params]], strict: bool
) -> tuple[list[tuple[Workload, Params]], list[str]]:
    """The cells whose application is installed, and a note for each that is not.
    With `strict` (the user named the workload) a missing one is an error."""
    keep, notes = [], {}
    for w, params in cell_list:
        if lacking := workloads.missing(w):
            note = f"{w.name}: {', '.join(lacking)} not installed; {workloads.install_hint(w)}"
            if strict:
                raise UserError(f"workload {note}")
            notes[w.name] = note
        else:
            keep.append((w, params))
    if not keep and cell_list:
        raise UserError(f"nothing to run: {'; '.join(notes.values())}")
    return keep, list(notes.values())


def check_glibc(cell_list: Sequence[tuple[Workload, Params]], usable: Sequence[Verified]) -> None:
    """A program built for a newer glibc than an entry's (glibc@2.31) cannot run under
    it: refused before any run, naming the file that needs what. allocmark's own
    programs need no check: the probe, built as they are, verified the entry."""
    for v in usable:
        if not (glibc := v.spec.glibc_version):
            continue
        for w, params in cell_list:
            program = shutil.which(workloads.expand(w, params)[0]) if w.kind != "native" else None
            if program and (why := debian.refusal(program, v.spec.name, glibc)):
                raise UserError(why)


def _check_overrides(
    suite: Suite, catalog: Mapping[str, Workload], overrides: Mapping[str, tuple[str, ...]]
) -> None:
    names = {
        p.name for e in suite.entries if e.workload in catalog for p in catalog[e.workload].params
    }
    for key in overrides:
        if key not in names:
            raise UserError(
                f"-p {key}: no selected workload has this parameter "
                f"(parameters: {', '.join(sorted(names)) or 'none'})"
            )


def build(
    cell_list: Sequence[tuple[Workload, Params]],
    allocators: Sequence[Verified],
    repetitions: int,
    timeout: float,
    seed: int,
    sample: int = 0,
    memory_limit: int = 0,
) -> list[RunSpec]:
    """The whole plan as a list (see `generate`)."""
    return list(generate(cell_list, allocators, repetitions, timeout, seed, sample, memory_limit))


def generate(
    cell_list: Sequence[tuple[Workload, Params]],
    allocators: Sequence[Verified],
    repetitions: int,
    timeout: float,
    seed: int,
    sample: int = 0,
    memory_limit: int = 0,
) -> Iterator[RunSpec]:
    """Baselines and verification runs first; then each repetition visits every cell,
    allocators shuffled per cell. With `sample` = N > 0, the measured runs go under
    the profiler, timing 1 call in N, and verify themselves (baselines never do).
    Runs are made one at a time as the store takes them: a run spec is a few KiB,
    a plan can have a million."""
    first = _baselines(cell_list, allocators, timeout)
    if not sample:
        first += _verifications(cell_list, allocators, timeout, len(first))
    for r in first:
        yield dataclasses.replace(r, memory_limit=memory_limit) if memory_limit else r
    sampled = ((SAMPLE_ENV, str(sample)),)
    for r in _measured(cell_list, allocators, repetitions, timeout, seed, len(first)):
        if sample:
            r = dataclasses.replace(r, profile=True, env=r.env + sampled)
        yield dataclasses.replace(r, memory_limit=memory_limit) if memory_limit else r


def _verifications(
    cell_list: Sequence[tuple[Workload, Params]],
    allocators: Sequence[Verified],
    timeout: float,
    first_seq: int,
) -> list[RunSpec]:
    """One run per allocator and application or command cell with libam_who in every
    process: it checks what serves malloc, so that the measured runs need no verifier
    (whose pages would count in their peak RSS). It also warms the caches."""
    cells = [(w, p) for w, p in cell_list if w.kind != "native"]
    return [
        dataclasses.replace(_spec(first_seq + i, w, p, a, 0, timeout), role="verify")
        for i, ((w, p), a) in enumerate(itertools.product(cells, allocators))
    ]


def _baselines(
    cell_list: Sequence[tuple[Workload, Params]], allocators: Sequence[Verified], timeout: float
) -> list[RunSpec]:
    """One run per allocator and native program doing nothing: its RSS is the baseline
    of the memory overhead ratio."""
    natives = {w.name: w for w, _ in cell_list if w.kind == "native"}
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
    cell_list: Sequence[tuple[Workload, Params]],
    allocators: Sequence[Verified],
    repetitions: int,
    timeout: float,
    seed: int,
    first_seq: int,
) -> Iterator[RunSpec]:
    rng = random.Random(seed)
    seq = first_seq
    for rep in range(repetitions):
        groups = list(cell_list)
        rng.shuffle(groups)
        for w, params in groups:
            allocs = list(allocators)
            rng.shuffle(allocs)
            for a in allocs:
                yield _spec(seq, w, params, a, rep, timeout)
                seq += 1


def differs(spec: RunSpec, catalog: Mapping[str, Workload], a: Verified) -> str | None:
    """How a stored run of a catalog workload differs from what the catalog makes of
    its cell today (None: it does not), so that a resume never runs a command the
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
