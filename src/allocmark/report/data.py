"""Everything a report shows, loaded from the store once; every format reads it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from allocmark import profile
from allocmark.answer import aging, analyze, composition, hardening, stored
from allocmark.errors import UserError
from allocmark.model import Params, RssSeries, StoredRun
from allocmark.report import glance
from allocmark.store import Store

VIEWS = ("summary", "runs", "profile")


@dataclass(frozen=True)
class ReportData:
    """One campaign's report: `view` says which part a format renders."""

    view: str  # "summary" (the comparison), "runs" (every run) or "profile"
    campaign: dict[str, Any]  # id, name, machine, plan, ...
    comparison: analyze.Comparison | None  # the summary view (and html)
    allocators: tuple[dict[str, Any], ...]  # provenance rows
    runs: tuple[StoredRun, ...]  # loaded for the runs view and html only
    profiles: tuple[profile.View, ...]  # the profile view
    # (allocator, workload, params, RSS over time) of each OK run: html only
    series: tuple[tuple[str, str, Params, RssSeries], ...] = ()
    aging: tuple[aging.Steady, ...] = ()  # phased workloads' steady state (summary view)
    made: tuple[composition.Made, ...] = ()  # what the RSS is made of (summary view)
    battery: hardening.Matrix | None = None  # the hardening battery's outcomes (summary view)


def load(
    store: Store,
    cid: int,
    view: str = "summary",
    speedup: bool = False,
    with_runs: bool = False,
    brief: bool = False,
    extras: bool = True,
    known: analyze.Comparison | None = None,
) -> ReportData:
    """The report of campaign `cid` as `view` needs it (with_runs: every run too;
    brief: a terminal's glance (see answer.stored.comparison), which leaves what the
    RSS is made of to --detail; extras: the tables beyond the comparison, which CSV has
    no place for: reading the allocator statistics of 100,000 runs takes most of a
    second; known: the summary view's comparison, when the caller has already made it)."""
    if view not in VIEWS:
        raise ValueError(f"view {view!r}")
    if view == "profile" and not store.campaign_plan(cid).sample:
        raise UserError(
            f"campaign {cid} was not profiled; use `allocmark profile` or `allocmark run --profile`"
        )
    comp = None
    if view == "summary":
        comp = known or stored.comparison(store, cid, speedup, brief)
    made = comp is not None and extras and not (brief and glance.shown(comp))
    return ReportData(
        view=view,
        campaign=store.campaign_info(cid),
        comparison=comp,
        allocators=tuple(store.allocator_rows(cid)),
        runs=tuple(store.runs(cid)) if view == "runs" or with_runs else (),
        profiles=tuple(stored.profiles(store, cid)) if view == "profile" else (),
        series=tuple(store.rss_series(cid)) if view == "summary" and with_runs else (),
        aging=tuple(aging.stored(store, cid, comp.allocators)) if comp and extras else (),
        made=tuple(composition.stored(store, cid, comp.allocators)) if comp and made else (),
        battery=hardening.stored(store, cid, comp.allocators) if comp and extras else None,
    )


def comparison(data: ReportData) -> analyze.Comparison:
    if data.comparison is None:
        raise ValueError("this report was loaded without its comparison")
    return data.comparison
