"""Report outputs, one module per format, each drawing one value: the campaign's
report (answer.report.Report), read once with what it answers (answer.findings);
below verbs and run in the layers, never opening the store and never judging: a
report only draws what answer/ found.

Gives the terminal's report (terminal.py: table.py, glance.py, matrix.py, answer.py,
extra.py, profile_rows.py; catalog.py: the listings),
Markdown (markdown.py), CSV (csvfile.py) and JSON (jsonfile.py), both from rows.py's
flat rows, HTML (html.py: its figures are figures.py's Plotly JSON, built with
plotly_json.py and drawn by vendor/'s plotly.js) and plot files (plots.py,
release_plots.py: matplotlib), both drawing from panels.py and versions.py (a
family's versions); render.py is one call per file format; fmt.py formats numbers
and gives each allocator its colour.

May import: answer, stats, profile, allocators, schemas, model, request, errors, text,
units, labels.
Never: api, cli, verbs, dispatchers, run, store.
"""
