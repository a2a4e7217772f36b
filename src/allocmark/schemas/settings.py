"""The settings catalog (catalog/settings.toml): what `allocmark tune` tries."""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, RootModel, field_validator

Value = int | str


class Style(StrEnum):
    """How a setting reaches the allocator."""

    TUNABLES = "tunables"  # GLIBC_TUNABLES=glibc.malloc.KEY=V:...
    MALLOC_CONF = "malloc_conf"  # MALLOC_CONF=KEY:V,...
    OPTIONS = "options"  # SCUDO_OPTIONS=KEY=V:...
    ENV = "env"  # KEY is an environment variable


class Check(StrEnum):
    """What tells that the allocator takes a setting."""

    VALUE = "value"  # the shown lines differ from those at the defaults
    NAME = "name"  # a shown line names the setting, its value within the line's
    # "(min: A, max: B)" if any (where an unset value shows as 0: glibc)


class ShownBy(BaseModel):
    """How the allocator shows the settings it runs with: a command run under it (with
    `set` added, in the family's style) whose output lines matching `lines` list them."""

    model_config = ConfigDict(extra="forbid", strict=True)

    command: list[str] = Field(
        default_factory=lambda: ["/bin/true"],
        min_length=1,
        description='the program to run; "{ld.so}" is the system\'s dynamic loader',
    )
    set: dict[str, Value] = Field(
        default_factory=dict, description="settings that make the allocator print its own"
    )
    lines: str = Field(description="a regular expression: the lines that show a setting")
    check: Annotated[Check, Field(strict=False)] = Field(
        Check.VALUE, description="value: a setting must change the lines; name: a line must name it"
    )

    @field_validator("lines")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as e:
            raise ValueError(f"not a regular expression ({e})") from None
        return pattern


class Family(BaseModel):
    """[NAME]: the settings of one allocator (and the entries they apply to)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    applies: list[str] = Field(
        default_factory=list,
        description='catalog entries (default: NAME); "FAMILY@*": every build of a recipe',
    )
    style: Annotated[Style, Field(strict=False)]
    variable: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="the environment variable the settings go in (default: the style's "
        "GLIBC_TUNABLES, MALLOC_CONF or SCUDO_OPTIONS)",
    )
    values: dict[str, list[Value]] = Field(description="setting -> the values to try")
    shown_by: ShownBy | None = Field(
        None, description="how to check that the allocator takes a setting (none: unchecked)"
    )


class SettingsFile(RootModel[dict[str, Family]]):
    """catalog/settings.toml: allocator family -> its settings."""
