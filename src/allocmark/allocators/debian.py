"""Allocators from Debian's other releases: a binary package's library where it loads
here, else a library built here from the release's source package; and glibc itself.

apt-get fetches them through a private configuration kept in the cache, one per
release (its own sources list, lists and archive cache, each line `signed-by`
Debian's archive keyring), so the system's apt configuration is never read for
sources nor changed, and nothing is installed into the system: a .deb is unpacked
with `dpkg-deb -x`, a source package with `dpkg-source -x` in the cache. apt checks
every file it fetches against the release's signed index, so a download that
arrives is the archive's; its sha256 is recorded beside the library.

Some source packages are served only in part (the upstream tarball, not the .dsc
and Debian's patches); such a build uses the verified upstream tarball and says in
its provenance that Debian's patches were not applied.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import allocmark
from allocmark import files, native
from allocmark.errors import UserError
from allocmark.model import Debian, Recipe
from allocmark.native import identity

KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
MIRROR = "http://deb.debian.org/debian"
LOADER = "ld-linux-x86-64.so.2"
FRESH_S = 24 * 3600  # a release's lists younger than this are not fetched again
_LOG_TAIL = 25
_NATIVE = "_native/debian"  # allocmark's own files for source builds (native/debian)

Say = Callable[[str], None]


def upstream(debian_version: str) -> str:
    """The upstream part of a Debian version: "1:3.0.1+ds-2.1" -> "3.0.1"."""
    text = debian_version.split(":", 1)[-1]
    text = text.rsplit("-", 1)[0] if "-" in text else text
    return re.split(r"[+~]", text)[0]


class Apt:
    """apt-get and apt-cache on a private configuration for one release."""

    def __init__(self, root: Path, release: str) -> None:
        self.root = root / release
        self.release = release

    def options(self) -> list[str]:
        return [
            "-o",
            f"Dir::Etc::SourceList={self.root / 'sources.list'}",
            "-o",
            "Dir::Etc::SourceParts=/dev/null",
            "-o",
            f"Dir::State::Lists={self.root / 'lists'}",
            "-o",
            f"Dir::Cache={self.root / 'cache'}",
            # Downloads land in the cache, which apt's _apt user may not reach.
            "-o",
            "APT::Sandbox::User=root" if os.geteuid() == 0 else "Debug::NoDropPrivs=1",
        ]

    def update(self, say: Say, force: bool = False) -> None:
        stamp = self.root / "updated"
        if not force and stamp.is_file() and time.time() - stamp.stat().st_mtime < FRESH_S:
            return
        for sub in ("lists/partial", "cache/archives/partial"):
            files.directory(self.root / sub, parents=True)
        line = f"[signed-by={KEYRING}] {MIRROR} {self.release} main"
        files.write(self.root / "sources.list", f"deb {line}\ndeb-src {line}\n")
        say(f"reading Debian {self.release}'s package lists")
        self._run(["apt-get", *self.options(), "update"], "apt-get update", self.root)
        files.write(stamp, "")

    def newest(self, name: str, wanted: str, exact: str, source: bool) -> str:
        """The release's newest Debian version of `name` whose upstream is `wanted`."""
        out = self._run(["apt-cache", *self.options(), "madison", name], "apt-cache", self.root)
        kind = "Sources" if source else "Packages"
        found = []
        for line in out.splitlines():
            parts = [p.strip() for p in line.split("|")]
            if len(parts) == 3 and parts[0] == name and parts[2].endswith(kind):
                found.append(parts[1])
        match = [v for v in found if (v == exact if exact else upstream(v) == wanted)]
        if not match:
            has = ", ".join(found) or "no version of it"
            what = f"{'source ' if source else ''}package {name}"
            raise UserError(
                f"Debian {self.release} has {has} for {what}, not "
                f"{exact or wanted + '-*'}; fix the catalog's version"
            )
        return match[0]  # madison lists the newest first

    def download(self, args: list[str], into: Path) -> str:
        """Run a download in `into`; what apt said when it failed (files it could
        fetch and check stay there)."""
        files.directory(into, parents=True)
        proc = subprocess.run(
            ["apt-get", *self.options(), *args],
            cwd=into,
            capture_output=True,
            text=True,
            check=False,
        )
        return "" if proc.returncode == 0 else (proc.stderr.strip() or proc.stdout.strip())

    @staticmethod
    def _run(argv: list[str], what: str, where: Path) -> str:
        if not shutil.which(argv[0]):
            raise UserError(
                f"{argv[0]} is not installed; allocmark fetches Debian's "
                "allocators with it (this needs a Debian system)"
            )
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr.strip() or proc.stdout.strip())[-600:]
            raise UserError(f"{what} failed for {where}: {tail}")
        return proc.stdout


def fetch(recipe: Recipe, root: Path, work: Path, say: Say) -> tuple[Path, dict[str, Any]]:
    """The unpacked package (a binary's files, or a built source tree) and its origin."""
    deb = _origin(recipe)
    apt = Apt(root / "apt", deb.release)
    apt.update(say)
    try:
        return _fetch(apt, recipe, work, say)
    except UserError:
        # The release may have moved on since its lists were read (a newer revision,
        # the old one gone from the archive): read them again, once.
        apt.update(say, force=True)
        return _fetch(apt, recipe, work, say)


def _fetch(apt: Apt, recipe: Recipe, work: Path, say: Say) -> tuple[Path, dict[str, Any]]:
    deb = _origin(recipe)
    name = deb.source or deb.package
    version = apt.newest(name, recipe.upstream_version, deb.debian_version, bool(deb.source))
    files.remove_tree(work)
    facts: dict[str, Any] = {"release": deb.release, "debian_version": version}
    if deb.source:
        return _source(apt, deb, version, work, say), facts | {"source": deb.source}
    say(f"fetching {deb.package} {version} from Debian {deb.release}")
    problem = apt.download(["download", f"{deb.package}={version}"], work / "deb")
    debs = sorted((work / "deb").glob("*.deb"))
    if problem or not debs:
        raise UserError(f"Debian {deb.release} did not serve {deb.package} {version}: {problem}")
    tree = work / "root"
    _checked(["dpkg-deb", "-x", str(debs[0]), str(tree)], "dpkg-deb -x")
    return tree, facts | {
        "package": deb.package,
        "deb": debs[0].name,
        "sha256": native.sha256_file(debs[0]),
    }


def _checked(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise UserError(f"{what} failed: {(proc.stderr.strip() or proc.stdout.strip())[-600:]}")


def _origin(recipe: Recipe) -> Debian:
    assert recipe.debian is not None
    return recipe.debian


def _source(apt: Apt, deb: Debian, version: str, work: Path, say: Say) -> Path:
    say(f"fetching source {deb.source} {version} from Debian {deb.release}")
    fetched = work / "src"
    problem = apt.download(["source", "--download-only", f"{deb.source}={version}"], fetched)
    dsc = sorted(fetched.glob("*.dsc"))
    tree = work / "tree"
    if dsc and not problem:
        _checked(["dpkg-source", "--no-check", "-x", str(dsc[0]), str(tree)], "dpkg-source -x")
        files.write(work / "patches", "applied")
        return tree
    orig = sorted(fetched.glob("*.orig.tar.*"))
    if not orig:
        raise UserError(
            f"Debian {deb.release} did not serve source {deb.source} {version}: {problem[-400:]}"
        )
    # Only the upstream tarball: apt checked it against the signed Sources index.
    files.write(work / "patches", "not served: upstream tarball only")
    files.extract(orig[0], work / "orig")
    tops = [p for p in (work / "orig").iterdir() if p.is_dir()]
    files.rename(tops[0] if len(tops) == 1 else work / "orig", tree)
    return tree


def source_facts(work: Path) -> dict[str, Any]:
    files = sorted((work / "src").glob("*"))
    return {
        "files": {f.name: native.sha256_file(f) for f in files if f.is_file()},
        "debian_patches": (work / "patches").read_text() if (work / "patches").is_file() else "",
    }


def build_source(recipe: Recipe, tree: Path, log: Path, say: Say) -> tuple[Path, float]:
    """Run the entry's build commands in `tree`; the library they made."""
    deb = _origin(recipe)
    ours = native_files()
    for name in deb.files:
        if Path(name).name != name or not (ours / name).is_file():
            raise UserError(
                f"{recipe.family}: build.files: {name!r} is not one of allocmark's files in {ours}"
            )
        files.copy(ours / name, tree / name)
    env = {
        "JOBS": str(os.cpu_count() or 1),
        "AM_FILES": str(ours),
        "CFLAGS": "-O2 -g0",
        "AM_VERSION": recipe.upstream_version,
        "CXXFLAGS": "-O2 -g0",
        "LC_ALL": "C",
    }
    start = time.monotonic()
    # A package's build runs its makefiles and scripts: untrusted code, through the one
    # door as the campaign's identity, in the tree handed to it, with a home of its own.
    with identity.home("allocmark-deb-") as home:
        identity.give(tree)
        env = identity.environment(env) | {"HOME": str(home), "TMPDIR": str(home)}
        failed: tuple[str, int | None] | None = None
        with files.writing(log, 0o644, "the build's log", binary=True) as f:
            for command in deb.build:
                say(f"  {command}")
                f.write(f"$ {command}\n".encode())
                f.flush()
                argv = ["bash", "-euo", "pipefail", "-c", command]
                done = identity.contained(argv, env, BUILD_TIMEOUT_S, cwd=tree, stdout=f.fileno())
                if done.code != 0:
                    failed = (command, done.code)
                    break
    if failed:
        raise _build_failed(recipe, deb, *failed, log)
    made = (tree / deb.output).resolve()
    if not made.is_file() or not made.is_relative_to(tree.resolve()):
        raise UserError(
            f"building {recipe.family}@{recipe.upstream_version} made no {deb.output}; see {log}"
        )
    return made, time.monotonic() - start


BUILD_TIMEOUT_S = 3600.0  # a C library from its sources: minutes


def _build_failed(
    recipe: Recipe, deb: Debian, command: str, code: int | None, log: Path
) -> UserError:
    """A failed build command, with the end of its log."""
    how = "ran past its timeout" if code is None else f"exited with {code}"
    lines = log.read_text(errors="replace").splitlines()[-_LOG_TAIL:]
    tail = "\n".join("  " + line for line in lines)
    return UserError(
        f"building {recipe.family}@{recipe.upstream_version} from "
        f"{deb.source}: `{command}` {how}. Last lines of {log}:\n{tail}"
    )


def member(recipe: Recipe, tree: Path, patterns: tuple[str, ...] = ()) -> Path:
    """The library (or another file named by `patterns`) in an unpacked binary package."""
    for pattern in patterns or _origin(recipe).members:
        for found in sorted(glob.glob(str(tree / pattern))):
            real = Path(found).resolve()  # a symlink to the versioned file, inside the package
            if real.is_file() and real.is_relative_to(tree.resolve()):
                return real
    where = " or ".join(patterns or _origin(recipe).members)
    raise UserError(
        f"{recipe.family}@{recipe.upstream_version}: the package has no "
        f"{where}; fix the catalog's library"
    )


def glibc_tree(tree: Path) -> Path:
    """The folder of an unpacked libc6 that holds libc.so.6 and its loader."""
    for sub in ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu"):
        if (tree / sub / "libc.so.6").exists() and (tree / sub / LOADER).exists():
            return tree / sub
    raise UserError(f"the unpacked C library in {tree} has no libc.so.6 beside {LOADER}")


def native_files() -> Path:
    for root in allocmark.__path__:
        candidate = Path(root) / _NATIVE
        if candidate.is_dir():
            return candidate
    raise UserError(
        "allocmark's files for Debian source builds are not installed; "
        "reinstall with `pip install .`"
    )


def under(argv: list[str], env: Mapping[str, str]) -> list[str]:
    """`argv` run under the glibc that `AM_RUN_GLIBC` names (the launcher does the
    same for runs, am_run.c): that glibc's loader, its libraries first. The loader
    does not search PATH: the program is found here."""
    folder = env.get("AM_RUN_GLIBC")
    if not folder:
        return argv
    program = shutil.which(argv[0]) or argv[0]
    return [os.path.join(folder, LOADER), "--library-path", folder, program, *argv[1:]]


_NEEDS = re.compile(r"version `GLIBC_([0-9.]+)' not found")


def too_old(stderr: str) -> str | None:
    """The glibc version a program needs that the loader's C library lacks."""
    found = _NEEDS.search(stderr)
    return found.group(1) if found else None


# The libraries a glibc brings itself: under another glibc they are its, not the system's.
_OWN = (
    "libc.so",
    "libm.so",
    "libpthread.so",
    "libdl.so",
    "librt.so",
    "libresolv.so",
    "libutil.so",
    "libanl.so",
    "ld-linux",
)
_LIB_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64")


@functools.cache  # once per program: every glibc entry of a campaign asks
def glibc_needed(program: str) -> tuple[tuple[int, ...], str]:
    """The newest GLIBC_x.y that `program` or a library it loads from this system asks
    for, and which file asks: a program cannot run under an older glibc."""
    newest: tuple[tuple[int, ...], str] = ((0,), "")
    todo, seen = [program], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        needs, libraries = _elf_needs(path)
        for version in needs:
            newest = max(newest, (version, path))
        for name in libraries:
            if not name.startswith(_OWN):
                todo += [f"{d}/{name}" for d in _LIB_DIRS if os.path.isfile(f"{d}/{name}")][:1]
    return newest


def _elf_needs(path: str) -> tuple[list[tuple[int, ...]], list[str]]:
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection

    versions, libraries = [], []
    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            for section in elf.iter_sections():
                if isinstance(section, GNUVerNeedSection):
                    for _, auxiliaries in section.iter_versions():
                        versions += [
                            _glibc_number(a.name)
                            for a in auxiliaries
                            if a.name.startswith("GLIBC_2")
                        ]
                elif isinstance(section, DynamicSection):
                    libraries += [str(t.needed) for t in section.iter_tags("DT_NEEDED")]  # type: ignore[attr-defined]
    except (OSError, ELFError):
        return [], []  # not an ELF file (a script): its interpreter is checked at the run
    return versions, libraries


def _glibc_number(name: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", name))


def refusal(program: str, entry: str, glibc: str) -> str | None:
    """Why `program` cannot run under `entry` (whose glibc is `glibc`), or None."""
    (need, where) = glibc_needed(program)
    have = _glibc_number(glibc)
    if need <= have:
        return None
    needed = ".".join(map(str, need))
    via = "" if where == program else f" (through {where})"
    return (
        f"{program} needs GLIBC_{needed}{via}, and {entry} is glibc {glibc}: it cannot "
        f"run there; leave {entry} out, or name a glibc of {needed} or newer"
    )


def glibc_dir(version: str) -> Path:
    return native.cache_root() / "glibc" / version


def glibc_env(recipe: Recipe) -> dict[str, str]:
    """A glibc entry, and an entry built for a newer glibc than this system's, run
    under that glibc (am_run: its loader, its libraries first)."""
    version = recipe.glibc_version
    return {"AM_RUN_GLIBC": str(glibc_dir(version) / "lib")} if version else {}


def runtime(deb: Debian) -> Recipe:
    """The glibc entry an entry built for a newer glibc runs under."""
    libc = Debian(release=deb.glibc_release, package="libc6", is_glibc=True)
    return Recipe(
        family="glibc",
        backend="",
        crate="",
        crate_version="",
        upstream_version=deb.glibc,
        debian=libc,
    )


def install(name: str, recipe: Recipe, out: Path, library: Path, say: Say) -> dict[str, Any]:
    """Fetch (and for a source package, build) a Debian release's allocator into `out`
    (`library` last: it marks a finished build); its provenance, as written there."""
    deb = recipe.debian
    assert deb is not None
    if deb.glibc and not (glibc_dir(deb.glibc) / "lib" / "libc.so.6").is_file():
        say(f"{name} runs under glibc {deb.glibc}: fetching it first")
        install(
            f"glibc@{deb.glibc}",
            runtime(deb),
            glibc_dir(deb.glibc),
            glibc_dir(deb.glibc) / "lib" / "libc.so.6",
            say,
        )
    work = native.cache_root() / "work" / "debian" / name.replace("@", "-")
    start = time.monotonic()
    tree, facts = fetch(recipe, native.cache_root() / "debian", work, say)
    built_s = 0.0
    if deb.source:
        made, built_s = build_source(recipe, tree, work / "build.log", say)
        facts |= source_facts(work) | {
            "build": list(deb.build),
            "cc": identity.version("cc", identity.environment()),
        }
    elif deb.is_glibc:
        made = glibc_tree(tree)
    else:
        made = member(recipe, tree)
    files.directory(out, parents=True)
    for companion in deb.companions:  # before the library, which marks a finished build
        found = member(recipe, tree, (companion,))
        files.copy(found, out / Path(companion).name)
    if deb.is_glibc:
        # The whole unpacked C library stays; lib/ is the folder of its loader.
        files.rename(tree, out / "root")
        files.link(Path("root") / made.relative_to(tree), out / "lib")
    provenance = {
        "name": name,
        "family": recipe.family,
        "upstream_version": recipe.upstream_version,
        "origin": "debian",
        **facts,
        "glibc": deb.glibc,
        "build_seconds": round(time.monotonic() - start, 1),
        "compile_seconds": round(built_s, 1),
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if not deb.is_glibc:
        tmp = out / (library.name + ".tmp")
        files.copy(made, tmp, owner=identity.owner() if deb.source else None)
        provenance["library_sha256"] = native.sha256_file(tmp)
        files.write(out / "provenance.json", json.dumps(provenance, indent=2) + "\n")
        files.rename(tmp, library)  # the library appears only once complete
    else:
        files.write(out / "provenance.json", json.dumps(provenance, indent=2) + "\n")
    files.remove_tree(work)
    return provenance
