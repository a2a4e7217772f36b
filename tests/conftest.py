"""Shared fixtures: a CLI runner, helper shared objects, fake runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from allocmark import allocators
from allocmark.model import Verified

HERE = Path(__file__).parent


def cli(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the allocmark CLI as a user would, in a child process (`env` adds variables)."""
    return subprocess.run(
        [sys.executable, "-m", "allocmark", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ | env if env else None,
        check=False,
    )


def build_so(tmp: Path, name: str, source: str) -> Path:
    """Compile a small C shared object for verification tests."""
    if not shutil.which("cc"):
        pytest.skip("no C compiler")
    src = tmp / f"{name}.c"
    src.write_text(source)
    out = tmp / f"{name}.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


@pytest.fixture(scope="session")
def verified_catalog() -> list[Verified]:
    return allocators.verify_all(allocators.load_catalog())


@pytest.fixture(scope="session")
def installed(verified_catalog: list[Verified]) -> dict[str, Verified]:
    """Usable catalog allocators on this machine, by name."""
    return {v.spec.name: v for v in verified_catalog if v.usable}
