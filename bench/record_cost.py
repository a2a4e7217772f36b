"""What recording costs a program (issue 69): its time without and with the recorder,
and the size of what it writes, side by side.

Each program runs under glibc without and with libamrec.so in front, the pair's two
runs back to back in a random order, REPETITIONS pairs; the cost is the median of
the pairs' wall-time ratios, with their interquartile range (the target: at most
1.5x). Each recorded run's recording is then made into a trace (am_trace, timed), and
the sizes are given per million calls. The programs are the catalog's applications
(Python with PYTHONMALLOC=malloc, sqlite3, Ruby, Lua) and samethread, the most
malloc-heavy microbenchmark (a call every few nanoseconds: the recorder's worst case).

usage: .venv/bin/python bench/record_cost.py [REPETITIONS (default 7)]
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from allocmark import native, workloads
from allocmark.native import identity
from allocmark.workloads import traces

TARGET = 1.5
PROGRAMS = {
    "python": {"scale": 2},
    "sqlite": {"scale": 4},
    "ruby": {"scale": 1},
    "lua": {"scale": 2},
    "samethread": {"count": 100000, "rounds": 10, "size_min": 16, "size_max": 64},
}


def command(name: str) -> tuple[list[str], dict[str, str]]:
    """The program's argv and environment, as a campaign expands them."""
    w = workloads.load_catalog()[name]
    params = workloads.resolve_params(w, PROGRAMS[name], "bench")
    argv = [a.replace("{tmpdir}", tempfile.gettempdir()) for a in workloads.expand(w, params)]
    return argv, identity.environment(workloads.expand_env(w, params))


def timed(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def recorded_env(env: dict[str, str], recording: Path) -> dict[str, str]:
    recording.write_bytes(b"")  # the recorder appends: one recording a run
    return env | {"LD_PRELOAD": str(native.library("libamrec.so")), "AM_REC_OUT": str(recording)}


def measure(name: str, reps: int, tmp: Path, rng: random.Random) -> str:
    argv, env = command(name)
    recording = tmp / f"{name}.recording"
    ratios = []
    for _ in range(reps):
        order = [False, True]
        rng.shuffle(order)
        took = {rec: timed(argv, recorded_env(env, recording) if rec else env) for rec in order}
        ratios.append(took[True] / took[False])
    trace = tmp / f"{name}.trace"
    trace.unlink(missing_ok=True)
    t0 = time.perf_counter()
    subprocess.run([str(native.program("am_trace")), str(recording), str(trace)], check=True)
    made = time.perf_counter() - t0
    s = traces.read(trace).summary
    calls = max(1, s.total_calls)
    q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
    per_m = 1e6 / calls / (1 << 20)
    verdict = "within" if q[1] <= TARGET else "ABOVE"
    return (
        f"{name:10} {calls:>12,} calls  recorded/plain: median {q[1]:.3f} (IQR {q[0]:.3f}-"
        f"{q[2]:.3f}) {verdict} {TARGET}x  recording {recording.stat().st_size * per_m:5.2f} MiB, "
        f"trace {trace.stat().st_size * per_m:5.2f} MiB per million calls; "
        f"made into a trace in {made:.2f} s ({made / calls * 1e9:.0f} ns a call)"
    )


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    rng = random.Random(69)
    print(f"glibc; {reps} pairs of runs (plain, recorded) in random order; wall time")
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        for name in PROGRAMS:
            print(measure(name, reps, Path(tmp), rng), flush=True)


if __name__ == "__main__":
    main()
