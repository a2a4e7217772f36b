"""How long a verdict will take, said before the wait.

From the runs so far: what one more block of every undecided row costs; the blocks
at which a verdict first becomes possible (fewblock.MIN_BLOCKS blocks that agree in
size); once two blocks show the noise, about how many blocks the speed ratios and
the peak RSS ratios need at their levels in their rows' families
(blocks_to_decide: 80 % of the time, if the blocks keep the spread they show);
whether the budget and --max-blocks reach that, with the fix when they do not; and the
noise the blocks measured (the median spread of an open ratio's block log ratios) with
what a 5 % change needs at it here. Release to release (Precision.question "releases"):
the consecutive changes instead of the ratios to the baseline, each block priced at the
versions still open. The campaign yields one after its first and second blocks and
after every round (campaign.steps); the CLI prints it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field

from allocmark import stats, units
from allocmark.answer import analyze, releases
from allocmark.answer.analyze import Comparison
from allocmark.model import Params
from allocmark.request import CampaignPlan
from allocmark.stats import fewblock, looks, student

AXES = ("speed", "peak RSS")


@dataclass(frozen=True)
class Wait:
    """What deciding one axis (every speed ratio, or every peak RSS ratio) takes."""

    blocks: int  # blocks in all its slowest row likely needs
    seconds: float  # seconds more, over every row
    stuck: int = 0  # ratios on the margin: no number of blocks in reach decides them
    first_blocks: int = 0  # blocks in all its clearest undecided ratio likely needs
    first_seconds: float = 0.0  # seconds more until then (every undecided row runs meanwhile)
    # The range `blocks` lies in, as far as the spread of the blocks so far is known
    # (spread_range): wide after a few blocks, narrowing as they add up.
    low: int = 0
    high: int = 0
    sd: float = math.nan  # the median spread of a block's log ratio, its open ratios
    small: int | None = None  # blocks in all a SMALL change would need at that spread
    decided: int = 0  # its ratios already decided (the default budget stretches for none)


@dataclass(frozen=True)
class Forecast:
    """What the runs so far say about the wait."""

    blocks: int  # the fewest blocks an undecided row has (all decided: the most a row has)
    block_s: float  # seconds one more block of every undecided row costs
    undecided: int  # deciding ratios still undecided, of `ratios`
    ratios: int
    first_at: int = fewblock.MIN_BLOCKS  # blocks at which a verdict is first possible
    waits: dict[str, Wait] = field(default_factory=dict)  # axis -> its wait (noise known)
    planned: int = 0  # blocks the campaign runs whatever they say (-n)
    left_s: float | None = None  # what the budget has left (None: no budget)
    spent_s: float = 0.0  # what the campaign has spent of its budget
    max_blocks: int = 0
    sequential: bool = True  # blocks are added until decided (else a fixed number)
    smaller: str = "a smaller run"  # how this campaign's runs could be made shorter
    # Of the undecided: decided better for a verdict, not yet at the level a "use" needs.
    pending: int = 0

    def text(self) -> str:
        """One line: the block's cost, the first possible verdict, the likely waits."""
        out = (
            f"{self.ratios - self.undecided} of {self.ratios} ratios decided after "
            f"{self.blocks} block{'s' if self.blocks != 1 else ''}"
        )
        if self.pending:
            out += f" ({self.pending} more for a verdict, not yet for a recommendation)"
        if not self.undecided:
            return out
        first = max(0, self.first_at - self.blocks) * self.block_s
        out += (
            f"; a block of every undecided row takes {units.duration(self.block_s)}; a verdict "
            f"is possible from {self.first_at} blocks"
        )
        out += f" ({units.duration(first)} more)" if first else ""
        seen = "the noise of 2 blocks (rough)" if self.blocks < 3 else "the noise seen"
        for axis, w in self.waits.items():
            out += f"; at {seen}, {axis}: "
            if w.first_blocks < w.blocks and not self._capped(w.first_blocks):
                out += (
                    f"the clearest ratio decided by about {w.first_blocks} blocks "
                    f"({units.duration(w.first_seconds)} more), "
                )
            out += f"every ratio by {self._span(w)}"
            if w.stuck:
                out += f", but for {w.stuck} on the margin"
        return out + self._noise()

    def _noise(self) -> str:
        """The noise the blocks measured, and what it means here: the blocks (and time)
        a SMALL change needs."""
        said = [(axis, w) for axis, w in self.waits.items() if not math.isnan(w.sd)]
        if not said:
            return ""
        spread = ", ".join(f"{w.sd:.3f} ({axis})" for axis, w in said)
        needs = [
            f"about {w.small} blocks for {axis} ({units.duration(self._until(w.small))} more)"
            for axis, w in said
            if w.small is not None and not self._capped(w.small)
        ]
        return f"; noise: a block's log ratio varies by {spread}" + (
            f"; a {SMALL:.0%} change needs " + ", ".join(needs) + " here" if needs else ""
        )

    def _until(self, blocks: int) -> float:
        """Seconds until every undecided row has `blocks` blocks in all, never past the
        blocks this campaign may run (max_blocks): no forecast beyond its own caps."""
        if self.max_blocks:
            blocks = min(blocks, self.max_blocks)
        return max(0, blocks - self.blocks) * self.block_s

    def _capped(self, blocks: int, reached: bool = False) -> bool:
        """Beyond the blocks this campaign may run (or, `reached`, at them or beyond):
        the one rule for every forecast that names a number of blocks."""
        if not self.max_blocks:
            return False
        return blocks >= self.max_blocks if reached else blocks > self.max_blocks

    def _span(self, w: Wait) -> str:
        """ "60–250 blocks (about 2–9 min more)": the range the blocks so far leave open
        (block_range), never one figure that the next block moves tenfold; "about 60
        blocks" once the two ends meet. The same seconds as remaining()."""
        near = w.low if w.low < w.high else w.blocks
        if self._capped(near, reached=True):
            word = "more than" if self._capped(near) else "at least"
            return f"{word} the {self.max_blocks} blocks this campaign may run"
        if w.low >= w.high or w.high <= w.blocks == w.low:
            return f"about {w.blocks} blocks ({units.duration(self._until(w.blocks))} more)"
        low, high = units.duration(self._until(w.low)), units.duration(self._until(w.high))
        if self._capped(w.high):
            return (
                f"{w.low} blocks at the least, at the most more than the {self.max_blocks} "
                f"it may run (at least {low} more)"
            )
        if w.high >= MOST_BLOCKS:
            return f"{w.low} blocks or many more (at least about {low} more)"
        return f"{w.low}–{w.high} blocks (about {low}–{high} more)"

    def remaining(self) -> tuple[float, float] | None:
        """Seconds until every ratio is decided, low and high ends (the waits' ranges),
        neither beyond what the budget has left; None while the noise is unknown."""
        if not self.undecided:
            return (0.0, 0.0)
        if not self.waits or not self.block_s:
            return None
        low = max(self._until(w.low) for w in self.waits.values())
        high = max(self._until(w.high) for w in self.waits.values())
        if self.left_s is not None and self.sequential:
            low, high = min(low, max(0.0, self.left_s)), min(high, max(0.0, self.left_s))
        return low, high

    def _first(self) -> list[Wait]:
        """The axes (noise known) none of whose ratios is decided yet."""
        return [w for w in self.waits.values() if not w.decided]

    def first_verdict_blocks(self) -> int:
        """The blocks at which the first verdict of an axis still without one is likely:
        its clearest ratio's (noise known), else the first at which one is possible."""
        known = [w.first_blocks for w in self._first()]
        return max(self.first_at, min(known, default=self.first_at))

    def first_verdict_s(self) -> float | None:
        """Seconds more until the first verdict of an axis without one (speed, when peak
        RSS decided at once) is likely (first_verdict_blocks); None once every axis has
        one, or when nothing is undecided that blocks could help."""
        if not self.undecided or not self.block_s:
            return None
        if self.waits:
            return min((w.first_seconds for w in self._first()), default=None)
        if self.undecided < self.ratios:
            return None
        return max(0, self.first_at - self.blocks) * self.block_s

    def warning(self) -> str | None:
        """What the budget or --max-runs cannot reach, and the fix; None when they can."""
        found = self.alert()
        return found[1] if found else None

    def alert(self) -> tuple[str, str] | None:
        """(what kind of warning, its text): a kind is said once, though its figures
        move from round to round."""
        if not self.undecided:
            return None
        fix = f"a wider --margin, fewer allocators (-a), or {self.smaller}"
        if self.max_blocks < self.first_at:
            return "nothing", (
                f"{self.max_blocks} blocks can decide nothing: a verdict needs at "
                f"least {self.first_at}; use -n {self.first_at} or more"
            )
        short = [(axis, w) for axis, w in self.waits.items() if w.blocks > self.max_blocks]
        if short:
            axis, w = short[0]
            return f"max-blocks {axis}", (
                f"after {self.blocks} blocks, {axis} needs about {w.blocks} blocks, more "
                f"than the {self.max_blocks} this campaign may run: raise --max-blocks, "
                f"or use {fix}"
            )
        if not self.sequential or self.left_s is None:
            return None
        return self._over_budget(fix)

    def _over_budget(self, fix: str) -> tuple[str, str] | None:
        # The planned blocks run whatever the budget says; it pays for the ones after.
        ahead = max(0, self.planned - self.blocks) * self.block_s
        left = self.left_s - ahead if self.left_s is not None else math.inf
        # No wait here is beyond max_blocks: alert() said that first (no budget helps).
        waits = {axis: w.seconds - ahead for axis, w in self.waits.items()}
        if not waits:  # the noise is not known yet: the first possible verdict
            waits = {
                "a verdict": max(0, self.first_at - max(self.blocks, self.planned)) * self.block_s
            }
        over = {axis: s for axis, s in waits.items() if s > max(0.0, left)}
        if not over:
            return None
        # Every axis it cannot reach, the nearest first; the budget named reaches them all.
        ordered = sorted(over.items(), key=lambda x: x[1])
        total = budget_text(self.spent_s + ahead + ordered[-1][1])
        reach = " nor ".join(
            f"{axis} (about {units.duration(need)} more)" for axis, need in ordered
        )
        text = (
            f"the budget cannot reach {reach} after the planned blocks, "
            f"{units.duration(max(0.0, left))} left: use --budget {total} or more"
        )
        axis = ordered[-1][0]
        w = self.waits.get(axis)
        if w is not None and w.first_blocks < w.blocks:
            beyond = w.first_seconds - ahead  # what the clearest ratio needs past the plan
            if beyond <= max(0.0, left):
                text += f" (its clearest {axis} ratio is within it)"
            else:
                first = budget_text(self.spent_s + ahead + beyond)
                text += f" ({first} for its clearest {axis} ratio)"
        return "budget " + " ".join(axis for axis, _ in ordered), f"{text}, or {fix}"


SMALL = 0.05  # the change the noise line quotes: what it takes here


def _spread(t: _Tally) -> tuple[float, int | None]:
    """The median spread of the tally's open ratios, and the blocks a SMALL change
    would need at it (at their median level, 80 % of the time)."""
    if not t.sds:
        return math.nan, None
    sd = statistics.median(t.sds)
    alpha = statistics.median(t.alphas)
    at = stats.Ratio(1 + SMALL, 0, 0, 0.0, sd / math.sqrt(2), 1.0, True, alpha, (), t.sequential)
    return sd, blocks_to_decide(at, 0.0, 1.0, math.log1p(SMALL))


def block_range(r: stats.Ratio, margin: float) -> tuple[int | None, int | None]:
    """The blocks r needs at the two ends of what the blocks so far leave open: its
    spread (spread_range) and its size (an 80 % interval of its log) together. A ratio
    near half the margin needs the most blocks (neither apart from 1 nor within the
    margin), one far from it the fewest."""
    if not r.paired or r.df <= 0 or math.isnan(r.se) or r.value <= 0:
        return None, None
    half = math.log1p(margin) / 2
    effect = abs(math.log(r.value))
    z = spread_z()
    near, far = max(0.0, effect - z * r.se), effect + z * r.se

    def target(x: float) -> float:
        return max(x, 2 * half - x)

    easiest = max(target(near), target(far))
    hardest = half if near <= half <= far else min(target(near), target(far))
    low_scale, high_scale = spread_range(r.df)
    return (
        blocks_to_decide(r, margin, low_scale, easiest),
        blocks_to_decide(r, margin, high_scale, hardest),
    )


def spread_z() -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + SPREAD_LEVEL / 2))


# The spread of n blocks' log ratios, as an 80 % interval of its true value (chi-square
# with n - 1 degrees of freedom): a forecast from 3 blocks says a range it keeps to, not
# a number that moves tenfold on the next block.
SPREAD_LEVEL = 0.8


def spread_range(df: float) -> tuple[float, float]:
    """Factors (below 1, above 1) on an observed standard deviation that bound its true
    value at SPREAD_LEVEL."""
    from scipy.stats import chi2  # only where a forecast is made: it takes a while to load

    tail = (1 - SPREAD_LEVEL) / 2
    return (
        math.sqrt(df / float(chi2.ppf(1 - tail, df))),
        math.sqrt(df / float(chi2.ppf(tail, df))),
    )


POWER_Z = 0.8416  # the standard normal's 80 % quantile: "likely" in a forecast
MOST_BLOCKS = stats.MOST_BLOCKS  # beyond this a forecast says "not within reach"


def blocks_to_decide(
    r: stats.Ratio, margin: float, scale: float = 1.0, target: float | None = None
) -> int | None:
    """About how many blocks in all would decide r at its level, 80 % of the time, if
    its blocks keep the spread they show: the fewest n whose interval half-width (the
    few-block test's, at r's share of alpha) plus the power term is below what decides
    r: |log r| to exclude 1, or log(1+margin) - |log r| to lie within the margin,
    whichever is larger; blocks added until decided, the first planned look after r's
    blocks that would. None without a paired spread (fewer than two blocks, Welch)
    or beyond MOST_BLOCKS or the last look (a difference that sits on the margin).
    `scale` multiplies the observed spread and `target` replaces what decides r
    (block_range's ends)."""
    if not r.paired or r.df <= 0 or math.isnan(r.se):
        return None
    n = int(r.df) + 1
    sd = max(r.se * math.sqrt(n) * scale, fewblock.FLOOR)
    if target is None:
        effect = abs(math.log(r.value)) if r.value > 0 else math.inf
        target = max(effect, math.log1p(margin) - effect)

    if r.sequential:
        # A plain ratio undecided at the look it has reached waits for the next.
        plain = looks.plain(r.logs)
        at_least = n + 1 if plain else n
        return stats.blocks_to_decide(sd, target, r.alpha, plain, at_least, POWER_Z)

    def enough(k: int) -> bool:
        return (_few_quantile(k, r.alpha) + POWER_Z) * sd / math.sqrt(k) <= target

    low, high = max(n, fewblock.MIN_BLOCKS), max(n, fewblock.MIN_BLOCKS)
    while not enough(high):  # doubling, then bisection: the half-width falls with k
        if high >= MOST_BLOCKS:
            return None
        low, high = high, min(2 * high, MOST_BLOCKS)
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid + 1, high)
    return high


def _few_quantile(n: int, alpha: float) -> float:
    """A fixed number of blocks: Student's multiple of s/√n at its share of alpha."""
    if n < fewblock.MIN_BLOCKS:
        return math.inf
    return student.quantile(n - 1, 1 - alpha / stats.FIXED_SHARES / 2)


def budget_text(seconds: float) -> str:
    """A budget that covers `seconds`, as --budget reads it: '45s', '12m', '3.2h'."""
    return units.duration(seconds, budget=True)


def budget_seconds(seconds: float) -> float:
    """The seconds of budget_text(seconds): what a budget said that way gives."""
    return units.parse_duration(budget_text(seconds), "budget")


@dataclass
class _Tally:
    blocks: int = 0
    seconds: float = 0.0
    stuck: int = 0
    known: bool = True
    first: int | None = None  # the fewest blocks an undecided ratio needs
    firsts: list[tuple[int, int, float]] = field(default_factory=list)  # per row: its
    # blocks, those its clearest ratio needs, and a block's cost
    low: int = 0  # `blocks` at the low and high ends of the spread's range
    high: int = 0
    sds: list[float] = field(default_factory=list)  # each open ratio's block spread
    alphas: list[float] = field(default_factory=list)  # and the level of a verdict on it
    sequential: bool = True  # their intervals anytime-valid (blocks added by looking)


def of(
    comp: Comparison,
    costs: Mapping[tuple[str, str, Params], float],
    plan: CampaignPlan,
    spent_s: float,
) -> Forecast:
    """The forecast of a campaign's comparison; `costs`: seconds one more run of each
    (allocator, workload, params) costs (campaign._run_costs)."""
    undecided = ratios = rows = pending = 0
    block_s = 0.0
    fewest: int | None = None
    most = 0
    tallies = {axis: _Tally() for axis in AXES}
    decided = dict.fromkeys(AXES, 0)
    question = plan.precision.question if plan.precision else "baseline"
    found = releases.changes(comp) if question == "releases" else []
    wanted = releases.open_versions(comp, found).versions if question == "releases" else None
    for row in comp.rows:
        have = analyze.row_blocks(row)
        most = max(most, have)
        judged = _judged(row, found) if question == "releases" else _to_baseline(comp, row)
        ratios += len(judged)
        if question != "releases":
            pending += sum(analyze.pending(c) for c in analyze.deciding(row, comp.baseline))
        open_ = [
            (axis, r, level)
            for axis, r, level in judged
            if r is not None and stats.verdict(r, comp.margin) is stats.Verdict.UNDECIDED
        ]
        # a ratio without runs to judge (every run failed) is not decided either
        undecided += len(open_) + sum(r is None for _, r, _ in judged)
        for axis, r, _ in judged:
            decided[axis] += r is not None and all(r is not o for _, o, _ in open_)
        runs = wanted.get(row.label, frozenset()) if wanted is not None else None
        if not open_ and not runs:  # release to release: a block may still give a ratio
            continue
        fewest = have if fewest is None else min(fewest, have)
        cost = sum(
            v
            for (a, w, p), v in costs.items()
            if w == row.workload and p == row.params and (runs is None or a in runs)
        )
        block_s += cost
        rows += 1
        for axis in AXES:
            mine = [(r, level) for x, r, level in open_ if x == axis and r is not None]
            if mine:
                _add(tallies[axis], mine, comp.margin, have, cost)
    budget = plan.budget_s
    waits = {
        a: Wait(
            t.blocks,
            t.seconds,
            t.stuck,
            t.first or t.blocks,
            _first_s(t, plan.min_blocks, block_s, rows, fewest or 0),
            min(t.low, t.blocks),
            max(t.high, t.blocks),
            *_spread(t),
            decided[a],
        )
        for a, t in tallies.items()
        if t.known and t.blocks
    }
    return Forecast(
        blocks=most if fewest is None else fewest,
        block_s=block_s,
        undecided=undecided,
        ratios=ratios,
        waits=waits,
        planned=plan.min_blocks,
        left_s=budget - spent_s if budget else None,
        spent_s=spent_s,
        max_blocks=plan.precision.max_blocks if plan.precision else 0,
        sequential=plan.sequential,
        smaller=_smaller(comp),
        pending=pending,
    )


def _first_s(t: _Tally, planned: int, block_s: float, rows: int, fewest: int) -> float:
    """Seconds until the tally's clearest ratio is likely decided: the planned blocks run
    every open row together (`block_s` a block of them all); after them, a round gives
    each of the `rows` open rows about the same time (run/rounds.shares), so a row's
    blocks beyond the plan cost its own block's time once per open row."""
    if not t.firsts:
        return max(0, (t.first or t.blocks) - fewest) * block_s
    return min(
        max(0, min(need, planned) - have) * block_s
        + max(0, need - max(have, planned)) * cost * rows
        for have, need, cost in t.firsts
    )


def _smaller(comp: Comparison) -> str:
    """The shorter run this campaign's alert may suggest: its own parameters' (none for
    a command of the user's, which allocmark cannot shorten)."""
    names = {k for row in comp.rows for k, _ in row.params if k != "host"}
    if "scale" in names:
        return "a smaller scale (-p scale=...)"
    if names:
        return f"smaller parameters (-p {sorted(names)[0]}=...)"
    return "a shorter run of your command"


# (axis, the ratio as the campaign judges it, the level of a verdict on it): a winner
# pending a "use" is judged at the stricter level (analyze.family_ratios), while the
# noise line's "a 5 % change needs" is what a verdict needs.
Judged = list[tuple[str, stats.Ratio | None, float]]


def _to_baseline(comp: Comparison, row: analyze.Row) -> Judged:
    """The row's deciding ratios to the baseline, at their levels in its family."""
    cells = analyze.deciding(row, comp.baseline)
    judged = analyze.family_ratios(row, comp.baseline)
    return [
        (_axis(row, c), r, c.ratio.alpha if c.ratio else stats.ALPHA)
        for c, r in zip(cells, judged, strict=True)
    ]


def _judged(row: analyze.Row, found: list[releases.Change]) -> Judged:
    """Release to release: the row's changes, at their levels in their families."""
    return [
        (
            "peak RSS" if c.metric == releases.MEMORY else "speed",
            c.ratio,
            c.ratio.alpha if c.ratio else stats.ALPHA,
        )
        for c in releases.deciding(found, row)
    ]


def _axis(row: analyze.Row, cell: analyze.Cell) -> str:
    return "peak RSS" if any(cell is c for c in row.cells["peak_rss_kib"].values()) else "speed"


def _add(
    t: _Tally, found: list[tuple[stats.Ratio, float]], margin: float, have: int, cost: float
) -> None:
    """A row's undecided ratios of one axis (each with the level of a verdict on it)
    into its tally: the blocks its slowest ratio likely needs, and what they cost."""
    ratios = [r for r, _ in found]
    if have < 2 or any(r.df <= 0 for r in ratios):
        t.known = False  # one block: no spread yet
        return
    t.sds += [r.se * math.sqrt(r.df + 1) for r in ratios]
    t.alphas += [level for _, level in found]
    t.sequential = t.sequential and all(r.sequential for r in ratios)
    needs = [blocks_to_decide(r, margin) for r in ratios]
    t.stuck += needs.count(None)
    row_needs = max((n for n in needs if n is not None), default=have)
    t.blocks = max(t.blocks, row_needs)
    ends = [block_range(r, margin) for r in ratios]
    lows = [lo for lo, _ in ends if lo is not None]
    t.low = max(t.low, max(lows, default=row_needs))  # the row is done when its last is
    highs = [hi for _, hi in ends]
    t.high = max(t.high, MOST_BLOCKS if None in highs else max(h for h in highs if h))
    clearest = min((n for n in needs if n is not None), default=None)
    if clearest is not None:
        t.first = clearest if t.first is None else min(t.first, clearest)
        t.firsts.append((have, clearest, cost))
    t.seconds += max(0, row_needs - have) * cost
