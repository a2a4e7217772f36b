"""A stored campaign's comparison and profiles, read from the store once: the runs'
cells, the allocators' order, versions and lineages, what each lacks, the calls seen
in verification, the noise sentinel's tally, the machine's cores; analyze.py judges
them."""

from __future__ import annotations

import dataclasses

from allocmark import profile, stats
from allocmark.allocators import lineage
from allocmark.answer.analyze import (
    BRIEF_ROWS,
    METRIC_NAMES,
    METRICS,
    SECONDARY,
    SIGNAL_COLUMNS,
    SIGNAL_METRICS,
    Comparison,
    Noise,
    compare,
    margin_of,
)
from allocmark.labels import row_key
from allocmark.store import Store


def comparison(
    store: Store,
    cid: int,
    speedup: bool = False,
    brief: bool = False,
    finished: bool | None = None,
) -> Comparison:
    """The comparison of a stored campaign, baseline first, then the catalog order.
    `brief` (a terminal's): without the SECONDARY groups beyond BRIEF_ROWS rows; the
    runs' signals are with_signals()'. `finished`: as the campaign will be reported
    once it ends (its final looks), though its status does not say so yet."""
    c = store.campaign(cid)
    rows = store.allocators(cid)  # read once: the order, what each lacks, its version
    names = [r.name for r in rows]
    ordered = ([c.baseline] if c.baseline in names else []) + [n for n in names if n != c.baseline]
    plan = store.campaign_plan(cid)
    fixed = dict(plan.fixed_time)
    cells = store.grouped(cid, METRIC_NAMES, columns=("wall_s", "maxrss_kib", "rep"))
    left: tuple[str, ...] = ()
    if brief and len({(x.workload, x.params) for x in cells if x.role == "measure"}) > BRIEF_ROWS:
        left = tuple(
            m
            for m in SECONDARY
            if any(v is not None for x in cells for v in x.columns.get(METRICS[m], ()))
        )
    comp = compare(
        cells,
        ordered,
        c.baseline,
        speedup,
        margin_of(plan),
        fixed_time=fixed,
        groups=[m for m in METRICS if m not in left],
        sequential=plan.sequential,
        finished=c.status == "finished" if finished is None else finished,
    )
    lacks = {r.name: r.lacks for r in rows}
    specs = [s for s, _ in store.allocator_specs(cid)]
    stated = {r.name: r.version for r in rows}
    lineages = {s.name: lin for s in specs if (lin := lineage.of(s, stated.get(s.name)))}
    return dataclasses.replace(
        comp,
        noise=_noise(store, cid),
        lacks=lacks,
        calls=_calls(store, cid, comp, dict(plan.calls)),
        left_out=left,
        roles={s.name: s.role for s in specs if not s.recommendable},
        lineages=lineages,
        revisions={s.name: s.git for s in specs if s.git},
        cores=int(store.machine_facts(cid).get("cores") or 0),
        max_blocks=plan.precision.max_blocks if plan.sequential and plan.precision else 0,
    )


def with_signals(store: Store, cid: int, comp: Comparison) -> Comparison:
    """`comp` with what every run records to explain a difference (the whys')."""
    cells = store.sparse_grouped(cid, SIGNAL_METRICS, SIGNAL_COLUMNS)
    return dataclasses.replace(comp, signals=tuple(cells))


def _calls(
    store: Store, cid: int, comp: Comparison, declared: dict[str, tuple[str, ...]]
) -> dict[tuple[str, str], tuple[str, ...] | None]:
    """Per row: what libam_who saw the program call in its verification runs, or what
    a native workload declared when the campaign was planned; None when neither is known."""
    seen = store.verified_calls(cid)
    out: dict[tuple[str, str], tuple[str, ...] | None] = {}
    for row in comp.rows:
        key = row_key(row.workload, row.params)
        native = declared.get(row.workload)
        out[key] = seen[key] if key in seen else (tuple(native) if native is not None else None)
    return out


def _noise(store: Store, cid: int) -> Noise:
    runs, rerun, attempts = store.metric_tally(cid, "noise_reruns")
    _, apart, shares = store.metric_tally(cid, profile.COST_SHARE)
    calib = store.calibrations(cid)
    summary = stats.summarize(calib) if calib else None
    return Noise(rerun, runs, int(attempts), summary, apart, shares / apart if apart else 0.0)


def profiles(store: Store, cid: int) -> list[profile.View]:
    """The profiler's view of a stored campaign, baseline first."""
    c = store.campaign(cid)
    rows = store.allocators(cid)
    names = [r.name for r in rows]
    ordered = ([c.baseline] if c.baseline in names else []) + [n for n in names if n != c.baseline]
    # glibc has no preloaded library: the object that served its malloc is libc.
    libraries = {r.name: r.library or dict(r.served).get("malloc") for r in rows}
    return profile.views(store.profiles(cid), libraries, ordered, c.baseline)
