"""A row's names: its label (the workload and the parameters that vary among its
siblings), its key in stored JSON, and the order rows are shown in."""

from __future__ import annotations

import json
from collections.abc import Sequence

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
