"""allocmark as a library: what the command line does, for programs and notebooks.

    from allocmark import api
    req = api.Request(workloads=("samethread",), allocators=("glibc", "jemalloc"))
    cid = api.run_to_end(req)                      # or: for event in api.run(req): ...
    for row in api.comparison(req.db, cid).rows:   # the report's data
        print(row.workload, row.cells["time_s"]["jemalloc"].ratio)

`run` opens a campaign and yields progress events while it runs and stores each
run; `resume` finishes an interrupted one. The CLI's verbs are thin layers over
these functions: they parse, call, and print.

Here: the catalogs' listings, light enough for `allocmark schema`; the campaign side
(campaigns.py: run, resume, the answers, the verbs' requests) is loaded on first use.

May import: report, verbs, run, executors, answer, store, profile, allocators,
workloads, native, stats, schemas, model, errors, defaults, tomlfile, units, text.
Never: cli.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from allocmark import schemas, workloads
from allocmark.model import AllocatorSpec, Verified, Workload
from allocmark.model import GitBuild as GitBuild
from allocmark.model import Note as Note  # the library's own types, for its callers
from allocmark.model import Request as Request

if TYPE_CHECKING:  # what __getattr__ hands out, for the type checker
    from allocmark.allocators.builder import Built
    from allocmark.api.campaigns import (
        EXECUTORS as EXECUTORS,
    )
    from allocmark.api.campaigns import (
        HARDEN_WORKLOAD as HARDEN_WORKLOAD,
    )
    from allocmark.api.campaigns import (
        BisectEnded as BisectEnded,
    )
    from allocmark.api.campaigns import (
        BisectEvent as BisectEvent,
    )
    from allocmark.api.campaigns import (
        BisectStarted as BisectStarted,
    )
    from allocmark.api.campaigns import (
        BisectStep as BisectStep,
    )
    from allocmark.api.campaigns import (
        Event as Event,
    )
    from allocmark.api.campaigns import (
        Finished as Finished,
    )
    from allocmark.api.campaigns import (
        Forecast as Forecast,
    )
    from allocmark.api.campaigns import (
        Planned as Planned,
    )
    from allocmark.api.campaigns import (
        Regression as Regression,
    )
    from allocmark.api.campaigns import (
        RoundDone as RoundDone,
    )
    from allocmark.api.campaigns import (
        RunDone as RunDone,
    )
    from allocmark.api.campaigns import (
        bisect as bisect,
    )
    from allocmark.api.campaigns import (
        command_lines as command_lines,
    )
    from allocmark.api.campaigns import (
        comparison as comparison,
    )
    from allocmark.api.campaigns import (
        cost_request as cost_request,
    )
    from allocmark.api.campaigns import (
        duration as duration,
    )
    from allocmark.api.campaigns import (
        harden_request as harden_request,
    )
    from allocmark.api.campaigns import (
        hardening_costs as hardening_costs,
    )
    from allocmark.api.campaigns import (
        race as race,
    )
    from allocmark.api.campaigns import (
        reader as reader,
    )
    from allocmark.api.campaigns import (
        regression as regression,
    )
    from allocmark.api.campaigns import (
        regressions as regressions,
    )
    from allocmark.api.campaigns import (
        resume as resume,
    )
    from allocmark.api.campaigns import (
        run as run,
    )
    from allocmark.api.campaigns import (
        run_to_end as run_to_end,
    )
    from allocmark.api.campaigns import (
        tuned as tuned,
    )


def __getattr__(name: str) -> Any:
    """The campaigns side (campaigns.py), loaded on first use."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module("allocmark.api.campaigns"), name)


# ---------------------------------------------------------------------------
# The catalogs, for the CLI's listings and `alloc build`
# ---------------------------------------------------------------------------
def verified(names: Sequence[str] | None, catalogs: Sequence[Path] = ()) -> list[Verified]:
    """The allocators `names` select (all the catalog's but the hidden, if None), each
    verified on this machine."""
    # Here, not at the top: `allocmark schema` needs none of the catalog's machinery.
    from allocmark import allocators

    if names:
        return allocators.verify_all(allocators.selected(names, catalogs)[0])
    return allocators.verify_all(
        [s for s in allocators.load_catalog(list(catalogs)) if not s.hidden]
    )


def to_build(
    names: Sequence[str], build_all: bool, catalogs: Sequence[Path] = ()
) -> list[AllocatorSpec]:
    """The entries `alloc build NAMES` (or --all) builds."""
    from allocmark import allocators

    return allocators.to_build(allocators.load_catalog(list(catalogs)), names, build_all)


def build(
    spec: AllocatorSpec, force: bool = False, say: Callable[[str], None] = lambda _: None
) -> tuple[Built, Verified]:
    """Build (or fetch) `spec` unless cached, then verify it; UserError if it fails."""
    from allocmark import allocators
    from allocmark.allocators import builder

    built = builder.build(spec, force=force, say=say)
    return built, allocators.verify(spec)


@dataclass(frozen=True)
class WorkloadLine:
    """A workload as `allocmark workloads` lists it."""

    workload: Workload
    missing: tuple[str, ...]  # an application's executables not installed
    install_hint: str
    params: tuple[str, ...]  # a line per parameter


def workload_lines() -> list[WorkloadLine]:
    return [
        WorkloadLine(
            w,
            tuple(workloads.missing(w)) if w.kind == "app" else (),
            workloads.install_hint(w) if w.kind == "app" else "",
            tuple(workloads.describe_params(w)),
        )
        for w in workloads.load_catalog().values()
    ]


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of a file allocmark reads or writes (`allocmark schema KIND`)."""
    return schemas.json_schema(kind)
