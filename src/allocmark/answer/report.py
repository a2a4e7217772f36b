"""A stored campaign's report as one value: everything a format shows, read from the
store once (report/ draws it and never reads the store). `view` says which part a
format draws: the summary (the comparison and the tables beyond it), every run, or
the profiler's view."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from allocmark import profile
from allocmark.answer import aging, analyze, composition, findings, hardening, replays, stored
from allocmark.errors import UserError
from allocmark.model import Params, RssSeries, StoredAllocator, StoredRun
from allocmark.request import CampaignPlan
from allocmark.store import Store

VIEWS = ("summary", "runs", "profile")


@dataclass(frozen=True)
class Report:
    """One campaign's report: `view` says which part a format renders."""

    view: str  # "summary" (the comparison), "runs" (every run) or "profile"
    campaign: dict[str, Any]  # id, name, machine, plan, ... as an export shows them
    plan: CampaignPlan  # how the campaign ran, typed
    comparison: analyze.Comparison  # the summary view's (analyze.NOTHING in the others)
    findings: findings.Findings  # what the comparison answers (findings.NONE for a CSV)
    allocators: tuple[StoredAllocator, ...]  # provenance: what each was verified as
    runs: tuple[StoredRun, ...]  # loaded for the runs view and html only
    profiles: tuple[profile.View, ...]  # the profile view
    # (allocator, workload, params, RSS over time) of each OK run: html and plot files
    series: tuple[tuple[str, str, Params, RssSeries], ...] = ()
    aging: tuple[aging.Steady, ...] = ()  # phased workloads' steady state (summary view)
    made: tuple[composition.Made, ...] = ()  # what the RSS is made of (summary view)
    battery: hardening.Matrix | None = None  # the hardening battery's outcomes (summary view)
    replays: tuple[replays.Replayed, ...] = ()  # replay rows beside their recordings
    # "row: allocator (crashed 2/3)" for each cell whose runs failed (not the hardening
    # battery's: its crashes are its findings), and first "campaign N failed: ..." when
    # the campaign itself failed: no number, and the command exits 1.
    failed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Wanted:
    """What a format needs beyond the view's core: a terminal's brief comparison
    (without the secondary groups past 20 rows: stored.comparison), every run (html),
    the RSS series (html, plot files), the tables beyond the comparison (not CSV:
    reading the allocator statistics of 100,000 runs takes most of a second), what the
    comparison answers (findings: not CSV either, their Holm families take as long),
    what the RSS is made of (not under a terminal's glance, which leaves it to
    --detail: `made` False reads it only where no matrix is shown)."""

    brief: bool = False
    runs: bool = False
    series: bool = False
    extras: bool = True
    made: bool = True
    findings: bool = True


def load(
    store: Store,
    cid: int,
    view: str = "summary",
    speedup: bool = False,
    wanted: Wanted = Wanted(),
) -> Report:
    """The report of campaign `cid` as `view` needs it."""
    if view not in VIEWS:
        raise ValueError(f"view {view!r}")
    if view == "profile" and not store.campaign_plan(cid).sample:
        raise UserError(
            f"campaign {cid} was not profiled; use `allocmark profile` or `allocmark run --profile`"
        )
    comp, found, glance = None, findings.NONE, False
    if view == "summary":
        comp, found, glance = _summary(store, cid, speedup, wanted)
    extras = comp is not None and wanted.extras
    made = extras and (wanted.made or not glance)
    return Report(
        view=view,
        campaign=store.campaign_info(cid),
        plan=store.campaign_plan(cid),
        comparison=comp or analyze.NOTHING,
        findings=found,
        allocators=tuple(store.allocators(cid)),
        runs=tuple(store.runs(cid)) if view == "runs" or wanted.runs else (),
        profiles=tuple(stored.profiles(store, cid)) if view == "profile" else (),
        series=tuple(store.rss_series(cid)) if comp and wanted.series else (),
        aging=tuple(aging.stored(store, cid, comp.allocators)) if comp and extras else (),
        made=tuple(composition.stored(store, cid, comp.allocators)) if comp and made else (),
        battery=hardening.stored(store, cid, comp.allocators) if comp and extras else None,
        replays=tuple(replays.stored(store, cid, comp.baseline)) if comp and extras else (),
        failed=_ended_failed(store, cid) + (failed(comp) if comp else ()),
    )


def _ended_failed(store: Store, cid: int) -> tuple[str, ...]:
    """ "campaign 3 failed: ..." when the campaign itself failed (its command failed
    under the baseline, and nothing else ran): its report has nothing to show, and
    says so and exits 1 rather than printing an empty table as if all went well."""
    if store.campaign(cid).status != "failed":
        return ()
    return (
        f"campaign {cid} failed: its command failed, so nothing else ran "
        "(`allocmark report --runs` shows the run and why)",
    )


def failed(comp: analyze.Comparison) -> tuple[str, ...]:
    """The cells whose runs failed, each "row: allocator (state)", but the hardening
    battery's (its crashes are its findings): each makes a verb's exit status 1."""
    return tuple(analyze.failures(comp, skip=hardening.WORKLOAD))


def _summary(
    store: Store, cid: int, speedup: bool, wanted: Wanted
) -> tuple[analyze.Comparison, findings.Findings, bool]:
    """The comparison, what it answers, and whether a glance shows it as a matrix."""
    comp = stored.comparison(store, cid, speedup, wanted.brief)
    judged = findings.judged(comp) if wanted.findings or wanted.extras else findings.NONE
    glance = wanted.brief and judged.matrix  # a terminal's matrix, the tables left out
    # The runs' signals (a second of reading over 100,000 runs): for the whys, and for
    # the table of what each run spent, which a glance leaves to --detail.
    if (wanted.extras and not glance) or (
        wanted.findings and findings.signals_wanted(judged, wanted.brief)
    ):
        comp = stored.with_signals(store, cid, comp)
    found = findings.explained(judged, comp, wanted.brief) if wanted.findings else findings.NONE
    return comp, found, glance
