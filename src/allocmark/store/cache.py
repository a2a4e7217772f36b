"""What a report read, kept in the database until the campaign gains a run: a
report over 100,000 runs spent half its time in one query. Its columns of numbers
are kept packed (float64, base64) rather than as JSON lists: decoding a million
numbers from JSON took a report a third of a second, from bytes a few milliseconds."""

from __future__ import annotations

import array
import base64
import binascii
import json
import math
import sqlite3
import sys
from collections.abc import Callable, Sequence
from typing import Any, cast

from allocmark.store import codec
from allocmark.store.base import Base


class Cache(Base):
    def _fingerprint(self, cid: int) -> str:
        """Changes whenever the campaign gains a run (runs are only ever added)."""
        n, last = self.db.execute(
            "SELECT count(*), max(id) FROM runs WHERE campaign_id=?", (cid,)
        ).fetchone()
        return f"{n}:{last}"

    def _kept_rows(
        self, cid: int, query: str, compute: Callable[[], list[Any]], shape: Shape
    ) -> list[Sequence[Any]]:
        """`compute()`'s rows, or the rows kept for `query` while the campaign has no
        new run; either way each of `shape` (a database from elsewhere may hold any
        value in any column, and any rows in its cache): a StoreError if not."""
        mark = self._fingerprint(cid)
        rows = self._cached(cid, query, mark)
        if rows is None:
            rows = compute()
            _check(rows, shape, query)
            # A running campaign reads its cells every precision round and gains runs
            # in between: caching them then would only write what the next round drops.
            if self.campaign(cid).status != "running":
                self._keep(cid, query, mark, rows)
        else:
            _check(rows, shape, query)
        return rows

    def _cached(self, cid: int, query: str, mark: str) -> list[Sequence[Any]] | None:
        """The rows kept for `query`; None when none are, or when they are kept in a
        form this allocmark does not read (an older one's: they are computed again)."""
        row = self.db.execute(
            "SELECT rows_json FROM cell_cache WHERE campaign_id=? AND query=? AND fingerprint=?",
            (cid, query, mark),
        ).fetchone()
        kept = codec.loads(row[0]) if row else None
        if not isinstance(kept, dict) or kept.get("format") != PACKED:
            return None
        try:
            return [[_unpacked(x) for x in r] for r in kept["rows"]]
        except (KeyError, TypeError, ValueError, binascii.Error):
            raise codec.damaged(row[0]) from None

    def _keep(self, cid: int, query: str, mark: str, rows: list[Sequence[Any]]) -> None:
        """Saves the rows for the next report; a database that cannot be written now
        (read-only, busy) simply gets no cache."""
        try:
            with self.db:
                self.db.execute(
                    "INSERT OR REPLACE INTO cell_cache VALUES (?,?,?,?)",
                    (cid, query, mark, json.dumps({"format": PACKED, "rows": _packed(rows)})),
                )
        except sqlite3.OperationalError:
            pass


FLOATS = "a list of finite numbers or None"  # a column of a run's values, in a Shape
ANY = "any value"
Shape = tuple[object, ...]  # per column: a type, a tuple of types, FLOATS or ANY


def _fits(value: Any, kind: object) -> bool:
    if kind is ANY:
        return True
    if kind is FLOATS:
        return isinstance(value, list) and all(
            v is None
            or (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v))
            for v in value
        )
    if kind is float:
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    return isinstance(value, kind) and not isinstance(value, bool)  # type: ignore[arg-type]


def _check(rows: Any, shape: Shape, query: str) -> None:
    """Rows of `shape`, or the database is damaged (it was edited or crafted)."""
    if not isinstance(rows, list) or not all(
        isinstance(r, list | tuple)
        and len(r) == len(shape)
        and all(_fits(v, k) for v, k in zip(r, shape, strict=True))
        for r in rows
    ):
        raise codec.damaged(f"rows of {query}")


PACKED = 2  # rows whose number columns are {"d": base64 float64, "none": [indices]}


def _packed(rows: list[Sequence[Any]]) -> list[list[Any]]:
    return [[_pack(x) for x in r] for r in rows]


_NUMBER_KINDS = {float, type(None)}


def _pack(x: Any) -> Any:
    """A list of floats (None where a run lacks the value) as packed bytes; the rest as
    it is."""
    if not isinstance(x, list):
        return x
    kinds = set(map(type, x))  # one pass in C: a cold report packs 800,000 numbers
    if not kinds <= _NUMBER_KINDS:
        return x
    none = [i for i, v in enumerate(x) if v is None] if type(None) in kinds else []
    data = array.array("d", [math.nan if v is None else v for v in x] if none else x)
    if sys.byteorder == "big":  # kept little-endian: a database moves between machines
        data.byteswap()
    return {"d": base64.b64encode(data.tobytes()).decode(), "none": none}


def _unpacked(x: Any) -> Any:
    if not isinstance(x, dict):
        return x
    data = array.array("d", base64.b64decode(x["d"], validate=True))
    if sys.byteorder == "big":
        data.byteswap()
    values = cast(list[float | None], data.tolist())
    for i in x["none"]:
        values[i] = None
    if not all(v is None or math.isfinite(v) for v in values):
        raise ValueError("a kept number is not finite")  # a crafted cache: damaged
    return values
