"""Text for numbers and cells, shared by every text format."""

from __future__ import annotations

from allocmark import stats
from allocmark.analyze import Cell, Comparison

TITLES = {
    "time_s": "Time",
    "peak_rss_kib": "Peak RSS",
    "overhead_ratio": "Memory overhead (peak RSS - baseline RSS) / peak requested bytes",
    "ops_per_s": (
        "Throughput (operations per second as the workload counts them: "
        "allocator calls, or an application's requests)"
    ),
}


def quantity(metric: str, value: float) -> str:
    if metric == "peak_rss_kib":
        return size_kib(value)
    if metric == "overhead_ratio":
        return f"{value:.2f}"
    if metric == "ops_per_s":
        return rate(value)
    return seconds(value)


def rate(per_s: float) -> str:
    """Three significant digits: 12.3 M/s, 946 /s, 23.0 k/s."""
    for scale, unit in ((1e9, "G/s"), (1e6, "M/s"), (1e3, "k/s")):
        if per_s >= scale:
            return f"{per_s / scale:#.3g} {unit}".replace(". ", " ")
    return f"{per_s:.0f} /s"


def seconds(s: float) -> str:
    """Three significant digits, trailing zeros kept: 12.3 ms, 1.50 s, 25.0 s, 250 s."""
    if s < 1:
        return f"{s * 1000:.1f} ms"
    return f"{s:.2f} s" if s < 10 else f"{s:.1f} s" if s < 100 else f"{s:.0f} s"


def size_bytes(n: float) -> str:
    """One decimal in the largest unit that fits: 1.7 MiB, 43.3 KiB, 512 B."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


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


def ratio(r: stats.Ratio | None, is_base: bool) -> str:
    """ "×0.87" when significant, "≈0.98" when not, "base" for the baseline itself."""
    if is_base:
        return "base"
    if r is None:
        return ""
    return f"{'×' if r.significant else '≈'}{r.value:.2f}"


def ratio_interval(r: stats.Ratio | None) -> str:
    return f"[{r.low:.2f}–{r.high:.2f}]" if r is not None and r.low != r.high else ""


def cell(metric: str, c: Cell, is_base: bool = False) -> str:
    """ "412.0 ms ±1.2% ×0.87 [0.80–0.95]"; a failed cell says so and shows no number."""
    if c.summary is None:
        return c.state.upper()
    parts = [quantity(metric, c.summary.median), spread(c.summary), ratio(c.ratio, is_base)]
    if not is_base:
        parts.append(ratio_interval(c.ratio))
    return " ".join(p for p in parts if p) + (" ~" if c.loose else "")


def geomean(value: stats.GeoMean | None) -> str:
    if value is None:
        return "n/a"
    if value.n < 2 or value.low == value.high:
        return f"×{value.value:.2f}"
    return f"×{value.value:.2f} [{value.low:.2f}–{value.high:.2f}]"


def header(comp: Comparison, allocator: str) -> str:
    marks = ("*" if allocator == comp.baseline else "") + ("†" if allocator in comp.partial else "")
    return allocator + marks


def legend(comp: Comparison) -> str:
    parts = [
        "median; ± half the 95% interval of the mean (Student t); ×ratio of geometric means "
        "to the baseline [95% interval], ≈ where Welch's t-test on log values finds no "
        "significant difference (p ≥ 0.05)"
    ]
    if comp.speedup:
        parts.append("time ratios are speed-ups: baseline time / allocator time")
    if comp.baseline:
        parts.append(f"* baseline: {comp.baseline}")
    if comp.partial:
        parts.append(
            "† partial: leaves some allocation functions to glibc (see `allocmark allocators`)"
        )
    if comp.target_ci is not None:
        parts.append(f"~ the time interval never got within ±{comp.target_ci:.1%}")
    return "; ".join(parts)
