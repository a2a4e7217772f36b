"""Slowdown of the profiler (issue 7), and heaptrack's for comparison.

samethread with small sizes at 1 thread (the most malloc-heavy case) runs under
every usable catalog allocator without and with libamprof.so in front of it,
interleaved and in a shuffled order per round; the ratio of the median times
is the slowdown. The time is the workload's own (its allocation loop, from
its metrics record), so start-up and the profile's writing at exit are not in
it. Then the same under heaptrack (glibc only: heaptrack brings its own
preload), if Debian's heaptrack is installed (`make bench` installs it).

usage: .venv/bin/python bench/profile_overhead.py [REPETITIONS]
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from allocmark import allocators, execute, profile, workloads
from allocmark.model import Verified

PARAMS = {"count": 100000, "rounds": 10, "size_min": 16, "size_max": 64, "threads": 1}
TARGET = 1.25


def argv() -> list[str]:
    w = workloads.load_catalog()["samethread"]
    return list(workloads.expand(w, workloads.resolve_params(w, PARAMS, "bench")))


def seconds(cmd: list[str], env: dict[str, str]) -> float:
    """The workload's own time: its metrics record is the JSON line on stdout."""
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    line = next(x for x in reversed(out.splitlines()) if x.startswith("{"))
    return float(json.loads(line)["seconds"])


def env_for(v: Verified | None, profiled: bool, out: Path) -> dict[str, str]:
    """The run's environment as allocmark builds it, the profiler in front when asked."""
    env = execute.child_environment(tuple(v.child_env().items()) if v else ())
    if profiled:
        env["LD_PRELOAD"] = ":".join(filter(None, (profile.shim_library(), env.get("LD_PRELOAD"))))
    return env | {"AM_PROF_OUT": str(out)}


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    cmd = argv()
    catalog = [s for s in allocators.load_catalog() if not s.hidden]
    usable = [v for v in allocators.verify_all(catalog) if v.usable]
    times: dict[tuple[str, bool], list[float]] = {}
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profile"
        for _ in range(reps):
            cells = [(v, p) for v in usable for p in (False, True)]
            rng.shuffle(cells)
            for v, profiled in cells:
                out.unlink(missing_ok=True)
                t = seconds(cmd, env_for(v, profiled, out))
                times.setdefault((v.spec.name, profiled), []).append(t)
        print(f"samethread {PARAMS}, {reps} runs each, median of the workload's own time")
        print(f"{'allocator':<26} {'plain':>9} {'profiled':>9} {'slowdown':>9} {'best-of':>8}")
        ratios = []
        for v in usable:
            plain, prof = times[(v.spec.name, False)], times[(v.spec.name, True)]
            ratio = statistics.median(prof) / statistics.median(plain)
            ratios.append(ratio)
            flag = "" if ratio <= TARGET else f"  above the {TARGET}x target"
            print(f"{v.spec.name:<26} {statistics.median(plain):>8.4f}s "
                  f"{statistics.median(prof):>8.4f}s {ratio:>8.2f}x "
                  f"{min(prof) / min(plain):>7.2f}x{flag}")  # fmt: skip
        within = sum(r <= TARGET for r in ratios)
        print(
            f"slowdown (ratio of medians): {within} of {len(ratios)} allocators within "
            f"{TARGET}x; median {statistics.median(ratios):.2f}x, largest {max(ratios):.2f}x"
        )
        heaptrack(cmd, reps, Path(tmp))


def heaptrack(cmd: list[str], reps: int, tmp: Path) -> None:
    tool = shutil.which("heaptrack")
    if tool is None:
        print("heaptrack: not installed (`sudo apt-get install heaptrack`, or `make bench`)")
        return
    plain, shim, tracked = [], [], []
    base = env_for(None, False, tmp / "p")
    glibc_shim = env_for(None, True, tmp / "p")
    for i in range(reps):
        plain.append(seconds(cmd, base))
        shim.append(seconds(cmd, glibc_shim))
        data = tmp / f"heaptrack.{i}"
        tracked.append(seconds([tool, "--raw", "-o", str(data), *cmd], base))
    p = statistics.median(plain)
    print(f"glibc under libamprof: {statistics.median(shim) / p:.2f}x; "
          f"under heaptrack --raw: {statistics.median(tracked) / p:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
