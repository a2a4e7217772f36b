"""Run one RunSpec as a child process and measure it. Never raises for a bad child.

The child is started through the native launcher `am_run`, which forks it from a
small process (so that peak RSS is the child's own, not Python's) and reports
its wait status, wall time and rusage on a pipe. What served malloc is read by the
launcher from outside the program: every process image of the run as it ends
(image.py); one served by anything but the allocator under test makes the run
UNVERIFIED. What the program says itself only cross-checks that reading: a native
workload's metrics record on a second pipe (AM_RESULT_FD) names its malloc object,
and other programs (applications, a user's command) run with libam_who preloaded
after the allocator, which reports what served malloc in each process.

Starting and reading the launcher is launch.py; a service (redis: a server and a
client that drives it) is service.py. This module decides what a run's outcome
means: its status, metrics and labels.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import errno
import functools
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from allocmark import files, native, profile, workloads
from allocmark.model import RunResult, RunSpec, RunStatus
from allocmark.native import identity, records
from allocmark.run import image, launch, machine, record, runas, service, who

STDERR_NOTE = 400  # bytes of a successful run's stderr kept with it (a label)


class Executor(Protocol):
    """Runs one spec; the campaign loop only talks to this."""

    def run(self, spec: RunSpec) -> RunResult: ...

    def calibrate(self) -> float | None:
        """Seconds a fixed CPU loop takes now (None where it cannot run)."""
        ...


class LocalExecutor:
    """Runs children on this machine, one at a time."""

    def run(self, spec: RunSpec) -> RunResult:
        return run(spec)

    def calibrate(self) -> float | None:
        return calibrate()


def calibrate() -> float | None:
    """am_run's fixed CPU loop, timed by itself: the machine's speed at this moment."""
    try:
        done = subprocess.run(
            [str(native.program("am_run")), "--calibrate"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    try:
        return int(records.one(done.stdout, "calib", "am_run --calibrate")["ns"]) / 1e9
    except (records.RecordError, KeyError, TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------
# The noise sentinel: what else used the CPUs while a run ran
# ---------------------------------------------------------------------------
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _cpu_ticks() -> tuple[int, int]:
    """(busy, steal) ticks of all CPUs since boot, from /proc/stat's first line."""
    try:
        with open("/proc/stat", "rb") as f:
            fields = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return 0, 0
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return user + nice + system + irq + softirq, steal


@dataclass
class _Sentinel:
    """/proc/stat and our own CPU time at the start of a run."""

    busy: int
    steal: int
    own: float

    @staticmethod
    def now() -> _Sentinel:
        busy, steal = _cpu_ticks()
        t = os.times()  # with the children reaped: the launcher, the run, a client
        return _Sentinel(busy, steal, t.user + t.system + t.children_user + t.children_system)

    def metrics(self) -> dict[str, float]:
        """CPU time others took during the run: every CPU's busy time less allocmark's
        and the processes it started and reaped; and the hypervisor's steal.
        /proc/stat counts in ticks (10 ms): short runs read to about a tick per CPU."""
        end = _Sentinel.now()
        busy = (end.busy - self.busy) * _TICK_S
        other = busy - (end.own - self.own)
        return {
            "noise_other_cpu_s": max(0.0, other),
            "noise_steal_s": (end.steal - self.steal) * _TICK_S,
        }


_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


@contextlib.contextmanager
def undumpable() -> Iterator[None]:
    """allocmark's own process is non-dumpable while a run is in flight: the measured
    program runs as the same user, and a dumpable parent's /proc/PID/fd would hand it
    the read ends of the launcher's pipes (opened for writing through /proc, they
    take a forged record). Root and CAP_SYS_PTRACE pass through this; the launcher's
    exit status and its one record are the check that holds there (see launch.launcher_report)."""
    libc = _libc()
    before = libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    try:
        yield
    finally:
        if before > 0:
            libc.prctl(_PR_SET_DUMPABLE, before, 0, 0, 0)


def run(spec: RunSpec) -> RunResult:
    sentinel = _Sentinel.now()
    with undumpable():
        result = _run(spec)
    if result.status is RunStatus.ERROR:
        return result
    noise = sentinel.metrics()
    return dataclasses.replace(result, metrics=result.metrics | noise)


def _run(spec: RunSpec) -> RunResult:
    started = time.time()
    with files.scratch("allocmark-run-") as tmp:
        room = launch.Room(tmp, runas.chosen())
        if spec.app.prepare and (failed := _prepare(spec, room)):
            return RunResult(
                RunStatus.FAILED, started=started, detail=failed, labels={"stage": "prepare"}
            )
        started = time.time()
        try:
            outcome = (
                service.run_service(spec, room, _env(spec, room))
                if spec.app.service
                else _run_plain(spec, room)
            )
        except OSError as e:
            return RunResult(
                RunStatus.ERROR,
                started=started,
                detail=f"cannot start {spec.argv[0]}: {e.strerror or e}",
            )
        if _who_checked(spec) and outcome.status:
            try:
                outcome.who = who.read(room.who)
                outcome.labels["calls"] = json.dumps(who.calls(room.who))
                source, outcome.alloc_stats = who.stats(room.who)
            except records.RecordError as e:  # the directory is the program's: its run fails
                outcome.verdict = (RunStatus.UNVERIFIED, f"what served malloc is unknown: {e}")
                source = "none"
            outcome.labels["alloc_stats"] = source
        if spec.profile:
            outcome.profile = _read_profile(room.profile)
        result = _interpret(spec, outcome, started)
        if spec.trace:
            result = record.made(spec, result, room.recording, room.work)
        return result


def _prepare(spec: RunSpec, room: launch.Room) -> str:
    """`try --prepare`: its command, before the run, as the run's identity, in the run's
    environment without the allocator (hyperfine runs it without the benchmark's
    settings too), within the run's timeout; "" when it exits 0, else why the run
    could not be made."""
    env = _home(room, tuple(kv for kv in spec.env if kv[0] != "LD_PRELOAD"))
    try:
        done = identity.contained(spec.app.prepare, env, spec.timeout)
    except OSError as e:
        return f"--prepare could not start: {e.strerror or e}"
    if done.code == 0:
        return ""
    how = "ran past the timeout" if done.code is None else f"exited with {done.code}"
    tail = (done.stdout + done.stderr).decode(errors="replace").strip()[-launch.STDERR_TAIL :]
    return f"--prepare {spec.app.prepare[-1]!r} {how}" + (f": {tail}" if tail else "")


def _read_profile(path: Path) -> list[dict[str, Any]] | str:
    """The run's profile records (one per process), or why there are none. They are
    stored as they are; analysis sums and interprets them (profile/)."""
    try:
        found = profile.read(path)
    except records.RecordError as e:
        return f"unreadable profile record: {e}"
    return found or "the profiler wrote no record"


def _who_checked(spec: RunSpec) -> bool:
    """Programs that do not report their own malloc run with libam_who, except the
    measured runs of a campaign (its pages would count in their peak RSS): a
    verification run of their row carries it (dispatchers.checked)."""
    return spec.expect_malloc is not None and not spec.result_fd and spec.role != "measure"


def _home(room: launch.Room, additions: Sequence[tuple[str, str]]) -> dict[str, str]:
    """Never allocmark's own environment: the minimal one, the run's directory as home."""
    return {"HOME": str(room.work), "TMPDIR": str(room.work)} | identity.environment(additions)


def _env(spec: RunSpec, room: launch.Room) -> dict[str, str]:
    env = _home(room, spec.env)
    if spec.profile:  # in front of the allocator, so that it sees every call
        shim = profile.shim_library()
        env["LD_PRELOAD"] = f"{shim}:{env['LD_PRELOAD']}" if "LD_PRELOAD" in env else shim
        env["AM_PROF_OUT"] = str(room.profile)
        env["AM_RUN_KTIME"] = "1"  # the time inside its system calls (run/kernel.py)
    if spec.trace:
        record.preload(env, room.recording)
    if _who_checked(spec):
        who = str(native.library("libam_who.so"))
        env["LD_PRELOAD"] = f"{env['LD_PRELOAD']}:{who}" if "LD_PRELOAD" in env else who
        env["AM_WHO_DIR"] = str(room.who)
    if "LD_PRELOAD" in env:  # am_run hands it to the child only
        env["AM_RUN_LD_PRELOAD"] = env.pop("LD_PRELOAD")
    if spec.expect_malloc:  # what serves malloc is read by the launcher, from outside
        env["AM_RUN_WATCH"] = "1"
    return env


def _run_plain(spec: RunSpec, room: launch.Room) -> launch.Outcome:
    with launch.Launched(room.fill(spec.argv), _env(spec, room), spec) as child:
        # A launcher found stopped at the deadline is the run's error, not its timeout.
        timed_out = child.wait(time.monotonic() + spec.timeout) and not child.stopped
    outcome = launch.Outcome(
        {},
        child.record,
        timed_out,
        stdout=child.streams.text("stdout"),
        stderr=child.streams.text("stderr"),
        output=child.output_bytes(),
    )
    child.launcher().fill(outcome)
    return outcome


def _interpret(spec: RunSpec, o: launch.Outcome, started: float) -> RunResult:
    st = o.status
    status, detail = o.verdict or _run_status(
        spec, st, o.timed_out, o.stderr[-launch.STDERR_TAIL :].strip()
    )
    if o.launcher_problem and not o.timed_out:  # at a timeout, allocmark stopped it
        status, detail = RunStatus.ERROR, o.launcher_problem
    metrics: dict[str, float] = {}
    labels = dict(o.labels)
    malloc_object = None
    seen = _expected_in_process(spec)
    if status is RunStatus.OK and spec.result_fd:
        metrics, record_labels, problem = _parse_record(o.record)
        labels |= record_labels
        malloc_object = labels.pop("malloc_object", None)
        problem = problem or _disagrees(metrics, st)
        if problem:
            status, detail = RunStatus.FAILED, problem
    if status is RunStatus.OK and spec.app.parsers:
        metrics, problem = workloads.parse_metrics(spec.app.parsers, o.stdout, o.stderr)
        if problem:
            status, detail = RunStatus.FAILED, problem
    if spec.result_fd and (stage := _last_stage(o.record)):
        labels["stage"] = stage  # how far a run got, also one that crashed
    if status is RunStatus.OK and (said := o.stderr.strip()):
        labels["stderr"] = said[-STDERR_NOTE:]  # e.g. an allocator's warning
    if spec.memory_limit and st:
        labels["memory_limit_by"] = launch.LIMIT_BY[st.get("limit_by", 0)]
    if _who_checked(spec) and st:
        labels["who"] = who.label(o.who)
        if shadowed := who.shadowed(o.who, who.served_malloc(o.who), spec.expect_malloc, seen):
            labels["also_defines_malloc"] = shadowed
    if spec.expect_malloc and st:
        problem, malloc_object = _identity(spec, seen, o, malloc_object)
        if problem and status is RunStatus.OK:
            status, detail = RunStatus.UNVERIFIED, problem
    prof = None
    if spec.profile and status is RunStatus.OK:
        prof, problem = _check_profile(spec, o.profile)
        if problem:
            status, detail = RunStatus.UNVERIFIED, problem
        malloc_object = spec.expect_malloc if not problem else malloc_object
        if not problem and prof is not None and spec.role == "why":
            metrics = metrics | profile.explaining(profile.combine(prof["records"]))
    wait = st.get("status", 0)
    return RunResult(
        shown=(o.stdout + o.stderr) if spec.app.show_output else "",
        status=status,
        wall_s=_wall(spec, o),
        user_s=st.get("utime_us", 0) / 1e6,
        sys_s=st.get("stime_us", 0) / 1e6,
        maxrss_kib=o.maxrss_kib if o.maxrss_kib is not None else st.get("maxrss_kib", 0),
        minflt=st.get("minflt", 0),
        majflt=st.get("majflt", 0),
        nvcsw=st.get("nvcsw", 0),
        nivcsw=st.get("nivcsw", 0),
        exit_code=os.WEXITSTATUS(wait) if st and os.WIFEXITED(wait) else None,
        signal=os.WTERMSIG(wait) if st and os.WIFSIGNALED(wait) else None,
        started=started,
        metrics=o.rss_metrics | metrics | o.output | o.alloc_stats,
        labels=labels,
        malloc_object=malloc_object,
        detail=detail,
        profile=prof,
        rss=o.rss,
    )


def _identity(
    spec: RunSpec, seen: str | None, o: launch.Outcome, said: str | None
) -> tuple[str | None, str | None]:
    """(why the run is unverified, or None; what served malloc), decided from the
    launcher's readings of the program's images (image.py). What the program says
    itself, libam_who's reports or a native workload's record (`said`), only
    cross-checks it: a disagreement leaves the run unverified too. `seen`: what must
    serve malloc in the process (_expected_in_process)."""
    found = image.verification(seen, o.images, o.watch_errno)
    if found.problem:
        return found.problem, found.served
    if spec.result_fd and who.real(said) != who.real(found.served):
        return (
            f"the workload reported malloc served by {said or 'nothing'}; the launcher read "
            f"{found.served}"
        ), found.served
    if _who_checked(spec) and (problem := who.disagreement(o.who, found.bindings)):
        return problem, found.served
    return None, found.served


def _wall(spec: RunSpec, o: launch.Outcome) -> float:
    """The run's wall time; a run killed at its timeout took (at least) the timeout."""
    if o.wall_s is not None:
        return o.wall_s
    if "wall_ns" in o.status:
        return o.status["wall_ns"] / 1e9
    return spec.timeout if o.timed_out else 0.0


def _expected_in_process(spec: RunSpec) -> str | None:
    """What a process must find serving malloc: the profiler or the recorder when it
    is in front (each says what it forwards to)."""
    if spec.expect_malloc and spec.profile:
        return profile.shim_library()
    if spec.expect_malloc and spec.trace:
        return str(native.library("libamrec.so"))
    return spec.expect_malloc


def _check_profile(
    spec: RunSpec, found: list[dict[str, Any]] | str | None
) -> tuple[dict[str, Any] | None, str | None]:
    """The profiler forwards to the allocator under test in every process, or the run
    is unverified. The records are kept either way (as {"records": [...]})."""
    if not isinstance(found, list):
        return None, found or "the profiler wrote no record"
    for rec in found:
        if spec.expect_malloc and who.real(rec["next_malloc"]) != who.real(spec.expect_malloc):
            return {"records": found}, (
                f"the profiler's malloc forwarded to "
                f"{rec['next_malloc']} in {rec.get('exe', '?')}, not "
                f"to {spec.expect_malloc}"
            )
    return {"records": found}, None


def _run_status(
    spec: RunSpec, st: dict[str, int], timed_out: bool, tail: str
) -> tuple[RunStatus, str]:
    if timed_out:
        return RunStatus.TIMEOUT, f"killed after the {spec.timeout:g} s timeout"
    if not st:
        return RunStatus.ERROR, f"the launcher reported nothing: {tail}".strip(": ")
    if st.get("oom"):
        how = "its memory cgroup" if launch.LIMIT_BY[st["limit_by"]] == "cgroup" else "the watchdog"
        return RunStatus.OOM, (
            f"killed at the memory limit of {spec.memory_limit >> 20} MiB (by {how})"
        )
    if st.get("exec_errno"):
        why = f"cannot start {spec.argv[0]}: {os.strerror(st['exec_errno'])}"
        if st["exec_errno"] == errno.EACCES and (user := runas.chosen()):
            why += (
                f" (it runs as {user.name}, who must be able to reach it; --run-as root "
                "runs it as root)"
            )
        return RunStatus.ERROR, why
    wait = st["status"]
    stop = spec.app.service.stop_signal if spec.app.service else None
    if os.WIFSIGNALED(wait) and signal.Signals(os.WTERMSIG(wait)).name != stop:
        return RunStatus.CRASHED, f"{signal.Signals(os.WTERMSIG(wait)).name}: {tail}".strip(": ")
    if os.WIFEXITED(wait) and os.WEXITSTATUS(wait) != 0:
        return RunStatus.FAILED, f"exit code {os.WEXITSTATUS(wait)}: {tail}".strip(": ")
    return RunStatus.OK, ""


# A native workload's own RSS reads: each must fit under the launcher's peak.
_SELF_RSS = (
    "rss_end_kib",
    "rss_idle_100ms_kib",
    "rss_idle_1s_kib",
    "rss_idle_end_kib",
    "alloc_rss_kib",
)


def _disagrees(metrics: dict[str, float], st: dict[str, int]) -> str | None:
    """Where a native workload's self-reported figures contradict the launcher's: its
    clock runs inside the launcher's (the same CLOCK_MONOTONIC), so it cannot report
    more seconds than the launcher measured; its RSS reads cannot exceed the peak by
    more than two reads of the kernel's counters may differ (machine.py)."""
    wall = st.get("wall_ns", 0) / 1e9
    own = metrics.get("seconds", 0.0) + metrics.get("idle_ms", 0.0) / 1000
    if own > wall + 1e-6:
        return (
            f"the workload reported {own:.6f} s, more than the {wall:.6f} s the launcher "
            "measured: its record is not trustworthy"
        )
    limit = st.get("maxrss_kib", 0) + 2 * machine.rss_read_error_kib()
    for key in _SELF_RSS:
        if metrics.get(key, 0.0) > limit:
            return (
                f"the workload reported {key} {metrics[key]:.0f} KiB, above the peak RSS "
                f"of {st.get('maxrss_kib', 0)} KiB the kernel gave the launcher: its record "
                "is not trustworthy"
            )
    return None


def _last_stage(record: bytes) -> str:
    """The last "stage" record a native program wrote (the hardening battery's)."""
    try:
        found = [r.fields for r in records.parse(record, "AM_RESULT_FD") if r.kind == "stage"]
    except records.RecordError:
        return ""
    return str(found[-1].get("stage", "")) if found else ""


def _parse_record(record: bytes) -> tuple[dict[str, float], dict[str, str], str | None]:
    """Numbers become metrics, strings labels (malloc_object among them)."""
    try:
        data = records.one(record, "result", "AM_RESULT_FD")
    except records.RecordError as e:
        return {}, {}, f"no valid metrics record: {e}"
    metrics = {
        k: float(v)
        for k, v in data.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    labels = {k: v for k, v in data.items() if isinstance(v, str) and k != "workload"}
    return metrics, labels, None
