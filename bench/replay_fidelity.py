"""How faithful a replay is (issue 69): programs recorded under glibc, their traces
replayed under glibc, the recorded run and the replays side by side.

For each program: `allocmark record` under glibc, then `allocmark replay` of its trace
under glibc for BLOCKS runs. The table gives the calls (recorded, and made by each
replay), the peak of requested bytes (in the recorded order, and as the replay
measured it: the same in one thread; threads interleave differently in a replay), and
the peak RSS (the recorded run's, under the recorder, and the replays' median): a
replay holds the program's blocks, not its code, stacks or other mappings, and its own
slot table (16 bytes a live block). With --allocators A,B,... each trace is also
replayed under those, and the verdicts of the replay campaign are printed.

usage: .venv/bin/python bench/replay_fidelity.py [BLOCKS (default 3)] [--allocators A,B,...]
       [--only NAME,...]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from allocmark import api

PYTHON = "/usr/bin/python3"
SCRIPT = (
    "import json\n"
    "d = {}\n"
    "for i in range(300000):\n"
    "    d[str(i)] = {'k': [i] * (i % 5), 's': str(i) * 3}\n"
    "    if i % 4 == 0: d.pop(str(i // 2), None)\n"
    "print(len(json.dumps(list(d.items())[:20000])))\n"
)
# name: `allocmark record` arguments after -o/--db
PROGRAMS: dict[str, list[str]] = {
    "python script": ["--env", "PYTHONMALLOC=malloc", "--", PYTHON, "-c", SCRIPT],
    "sqlite3": ["-w", "sqlite", "-p", "scale=4"],
    "redis 30 s": ["-w", "redis", "-p", "requests=40000", "--timeout", "300"],
    "churn 1 thread": ["-w", "churn", "-p", "count=50000", "-p", "rounds=4", "-p", "threads=1"],
    "churn 2 threads": ["-w", "churn", "-p", "count=50000", "-p", "rounds=4", "-p", "threads=2"],
    "churn large": [
        "-w",
        "churn",
        "-p",
        "count=4000",
        "-p",
        "size_min=1024",
        "-p",
        "size_max=65536",
        "-p",
        "rounds=4",
    ],
    "samethread 1": ["-w", "samethread", "-p", "count=50000", "-p", "rounds=4", "-p", "threads=1"],
    "samethread 2": ["-w", "samethread", "-p", "count=50000", "-p", "rounds=4", "-p", "threads=2"],
    "xthread": ["-w", "xthread", "-p", "steps=500000", "-p", "threads=2"],
    "larson": ["-w", "larson", "-p", "duration_ms=300", "-p", "threads=2"],
    "prodcons": ["-w", "prodcons", "-p", "count=500000"],
    "realloc": ["-w", "realloc", "-p", "count=1000", "-p", "rounds=2"],
}


def allocmark(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "allocmark", *args], capture_output=True, text=True, check=False
    )
    if done.returncode not in (0, 1):
        raise SystemExit(f"allocmark {' '.join(args[:3])}: {done.stderr.strip()}")
    return done


def measured(db: Path) -> list:
    store = api.reader(db)
    cid = store.campaign(None).id
    return [r for r in store.runs(cid) if r.role == "measure" and r.status.value == "ok"]


def row(name: str, args: list[str], blocks: int, others: list[str], tmp: Path) -> str:
    trace, rec_db, rep_db = tmp / f"{name}.trace", tmp / f"{name}-rec.db", tmp / f"{name}.db"
    done = allocmark("record", "-o", str(trace), "--db", str(rec_db), *args)
    if not trace.exists():
        return f"{name:16} not recorded: {done.stdout[-300:]} {done.stderr[-300:]}"
    t = api.trace(trace)
    s = t.summary
    recorded = s.recorded
    assert recorded is not None
    allocmark("replay", str(trace), "-a", ",".join(["glibc", *others]), "-n", str(blocks),
              "--max-blocks", str(blocks), "--db", str(rep_db))  # fmt: skip
    runs = [r for r in measured(rep_db) if r.allocator == "glibc"]
    if not runs:
        return f"{name:16} no replay ran"
    calls = sorted({int(r.metrics["replay_calls"]) for r in runs})
    peak = statistics.median(r.metrics["peak_requested_bytes"] for r in runs)
    rss = statistics.median(r.maxrss_kib for r in runs)
    line = (
        f"{name:16} {t.threads:>3} {s.total_calls:>11,} {'/'.join(f'{c:,}' for c in calls):>11} "
        f"{s.peak_requested_bytes / 2**20:9.2f} {peak / 2**20:9.2f} "
        f"{recorded.maxrss_kib / 1024:9.1f} {rss / 1024:9.1f} "
        f"{rss / max(1, recorded.maxrss_kib):6.2f}"
    )
    if others:
        verdicts = api.report(rep_db).comparison
        line += "\n" + "\n".join(f"    {v}" for v in _verdicts(verdicts))
    return line


def _verdicts(comp: api.Comparison) -> list[str]:
    lines = []
    for r in comp.rows:
        for metric in ("time_s", "maxrss_kib"):
            for alloc, cell in r.cells.get(metric, {}).items():
                if cell.ratio is not None and cell.verdict is not None:
                    lines.append(
                        f"{metric:10} {alloc:18} x{cell.ratio.value:.3f} {cell.verdict.value}"
                    )
    return lines


def main() -> None:
    args = sys.argv[1:]
    blocks = int(args.pop(0)) if args and args[0].isdigit() else 3
    others: list[str] = []
    only: set[str] = set()
    while args:
        flag, value = args.pop(0), args.pop(0)
        if flag == "--allocators":
            others = [a for a in value.split(",") if a != "glibc"]
        elif flag == "--only":
            only = set(value.split(","))
    print(f"recorded under glibc, replayed under glibc ({blocks} runs): calls, peak requested "
          "MiB, peak RSS MiB (recorded: under the recorder; replayed: median)")  # fmt: skip
    print(f"{'program':16} thr {'calls':>11} {'replayed':>11} {'req rec':>9} {'req rep':>9} "
          f"{'RSS rec':>9} {'RSS rep':>9} {'ratio':>6}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)
        for name, rec in PROGRAMS.items():
            if not only or name in only:
                print(row(name, rec, blocks, others, Path(tmp)), flush=True)


if __name__ == "__main__":
    main()
