"""The whole test suite, N times in a row, beside a CPU-busy neighbour (`make neighbour`).

A test that fails once and passes on a re-run is a bug; on this 2-core VM most such
bugs only show when another process takes a core. This starts the neighbour itself
(a process spinning on one core), runs pytest over tests/ N times (default 5), stops
the neighbour whatever happens, and prints each run's outcome and `passed K of N`.
Every failure it shows is to be fixed at its root, never re-run away.

usage: python bench/neighbour.py [N]
"""

from __future__ import annotations

import re
import subprocess
import sys
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
            for line in done.stdout.splitlines():
                if line.startswith(("FAILED", "ERROR")):
                    print(f"  {line}", flush=True)
    finally:
        neighbour.kill()
        neighbour.wait()
    print(f"beside a CPU-busy neighbour: passed {passed} of {n}")
    return 0 if passed == n else 1


def _summary(stdout: str) -> str:
    """pytest's closing counts ("431 passed, 2 skipped")."""
    found = re.findall(r"^=*\s*(\d+ (?:passed|failed).*?)(?: in [\d.]+s.*)?=*$", stdout, re.M)
    return found[-1].strip() if found else "no summary"


if __name__ == "__main__":
    sys.exit(main())
