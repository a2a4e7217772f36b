"""The answer stage: stored runs in, comparisons and recommendations out.

analyze.py judges a campaign's runs as a `Comparison` (rows of cells, ratios and
verdicts against the baseline), which stored.py reads from the store once (with the
profiler's views), the rows named by allocmark.labels; report.py reads a campaign's whole
report once, the value every format draws, with what its comparison answers
(findings.py: positions, answers, whys, what to try, release changes and hardening
costs, derived once in one downward pass); recommend.py says which allocator to use,
per row and for the whole, and why, each allocator's place on each axis a Position
(positions.py); why.py and remedy.py say what a difference is made of and
what to change; across.py answers across workloads; compare.py sets campaigns side by
side (and gates regressions); composition.py says what a peak RSS is made of;
aging.py finds the steady state of long runs; replays.py sets a campaign's replays
beside the recordings they replay; releases.py judges each version of a
family against the one before it; race.py drops `tune`'s dominated candidates;
forecast.py says how long a verdict will take; tryout.py gives `try`'s line per
allocator (hyperfine's way); hardening.py classifies the hardening
battery's runs (outcomes, scores, what hardening costs).

Takes: a `Store` (read only). Gives: `Comparison`s, `Findings` and `Report`s: plain
frozen values with no store handle, memo or callback inside.
May import: stats, store, allocators, workloads, profile, schemas, model, request, errors,
tomlfile, units, labels.
Never: api, cli, dispatchers, report, run, verbs.
"""
