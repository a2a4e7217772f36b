"""Report outputs, one module per format, all reading one analyze.Comparison.

Takes a `Store` (read only) and what answer/ makes of it; gives terminal tables,
Markdown, CSV, JSON, HTML and plots. May import: answer/, verbs/ (their stored
batteries), store/, stats/, profile/, allocators/; never run/ or executors/."""
