"""Where the native programs built into the package live."""

from __future__ import annotations

from pathlib import Path

import allocmark
from allocmark.errors import AllocmarkError


def program(name: str) -> Path:
    """Path of an installed native program such as `am_probe` or `am_churn`."""
    # Editable installs may split the package over several directories.
    for root in allocmark.__path__:
        candidate = Path(root) / "_bin" / name
        if candidate.is_file():
            return candidate
    raise AllocmarkError(
        f"native program {name} is not installed with allocmark; "
        "reinstall with `pip install .` (or run `make demo`), which builds it"
    )
