"""The four words a ratio says: better, worse, the same within the margin, or
undecided (equivalence first, as a TOST)."""

from __future__ import annotations

from enum import StrEnum

from allocmark.stats.ratios import Ratio

DEFAULT_MARGIN = 0.03  # ±3 %: the default precision target and equivalence margin


class Verdict(StrEnum):
    """What a ratio says, in four words (metric-neutral: worse is slower or larger)."""

    BETTER = "better"  # the interval lies wholly on the good side of 1, not inside ±margin
    WORSE = "worse"
    SAME = "same"  # the interval lies inside ±margin: an equivalence test (TOST at 5 %)
    UNDECIDED = "undecided"  # neither: `Ratio.detectable` says how much it could see

    @property
    def differs(self) -> bool:
        """Better or worse: a difference decided (what an explanation is for)."""
        return self in (Verdict.BETTER, Verdict.WORSE)


def verdict(r: Ratio, margin: float, higher_is_better: bool = False) -> Verdict:
    """interval_verdict() of a ratio's interval; a ratio without one (one run) is undecided."""
    if r.df <= 0:
        return Verdict.UNDECIDED
    return interval_verdict(r.low, r.high, margin, higher_is_better)


def interval_verdict(
    low: float, high: float, margin: float, higher_is_better: bool = False
) -> Verdict:
    """Equivalence first: same when the interval lies within [1/(1+margin), 1+margin],
    even when it excludes 1 (a difference too small to matter is no difference, as
    criterion's "change within noise threshold"); else better/worse when it excludes
    1; undecided otherwise."""
    if low >= 1 / (1 + margin) and high <= 1 + margin:
        return Verdict.SAME
    if low > 1 or high < 1:
        up = low > 1
        return Verdict.BETTER if up == higher_is_better else Verdict.WORSE
    return Verdict.UNDECIDED


def pending(verdict: Verdict | None, held: Verdict | None) -> bool:
    """Decided better at a verdict's level and not (yet) at the level a "use" needs
    (`held`: the verdict there, RECOMMEND_ALPHA; None where the estimate leans no way
    a use could follow): the one rule by which the answer says "no recommendation
    yet", its forecast counts the ratio apart and the campaign waits on it."""
    return verdict is Verdict.BETTER and held is not None and held is not Verdict.BETTER
