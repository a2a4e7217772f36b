"""Rows to and from the database's columns: JSON, packed series, statuses; a damaged
value is a StoreError, never a traceback."""

from __future__ import annotations

import array
import dataclasses
import functools
import json
import math
import sys
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import ValidationError

from allocmark.errors import StoreError
from allocmark.model import (
    AllocatorSpec,
    AppRun,
    RunSpec,
    RunStatus,
    StoredAllocator,
    Verified,
    Workload,
)
from allocmark.schemas import stored

T = TypeVar("T")


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
        found = (
            tuple(map(float, parts))  # the usual case: every run has the value
            if "" not in parts
            else tuple(float(x) if x else None for x in parts)
        )
    except ValueError:  # text in a numeric column: edited or corrupted
        raise damaged(text) from None
    if not all(x is None or math.isfinite(x) for x in found):
        raise damaged(text)  # Inf or NaN: no run measures that
    return found


def params(text: str) -> tuple[tuple[str, int | str], ...]:
    try:
        found = tuple((k, v) for k, v in loads(text))
    except (TypeError, ValueError):
        raise damaged(text) from None
    if not all(isinstance(k, str) and isinstance(v, int | str) for k, v in found):
        raise damaged(text)
    return found


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


def mapping(text: object) -> dict[str, Any]:
    """A JSON column that must hold an object."""
    value = loads(text) if isinstance(text, str) else None
    if not isinstance(value, dict):
        raise damaged(text)
    return value


def strings(text: object) -> tuple[str, ...]:
    """A JSON column that must hold a list of strings (an argv, a list of names)."""
    value = loads(text) if isinstance(text, str) else None
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        raise damaged(text)
    return tuple(value)


def pairs(text: object) -> tuple[tuple[str, str], ...]:
    """A JSON column of [name, value] string pairs (an environment)."""
    value = loads(text) if isinstance(text, str) else None
    if not isinstance(value, list) or not all(
        isinstance(kv, list) and len(kv) == 2 and all(isinstance(x, str) for x in kv)
        for kv in value
    ):
        raise damaged(text)
    return tuple((k, v) for k, v in value)


def integer(value: object, low: int = -(2**63), high: int = 2**63 - 1) -> int:
    """An INTEGER column's value, which SQLite would keep as text or a float too."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise damaged(value)
    return value


def number(value: object) -> float:
    """A REAL column's value: a finite number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise damaged(value)
    return float(value)


def text_or_none(value: object) -> str | None:
    if value is not None and not isinstance(value, str):
        raise damaged(value)
    return value


def text(value: object) -> str:
    if not isinstance(value, str):
        raise damaged(value)
    return value


def allocator_spec(text: object) -> AllocatorSpec:
    """An allocator's stored spec (a StoreError when it is not one)."""
    try:
        return stored.allocator_spec(str(text) if isinstance(text, str) else "")
    except (ValidationError, ValueError, TypeError, RecursionError):
        raise damaged(text) from None


def stored_allocator(row: dict[str, Any]) -> StoredAllocator:
    """An allocators row as the record it was written from, every column checked to be
    of the type it is written with, its JSON columns of their shapes (allocator_row)."""

    def column(key: str, check: Callable[[object], T]) -> T:
        try:
            return check(row.get(key))
        except StoreError:
            raise StoreError(
                f"the results database's allocators.{key} of {str(row.get('name'))[:40]!r} "
                f"holds a damaged value ({str(row.get(key))[:60]!r}): it was edited or "
                "corrupted; restore it from a copy"
            ) from None

    column("spec_json", text)
    return StoredAllocator(
        name=column("name", text),
        status=column("status", text),
        library=column("library", text_or_none),
        sha256=column("sha256", text_or_none),
        version=column("version", text_or_none),
        reason=column("reason", text_or_none),
        lacks=column("lacks_json", lambda v: strings(v or "[]")),
        env=column("env_json", text_map),
        served=column("served_json", lambda v: pairs_or_none(v or "[]")),
    )


def text_map(value: object) -> dict[str, str]:
    """A JSON column of an object of strings (a run's labels, an environment)."""
    found = mapping(value or "{}")
    if not all(isinstance(v, str) for v in found.values()):
        raise damaged(value)
    return found


def numbers(values: Mapping[str, object]) -> dict[str, float]:
    """A run's metrics: each a finite number."""
    return {k: number(v) for k, v in values.items()}


def pairs_or_none(value: object) -> tuple[tuple[str, str | None], ...]:
    """[name, value] pairs whose value may be null (what served each function)."""
    found = loads(value) if isinstance(value, str) else None
    if not isinstance(found, list) or not all(
        isinstance(kv, list)
        and len(kv) == 2
        and isinstance(kv[0], str)
        and isinstance(kv[1], str | None)
        for kv in found
    ):
        raise damaged(value)
    return tuple((k, v) for k, v in found)


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
        s.trace,
    )


# The plan's columns in the order spec_from_row reads them.
PLAN_COLUMNS = (
    "seq, allocator, workload, params_json, rep, argv_json, env_json, timeout, "
    "expect_malloc, result_fd, role, app_json, profile, memory_limit, trace"
)


def spec_from_row(r: tuple[Any, ...]) -> RunSpec:
    """A planned run as stored, every field checked: a plan from elsewhere is read as
    untrusted (a StoreError names the value that is wrong)."""
    return RunSpec(
        seq=integer(r[0]),
        allocator=text(r[1]),
        workload=text(r[2]),
        params=params(r[3]),
        rep=integer(r[4]),
        argv=strings(r[5]),
        env=pairs(r[6]),
        timeout=number(r[7]),
        expect_malloc=text_or_none(r[8]),
        result_fd=bool(integer(r[9])),
        role=text(r[10]),
        app=_app_run(r[11]),
        profile=bool(integer(r[12])),
        memory_limit=integer(r[13] or 0, 0),
        trace=text(r[14] or ""),
    )


def _app_run(text: object) -> AppRun:
    try:
        return stored.app_run(str(text) if isinstance(text, str) else "")
    except (ValidationError, ValueError, TypeError, RecursionError):
        raise damaged(text) from None
