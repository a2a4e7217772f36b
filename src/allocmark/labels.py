"""Names: a row's label (the workload and the parameters that vary among its
siblings), its key in stored JSON, and the order rows are shown in; and the words a
user types for a metric group (--metric)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from allocmark.errors import UserError
from allocmark.model import Params


def row_key(workload: str, params: Params) -> tuple[str, str]:
    return workload, json.dumps(params)


def row_order(key: tuple[str, Params]) -> tuple[str, tuple[tuple[str, int, str], ...]]:
    workload, params = key
    return workload, tuple((k, v if isinstance(v, int) else 0, str(v)) for k, v in params)


def label_rows(keys: Sequence[tuple[str, Params]]) -> dict[tuple[str, Params], str]:
    """Name each row by its workload and only the parameters that vary within it."""
    out = {}
    for workload, params in keys:
        siblings = [dict(p) for w, p in keys if w == workload]
        varying = [k for k, v in params if any(s.get(k) != v for s in siblings)]
        text = " ".join(f"{k}={value_text(v)}" for k, v in params if k in varying)
        out[(workload, params)] = f"{workload} {text}".strip()
    return out


def value_text(v: int | str) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


# --metric: the words a user types for the groups, one vocabulary for every verb
# (bisect, compare); the spellings an earlier allocmark took are still read, each said
# to be deprecated (the groups' own names among them).
METRIC_WORDS = {
    "time": "time_s",
    "rss": "peak_rss_kib",
    "memory-time": "rss_mib_s",
    "end-rss": "rss_end_kib",
    "idle-rss": "idle_rss_kib",
    "overhead": "overhead_ratio",
    "throughput": "ops_per_s",
}
OLD_METRIC_WORDS = {
    "peak_rss": "rss",
    "peak-rss": "rss",
    **{group: word for word, group in METRIC_WORDS.items()},
}


def metric_key(word: str) -> tuple[str, str]:
    """The group `--metric word` names, and the deprecation line of an old spelling
    ("" for none)."""
    if word in METRIC_WORDS:
        return METRIC_WORDS[word], ""
    if word in OLD_METRIC_WORDS:
        now = OLD_METRIC_WORDS[word]
        return METRIC_WORDS[now], f"warning: --metric {word} is deprecated: it is {now} now"
    raise UserError(f"--metric {word!r}: choose one of {', '.join(METRIC_WORDS)}")
