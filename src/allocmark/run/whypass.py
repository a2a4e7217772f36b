"""The why pass: a few profiled blocks of the rows whose differences were decided.

When a campaign's measured blocks are done, every row with a decided time or peak
RSS difference gets BLOCKS more blocks of the baseline and of each allocator decided
there, each run under the profiler shim (libamprof.so, 1 timed call in SAMPLE), in
a fresh random order per block. They are stored with the role "why": never in a
verdict (the comparison reads "measure" runs only), and each stores what the answer's
why reads (profile.explaining: time inside and outside the allocator, the live bytes
at the peak and the size-class rounding above them). BLOCKS is the fewest a paired
verdict can come from (fewblock.MIN_BLOCKS): a signal counts only when its own
difference is decided.

`CampaignPlan.why`: "auto" (the default) runs the pass when its forecast cost (these
runs' mean cost in the campaign so far) is at most SHARE of what the campaign has
spent; "on" always; "off" never. Planned once: `CampaignPlan.why_pass` says what was
done, and the plan line and the report say it too.
"""

from __future__ import annotations

import dataclasses
import random

from allocmark.answer import analyze, recommend, stored
from allocmark.model import Params, RunSpec
from allocmark.request import CampaignPlan
from allocmark.run.plan import SAMPLE_ENV, planned_params
from allocmark.stats import fewblock
from allocmark.store import Store

BLOCKS = fewblock.MIN_BLOCKS
SHARE = 0.15  # of the campaign's time, at most, by default
SAMPLE = 1024  # the profiler's 1 timed call in N
MODES = ("auto", "on", "off")


@dataclasses.dataclass(frozen=True)
class Pass:
    runs: list[RunSpec]
    note: str  # what was done, or why not


def plan(
    store: Store, cid: int, campaign: CampaignPlan, costs: dict[tuple[str, str, Params], float]
) -> Pass:
    """The why pass's runs for campaign `cid` (none: the note says why); `costs`: seconds
    a run of each (allocator, workload, params) costs (campaign._run_costs)."""
    mode = campaign.why
    if mode == "off":
        return Pass([], "no why pass (--no-why)")
    # The measured blocks are done: decided as the report will count (a sequential
    # campaign's final looks). Counted before them, a ruby campaign said "no
    # difference was decided" and then reported two.
    comp = stored.comparison(store, cid, finished=True)
    decided = _decided(comp)
    if not decided:
        return Pass([], "no why pass: no difference was decided")
    specs = store.run_specs(cid)
    latest = {(s.workload, s.params, s.allocator): s for s in specs if s.role == "measure"}
    rows = [(key, sorted(names)) for key, names in decided.items()]
    cost = BLOCKS * sum(costs.get((a, w, p), 0.0) for (w, p), names in rows for a in names)
    spent = store.spent(cid)
    share = cost / spent if spent > 0 else float("inf")
    plural = "s" * (len(rows) != 1)
    what = f"{BLOCKS} profiled blocks of {len(rows)} row{plural}, about {share:.0%} of the time"
    if mode == "auto" and share > SHARE:
        return Pass([], f"no why pass: {what}, more than {SHARE:.0%} (--why runs it)")
    rng = random.Random(campaign.seed + len(specs))
    nxt, rep = max(s.seq for s in specs) + 1, max(s.rep for s in specs) + 1
    sampled = ((SAMPLE_ENV, str(SAMPLE)),)
    out: list[RunSpec] = []
    for block in range(BLOCKS):
        for (w, p), names in rows:
            members = [latest[(w, p, a)] for a in names if (w, p, a) in latest]
            rng.shuffle(members)
            out += [
                dataclasses.replace(
                    s,
                    seq=nxt + len(out) + i,
                    rep=rep + block,
                    role="why",
                    profile=True,
                    env=s.env + sampled,
                )
                for i, s in enumerate(members)
            ]
    return Pass(out, f"why pass: {what}")


def _decided(comp: analyze.Comparison) -> dict[tuple[str, Params], set[str]]:
    """Per row (workload, parameters as planned): the baseline and every allocator
    with a decided time or peak RSS difference there."""
    out: dict[tuple[str, Params], set[str]] = {}
    if comp.baseline is None:
        return out
    for row, found in zip(comp.rows, recommend.per_row(comp), strict=True):
        for a, c in found.items():
            if (
                isinstance(c, recommend.Choice)
                and a != comp.baseline
                and any(p is not None and p.verdict.differs for p in (c.time, c.rss))
            ):
                out.setdefault((row.workload, planned_params(row.params)), {comp.baseline}).add(a)
    return out
