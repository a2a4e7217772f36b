"""A precision campaign's rounds: after each, more blocks for the rows whose deciding
ratios are still undecided, while the budget lasts (a default budget may stretch, once,
to the first verdict the forecast says is possible), and the forecast said on the way."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass

from allocmark import stats
from allocmark.answer import analyze, forecast, race, releases
from allocmark.model import CampaignPlan, Note, Params, RunSpec
from allocmark.run import plan
from allocmark.store import Store

Confirm = Callable[[str], bool]  # asks the user a yes/no question (False: cannot ask)


@dataclass
class Stretch:
    """A default budget (Precision.stretch) grown, once, to reach the first verdict the
    forecast says is possible, while no ratio is decided yet: to `FAR_S` in all without
    a word more than a note; beyond, only when `yes` or `confirm` accepts. An explicit
    budget (--budget, a suite's `budget`) is never changed. A note says each stretch."""

    yes: bool = False
    confirm: Confirm | None = None
    declined: bool = False

    def apply(
        self, store: Store, cid: int, campaign: CampaignPlan, fc: forecast.Forecast
    ) -> tuple[list[Note], CampaignPlan]:
        """What the stretch says, and the campaign's plan after it (as stored)."""
        if not (campaign.precision and campaign.precision.stretch) or self.declined:
            return [], campaign
        budget = campaign.budget_s
        need = fc.first_verdict_s()
        # The planned blocks run whatever the budget says: it pays for the ones after.
        if not budget or need is None or fc.first_verdict_blocks() <= fc.planned:
            return [], campaign
        # A quarter more than the forecast: run times vary, and the last block must fit.
        wanted = fc.spent_s + STRETCH_SLACK * need
        if wanted <= budget:
            return [], campaign
        new = forecast.budget_seconds(wanted)
        given = budget if campaign.budget_given_s is None else campaign.budget_given_s
        at = f"the first verdict is expected at {fc.first_verdict_blocks()} blocks"
        if new > FAR_S and not self.yes:
            question = (
                f"The default budget ({forecast.duration(given)}) ends before any "
                f"verdict: {at}, about {forecast.duration(fc.spent_s + need)} in all. "
                f"Stretch the budget to {forecast.duration(new)}?"
            )
            if not (self.confirm and self.confirm(question)):
                self.declined = True
                kept = Note(
                    "warning",
                    f"the default budget ({forecast.duration(given)}) ends "
                    f"before any verdict: {at}, about "
                    f"{forecast.duration(fc.spent_s + need)} in all; kept (far: more "
                    f"than {forecast.duration(FAR_S)}): --yes stretches it, or --budget "
                    f"{forecast.budget_text(new)} sets it",
                )
                return [kept], campaign
        stretched = Note(
            "info",
            f"budget stretched from the default {forecast.duration(given)} to "
            f"{forecast.duration(new)}: {at} (--budget sets it)",
        )
        return [stretched], store.stretch_budget(cid, new)


STRETCH_SLACK = 1.25
FAR_S = 300.0  # a stretch beyond this campaign time is asked first (or --yes)


def foresee(
    store: Store, cid: int, campaign: CampaignPlan, comp: analyze.Comparison | None = None
) -> forecast.Forecast:
    """The forecast of the runs so far (forecast.py), from `comp` when the round has it."""
    comp = comp or analyze.stored_comparison(store, cid)
    return forecast.of(
        comp, run_costs(store, cid, store.measured_overhead(cid)), campaign, store.spent(cid)
    )


GROWTH = 8  # a round adds 1/GROWTH of a row's blocks (at least one)


def more_runs(
    store: Store, cid: int, campaign: CampaignPlan, comp: analyze.Comparison | None = None
) -> tuple[list[RunSpec], int, int]:
    """More blocks (1/GROWTH of those it has), interleaved, for every row with a
    deciding ratio still undecided and fewer than max_blocks blocks, as the budget allows;
    and how many deciding ratios are undecided, of how many. Stopping a row once it is
    decided is sound only because its intervals are anytime-valid (`sequential`):
    with fixed-n intervals, stopping at the first "faster" made false verdicts stay
    (A/A: 7 % false instead of 5 %). A row the budget leaves undecided gets one exact
    look at its end, once the campaign is finished (stats.SPLIT). Release to release
    (Precision.question "releases"): the deciding ratios are the changes between
    consecutive versions, and a block holds only the versions of those still open.
    `comp`: the stored comparison, when the caller has it."""
    specs = store.plan(cid)
    comp = comp or analyze.stored_comparison(store, cid)
    precision = campaign.precision
    if precision and precision.question == "releases":
        open_rows, wanted, undecided, ratios = _open_releases(comp)
    else:
        open_rows, undecided, ratios = _open_baseline(comp)
        wanted = None
    blocks: dict[tuple[str, Params], list[RunSpec]] = {}
    for s in specs:
        if s.role == "measure":
            blocks.setdefault((s.workload, s.params), []).append(s)
    most = precision.max_blocks if precision else campaign.min_blocks
    todo = [
        key
        for key, group in blocks.items()
        if open_rows.get(key) and len({s.rep for s in group}) < most
    ]
    # Rows share the budget in a random order, not the most undecided first: which
    # rows get blocks stays independent of what their blocks said.
    rng = random.Random(campaign.seed + len(specs))
    rng.shuffle(todo)
    left = campaign.budget_s - store.spent(cid) if campaign.budget_s else None
    cost = run_costs(store, cid)
    # A race (`tune`): candidates another one clearly beats get no more blocks.
    out_of_race = race.dominated(comp, precision.race) if precision and precision.race else {}
    nxt = max(s.seq for s in specs) + 1
    out: list[RunSpec] = []
    # A row of n blocks gets n/8 more at once (at least one): looking after every
    # block cost a round of analysis per block, most of a campaign of short runs,
    # and the anytime-valid interval allows any schedule of looks.
    size = {key: len({s.rep for s in blocks[key]}) for key in todo}
    more = {key: max(1, min(size[key] // GROWTH, most - size[key])) for key in todo}
    for j in range(max(more.values(), default=0)):
        for key in todo:
            if j >= more[key]:
                continue
            group = blocks[key]
            latest = {s.allocator: s for s in group}
            members = [
                s
                for s in latest.values()
                if s.allocator not in out_of_race.get(analyze.row_key(*key), set())
                and (wanted is None or s.allocator in wanted[key])
            ]
            if left is not None:
                need = sum(cost.get((s.allocator, s.workload, s.params), 0.0) for s in members)
                if need > left:
                    more[key] = j  # out of budget: no more blocks for this row
                    continue
                left -= need
            rep = max(s.rep for s in group) + 1 + j
            rng.shuffle(members)
            out += [
                dataclasses.replace(s, seq=nxt + len(out) + i, rep=rep)
                for i, s in enumerate(members)
            ]
    return out, undecided, ratios


Key = tuple[str, Params]  # a row: its workload and planned parameters


def _open_baseline(comp: analyze.Comparison) -> tuple[dict[Key, bool], int, int]:
    """Rows with a deciding ratio to the baseline undecided (and more blocks could help:
    none of its cells failed), and how many of how many ratios are undecided."""
    open_rows: dict[Key, bool] = {}
    undecided = ratios = 0
    for r in comp.rows:  # a cell run on several machines (a cluster) is open if any part is
        key = (r.workload, plan.planned_params(r.params))
        verdicts = analyze.decisions(r, comp.baseline, comp.margin)
        ratios += len(verdicts)
        # a ratio without runs to judge (every run failed) is not decided either
        undecided += verdicts.count(stats.Verdict.INCONCLUSIVE) + verdicts.count(None)
        can_help = None not in verdicts
        open_rows[key] = open_rows.get(key, False) or (
            can_help and stats.Verdict.INCONCLUSIVE in verdicts
        )
    return open_rows, undecided, ratios


def _open_releases(
    comp: analyze.Comparison,
) -> tuple[dict[Key, bool], dict[Key, frozenset[str]], int, int]:
    """Release to release: rows with a change between consecutive versions undecided,
    the versions those changes need in a block (the others get none), and how many of
    how many changes are undecided."""
    opened = releases.open_versions(comp)
    wanted: dict[Key, frozenset[str]] = {}
    for r in comp.rows:
        if r.label in opened.versions:
            key = (r.workload, plan.planned_params(r.params))
            wanted[key] = wanted.get(key, frozenset()) | opened.versions[r.label]
    return {k: True for k in wanted}, wanted, opened.undecided, opened.changes


def run_costs(
    store: Store, cid: int, overhead: float | None = None
) -> dict[tuple[str, str, Params], float]:
    """Seconds one more run of each cell costs: its mean wall time plus the campaign's
    mean overhead per run (start-up, verification, saving: what the budget has spent
    beyond the measured runs' wall time, per run; `overhead` instead when given)."""
    cells = [c for c in store.cells(cid, (), columns=("wall_s",)) if c.role == "measure"]
    runs = sum(len(c.statuses) for c in cells)
    walls = {
        (c.allocator, c.workload, c.params): [w or 0.0 for w in c.columns["wall_s"]] for c in cells
    }
    if overhead is None:
        total_wall = sum(sum(w) for w in walls.values())
        overhead = max(0.0, store.spent(cid) - total_wall) / runs if runs else 0.0
    per_run = overhead
    return {k: sum(w) / len(w) + per_run for k, w in walls.items() if w}
