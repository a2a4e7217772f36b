"""Which allocators a command line names: catalog names, `FAMILY@*`, the user's
own `name=/path/lib.so[:ENV=VAL,...]` and revisions of a repository
(`name@git:PATH#REVISIONS`, git.py); and which recipes need a build."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from allocmark import text
from allocmark.allocators import catalog, git
from allocmark.errors import UserError
from allocmark.model import AllocatorSpec, GitBuild, Verified


@dataclass(frozen=True)
class Parsed:
    """`-a` values: catalog names, the user's libraries, revisions of repositories."""

    names: list[str]
    adhoc: list[AllocatorSpec]
    revisions: list[git.Selection]


def parse_selection(values: Iterable[str]) -> Parsed:
    """Split `-a` values into catalog names, ad-hoc user allocators and git revisions."""
    names: list[str] = []
    adhoc: list[AllocatorSpec] = []
    revisions: list[git.Selection] = []
    for value in values:
        tokens = _split_tokens(value)
        if not tokens:  # `-a ''` must not mean "every allocator"
            raise UserError(f"-a {value!r} names no allocator; e.g. -a glibc,jemalloc")
        for token in tokens:
            if git.is_token(token):
                revisions.append(git.parse(token))
            elif "=" in token:
                adhoc.append(_adhoc(token))
            else:
                names.append(token)
    for sel in revisions:
        if not re.fullmatch(NAME_PATTERN, sel.name, re.ASCII):
            raise UserError(f"-a {sel.name[:80]}@git:…: the name {sel.name[:80]!r} {NAME_RULE}")
    seen = [*names, *(a.name for a in adhoc), *(s.name for s in revisions)]
    if twice := sorted({n for n in seen if seen.count(n) > 1}):
        raise UserError(
            f"-a names {', '.join(map(repr, twice))} more than once; "
            "give each allocator its own name (NAME=/path/lib.so)"
        )
    return Parsed(names, adhoc, revisions)


# A user's allocator name: it is a column header, a file name in --plots, a key in a
# suite; 64 characters of these are plenty (a 100,000-character name made the HTML
# report take 16 s).
NAME_PATTERN = r"[A-Za-z0-9_.+-]{1,64}"
NAME_RULE = "may hold only ASCII letters, digits and _ . + - (at most 64 of them)"


def _split_tokens(value: str) -> list[str]:
    # "mine=/x.so:A=1,B=2,glibc": "B=2" has no path, so it continues mine's env;
    # "mine@git:/r#v1,v2,HEAD": the revisions run to the end of the value.
    tokens: list[str] = []
    parts = [p.strip() for p in value.split(",")]
    if "" in parts and any(parts):  # `-a glibc,,jemalloc`: a name left out
        raise UserError(
            f"-a {value[:80]!r} has an empty name between its commas; "
            "e.g. -a glibc,jemalloc (see `allocmark allocators`)"
        )
    for part in filter(None, parts):
        if tokens and (git.is_token(tokens[-1]) or _continues_env(tokens[-1], part)):
            tokens[-1] += "," + part
        else:
            tokens.append(part)
    return tokens


def _continues_env(token: str, part: str) -> bool:
    return "=" in token and "=" in part and not _looks_like_adhoc(part)


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
    shown = [s.name for s in specs if s.recipe is None and not s.hidden]
    hint = text.suggest(name, [*shown, *(a for s in specs if not s.hidden for a in s.aliases)])
    if hint:
        raise UserError(f"unknown allocator {name[:80]!r}{hint}; `allocmark allocators` lists all")
    raise UserError(
        f"unknown allocator {name[:80]!r}{_listed(shown)}{_recipe_hint(specs)} "
        "(`allocmark allocators` describes each; or give a library: -a NAME=/path/to/lib.so)"
    )


def _listed(names: Sequence[str]) -> str:
    """The names in a refusal, or their count where the list would fill the screen."""
    return f"; known: {', '.join(names)}" if len(names) <= 12 else f"; {len(names)} are known"


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
            f"unknown allocator {name!r}: no recipe {family!r}{text.suggest(family, families)} "
            f"(recipes: {', '.join(families)})"
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
    alloc: Sequence[str] | None, catalogs: Sequence[Path], build: GitBuild | None = None
) -> tuple[list[AllocatorSpec], bool]:
    """Selected allocator specs, and whether the user named them explicitly. `build`:
    how a revision of a repository becomes a library (`--build`, `--library`), where no
    `[git.NAME]` catalog entry says."""
    got = parse_selection(list(alloc or []))
    if build is not None and not got.revisions:
        raise UserError(
            "--build and --library build revisions of a repository: name them "
            "with -a NAME@git:PATH#REV[,REV...] (or drop --build)"
        )
    mine = got.adhoc + [s for sel in got.revisions for s in revisions(sel, catalogs, build)]
    none = not got.names and not mine
    entries = catalog.load_catalog(list(catalogs))
    _unshadowed(got.adhoc, {e.name for e in entries if e.baseline or e.system})
    chosen = select(entries, got.names) if got.names or none else []
    return chosen + mine, bool(alloc)


def _unshadowed(adhoc: Sequence[AllocatorSpec], catalogued: set[str]) -> None:
    """`-a glibc=/path/libmimalloc.so.2`: a library of the user's under the name of
    the baseline (the system's allocator) would be measured as the baseline every
    ratio is against: refused, with a name of its own as the fix. A build of another
    family under its name stays allowed (`tune -a mimalloc=./mine.so` tunes it with
    mimalloc's settings)."""
    for spec in adhoc:
        if spec.name in catalogued:
            raise UserError(
                f"-a {spec.name}={spec.paths[0]}: {spec.name} is the baseline's name, and "
                f"your library would be measured as the baseline; give it a name of "
                f"its own, e.g. -a {spec.name}-mine={spec.paths[0]} (and -a {spec.name} beside "
                "it to compare)"
            )


def revisions(
    sel: git.Selection, catalogs: Sequence[Path], build: GitBuild | None
) -> list[AllocatorSpec]:
    """The allocators of `-a NAME@git:REPOSITORY#REVISIONS`, the recipe from `build`
    or the catalog's [git.NAME] entry."""
    entry = catalog.git_entries(catalogs).get(sel.name)
    if build is None and entry is None:
        raise UserError(
            f"-a {sel.name}@git:…: how is a revision built? Give --build CMD and "
            "--library LIB (the library it makes, relative to the checkout), or a "
            f"[git.{sel.name}] entry in a --catalog file"
        )
    if build is None:
        assert entry is not None
        build = GitBuild(
            entry.build, entry.output, tuple(sorted(entry.build_env.items())), entry.timeout
        )
    repository = sel.repository or (entry.repository if entry else "")
    env = tuple(sorted(entry.env.items())) if entry else ()
    return git.specs(sel, repository, build, env, entry.description if entry else "")
