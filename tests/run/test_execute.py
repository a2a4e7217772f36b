"""The executor against real processes: measurements, crashes, timeouts."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from allocmark.model import RunSpec, RunStatus, Verified
from allocmark.run import execute
from tests.conftest import PYTHON, writable_by_all
from tests.fakes import alive

pytestmark = pytest.mark.integration


def spec(*argv: str, timeout: float = 30, **kw: object) -> RunSpec:
    fields: dict[str, object] = {"env": ()} | kw
    return RunSpec(
        seq=0,
        allocator="x",
        workload="w",
        params=(),
        rep=0,
        argv=argv,
        timeout=timeout,
        **fields,  # type: ignore[arg-type]
    )


def test_ok_run_is_measured() -> None:
    r = execute.run(spec("sleep", "0.3"))
    assert r.status is RunStatus.OK and r.exit_code == 0
    assert 0.29 < r.wall_s < 10.0
    assert r.maxrss_kib > 0


def test_peak_rss_is_the_childs_own_not_pythons() -> None:
    # Linux keeps peak RSS across execve; without the launcher a tiny child would
    # report at least this Python process's RSS.
    small = execute.run(spec("true"))
    big = execute.run(spec(PYTHON, "-c", "b = b'x' * (200 * 2**20)"))
    assert small.status is RunStatus.OK and big.status is RunStatus.OK
    assert small.maxrss_kib < 8 * 1024
    assert big.maxrss_kib > 200 * 1024


def test_crash_is_recorded_with_its_signal() -> None:
    r = execute.run(spec("sh", "-c", "echo dying >&2; kill -SEGV $$"))
    assert r.status is RunStatus.CRASHED
    assert r.signal == 11 and r.exit_code is None
    assert r.detail == "SIGSEGV: dying"


def test_nonzero_exit_is_failed() -> None:
    r = execute.run(spec("sh", "-c", "exit 3"))
    assert (r.status, r.exit_code) == (RunStatus.FAILED, 3)


def test_missing_program_is_an_error() -> None:
    r = execute.run(spec("/nonexistent/program"))
    assert r.status is RunStatus.ERROR
    assert "No such file" in r.detail


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = writable_by_all(tmp_path / "out") / "pid"  # the program writes it
    script = f"sleep 60 & echo $! > {pidfile}; sleep 60"
    t0 = time.monotonic()
    r = execute.run(spec("sh", "-c", script, timeout=1.0))
    assert r.status is RunStatus.TIMEOUT
    assert r.wall_s == 1.0  # it ran (at least) that long, not 0
    assert time.monotonic() - t0 < 10
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)


def _gone(pid: int, within: float = 5) -> bool:
    deadline = time.monotonic() + within
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not alive(pid)


@pytest.mark.parametrize("timeout", [30.0, 1.0], ids=["run ends", "timeout"])
def test_a_process_that_left_the_group_ends_with_the_run(tmp_path: Path, timeout: float) -> None:
    # setsid leaves the process group (and session) a group kill would reach.
    pidfile = writable_by_all(tmp_path / "out") / "pid"  # the program writes it
    script = f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 60' & sleep 0.3; "
    script += "sleep 60" if timeout < 5 else "true"
    r = execute.run(spec("sh", "-c", script, timeout=timeout))
    assert r.status is (RunStatus.TIMEOUT if timeout < 5 else RunStatus.OK), r.detail
    assert _gone(int(pidfile.read_text()))


def test_usage_of_the_leftovers_killed_at_the_end_is_not_the_runs() -> None:
    # The left-over sleep is killed after the wall time was taken.
    r = execute.run(spec("sh", "-c", "setsid sleep 30 & exit 0"))
    assert r.status is RunStatus.OK and r.wall_s < 5


def test_native_workload_reports_metrics_and_its_malloc(installed: dict[str, Verified]) -> None:
    from allocmark import native

    churn = str(native.program("am_churn"))
    for name in [n for n in ("glibc", "mimalloc", "jemalloc") if n in installed]:
        v = installed[name]
        r = execute.run(
            spec(
                churn,
                "--count",
                "1000",
                "--rounds",
                "2",
                env=tuple(v.child_env().items()),
                result_fd=True,
                expect_malloc=v.malloc_object,
            )
        )
        assert r.status is RunStatus.OK, r.detail
        assert r.metrics["ops"] == 2 * 2 * (1000 + 500)
        assert r.malloc_object and os.path.realpath(r.malloc_object) == v.library


def test_run_on_the_wrong_allocator_is_unverified(installed: dict[str, Verified]) -> None:
    from allocmark import native

    others = [v for n, v in installed.items() if not v.spec.system]
    if not others:
        pytest.skip("no preloadable allocator installed")
    # Expect the allocator's library but run without its preload: what a silently
    # ignored LD_PRELOAD looks like.
    r = execute.run(
        spec(
            str(native.program("am_churn")),
            "--count",
            "100",
            "--rounds",
            "1",
            result_fd=True,
            expect_malloc=others[0].library,
        )
    )
    assert r.status is RunStatus.UNVERIFIED
    assert "libc.so" in r.detail


def test_workload_without_metrics_record_fails() -> None:
    r = execute.run(spec("true", result_fd=True))
    assert r.status is RunStatus.FAILED
    assert "no valid metrics record" in r.detail


def test_a_flood_of_output_is_counted_not_kept() -> None:
    import resource

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    r = execute.run(spec("sh", "-c", "head -c 200000000 /dev/zero | tr '\\0' x >&2; exit 3"))
    assert (r.status, r.exit_code) == (RunStatus.FAILED, 3)
    assert r.metrics["stderr_bytes"] == 200_000_000
    assert r.detail.endswith("x" * 100)  # the tail is kept
    grew_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grew_kib < 32 * 1024


@pytest.mark.parametrize("env", [(), (("AM_RUN_NO_CGROUP", "1"),)], ids=["cgroup", "watchdog"])
def test_a_run_past_its_memory_limit_is_stored_as_oom(env: tuple[tuple[str, str], ...]) -> None:
    grab = "import time; b = bytearray(400 << 20); time.sleep(5)"
    r = execute.run(spec(PYTHON, "-c", grab, memory_limit=100 << 20, env=env))
    assert r.status is RunStatus.OOM, (r.status, r.detail)
    assert "memory limit of 100 MiB" in r.detail
    assert r.wall_s < 4  # killed at the limit, not at the end
    small = execute.run(
        spec(PYTHON, "-c", "b = bytearray(20 << 20)", memory_limit=100 << 20, env=env)
    )
    assert small.status is RunStatus.OK, small.detail
    assert small.labels["memory_limit_by"] == ("watchdog" if env else _limit_by_here())


def _limit_by_here() -> str:
    """How this host can hold a run's memory: as root, a writable v1 memory
    hierarchy or a writable v2 root offering the memory controller gives a cgroup;
    otherwise the watchdog."""
    own = dict(line.split(":", 2)[1:] for line in Path("/proc/self/cgroup").read_text().split())
    v1 = Path("/sys/fs/cgroup/memory" + own.get("memory", "").rstrip("/"))
    v2 = Path("/sys/fs/cgroup")
    if os.geteuid() != 0:
        return "watchdog"
    if "memory" in own and os.access(v1 / "memory.limit_in_bytes", os.W_OK):
        return "cgroup"
    controllers = v2 / "cgroup.controllers"
    if (
        controllers.exists()
        and "memory" in controllers.read_text().split()
        and os.access(v2, os.W_OK)
    ):
        return "cgroup2"
    return "watchdog"


THP_PROBE = r"""
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
int main(void) {  /* exit 0 if it got no huge pages after asking for them */
  size_t n = 64 << 20;
  char *p = aligned_alloc(2 << 20, n), buf[4096];
  madvise(p, n, MADV_HUGEPAGE);
  memset(p, 1, n);
  int fd = open("/proc/self/smaps_rollup", O_RDONLY);
  ssize_t k = read(fd, buf, sizeof buf - 1);
  buf[k > 0 ? k : 0] = 0;
  char *q = strstr(buf, "AnonHugePages:");
  return q && strtoull(q + 14, NULL, 10) > 0;
}
"""


def test_the_nothp_variant_turns_huge_pages_off_for_the_run(tmp_path: Path) -> None:
    from allocmark import allocators
    from allocmark.run import machine

    if machine.current().thp not in ("always", "madvise"):
        pytest.skip("transparent huge pages are off on this machine")
    (tmp_path / "thp.c").write_text(THP_PROBE)
    prog = str(tmp_path / "thp")
    subprocess.run(["cc", "-O1", "-o", prog, str(tmp_path / "thp.c")], check=True)
    (glibc,) = allocators.select(allocators.load_catalog(), ["glibc:nothp"])
    assert glibc.name == "glibc:nothp" and ("AM_RUN_THP", "never") in glibc.env
    off = execute.run(spec(prog, env=glibc.env))
    assert off.status is RunStatus.OK, off.detail  # no huge page with :nothp
    on = execute.run(spec(prog))
    assert on.status is RunStatus.FAILED  # the probe got huge pages without it


def _reporting(**fields: float) -> RunSpec:
    """A 'native workload' that writes its own metrics record, as `fields` say."""
    record = (
        '{"am":"result","v":2,"workload":"w","ops":1'
        + "".join(f',"{k}":{v}' for k, v in fields.items())
        + "}"
    )
    return spec("bash", "-c", f"echo '{record}' >&$AM_RESULT_FD", result_fd=True)


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"seconds": 99.0}, "the workload reported 99.000000 s, more than the"),
        ({"seconds": 0.0001, "idle_ms": 60000}, "the workload reported 60.000100 s"),
        ({"seconds": 0.0001, "rss_end_kib": 10**9}, "rss_end_kib 1000000000 KiB, above the peak"),
    ],
)
def test_a_workload_record_that_contradicts_the_launcher_fails_its_run(
    fields: dict[str, float], said: str
) -> None:
    r = execute.run(_reporting(**fields))
    assert r.status is RunStatus.FAILED and said in r.detail, r.detail


def test_a_workload_record_within_the_launchers_figures_counts() -> None:
    r = execute.run(_reporting(seconds=0.0001, rss_end_kib=100))
    assert r.status is RunStatus.OK and r.metrics["seconds"] == 0.0001, r.detail


def test_allocmark_is_not_dumpable_while_a_run_is_in_flight(tmp_path: Path) -> None:
    import ctypes
    import threading

    libc = ctypes.CDLL(None, use_errno=True)
    out = writable_by_all(tmp_path / "out")  # the program leaves its flag there
    started, done = out / "started", out / "done"
    seen: list[int] = []

    def watch() -> None:  # reads the flag while the program waits for it to
        deadline = time.monotonic() + 120  # a run that never starts fails below
        while not started.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        seen.append(libc.prctl(3, 0, 0, 0, 0))  # PR_GET_DUMPABLE
        done.touch()

    t = threading.Thread(target=watch)
    t.start()
    script = f"touch {started}; while [ ! -e {done} ]; do sleep 0.01; done"
    r = execute.run(spec("sh", "-c", script, timeout=120))
    t.join()
    assert r.status is RunStatus.OK and seen == [0]
    assert libc.prctl(3, 0, 0, 0, 0) == 1  # dumpable again once it ended
