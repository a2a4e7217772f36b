"""The remedies catalog (catalog/remedies.toml): what to try for a named cause."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Remedy(BaseModel):
    """A cause the why rule names, and the variant that addresses it."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    allocator: str = Field(min_length=1, description='a catalog name, or "*" for any')
    axis: Literal["time", "rss"]
    signals: list[str] = Field(min_length=1, description="signals of answer/why.py")
    try_: str = Field(alias="try", min_length=1, description='a variant; "{name}": its own')
    says: str = Field(min_length=1)
    threads: bool = Field(
        default=False,
        description="addresses threads: offered only on a row that runs two or more "
        "(its `threads` parameter)",
    )


class RemediesFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    remedy: list[Remedy] = Field(default_factory=list)
