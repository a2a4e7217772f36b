"""What a report read, kept in the database until the campaign gains a run: a
report over 100,000 runs spent half its time in one query."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

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
        self, cid: int, query: str, compute: Callable[[], list[Any]]
    ) -> list[Sequence[Any]]:
        """`compute()`'s rows, or the rows kept for `query` while the campaign has no
        new run."""
        mark = self._fingerprint(cid)
        rows = self._cached(cid, query, mark)
        if rows is None:
            rows = compute()
            # A running campaign reads its cells every precision round and gains runs
            # in between: caching them then would only write what the next round drops.
            if self.campaign(cid).status != "running":
                self._keep(cid, query, mark, rows)
        return rows

    def _cached(self, cid: int, query: str, mark: str) -> list[Sequence[Any]] | None:
        row = self.db.execute(
            "SELECT rows_json FROM cell_cache WHERE campaign_id=? AND query=? AND fingerprint=?",
            (cid, query, mark),
        ).fetchone()
        return list(codec.loads(row[0])) if row else None

    def _keep(self, cid: int, query: str, mark: str, rows: list[Sequence[Any]]) -> None:
        """Saves the rows for the next report; a database that cannot be written now
        (read-only, busy) simply gets no cache."""
        try:
            with self.db:
                self.db.execute(
                    "INSERT OR REPLACE INTO cell_cache VALUES (?,?,?,?)",
                    (cid, query, mark, json.dumps(rows)),
                )
        except sqlite3.OperationalError:
            pass
