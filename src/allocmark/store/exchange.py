"""The JSON exchange format of runs: written by `report --runs` (report/rows.py), read
back by `compare`. Documents carry a format name and a version; `load` refuses others."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from allocmark.errors import UserError
from allocmark.model import StoredRun
from allocmark.schemas.exchange import (  # its names, for the readers of exports
    FORMAT_VERSION as FORMAT_VERSION,
    READ_VERSIONS as READ_VERSIONS,
    RUNS_FORMAT as RUNS_FORMAT,
    SUMMARY_FORMAT as SUMMARY_FORMAT,
)

if TYPE_CHECKING:
    from allocmark.schemas.exchange import RunRow


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
    if doc.get("version") not in READ_VERSIONS:
        raise UserError(
            f"{path}: {kind} version {doc.get('version')!r} is not one this allocmark reads "
            f"(versions {', '.join(map(str, READ_VERSIONS))}); export it again with this one"
        )
    return doc


def load_runs(path: Path) -> tuple[dict[str, Any], list[StoredRun]]:
    """The campaign and the runs of a runs export, as the store would give them;
    a malformed document is refused naming its row and column."""
    from allocmark import schemas
    from allocmark.schemas.exchange import RunsExport

    export = schemas.validate(RunsExport, load(path, RUNS_FORMAT), str(path))
    return export.campaign, [_stored(r) for r in export.rows]


def _stored(r: RunRow) -> StoredRun:
    return StoredRun(
        seq=r.seq,
        allocator=r.allocator,
        workload=r.workload,
        params=tuple(r.params.items()),
        rep=r.block,
        status=r.status,
        wall_s=r.wall_s,
        user_s=r.user_s,
        sys_s=r.sys_s,
        maxrss_kib=r.maxrss_kib,
        metrics=r.metrics(),
        detail=r.detail,
        partial=r.partial,
        role=r.role,
        labels=r.labels(),
        minflt=r.minflt,
        majflt=r.majflt,
        nvcsw=r.nvcsw,
        nivcsw=r.nivcsw,
    )
