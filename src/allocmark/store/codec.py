"""Rows to and from the database's columns: JSON, packed series, statuses; a damaged
value is a StoreError, never a traceback."""

from __future__ import annotations

import array
import dataclasses
import functools
import json
import sys
from typing import Any

from allocmark.errors import StoreError
from allocmark.model import RunSpec, RunStatus, Verified, Workload
from allocmark.schemas import stored


def json_or_none(row: tuple[Any, ...] | None) -> object:
    try:
        return json.loads(row[0]) if row and row[0] else None
    except ValueError:
        return None


_STATUS = {s.value: s for s in RunStatus}


def status(text: object) -> RunStatus:
    """A status this allocmark does not know (a newer one, a hand-edited row) counts
    as an error: never as a measurement."""
    return _STATUS.get(str(text), RunStatus.ERROR)


@functools.lru_cache(maxsize=1024)
def statuses(joined: str) -> tuple[RunStatus, ...]:
    """The statuses of a cell's runs, from their group_concat (see status()); kept by
    the text: most cells of a campaign read alike ("ok,ok,...")."""
    return tuple(_STATUS.get(x, RunStatus.ERROR) for x in joined.split(","))


def floats(text: str | None) -> tuple[float | None, ...]:
    """A group_concat of numbers; an empty item is a run without that metric."""
    if text is None:
        return ()
    parts = text.split(",")
    try:
        if "" not in parts:  # the usual case: every run has the value
            return tuple(map(float, parts))
        return tuple(float(x) if x else None for x in parts)
    except ValueError:  # text in a numeric column: edited or corrupted
        raise damaged(text) from None


def params(text: str) -> tuple[tuple[str, int | str], ...]:
    try:
        return tuple((k, v) for k, v in loads(text))
    except (TypeError, ValueError):
        raise damaged(text) from None


def packed(values: tuple[int, ...]) -> bytes:
    """Little-endian uint32s, so that a database moves between machines."""
    a = array.array("I", values)
    if sys.byteorder == "big":
        a.byteswap()
    return a.tobytes()


def unpacked(blob: object) -> tuple[int, ...]:
    if not isinstance(blob, bytes) or len(blob) % 4:
        raise damaged(blob)
    a = array.array("I", blob)
    if sys.byteorder == "big":
        a.byteswap()
    return tuple(a)


def loads(text: str) -> Any:
    """A JSON column's value; a damaged one (hand-edited, corrupted) is a StoreError."""
    try:
        return json.loads(text)
    except (TypeError, ValueError, RecursionError):
        raise damaged(text) from None


def damaged(text: object) -> StoreError:
    return StoreError(
        f"the results database holds a damaged value ({str(text)[:60]!r}); "
        "it was edited or corrupted: restore it from a copy"
    )


def allocator_row(cid: int, v: Verified) -> tuple[Any, ...]:
    return (
        cid,
        v.spec.name,
        v.status.value,
        v.library,
        v.sha256,
        v.version,
        json.dumps(v.lacks),
        json.dumps(v.child_env()),
        json.dumps(v.served),
        stored.dump(v.spec),
        v.reason,
    )


def workload_row(cid: int, w: Workload) -> tuple[Any, ...]:
    params = [dataclasses.asdict(p) for p in w.params]
    return (cid, w.name, w.kind, w.description, json.dumps(w.argv), json.dumps(params))


def plan_row(cid: int, s: RunSpec) -> tuple[Any, ...]:
    return (
        cid,
        s.seq,
        s.allocator,
        s.workload,
        json.dumps(s.params),
        s.rep,
        json.dumps(s.argv),
        json.dumps(s.env),
        s.timeout,
        s.expect_malloc,
        int(s.result_fd),
        s.role,
        stored.dump(s.app),
        int(s.profile),
        s.memory_limit,
    )


# The plan's columns in the order spec_from_row reads them.
PLAN_COLUMNS = (
    "seq, allocator, workload, params_json, rep, argv_json, env_json, timeout, "
    "expect_malloc, result_fd, role, app_json, profile, memory_limit"
)


def spec_from_row(r: tuple[Any, ...]) -> RunSpec:
    return RunSpec(
        seq=r[0],
        allocator=r[1],
        workload=r[2],
        params=params(r[3]),
        rep=r[4],
        argv=tuple(loads(r[5])),
        env=tuple((k, v) for k, v in loads(r[6])),
        timeout=r[7],
        expect_malloc=r[8],
        result_fd=bool(r[9]),
        role=r[10],
        app=stored.app_run(r[11]),
        profile=bool(r[12]),
        memory_limit=int(r[13] or 0),
    )
