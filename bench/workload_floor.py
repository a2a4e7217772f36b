"""Workload floor and noise (issue 3's performance figures).

Floor: time under the null allocator (bump: per-thread LIFO lists per size
class, no locks, nothing given back) / time under glibc, on churn and samethread
with default parameters: the workloads' own cost. Noise: coefficient of variation
of wall time over the glibc repetitions at 1 thread. Runs are interleaved (glibc,
bump, glibc, bump, ...) so drift hits both. And the profiler's own measure of the
same thing: the share of each workload's thread time spent inside glibc's malloc
(libamprof's sampled cycles, `allocmark run --profile`).

Issue 14's targets (floor <= 0.15 of user CPU; prodcons' CV no worse than
samethread's) were refuted by measurement and withdrawn in issue 26: the floor is
what these workloads cost, and prodcons' CV is the machine's. The figures are
printed for a reader, not judged.

usage: .venv/bin/python bench/workload_floor.py [REPETITIONS]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from allocmark import allocators, workloads
from allocmark.answer import stored
from allocmark.model import RunSpec, RunStatus, Verified
from allocmark.run import execute
from allocmark.store import Store


def spec(w_name: str, alloc: Verified, given: dict[str, object] | None = None) -> RunSpec:
    w = workloads.load_catalog()[w_name]
    params = workloads.resolve_params(w, given or {}, "bench")
    return RunSpec(
        seq=0,
        allocator=alloc.spec.name,
        workload=w_name,
        params=params,
        rep=0,
        argv=workloads.expand(w, params),
        env=tuple(alloc.child_env().items()),
        timeout=120,
        expect_malloc=alloc.malloc_object,
        result_fd=True,
    )


def measure(w_name: str, allocs: list[Verified], reps: int) -> dict[str, list[tuple[float, ...]]]:
    """(internal seconds, wall, user, sys) per repetition, per allocator."""
    out: dict[str, list[tuple[float, ...]]] = {a.spec.name: [] for a in allocs}
    for _ in range(reps):
        for a in allocs:
            r = execute.run(spec(w_name, a))
            if r.status is not RunStatus.OK:
                sys.exit(f"{w_name} under {a.spec.name}: {r.status.value}: {r.detail}")
            out[a.spec.name].append((r.metrics["seconds"], r.wall_s, r.user_s, r.sys_s))
    return out


def median(rows: list[tuple[float, ...]], i: int) -> float:
    return statistics.median(row[i] for row in rows)


# The quick suite's parameters: the noise a user of `make demo` meets.
QUICK = {"samethread": {"count": 50000, "rounds": 4}, "prodcons": {"count": 500000}}


def noise(glibc: Verified, reps: int) -> None:
    """Wall-time CV under glibc alone, samethread and prodcons interleaved (bump's
    prodcons, which faults in fresh pages all along, would disturb it)."""
    walls: dict[str, list[float]] = {n: [] for n in QUICK}
    for _ in range(reps):
        for name, given in QUICK.items():
            r = execute.run(spec(name, glibc, dict(given)))
            if r.status is not RunStatus.OK:
                sys.exit(f"{name} under glibc: {r.status.value}: {r.detail}")
            walls[name].append(r.wall_s)
    cvs = {n: statistics.stdev(w) / statistics.fmean(w) for n, w in walls.items()}
    print(
        f"glibc wall CV, quick-suite parameters, {reps} interleaved runs: "
        + ", ".join(f"{n} {cv:.1%}" for n, cv in cvs.items())
    )


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    specs = {s.name: s for s in allocators.load_catalog()}
    glibc, bump = (allocators.verify(specs[n]) for n in ("glibc", "bump"))
    print(f"{reps} interleaved repetitions per allocator, default parameters, 1 thread")
    print(
        f"{'workload':<11} {'floor (workload s)':>18} {'floor (wall)':>12} "
        f"{'floor (user CPU)':>16} {'bump sys s':>10} {'glibc wall CV':>13}"
    )
    for name in ("churn", "samethread"):
        m = measure(name, [glibc, bump], reps)
        g, b = m["glibc"], m["bump"]
        walls = [row[1] for row in g]
        cv = statistics.stdev(walls) / statistics.fmean(walls)
        floors = [median(b, i) / median(g, i) for i in range(3)]
        print(
            f"{name:<11} {floors[0]:>18.3f} {floors[1]:>12.3f} {floors[2]:>16.3f} "
            f"{median(b, 3):>10.3f} {cv:>13.1%}"
        )
    print("floor = median under bump / median under glibc")
    noise(glibc, max(reps, 15))
    allocator_share()


def allocator_share() -> None:
    """The profiler's estimate of the time inside glibc's allocator, per workload."""
    with tempfile.TemporaryDirectory(prefix="allocmark-floor-") as tmp:
        db = Path(tmp) / "p.db"
        argv = [
            sys.executable,
            "-m",
            "allocmark",
            "run",
            "-w",
            "churn,samethread",
            "-a",
            "glibc",
            "-n",
            "1",
            "--max-blocks",
            "1",
            "--profile",
            "--db",
            str(db),
        ]
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"profiled run failed:\n{done.stderr[-2000:]}")
        store = Store(db, create=False)
        views = stored.profiles(store, store.campaign().id)
    shares = [
        f"{v.workload} {s.time_share:.1%}"
        for v in views
        for s in v.summaries
        if s.time_share is not None
    ]
    print(
        "time inside glibc's allocator (profiler, default parameters): "
        + (", ".join(shares) or "not measured (the profiler saw no thread cycles)")
    )


if __name__ == "__main__":
    main()
