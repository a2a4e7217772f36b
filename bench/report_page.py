"""The quick suite's HTML page and plot files (issue 55): how large the page is, how
long `allocmark report --format html` takes to write it, and how long `report
--plots` takes to write every plot file; each timed as a user runs it, a separate
process, the median of REPS runs taken in rotation beside `python -c pass`.

Targets: the page <= 2 MB, written in <= 3 s; `report --plots` <= 5 s.

The database is the quick suite's (`make demo` writes results/quick.db); without
one, the quick suite is run first (about 2 minutes).

usage: .venv/bin/python bench/report_page.py [DB] [REPS]   (default results/quick.db, 3)
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ALLOCMARK = [sys.executable, "-m", "allocmark"]


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    db = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("results/quick.db")
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    if not db.exists():
        print(f"{db} does not exist: running the quick suite into it", flush=True)
        subprocess.run([*ALLOCMARK, "run", "--suite", "quick", "--db", str(db)], check=True)
    with tempfile.TemporaryDirectory() as tmp:
        page, plots = Path(tmp) / "quick.html", Path(tmp) / "plots"
        commands = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "report --format html": [
                *ALLOCMARK, "report", "--db", str(db), "--format", "html", "-o", str(page),
            ],
            "report --plots": [
                *ALLOCMARK, "report", "--db", str(db), "--format", "csv", "-o",
                str(Path(tmp) / "quick.csv"), "--plots", str(plots),
            ],
        }  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(reps):
            for name, argv in commands.items():
                shutil.rmtree(plots, ignore_errors=True)
                times[name].append(timed(argv))
        files = len(list(plots.iterdir()))
        size = page.stat().st_size
    median = {name: statistics.median(t) for name, t in times.items()}
    print(f"database {db}; median of {reps} runs each, in rotation")
    print(f"  python -c pass:        {median['python -c pass']:.2f} s")
    print(
        f"  report --format html:  {median['report --format html']:.2f} s, "
        f"{size / 1e6:.2f} MB (targets <= 3 s, <= 2 MB)"
    )
    print(
        f"  report --plots:        {median['report --plots']:.2f} s, {files} files (target <= 5 s)"
    )


if __name__ == "__main__":
    main()
