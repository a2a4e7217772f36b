"""The campaign plan (request.CampaignPlan) to and from its column, settings_json: a
versioned JSON object. A plan stored before it had a version (version 1: a flat object
of settings, each read by key) is migrated as it is read, never rewritten. A store
holding version-2 plans has schema 12 (schema.py), which an older allocmark refuses
rather than misreads. A value that is not a plan is a StoreError."""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import ValidationError

from allocmark.errors import StoreError
from allocmark.request import PLAN_VERSION, CampaignPlan
from allocmark.schemas import stored


def dumps(plan: CampaignPlan) -> str:
    return stored.dump(plan)


def loads(text: str | None, where: str) -> CampaignPlan:
    """The plan stored as `text` (`where` names it in an error)."""
    try:
        data = json.loads(text or "{}")
    except (ValueError, RecursionError):  # RecursionError: nested deeper than any plan
        raise StoreError(f"{where}: its plan is not JSON") from None
    if not isinstance(data, dict):
        raise StoreError(f"{where}: its plan is not a JSON object")
    version = data.get("version", 1)
    if version == 1:
        data = from_v1(data)
    elif version != PLAN_VERSION:
        raise StoreError(
            f"{where}: its plan has version {version!r}; this allocmark reads versions 1 to "
            f"{PLAN_VERSION}: report it with a newer allocmark"
        )
    try:
        plan = stored.campaign_plan(data)
    except ValidationError as e:
        first = e.errors()[0]
        at = ".".join(map(str, first["loc"]))
        raise StoreError(f"{where}: its plan's {at or 'value'} is wrong: {first['msg']}") from None
    if wrong := _out_of_range(plan):
        raise StoreError(f"{where}: its plan's {wrong}: it was edited or corrupted")
    return plan


def _out_of_range(plan: CampaignPlan) -> str:
    """What of a well-typed plan no allocmark writes (a database from elsewhere)."""
    counts = {
        "seed": plan.seed,
        "min_blocks": plan.min_blocks,
        "sample": plan.sample,
        "memory_limit": plan.memory_limit,
    }
    if p := plan.precision:
        counts |= {"precision.max_blocks": p.max_blocks}
        if not 0 < p.margin < 1:
            return f"precision.margin is {p.margin}, not between 0 and 1"
        if not 0 <= p.budget_s < math.inf:
            return f"precision.budget_s is {p.budget_s}"
        if p.question not in ("baseline", "releases"):
            return f"precision.question is {p.question!r}"
    for name, value in counts.items():
        if not 0 <= value < 2**63:
            return f"{name} is {value}"
    if plan.why not in ("auto", "on", "off"):
        return f"why is {plan.why!r}"
    if not 0 <= plan.expected_s < math.inf:
        return f"expected_s is {plan.expected_s}"
    return ""


def from_v1(old: dict[str, Any]) -> dict[str, Any]:
    """A version-1 plan (a flat object; blocks said as runs, "min_runs" and "max_runs";
    some keys under older names still: "target_ci" for the margin, "profile" for the
    sampling) as version 2's JSON value."""
    from allocmark.stats import DEFAULT_MARGIN  # numpy with it: only a migration pays

    out: dict[str, Any] = {"version": PLAN_VERSION, "seed": 1}  # 1: run's default seed
    for key in ("seed", "plan_id", "memory_limit", "expected_s", "stop_on_failure", "why"):
        if key in old:
            out[key] = old[key]
    out["min_blocks"] = old.get("min_runs", 0)
    out["sample"] = old.get("sample", old.get("profile", 0)) or 0
    if isinstance(who := old.get("created_by"), dict):
        out["created_by"] = who
    out["why_pass"] = old.get("why_pass")
    out["budget_given_s"] = old.get("budget_given_s")
    out["fixed_time"] = _items(old.get("fixed_time"))
    out["calls"] = _items(old.get("calls"))
    out["left_out"] = _items(old.get("left_out"))
    if "margin" in old or "target_ci" in old:  # blocks were added until decided
        out["precision"] = {
            "max_blocks": old.get("max_runs", out["min_blocks"]),
            "margin": old.get("margin") or old.get("target_ci") or DEFAULT_MARGIN,
            "budget_s": old.get("budget_s") or 0.0,
            "race": old.get("race") or "",
            "stretch": bool(old.get("stretch")),
        }
    return out


def _items(value: object) -> list[tuple[str, object]]:
    return list(value.items()) if isinstance(value, dict) else []
