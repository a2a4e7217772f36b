"""How fast the command line starts (issue 27): `allocmark --help` beside the
import of Typer alone and an empty interpreter, each the median of REPS runs taken
in rotation (so that the machine's moments fall on all three alike).

Target: `allocmark --help` within 2x the Typer import. Also printed: `allocmark
workloads --packages` (a verb that reads a catalog) and `allocmark report --help`.

usage: .venv/bin/python bench/startup.py [REPS]   (default 21)
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

PY = sys.executable
COMMANDS = {
    "python -c pass": [PY, "-c", "pass"],
    'python -c "import typer"': [PY, "-c", "import typer"],
    "allocmark --help": [PY, "-m", "allocmark", "--help"],
    "allocmark report --help": [PY, "-m", "allocmark", "report", "--help"],
    "allocmark workloads --packages": [PY, "-m", "allocmark", "workloads", "--packages"],
}


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - start


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    for argv in COMMANDS.values():
        timed(argv)  # warm: the first start reads the files from disk
    seen: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(reps):
        for name, argv in COMMANDS.items():
            seen[name].append(timed(argv))
    medians = {name: statistics.median(v) for name, v in seen.items()}
    for name, m in medians.items():
        print(f"{name:34s} median {m * 1000:7.1f} ms over {reps} runs")
    typer = medians['python -c "import typer"']
    ratio = medians["allocmark --help"] / typer
    print(
        f"allocmark --help / import typer: {ratio:.2f}x (target <= 2x): "
        f"{'within' if ratio <= 2 else 'OVER'} target"
    )


if __name__ == "__main__":
    main()
