"""What the kernel's count of a run's system calls costs the run (issue 68: at most 1 %
of run time), side by side.

The launcher opens syscall tracepoints on the program (native/run/am_run_kcount.c):
while one is open, every system call of every task takes the kernel's slower path into
and out of the call, and each counted one adds a counter's increment. Nothing else
changes: no sample, no buffer, no signal. So the cost is a few hundred nanoseconds per
system call, and a run's share is that times its calls over its time.

First the cost per call: a program making 2,000,000 getppid() calls (the cheapest
system call, of a kind not counted: the slower path alone), and one making as many
madvise() calls (a counted kind: its counters' increments too), each run with counting
on and off (AM_RUN_KCOUNT), back to back in a shuffled
order, round after round; the cost per call is the median of the rounds' differences
over the calls. Then each case, on and off the same way: the median wall-time ratio
on/off with its interquartile range (on this VM single runs vary by 10-20 %, so the
ratio's IQR says how far to trust it), the run's system calls (the kernel's own count,
`syscall_all`, from one more run that counts every call: AM_RUN_KCOUNT=2, which costs
more, so runs never count it), and the direct share: each call's cost (counted kinds
or not) times the calls over the wall time, which has no such noise. A campaign takes
a measured run again uncounted where its counted calls would cost more than 1 %
(run/kernel.py: BUDGET, at PER_CALL_S a call), its counts from the counted run before
it: each case says which its measured runs would be, and the verdict is on the direct
share of the worst case a measured run pays (an uncounted one pays none). Cases: the
calibration's real commands and compiled programs, and each cause it plants inside an
allocator as system calls (a madvise storm, a futex lock, a mapping per block, glibc
trimming on every free).

Last, what timing costs where it is on (the why pass's and `profile`'s runs: two samples
a timed call, am_run_ktime.c): the madvise program timed against counted only.

usage: .venv/bin/python bench/kcount_cost.py [ROUNDS (default 15)]   (as root)
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibration  # the bench's real commands and compiled programs

from allocmark import native, workloads
from allocmark.model import RunResult, RunSpec, RunStatus
from allocmark.run import execute, kernel

TARGET = 0.01
CALLS = 2_000_000
GETPPID = r"""
#include <unistd.h>
int main(void) {
  for (int i = 0; i < 2000000; i++) (void)getppid();
  return 0;
}
"""
# A counted kind: madvise (three counters: all of it, DONTNEED, FREE) with advice that
# changes nothing.
MADVISE = r"""
#include <sys/mman.h>
int main(void) {
  char *p = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  for (int i = 0; i < 2000000; i++) madvise(p, 4096, MADV_NORMAL);
  return 0;
}
"""
COUNTED = kernel.COUNTED


def spec(name: str, argv: list[str]) -> RunSpec:
    return RunSpec(
        seq=0,
        allocator="glibc",
        workload=name,
        params=(),
        rep=0,
        argv=tuple(argv),
        env=(),
        timeout=600,
    )


def run(s: RunSpec, counted: bool, every: bool = False, timed: bool = False) -> RunResult:
    """A run counted as every run is (or not); `every`: every system call counted too;
    `timed`: its calls timed too, as a profiled run's are."""
    os.environ["AM_RUN_KCOUNT"] = "2" if every else "1" if counted else "0"
    os.environ["AM_RUN_KTIME"] = "1" if timed else "0"
    r = execute.run(s)
    if r.status is not RunStatus.OK:
        sys.exit(f"{s.workload}: {r.status.value}: {r.detail}")
    if counted and "syscall_mmap" not in r.metrics:
        sys.exit(f"{s.workload}: not counted: {r.labels.get(kernel.LABEL, '?')}")
    return r


def paired(s: RunSpec, rounds: int) -> list[tuple[RunResult, RunResult]]:
    """(on, off) of each round, in a shuffled order within the round."""
    out = []
    for _ in range(rounds):
        order = [True, False]
        random.shuffle(order)
        got = {on: run(s, on) for on in order}
        out.append((got[True], got[False]))
    return out


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    if why := kernel.prepare():
        sys.exit(f"the kernel cannot count here: {why}")
    with tempfile.TemporaryDirectory(prefix="allocmark-kcount-") as tmp:
        work = Path(tmp)
        work.chmod(0o755)  # the runs' identity reads the programs and the text
        for name, source in (("getppid", GETPPID), ("madvise", MADVISE)):
            (work / f"{name}.c").write_text(source)
            cc = ["cc", "-O1", "-o", str(work / name), str(work / f"{name}.c")]
            subprocess.run(cc, check=True)
        print(f"{rounds} rounds, counting on and off back to back (shuffled order)")
        per_call = cost_per_call(spec("getppid", [str(work / "getppid")]), rounds)
        per_counted = cost_per_call(spec("madvise", [str(work / "madvise")]), rounds)
        timed = timing_cost(spec("madvise", [str(work / "madvise")]), rounds)
        print(
            f"a program must make {TARGET / per_call:,.0f} system calls a second of kinds not "
            f"counted, or {TARGET / per_counted:,.0f} of kinds counted, for the count to cost "
            f"it {TARGET:.0%}"
        )
        worst = 0.0
        cases = {name: spec(name, argv) for name, argv in calibration.commands(work).items()}
        cases |= {f"{plant} storm": storm(plant) for plant in calibration.CAUSES}
        for name, case in cases.items():
            pairs = paired(case, rounds)
            ratios = [on.wall_s / off.wall_s for on, off in pairs]
            q1, med, q3 = statistics.quantiles(ratios, n=4)
            m = run(case, True, every=True).metrics
            calls = m["syscall_all"]
            counted = sum(m[f"syscall_{k}"] for k in COUNTED)
            wall = statistics.median(off.wall_s for _, off in pairs)
            share = (per_call * (calls - counted) + per_counted * counted) / wall
            # A campaign's rule (kernel.cost_share, dispatchers.run_steady): over the
            # budget, the measured run is taken again uncounted and costs nothing.
            apart = kernel.cost_share(m, wall) > kernel.BUDGET
            worst = max(worst, 0.0 if apart else share)
            how = "uncounted, counted apart (1 run more)" if apart else "counted"
            print(
                f"{name:14} run {wall:6.2f} s  {calls:9,.0f} system calls ({counted:,.0f} "
                "counted)  wall on/off: median "
                f"{med:.4f} (IQR {q1:.4f}-{q3:.4f})  direct share: {share:.3%}  "
                f"measured runs: {how}"
            )
    verdict = "within" if worst <= TARGET else "ABOVE"
    print(
        f"the kernel's count costs a measured run at most {worst:.3%} of its time "
        f"(target <= {TARGET:.0%}): {verdict}"
    )
    print(
        f"timing (profiled runs only) adds {timed * 1e9:,.0f} ns a timed call more: "
        f"{TARGET / timed:,.0f} timed calls a second cost a program {TARGET:.0%}"
    )
    os.environ.pop("AM_RUN_KCOUNT")
    os.environ.pop("AM_RUN_KTIME")


def storm(plant: str) -> RunSpec:
    """A cause the calibration plants inside an allocator (burn's AM_BURN_PLANT), on its
    workload: the heaviest system-call loads a calibration allocator makes (the madvise
    storm gives back every freed block's pages: 30,000 calls a run; the futex lock takes
    a raw futex around every call of two threads)."""
    args, _ = calibration.CAUSES[plant]
    w = workloads.load_catalog()[args[0]]
    given = dict(a.split("=", 1) for a in args[2::2])
    params = workloads.resolve_params(w, given, "bench")
    burn = native.library("libam_burn.so")
    env = (("LD_PRELOAD", str(burn)), ("AM_BURN_PLANT", plant))
    return RunSpec(
        seq=0,
        allocator="burn",
        workload=w.name,
        params=params,
        rep=0,
        argv=workloads.expand(w, params),
        env=env,
        timeout=600,
        result_fd=True,
    )


def cost_per_call(s: RunSpec, rounds: int) -> float:
    """Seconds each system call gains while counted: the median of the rounds'
    differences over the calls."""
    pairs = paired(s, rounds)
    calls = run(s, True, every=True).metrics["syscall_all"]
    assert calls >= CALLS, calls  # the program's own, and the loader's
    gained = statistics.median(on.wall_s - off.wall_s for on, off in pairs) / calls
    off = statistics.median(off.wall_s for _, off in pairs) / calls
    print(
        f"{s.workload} x {CALLS:,}: {off * 1e9:.0f} ns a call, {gained * 1e9:+.0f} ns while "
        f"counting ({gained / off:+.1%})"
    )
    return max(gained, 0.0)


def timing_cost(s: RunSpec, rounds: int) -> float:
    """Seconds each timed call gains when timed as well as counted (a profiled run's
    two samples a call, am_run_ktime.c): the median of the rounds' differences."""
    out = []
    for _ in range(rounds):
        order = [True, False]
        random.shuffle(order)
        got = {t: run(s, True, timed=t) for t in order}
        if not any(k.startswith("systime_") for k in got[True].metrics):
            sys.exit(f"{s.workload}: not timed: {got[True].labels}")
        out.append(got[True].wall_s - got[False].wall_s)
    gained = statistics.median(out) / CALLS
    print(f"{s.workload} x {CALLS:,}: {gained * 1e9:+.0f} ns a call timed, against counted only")
    return max(gained, 1e-12)


if __name__ == "__main__":
    main()
