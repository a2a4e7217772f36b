"""Verification: find each allocator's library and ask the probe (native/probe) what
really serves malloc in a process that preloads it, and which version it is."""

from __future__ import annotations

import glob
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from allocmark import native
from allocmark.allocators import builder, debian
from allocmark.errors import UserError
from allocmark.model import AllocatorSpec, Status, Verified, preload_list
from allocmark.native import identity, records

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


def verify(spec: AllocatorSpec) -> Verified:
    """Find the library, run the probe under it, and judge what serves malloc."""
    if spec.system:
        return _verified(spec, None, _run_probe(spec, None))
    library = _find_library(spec)
    if library is None:
        return Verified(spec, Status.MISSING, reason=_missing_reason(spec))
    problem = _elf_problem(library)
    if problem:
        return Verified(spec, Status.BROKEN, library=library, reason=problem)
    return _verified(spec, library, _run_probe(spec, None if spec.other_libc else library))


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
        path = os.path.expanduser(pattern)
        # A file named as it is comes first: `[` in a real path is not a glob's class.
        for match in [path, *sorted(glob.glob(path))]:
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
    dirs = [p for p in spec.paths if os.path.isdir(os.path.expanduser(p))]
    if dirs:
        return f"{dirs[0]} is a directory, not a shared library: give the .so file in it"
    return f"{' or '.join(spec.paths)} does not exist; fix the path"


def _elf_problem(path: str) -> str | None:
    with open(path, "rb") as f:
        head = f.read(18)
    if head[:4] != b"\x7fELF":
        return f"{path} is not an ELF file, so not a shared object"
    if len(head) < 18:
        return f"{path} is a truncated ELF file ({len(head)} bytes), not a shared object"
    e_type = int.from_bytes(head[16:18], "little" if head[5] == 1 else "big")
    if e_type != 3:  # ET_DYN
        return f"{path} is an ELF file but not a shared object (e_type {e_type})"
    return None


def _run_probe(spec: AllocatorSpec, library: str | None) -> subprocess.CompletedProcess[str]:
    """The probe under the allocator, as untrusted code runs (native/identity.py): its
    constructors are the allocator's code, so never as root, and nothing it starts
    outlives it. Under another glibc, the launcher runs it with that glibc's loader."""
    env = identity.environment(spec.env)
    if preload := preload_list(spec, library):
        env["LD_PRELOAD"] = preload
    argv = [str(native.program("am_probe"))]
    done = identity.contained(argv, env, PROBE_TIMEOUT_S)
    if done.code is None:
        return subprocess.CompletedProcess([], -signal.SIGKILL, "", "probe timed out")
    text = (done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace"))
    return subprocess.CompletedProcess(argv, done.code, *text)


def _verified(
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
    if needs := debian.too_old(proc.stderr):
        return (
            f"programs built on this system need GLIBC_{needs} (allocmark's probe does), "
            "which this C library lacks: only programs built for it or an older glibc "
            "run under it"
        )
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
    if spec.recipe and spec.recipe.debian:
        return _wrong_debian_version(spec, report)
    if not spec.recipe or not spec.recipe.self_reports:
        return None
    versions: dict[str, str] = report.get("versions", {})
    stated = versions.get(spec.recipe.family) or versions.get("allocmark", "").split(" ")[-1]
    # 0.0.0: jemalloc built outside git without its VERSION file (the old
    # jemalloc-sys crates) does not know its version; the catalog's stands.
    if stated.split("-")[0] in (spec.recipe.upstream_version, "0.0.0"):
        return None
    return (
        f"the library says it is {spec.recipe.family} {stated or '(nothing)'}, but the catalog "
        f"maps {spec.recipe.crate} {spec.recipe.crate_version} to {spec.recipe.upstream_version}; "
        "fix the version table of the recipe"
    )


def _wrong_debian_version(spec: AllocatorSpec, report: dict[str, Any]) -> str | None:
    assert spec.recipe is not None
    probe = spec.version_source.removeprefix("probe:")
    stated = report.get("versions", {}).get(probe) if spec.version_source != probe else None
    wanted = spec.recipe.upstream_version
    if not stated or re.search(rf"(^|[^0-9.]){re.escape(wanted)}($|[^0-9])", stated):
        return None
    return f"the library says it is {probe} {stated}, but the catalog names {wanted}"


def _version(spec: AllocatorSpec, report: dict[str, Any], library: str) -> str | None:
    source = spec.version_source
    if spec.recipe and spec.recipe.debian:
        return f"{spec.recipe.upstream_version} ({_debian_origin(spec)})"
    if spec.recipe:
        return f"{spec.recipe.upstream_version} ({spec.recipe.crate} {_crate_version(spec)})"
    versions: dict[str, str] = report.get("versions", {})
    if source.startswith("probe:"):
        return versions.get(source.removeprefix("probe:"))
    if source == "auto":
        found = [versions[k] for k in ("jemalloc", "tcmalloc", "mimalloc") if k in versions]
        return found[0] if found else dpkg_version(library)
    return dpkg_version(library) if source == "dpkg" else None


def _debian_origin(spec: AllocatorSpec) -> str:
    """Which Debian file it came from, as its provenance recorded it at the fetch."""
    assert spec.recipe is not None and spec.recipe.debian is not None
    deb = spec.recipe.debian
    p = builder.read_provenance(builder.output_dir(spec.name, spec.recipe))
    what = deb.package or f"source {deb.source}"
    text = f"Debian {deb.release} {what} {p.get('debian_version', '?')}"
    if p.get("sha256"):
        text += f", .deb sha256 {p['sha256']}"
    files: dict[str, str] = p.get("files", {})
    # The .dsc names every other file with its checksum; without it, the tarball.
    signed = [n for n in files if n.endswith(".dsc")] or [n for n in files if ".orig.tar" in n]
    for name in signed[:1]:
        text += f", {name} sha256 {files[name]}"
    if str(p.get("debian_patches", "")).startswith("not served"):
        text += ", Debian's patches not served: upstream tarball"
    return text + (f"; under glibc {deb.glibc}" if deb.glibc else "")


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
