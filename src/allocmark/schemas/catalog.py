"""An allocator catalog file: preloadable libraries and crate-built recipes."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.+-]{1,64}$")]  # selection.NAME_RULE
StrList = list[str] | str


class Backend(StrEnum):
    """The allocator a recipe's crate bundles (native/preload-rs)."""

    DLMALLOC = "dlmalloc"
    HARDENED = "hardened"
    HOARD = "hoard"
    ISOALLOC = "isoalloc"
    JEMALLOC = "jemalloc"
    MIMALLOC = "mimalloc"
    RPMALLOC = "rpmalloc"
    SCUDO = "scudo"
    SNMALLOC = "snmalloc"
    TCMALLOC = "tcmalloc"  # Google's per-CPU TCMalloc (libtcmalloc-sys)


class Role(StrEnum):
    """What an allocator is for; only general ones are recommended for speed or memory."""

    GENERAL = "general"
    DEBUG = "debug"  # hunts heap bugs (Electric Fence, dmalloc): the hardening reference
    WRAPPER = "wrapper"  # another allocator behind a shim of its own (headers, size classes)


_ROLE = Field(
    Role.GENERAL,
    strict=False,
    description='"general"; "debug" (a debugging allocator: the hardening battery, not '
    '"all", never recommended); "wrapper" (not the allocator\'s own C code: never recommended)',
)
_LICENSE = Field("", description="its licence where it binds what is built from it (GPL)")


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
        "auto",
        pattern=r"^(probe:\w+|dpkg|auto|none)$",
        description='how its version is read: "probe:NAME", "dpkg", "auto" or "none"',
        json_schema_extra={"expected": "one of probe:NAME, dpkg, auto, none"},
    )
    baseline: bool = False
    hidden: bool = Field(False, description='left out of "all"; name it to use it')
    family: str = Field(
        "",
        description="the allocator it builds, where the name does not say "
        '(a recipe FAMILY names the same one: "jemalloc")',
    )
    role: Role = _ROLE
    license: str = _LICENSE
    env: dict[str, str] = Field(default_factory=dict)
    variant: dict[Name, Variant] = Field(default_factory=dict)


class Flavor(_Strict):
    description: str = ""
    crate_features: StrList = Field(default_factory=list)


class RecipeVersion(_Strict):
    crate_version: str = Field(description='the crate version bundling it, e.g. "=0.1.39"')
    crate_features: StrList = Field(default_factory=list)
    crate: str | None = Field(None, description="another crate than the recipe's bundles it")
    note: str = Field("", description="what this version is, where its name does not say")


class RecipeEntry(_Strict):
    """[recipe.FAMILY]: an allocator built from its crates.io -sys crate."""

    description: str = ""
    crate: str
    backend: Annotated[Backend, Field(strict=False)]  # TOML gives a string
    crate_features: StrList = Field(default_factory=list)
    build_env: dict[str, str] = Field(default_factory=dict)
    needs_source: bool = False
    source_only: bool = Field(
        False,
        description="take only the crate's bundled sources (its Rust code does not "
        "build): native/preload-rs/build.rs compiles the allocator from them",
    )
    sys_std: bool = False
    self_reports: bool = False
    versioned: bool = Field(
        True,
        description="its versions are the allocator's own (false: the crate's, as for "
        "scudo-sys): only then are they set in order beside other builds of the family",
    )
    forwarding: str = ""
    role: Role = _ROLE
    license: str = _LICENSE
    default: str | None = Field(None, description="the version FAMILY alone names")
    flavor: dict[Name, Flavor] = Field(default_factory=dict)
    version: dict[Name, RecipeVersion] = Field(default_factory=dict)
    variant: dict[Name, Variant] = Field(default_factory=dict)


class DebianVersion(_Strict):
    """One version of a [debian.NAME] entry (NAME@VERSION): a binary package's library,
    or a source package built here; VERSION is the upstream one."""

    release: Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]{1,30}$")] = Field(
        description='the Debian release that has it: "bullseye", "trixie", "sid"'
    )
    package: str = Field("", description="the binary package whose library is taken")
    source: str = Field("", description="or: the source package built here ([debian.NAME.build])")
    debian_version: str = Field(
        "",
        description='an exact Debian version ("2.8.1-1"); empty: the newest VERSION-* the '
        "release has",
    )
    glibc: str = Field(
        "",
        description="a binary needing a newer glibc than this system's runs under "
        'glibc@VERSION (e.g. "2.43"), the C library changing with it',
    )
    note: str = ""


class DebianBuild(_Strict):
    """How a source package becomes the library: commands in the unpacked source."""

    commands: list[str] = Field(description="shell commands, run in order in the source tree")
    output: str = Field(description="the library they make, relative to the source tree")
    files: StrList = Field(
        default_factory=list,
        description="allocmark's own files (native/debian/...) copied into the source first",
    )


class DebianEntry(_Strict):
    """[debian.NAME]: an allocator taken from another Debian release (NAME@VERSION)."""

    description: str = ""
    glibc: bool = Field(
        False,
        description="the C library itself: programs run under its own "
        "loader (the whole C library changes, not only malloc)",
    )
    library: StrList = Field(
        default_factory=list, description="the library's path in the binary package (globs)"
    )
    companions: StrList = Field(
        default_factory=list,
        description="other libraries of the package it needs, preloaded before it so that "
        "they, not this system's of the same soname, are loaded",
    )
    family: str = ""
    version_probe: str = Field("", description="the probe's name for its version (tcmalloc)")
    role: Role = _ROLE
    license: str = _LICENSE
    env: dict[str, str] = Field(default_factory=dict)
    build: DebianBuild | None = None
    default: str | None = Field(None, description="the version NAME alone names")
    version: dict[Name, DebianVersion] = Field(default_factory=dict)
    variant: dict[Name, Variant] = Field(default_factory=dict)


class GitEntry(_Strict):
    """[git.NAME]: an allocator built from a git repository, one library per revision
    (`-a NAME@git:#REVISIONS` takes the repository from here, `-a NAME@git:PATH#...`
    another one)."""

    description: str = ""
    repository: str = Field("", description="a path or URL of the git repository")
    build: str = Field(description='run by `sh -c` in a clean checkout: "make -j2"')
    output: str = Field(description="the library the build leaves, relative to the checkout")
    build_env: dict[str, str] = Field(default_factory=dict, description="the build's environment")
    env: dict[str, str] = Field(default_factory=dict, description="the measured runs' environment")
    timeout: float = Field(1800.0, gt=0, strict=False, description="seconds a build may take")


class CatalogFile(_Strict):
    """An allocmark allocator catalog (`--catalog FILE`, same form as the built-in one)."""

    model_config = ConfigDict(title="allocmark allocator catalog")

    allocator: dict[Name, AllocatorEntry] = Field(default_factory=dict)
    recipe: dict[Name, RecipeEntry] = Field(default_factory=dict)
    debian: dict[Name, DebianEntry] = Field(default_factory=dict)
    git: dict[Name, GitEntry] = Field(default_factory=dict)
