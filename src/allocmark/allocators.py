"""Allocator catalog: load entries, find their libraries, verify with the probe."""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from allocmark import builder, native, records, schemas, tomlfile
from allocmark.errors import UserError
from allocmark.model import AllocatorSpec, Recipe, Status, Verified
from allocmark.schemas.catalog import AllocatorEntry, CatalogFile, RecipeEntry, Variant

CORE = ("malloc", "free", "calloc", "realloc")
C_API = (
    *CORE,
    "reallocarray",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "malloc_usable_size",
)
PROBE_TIMEOUT_S = 20.0


# ---------------------------------------------------------------------------
# Catalog loading
# ---------------------------------------------------------------------------
def builtin_catalog() -> Path:
    return Path(str(resources.files("allocmark") / "catalog" / "allocators.toml"))


def load_catalog(extra: Sequence[Path] = ()) -> list[AllocatorSpec]:
    """Built-in entries, then the user's files; a later entry replaces one of the same name."""
    specs: dict[str, AllocatorSpec] = {}
    for path, user in [(builtin_catalog(), False), *((p, True) for p in extra)]:
        for spec in _load_file(path, user):
            specs[spec.name] = spec
    return list(specs.values())


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
    return specs


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
        needs_source=t.needs_source,
        sys_std=t.sys_std,
        self_reports=t.self_reports,
        forwarding=t.forwarding,
    )
    flavors = [("", t.description, ())] + [(f, ft.description, _strs(ft.crate_features))
                                           for f, ft in t.flavor.items()]  # fmt: skip
    if not t.version:
        raise schemas.key_error(file, ("recipe", family, "version"),
                                'is required: VERSION = { crate_version = "=X.Y.Z" }')  # fmt: skip
    if t.default is not None and t.default not in t.version:
        raise schemas.key_error(file, ("recipe", family, "default"),
                                f"{t.default!r} is not one of the versions listed")  # fmt: skip
    specs = []
    for version, vt in t.version.items():
        for flavor, description, extra in flavors:
            recipe = dataclasses.replace(
                base,
                crate_version=vt.crate_version,
                upstream_version=version,
                flavor=flavor,
                crate_features=base.crate_features + _strs(vt.crate_features) + extra,
            )
            specs.append(_recipe_spec(recipe, description, user, t.default == version))
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


# ---------------------------------------------------------------------------
# Selection: names and `name=/path/lib.so[:ENV=VAL,...]` from the command line
# ---------------------------------------------------------------------------
def parse_selection(values: Iterable[str]) -> tuple[list[str], list[AllocatorSpec]]:
    """Split `-a` values into catalog names and ad-hoc user allocators."""
    names: list[str] = []
    adhoc: list[AllocatorSpec] = []
    for value in values:
        for token in _split_tokens(value):
            if "=" in token:
                adhoc.append(_adhoc(token))
            else:
                names.append(token)
    return names, adhoc


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
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+", name) or not path:
        raise UserError(f"-a {token!r}: expected NAME=/path/to/lib.so[:ENV=VAL,...]")
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

    "all" (or no name) selects every entry that is neither hidden nor built
    from a recipe; `FAMILY@*` (optionally `+FLAVOR`, `:VARIANT`) selects every
    version of a recipe.
    """
    if not names or list(names) == ["all"]:
        return [s for s in specs if not s.hidden and s.recipe is None]
    chosen: list[AllocatorSpec] = []
    for name in names:
        chosen.extend(_resolve(specs, name))
    return list({s.name: s for s in chosen}.values())


def _resolve(specs: Sequence[AllocatorSpec], name: str) -> list[AllocatorSpec]:
    by_name = {s.name: s for s in specs} | {a: s for s in specs for a in s.aliases}
    if name in by_name:
        return [by_name[name]]
    family, at, version = name.partition("@")
    if at:
        return _versions(specs, family, version, name)
    raise UserError(
        f"unknown allocator {name!r}; known: {', '.join(s.name for s in specs if s.recipe is None)}"
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


# ---------------------------------------------------------------------------
# Verification
# ---------------------------------------------------------------------------
def verify(spec: AllocatorSpec) -> Verified:
    """Find the library, run the probe under it, and judge what serves malloc."""
    if spec.system:
        return _judge(spec, None, _run_probe(spec, None))
    library = _find_library(spec)
    if library is None:
        return Verified(spec, Status.MISSING, reason=_missing_reason(spec))
    problem = _elf_problem(library)
    if problem:
        return Verified(spec, Status.BROKEN, library=library, reason=problem)
    return _judge(spec, library, _run_probe(spec, library))


def verify_all(specs: Iterable[AllocatorSpec]) -> list[Verified]:
    verified = [verify(s) for s in specs]
    for v in verified:
        if v.spec.user and not v.usable:
            raise UserError(f"allocator {v.spec.name!r}: {v.reason}")
    return verified


def _find_library(spec: AllocatorSpec) -> str | None:
    for pattern in spec.paths:
        if pattern.startswith(native.PACKAGE_PREFIX):
            found = native.bundled(pattern.removeprefix(native.PACKAGE_PREFIX))
            if found:
                return os.path.realpath(found)
            continue
        for match in sorted(glob.glob(os.path.expanduser(pattern))):
            if os.path.isfile(match):
                return os.path.realpath(match)
    return None


def _missing_reason(spec: AllocatorSpec) -> str:
    if spec.recipe:
        return f"build with: allocmark alloc build {spec.name.split(':')[0]}"
    if any(p.startswith(native.PACKAGE_PREFIX) for p in spec.paths):
        return "not built into this allocmark install; reinstall with `pip install .`"
    if spec.package:
        sudo = "" if os.geteuid() == 0 else "sudo "
        return f"not installed; install with: {sudo}apt-get install -y {spec.package}"
    return f"{' or '.join(spec.paths)} does not exist; fix the path"


def _elf_problem(path: str) -> str | None:
    with open(path, "rb") as f:
        head = f.read(18)
    if head[:4] != b"\x7fELF":
        return f"{path} is not an ELF file, so not a shared object"
    e_type = int.from_bytes(head[16:18], "little" if head[5] == 1 else "big")
    if e_type != 3:  # ET_DYN
        return f"{path} is an ELF file but not a shared object (e_type {e_type})"
    return None


def _run_probe(spec: AllocatorSpec, library: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"} | dict(spec.env)
    if library:
        env["LD_PRELOAD"] = library
    try:
        return subprocess.run(
            [str(native.program("am_probe"))],
            env=env,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess([], -signal.SIGKILL, "", "probe timed out")


def _judge(
    spec: AllocatorSpec, library: str | None, proc: subprocess.CompletedProcess[str]
) -> Verified:
    broken = _probe_problem(proc)
    if broken:
        return Verified(spec, Status.BROKEN, library=library, reason=broken)
    report = records.one(proc.stdout, "probe", "am_probe")
    lib = library or os.path.realpath(report["libc"])
    broken = _core_problem(report, lib, is_preload=library is not None)
    if broken:
        return Verified(spec, Status.BROKEN, library=library, reason=broken)
    served = tuple((f, _real(o)) for f, o in report["functions"].items())
    lacks = tuple(f for f, o in served if f in C_API and o != lib)
    reason = (
        f"lacks {', '.join(lacks)}: glibc serves them, so a program calling them mixes two heaps"
        if lacks
        else ""
    )
    version = _version(spec, report, lib)
    wrong = _wrong_version(spec, report)
    if wrong:
        return Verified(spec, Status.BROKEN, library=lib, version=version, reason=wrong)
    return Verified(
        spec,
        Status.PARTIAL if lacks else Status.OK,
        library=lib,
        sha256=native.sha256_file(lib),
        version=version,
        served=served,
        lacks=lacks,
        reason=reason,
    )


def _probe_problem(proc: subprocess.CompletedProcess[str]) -> str | None:
    ignored = re.search(r"object '.*' from LD_PRELOAD cannot be preloaded \((.*)\)", proc.stderr)
    if ignored:
        return f"preload ignored by ld.so ({ignored.group(1)})"
    if proc.returncode < 0:
        what = "hangs" if proc.stderr == "probe timed out" else "crashes"
        return f"{what} at load ({signal.Signals(-proc.returncode).name})"
    if proc.returncode != 0:
        return f"probe exited with {proc.returncode}: {proc.stderr.strip()[-300:]}"
    try:
        report = records.one(proc.stdout, "probe", "am_probe")
    except records.RecordError as e:
        return f"probe printed no report (the library writes to stdout?): {e}"
    if not report.get("smoke"):
        return "malloc/calloc/realloc/free smoke test failed (wrong contents)"
    return None


def _core_problem(report: dict[str, Any], expected: str, is_preload: bool) -> str | None:
    for func in CORE:
        owner = _real(report["functions"].get(func))
        if owner != expected:
            if func == "malloc" and is_preload:
                return f"does not export malloc (ld.so bound malloc to {owner})"
            return f"{func} is served by {owner}, not by {expected}"
    return None


def _real(path: str | None) -> str | None:
    return os.path.realpath(path) if path else None


def _wrong_version(spec: AllocatorSpec, report: dict[str, Any]) -> str | None:
    """A built library that states its own version must state the catalogued one."""
    if not spec.recipe or not spec.recipe.self_reports:
        return None
    versions: dict[str, str] = report.get("versions", {})
    stated = versions.get(spec.recipe.family) or versions.get("allocmark", "").split(" ")[-1]
    if stated.split("-")[0] == spec.recipe.upstream_version:
        return None
    return (
        f"the library says it is {spec.recipe.family} {stated or '(nothing)'}, but the catalog "
        f"maps {spec.recipe.crate} {spec.recipe.crate_version} to {spec.recipe.upstream_version}; "
        "fix the version table of the recipe"
    )


def _version(spec: AllocatorSpec, report: dict[str, Any], library: str) -> str | None:
    source = spec.version_source
    if spec.recipe:
        return f"{spec.recipe.upstream_version} ({spec.recipe.crate} {_crate_version(spec)})"
    versions: dict[str, str] = report.get("versions", {})
    if source.startswith("probe:"):
        return versions.get(source.removeprefix("probe:"))
    if source == "auto":
        found = [versions[k] for k in ("jemalloc", "tcmalloc", "mimalloc") if k in versions]
        return found[0] if found else dpkg_version(library)
    return dpkg_version(library) if source == "dpkg" else None


def _crate_version(spec: AllocatorSpec) -> str:
    assert spec.recipe is not None
    out = Path(spec.paths[0]).parent
    exact = builder.read_provenance(out).get("crate_version")
    return str(exact or spec.recipe.crate_version)


def dpkg_version(path: str) -> str | None:
    """Version of the Debian package that owns `path`, if any."""
    if not shutil.which("dpkg-query"):
        return None
    owner = subprocess.run(["dpkg-query", "-S", path], capture_output=True, text=True, check=False)
    if owner.returncode != 0:
        # Debian lists files under /usr/lib; realpath may say /lib (merged /usr).
        alt = "/usr" + path if not path.startswith("/usr/") else path.removeprefix("/usr")
        owner = subprocess.run(
            ["dpkg-query", "-S", alt], capture_output=True, text=True, check=False
        )
    if owner.returncode != 0:
        return None
    package = owner.stdout.split(":", 1)[0].split(",")[0].strip()
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version}", package],
        capture_output=True,
        text=True,
        check=False,
    )
    return f"{package} {out.stdout.strip()}" if out.returncode == 0 else None
