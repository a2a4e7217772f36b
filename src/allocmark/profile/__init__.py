"""The profiler seen from Python. libamprof.so (native/shim/am_prof_*.c): its records
(records.py: read and summed), the numbers read off them (summary.py), and the
findings and side-by-side views of a campaign (explain.py).

May import: native, model, errors, units.
Never: answer, api, cli, dispatchers, report, run, store, verbs.
"""

from allocmark.native.kernel import COST_SHARE, TIME_PREFIX, TIMED  # the kernel's
from allocmark.profile.explain import View, findings, views
from allocmark.profile.records import HISTOGRAMS, PEAK_KEYS, combine, merge, of_stored, read
from allocmark.profile.summary import (
    ALLOCATING,
    PATHS,
    SYSCALLS,
    AllocatorProfile,
    Layout,
    PathStats,
    bucket_low,
    count_text,
    explaining,
    hw_state,
    layout,
    live_margin,
    new_and_reuse,
    quantile,
    shim_library,
    size_histogram,
    summarize,
    timed_words,
    usable_at_peak,
    visibility,
)

__all__ = [
    "ALLOCATING",
    "COST_SHARE",
    "HISTOGRAMS",
    "PATHS",
    "PEAK_KEYS",
    "SYSCALLS",
    "TIMED",
    "TIME_PREFIX",
    "AllocatorProfile",
    "Layout",
    "PathStats",
    "View",
    "bucket_low",
    "combine",
    "count_text",
    "explaining",
    "findings",
    "hw_state",
    "layout",
    "live_margin",
    "merge",
    "new_and_reuse",
    "of_stored",
    "quantile",
    "read",
    "shim_library",
    "size_histogram",
    "summarize",
    "timed_words",
    "usable_at_peak",
    "views",
    "visibility",
]
