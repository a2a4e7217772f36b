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

May import: report, verbs, run, dispatchers, answer, store, profile, allocators,
workloads, native, stats, schemas, model, request, errors, defaults, tomlfile, units, text,
labels, files.
Never: cli.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from allocmark import schemas, workloads
from allocmark.errors import UserError

# the library's own types, for its callers: GitBuild, Note, Request
from allocmark.model import (
    AllocatorSpec,
    Campaign,
    GitBuild as GitBuild,
    StoredRun,
    Verified,
    Workload,
)
from allocmark.request import Note as Note, Request as Request

if TYPE_CHECKING:  # what __getattr__ hands out, for the type checker
    from allocmark.allocators.builder import Built
    from allocmark.answer.analyze import Comparison as Comparison
    from allocmark.answer.report import Report as Report
    from allocmark.api.campaigns import (
        EXECUTORS as EXECUTORS,
        HARDEN_WORKLOAD as HARDEN_WORKLOAD,
        BisectEnded as BisectEnded,
        BisectEvent as BisectEvent,
        BisectOutlook as BisectOutlook,
        BisectStarted as BisectStarted,
        BisectStep as BisectStep,
        Dry as Dry,
        Event as Event,
        Finished as Finished,
        Forecast as Forecast,
        Planned as Planned,
        Regression as Regression,
        RoundDone as RoundDone,
        RunDone as RunDone,
        bisect as bisect,
        command_lines as command_lines,
        comparison as comparison,
        cost_request as cost_request,
        duration as duration,
        harden_request as harden_request,
        race as race,
        regression as regression,
        resume as resume,
        run as run,
        run_to_end as run_to_end,
        tuned as tuned,
    )
    from allocmark.store import Store
    from allocmark.workloads.traces import Trace


def __getattr__(name: str) -> Any:
    """The campaigns side (campaigns.py), loaded on first use."""
    if name.startswith("__"):
        raise AttributeError(name)
    return getattr(importlib.import_module("allocmark.api.campaigns"), name)


# ---------------------------------------------------------------------------
# The catalogs, for the CLI's listings and `alloc build`
# ---------------------------------------------------------------------------
def reader(db: Path) -> Store:
    """The database at `db` opened for a report: never created, never changed. Here,
    not with the campaigns side: a report loads no run stage."""
    from allocmark.store import Store

    return Store(db, create=False)


def report(
    db: Path,
    campaign_id: int | None = None,
    view: str = "summary",
    speedup: bool = False,
    detail: bool = True,
    needs: tuple[str, ...] = ("extras", "findings"),
) -> Report:
    """The report of a stored campaign (the newest when `campaign_id` is None), read
    once: the value every format draws (answer/report.py). `detail` False: a terminal's
    glance (a brief comparison; what the RSS is made of is left to --detail where the
    glance shows); `needs`: what the format draws beyond the view ("runs", "series",
    "extras", "findings": answer.report.Wanted)."""
    from allocmark.answer import report as reading

    store = reader(db)
    cid = store.campaign(campaign_id).id
    wanted = reading.Wanted(
        not detail,
        "runs" in needs,
        "series" in needs,
        "extras" in needs,
        made=detail,
        findings="findings" in needs,
    )
    return reading.load(store, cid, view, speedup, wanted)


def metric_key(word: str) -> tuple[str, str]:
    """The metric group `--metric word` names in every verb, and the deprecation line
    of an old spelling ("": none)."""
    from allocmark import labels

    return labels.metric_key(word)


@dataclass(frozen=True)
class Recording:
    """What `allocmark record` made: the recorded run as stored, and its trace (None:
    none was made, the run's status and detail say why)."""

    run: StoredRun
    trace: Trace | None


def trace(path: Path) -> Trace:
    """The trace at `path`, checked (workloads/traces.py): a UserError if it is not one."""
    from allocmark.workloads import traces

    return traces.read(path)


def recording(db: Path, campaign_id: int) -> Recording:
    """The recorded run of a `record` campaign, and the trace it wrote."""
    measured = [r for r in reader(db).runs(campaign_id) if r.role == "measure"]
    if not measured:
        raise UserError(f"campaign {campaign_id} in {db} has no recorded run")
    run = measured[-1]
    path = run.labels.get("trace")
    return Recording(run, trace(Path(path)) if path else None)


def unfinished(db: Path) -> Campaign:
    """The campaign `run --resume` would finish (StoreError if none): its id, name and
    runs done of planned."""
    return reader(db).campaign(unfinished=True)


def failures(comp: Comparison) -> list[str]:
    """The cells whose runs failed (answer/report.py's `failed`, as Report.failed holds
    them): each makes a verb's exit status 1."""
    from allocmark.answer import report as reading

    return list(reading.failed(comp))


def verified(names: Sequence[str] | None, catalogs: Sequence[Path] = ()) -> list[Verified]:
    """The allocators `names` select (all the catalog's but the hidden, if None), each
    verified on this machine."""
    # Here, not at the top: `allocmark schema` needs none of the catalog's machinery.
    from allocmark import allocators
    from allocmark.native import identity

    specs = (
        allocators.selected(names, catalogs)[0]
        if names
        else [s for s in allocators.load_catalog(list(catalogs)) if not s.hidden]
    )
    with identity.campaign():  # the probes load each library: its constructors run
        return allocators.verify_all(specs)


def to_build(
    names: Sequence[str], build_all: bool, catalogs: Sequence[Path] = ()
) -> list[AllocatorSpec]:
    """The entries `alloc build NAMES` (or --all) builds."""
    from allocmark import allocators

    return allocators.to_build(allocators.load_catalog(list(catalogs)), names, build_all)


def build(
    spec: AllocatorSpec, force: bool = False, say: Callable[[str], None] = lambda _: None
) -> tuple[Built, Verified]:
    """Build (or fetch) `spec` unless cached, then verify it; UserError if it fails. The
    build and the probe run as an identity of their own (native/identity.py), let go
    when both are done."""
    from allocmark import allocators
    from allocmark.allocators import builder
    from allocmark.native import identity

    with identity.campaign():
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
    if kind == "summary":  # a report's JSON export: drawn from the report value itself
        from allocmark.report import summary

        return summary.json_schema()
    if kind not in schemas.KINDS:
        raise UserError(f"schema {kind!r}: choose {', '.join((*schemas.KINDS, 'summary'))}")
    return schemas.json_schema(kind)
