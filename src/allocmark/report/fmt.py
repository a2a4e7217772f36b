"""Text for numbers and cells, shared by every text format."""

from __future__ import annotations

import math
from collections.abc import Callable

from allocmark import stats, units
from allocmark.answer.analyze import MEMORY, Cell, Comparison
from allocmark.text import printable as printable  # shown where numbers are

TITLES = {
    "time_s": "Time",
    "peak_rss_kib": "Peak RSS",
    "rss_mib_s": "Memory × time (RSS integrated over the run)",
    "rss_end_kib": "RSS when the work ends, every block freed (what the allocator keeps)",
    "idle_rss_kib": "RSS after 1 s idle, every block freed (what the allocator gives back)",
    "overhead_ratio": "Memory overhead (peak RSS - baseline RSS) / peak requested bytes",
    "ops_per_s": (
        "Throughput (operations per second as the workload counts them: "
        "allocator calls, or an application's requests)"
    ),
}


def number(text: str) -> float | None:
    """A table cell's text as a number, if it is one (for sorting and alignment)."""
    try:
        return float(text)
    except ValueError:
        return None


def quantity(metric: str, value: float) -> str:
    if metric in ("peak_rss_kib", "rss_end_kib", "idle_rss_kib"):
        return size_kib(value)
    if metric == "rss_mib_s":
        return mib_s(value)
    if metric == "overhead_ratio":
        return f"{value:.2f}"
    if metric == "ops_per_s":
        return rate(value)
    return seconds(value)


def mib_s(v: float) -> str:
    """Three significant digits: 12.3 MiB·s, 1.50 GiB·s."""
    if v >= 1024:
        return f"{v / 1024:#.3g} GiB·s".replace(". ", " ")
    return f"{v:#.3g} MiB·s".replace(". ", " ")


def rate(per_s: float) -> str:
    """Three significant digits: 12.3 M/s, 946 /s, 23.0 k/s."""
    for scale, unit in ((1e9, "G/s"), (1e6, "M/s"), (1e3, "k/s")):
        if per_s >= scale:
            return f"{per_s / scale:#.3g} {unit}".replace(". ", " ")
    return f"{per_s:.0f} /s"


seconds = units.time_text  # the profile's findings write times the same way
size_bytes = units.size_text  # the store's messages write sizes the same way


def size_bucket(k: int) -> str:
    """Power-of-two bucket k, [2^(k-1), 2^k) bytes: 0 B, 16-31 B, 4-8 KiB."""
    if k == 0:
        return "0 B"
    lo = 1 << (k - 1)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if lo >= size:
            return f"{lo // size}-{2 * lo // size} {unit}"
    return f"{lo}-{2 * lo - 1} B"


def size_kib(kib: float) -> str:
    if kib >= 1024 * 1024:
        return f"{kib / 1024 / 1024:.2f} GiB"
    return f"{kib / 1024:.1f} MiB" if kib >= 1024 else f"{kib:.0f} KiB"


def spread(s: stats.Summary) -> str:
    """The ± of a cell: half the 95 % interval of the mean, relative ("±?" for one run)."""
    return "±?" if s.n < 2 else f"±{s.ci_rel:.1%}"


def ratio(r: stats.Ratio | None) -> str:
    """ "×0.87 ±2.1%": ± half the ratio's 95 % interval."""
    if r is None:
        return ""
    return f"×{r.value:.2f} {half_width(r)}".strip()


def half_width(r: stats.Ratio) -> str:
    """ "±2.1%", "±15%": two significant digits keep ten columns in a terminal."""
    if r.df <= 0:
        return ""
    if r.half_width == math.inf:  # fewer blocks than the exact test needs
        return f"(needs ≥{r.blocks_needed} blocks)"
    if not stats.bounded(r.low, r.high):
        return "(unbounded)"
    w = r.half_width
    return f"±{w:.1%}" if w < 0.1 else f"±{w:.0%}"


def unbounded(blocks: int) -> str:
    """What an interval wider than stats.UNBOUNDED_SPAN says."""
    at = f"{blocks} blocks are" if blocks else "its blocks are"
    return f"{at} too few to bound it"


def ratio_interval(r: stats.Ratio | None) -> str:
    if r is not None and r.df > 0 and r.half_width == math.inf:
        return f"(needs ≥{r.blocks_needed} blocks)"
    if r is None or r.low == r.high:
        return ""
    if not stats.bounded(r.low, r.high):
        return f"({unbounded(len(r.logs))})"
    d = decimals(r.low, r.high, 2, lambda x, d: f"{x:.{d}f}")
    return f"[{r.low:.{d}f}–{r.high:.{d}f}]"


def decimals(low: float, high: float, least: int, text: Callable[[float, int], str]) -> int:
    """The fewest decimals (from `least`, at most 2 more) that tell an interval's ends
    apart: "[+14%–+14%]" says nothing a reader can use, "[+13.6%–+14.4%]" does."""
    d = least
    while d < least + 2 and low != high and text(low, d) == text(high, d):
        d += 1
    return d


# The one word every text and export says for a ratio its blocks have not decided
# (stats.Verdict.UNDECIDED; "inconclusive" before the summary's version 3).
UNDECIDED = stats.Verdict.UNDECIDED.value

_WORDS = {
    "time_s": ("faster", "slower"),
    "ops_per_s": ("faster", "slower"),
}


def verdict_word(metric: str, v: stats.Verdict | None) -> str:
    """better/worse in the metric's own words: faster/slower, smaller/larger."""
    if v is None:
        return ""
    words = ("smaller", "larger") if metric in MEMORY else ("better", "worse")
    better, worse = _WORDS.get(metric, words)
    return {
        stats.Verdict.BETTER: better,
        stats.Verdict.WORSE: worse,
        stats.Verdict.UNDECIDED: UNDECIDED,  # the output's one word for it
    }.get(v, v.value)


def detectable(r: stats.Ratio | None) -> str:
    """What an undecided ratio could have seen: "detects ≥9%"."""
    if r is None or r.detectable == math.inf:
        return "one block: no interval"
    if r.half_width == math.inf:
        return f"needs ≥{r.blocks_needed} blocks"
    if not stats.bounded(r.low, r.high):
        return unbounded(len(r.logs))
    return f"detects ≥{r.detectable:.0%}"


def verdict(metric: str, c: Cell) -> str:
    """ "faster", "same", "undecided (detects ≥9%)" ..."""
    word = verdict_word(metric, c.verdict)
    if c.verdict is stats.Verdict.UNDECIDED:
        return f"{word} ({detectable(c.ratio)})"
    return word


def cell(metric: str, c: Cell, is_base: bool = False) -> str:
    """ "412.0 ms ×0.87 [0.80–0.95] faster"; a failed cell says so and shows no number."""
    if c.summary is None:
        return c.state.upper()
    if is_base:
        return f"{quantity(metric, c.summary.median)} {spread(c.summary)} base"
    parts = [
        quantity(metric, c.summary.median),
        ratio(c.ratio),
        ratio_interval(c.ratio),
        verdict(metric, c),
    ]
    return " ".join(p for p in parts if p)


def geomean(value: stats.GeoMean | None) -> str:
    if value is None:
        return "n/a"
    if value.n < 2 or value.low == value.high:
        return f"×{value.value:.2f}"
    return f"×{value.value:.2f} [{value.low:.2f}–{value.high:.2f}]"


def header(comp: Comparison, allocator: str) -> str:
    marks = ("*" if allocator == comp.baseline else "") + ("†" if allocator in comp.partial else "")
    return allocator + marks


MEDIANS = "median of the runs"
# `try`'s table is hyperfine's: a mean and its standard deviation.
MEANS = (
    "Time: the mean ± the standard deviation of the measured runs, and their range; User, "
    "System, Peak RSS: their means"
)


def legend(comp: Comparison, values: str = MEDIANS) -> str:
    exact = (
        "its anytime-valid 95% interval, valid at whichever block the campaign "
        "stopped, as blocks were added until decided: Student's t at the planned looks "
        "(4, 6, 9, 13, ... blocks; normal noise), each held to the level that keeps all "
        "of them at 5% (Pocock's group-sequential test); where a workload's log ratios "
        "tie (a metric counted in steps), where these meet instead: a confidence "
        "sequence by betting on the blocks' signs and sizes, and the Bayes-factor "
        "sequence of Student's t, each at 5%/3, and at the last block of a workload the "
        "budget left undecided the exact signed-rank interval at 5%/3. A plain "
        "difference is decided at 4 blocks, no verdict comes before"
        if comp.sequential
        else "its 95% interval: where the exact signed-rank interval over blocks (inverted) "
        "and Student's t interval (normal noise; from 4 blocks) meet, each at "
        "2.5%"
    )
    how = (
        "the Hodges–Lehmann estimate of its per-block ratios (paired: each block ran every "
        f"allocator back to back, in random order), ± half {exact}"
        if comp.paired
        else "the ratio of geometric means, ± half its 95% interval (Welch, unpaired)"
    )
    family = (
        "time (throughput where time is fixed) and peak RSS: each row's ratios judged as "
        "one family (Holm), as the answer judges them, so the level of each is 95% or "
        "stricter; the other groups: 95% each"
    )
    parts = [
        f"{values}; ×ratio to the baseline: {how}; {family}; same: the interval lies within "
        f"±{comp.margin:.0%} (even if it excludes 1); faster/slower (smaller/larger): it "
        "excludes 1 and is not within that; undecided: neither, and 'detects ≥X%' is the "
        "smallest difference these runs would have found (80% power)"
    ]
    if comp.speedup:
        parts.append("time ratios are speed-ups: baseline time / allocator time")
    if len(comp.rows) > 1:
        parts.append(
            "geomean: of the rows' ratios, its interval for a workload like these "
            "(Student's t over the rows: their spread, which no number of blocks "
            "narrows); the answer and the matrix's 'all' row judge these "
            "workloads"
        )
    if comp.baseline:
        parts.append(f"* baseline: {comp.baseline}")
    if comp.partial:
        parts.append(
            "† partial: leaves some allocation functions to glibc (see `allocmark allocators`)"
        )
    if any(c.fixed for r in comp.rows for c in r.cells["time_s"].values()):
        parts.append("FIXED: the workload runs for a set time; its throughput is the result")
    return "; ".join(parts)


def noise(comp: Comparison) -> str:
    """The noise sentinel's line: re-runs and the calibration loop's spread."""
    n = comp.noise
    if n is None:
        return ""
    again = f" ({n.attempts} re-runs in all)" if n.attempts > n.rerun else ""
    text = (
        f"noise: {n.rerun} of {n.runs} measured runs re-run{again} after other work "
        "spiked during them"
    )
    if n.uncounted:
        text += (
            f"; {n.uncounted} of {n.runs} measured runs taken again uncounted: counting their "
            f"system calls cost {n.count_share:.0%} of their time (mean), so their counts "
            "are those of a counted run just before each"
        )
    if n.calibration is not None and n.calibration.n > 1:
        c = n.calibration
        text += (
            f"; calibration loop between blocks: median {seconds(c.median)}, "
            f"{c.minimum / c.median - 1:+.0%} … {c.maximum / c.median - 1:+.0%}"
        )
    return text
