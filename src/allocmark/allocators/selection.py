"""Which allocators a command line names: catalog names, `FAMILY@*` and the user's
own `name=/path/lib.so[:ENV=VAL,...]`; and which recipes need a build."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from allocmark.allocators import catalog
from allocmark.errors import UserError
from allocmark.model import AllocatorSpec, Verified


def parse_selection(values: Iterable[str]) -> tuple[list[str], list[AllocatorSpec]]:
    """Split `-a` values into catalog names and ad-hoc user allocators."""
    names: list[str] = []
    adhoc: list[AllocatorSpec] = []
    for value in values:
        tokens = _split_tokens(value)
        if not tokens:  # `-a ''` must not mean "every allocator"
            raise UserError(f"-a {value!r} names no allocator; e.g. -a glibc,jemalloc")
        for token in tokens:
            if "=" in token:
                adhoc.append(_adhoc(token))
            else:
                names.append(token)
    seen = [*names, *(a.name for a in adhoc)]
    if twice := sorted({n for n in seen if seen.count(n) > 1}):
        raise UserError(f"-a names {', '.join(map(repr, twice))} more than once; "
                        "give each allocator its own name (NAME=/path/lib.so)")  # fmt: skip
    return names, adhoc


# A user's allocator name: it is a column header, a file name in --plots, a key in a
# suite; 64 characters of these are plenty (a 100,000-character name made the HTML
# report take 16 s).
NAME_PATTERN = r"[A-Za-z0-9_.+-]{1,64}"
NAME_RULE = "may hold only ASCII letters, digits and _ . + - (at most 64 of them)"


def _split_tokens(value: str) -> list[str]:
    # "mine=/x.so:A=1,B=2,glibc": "B=2" has no path, so it continues mine's env.
    tokens: list[str] = []
    for part in filter(None, (p.strip() for p in value.split(","))):
        if tokens and "=" in tokens[-1] and "=" in part and not _looks_like_adhoc(part):
            tokens[-1] += "," + part
        else:
            tokens.append(part)
    return tokens


def _looks_like_adhoc(token: str) -> bool:
    name, _, rest = token.partition("=")
    return ":" not in name and (rest.startswith(("/", "./", "../", "~")) or ".so" in rest)


def _adhoc(token: str) -> AllocatorSpec:
    name, _, rest = token.partition("=")
    path, _, env_text = rest.partition(":")
    if not name or not path:
        raise UserError(f"-a {token!r}: expected NAME=/path/to/lib.so[:ENV=VAL,...]")
    if not re.fullmatch(NAME_PATTERN, name, re.ASCII):
        raise UserError(f"-a {token[:80]!r}: the name {name[:80]!r} {NAME_RULE}")
    env = []
    for pair in filter(None, env_text.split(",")):
        key, eq, val = pair.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise UserError(f"-a {token!r}: {pair!r} is not ENV=VALUE")
        env.append((key, val))
    full = os.path.abspath(os.path.expanduser(path))
    return AllocatorSpec(
        name=name,
        description=f"user library {full}",
        paths=(full,),
        env=tuple(sorted(env)),
        user=True,
    )


def select(specs: Sequence[AllocatorSpec], names: Sequence[str]) -> list[AllocatorSpec]:
    """Catalog entries by name, in the order given.

    "all" (or no name) selects every entry that is neither hidden, nor a
    debugging allocator, nor built from a recipe; `FAMILY@*` (optionally
    `+FLAVOR`, `:VARIANT`) selects every version of a recipe.
    """
    if not names or list(names) == ["all"]:
        return [s for s in specs if not (s.hidden or s.recipe or s.role == "debug")]
    chosen: list[AllocatorSpec] = []
    for name in names:
        chosen.extend(_resolve(specs, name))
    return list({s.name: s for s in chosen}.values())


def _resolve(specs: Sequence[AllocatorSpec], name: str) -> list[AllocatorSpec]:
    by_name = {s.name: s for s in specs} | {a: s for s in specs for a in s.aliases}
    if name in by_name:
        return [by_name[name]]
    base, _, variant = name.rpartition(":")
    if variant == catalog.NOTHP and base:
        return [catalog.nothp(s) for s in _resolve(specs, base)]
    family, at, version = name.partition("@")
    if at:
        return _versions(specs, family, version, name)
    known = ", ".join(s.name for s in specs if s.recipe is None)
    raise UserError(
        f"unknown allocator {name[:80]!r}; known: {known}"
        f"{_recipe_hint(specs)} (or give a library: -a NAME=/path/to/lib.so)"
    )


def _versions(
    specs: Sequence[AllocatorSpec], family: str, version: str, name: str
) -> list[AllocatorSpec]:
    """`jemalloc@*`, `mimalloc@*+secure`: every catalogued version; else a clear refusal."""
    ver = re.split(r"[+:]", version, maxsplit=1)[0]
    suffix = version[len(ver) :]
    known = [(s, s.recipe) for s in specs if s.recipe and s.recipe.family == family]
    if not known:
        families = sorted({s.recipe.family for s in specs if s.recipe})
        raise UserError(
            f"unknown allocator {name!r}: no recipe {family!r} (recipes: {', '.join(families)})"
        )
    if ver == "*":
        found = [s for s, r in known if s.name == f"{family}@{r.upstream_version}{suffix}"]
        if found:
            return found
    versions = ", ".join(dict.fromkeys(r.upstream_version for _, r in known))
    flavors = sorted({f"+{r.flavor}" for _, r in known if r.flavor})
    return _refuse(name, family, versions, flavors)


def _refuse(name: str, family: str, versions: str, flavors: list[str]) -> list[AllocatorSpec]:
    extra = f"; flavors: {', '.join(flavors)}" if flavors else ""
    raise UserError(
        f"unknown allocator {name!r}: {family} versions known to allocmark are {versions}"
        f"{extra} (or {family}@* for all of them)"
    )


def _recipe_hint(specs: Sequence[AllocatorSpec]) -> str:
    families = sorted({s.recipe.family for s in specs if s.recipe})
    return f"; built from crates: {', '.join(f + '@VERSION' for f in families)}" if families else ""


def to_build(
    specs: Sequence[AllocatorSpec], names: Sequence[str], build_all: bool
) -> list[AllocatorSpec]:
    """The recipe entries `alloc build` should build (variants share their base's library)."""
    if build_all:
        return [s for s in specs if s.recipe and ":" not in s.name]
    if not names:
        raise UserError("name allocators to build (e.g. mimalloc@2.1.7+secure) or give --all")
    chosen = [s for s in select(specs, names) if s.recipe]
    if not chosen:
        raise UserError(f"{', '.join(names)}: none of these is built from a crate")
    return chosen


def baseline_name(verified: Sequence[Verified]) -> str | None:
    """The flagged baseline if it is usable, else the first usable allocator."""
    usable = [v for v in verified if v.usable]
    if not usable:
        return None
    flagged = [v for v in usable if v.spec.baseline]
    return (flagged or usable)[0].spec.name


def selected(
    alloc: Sequence[str] | None, catalogs: Sequence[Path]
) -> tuple[list[AllocatorSpec], bool]:
    """Selected allocator specs, and whether the user named them explicitly."""
    names, adhoc = parse_selection(list(alloc or []))
    chosen = select(catalog.load_catalog(list(catalogs)), names) if names or not adhoc else []
    return chosen + adhoc, bool(alloc)
