"""The answer stage: stored runs in, comparisons and recommendations out.

analyze.py reads a campaign's runs into a `Comparison` (rows of cells, ratios and
verdicts against the baseline); recommend.py says which allocator to use, per row
and for the whole, and why; compare.py sets campaigns side by side (and gates
regressions); composition.py says what a peak RSS is made of; aging.py finds the
steady state of long runs; releases.py judges each version of a family against the
one before it.

Takes: a `Store` (read only). Gives: `Comparison`s and recommendations. May import:
stats, store, allocators' lineage, profile, model; never run/, report/ or the CLI.
"""
