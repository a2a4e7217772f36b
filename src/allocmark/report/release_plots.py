"""The figure of a family's versions (matplotlib, for `--plots` and Markdown), drawn
from versions.py: each version's speed and peak RSS against the baseline, in version
order, with the decided release-to-release changes written above their points."""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from allocmark.answer.analyze import Comparison, Row
from allocmark.answer.findings import Findings
from allocmark.report import panels, versions
from allocmark.report.panels import Plot


def across_versions(comp: Comparison, found: Findings) -> list[Plot]:
    """Per family with two or more versions in the campaign, a row of two panels
    (speed, peak RSS) per workload row; Debian's builds are a line of their own
    (squares), one that runs under a newer glibc a hollow diamond."""
    plots = []
    for fam in versions.families(comp, found):
        size = (max(6.0, 0.9 * len(fam.versions)) * 2, 3.0 * len(fam.rows))
        fig, grid = plt.subplots(len(fam.rows), 2, figsize=size, squeeze=False)
        for line, row in zip(grid, fam.rows, strict=True):
            for ax, metric in zip(line, versions.METRICS, strict=True):
                _panel(ax, fam, row, metric)
                ax.set_title(panels.wrapped(f"{row.label}: {versions.what(fam, row, metric)}"))
                ax.title.set_fontsize(9)
                ax.set_ylabel(f"/ {panels.cut(comp.baseline or '')}")
        # The legend (first panel) tells crate builds, Debian's and those under a newer glibc.
        grid[0][0].legend(fontsize=7)
        fig.suptitle(versions.title(fam, comp))
        fig.tight_layout(rect=(0, 0, 1, 0.96))
        plots.append(Plot(f"versions-{panels.slug(fam.name)}", fig.get_suptitle(), fig))
    return plots


def _panel(ax: Axes, fam: versions.Family, row: Row, metric: str) -> None:
    for line in versions.lines(fam, row, metric):
        marker, colour, hollow = versions.SERIES[line.series]
        ax.errorbar(
            line.xs,
            line.ys,
            yerr=[line.below, line.above],
            fmt=marker if hollow else f"{marker}-",
            capsize=3,
            color=colour,
            mfc="white" if hollow else colour,
            label=line.series,
        )
    for m in versions.marks(fam, row, metric):
        ax.annotate(
            m.text,
            (m.x, m.y),
            textcoords="offset points",
            xytext=(0, 7),
            ha="center",
            fontsize=7,
            color="#d62728" if m.worse else "#2ca02c",
        )
    ax.axhline(1, color="#999", lw=0.8)
    labels = [panels.cut(v) for v in fam.versions]
    ax.set_xticks(range(len(fam.versions)), labels, rotation=30, fontsize=8)
    ax.set_xlim(-0.5, len(fam.versions) - 0.3)
