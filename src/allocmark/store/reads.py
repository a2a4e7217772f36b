"""What a report reads: runs, cells grouped by SQLite, profiles, RSS series and
the allocators' own statistics."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from typing import Any

from allocmark.errors import StoreError
from allocmark.model import AllocatorRuns, Params, Profiled, RssSeries, StoredRun
from allocmark.store import codec
from allocmark.store.cache import ANY, FLOATS, Cache

# Run columns a cell can carry; rep names the block a run belongs to (pairing).
# Faults and context switches are rusage's, of the run's whole tree.
RUN_COLUMNS = (
    "wall_s",
    "user_s",
    "sys_s",
    "maxrss_kib",
    "rep",
    "minflt",
    "majflt",
    "nvcsw",
    "nivcsw",
)


def _sparse(metrics: Sequence[str], text: str) -> dict[str, tuple[float | None, ...]]:
    """ "a=1;b=2,,a=3" (a run's metrics, runs by commas) as a column per metric."""
    runs = [
        dict(item.split("=", 1) for item in run.split(";") if item) if run else {}
        for run in text.split(",")
    ]
    try:
        return {m: tuple(float(r[m]) if m in r else None for r in runs) for m in metrics}
    except ValueError:
        raise codec.damaged(text[:80]) from None


class Reads(Cache):
    def runs(self, cid: int, metrics: Sequence[str] | None = None) -> list[StoredRun]:
        """Every finished run of a campaign, with its metrics (only `metrics`, if given)."""
        # Named metrics come as extra columns (an indexed lookup each, done by
        # SQLite); all metrics come from one scan of the metrics table.
        names = list(metrics) if metrics is not None else []
        picks = "".join(
            ", (SELECT value FROM metrics WHERE run_id = runs.id AND name = ?)" for _ in names
        )
        rows = self.db.execute(
            "SELECT id, seq, allocator, workload, params_json, rep, status, wall_s, user_s, "
            "sys_s, maxrss_kib, detail, partial, role, labels_json, minflt, majflt, nvcsw, "
            f"nivcsw{picks} FROM runs "
            "WHERE campaign_id=? ORDER BY seq",
            (*names, cid),
        ).fetchall()
        values = (
            self._metrics(cid)
            if metrics is None
            else {
                r[0]: {n: v for n, v in zip(names, r[19:], strict=True) if v is not None}
                for r in rows
            }
        )
        # Many runs share their parameters and labels: parse each text once.
        params: dict[str, Params] = {}
        labels: dict[str, dict[str, str]] = {}
        return [
            StoredRun(
                seq=codec.integer(r[1]),
                allocator=codec.text(r[2]),
                workload=codec.text(r[3]),
                params=params.get(r[4]) or params.setdefault(r[4], codec.params(r[4])),
                rep=codec.integer(r[5]),
                status=codec.status(r[6]),
                wall_s=codec.number(r[7] or 0),
                user_s=codec.number(r[8] or 0),
                sys_s=codec.number(r[9] or 0),
                maxrss_kib=codec.integer(r[10] or 0),
                metrics=codec.numbers(values.get(r[0], {})),
                detail=codec.text(r[11] or ""),
                partial=bool(r[12]),
                role=codec.text(r[13]),
                labels=labels[r[14]]
                if r[14] in labels
                else labels.setdefault(r[14], codec.text_map(r[14])),
                minflt=codec.integer(r[15] or 0),
                majflt=codec.integer(r[16] or 0),
                nvcsw=codec.integer(r[17] or 0),
                nivcsw=codec.integer(r[18] or 0),
            )
            for r in rows
        ]

    def grouped(
        self, cid: int, metrics: Sequence[str], columns: Sequence[str] = RUN_COLUMNS
    ) -> list[AllocatorRuns]:
        """Every row x allocator's runs (model.AllocatorRuns: the runs behind its cells),
        column by column, grouped by SQLite itself: a report over 100,000 runs reads a
        few thousand rows instead of building 100,000 objects."""
        return self._grouped(cid, metrics, columns, sparse=False)

    def sparse_grouped(
        self, cid: int, metrics: Sequence[str], columns: Sequence[str]
    ) -> list[AllocatorRuns]:
        """As grouped(), for metrics most runs lack or that few reports read (what
        explains a difference): one lookup per run for all of them instead of one per
        metric (a third of the time over 100,000 runs)."""
        return self._grouped(cid, metrics, columns, sparse=True)

    def _grouped(
        self, cid: int, metrics: Sequence[str], columns: Sequence[str], sparse: bool
    ) -> list[AllocatorRuns]:
        if not set(columns) <= set(RUN_COLUMNS):
            raise ValueError(f"columns must be among {RUN_COLUMNS}")
        query = json.dumps(["sparse" if sparse else "floats", list(metrics), list(columns)])
        read = self._sparse_rows if sparse else self._grouped_rows
        values_shape = (FLOATS,) * (len(columns) + len(metrics) * (not sparse))
        shape = (str, str, str, str, (int, type(None)), str, (int, type(None)), *values_shape)
        shape += (str,) if sparse else ()
        rows = self._kept_rows(cid, query, lambda: read(cid, metrics, columns), shape)
        hosts = self._hosts({r[6] for r in rows})

        def values(r: Sequence[Any]) -> dict[str, tuple[float | None, ...]]:
            if sparse:
                own = dict(zip(columns, r[7:], strict=False))
                return {n: tuple(v) for n, v in own.items()} | _sparse(metrics, r[-1])
            return {n: tuple(v) for n, v in zip((*columns, *metrics), r[7:], strict=True)}

        return [
            AllocatorRuns(
                allocator=r[0],
                workload=r[1],
                params=codec.params(r[2]) + hosts.get(r[6], ()),
                role=r[3],
                partial=bool(r[4]),
                statuses=codec.statuses(str(r[5])),
                columns=values(r),
            )
            for r in rows
        ]

    def _sparse_rows(
        self, cid: int, metrics: Sequence[str], columns: Sequence[str]
    ) -> list[Sequence[Any]]:
        own = "".join(f", group_concat(ifnull({c}, ''))" for c in columns)
        marks = ",".join("?" * len(metrics))
        rows = self.db.execute(
            "SELECT allocator, workload, params_json, role, max(partial), group_concat(status), "
            f"machine_id{own}, group_concat(ifnull((SELECT group_concat(name || '=' || value, "
            f"';') FROM metrics WHERE run_id = r.id AND name IN ({marks})), ''), ',') "
            "FROM runs r WHERE campaign_id=? GROUP BY allocator, workload, params_json, role, "
            "machine_id",
            (*metrics, cid),
        ).fetchall()
        return [
            [*r[:7], *(list(codec.floats(text)) for text in r[7:-1]), r[-1] or ""] for r in rows
        ]

    def _grouped_rows(
        self, cid: int, metrics: Sequence[str], columns: Sequence[str]
    ) -> list[Sequence[Any]]:
        """The grouped rows, their value columns parsed (so is what the cache keeps)."""
        own = "".join(f", group_concat(ifnull({c}, ''))" for c in columns)
        picks = "".join(
            ", group_concat(ifnull((SELECT value FROM metrics WHERE run_id = r.id AND name = ?),"
            " ''), ',')"
            for _ in metrics
        )
        rows = self.db.execute(
            "SELECT allocator, workload, params_json, role, max(partial), group_concat(status), "
            f"machine_id{own}{picks} FROM runs r WHERE campaign_id=? "
            "GROUP BY allocator, workload, params_json, role, machine_id",
            (*metrics, cid),
        ).fetchall()
        return [[*r[:7], *(list(codec.floats(text)) for text in r[7:])] for r in rows]

    def _metrics(self, cid: int) -> dict[int, dict[str, float]]:
        out: dict[int, dict[str, float]] = {}
        for run_id, name, value in self.db.execute(
            "SELECT m.run_id, m.name, m.value FROM metrics m JOIN runs r ON r.id = m.run_id "
            "WHERE r.campaign_id=?",
            (cid,),
        ):
            out.setdefault(run_id, {})[name] = value
        return out

    def _hosts(self, ids: set[int | None]) -> dict[int | None, Params]:
        """A campaign that ran on several machines (a cluster) has its cells split by
        machine: a `host` parameter, named by hostname (with the machine's id where
        one host name has several sets of facts). One machine: no parameter."""
        if len(ids) < 2:
            return {}
        names = dict(
            self.db.execute(
                f"SELECT id, hostname FROM machines WHERE id IN ({','.join('?' * len(ids))})",
                tuple(ids),
            ).fetchall()
        )
        unique = len(set(names.values())) == len(names)
        return {
            i: (("host", names.get(i, "?") if unique else f"{names.get(i, '?')}#{i}"),) for i in ids
        }

    def baseline_rss(self, cid: int) -> dict[tuple[str, str], int]:
        """Peak RSS of the campaign's finished baseline runs, by (allocator, workload)."""
        rows = self.db.execute(
            "SELECT allocator, workload, maxrss_kib FROM runs "
            "WHERE campaign_id=? AND role='baseline' AND status='ok'",
            (cid,),
        )
        return {(a, w): codec.integer(rss) for a, w, rss in rows}

    def profiles(self, cid: int) -> list[Profiled]:
        """Every profiled run, in run order, with the kernel's counts of its calls and
        the time inside them."""
        rows = self.db.execute(
            "SELECT r.id, r.allocator, r.workload, r.params_json, p.profile_json, "
            "json_extract(r.labels_json, '$.syscalls_uncounted'), "
            "json_extract(r.labels_json, '$.syscalls_untimed') FROM profiles p "
            "JOIN runs r ON r.id = p.run_id WHERE r.campaign_id=? ORDER BY r.seq",
            (cid,),
        ).fetchall()
        counts: dict[int, dict[str, float]] = {}
        for run_id, name, value in self.db.execute(
            "SELECT m.run_id, m.name, m.value FROM metrics m JOIN profiles p ON p.run_id = "
            "m.run_id JOIN runs r ON r.id = m.run_id WHERE r.campaign_id=? AND (m.name "
            "LIKE 'syscall\\_%' ESCAPE '\\' OR m.name LIKE 'systime\\_%' ESCAPE '\\')",
            (cid,),
        ):
            counts.setdefault(run_id, {})[str(name)] = codec.number(value)
        return [
            Profiled(
                a,
                w,
                codec.params(pj),
                codec.loads(prof),
                counts.get(i, {}),
                codec.text(why or ""),
                codec.text(untimed or ""),
            )
            for i, a, w, pj, prof, why, untimed in rows
        ]

    def rss_series(self, cid: int) -> list[tuple[str, str, Params, RssSeries]]:
        """(allocator, workload, params, series) of every OK measured run that has one."""
        rows = self.db.execute(
            "SELECT r.allocator, r.workload, r.params_json, s.period_us, s.stride, s.t_ms, s.kib "
            "FROM rss_series s JOIN runs r ON r.id = s.run_id "
            "WHERE r.campaign_id=? AND r.status='ok' AND r.role='measure' ORDER BY r.seq",
            (cid,),
        ).fetchall()
        found = []
        for a, w, pj, period, stride, t, kib in rows:
            series = RssSeries(
                codec.unpacked(t),
                codec.unpacked(kib),
                codec.integer(period, 1),
                codec.integer(stride, 1),
            )
            if not series.t_ms or len(series.t_ms) != len(series.kib):
                raise StoreError(f"damaged RSS series of a {a} run of {w}: {self.path}")
            found.append((a, w, codec.params(pj), series))
        return found

    def has_workload(self, cid: int, workload: str) -> bool:
        """Did the campaign plan any run of `workload`? (One indexed lookup.)"""
        row = self.db.execute(
            "SELECT 1 FROM workloads WHERE campaign_id=? AND name=?", (cid, workload)
        ).fetchone()
        return row is not None

    def phased(self, cid: int) -> list[tuple[str, str, Params, dict[str, float]]]:
        """(allocator, workload, params, phase metrics) of every OK measured run of a
        phased workload (one that reports "phases"), in run order."""
        rows = self._kept_rows(
            cid,
            '["phased"]',
            lambda: self.db.execute(
                "SELECT r.id, r.allocator, r.workload, r.params_json, m.name, m.value "
                "FROM runs r JOIN metrics m ON m.run_id = r.id "
                "WHERE r.campaign_id=? AND r.status='ok' AND r.role='measure' "
                "AND r.id IN (SELECT run_id FROM metrics WHERE name='phases') "
                "AND m.name LIKE 'phase\\_%' ESCAPE '\\' ORDER BY r.seq",
                (cid,),
            ).fetchall(),
            (int, str, str, str, str, float),
        )
        runs: dict[int, tuple[str, str, Params, dict[str, float]]] = {}
        for rid, a, w, pj, name, value in rows:
            runs.setdefault(rid, (a, w, codec.params(pj), {}))[3][name] = value
        return list(runs.values())

    def alloc_stats(
        self, cid: int
    ) -> list[tuple[str, str, Params, str, tuple[str, ...], dict[str, list[float]]]]:
        """Per (allocator, workload, params, role) of OK measured or verification runs
        (not the baseline runs, which allocate nothing) that have the allocator's
        statistics: their sources and {alloc_* metric: the runs' values}."""
        # Grouped by SQLite, and kept like the cells: a campaign of native runs has
        # statistics in every run.
        rows = self._kept_rows(
            cid,
            '["alloc_stats"]',
            lambda: self._alloc_stat_rows(cid),
            (str, str, str, str, str, str, ANY, ANY),
        )
        cells: dict[tuple[str, str, str, str], tuple[set[str], dict[str, list[float]]]] = {}
        for a, w, pj, role, name, values, low, high in rows:
            sources, metrics = cells.setdefault((a, w, pj, role), (set(), {}))
            sources |= {str(low or "?"), str(high or "?")}
            metrics[name] = [x for x in codec.floats(values) if x is not None]
        return [
            (a, w, codec.params(pj), role, tuple(sorted(src)), m)
            for (a, w, pj, role), (src, m) in cells.items()
            if "alloc_rss_kib" in m
        ]

    def _alloc_stat_rows(self, cid: int) -> list[Any]:
        return self.db.execute(
            "SELECT r.allocator, r.workload, r.params_json, r.role, m.name, "
            "group_concat(m.value), min(json_extract(r.labels_json, '$.alloc_stats')), "
            "max(json_extract(r.labels_json, '$.alloc_stats')) "
            "FROM runs r JOIN metrics m ON m.run_id = r.id "
            "WHERE r.campaign_id=? AND r.status='ok' AND r.role IN ('measure', 'verify') "
            "AND m.name LIKE 'alloc\\_%' ESCAPE '\\' "
            "GROUP BY r.allocator, r.workload, r.params_json, r.role, m.name",
            (cid,),
        ).fetchall()

    def verified_calls(self, cid: int) -> dict[tuple[str, str], tuple[str, ...]]:
        """Per (workload, params JSON): the functions libam_who saw the program call in
        the cell's verification runs, or a native workload's measured runs said they
        made (`calls_made`, comma-separated: the replay's depend on its trace); only
        functions a partial allocator may lack."""
        out: dict[tuple[str, str], set[str]] = {}
        for workload, params, labels, role in self.db.execute(
            "SELECT workload, params_json, labels_json, role FROM runs WHERE campaign_id=? "
            "AND (role='verify' OR (role='measure' AND labels_json LIKE '%calls_made%')) "
            "AND status='ok'",
            (cid,),
        ):
            found = codec.mapping(labels) if labels else {}
            made = found.get("calls_made") if role == "measure" else None
            calls = json.dumps(made.split(",") if made else []) if made is not None else None
            calls = found.get("calls") if role == "verify" else calls
            if calls is not None:
                key = (str(workload), json.dumps(codec.params(params)))
                out.setdefault(key, set()).update(codec.strings(calls))
        return {k: tuple(sorted(v)) for k, v in out.items()}

    def typical_cost(self) -> dict[str, float]:
        """What one run of each workload took in this database, start to start: the
        median, over its recent successful runs, of the time until the campaign's next
        run started (the launcher, the checks and the store's writes beside the
        program's own wall time, which is the floor). A program of 10 ms costs most of
        a second a run here: its wall time alone forecast "about 0 s" for 30 s of runs."""
        costs: dict[str, list[float]] = {}
        for workload, wall, gap in self.db.execute(
            "SELECT workload, wall_s, next - started FROM ("
            "  SELECT workload, wall_s, status, started, id,"
            "  LEAD(started) OVER (PARTITION BY campaign_id ORDER BY seq) AS next"
            "  FROM runs WHERE id > (SELECT coalesce(max(id), 0) - 20000 FROM runs)"
            ") WHERE status='ok' AND typeof(wall_s) IN ('real', 'integer') "
            "ORDER BY id DESC"
        ):
            cost = float(wall)
            if isinstance(gap, int | float) and math.isfinite(gap) and gap > cost:
                cost = float(gap)
            costs.setdefault(str(workload), []).append(cost)
        return {w: statistics.median(v) for w, v in costs.items()}

    def metric_tally(self, cid: int, name: str, role: str = "measure") -> tuple[int, int, float]:
        """The campaign's runs of `role`, how many of them have one metric above 0 and
        its sum over them (a rare metric such as noise_reruns: one query, not a column
        of every cell; kept as the cells are: a tenth of a second over 100,000 runs).
        One query for all three, so that "N of M runs" counts the same runs."""

        def tally() -> list[Any]:
            row = self.db.execute(
                "SELECT count(*), count(m.value > 0 OR NULL), total(m.value) FROM runs r "
                "LEFT JOIN metrics m ON m.run_id = r.id AND m.name = ? "
                "WHERE r.campaign_id = ? AND r.role = ?",
                (name, cid, role),
            ).fetchone()
            return [[int(row[0]), int(row[1]), codec.number(row[2])]]

        kept = self._kept_rows(cid, json.dumps(["tally", name, role]), tally, (int, int, float))
        # As computed or as kept (a database from elsewhere keeps what it likes): one row
        # of counts and a finite sum, or the database is damaged.
        if len(kept) != 1:
            raise codec.damaged(kept)
        ((runs, above, total),) = kept
        return codec.integer(runs, 0), codec.integer(above, 0), codec.number(total)
