"""Build allocators from their crates.io `-sys` crates into preloadable libraries.

Each catalog recipe version becomes a Cargo project in the cache: the Rust
forwarding layer shipped with allocmark (native/preload-rs) plus a generated
Cargo.toml naming the crate, its exact version and features. All builds share
one cargo target directory, so a crate compiled once is not compiled again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import allocmark
from allocmark import files, native
from allocmark.allocators import debian
from allocmark.errors import UserError
from allocmark.model import AllocatorSpec, Recipe
from allocmark.native import identity
from allocmark.schemas.catalog import Backend

LIB_NAME = "libam_preload.so"
BACKENDS = tuple(b.value for b in Backend)
_LOG_TAIL = 25


@dataclass(frozen=True)
class Built:
    """A built library and the facts of its build."""

    library: Path
    provenance: dict[str, Any]
    rebuilt: bool  # False when the cache already held it


def sources_dir() -> Path:
    """The Rust forwarding layer installed with the package."""
    for root in allocmark.__path__:
        candidate = Path(root) / "_rust" / "preload-rs"
        if (candidate / "src" / "lib.rs").is_file():
            return candidate
    raise UserError(
        "the Rust sources of the preload layer are not installed with allocmark; "
        "reinstall with `pip install .`"
    )


@functools.cache
def _source_digest() -> str:
    h = hashlib.sha256()
    root = sources_dir()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def build_key(recipe: Recipe) -> str:
    """Changes whenever the recipe or the forwarding layer (or, for a Debian source
    build, allocmark's files it uses) changes."""
    layer = _files_digest(recipe.debian.files) if recipe.debian else _source_digest()
    text = json.dumps([_recipe_facts(recipe), layer], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _files_digest(names: tuple[str, ...]) -> str:
    if not names:
        return ""
    h = hashlib.sha256()
    for name in names:
        h.update((debian.native_files() / name).read_bytes())
    return h.hexdigest()


def _recipe_facts(recipe: Recipe) -> dict[str, Any]:
    if recipe.debian:
        return {
            "debian": dataclasses.asdict(recipe.debian),
            "upstream_version": recipe.upstream_version,
        }
    return {
        "crate": recipe.crate,
        "crate_version": recipe.crate_version,
        "features": list(recipe.crate_features),
        "backend": recipe.backend,
        "build_env": dict(recipe.build_env),
        "sys_std": recipe.sys_std,
        "source_only": recipe.source_only,
        "upstream_version": recipe.upstream_version,
    }


def output_dir(name: str, recipe: Recipe) -> Path:
    if recipe.debian and recipe.debian.is_glibc:
        # Other entries run under it (debian.glibc): a place found by version alone.
        return debian.glibc_dir(recipe.upstream_version)
    safe = name.replace("@", "-").replace("+", "-")
    return native.cache_root() / "allocators" / f"{safe}-{build_key(recipe)}"


def library_path(name: str, recipe: Recipe) -> Path:
    deb = recipe.debian
    if deb is None:
        return output_dir(name, recipe) / LIB_NAME
    if deb.is_glibc:
        return debian.glibc_dir(recipe.upstream_version) / "lib" / "libc.so.6"
    # The library keeps its file name: its soname is what other objects ask for.
    return output_dir(name, recipe) / Path(deb.output or deb.members[0]).name


def is_built(spec: AllocatorSpec) -> bool:
    return spec.recipe is not None and library_path(spec.name, spec.recipe).is_file()


Say = Callable[[str], None]


def build(spec: AllocatorSpec, force: bool = False, say: Say = lambda _: None) -> Built:
    """Build `spec` (a recipe entry) unless the cache holds the same build."""
    recipe = spec.recipe
    if recipe is None:
        raise UserError(f"allocator {spec.name!r} is not built by allocmark (it has no recipe)")
    out = output_dir(spec.name, recipe)
    library = library_path(spec.name, recipe)
    with build_lock():
        if not force and library.is_file():
            return Built(library, read_provenance(out), rebuilt=False)
        if recipe.debian:
            provenance = debian.install(spec.name, recipe, out, library, say)
            if not recipe.debian.is_glibc:
                _drop_older_builds(out)
            return Built(library, provenance, rebuilt=True)
        say(f"building {spec.name} from {recipe.crate} {recipe.crate_version}")
        return _build_locked(spec.name, recipe, out)


def read_provenance(out: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads((out / "provenance.json").read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return data


def cargo() -> str:
    """cargo on PATH, else rustup's default place (not on PATH in every shell)."""
    found = shutil.which("cargo") or shutil.which("cargo", path=os.path.expanduser("~/.cargo/bin"))
    if not found:
        raise UserError(
            "cargo is not installed, and allocmark builds these allocators with it; "
            "install Rust (rustup, or `apt-get install cargo`) and try again"
        )
    return found


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """Held while a build installs into the cache (two allocmark processes, e.g.
    parallel test runs, may build the same entry)."""
    with files.locked(files.directory(native.cache_root(), parents=True) / "build.lock"):
        yield


def project(recipe: Recipe, work: Path | None = None) -> tuple[Path, dict[str, str]]:
    """A fresh Cargo project for `recipe` in `work` (default: the cache's work
    directory, for bench/) and the minimal environment to build it in."""
    work = work or native.cache_root() / "work" / recipe.backend
    _prepare_project(work, recipe)
    return work, _build_env(work, recipe)


def cargo_command(recipe: Recipe, *extra: str) -> list[str]:
    return ["cargo", "build", "--release", "--features", _features(recipe), *extra]


def _build_locked(name: str, recipe: Recipe, out: Path) -> Built:
    """cargo's build, as untrusted code runs (a crate's build script and the C it
    compiles are the crate's code): through the one door, as the campaign's identity,
    in a private directory it owns (the project, cargo's own home and its target
    directory: nothing is shared with another build), the library copied out."""
    with identity.home("allocmark-cargo-", handed=False) as home:
        work, env = project(recipe, home / "work")
        env |= {"HOME": str(home), "TMPDIR": str(home), "CARGO_HOME": str(home / "cargo")}
        env["CARGO_TARGET_DIR"] = str(home / "target")
        identity.give(home)
        if recipe.needs_source:
            env["AM_SYS_SOURCE"] = str(_crate_source(work, recipe, env))
        log = home.parent / "build.log"  # root's: the build writes it through its descriptor
        start = time.monotonic()
        with files.writing(log, 0o600, "the build's log", binary=True) as f:
            done = identity.contained(
                cargo_command(recipe), env, BUILD_TIMEOUT_S, cwd=work, stdout=f.fileno()
            )
        seconds = time.monotonic() - start
        if done.code != 0:
            kept = files.directory(native.cache_root() / "logs", parents=True) / f"{name}.log"
            files.copy(log, kept)  # the build's directory goes: its log stays
            raise UserError(_failure(name, recipe, kept, done.code))
        return _install(name, recipe, home, out, env, seconds)


BUILD_TIMEOUT_S = 3600.0  # Google's TCMalloc (abseil and all) takes minutes


def _prepare_project(work: Path, recipe: Recipe) -> None:
    files.remove_tree(work)
    files.copy_tree(sources_dir(), work)
    files.write(work / "Cargo.toml", cargo_toml(recipe))


def cargo_toml(recipe: Recipe) -> str:
    """The generated manifest: the forwarding layer over exactly one sys crate."""
    features = ", ".join(json.dumps(f) for f in recipe.crate_features)
    feature_lines = "\n".join(f"backend_{b} = []" for b in BACKENDS)
    # A source-only crate is a dependency of no real target: cargo fetches it (and
    # `cargo metadata` says where) but never compiles its Rust code.
    section = "target.'cfg(any())'.dependencies" if recipe.source_only else "dependencies"
    return f"""# Generated by allocmark for {recipe.family} {recipe.upstream_version}; do not edit.
[package]
name = "am_preload"
version = "0.1.0"
edition = "2021"
publish = false

[lib]
crate-type = ["cdylib"]
path = "src/lib.rs"

[{section}]
sys = {{ package = {json.dumps(recipe.crate)}, version = {json.dumps(recipe.crate_version)}, \
features = [{features}] }}

[build-dependencies]
cc = "1"

[features]
{feature_lines}
sys_std = []
source_only = []

[profile.release]
panic = "abort"
codegen-units = 1
opt-level = 3
"""


def _features(recipe: Recipe) -> str:
    wanted = {"sys_std": recipe.sys_std, "source_only": recipe.source_only}
    return ",".join([f"backend_{recipe.backend}", *(f for f, on in wanted.items() if on)])


def _build_env(work: Path, recipe: Recipe) -> dict[str, str]:
    """The minimal environment (native/identity.py), the recipe's own variables, and
    the toolchain first on PATH."""
    tools = toolchain()
    env = identity.environment(recipe.build_env)
    env["PATH"] = f"{tools / 'bin'}{os.pathsep}{env.get('PATH', os.defpath)}"
    env["RUSTC"] = str(tools / "bin" / "rustc")
    env["CARGO_TARGET_DIR"] = str(native.cache_root() / "target")
    env["AM_ALLOCATOR_VERSION"] = recipe.upstream_version
    return env


def toolchain() -> Path:
    """The Rust toolchain (its sysroot: bin/cargo, bin/rustc, lib/) where the build's
    identity can run it: rustup keeps it in root's home, which no other identity may
    enter, so as root it is mirrored once into the cache (hard links where the disk
    allows, copies elsewhere; its documentation left out)."""
    sysroot = _sysroot()
    if os.geteuid() != 0 or identity.chosen() is None:
        return sysroot
    key = hashlib.sha256(
        f"{sysroot}\n{identity.version('rustc', {'PATH': str(sysroot / 'bin')})}".encode()
    )
    mirror = native.cache_root() / "toolchain" / key.hexdigest()[:16]
    if not (mirror / "bin" / "cargo").is_file():
        files.directory(mirror.parent, parents=True)
        with files.locked(mirror.parent / "mirror.lock"):
            if not (mirror / "bin" / "cargo").is_file():
                files.link_tree(sysroot, mirror, skip=("share",))
    return mirror


@functools.cache
def _sysroot() -> Path:
    """rustc's sysroot, found through cargo on PATH (or rustup's default place)."""
    rustc = Path(cargo()).with_name("rustc")
    try:
        proc = subprocess.run(
            [str(rustc), "--print", "sysroot"], capture_output=True, text=True, check=False
        )
    except OSError as e:
        raise UserError(f"{rustc} cannot run ({e.strerror or e}): install Rust again") from None
    root = Path(proc.stdout.strip())
    if proc.returncode != 0 or not (root / "bin" / "cargo").is_file():
        raise UserError(
            f"{rustc} --print sysroot gave no toolchain with cargo ({proc.stderr.strip()[-300:]}); "
            "install Rust (rustup, or `apt-get install cargo`)"
        )
    return root


def _crate_source(work: Path, recipe: Recipe, env: dict[str, str]) -> Path:
    """Where cargo unpacked the sys crate (build.rs compiles C from it): `cargo
    metadata` resolves and downloads, through the door as the build does."""
    done = identity.contained(
        ["cargo", "metadata", "--format-version", "1"], env, BUILD_TIMEOUT_S, cwd=work
    )
    if done.code != 0:
        said = done.stderr.decode(errors="replace").strip()[-500:]
        raise UserError(f"cargo metadata for {recipe.crate} failed: {said}")
    for package in json.loads(done.stdout)["packages"]:
        if package["name"] == recipe.crate:
            return Path(package["manifest_path"]).parent
    raise UserError(f"cargo metadata does not list {recipe.crate}")


def _failure(name: str, recipe: Recipe, log: Path, code: int | None) -> str:
    lines = log.read_text(errors="replace").splitlines()
    tail = "\n".join("  " + line for line in lines[-_LOG_TAIL:])
    if code is None:
        return (
            f"building {name} ({recipe.crate} {recipe.crate_version}) took more than "
            f"{BUILD_TIMEOUT_S:.0f} s. Last lines of {log}:\n{tail}"
        )
    return (
        f"building {name} ({recipe.crate} {recipe.crate_version}) failed: cargo exited "
        f"with {code}. Last lines of {log}:\n{tail}"
    )


def _install(
    name: str, recipe: Recipe, home: Path, out: Path, env: dict[str, str], seconds: float
) -> Built:
    """The built library copied out of the build's directory (a file the build's
    identity made, opened with no link followed) into the cache, with its provenance."""
    built = home / "target" / "release" / LIB_NAME
    files.directory(out, parents=True)
    tmp = out / (LIB_NAME + ".tmp")
    files.copy(built, tmp, owner=identity.owner())
    provenance = {
        "name": name,
        "family": recipe.family,
        "upstream_version": recipe.upstream_version,
        "crate": recipe.crate,
        "crate_version": _locked_version(home / "work", recipe.crate),
        "crate_requirement": recipe.crate_version,
        "source_only": recipe.source_only,
        "features": list(recipe.crate_features),
        "build_env": dict(recipe.build_env),
        "rustc": identity.version("rustc", env),
        "cargo": identity.version("cargo", env),
        "cc": identity.version(env.get("CC", "cc"), env),
        "profile": "release, opt-level 3, panic=abort, -Wl,-z,defs",
        "build_seconds": round(seconds, 1),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sha256": native.sha256_file(tmp),
    }
    files.write(out / "provenance.json", json.dumps(provenance, indent=2) + "\n")
    files.copy(home.parent / "build.log", out / "build.log")
    files.rename(tmp, out / LIB_NAME)  # the library appears only once complete
    _drop_older_builds(out)
    return Built(out / LIB_NAME, provenance, rebuilt=True)


def _drop_older_builds(out: Path) -> None:
    """Earlier builds of the same entry (other recipe or layer): no longer reachable."""
    name = out.name.rsplit("-", 1)[0]
    for other in out.parent.iterdir():
        if other != out and other.is_dir() and other.name.rsplit("-", 1)[0] == name:
            files.remove_tree(other)


def _locked_version(work: Path, crate: str) -> str | None:
    """The exact crate version cargo resolved, from Cargo.lock."""
    try:
        text = (work / "Cargo.lock").read_text()
    except OSError:
        return None
    for block in text.split("[[package]]"):
        if f'name = "{crate}"' in block:
            for line in block.splitlines():
                if line.startswith("version = "):
                    return line.split("=", 1)[1].strip().strip('"')
    return None
