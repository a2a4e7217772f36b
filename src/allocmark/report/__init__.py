"""Report outputs, one module per format, all reading one analyze.Comparison; below
verbs and run in the layers: a report only reads.

Takes a `Store` (read only) and what answer/ makes of it; gives terminal tables
(table.py, glance.py, matrix.py, rows.py, answer.py, extra.py, profile_rows.py,
tryout.py: `try`'s lines, catalog.py: the listings), Markdown (markdown.py), CSV
(csvfile.py), JSON (jsonfile.py), HTML (html.py: its figures are figures.py's Plotly
JSON, built with plotly_json.py and drawn by vendor/'s plotly.js) and plot files
(plots.py, release_plots.py: matplotlib), both drawing from panels.py and
versions.py (a family's versions), through data.py (what a report reads)
and render.py (one call per format); fmt.py formats numbers and gives each
allocator its colour.

May import: answer, store, stats, profile, allocators, model, errors, text, units.
Never: api, cli, verbs, executors, run.
"""
