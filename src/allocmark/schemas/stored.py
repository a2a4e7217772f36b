"""The store's JSON columns: what a campaign ran on and how, written and read back
by pydantic from the model's own dataclasses (lists become tuples again, nested
dataclasses are rebuilt), instead of converting each by hand."""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import TypeAdapter

from allocmark.model import AllocatorSpec, AppRun
from allocmark.request import CampaignPlan


@cache
def _adapters() -> dict[type[Any], TypeAdapter[Any]]:
    # Built on first use: a report that reads no plan pays nothing for them.
    return {
        AllocatorSpec: TypeAdapter(AllocatorSpec),
        AppRun: TypeAdapter(AppRun),
        CampaignPlan: TypeAdapter(CampaignPlan),
    }


def dump(value: AllocatorSpec | AppRun | CampaignPlan) -> str:
    return _adapters()[type(value)].dump_json(value).decode()


def allocator_spec(text: str) -> AllocatorSpec:
    spec: AllocatorSpec = _adapters()[AllocatorSpec].validate_json(text)
    return spec


def app_run(text: str) -> AppRun:
    app: AppRun = _adapters()[AppRun].validate_json(text)
    return app


def campaign_plan(data: object) -> CampaignPlan:
    """A campaign plan from its JSON value (already migrated to this version)."""
    plan: CampaignPlan = _adapters()[CampaignPlan].validate_python(data)
    return plan
