"""What the why pass costs a campaign (issue 42: at most 1.15x the time of one
without it, when it runs by default).

The same campaign (samethread and churn under glibc, mimalloc and jemalloc, a fixed
BLOCKS blocks) runs twice, with the default (`auto`: the pass runs when its forecast
is at most 15 % of the campaign's time) and with `--no-why`, in a random order; it
prints each one's wall time as a user waits for it, the ratio, and what the pass did.

usage: .venv/bin/python bench/why_pass.py [BLOCKS (default 32)]
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from allocmark.store import Store

CELLS = ("-w", "samethread,churn", "-p", "threads=1", "-p", "rounds=2")


def campaign(db: Path, blocks: int, why: list[str]) -> float:
    t0 = time.monotonic()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "allocmark",
            "run",
            *CELLS,
            "-a",
            "glibc,mimalloc,jemalloc",
            "-n",
            str(blocks),
            "--max-blocks",
            str(blocks),
            "--db",
            str(db),
            *why,
        ],
        check=True,
        capture_output=True,
    )
    return time.monotonic() - t0


def main() -> None:
    blocks = int(sys.argv[1]) if len(sys.argv) > 1 else 32
    with tempfile.TemporaryDirectory() as tmp:
        order = [("auto", []), ("off", ["--no-why"])]
        random.shuffle(order)
        took = {name: campaign(Path(tmp) / f"{name}.db", blocks, flag) for name, flag in order}
        note = Store(Path(tmp) / "auto.db", create=False).settings(1).get("why_pass", "")
    print(
        f"{blocks} blocks of 2 cells x 3 allocators; run in the order "
        f"{', '.join(n for n, _ in order)}"
    )
    print(f"with the why pass (default): {took['auto']:.1f} s ({note})")
    print(f"without (--no-why): {took['off']:.1f} s")
    ratio = took["auto"] / took["off"]
    print(f"ratio {ratio:.3f} (target <= 1.15): {'within' if ratio <= 1.15 else 'ABOVE'}")


if __name__ == "__main__":
    main()
