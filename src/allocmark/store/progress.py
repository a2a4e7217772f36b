"""Writing what running a campaign produces: each run the moment it ends, the time
spent against the budget, the noise sentinel's loops, its status and its owner."""

from __future__ import annotations

import dataclasses
import json
import math
import time

from allocmark.errors import StoreError
from allocmark.model import Machine, RunResult, RunSpec, Status, Verified
from allocmark.request import CampaignPlan
from allocmark.store import codec, owner
from allocmark.store.base import Base


class Lifecycle(Base):
    def record(
        self,
        cid: int,
        spec: RunSpec,
        result: RunResult,
        alloc: Verified,
        machine: Machine | None = None,
    ) -> None:
        """Save one finished run and its metrics atomically; `machine`: where it ran,
        if not on the campaign's own machine (a cluster worker)."""
        with self.db:
            mid = (
                (self._machine(machine),)
                if machine
                else self.db.execute(
                    "SELECT machine_id FROM campaigns WHERE id=?", (cid,)
                ).fetchone()
            )
            cur = self.db.execute(
                "INSERT INTO runs (campaign_id, seq, allocator, workload, params_json, rep, "
                "status, exit_code, signal, wall_s, user_s, sys_s, maxrss_kib, minflt, majflt, "
                "nvcsw, nivcsw, started, detail, malloc_object, library, sha256, version, "
                "partial, machine_id, role, labels_json) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    cid,
                    spec.seq,
                    spec.allocator,
                    spec.workload,
                    json.dumps(spec.params),
                    spec.rep,
                    result.status.value,
                    result.exit_code,
                    result.signal,
                    result.wall_s,
                    result.user_s,
                    result.sys_s,
                    result.maxrss_kib,
                    result.minflt,
                    result.majflt,
                    result.nvcsw,
                    result.nivcsw,
                    result.started,
                    result.detail,
                    result.malloc_object,
                    alloc.library,
                    alloc.sha256,
                    alloc.version,
                    int(alloc.status is Status.PARTIAL),
                    mid[0],
                    spec.role,
                    json.dumps(result.labels),
                ),
            )
            # Only a finite number is a measurement (a reader refuses any other as damaged).
            self.db.executemany(
                "INSERT INTO metrics VALUES (?,?,?)",
                [(cur.lastrowid, k, v) for k, v in result.metrics.items() if math.isfinite(v)],
            )
            if result.profile is not None:
                self.db.execute(
                    "INSERT INTO profiles VALUES (?,?)",
                    (cur.lastrowid, json.dumps(result.profile)),
                )
            if result.rss is not None:
                r = result.rss
                self.db.execute(
                    "INSERT INTO rss_series VALUES (?,?,?,?,?)",
                    (
                        cur.lastrowid,
                        r.period_us,
                        r.stride,
                        codec.packed(r.t_ms),
                        codec.packed(r.kib),
                    ),
                )

    def add_spent(self, cid: int, seconds: float) -> None:
        """Count time spent running the campaign against its budget."""
        with self.db:
            self.db.execute("UPDATE campaigns SET spent_s = spent_s + ? WHERE id=?", (seconds, cid))

    def stretch_budget(self, cid: int, budget_s: float) -> CampaignPlan:
        """The campaign's budget raised to `budget_s` (a default budget stretched to its
        first verdict); the budget it had is kept as `budget_given_s`. The plan as stored."""
        plan = self.campaign_plan(cid)
        if plan.precision is None:
            return plan
        plan = dataclasses.replace(
            plan,
            precision=dataclasses.replace(plan.precision, budget_s=budget_s),
            budget_given_s=plan.budget_s if plan.budget_given_s is None else plan.budget_given_s,
        )
        self.save_campaign_plan(cid, plan)
        return plan

    def note_why_pass(self, cid: int, note: str) -> CampaignPlan:
        """What the why pass did (run/whypass.py): it is planned once per campaign."""
        plan = dataclasses.replace(self.campaign_plan(cid), why_pass=note)
        self.save_campaign_plan(cid, plan)
        return plan

    def spent(self, cid: int) -> float:
        row = self.db.execute("SELECT spent_s FROM campaigns WHERE id=?", (cid,)).fetchone()
        return float(row[0]) if row else 0.0

    def measured_overhead(self, cid: int) -> float | None:
        """Seconds each measured run costs beyond its own wall time (the launcher, saving,
        the noise sentinel), from when the measured runs started and ended; None before
        two. The budget's `spent` also holds the set-up runs, which come once."""
        row = self.db.execute(
            "SELECT min(started), max(started + wall_s), sum(wall_s), count(*) FROM runs "
            "WHERE campaign_id=? AND role='measure' AND started > 0 AND wall_s IS NOT NULL",
            (cid,),
        ).fetchone()
        if not row or row[3] < 2:
            return None
        first, last, wall, n = (float(x) for x in row)
        return max(0.0, (last - first - wall) / (n - 1))

    def add_calibration(self, cid: int, after_seq: int, seconds: float) -> None:
        """The calibration loop's time, run between blocks (the noise sentinel)."""
        with self.db:
            self.db.execute(
                "INSERT INTO calibrations VALUES (?,?,?,?)", (cid, after_seq, time.time(), seconds)
            )

    def calibrations(self, cid: int) -> list[float]:
        rows = self.db.execute(
            "SELECT seconds FROM calibrations WHERE campaign_id=? ORDER BY at", (cid,)
        )
        found = [codec.number(r[0]) for r in rows]
        if any(x <= 0 for x in found):  # a loop's time: never 0 where allocmark wrote it
            raise codec.damaged(min(found))
        return found

    def set_status(self, cid: int, status: str) -> None:
        """A finished or interrupted campaign has no owner any more."""
        with self.db:
            self.db.execute(
                "UPDATE campaigns SET status=?, finished=?, owner_json=NULL WHERE id=?",
                (status, time.time() if status == "finished" else None, cid),
            )

    def claim(self, cid: int, take_over: bool = False) -> None:
        """Make this process the campaign's owner, unless another live one is."""
        me = owner.me()
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")  # read and write the owner atomically
            row = self.db.execute("SELECT owner_json FROM campaigns WHERE id=?", (cid,))
            found = owner.from_json(codec.json_or_none(row.fetchone()))
            if found and found != me and not take_over:
                self._refuse(cid, found)
            self.db.execute(
                "UPDATE campaigns SET owner_json=?, status='running' WHERE id=?",
                (json.dumps(me.as_json()), cid),
            )

    def _refuse(self, cid: int, found: owner.Owner) -> None:
        state = owner.alive(found)
        if state is False:
            return  # its owner died (killed, machine crashed): take it over
        where = f"`allocmark run --resume --db {self.path}`"
        if state is None:
            raise StoreError(
                f"{self.path}: campaign {cid} is owned by {found.describe()}, which this "
                f"machine cannot check; if it no longer runs, take it over with {where[:-1]} "
                "--take-over`"
            )
        raise StoreError(
            f"{self.path}: campaign {cid} is being run by {found.describe()}; wait for it "
            f"to end, or stop it (kill {found.pid}) and resume with {where}"
        )
