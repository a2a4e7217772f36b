"""Report outputs, one module per format, each drawing one value: the campaign's
report (answer.report.Report), read once with what it answers (answer.findings);
below verbs and run in the layers, never opening the store and never judging: a
report only draws what answer/ found.

Gives the terminal's report (terminal.py: table.py, glance.py, matrix.py, answer.py,
extra.py, profile_rows.py; catalog.py: the listings),
Markdown (markdown.py), CSV (csvfile.py) and JSON (jsonfile.py), both from rows.py's
flat rows (the JSON summary is the report value's own image, its schema drawn from
the value's dataclasses: summary.py), HTML (html.py) and plot files (plots.py:
matplotlib). The figures are charts (chart.py: panels of traces, every number,
colour and label in them) made once by charts.py and versions.py (a family's
versions); figures.py translates them into the page's Plotly JSON (drawn by
vendor/'s plotly.js), plots.py into files.
render.py is one call per file format; fmt.py formats numbers.

May import: answer, stats, profile, allocators, schemas, model, request, errors, text,
units, labels, files.
Never: api, cli, verbs, dispatchers, run, store.
"""
