"""The settings catalog (catalog/settings.toml): what `allocmark tune` tries."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, RootModel

Value = int | str


class Style(StrEnum):
    """How a setting reaches the allocator."""

    TUNABLES = "tunables"  # GLIBC_TUNABLES=glibc.malloc.KEY=V:...
    MALLOC_CONF = "malloc_conf"  # MALLOC_CONF=KEY:V,...
    OPTIONS = "options"  # SCUDO_OPTIONS=KEY=V:...
    ENV = "env"  # KEY is an environment variable


class Family(BaseModel):
    """[NAME]: the settings of one allocator (and the entries they apply to)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    applies: list[str] = Field(default_factory=list, description="catalog entries (default: NAME)")
    style: Annotated[Style, Field(strict=False)]
    values: dict[str, list[Value]] = Field(description="setting -> the values to try")


class SettingsFile(RootModel[dict[str, Family]]):
    """catalog/settings.toml: allocator family -> its settings."""
