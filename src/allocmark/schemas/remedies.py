"""The remedies catalog (catalog/remedies.toml): what to try for a named cause."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# answer/why.py's MECHANISMS keys (tests/answer/test_why.py holds them equal): what the
# kernel's counts say an allocator does.
Mechanism = Literal["pages", "maps", "heap", "protect", "locks"]


class Remedy(BaseModel):
    """A cause the why rule names (a signal with most of the difference, or a mechanism
    by the kernel's counts), and the variant that addresses it."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    allocator: str = Field(min_length=1, description='a catalog name, or "*" for any')
    axis: Literal["time", "rss"]
    signals: list[str] = Field(default_factory=list, description="signals of answer/why.py")
    mechanisms: list[Mechanism] = Field(
        default_factory=list,
        description="mechanisms of answer/why.py: the worse allocator's decided count",
    )
    try_: str = Field(alias="try", min_length=1, description='a variant; "{name}": its own')
    says: str = Field(min_length=1)
    threads: bool = Field(
        default=False,
        description="addresses threads: offered only on a row that runs two or more "
        "(its `threads` parameter)",
    )

    @model_validator(mode="after")
    def _a_cause(self) -> Remedy:
        if not (self.signals or self.mechanisms):
            raise ValueError("a remedy names signals or mechanisms (or both)")
        return self


class RemediesFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    remedy: list[Remedy] = Field(default_factory=list)
