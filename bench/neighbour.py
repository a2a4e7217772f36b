"""The whole test suite, N times in a row, beside a CPU-busy neighbour (`make neighbour`).

A test that fails once and passes on a re-run is a bug; on this 2-core VM most such
bugs only show when another process takes a core. This starts the neighbour itself
(a process spinning on one core), runs pytest over tests/ N times (default 5), stops
the neighbour whatever happens, and prints each run's outcome and `passed K of N`;
for a failed run, each failure's assertion lines and where its whole output is kept.
Every failure it shows is to be fixed at its root, never re-run away.

usage: python bench/neighbour.py [N]
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPIN = "while True: pass"


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    neighbour = subprocess.Popen([sys.executable, "-c", SPIN])
    passed = 0
    try:
        for i in range(1, n + 1):
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                check=False,
            )
            summary = _summary(done.stdout)
            ok = done.returncode == 0
            passed += ok
            print(
                f"run {i} of {n}: {'passed' if ok else 'FAILED'} ({summary}) in "
                f"{time.monotonic() - started:.0f} s",
                flush=True,
            )
            if not ok:
                _show_failures(done.stdout + done.stderr)
    finally:
        neighbour.kill()
        neighbour.wait()
    print(f"beside a CPU-busy neighbour: passed {passed} of {n}")
    return 0 if passed == n else 1


def _show_failures(output: str) -> None:
    """Each failing test's name and its assertion lines (pytest's "E" lines, the last
    few of each), and where the whole output is kept: a failure seen once beside the
    neighbour may not come back, so what it said is kept for its root cause."""
    fd, path = tempfile.mkstemp(prefix="allocmark-neighbour-", suffix=".log")
    with os.fdopen(fd, "w") as f:
        f.write(output)
    said: list[str] = []
    for line in output.splitlines():
        if line.startswith("_____"):  # a failure's section begins
            said.append(line.strip("_ "))
        elif line.startswith("E ") and said:
            said.append(line)
        elif line.startswith(("FAILED", "ERROR")):
            print(f"  {line}", flush=True)
    for line in said[-40:]:
        print(f"    {line[:200]}", flush=True)
    print(f"  the whole output: {path}", flush=True)


def _summary(stdout: str) -> str:
    """pytest's closing counts ("431 passed, 2 skipped")."""
    found = re.findall(r"^=*\s*(\d+ (?:passed|failed).*?)(?: in [\d.]+s.*)?=*$", stdout, re.M)
    return found[-1].strip() if found else "no summary"


if __name__ == "__main__":
    sys.exit(main())
