"""Do a replay's verdicts agree with its program's? (issue 69)

For every row of a suite (default: quick, then apps): the row's program recorded under
glibc (`allocmark record -w W -p ...`), then two campaigns side by side with the same
allocators and budget: the real program (`allocmark run -w W -p ...`) and its trace
(`allocmark replay`). For each allocator the table gives both campaigns' peak-RSS and
time verdicts; agreement counts the cells both decided (better/worse/same) and whether
they say the same word; the blocks each took to decide its time verdict are set side
by side. The target (issue 69): peak-RSS verdicts agree in at least 90 % of the cells
both decide.

usage: .venv/bin/python bench/replay_agreement.py [SUITE[,SUITE...] (default quick,apps)]
       [--allocators A,B,...] [--blocks N]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

from allocmark import api, workloads
from allocmark.run import plan, suites

ALLOCATORS = "glibc,jemalloc,tcmalloc-minimal,mimalloc,tbbmalloc,scudo"
METRICS = {"maxrss_kib": "peak RSS", "time_s": "time"}


def allocmark(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "allocmark", *args], capture_output=True, text=True, check=False
    )


def params(p: tuple[tuple[str, object], ...]) -> list[str]:
    out = []
    for k, v in p:
        out += ["-p", f"{k}={str(v).lower() if isinstance(v, bool) else v}"]
    return out


def cells(db: Path) -> tuple[dict[tuple[str, str], tuple[str, int]], int]:
    """(metric, allocator) -> (verdict, blocks), and the campaign's blocks."""
    comp = api.report(db).comparison
    found = {}
    for row in comp.rows:
        for metric in METRICS:
            for alloc, cell in row.cells.get(metric, {}).items():
                if cell.verdict is not None:
                    found[(metric, alloc)] = (cell.verdict.value, cell.runs)
    blocks = max((n for _, n in found.values()), default=0)
    return found, blocks


def row(workload: str, p: tuple, allocators: str, blocks: list[str], tmp: Path) -> list[tuple]:
    name = f"{workload} {' '.join(f'{k}={v}' for k, v in p)}"
    key = name.replace(" ", "_").replace("=", "")
    trace = tmp / f"{key}.trace"
    r = allocmark("record", "-o", str(trace), "--db", str(tmp / f"{key}-rec.db"), "-w", workload,
                  *params(p))  # fmt: skip
    if not trace.exists():
        print(f"{name}: not recorded: {r.stderr.strip()[-300:]}", flush=True)
        return []
    real, replay = tmp / f"{key}-real.db", tmp / f"{key}-replay.db"
    allocmark("run", "-w", workload, *params(p), "-a", allocators, "--db", str(real), *blocks)
    allocmark("replay", str(trace), "-a", allocators, "--db", str(replay), *blocks)
    (a, _), (b, _) = cells(real), cells(replay)
    out = []
    for (metric, alloc), (va, na) in sorted(a.items()):
        if (metric, alloc) in b:
            vb, nb = b[(metric, alloc)]
            out.append((name, METRICS[metric], alloc, va, na, vb, nb))
            print(f"{name:40} {METRICS[metric]:8} {alloc:18} program {va:9} ({na:2} runs)  "
                  f"replay {vb:9} ({nb:2} runs)", flush=True)  # fmt: skip
    return out


def main() -> None:
    args = sys.argv[1:]
    names = args.pop(0).split(",") if args and not args[0].startswith("--") else ["quick", "apps"]
    allocators, blocks = ALLOCATORS, []
    while args:
        flag, value = args.pop(0), args.pop(0)
        if flag == "--allocators":
            allocators = value
        elif flag == "--blocks":
            blocks = ["-n", value, "--max-blocks", value]
    found = []
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)
        for suite_name in names:
            suite = suites.load_suite(suite_name)
            for w, p in plan.rows(suite, workloads.load_catalog(), {}):
                found += row(w.name, p, allocators, blocks, Path(tmp))
    for what in METRICS.values():
        both = [f for f in found if f[1] == what and "undecided" not in (f[3], f[5])]
        same = sum(f[3] == f[5] for f in both)
        print(f"{what}: both decided {len(both)} cells, agree in {same} "
              f"({same / max(1, len(both)):.0%})")  # fmt: skip


if __name__ == "__main__":
    main()
