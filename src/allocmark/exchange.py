"""The JSON exchange format of runs: written by `report --runs`, read back by
`compare`. Documents carry a format name and a version; `load` refuses others."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from allocmark.errors import UserError
from allocmark.model import RunStatus, StoredRun

FORMAT_VERSION = 1
SUMMARY_FORMAT = "allocmark-summary"
RUNS_FORMAT = "allocmark-runs"


def load(path: Path, kind: str) -> dict[str, Any]:
    """A JSON export of `kind`; another format or an unknown version is refused."""
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not a JSON file ({e})") from None
    except RecursionError:
        raise UserError(f"{path}: JSON nested too deeply to be an allocmark export") from None
    if not isinstance(doc, dict) or doc.get("format") != kind:
        found = doc.get("format") if isinstance(doc, dict) else None
        raise UserError(f"{path}: expected an {kind} export, found format {found!r}")
    if doc.get("version") != FORMAT_VERSION:
        raise UserError(
            f"{path}: {kind} version {doc.get('version')!r} is not one this allocmark reads "
            f"({FORMAT_VERSION}); export it again with this version"
        )
    return doc


def run_rows(runs: Sequence[StoredRun]) -> list[dict[str, Any]]:
    names = sorted({k for r in runs for k in r.metrics})
    labels = sorted({k for r in runs for k in r.labels})
    return [
        {
            "seq": r.seq,
            "role": r.role,
            "allocator": r.allocator,
            "workload": r.workload,
            "params": json.dumps(dict(r.params)),
            "rep": r.rep,
            "status": r.status.value,
            "wall_s": r.wall_s,
            "user_s": r.user_s,
            "sys_s": r.sys_s,
            "maxrss_kib": r.maxrss_kib,
            "partial": r.partial,
            "detail": r.detail,
            **{f"metric.{k}": r.metrics.get(k) for k in names},
            **{f"label.{k}": r.labels.get(k) for k in labels},
        }
        for r in runs
    ]


def runs_from_rows(rows: object) -> list[StoredRun]:
    """The runs of a runs export, as the store would give them."""
    if not isinstance(rows, list):
        raise UserError(f"a runs export's rows are a {type(rows).__name__}, not a list; "
                        "export it again")  # fmt: skip
    try:
        return [_run_from_row(r) for r in rows]
    except (KeyError, ValueError, TypeError, AttributeError) as e:
        raise UserError(f"a runs export has a malformed row ({e}); export it again") from None


def _run_from_row(r: dict[str, Any]) -> StoredRun:
    return StoredRun(
        seq=int(r["seq"]),
        allocator=str(r["allocator"]),
        workload=str(r["workload"]),
        params=tuple((k, v) for k, v in json.loads(r["params"]).items()),
        rep=int(r["rep"]),
        status=RunStatus(r["status"]),
        wall_s=float(r["wall_s"]),
        user_s=float(r["user_s"]),
        sys_s=float(r["sys_s"]),
        maxrss_kib=int(r["maxrss_kib"]),
        metrics={
            k[7:]: float(v) for k, v in r.items() if k.startswith("metric.") and v is not None
        },
        detail=str(r.get("detail", "")),
        partial=bool(r.get("partial")),
        role=str(r.get("role", "measure")),
        labels={k[6:]: str(v) for k, v in r.items() if k.startswith("label.") and v is not None},
    )
