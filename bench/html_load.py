"""How long the HTML report takes to load in headless Chromium (issue 27: under 2 s),
and how large the one self-contained file is. A real campaign (three allocators, two
rows, RSS over time) is run, its page written, then loaded REPS times: the page's
own script records `performance.now()` when it has run to its end (data-ready-ms).

usage: .venv/bin/python bench/html_load.py [REPS]   (default 5)
"""

from __future__ import annotations

import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ALLOCMARK = [sys.executable, "-m", "allocmark"]


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("chromium is not installed (make test installs it)")
    with tempfile.TemporaryDirectory() as tmp:
        db, page = Path(tmp) / "h.db", Path(tmp) / "h.html"
        subprocess.run(
            [
                *ALLOCMARK,
                "run",
                "-w",
                "churn",
                "-p",
                "threads=1,2",
                "-a",
                "glibc,glibc:arena2,mimalloc",
                "-n",
                "3",
                "--max-blocks",
                "3",
                "--db",
                str(db),
            ],
            check=True,
            capture_output=True,
        )
        subprocess.run(
            [*ALLOCMARK, "report", "--db", str(db), "--format", "html", "-o", str(page)],
            check=True,
            capture_output=True,
        )
        times = []
        for _ in range(reps):
            argv = [
                browser,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--window-size=1400,900",
                "--dump-dom",
                page.as_uri(),
            ]
            dom = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)
            found = re.search(r'data-ready-ms="(\d+)"', dom.stdout)
            if found is None:
                sys.exit("the page's script did not run to its end")
            times.append(int(found.group(1)) / 1000)
        print(
            f"HTML report: {page.stat().st_size / 1e6:.1f} MB, one file; ready after median "
            f"{statistics.median(times):.2f} s of {reps} loads in headless Chromium "
            "(target < 2 s)"
        )


if __name__ == "__main__":
    main()
