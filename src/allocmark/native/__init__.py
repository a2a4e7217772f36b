"""Native programs and libraries of the package, the cache, the record reader.

Where the programs and libraries built into the package live, allocmark's cache,
and (records.py) the one reader of what native programs write.

May import: `errors` only; every stage may import it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import allocmark
from allocmark.errors import AllocmarkError

PACKAGE_PREFIX = "@allocmark/"  # catalog paths into the installed package


def bundled(relative: str) -> Path | None:
    """A file installed with the package (e.g. `_lib/libam_bump.so`), if present."""
    # Editable installs may split the package over several directories.
    for root in allocmark.__path__:
        candidate = Path(root) / relative
        if candidate.is_file():
            return candidate
    return None


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
    """`$ALLOCMARK_CACHE`, else ~/.cache/allocmark (XDG_CACHE_HOME honoured)."""
    explicit = os.environ.get("ALLOCMARK_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(xdg) / "allocmark"
