"""Writing a campaign and its plan (each run signed as it is planned, seal.py), and
reading the plan back for a resume."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence

from allocmark.model import AllocatorSpec, Machine, RunSpec, StoredAllocator, Verified, Workload
from allocmark.request import CampaignPlan
from allocmark.store import campaign_plan as campaign_plan_json, codec, owner, seal
from allocmark.store.base import Base


class Plans(Base):
    def new_campaign(
        self,
        name: str,
        seed: int,
        machine: Machine,
        argv: Sequence[str],
        verified: Sequence[Verified],
        workloads: Iterable[Workload],
        plan: Iterable[RunSpec],
        baseline: str | None,
        campaign_plan: CampaignPlan | None = None,
    ) -> int:
        """Campaign, machine, allocators, workloads and the whole plan in one transaction;
        `campaign_plan`: how it runs (None: its blocks fixed, nothing more said)."""
        campaign_plan = campaign_plan or CampaignPlan(seed=seed, min_blocks=0)
        with self.db:
            mid = self._machine(machine)
            cur = self.db.execute(
                "INSERT INTO campaigns (name, created, status, seed, baseline, argv_json, "
                "machine_id, settings_json, owner_json) VALUES (?, ?, 'running', ?, ?, ?, ?, ?, ?)",
                (
                    name,
                    time.time(),
                    seed,
                    baseline,
                    json.dumps(list(argv)),
                    mid,
                    campaign_plan_json.dumps(campaign_plan),
                    json.dumps(owner.me().as_json()),
                ),
            )
            cid = int(cur.lastrowid or 0)
            self.db.executemany(
                "INSERT INTO allocators VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                [codec.allocator_row(cid, v) for v in verified],
            )
            self.db.executemany(
                "INSERT INTO workloads VALUES (?,?,?,?,?,?)",
                [codec.workload_row(cid, w) for w in workloads],
            )
            self._insert_plan(cid, plan, campaign_plan.plan_id)
            self.reseal(cid)
        return cid

    def _insert_plan(self, cid: int, plan: Iterable[RunSpec], plan_id: str) -> None:
        """Each run signed by this user as it is planned (seal.py)."""
        secret = seal.key()
        self.db.executemany(
            "INSERT INTO plan (campaign_id, seq, allocator, workload, params_json, rep, "
            "argv_json, env_json, timeout, expect_malloc, result_fd, role, app_json, profile, "
            "memory_limit, trace, mac) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            # one at a time: plans can be large
            ((*codec.plan_row(cid, s), seal.sign(secret, plan_id, s)) for s in plan),
        )

    def approve(self, cid: int) -> None:
        """The user approved the whole stored campaign (--yes): every run of its plan
        and its seal signed again as this user's, so that what a resume derives from
        them (more blocks, the why pass) is signed as approved."""
        plan_id = self.campaign_plan(cid).plan_id
        secret = seal.key()
        with self.db:
            self.db.executemany(
                "UPDATE plan SET mac=? WHERE campaign_id=? AND seq=?",
                [(seal.sign(secret, plan_id, s), cid, s.seq) for s in self.run_specs(cid)],
            )
            self.reseal(cid)

    def signed_plan(self, cid: int) -> list[tuple[RunSpec, str | None]]:
        """The whole plan, done or not, in order, each run with its stored signature."""
        rows = self.db.execute(
            f"SELECT {codec.PLAN_COLUMNS}, mac FROM plan WHERE campaign_id=? ORDER BY seq", (cid,)
        )
        return [(codec.spec_from_row(r), r[-1]) for r in rows]

    def unsigned(self, cid: int) -> list[RunSpec]:
        """The planned runs whose signature does not verify under this user's key."""
        return seal.unsigned(self.signed_plan(cid), self.campaign_plan(cid).plan_id)

    def command_argv(self, cid: int, name: str) -> tuple[str, ...] | None:
        """The user's own command of a `try` campaign (workload `name`), as stored."""
        row = self.db.execute(
            "SELECT argv_json FROM workloads WHERE campaign_id=? AND name=? AND kind='command'",
            (cid, name),
        ).fetchone()
        argv = codec.loads(row[0]) if row else None
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            return None
        return tuple(argv)

    def extend_plan(self, cid: int, more: Sequence[RunSpec]) -> None:
        """Add runs to a campaign's plan (blocks added until decided), in one transaction."""
        with self.db:
            self._insert_plan(cid, more, self.campaign_plan(cid).plan_id)

    def run_specs(self, cid: int) -> list[RunSpec]:
        """Every run the campaign planned, done or not, in order (its CampaignPlan, how
        it runs, is campaign_plan)."""
        rows = self.db.execute(
            f"SELECT {codec.PLAN_COLUMNS} FROM plan WHERE campaign_id=? ORDER BY seq", (cid,)
        ).fetchall()
        return [codec.spec_from_row(r) for r in rows]

    def pending(self, cid: int) -> list[RunSpec]:
        rows = self.db.execute(
            f"SELECT {codec.PLAN_COLUMNS} FROM plan WHERE campaign_id=? AND seq NOT IN "
            "(SELECT seq FROM runs WHERE campaign_id=?) ORDER BY seq",
            (cid, cid),
        ).fetchall()
        return [codec.spec_from_row(r) for r in rows]

    def allocator_specs(self, cid: int) -> list[tuple[AllocatorSpec, str | None]]:
        """The campaign's allocators as specified, each with the sha256 it had then."""
        rows = self.db.execute(
            "SELECT spec_json, sha256 FROM allocators WHERE campaign_id=? ORDER BY rowid", (cid,)
        )
        return [(codec.allocator_spec(text), codec.text_or_none(sha)) for text, sha in rows]

    def allocators(self, cid: int) -> list[StoredAllocator]:
        """The campaign's allocators as verified, in the order they were stored."""
        cur = self.db.execute("SELECT * FROM allocators WHERE campaign_id=? ORDER BY rowid", (cid,))
        names = [d[0] for d in cur.description]
        return [codec.stored_allocator(dict(zip(names, r, strict=True))) for r in cur.fetchall()]
