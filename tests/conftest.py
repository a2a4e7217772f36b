"""Shared fixtures: a CLI runner, helper shared objects, fake runs."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from allocmark import allocators
from allocmark.model import Verified

# A test suite started in the background of a non-interactive shell (`make test &`, a
# CI step under nohup) inherits SIGINT ignored, and so would every allocmark it starts:
# the Ctrl-C tests' SIGINT would then do nothing. Python's own handler here makes the
# children start with SIGINT at its default, as from a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

HERE = Path(__file__).parent
# A Python every user can run: run as root, allocmark runs the measured program as the
# user `allocmark` (run/runas.py), who cannot reach the interpreter of a virtualenv
# made from a Python in root's home (pyenv). Installed by `make setup-apps`.
PYTHON = "/usr/bin/python3"


def cli(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the allocmark CLI as a user would, in a child process (`env` adds variables).
    Its environment is always given: inherited, it would be the process's C-level one,
    where readline (loaded by a pytest plugin) sets COLUMNS=80 and LINES, which
    os.environ does not show and a piped allocmark reads as the width to draw."""
    return subprocess.run(
        [sys.executable, "-m", "allocmark", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=os.environ | (env or {}),
        check=False,
    )


# C source of an allocator that forwards the core API to glibc's own functions (its
# constructors and destructors are what a test plants).
FORWARDING = """extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
void *malloc(size_t n) { return __libc_malloc(n); }
void *calloc(size_t n, size_t m) { return __libc_calloc(n, m); }
void *realloc(void *p, size_t n) { return __libc_realloc(p, n); }
void free(void *p) { __libc_free(p); }
"""


def build_so(tmp: Path, name: str, source: str) -> Path:
    """Compile a small C shared object for verification tests."""
    if not shutil.which("cc"):
        pytest.skip("no C compiler")
    src = tmp / f"{name}.c"
    src.write_text(source)
    out = tmp / f"{name}.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    return out


@pytest.fixture(autouse=True)
def _tmp_readable(request: pytest.FixtureRequest) -> None:
    """Run as root, allocmark runs the measured programs as the user `allocmark`
    (run/runas.py), who must read what a test makes for them (a library, a script, an
    input): pytest's temporary directories are private (0700), so a test's is opened
    like an ordinary directory (0755, still writable by root only)."""
    if "tmp_path" in request.fixturenames:
        readable(request.getfixturevalue("tmp_path"))


def readable(directory: Path) -> Path:
    """A temporary directory the measured program's user can read (see _tmp_readable)."""
    if os.geteuid() == 0:
        top = Path(tempfile.gettempdir())
        for d in (directory, *directory.parents):
            if d == top or d == d.parent:
                break
            d.chmod(0o755)
    return directory


def writable_by_all(path: Path) -> Path:
    """A directory the measured program may write into (a test's hostile program leaves
    its findings there); sticky, as /tmp is."""
    path.mkdir(exist_ok=True)
    path.chmod(0o1777)
    return path


@pytest.fixture(scope="session")
def verified_catalog() -> list[Verified]:
    return allocators.verify_all(allocators.load_catalog())


@pytest.fixture(scope="session")
def installed(verified_catalog: list[Verified]) -> dict[str, Verified]:
    """Usable catalog allocators on this machine, by name."""
    return {v.spec.name: v for v in verified_catalog if v.usable}


@pytest.fixture(scope="module")
def finished_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished `try` campaign of two allocators, for the boundary tests to copy."""
    db = readable(tmp_path_factory.mktemp("done")) / "done.db"
    r = cli("try", "-n", "2", "--max-blocks", "2", "--db", str(db), "-a", "glibc,glibc:arena2",
            "--", "true")  # fmt: skip
    assert r.returncode == 0, r.stderr
    return db
