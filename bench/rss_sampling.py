"""What sampling RSS over time costs a run (issue 18: at most 1 % of run time), what
the explaining signals cost (issue 42: at most 1 % of time, no peak RSS), and what the
launcher's reading of what served malloc costs (issue 43: the watch, on and off).

am_run reads the run's RSS from /proc every 5 ms. Each case runs with sampling
on and off (AM_RUN_SAMPLE_US=0) back to back, in a shuffled order, round after
round; the cost is the median of the rounds' wall-time ratios (on / off), with
their interquartile range, and, measured directly, the CPU time the launcher
spent sampling as a share of the run's wall time. On this shared VM single
runs vary by 10-20 %, so the ratio's IQR says how far to trust it; the direct
share has no such noise. Cases: churn on 1 thread, churn on 2 threads (every
core busy: the sampler competes for a CPU), and python3 (an application).

The explaining signals (answer/why.py) are rusage's and statm's fields the
launcher already reads, and smaps_rollup read at new peaks within 1/200 of the
run's time (am_read_smaps): the second part runs each case with those reads on
and off (AM_RUN_NO_NEAR_PEAK) the same way and prints the wall-time ratio, the
peak RSS ratio and the reads' own time as a share of the wall time.

usage: .venv/bin/python bench/rss_sampling.py [ROUNDS (default 15)]
"""

from __future__ import annotations

import dataclasses
import os
import random
import statistics
import sys

from allocmark import allocators, workloads
from allocmark.model import RunResult, RunSpec, RunStatus
from allocmark.run import execute

TARGET = 0.01
PYTHON = "d = {}\nfor i in range(300000): d[i] = str(i) * 3\n"


def cases(glibc: str) -> dict[str, RunSpec]:
    w = workloads.load_catalog()["churn"]
    out = {}
    for threads in (1, 2):
        params = workloads.resolve_params(
            w, {"count": 100000, "rounds": 6, "threads": threads}, "bench"
        )
        out[f"churn threads={threads}"] = RunSpec(
            seq=0,
            allocator="glibc",
            workload="churn",
            params=params,
            rep=0,
            argv=workloads.expand(w, params),
            env=(),
            timeout=120,
            expect_malloc=glibc,
            result_fd=True,
        )
    out["python3"] = RunSpec(
        seq=0,
        allocator="glibc",
        workload="python3",
        params=(),
        rep=0,
        argv=("/usr/bin/python3", "-c", PYTHON),
        env=(("PYTHONMALLOC", "malloc"),),
        timeout=120,
    )
    return out


def run(spec: RunSpec, sampled: bool, near_peak: bool = True) -> RunResult:
    os.environ["AM_RUN_SAMPLE_US"] = "5000" if sampled else "0"
    if near_peak:
        os.environ.pop("AM_RUN_NO_NEAR_PEAK", None)
    else:
        os.environ["AM_RUN_NO_NEAR_PEAK"] = "1"
    r = execute.run(spec)
    if r.status is not RunStatus.OK:
        sys.exit(f"{spec.workload}: {r.status.value}: {r.detail}")
    return r


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    glibc = allocators.verify(allocators.select(allocators.load_catalog(), ["glibc"])[0])
    print(f"{rounds} rounds of each case, sampling on and off back to back (shuffled order)")
    worst = 0.0
    for name, spec in cases(str(glibc.malloc_object)).items():
        ratios, shares, walls = [], [], []
        for _ in range(rounds):
            order = [True, False]
            random.shuffle(order)
            got = {sampled: run(spec, sampled) for sampled in order}
            ratios.append(got[True].wall_s / got[False].wall_s)
            shares.append(got[True].metrics["rss_sample_s"] / got[True].wall_s)
            walls.append(got[False].wall_s)
        q1, med, q3 = statistics.quantiles(ratios, n=4)
        share = statistics.median(shares)
        worst = max(worst, share)
        print(
            f"{name:18} run {statistics.median(walls) * 1000:6.1f} ms  "
            f"wall on/off: median {med:.4f} (IQR {q1:.4f}-{q3:.4f})  "
            f"launcher's sampling time: {share:.3%} of the wall time"
        )
    verdict = "within" if worst <= TARGET else "ABOVE"
    print(f"sampling costs at most {worst:.3%} of run time (target <= {TARGET:.0%}): {verdict}")
    signals(glibc.malloc_object, rounds)
    watch(str(glibc.malloc_object), rounds)
    os.environ.pop("AM_RUN_SAMPLE_US")
    os.environ.pop("AM_RUN_NO_NEAR_PEAK", None)


def signals(glibc: object, rounds: int) -> None:
    """The near-peak smaps_rollup reads on and off, back to back (sampling on)."""
    print("explaining signals: smaps_rollup near the peak on and off, back to back")
    worst = 0.0
    for name, spec in cases(str(glibc)).items():
        ratios, rss, shares = [], [], []
        for _ in range(rounds):
            order = [True, False]
            random.shuffle(order)
            got = {on: run(spec, True, near_peak=on) for on in order}
            ratios.append(got[True].wall_s / got[False].wall_s)
            rss.append(got[True].maxrss_kib / got[False].maxrss_kib)
            shares.append(got[True].metrics["near_peak_read_s"] / got[True].wall_s)
        q1, med, q3 = statistics.quantiles(ratios, n=4)
        share = statistics.median(shares)
        worst = max(worst, share)
        print(
            f"{name:18} wall on/off: median {med:.4f} (IQR {q1:.4f}-{q3:.4f})  peak RSS "
            f"on/off: median {statistics.median(rss):.4f}  reads: {share:.3%} of the wall "
            "time"
        )
    verdict = "within" if worst <= TARGET else "ABOVE"
    print(
        f"the near-peak reads cost at most {worst:.3%} of run time (target <= {TARGET:.0%}): "
        f"{verdict}"
    )


def watch(glibc: str, rounds: int) -> None:
    """The launcher's reading of what served malloc (issue 43) on and off, back to back:
    a run that names the malloc it expects is watched (am_run_watch.c)."""
    print("the watch: what served malloc read by the launcher, on and off, back to back")
    specs = cases(glibc) | {
        "/bin/true": RunSpec(
            seq=0,
            allocator="glibc",
            workload="true",
            params=(),
            rep=0,
            argv=("/bin/true",),
            env=(),
            timeout=60,
        )
    }
    for name, spec in specs.items():
        ratios, shares = [], []
        for _ in range(rounds):
            order = [True, False]
            random.shuffle(order)
            got = {
                on: run(dataclasses.replace(spec, expect_malloc=glibc if on else None), True)
                for on in order
            }
            ratios.append(got[True].wall_s / got[False].wall_s)
            shares.append(got[True].metrics["watch_read_s"] / got[True].wall_s)
        q1, med, q3 = statistics.quantiles(ratios, n=4)
        print(
            f"{name:18} wall on/off: median {med:.4f} (IQR {q1:.4f}-{q3:.4f})  readings: "
            f"{statistics.median(shares):.3%} of the wall time"
        )


if __name__ == "__main__":
    main()
