"""The hardening battery (catalog/hardening.toml): its tests and how hardened
builds pair with their plain builds."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class Kind(StrEnum):
    MISUSE = "misuse"  # a deliberate error: is it caught?
    CONTRACT = "contract"  # a call at the edge of the API: is the contract kept?


class Test(BaseModel):
    """[test.NAME]: one program of the battery (`am_harden --test NAME`)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    kind: Annotated[Kind, Field(strict=False)]
    what: str = Field(description="what the test does, in one line")


class Cost(BaseModel):
    """[cost]: which plain build each hardened build is measured against."""

    model_config = ConfigDict(extra="forbid", strict=True)

    strip: list[str] = Field(default_factory=list, description="suffixes of hardened builds")
    pairs: dict[str, str] = Field(default_factory=dict, description="hardened -> plain")


class HardeningFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    test: dict[str, Test]
    cost: Cost = Field(default_factory=Cost)
