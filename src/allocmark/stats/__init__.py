"""The statistics stage: numbers in, verdicts out.

Takes the measured values of paired blocks (one value per allocator and block) and
gives summaries, ratios with their intervals, p-values and the four words (faster,
slower, the same within the margin, undecided): summary.py (one allocator's values in
a cell), ratios.py (two allocators' ratio and its interval, paired by block or not),
families.py (ratios judged as one family: Holm), verdicts.py (the four words),
signedrank.py (the exact signed-rank test), sequential.py (the anytime-valid betting
interval), student.py and fewblock.py (Student's interval and the Bayes-factor
confidence sequence of few blocks), looks.py (the planned looks' group-sequential t
test of blocks added until decided), batch.py (the same, vectorised over many rows).
Of the rest it uses numpy and scipy only.

May import: nothing.
Never: allocators, answer, api, cli, defaults, entry, dispatchers, interrupts, native,
profile, report, run, schemas, store, text, tomlfile, units, verbs, workloads.
"""

from __future__ import annotations

from allocmark.stats.families import at_alpha, holm, holm_levels
from allocmark.stats.ratios import (
    FIXED_SHARES,
    MOST_BLOCKS,
    SPLIT,
    UNBOUNDED_SPAN,
    Ratio,
    blocks_to_decide,
    bounded,
    inv,
    inverted,
    paired_ratio,
    ratio,
    ratio_of,
    ratio_of_ratios,
)
from allocmark.stats.summary import (
    ALPHA,
    LEVEL,
    MAD_LIMIT,
    RECOMMEND_ALPHA,
    VECTOR_MIN,
    GeoMean,
    Summary,
    geomean,
    rows_mean_sd,
    summarize,
    summarize_many,
    t_interval,
)
from allocmark.stats.verdicts import DEFAULT_MARGIN, Verdict, interval_verdict, pending, verdict

__all__ = [
    "ALPHA",
    "DEFAULT_MARGIN",
    "FIXED_SHARES",
    "LEVEL",
    "MAD_LIMIT",
    "MOST_BLOCKS",
    "RECOMMEND_ALPHA",
    "SPLIT",
    "UNBOUNDED_SPAN",
    "VECTOR_MIN",
    "GeoMean",
    "Ratio",
    "Summary",
    "Verdict",
    "at_alpha",
    "blocks_to_decide",
    "bounded",
    "geomean",
    "holm",
    "holm_levels",
    "interval_verdict",
    "inv",
    "inverted",
    "paired_ratio",
    "pending",
    "ratio",
    "ratio_of",
    "ratio_of_ratios",
    "rows_mean_sd",
    "summarize",
    "summarize_many",
    "t_interval",
    "verdict",
]
