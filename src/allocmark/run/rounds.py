"""A precision campaign's rounds: after each, more blocks for the rows whose deciding
ratios are still undecided, while the budget lasts (a default budget may stretch to
the first verdict the forecast says is possible, again at each round as the forecast
learns), and the forecast said on the way."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from dataclasses import dataclass

from allocmark import labels, stats, units
from allocmark.answer import analyze, forecast, race, releases, stored
from allocmark.model import Params, RunSpec
from allocmark.request import CampaignPlan, Note
from allocmark.run import plan
from allocmark.stats import looks
from allocmark.store import Store

Confirm = Callable[[str], bool]  # asks the user a yes/no question (False: cannot ask)


@dataclass
class Stretch:
    """A default budget (Precision.stretch) grown to reach the first verdict the forecast
    says is possible, at each round the forecast asks for more (never shrunk; the error
    rate holds: the looks are planned whatever the budget, and the final look spends
    what they left, tests/stats/test_looks.py), while an axis (speed, peak RSS) has no
    ratio decided yet
    (speed, when peak RSS decided at once): without a word more than a
    note to `FAR_S` in all, or to FAR_FACTOR × the planned blocks' time where that is
    more (a program of seconds under six allocators: its second look, 6 blocks, when 4
    take 4.4 min); beyond, only when `yes` or `confirm` accepts. An explicit
    budget (--budget, a suite's `budget`) is never changed. A note says each stretch;
    once declined, it is not asked again."""

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
        far = max(FAR_S, FAR_FACTOR * fc.planned * fc.block_s)
        if new > far and not self.yes:
            question = (
                f"{_budget_words(budget, given).capitalize()} ends before any "
                f"verdict: {at}, about {units.duration(fc.spent_s + need)} in all. "
                f"Stretch the budget to {units.duration(new)}?"
            )
            if not (self.confirm and self.confirm(question)):
                self.declined = True
                kept = Note(
                    "warning",
                    f"{_budget_words(budget, given)} ends before any verdict: {at}, "
                    f"about {units.duration(fc.spent_s + need)} in all; kept at "
                    f"{units.duration(budget)} (far: more than {units.duration(far)}): "
                    f"--yes stretches it, or --budget {forecast.budget_text(new)} sets it",
                )
                return [kept], campaign
        stretched = Note(
            "info",
            f"budget stretched from the default {units.duration(given)} to "
            f"{units.duration(new)}: {at} (--budget sets it)",
        )
        return [stretched], store.stretch_budget(cid, new)


def _budget_words(budget: float, given: float) -> str:
    """The budget in force, and the default it grew from when a stretch grew it."""
    if budget == given:
        return f"the default budget ({units.duration(given)})"
    return f"the budget ({units.duration(budget)}, the default {units.duration(given)} stretched)"


STRETCH_SLACK = 1.25
FAR_S = 300.0  # a stretch beyond this campaign time is asked first (or --yes) ...
FAR_FACTOR = 2.0  # ... unless within this many times the planned blocks' time


def foresee(
    store: Store, cid: int, campaign: CampaignPlan, comp: analyze.Comparison | None = None
) -> forecast.Forecast:
    """The forecast of the runs so far (forecast.py), from `comp` when the round has it."""
    comp = comp or stored.comparison(store, cid)
    return forecast.of(
        comp, run_costs(store, cid, store.measured_overhead(cid)), campaign, store.spent(cid)
    )


GROWTH = 8  # past the last look, a round adds 1/GROWTH of a row's blocks (at least one)


Key = tuple[str, Params]  # a row: its workload and planned parameters


@dataclass(frozen=True)
class Wanted:
    """What a round's blocks hold: per row still open, the allocators it runs (None:
    every one) and, release to release, the lines whose versions run one after the
    other; and how many deciding ratios are undecided, of how many."""

    rows: dict[Key, frozenset[str] | None]
    lines: dict[Key, tuple[tuple[str, ...], ...]]
    undecided: int
    ratios: int


def more_runs(
    store: Store, cid: int, campaign: CampaignPlan, comp: analyze.Comparison | None = None
) -> tuple[list[RunSpec], int, int]:
    """More blocks, interleaved, for every row with a deciding ratio still undecided and
    fewer than max_blocks blocks, as the budget allows; and how many deciding ratios are
    undecided, of how many. A round gives each open row the same time (`shares`), so a
    row whose block takes 2 s gets many blocks where one of 30 s gets one.
    Stopping a row once it is decided is sound only because its intervals hold at any
    stop (`sequential`: the planned looks', or the anytime-valid sequences where log
    ratios tie): with fixed-n intervals, stopping at the first "faster" made false
    verdicts stay (A/A: 7 % false instead of 5 %). A row the budget leaves undecided
    gets a final look at its end, once the campaign is finished (looks.levels). Release to release
    (Precision.question "releases"): the deciding ratios are the changes between
    consecutive versions, a block holds only the versions of those still open, and a
    line's versions run one after the other (plan.ordered). `comp`: the stored comparison,
    when the caller has it."""
    specs = store.run_specs(cid)
    comp = comp or stored.comparison(store, cid)
    precision = campaign.precision
    releasing = precision is not None and precision.question == "releases"
    wanted = _open_releases(comp) if releasing else _open_baseline(comp)
    blocks: dict[Key, list[RunSpec]] = {}
    for s in specs:
        if s.role == "measure":
            blocks.setdefault((s.workload, s.params), []).append(s)
    most = precision.max_blocks if precision else campaign.min_blocks
    size = {key: len({s.rep for s in group}) for key, group in blocks.items()}
    todo = [key for key in blocks if key in wanted.rows and size[key] < most]
    # Rows share the budget in a random order, not the most undecided first: which
    # rows get blocks stays independent of what their blocks said.
    rng = random.Random(campaign.seed + len(specs))
    rng.shuffle(todo)
    # A race (`tune`): candidates another one clearly beats get no more blocks.
    out_of_race = race.dominated(comp, precision.race) if precision and precision.race else {}
    members = {
        key: [
            s
            for s in {s.allocator: s for s in blocks[key]}.values()
            if s.allocator not in out_of_race.get(labels.row_key(*key), set())
            and _in(wanted.rows[key], s.allocator)
        ]
        for key in todo
    }
    cost = run_costs(store, cid)
    block_s = {
        key: sum(cost.get((s.allocator, s.workload, s.params), 0.0) for s in members[key])
        for key in todo
    }
    more = shares({key: size[key] for key in todo}, block_s, most)
    left = campaign.budget_s - store.spent(cid) if campaign.budget_s else None
    nxt = max(s.seq for s in specs) + 1
    out: list[RunSpec] = []
    for j in range(max(more.values(), default=0)):
        for key in todo:
            if j >= more[key]:
                continue
            if left is not None:
                if block_s[key] > left:
                    more[key] = j  # out of budget: no more blocks for this row
                    continue
                left -= block_s[key]
            rep = max(s.rep for s in blocks[key]) + 1 + j
            block = ordered(members[key], wanted.lines.get(key, ()), rng)
            out += [
                dataclasses.replace(s, seq=nxt + len(out) + i, rep=rep) for i, s in enumerate(block)
            ]
    return out, wanted.undecided, wanted.ratios


def _in(allocators: frozenset[str] | None, name: str) -> bool:
    return allocators is None or name in allocators


def shares(size: dict[Key, int], block_s: dict[Key, float], most: int) -> dict[Key, int]:
    """The blocks a round adds to each open row: up to its next planned look (a verdict
    reads the blocks of the looks it has reached, stats.looks; past the last, 1/GROWTH
    of those it has, at least one), and as many more as fit in the time the costliest
    row's share takes, up to a look, so that every open row gets about the same time;
    never past `most` blocks."""
    grow = {key: max(1, min(_step(n), most - n)) for key, n in size.items()}
    round_s = max((grow[key] * block_s[key] for key in size), default=0.0)
    return {
        key: min(
            most - n,
            max(grow[key], _to_look(n, int(round_s / block_s[key])) if block_s[key] else 0),
        )
        for key, n in size.items()
    }


def _step(n: int) -> int:
    """The blocks from n to the next look (past the last: n/GROWTH, at least one)."""
    after = looks.next_look(n)
    return after - n if after is not None else max(1, n // GROWTH)


def _to_look(n: int, extra: int) -> int:
    """Of `extra` more blocks after n, those up to the last look they reach (all of
    them past the last look; none when they reach none)."""
    if looks.next_look(n) is None:
        return extra
    reached = looks.looks_in(n + extra)
    return reached[-1] - n if reached and reached[-1] > n else 0


def ordered(members: list[RunSpec], lines: plan.Lines, rng: random.Random) -> list[RunSpec]:
    """A block's runs in plan.ordered's order."""
    by_name = {s.allocator: s for s in members}
    return [by_name[a] for a in plan.ordered(list(by_name), lines, rng)]


def _open_baseline(comp: analyze.Comparison) -> Wanted:
    """Rows with a deciding ratio to the baseline undecided (and more blocks could help:
    none of its cells failed), and how many of how many ratios are undecided."""
    open_rows: dict[Key, bool] = {}
    undecided = ratios = 0
    for r in comp.rows:  # a row run on several machines (a cluster) is open if any part is
        key = (r.workload, plan.planned_params(r.params))
        verdicts = analyze.decisions(r, comp.baseline, comp.margin)
        ratios += len(verdicts)
        # a ratio without runs to judge (every run failed) is not decided either
        undecided += verdicts.count(stats.Verdict.UNDECIDED) + verdicts.count(None)
        can_help = None not in verdicts
        open_rows[key] = open_rows.get(key, False) or (
            can_help and stats.Verdict.UNDECIDED in verdicts
        )
    return Wanted({k: None for k, v in open_rows.items() if v}, {}, undecided, ratios)


def _open_releases(comp: analyze.Comparison) -> Wanted:
    """Release to release: rows with a change between consecutive versions undecided,
    the versions those changes need in a block (the others get none) and their lines,
    and how many of how many changes are undecided."""
    opened = releases.open_versions(comp)
    rows: dict[Key, frozenset[str] | None] = {}
    lines: dict[Key, tuple[tuple[str, ...], ...]] = {}
    for r in comp.rows:
        if r.label in opened.versions:
            key = (r.workload, plan.planned_params(r.params))
            rows[key] = (rows.get(key) or frozenset()) | opened.versions[r.label]
            both = lines.get(key, ()) + opened.lines.get(r.label, ())
            lines[key] = tuple(dict.fromkeys(both))  # a row on several machines: once
    return Wanted(rows, lines, opened.undecided, opened.changes)


def run_costs(
    store: Store, cid: int, overhead: float | None = None
) -> dict[tuple[str, str, Params], float]:
    """Seconds one more run of each cell costs: its mean wall time plus the campaign's
    mean overhead per run (start-up, verification, saving: what the budget has spent
    beyond the measured runs' wall time, per run; `overhead` instead when given)."""
    cells = [c for c in store.grouped(cid, (), columns=("wall_s",)) if c.role == "measure"]
    runs = sum(len(c.statuses) for c in cells)
    walls = {
        (c.allocator, c.workload, c.params): [w or 0.0 for w in c.columns["wall_s"]] for c in cells
    }
    if overhead is None:
        total_wall = sum(sum(w) for w in walls.values())
        overhead = max(0.0, store.spent(cid) - total_wall) / runs if runs else 0.0
    per_run = overhead
    return {k: sum(w) / len(w) + per_run for k, w in walls.items() if w}
