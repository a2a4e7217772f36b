"""Slowdown of the profiler (issue 7), and heaptrack's for comparison.

samethread with small sizes at 1 thread (the most malloc-heavy case) runs under
every usable catalog allocator without and with libamprof.so in front of it:
each round runs every allocator's pair back to back (in a shuffled order, the
pair's two runs too), so that both runs of a pair see the same machine; the
slowdown is the median of the pairs' ratios, with their interquartile range.
The time is the workload's own (its allocation loop, from its metrics
record), so start-up and the profile's writing at exit are not in it.

Process against process, this shared VM varies by tens of percent from run to
run, so each allocator is also measured inside one process (am_ab.c: phases
of the same loop alternate between the allocator's own malloc/free and the
profiler's in front of it; the median of 200 paired ratios). An allocator is
above the target when the in-process ratio is, or when even the first
quartile of its process pairs is (3 pairs in 4 above it). Then the same
under heaptrack (glibc only: heaptrack brings its own preload), if
Debian's heaptrack is installed (`make bench` installs it).

usage: .venv/bin/python bench/profile_overhead.py [REPETITIONS (default 11)]
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

from allocmark import allocators, profile, workloads
from allocmark.model import Verified
from allocmark.native import identity

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
    env = identity.environment(v.child_env() if v else {})
    if profiled:
        env["LD_PRELOAD"] = ":".join(filter(None, (profile.shim_library(), env.get("LD_PRELOAD"))))
    return env | {"AM_PROF_OUT": str(out)}


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 11
    cmd = argv()
    catalog = [s for s in allocators.load_catalog() if not s.hidden]
    usable = [v for v in allocators.verify_all(catalog) if v.usable]
    times: dict[str, list[tuple[float, float]]] = {v.spec.name: [] for v in usable}
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profile"
        for _ in range(reps):
            for v in rng.sample(usable, len(usable)):
                times[v.spec.name].append(pair(cmd, v, out, rng))
        ab = build_ab(Path(tmp))
        inside = {v.spec.name: in_process(ab, v, out) for v in usable}
        print(
            f"samethread {PARAMS}, {reps} pairs of processes each (the workload's own "
            "time); in one process: 200 paired phases"
        )
        print(
            f"{'allocator':<26} {'plain':>9} {'profiled':>9} {'slowdown':>9}  {'IQR':>11}  "
            f"{'in-process':>10}  {'IQR':>11}"
        )
        lines = [report_line(name, runs, inside[name]) for name, runs in times.items()]
        summary("processes (medians)", [r for r, _, _ in lines])
        summary("in one process", [r for _, r, _ in lines])
        above = sum(a for _, _, a in lines)
        print(
            f"above the {TARGET}x target (in one process, or in 3 process pairs of 4): "
            f"{above} of {len(lines)}"
        )
        heaptrack(cmd, reps, Path(tmp))


def summary(how: str, ratios: list[float]) -> None:
    within = sum(r <= TARGET for r in ratios)
    print(
        f"slowdown, {how}: {within} of {len(ratios)} allocators within {TARGET}x; "
        f"median {statistics.median(ratios):.2f}x, largest {max(ratios):.2f}x"
    )


def build_ab(tmp: Path) -> Path:
    exe = tmp / "am_ab"
    src = Path(__file__).with_name("am_ab.c")
    subprocess.run(
        ["cc", "-O2", "-Wall", "-Wextra", "-Werror", str(src), "-o", str(exe), "-ldl"], check=True
    )
    return exe


def in_process(ab: Path, v: Verified, out: Path) -> dict[str, float]:
    """The A/B inside one process: the profiler in front, the allocator's own entry points."""
    env = env_for(v, True, out)
    proc = subprocess.run(
        [str(ab), v.malloc_object or ""], env=env, capture_output=True, text=True, check=True
    )
    return dict(json.loads(proc.stdout))


def pair(cmd: list[str], v: Verified, out: Path, rng: random.Random) -> tuple[float, float]:
    """One plain and one profiled run, back to back in a random order."""
    t = {}
    for profiled in rng.sample((False, True), 2):
        out.unlink(missing_ok=True)
        t[profiled] = seconds(cmd, env_for(v, profiled, out))
    return t[False], t[True]


def report_line(
    name: str, runs: list[tuple[float, float]], inside: dict[str, float]
) -> tuple[float, float, bool]:
    """Prints an allocator's line; returns its slowdowns (processes, in one process) and
    whether it is above the target."""
    ratios = sorted(prof / plain for plain, prof in runs)
    q1, ratio, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
    above = inside["ratio"] > TARGET or q1 > TARGET
    flag = f"  above the {TARGET}x target" if above else ""
    plain = statistics.median(p for p, _ in runs)
    prof = statistics.median(p for _, p in runs)
    print(
        f"{name:<26} {plain:>8.4f}s {prof:>8.4f}s {ratio:>8.2f}x  {q1:.2f}-{q3:.2f}  "
        f"{inside['ratio']:>9.2f}x  {inside['q1']:.2f}-{inside['q3']:.2f}{flag}"
    )
    return ratio, inside["ratio"], above


def heaptrack(cmd: list[str], reps: int, tmp: Path) -> None:
    """glibc alone, under libamprof and under heaptrack, a triple per round."""
    tool = shutil.which("heaptrack")
    if tool is None:
        print("heaptrack: not installed (`sudo apt-get install heaptrack`, or `make bench`)")
        return
    base = env_for(None, False, tmp / "p")
    ways = {
        "plain": lambda i: seconds(cmd, base),
        "libamprof": lambda i: seconds(cmd, env_for(None, True, tmp / "p")),
        "heaptrack": lambda i: seconds([tool, "--raw", "-o", str(tmp / f"ht.{i}"), *cmd], base),
    }
    rng = random.Random(11)
    shim, tracked = [], []
    for i in range(reps):
        t = {name: ways[name](i) for name in rng.sample(sorted(ways), len(ways))}
        shim.append(t["libamprof"] / t["plain"])
        tracked.append(t["heaptrack"] / t["plain"])
    print(
        f"glibc under libamprof: {statistics.median(shim):.2f}x; "
        f"under heaptrack --raw: {statistics.median(tracked):.2f}x (medians of paired ratios)"
    )


if __name__ == "__main__":
    main()
