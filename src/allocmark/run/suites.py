"""Suites: the TOML files that say what a campaign runs (schemas/suite.py checks
them), loaded into `Suite`s; the built-in ones, and a suite made of workloads named."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from allocmark import schemas, stats, text, tomlfile, units
from allocmark.errors import UserError
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
    blocks: int  # every row gets at least
    timeout: float
    seed: int
    entries: tuple[SuiteEntry, ...]
    budget_s: float = DEFAULT_BUDGET_S  # more blocks while the campaign's time lasts
    budget_given: bool = False  # budget_s is the file's own, not DEFAULT_BUDGET_S
    margin: float = stats.DEFAULT_MARGIN  # ... until every ratio is decided: same within ±this
    max_blocks: int | None = None  # a row gets at most (None: the default)
    expected_s: float = 0.0  # how long it took as it is where it was sized (0: not said)
    question: str = "baseline"  # request.Precision.question
    deprecated: tuple[str, ...] = ()  # keys of the file under a former name, each a warning


def suites_dir() -> Path:
    return Path(str(resources.files("allocmark") / "catalog" / "suites"))


def load_suite(name_or_path: str) -> Suite:
    """A built-in suite by name, or a user's suite file by path."""
    path = Path(name_or_path)
    if not (path.suffix == ".toml" or path.exists()):
        path = suites_dir() / f"{name_or_path}.toml"
        if not path.exists():
            stems = sorted(p.stem for p in suites_dir().glob("*.toml"))
            raise UserError(
                f"unknown suite {name_or_path!r}{text.suggest(name_or_path, stems)}; "
                f"built-in suites: {', '.join(stems)} "
                "(or give the path of a suite .toml file)"
            )
    f = schemas.validate(SuiteFile, tomlfile.load(path), str(path))
    allocators = [f.allocators] if isinstance(f.allocators, str) else f.allocators
    return Suite(
        name=path.stem,
        source=str(path),
        description=f.description,
        allocators=tuple(allocators) or ("all",),
        blocks=next((n for n in (f.blocks, f.repetitions) if n is not None), DEFAULT_BLOCKS),
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
        max_blocks=f.max_blocks if f.max_blocks is not None else f.max_repetitions,
        expected_s=_parsed(f.expected, "expected", units.parse_duration, 0.0, str(path)),
        question=f.question,
        deprecated=_deprecated(f),
    )


# A suite's keys under the names an earlier allocmark gave them: still read (when the
# new one is absent), each said to be deprecated where the suite is used.
FORMER = {"repetitions": "blocks", "max_repetitions": "max_blocks", "target_ci": "margin"}
DEFAULT_BLOCKS = 3


def _deprecated(f: SuiteFile) -> tuple[str, ...]:
    return tuple(
        f"{old} is deprecated: it is {new} now"
        for old, new in FORMER.items()
        if getattr(f, old) is not None
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
    if hi > 2**63 - 1:  # the powers of two below it would plan runs no program can read
        raise UserError(
            f"the range {value!r} ends beyond a 64-bit integer (at most {2**63 - 1:,}); "
            "give a smaller high end"
        )
    if hi - lo < 8:
        return list(range(lo, hi + 1))
    picks = {lo, hi, cores} | {1 << k for k in range(hi.bit_length())}
    return sorted(v for v in picks if lo <= v <= hi)


def _entry(run: SuiteRun, file: str, loc: tuple[int | str, ...]) -> SuiteEntry:
    grid = []
    for key, value in run.params.items():
        try:
            expanded = _expand_range(value)
        except UserError as e:
            raise schemas.key_error(file, (*loc, "params", key), str(e)) from None
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


def adhoc_suite(names: Sequence[str], blocks: int, timeout: float, seed: int) -> Suite:
    """Workloads named with -w, each at its defaults."""
    return Suite(
        name="adhoc",
        source="command line",
        description="",
        allocators=("all",),
        blocks=blocks,
        timeout=timeout,
        seed=seed,
        entries=tuple(SuiteEntry(n, ()) for n in names),
    )
