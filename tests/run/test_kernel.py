"""The kernel's count of a run's system calls (run/kernel.py, native/kernel.py and the
launcher's am_run_kcount.c), and the time inside them on profiled runs (am_run_ktime.c):
exact counts of planted raw calls over a whole tree, glibc's own calls, waits of known
length timed in a thread and a child, and the record read as untrusted."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from pathlib import Path

import pytest

from allocmark import dispatchers
from allocmark.allocators import catalog
from allocmark.model import RunResult, RunSpec, RunStatus
from allocmark.native import kernel as record, records
from allocmark.run import execute, kernel, launch
from allocmark.store import Store
from tests.conftest import cli
from tests.run.test_execute import spec

# Raw system calls the C library never makes for itself (MADV_FREE, FUTEX_WAKE on a word
# of its own) in three workers: a thread, a child the program waits for, and an orphan
# it never waits for (the launcher reaps it), which has done its work before the program
# exits. Each worker: 1,000 madvise(MADV_DONTNEED), 500 madvise(MADV_FREE), 300 futex
# waits that return at once (the word is not the expected value), 200 futex wakes.
STORM = r"""
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
static void *work(void *arg) {
  (void)arg;
  char *p = mmap(0, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  for (int i = 0; i < 1000; i++) { p[0] = 1; syscall(SYS_madvise, p, 4096, MADV_DONTNEED); }
  for (int i = 0; i < 500; i++) syscall(SYS_madvise, p, 4096, MADV_FREE);
  int word = 1;
  for (int i = 0; i < 300; i++) syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, 0, 0, 0);
  for (int i = 0; i < 200; i++) syscall(SYS_futex, &word, FUTEX_WAKE, 1, 0, 0, 0);
  return 0;
}
int main(void) {
  pthread_t t;
  pthread_create(&t, 0, work, 0);
  pthread_join(t, 0);
  pid_t child = fork();
  if (child == 0) { work(0); _exit(0); }
  waitpid(child, 0, 0);
  int done[2];
  if (pipe(done) != 0) return 1;
  if (fork() == 0) { work(0); if (write(done[1], "d", 1) != 1) _exit(1); _exit(0); }
  char c;
  return read(done[0], &c, 1) == 1 ? 0 : 1;
}
"""

# glibc serves each block of 64 MiB by a mapping of its own (above the largest its mmap
# threshold grows to, 32 MiB): an mmap and a munmap per block, made inside libc, where
# no interposed symbol sees them.
BIG_BLOCKS = r"""
#include <stdlib.h>
int main(void) {
  char *volatile p;  /* kept: a compiler may drop a malloc whose block nothing reads */
  for (int i = 0; i < 400; i++) { p = malloc(64 << 20); p[0] = 1; free(p); }
  return 0;
}
"""

# glibc in a thread's arena (64 MiB heaps it grows by mprotect and shrinks by madvise):
# 100 rounds of 1,000 blocks of 24 KiB, touched, then all freed, last first: each free
# at the top past the trim threshold gives the heap's top back.
GROW = r"""
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
static void *work(void *arg) {
  static char *b[1000];
  (void)arg;
  for (int r = 0; r < 100; r++) {
    for (int i = 0; i < 1000; i++) { b[i] = malloc(24 << 10); memset(b[i], 1, 64); }
    for (int i = 999; i >= 0; i--) free(b[i]);
  }
  return 0;
}
int main(void) {
  pthread_t t;
  pthread_create(&t, 0, work, 0);
  return pthread_join(t, 0);
}
"""

# Lock waits of known length (FUTEX_WAIT on a word nobody wakes, timed out after 20 ms):
# 10 in a thread, then 5 in a child process; the main thread gives a touched page back
# 2,000 times, then joins the thread, which sleeps 1 s after its waits: a join waits
# with FUTEX_WAIT_BITSET, no lock's wait.
WAITS = r"""
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static int word;
static void waits(int n) {
  struct timespec ms20 = {0, 20000000};
  for (int i = 0; i < n; i++) syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &ms20, 0, 0);
}
static void *thread(void *arg) {
  struct timespec s1 = {1, 0};
  (void)arg;
  waits(10);
  nanosleep(&s1, 0);
  return 0;
}
int main(void) {
  pthread_t t;
  pthread_create(&t, 0, thread, 0);
  char *p = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  for (int i = 0; i < 2000; i++) { p[0] = 1; syscall(SYS_madvise, p, 4096, MADV_DONTNEED); }
  pthread_join(t, 0);
  pid_t child = fork();
  if (child == 0) { waits(5); _exit(0); }
  return waitpid(child, 0, 0) == child ? 0 : 1;
}
"""

root = pytest.mark.skipif(os.geteuid() != 0, reason="the kernel counts for root here")


def _built(tmp_path: Path, name: str, source: str) -> str:
    (tmp_path / f"{name}.c").write_text(source)
    prog = str(tmp_path / name)
    subprocess.run(["cc", "-O1", "-pthread", "-o", prog, str(tmp_path / f"{name}.c")], check=True)
    return prog


@pytest.mark.integration
@root
def test_the_kernel_counts_every_raw_call_of_the_runs_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AM_RUN_KCOUNT", "2")  # every system call too (the cost bench's)
    r = execute.run(spec(_built(tmp_path, "storm", STORM)))
    assert r.status is RunStatus.OK, r.detail
    m = r.metrics
    assert kernel.LABEL not in r.labels
    assert m["syscall_madvise_free"] == 1500  # none of the C library's own
    assert m["syscall_futex_wake"] == 600
    # glibc adds its own: a thread's stack given back at its end, a join that waits
    assert m["syscall_madvise_dontneed"] >= 3000 and m["syscall_futex_wait"] >= 900
    assert m["syscall_madvise"] >= 4500 and m["syscall_futex"] >= 1500
    assert m["syscall_mmap"] >= 3  # each worker's own mapping, and the loader's
    assert m["syscall_all"] >= m["syscall_madvise"] + m["syscall_futex"] + m["syscall_mmap"]


@pytest.mark.integration
@root
def test_glibcs_own_calls_are_counted(tmp_path: Path) -> None:
    r = execute.run(spec(_built(tmp_path, "big", BIG_BLOCKS)))
    assert r.status is RunStatus.OK, r.detail
    assert "syscall_all" not in r.metrics  # not on every run: it costs 5 times the rest
    assert r.metrics["syscall_mmap"] >= 400 and r.metrics["syscall_munmap"] >= 400


@pytest.mark.integration
@root
def test_glibc_keep_asks_the_kernel_for_nothing_glibc_gives_back(tmp_path: Path) -> None:
    """The remedy catalog's glibc:keep (catalog/remedies.toml) for glibc's pages, maps,
    heap and protect mechanisms: the catalog's own setting, counted by the kernel."""
    (keep,) = [s for s in catalog.load_catalog() if s.name == "glibc:keep"]
    grow = _built(tmp_path, "grow", GROW)
    glibc, kept = (execute.run(spec(grow, env=env)) for env in ((), keep.env))
    assert glibc.status is RunStatus.OK and kept.status is RunStatus.OK, glibc.detail
    g, k = glibc.metrics, kept.metrics
    assert g["syscall_madvise_dontneed"] >= 50_000 and g["syscall_mprotect"] >= 500
    assert k["syscall_madvise_dontneed"] <= 10 and k["syscall_mprotect"] <= 50


@pytest.mark.integration
@root
def test_a_profiled_run_times_the_calls_of_its_tree(tmp_path: Path) -> None:
    """15 lock waits of 20 ms (a thread's and a child's) are 300 ms asleep on a futex word
    or a little more; the join's second or more is no lock's wait."""
    r = execute.run(dataclasses.replace(spec(_built(tmp_path, "waits", WAITS)), profile=True))
    assert r.status is RunStatus.OK, r.detail
    m = r.metrics
    assert record.UNTIMED not in r.labels
    assert {f"{record.TIME_PREFIX}{k}" for k in record.TIMED} <= m.keys()
    assert m["syscall_futex_wait"] >= 16  # the counts have the join's wait too
    assert 0.3 <= m["systime_futex_lock"] < 0.8
    assert 0 < m["systime_madvise"] <= r.wall_s  # 2,000 pages given back, inside the run
    assert m["systime_mremap"] == 0


@pytest.mark.integration
@root
def test_only_a_profiled_run_is_timed(tmp_path: Path) -> None:
    """Two samples a call: too dear for every run (bench/kcount_cost.py)."""
    r = execute.run(spec(_built(tmp_path, "waits", WAITS)))
    assert r.status is RunStatus.OK, r.detail
    assert r.metrics["syscall_futex_wait"] >= 15
    assert not any(k.startswith(record.TIME_PREFIX) for k in r.metrics)


@pytest.mark.integration
def test_a_run_the_kernel_cannot_count_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernel, "prepare", lambda: "tracefs is not mounted, and only root may")
    r = execute.run(spec("true"))
    assert r.status is RunStatus.OK, r.detail
    assert not any(k.startswith(record.PREFIX) for k in r.metrics)
    assert r.labels[kernel.LABEL] == "tracefs is not mounted, and only root may"


@pytest.mark.integration
def test_counting_turned_off_leaves_no_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AM_RUN_KCOUNT", "0")  # a launcher knob: bench/kcount_cost.py's
    r = execute.run(spec("true"))
    assert r.status is RunStatus.OK and not any(k.startswith(record.PREFIX) for k in r.metrics)


COUNTS = ",".join(f'"{k}":{i}' for i, k in enumerate(record.KINDS))
RUN = (
    '{"am":"run","v":4,"status":0,"wall_ns":1,"utime_us":0,"stime_us":0,"maxrss_kib":9,'
    '"minflt":0,"majflt":0,"nvcsw":0,"nivcsw":0,"exec_errno":0,"oom":0,"limit_by":"none",'
    '"stopped":0}'
)


def _kernel(counts: str, code: int = 0, failed: str = "", times: str = "null") -> str:
    return (
        f'{{"am":"kernel","v":2,"errno":{code},"failed":"{failed}","counts":{{{counts}}},'
        f'"times":{times}}}'
    )


def _times(ns: str = "", lost: int = 0, code: int = 0) -> str:
    ns = ns or ",".join(f'"{k}":{i * 1_000_000}' for i, k in enumerate(record.TIMED))
    calls = ",".join(f'"{k}":{i}' for i, k in enumerate(record.TIMED))
    failed = "ring" if code else ""
    return (
        f'{{"errno":{code},"failed":"{failed}","lost":{lost},"unpaired":0,"ns":{{{ns}}},'
        f'"calls":{{{calls}}}}}'
    )


def test_the_times_become_seconds_a_kind() -> None:
    report = launch.launcher_report(f"{_kernel(COUNTS, times=_times())}\n{RUN}\n".encode(), 0)
    assert report.problem == "" and report.untimed == ""
    assert report.metrics["systime_mmap"] == 0 and report.metrics["systime_futex_lock"] == 0.006


def test_times_with_samples_lost_are_no_times() -> None:
    """A time the kernel lost samples of reads less than it was: said, never compared."""
    text = f"{_kernel(COUNTS, times=_times(lost=12))}\n{RUN}\n".encode()
    report = launch.launcher_report(text, 0)
    assert report.problem == "" and report.metrics["syscall_mmap"] == 1
    assert not any(k.startswith(record.TIME_PREFIX) for k in report.metrics)
    assert report.untimed == "the kernel lost 12 of the run's timed system calls"


def test_times_the_kernel_would_not_take_say_why() -> None:
    report = launch.launcher_report(
        f"{_kernel(COUNTS, times=_times(code=12))}\n{RUN}\n".encode(), 0
    )
    assert report.untimed == (
        "the kernel would not time the run's system calls (its buffers: ENOMEM, Cannot "
        "allocate memory)"
    )


@pytest.mark.parametrize(
    "times",
    [
        _times(ns='"mmap":1'),  # not the launcher's kinds
        _times().replace('"brk":4000000', '"brk":-4'),
        _times().replace('"lost":0', '"lost":-1'),
        '"times"',
        "[]",
    ],
)
def test_forged_times_are_not_the_launchers(times: str) -> None:
    report = launch.launcher_report(f"{_kernel(COUNTS, times=times)}\n{RUN}\n".encode(), 0)
    assert report.problem.startswith("the launcher's report is not its own")
    assert not report.metrics


def test_the_record_becomes_one_metric_a_kind() -> None:
    report = launch.launcher_report(f"{_kernel(COUNTS)}\n{RUN}\n".encode(), 0)
    assert report.problem == "" and report.uncounted == ""
    assert report.metrics["syscall_all"] == 0 and report.metrics["syscall_futex_wake"] == 11


def test_a_record_without_every_call_is_the_launchers_too() -> None:
    counts = COUNTS.split(",", 1)[1]
    report = launch.launcher_report(f"{_kernel(counts)}\n{RUN}\n".encode(), 0)
    assert report.problem == "" and "syscall_all" not in report.metrics
    assert report.metrics["syscall_mmap"] == 1


def test_a_record_that_could_not_count_says_why() -> None:
    report = launch.launcher_report(f"{_kernel('', 1, 'open')}\n{RUN}\n".encode(), 0)
    assert report.problem == "" and not report.metrics
    assert report.uncounted == (
        "the kernel would not count the run's system calls (its events: EPERM, "
        "Operation not permitted)"
    )


@pytest.mark.parametrize(
    "counts",
    [
        COUNTS.replace('"mmap"', '"mmap2"'),  # not the launcher's kinds
        COUNTS.replace('"brk":5', '"brk":-4'),
        COUNTS.replace('"brk":5', '"brk":"x"'),
        COUNTS.rsplit(",", 1)[0],  # one kind missing
    ],
)
def test_a_forged_record_is_not_the_launchers(counts: str) -> None:
    """The program can write into the launcher's pipe: what does not parse as the
    launcher's record makes the run's report not count, never a number."""
    report = launch.launcher_report(f"{_kernel(counts)}\n{RUN}\n".encode(), 0)
    assert report.problem.startswith("the launcher's report is not its own")
    assert not report.metrics


def test_two_kernel_records_are_refused() -> None:
    text = f"{_kernel(COUNTS)}\n{_kernel(COUNTS)}\n{RUN}\n".encode()
    assert launch.launcher_report(text, 0).problem.startswith("the launcher's report")


def test_the_kinds_are_the_launchers() -> None:
    """native/kernel.py's KINDS name am_run_kcount.c's, in its order."""
    source = Path(__file__).parents[2] / "native" / "run" / "am_run_kcount.c"
    if not source.is_file():
        pytest.skip("the native sources are not beside these tests")
    text = source.read_text()
    table = text[text.index("am_kinds[] = {") : text.index("};", text.index("am_kinds[] = {"))]
    named = [line.split('"')[1] for line in table.splitlines() if line.strip().startswith('{"')]
    assert tuple(named) == record.KINDS
    timer = (source.parent / "am_run_ktime.c").read_text()
    listed = timer[
        timer.index("am_tkinds[] = {") : timer.index("};", timer.index("am_tkinds[] = {"))
    ]
    assert tuple(listed.split('"')[1::2]) == record.TIMED
    with pytest.raises(records.RecordError):
        record.read({"errno": 0, "failed": "", "counts": []})


# -- what counting may cost a measured run ------------------------------------------------
class _Counted:
    """An executor whose counted runs make `calls` madvise calls in 10 ms (their counts)
    and whose uncounted ones say only that they ran uncounted."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.seen: list[bool] = []

    def run(self, s: RunSpec) -> RunResult:
        self.seen.append(s.count)
        counts = {record.metric(k): 0.0 for k in record.KINDS if k != "all"}
        counts |= {"syscall_madvise": float(self.calls)} if s.count else {}
        wall = 0.010 if s.count else 0.008
        return RunResult(RunStatus.OK, wall_s=wall, metrics=counts if s.count else {"x": 1.0})

    def calibrate(self) -> float | None:
        return None


def test_a_run_whose_count_costs_more_than_the_budget_is_taken_again_uncounted() -> None:
    """1,000 counted calls in 10 ms cost 2.3 % of it (234 ns each): the measured run is
    taken again uncounted, and keeps the counted run's counts, said so; 400 (0.9 %) are
    kept as they were. Runs that are not measured (the why pass's) or are profiled (their
    calls are timed only where counted) are never taken again."""
    storm = _Counted(1000)
    r = dispatchers.run_steady(storm, spec("x"))
    assert storm.seen == [True, False]
    assert r.wall_s == 0.008 and r.metrics["x"] == 1.0  # the uncounted run's numbers
    assert r.metrics["syscall_madvise"] == 1000 and r.metrics[kernel.SHARE] == pytest.approx(0.0234)
    assert r.labels[kernel.APART] == (
        "in a run of its own just before: counting cost 2.3% of its time"
    )
    calm = _Counted(400)
    r = dispatchers.run_steady(calm, spec("x"))
    assert calm.seen == [True] and r.wall_s == 0.010 and kernel.APART not in r.labels
    why = _Counted(1000)
    dispatchers.run_steady(why, spec("x", role="why"))
    profiled = _Counted(1000)
    dispatchers.run_steady(profiled, spec("x", profile=True))
    assert why.seen == profiled.seen == [True]


@pytest.mark.integration
@root
def test_a_madvise_storm_is_measured_uncounted_and_counted_apart(tmp_path: Path) -> None:
    """A real storm (200,000 madvise calls, ~0.1 s: ~40 % of its time to count) through
    the executor every dispatcher uses: its measured run has its counts from a counted
    run just before it; a program of a few calls (sort) is counted where it runs."""
    storm = _built(tmp_path, "madvise", MADVISE_STORM)
    r = dispatchers.run_steady(execute.LocalExecutor(), spec(storm))
    assert r.status is RunStatus.OK, r.detail
    assert r.metrics["syscall_madvise"] >= 200_000 and r.metrics[kernel.SHARE] > kernel.BUDGET
    assert kernel.APART in r.labels and kernel.LABEL not in r.labels
    calm = dispatchers.run_steady(execute.LocalExecutor(), spec("sort", "/etc/passwd"))
    assert calm.metrics["syscall_mmap"] > 0 and kernel.APART not in calm.labels


MADVISE_STORM = r"""
#include <sys/mman.h>
int main(void) {
  char *p = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  for (int i = 0; i < 200000; i++) madvise(p, 4096, MADV_NORMAL);
  return 0;
}
"""


@pytest.mark.integration
@root
def test_a_campaign_says_which_runs_were_counted_apart(tmp_path: Path) -> None:
    """The storm under two allocators, 2 blocks: all 4 measured runs are taken again
    uncounted, their counts kept, and the report's noise line says how many and why."""
    storm = _built(tmp_path, "madvise", MADVISE_STORM)
    db = str(tmp_path / "storm.db")
    done = cli("try", "-a", "glibc,glibc:arena2", "-n", "2", "--max-blocks", "2", "--no-why",
               "--db", db, "--", storm)  # fmt: skip
    assert done.returncode == 0, done.stderr
    text = " ".join(cli("report", "--db", db, "--detail").stdout.split())
    said = re.search(r"(\d+) of (\d+) measured runs taken again uncounted: counting their "
                     r"system calls cost (\d+)% of their time \(mean\)", text)  # fmt: skip
    assert said and said[1] == said[2] == "4" and int(said[3]) > 1, text
    store = Store(Path(db), create=False)
    measured = [r for r in store.runs(store.campaign().id) if r.role == "measure"]
    assert all(r.metrics["syscall_madvise"] >= 200_000 for r in measured)
