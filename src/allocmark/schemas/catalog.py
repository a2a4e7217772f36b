"""An allocator catalog file: preloadable libraries and crate-built recipes."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.+-]{1,64}$")]  # selection.NAME_RULE
StrList = list[str] | str


class Backend(StrEnum):
    """The allocator a recipe's crate bundles (native/preload-rs)."""

    HARDENED = "hardened"
    JEMALLOC = "jemalloc"
    MIMALLOC = "mimalloc"
    RPMALLOC = "rpmalloc"
    SCUDO = "scudo"
    SNMALLOC = "snmalloc"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class Variant(_Strict):
    """[allocator.NAME.variant.V]: the same library with extra environment (NAME:V)."""

    description: str = ""
    env: dict[str, str] = Field(default_factory=dict)


class AllocatorEntry(_Strict):
    """[allocator.NAME]: a library to preload (or the system's own malloc)."""

    description: str = ""
    system: bool = Field(False, description="the C library's malloc: nothing is preloaded")
    library: StrList = Field(
        default_factory=list, description="candidate paths of the .so, globs allowed"
    )
    package: str | None = Field(None, description="the Debian package that provides it")
    version: str = Field(
        "auto", pattern=r"^(probe:\w+|dpkg|auto|none)$",
        description='how its version is read: "probe:NAME", "dpkg", "auto" or "none"',
        json_schema_extra={"expected": "one of probe:NAME, dpkg, auto, none"},
    )  # fmt: skip
    baseline: bool = False
    hidden: bool = Field(False, description='left out of "all"; name it to use it')
    env: dict[str, str] = Field(default_factory=dict)
    variant: dict[Name, Variant] = Field(default_factory=dict)


class Flavor(_Strict):
    description: str = ""
    crate_features: StrList = Field(default_factory=list)


class RecipeVersion(_Strict):
    crate_version: str = Field(description='the crate version bundling it, e.g. "=0.1.39"')
    crate_features: StrList = Field(default_factory=list)


class RecipeEntry(_Strict):
    """[recipe.FAMILY]: an allocator built from its crates.io -sys crate."""

    description: str = ""
    crate: str
    backend: Annotated[Backend, Field(strict=False)]  # TOML gives a string
    crate_features: StrList = Field(default_factory=list)
    build_env: dict[str, str] = Field(default_factory=dict)
    needs_source: bool = False
    sys_std: bool = False
    self_reports: bool = False
    forwarding: str = ""
    default: str | None = Field(None, description="the version FAMILY alone names")
    flavor: dict[Name, Flavor] = Field(default_factory=dict)
    version: dict[Name, RecipeVersion] = Field(default_factory=dict)
    variant: dict[Name, Variant] = Field(default_factory=dict)


class CatalogFile(_Strict):
    """An allocmark allocator catalog (`--catalog FILE`, same form as the built-in one)."""

    model_config = ConfigDict(title="allocmark allocator catalog")

    allocator: dict[Name, AllocatorEntry] = Field(default_factory=dict)
    recipe: dict[Name, RecipeEntry] = Field(default_factory=dict)
