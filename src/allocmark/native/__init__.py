"""Native programs and libraries of the package, the cache, the record reader.

Where the programs and libraries built into the package live, allocmark's cache,
the native tools' versions, (records.py) the one reader of what native programs
write, (kernel.py) the launcher's count of a run's system calls as metrics, and
(identity.py) the identity untrusted code runs as and the way it is run there. Every
stage below the CLI may import it.

May import: errors, defaults, files.
Never: allocators, answer, api, cli, dispatchers, profile, report, run, store, verbs,
workloads.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

import allocmark
from allocmark import files
from allocmark.errors import AllocmarkError

PACKAGE_PREFIX = "@allocmark/"  # catalog paths into the installed package


def bundled(relative: str) -> Path | None:
    """A file installed with the package (e.g. `_lib/libam_bump.so`), if present; run
    as root from a package other users cannot reach, a copy they can (staged)."""
    # Editable installs may split the package over several directories.
    for root in allocmark.__path__:
        candidate = Path(root) / relative
        if candidate.is_file():
            return staged(candidate, relative)
    return None


def staged(path: Path, relative: str) -> Path:
    """Run as root, allocmark runs the measured programs as an unprivileged user
    (run/runas.py), who must load the package's workloads and libraries: where the
    package sits below a directory others cannot enter (a virtualenv in root's home),
    they run from a copy in the cache, one per build (keyed by the file's identity)."""
    if os.geteuid() != 0 or _reachable(path):
        return path
    st = path.stat()
    key = hashlib.sha256(f"{path}:{st.st_ino}:{st.st_mtime_ns}:{st.st_size}".encode())
    copy = cache_root() / "package" / key.hexdigest()[:16] / relative
    if not copy.is_file():
        files.directory(copy.parent, parents=True)
        for d in (copy.parent, copy.parent.parent, copy.parent.parent.parent):
            d.chmod(0o755)
        files.copy(path, copy, 0o755)  # renamed in whole: another allocmark sees all or nothing
    return copy


def _reachable(path: Path) -> bool:
    """Can any user read `path`: every directory above it open to others?"""
    try:
        if not path.stat().st_mode & stat.S_IROTH:
            return False
        return all(d.stat().st_mode & stat.S_IXOTH for d in path.parents)
    except OSError:
        return False


def program(name: str) -> Path:
    """Path of an installed native program such as `am_probe` or `am_churn`."""
    found = bundled(f"_bin/{name}")
    if found:
        return found
    raise AllocmarkError(
        f"native program {name} is not installed with allocmark; "
        "reinstall with `pip install .` (or run `make demo`), which builds it"
    )


def library(name: str) -> Path:
    """Path of a shared object built into the package, such as `libam_who.so`."""
    found = bundled(f"_lib/{name}")
    if found:
        return found
    raise AllocmarkError(
        f"native library {name} is not installed with allocmark; "
        "reinstall with `pip install .` (or run `make demo`), which builds it"
    )


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Identity of a library or program, recorded with every run on it."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cache_root() -> Path:
    """`$ALLOCMARK_CACHE`, else /var/cache/allocmark for root (the unprivileged user the
    measured program runs as reads its libraries and inputs there, run/runas.py; root's
    home is closed to it), else ~/.cache/allocmark (XDG_CACHE_HOME honoured)."""
    explicit = os.environ.get("ALLOCMARK_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    if os.geteuid() == 0:
        return Path("/var/cache/allocmark")
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(xdg) / "allocmark"
