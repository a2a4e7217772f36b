"""The allocator catalog: built-in and user TOML files as AllocatorSpecs (library
entries, their variants, and the versions and flavors of crate-built recipes)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from allocmark import schemas, tomlfile
from allocmark.allocators import builder, debian
from allocmark.model import AllocatorSpec, Debian, Recipe
from allocmark.schemas.catalog import (
    AllocatorEntry,
    CatalogFile,
    DebianEntry,
    GitEntry,
    RecipeEntry,
    Variant,
)


def builtin_catalog() -> Path:
    return Path(str(resources.files("allocmark") / "catalog" / "allocators.toml"))


def load_catalog(extra: Sequence[Path] = ()) -> list[AllocatorSpec]:
    """Built-in entries, then the user's files; a later entry replaces one of the same name."""
    specs: dict[str, AllocatorSpec] = {}
    for path, user in [(builtin_catalog(), False), *((p, True) for p in extra)]:
        for spec in _load_file(path, user):
            specs[spec.name] = spec
    return list(specs.values())


def git_entries(extra: Sequence[Path] = ()) -> dict[str, GitEntry]:
    """The user's `[git.NAME]` entries (the built-in catalog has none), the later file's
    entry replacing an earlier one of the same name."""
    entries: dict[str, GitEntry] = {}
    for path in extra:
        entries |= schemas.validate(CatalogFile, tomlfile.load(path), str(path)).git
    return entries


def _load_file(path: Path, user: bool) -> list[AllocatorSpec]:
    file = str(path)
    doc = schemas.validate(CatalogFile, tomlfile.load(path), file)
    specs = []
    for name, entry in doc.allocator.items():
        base = _entry_spec(name, entry, user, file)
        specs.extend([base, *(_variant(base, v, vt) for v, vt in entry.variant.items())])
    for family, recipe in doc.recipe.items():
        for base in _recipe_specs(family, recipe, user, file):
            specs.extend([base, *(_variant(base, v, vt) for v, vt in recipe.variant.items())])
    for name, deb in doc.debian.items():
        for base in _debian_specs(name, deb, user, file, _glibc_releases(doc)):
            specs.extend([base, *(_variant(base, v, vt) for v, vt in deb.variant.items())])
    return specs


# Every allocator has a `:nothp` variant, made when it is named (not listed in the
# catalog, nor in "all"): the launcher turns transparent huge pages off for the run
# (am_run.c), as benchmarkers otherwise do system-wide by hand.
NOTHP = "nothp"
_NOTHP = Variant(
    description="transparent huge pages off for this run (prctl, no root)",
    env={"AM_RUN_THP": "never"},
)


def nothp(base: AllocatorSpec) -> AllocatorSpec:
    """`base` (an entry or one of its variants) with transparent huge pages off."""
    spec = _variant(base, NOTHP, _NOTHP)
    return dataclasses.replace(spec, description=f"{base.description}; {_NOTHP.description}")


def _strs(value: str | list[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _entry_spec(name: str, t: AllocatorEntry, user: bool, file: str) -> AllocatorSpec:
    paths = _strs(t.library)
    if not t.system and not paths:
        why = "is required (path of the .so to preload; globs allowed)"
        raise schemas.key_error(file, ("allocator", name, "library"), why)
    return AllocatorSpec(
        name=name,
        description=t.description,
        system=t.system,
        paths=paths,
        package=t.package,
        version_source=t.version,
        env=tuple(sorted(t.env.items())),
        baseline=t.baseline,
        user=user,
        hidden=t.hidden,
        family=t.family,
        role=t.role.value,
        license=t.license,
    )


def _recipe_specs(family: str, t: RecipeEntry, user: bool, file: str) -> list[AllocatorSpec]:
    """One entry per version and flavor: FAMILY@VERSION[+FLAVOR]."""
    base = Recipe(
        family=family,
        backend=t.backend.value,
        crate=t.crate,
        crate_version="",
        upstream_version="",
        crate_features=_strs(t.crate_features),
        build_env=tuple(sorted(t.build_env.items())),
        needs_source=t.needs_source or t.source_only,
        source_only=t.source_only,
        sys_std=t.sys_std,
        self_reports=t.self_reports,
        versioned=t.versioned,
        forwarding=t.forwarding,
    )
    flavors = [("", t.description, ())] + [
        (f, ft.description, _strs(ft.crate_features)) for f, ft in t.flavor.items()
    ]
    if not t.version:
        raise schemas.key_error(
            file,
            ("recipe", family, "version"),
            'is required: VERSION = { crate_version = "=X.Y.Z" }',
        )
    if t.default is not None and t.default not in t.version:
        raise schemas.key_error(
            file, ("recipe", family, "default"), f"{t.default!r} is not one of the versions listed"
        )
    specs = []
    for version, vt in t.version.items():
        for flavor, description, extra in flavors:
            recipe = dataclasses.replace(
                base,
                crate=vt.crate or base.crate,
                note=vt.note,
                crate_version=vt.crate_version,
                upstream_version=version,
                flavor=flavor,
                crate_features=base.crate_features + _strs(vt.crate_features) + extra,
            )
            spec = _recipe_spec(recipe, description, user, t.default == version)
            specs.append(dataclasses.replace(spec, role=t.role.value, license=t.license))
    return specs


def _glibc_releases(doc: CatalogFile) -> dict[str, str]:
    """glibc version -> the release whose libc6 it is: this file's, else the built-in's."""
    out = {v: vt.release for t in doc.debian.values() if t.glibc for v, vt in t.version.items()}
    if not out and doc.debian:
        builtin = schemas.validate(CatalogFile, tomlfile.load(builtin_catalog()), "")
        return _glibc_releases(builtin)
    return out


def _debian_specs(
    name: str, t: DebianEntry, user: bool, file: str, glibcs: dict[str, str]
) -> list[AllocatorSpec]:
    """One entry per version: NAME@VERSION, from a release's binary or source package."""
    if not t.version:
        raise schemas.key_error(
            file,
            ("debian", name, "version"),
            'is required: VERSION = { release = "trixie", package = "..." }',
        )
    specs = []
    for version, vt in t.version.items():
        where = ("debian", name, "version", version)
        if bool(vt.package) == bool(vt.source):
            raise schemas.key_error(
                file,
                where,
                "needs exactly one of package (a binary "
                "package) and source (a source package built here)",
            )
        if vt.source and t.build is None:
            raise schemas.key_error(
                file,
                ("debian", name, "build"),
                f"is required: version {version} is built from source {vt.source!r}",
            )
        if not vt.source and not t.library and not t.glibc:
            raise schemas.key_error(
                file, ("debian", name, "library"), "is required: the library's path in the package"
            )
        if vt.glibc and vt.glibc not in glibcs:
            raise schemas.key_error(
                file,
                (*where, "glibc"),
                f"glibc {vt.glibc} is no version of a [debian.NAME] entry with glibc = true",
            )
        build = t.build if vt.source else None
        origin = Debian(
            release=vt.release,
            package=vt.package,
            source=vt.source,
            members=_strs(t.library),
            companions=_strs(t.companions),
            build=tuple(build.commands) if build else (),
            output=build.output if build else "",
            files=_strs(build.files) if build else (),
            glibc=vt.glibc,
            glibc_release=glibcs.get(vt.glibc, ""),
            debian_version=vt.debian_version,
            is_glibc=t.glibc,
        )
        recipe = Recipe(
            family=name,
            backend="",
            crate="",
            crate_version="",
            upstream_version=version,
            note=vt.note,
            debian=origin,
        )
        spec = _recipe_spec(recipe, t.description, user, t.default == version)
        env = dict(t.env) | debian.glibc_env(recipe)
        out = builder.output_dir(spec.name, recipe)
        specs.append(
            dataclasses.replace(
                spec,
                family=t.family,
                role=t.role.value,
                license=t.license,
                env=tuple(sorted(env.items())),
                companions=tuple(str(out / Path(c).name) for c in origin.companions),
                version_source=f"probe:{t.version_probe}" if t.version_probe else "none",
            )
        )
    return specs


def _recipe_spec(recipe: Recipe, description: str, user: bool, default: bool) -> AllocatorSpec:
    name = f"{recipe.family}@{recipe.upstream_version}" + (
        f"+{recipe.flavor}" if recipe.flavor else ""
    )
    aliases = (f"{recipe.family}+{recipe.flavor}" if recipe.flavor else recipe.family,)
    return AllocatorSpec(
        name=name,
        description=description,
        paths=(str(builder.library_path(name, recipe)),),
        version_source="probe:allocmark",
        user=user,
        recipe=recipe,
        aliases=aliases if default else (),
    )


def _variant(base: AllocatorSpec, vname: str, t: Variant) -> AllocatorSpec:
    env = dict(base.env) | t.env
    return dataclasses.replace(
        base,
        name=f"{base.name}:{vname}",
        aliases=tuple(f"{a}:{vname}" for a in base.aliases),
        description=t.description,
        env=tuple(sorted(env.items())),
        baseline=False,
    )
