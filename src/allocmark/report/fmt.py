"""Text for numbers and cells, shared by every text format."""

from __future__ import annotations

from allocmark.analyze import Cell, Comparison

TITLES = {
    "time_s": "Time",
    "peak_rss_kib": "Peak RSS",
    "overhead_ratio": "Memory overhead (peak RSS - baseline RSS) / peak requested bytes",
    "ops_per_s": "Throughput (allocator operations per second, as the workload counts them)",
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


def size_kib(kib: float) -> str:
    if kib >= 1024 * 1024:
        return f"{kib / 1024 / 1024:.2f} GiB"
    return f"{kib / 1024:.1f} MiB" if kib >= 1024 else f"{kib:.0f} KiB"


def cell(metric: str, c: Cell) -> str:
    """ "412.0 ms ±1.2% ×0.87"; a failed or missing cell says so and shows no number."""
    if c.summary is None:
        return c.state.upper()
    text = f"{quantity(metric, c.summary.median)} ±{c.summary.half_range_rel * 100:.1f}%"
    return f"{text} ×{c.ratio:.2f}" if c.ratio is not None else text


def geomean(value: float | None) -> str:
    return f"×{value:.2f}" if value is not None else "n/a"


def header(comp: Comparison, allocator: str) -> str:
    marks = ("*" if allocator == comp.baseline else "") + ("†" if allocator in comp.partial else "")
    return allocator + marks


def legend(comp: Comparison) -> str:
    parts = ["median ± half the min–max range, ×ratio to the baseline median"]
    if comp.speedup:
        parts.append("time ratios are speed-ups: baseline time / allocator time")
    if comp.baseline:
        parts.append(f"* baseline: {comp.baseline}")
    if comp.partial:
        parts.append(
            "† partial: leaves some allocation functions to glibc (see `allocmark allocators`)"
        )
    return "; ".join(parts)
