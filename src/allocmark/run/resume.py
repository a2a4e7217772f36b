"""A resume: the campaign's allocators verified again, and its stored plan checked
against what this allocmark and this user would run, before the loop picks it up."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from allocmark import allocators, workloads
from allocmark.errors import UserError
from allocmark.model import Env, RunSpec, Verified, Workload
from allocmark.run import plan
from allocmark.store import Store, seal
from allocmark.text import printable


def check_signed(store: Store, cid: int, yes: bool) -> list[RunSpec]:
    """Before anything of a stored campaign runs -- the probe that verifies its
    allocators again, a pending run, more blocks or the why pass copied from done runs
    -- the campaign's seal and every run of its plan must verify under this user's key
    (seal.py). What does not is listed, whole, and runs only with `yes`, which signs it
    as the user's own; whatever `created_by` claims. Gives the plan it checked."""
    signed = store.signed_plan(cid)
    campaign = store.campaign_plan(cid)
    unsigned = seal.unsigned(signed, campaign.plan_id)
    sealed = store.sealed(cid)
    if sealed and not unsigned:
        return [s for s, _ in signed]
    if yes:
        store.approve(cid)
        return [s for s, _ in signed]
    origin = campaign.created_by
    where = (
        f"says it was planned by user {origin.uid} on {origin.host}"
        if origin
        else "does not say who planned it"
    )
    what = [] if sealed else [f"its plan and allocators ({_allocators(store, cid)})"]
    if unsigned:
        what.append(f"{len(unsigned)} of its runs")
    commands = sorted({shown(s) for s in unsigned})
    more = f"\n  ... and {len(commands) - 20} more" if len(commands) > 20 else ""
    runs = "".join(f"\n  {c}" for c in commands[:20]) + more
    raise UserError(
        f"campaign {cid} in {store.path} {where}, and {' and '.join(what)} are not "
        f"signed by you ({seal.key_path()}): changed since they were planned, or "
        f"planned elsewhere. Resuming it runs them{':' if runs else '.'}{runs}"
        "\nadd --yes to run them"
    )


def _allocators(store: Store, cid: int) -> str:
    """The stored allocators as a resume would load them: name, library, environment."""
    out = []
    for spec, _ in store.allocator_specs(cid):
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in spec.env)
        out.append(" ".join(x for x in (spec.name, *spec.paths, env) if x))
    return printable("; ".join(out)[:2000])


def check_resume(
    store: Store, cid: int, verified: Sequence[Verified], planned: Sequence[RunSpec]
) -> None:
    """A resume runs what the database says, so it checks what that is. Each pending run
    must be what the catalog (or the campaign's own command) makes of its row, a run of
    a workload neither knows is refused, and all runs of a cell share one command.
    `planned`: the whole plan, as check_signed read it."""
    pending = store.pending(cid)
    catalog = dict(workloads.load_catalog())
    by_name = {v.spec.name: v for v in verified}
    if (command := store.command_argv(cid, workloads.COMMAND)) is not None:
        given = _given_env(planned, by_name)
        catalog[workloads.COMMAND] = workloads.command_workload(command, given)
    problems = [_changed(spec, catalog, by_name) for spec in pending]
    if problem := next((p for p in problems if p), None) or plan.mixed(list(planned)):
        raise UserError(
            f"{store.path}: campaign {cid} cannot be resumed: {problem}; it was "
            "changed since it was planned: start a new campaign"
        )


def _given_env(plan: Sequence[RunSpec], by_name: dict[str, Verified]) -> Env:
    """The variables the user gave the command (`try --env`), as its first measured run
    was planned (and signed): its environment less its allocator's."""
    for spec in plan:
        if spec.workload == workloads.COMMAND and (a := by_name.get(spec.allocator)):
            own = set(a.child_env().items())
            return tuple(kv for kv in spec.env if kv not in own)
    return ()


def _changed(spec: RunSpec, catalog: dict[str, Workload], by_name: dict[str, Verified]) -> str:
    a = by_name.get(spec.allocator)
    if a is None:
        return (
            f"run {spec.seq} names allocator {spec.allocator!r}, which the campaign does not have"
        )
    return plan.differs(spec, catalog, a) or ""


def shown(spec: RunSpec) -> str:
    """A run as a shell line: every variable it sets, then its command (and a service's
    client, an app's steps are in its argv)."""
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in spec.env)
    line = f"{env} {shlex.join(spec.argv)}".strip()
    if spec.app.service:
        line += f"  (client: {shlex.join(spec.app.service.client)})"
    if spec.app.prepare:  # try --prepare: run before it, as the run's user
        line = f"{shlex.join(spec.app.prepare)}; {line}"
    return printable(line)  # a database must not drive the terminal


def reverify(store: Store, cid: int) -> list[Verified]:
    """The campaign's allocators checked again; a changed library refuses the resume."""
    out = []
    for spec, sha in store.allocator_specs(cid):
        now = allocators.verify(spec)
        if not now.usable or now.sha256 != sha:
            found = now.sha256[:12] if now.sha256 else now.status.value
            raise UserError(
                f"allocator {spec.name!r} changed since campaign {cid} started "
                f"(sha256 {str(sha)[:12]} -> {found}); its runs would not be "
                "comparable: start a new campaign instead of --resume"
            )
        out.append(now)
    return out
