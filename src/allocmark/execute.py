"""Run one RunSpec as a child process and measure it. Never raises for a bad child.

The child is started through the native launcher `am_run`, which forks it from a
small process (so that peak RSS is the child's own, not Python's) and reports
its wait status, wall time and rusage on a pipe. Native workloads add their own
metrics record on a second pipe (AM_RESULT_FD), naming the object that served
their malloc. Other programs (applications, a user's command) are checked by
libam_who, preloaded after the allocator: every process they start reports what
served malloc, and one that disagrees makes the run UNVERIFIED.

A service (redis) is a server started the same way and a client, not under the
allocator, that drives it; the server's peak RSS is read from /proc before it is
asked to shut down, and it is killed if it does not.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import json
import os
import select
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from allocmark import capture, machine, native, owner, profile, records, who, workloads
from allocmark.model import RssSeries, RunResult, RunSpec, RunStatus, Service
from allocmark.text import printable

STDERR_TAIL = 2000  # bytes of a failing child's stderr kept with its run
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
        done = subprocess.run([str(native.program("am_run")), "--calibrate"],
                              capture_output=True, text=True, timeout=30, check=False)  # fmt: skip
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
        return {"noise_other_cpu_s": max(0.0, other),
                "noise_steal_s": (end.steal - self.steal) * _TICK_S}  # fmt: skip


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
    exit status and its one record are the check that holds there (see _launcher)."""
    libc = _libc()
    before = libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    try:
        yield
    finally:
        if before > 0:
            libc.prctl(_PR_SET_DUMPABLE, before, 0, 0, 0)


def child_environment(additions: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Our environment without any LD_PRELOAD of the caller's, plus the run's own."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env.update(additions)
    return env


@dataclass
class _Outcome:
    """What running a spec produced, before judging it."""

    status: dict[str, int]  # am_run's line
    record: bytes = b""  # a native workload's metrics record
    timed_out: bool = False
    stdout: str = ""  # the program's (or a service's client's) output, when parsed
    stderr: str = ""
    verdict: tuple[RunStatus, str] | None = None  # decided before judging the status
    wall_s: float | None = None  # a service: the client's run time
    maxrss_kib: int | None = None  # a service: VmHWM read before shutdown
    labels: dict[str, str] = field(default_factory=dict)
    server_quit: bool = False  # a service's server ended before it was asked to
    profile: list[dict[str, Any]] | str | None = None  # its records, or why there are none
    who: list[who.Report] = field(default_factory=list)  # libam_who's, one per process
    output: dict[str, float] = field(default_factory=dict)  # sizes of streams cut short
    rss: RssSeries | None = None  # the launcher's samples of the run's RSS
    rss_metrics: dict[str, float] = field(default_factory=dict)
    alloc_stats: dict[str, float] = field(default_factory=dict)  # libam_who's, at exit
    launcher_problem: str = ""  # why the launcher's report cannot count (see _launcher)


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
    with tempfile.TemporaryDirectory(prefix="allocmark-run-") as tmp:
        room = _Room(Path(tmp))
        try:
            outcome = _run_service(spec, room) if spec.app.service else _run_plain(spec, room)
        except OSError as e:
            return RunResult(
                RunStatus.ERROR,
                started=started,
                detail=f"cannot start {spec.argv[0]}: {e.strerror or e}",
            )
        if _who_checked(spec) and outcome.status:
            outcome.who = who.read(room.who)
            outcome.labels["calls"] = json.dumps(who.calls(room.who))
            source, outcome.alloc_stats = who.stats(room.who)
            outcome.labels["alloc_stats"] = source
        if spec.profile:
            outcome.profile = _read_profile(room.profile)
    return _interpret(spec, outcome, started)


def _read_profile(path: Path) -> list[dict[str, Any]] | str:
    """The run's profile records (one per process), or why there are none. They are
    stored as they are; analysis sums and interprets them (profile/)."""
    try:
        found = profile.read(path)
    except records.RecordError as e:
        return f"unreadable profile record: {e}"
    return found or "the profiler wrote no record"


class _Room:
    """A run's private directory: {tmpdir} for the program, the who-reports, its output."""

    def __init__(self, root: Path) -> None:
        self.work, self.who = root / "work", root / "who"
        self.work.mkdir()
        self.who.mkdir()
        self.profile = root / "profile"  # the profiler's records (AM_PROF_OUT)

    def fill(self, argv: tuple[str, ...], port: int = 0) -> list[str]:
        """Run-time placeholders: this run's directory and port."""
        return [a.replace("{tmpdir}", str(self.work)).replace("{port}", str(port)) for a in argv]


def _who_checked(spec: RunSpec) -> bool:
    """Programs that do not report their own malloc are checked by libam_who."""
    return spec.expect_malloc is not None and not spec.result_fd


def _env(spec: RunSpec, room: _Room) -> dict[str, str]:
    env = child_environment(spec.env)
    if spec.profile:  # in front of the allocator, so that it sees every call
        shim = profile.shim_library()
        env["LD_PRELOAD"] = f"{shim}:{env['LD_PRELOAD']}" if "LD_PRELOAD" in env else shim
        env["AM_PROF_OUT"] = str(room.profile)
    if _who_checked(spec):
        who = str(native.library("libam_who.so"))
        env["LD_PRELOAD"] = f"{env['LD_PRELOAD']}:{who}" if "LD_PRELOAD" in env else who
        env["AM_WHO_DIR"] = str(room.who)
    if "LD_PRELOAD" in env:  # am_run hands it to the child only
        env["AM_RUN_LD_PRELOAD"] = env.pop("LD_PRELOAD")
    return env


def _wants(spec: RunSpec, source: str) -> bool:
    return any(p.source == source for p in spec.app.parsers)


def _run_plain(spec: RunSpec, room: _Room) -> _Outcome:
    with _Launched(room.fill(spec.argv), _env(spec, room), spec) as child:
        # A launcher found stopped at the deadline is the run's error, not its timeout.
        timed_out = child.wait(time.monotonic() + spec.timeout) and not child.stopped
    report = child.launcher()
    return _Outcome(report.status, child.record, timed_out, stdout=child.streams.text("stdout"),
                    stderr=child.streams.text("stderr"), output=child.output_bytes(),
                    rss=report.series, rss_metrics=report.metrics,
                    launcher_problem=report.problem)  # fmt: skip


def _keep(spec: RunSpec, source: str) -> int:
    """How much of a stream to keep: enough for the output parsers that read it."""
    parsed = any(p.source == source for p in spec.app.parsers)
    return capture.PARSED_KEEP if parsed else capture.STREAM_KEEP


class _Launched:
    """A child started through am_run in its own process group, its output in
    bounded pipes. Leaving the `with` block ends whatever of the run is left and
    reaps the launcher: no benchmark or server outlives its run, also on Ctrl-C.
    A server's stdout and stderr share one stream (its log explains a failure)."""

    def __init__(
        self, argv: list[str], env: dict[str, str], spec: RunSpec, merged: bool = False
    ) -> None:
        self.streams = capture.Streams()
        ours = {"status": self.streams.pipe("status", capture.PARSED_KEEP)}
        if spec.result_fd:
            ours["record"] = self.streams.pipe("record", capture.PARSED_KEEP)
            env["AM_RESULT_FD"] = str(ours["record"])
        err = self.streams.pipe("stderr", _keep(spec, "stderr"))
        out: int = err if merged else subprocess.DEVNULL
        if not merged and _keep(spec, "stdout") == capture.PARSED_KEEP:
            out = self.streams.pipe("stdout", capture.PARSED_KEEP)
        steps = ["--steps", ",".join(map(str, spec.app.steps))] if spec.app.steps else []
        if spec.memory_limit:
            steps = ["--memory-limit", str(spec.memory_limit), *steps]
        try:
            # Own session = own process group, so a timeout can kill all of it.
            self.proc = subprocess.Popen(
                [str(native.program("am_run")), str(ours["status"]), *steps, *argv],
                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True, pass_fds=tuple(ours.values()),
            )  # fmt: skip
        except OSError:
            self.streams.close()
            raise
        finally:
            for w in {*ours.values(), err, out} - {subprocess.DEVNULL}:
                os.close(w)
        self.pidfd = os.pidfd_open(self.proc.pid)
        self.closed = False
        self.stopped = False  # found stopped (SIGSTOP) at the deadline
        self.ended_by_us = False  # still running when the run was over: we stopped it

    def __enter__(self) -> _Launched:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait(self, deadline: float) -> bool:
        """Collect the output until the launcher exits; True if the deadline came first
        (and then whether the launcher sat stopped, by SIGSTOP, is noted)."""
        late = self.streams.pump(self.pidfd, deadline)
        if late and _process_state(self.proc.pid) in ("T", "t"):
            self.stopped = True
        return late

    def exited(self) -> bool:
        return bool(select.select([self.pidfd], [], [], 0)[0])

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.ended_by_us = self.proc.poll() is None
        try:
            _end(self.proc)  # on timeout or Ctrl-C; after a normal end there is nothing left
            self.proc.wait()
            self.streams.drain()
        finally:
            self.streams.close()
            os.close(self.pidfd)

    def launcher(self) -> LauncherReport:
        """What am_run reported once the run ended, judged by how it ended (_launcher)."""
        if self.stopped:
            return LauncherReport({}, None, {}, "the launcher was stopped (SIGSTOP) and never "
                                  "reported; it was killed at the timeout")  # fmt: skip
        if self.ended_by_us:  # a timeout, a server that never listened: judged by that
            return LauncherReport({}, None, {})
        return _launcher(self.streams.kept["status"].data(), self.proc.returncode)

    @property
    def record(self) -> bytes:
        return self.streams.kept["record"].data() if "record" in self.streams.kept else b""

    def output_bytes(self) -> dict[str, float]:
        """The size of each output stream that was longer than what was kept of it."""
        return {f"{name}_bytes": float(b.total) for name, b in self.streams.kept.items()
                if name in ("stdout", "stderr") and b.dropped}  # fmt: skip


# ---------------------------------------------------------------------------
# A service: a server under the allocator, a client (not under it) driving it
# ---------------------------------------------------------------------------
STOP_GRACE = 10.0  # seconds a server gets to shut down cleanly before SIGKILL


def _run_service(spec: RunSpec, room: _Room) -> _Outcome:
    assert spec.app.service is not None
    service, port = spec.app.service, _free_port()
    deadline = time.monotonic() + spec.timeout
    with _Launched(room.fill(spec.argv, port), _env(spec, room), spec, merged=True) as server:
        outcome = _drive(spec, service, room, server, port, deadline)
    report = server.launcher()
    outcome.status, outcome.rss, outcome.rss_metrics = report.status, report.series, report.metrics
    outcome.launcher_problem = report.problem
    outcome.stderr = outcome.stderr or server.streams.text("stderr")
    outcome.output |= {f"server_{k}": v for k, v in server.output_bytes().items()}
    if outcome.server_quit and outcome.status.get("status") == 0:
        outcome.verdict = (RunStatus.FAILED, "the server exited by itself, with code 0")
    return outcome


def _drive(
    spec: RunSpec, service: Service, room: _Room, server: _Launched, port: int, deadline: float
) -> _Outcome:
    """Wait for the server, run the client, read the peak RSS, stop the server."""
    ready_by = min(deadline, time.monotonic() + service.ready_timeout)
    if not _listening(port, server, ready_by):
        if server.exited():
            return _Outcome({}, server_quit=True)  # judged on the server's own status
        if time.monotonic() >= deadline:
            return _Outcome({}, timed_out=True)
        return _Outcome({}, verdict=(RunStatus.FAILED,
                        f"the server did not listen on 127.0.0.1:{port} within "
                        f"{service.ready_timeout:g} s"))  # fmt: skip
    pid = _server_pid(server.proc.pid, room.who)
    client = _client(room.fill(service.client, port), deadline)
    if server.exited():  # it died under load: judged on its own status
        return _Outcome({}, stdout=client.stdout, server_quit=True)
    hwm = _vmhwm(pid)
    if pid:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.Signals[service.stop_signal])
    stuck = server.wait(min(deadline, time.monotonic() + STOP_GRACE)) and not client.timed_out
    if hwm is not None:
        client.maxrss_kib = hwm
        client.labels["peak_rss_source"] = "VmHWM of the server before its shutdown"
    if stuck:
        client.verdict = (RunStatus.FAILED, f"the server ignored {service.stop_signal} for "
                          f"{STOP_GRACE:g} s and was killed")  # fmt: skip
    return client


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _listening(port: int, server: _Launched, by: float) -> bool:
    while time.monotonic() < by and not server.exited():
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.02)
    return False


def _server_pid(launcher: int, reports_dir: Path) -> int | None:
    """The server is am_run's only child; without /proc's children list, the
    process that reported its malloc."""
    with contextlib.suppress(OSError, IndexError, ValueError):
        return int(Path(f"/proc/{launcher}/task/{launcher}/children").read_text().split()[0])
    reports = who.read(reports_dir)
    return reports[0].pid if reports else None


def _vmhwm(pid: int | None) -> int | None:
    if pid is None:
        return None
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def _client(argv: list[str], deadline: float) -> _Outcome:
    """The client, without the allocator under test, its output kept for the parsers."""
    started = time.monotonic()
    streams = capture.Streams()
    ends = [streams.pipe("stdout", capture.PARSED_KEEP),
            streams.pipe("stderr", capture.PARSED_KEEP)]  # fmt: skip
    try:
        proc = subprocess.Popen(argv, env=child_environment(()), stdin=subprocess.DEVNULL,
                                stdout=ends[0], stderr=ends[1], start_new_session=True)  # fmt: skip
    except OSError as e:
        streams.close()
        return _Outcome({}, verdict=(RunStatus.ERROR, f"cannot start the client "
                        f"{argv[0]}: {e.strerror or e}"))  # fmt: skip
    finally:
        for w in ends:
            os.close(w)
    pidfd = os.pidfd_open(proc.pid)
    try:
        timed_out = streams.pump(pidfd, deadline)
    finally:
        _kill_group(proc.pid)
        code = proc.wait()
        streams.drain()
        os.close(pidfd)
    if timed_out:
        return _Outcome({}, timed_out=True)
    outcome = _Outcome({}, wall_s=time.monotonic() - started, stdout=streams.text("stdout"),
                       stderr=streams.text("stderr"))  # fmt: skip
    if code != 0:
        tail = outcome.stderr[-STDERR_TAIL:].strip() or outcome.stdout[-STDERR_TAIL:].strip()
        outcome.verdict = (RunStatus.FAILED, f"the client {Path(argv[0]).name} exited with "
                           f"code {code}: {tail}".strip(": "))  # fmt: skip
    return outcome


def _end(launcher: subprocess.Popen[bytes]) -> None:
    """Stop a launcher still running: SIGTERM makes am_run kill its whole tree
    (also what left its process group); SIGKILL to the group if it does not end."""
    if launcher.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            launcher.send_signal(signal.SIGTERM)
            launcher.send_signal(signal.SIGCONT)  # a stopped launcher must act on it now
        with contextlib.suppress(subprocess.TimeoutExpired):
            launcher.wait(LAUNCHER_GRACE)
    _kill_group(launcher.pid)


LAUNCHER_GRACE = 5.0  # seconds am_run gets to end its tree


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@dataclass(frozen=True)
class LauncherReport:
    """am_run's "run" record as numbers ({} when it cannot count), the RSS series of its
    "rss" record with the metrics derived from every sample, and why the report cannot
    count ("" when it can)."""

    status: dict[str, int]
    series: RssSeries | None
    metrics: dict[str, float]
    problem: str = ""


_CONTINUED = ("the launcher was stopped (SIGSTOP) and continued while the program ran: its "
              "times and samples are not the run's")  # fmt: skip
STOPPED = 100  # am_run's exit status when SIGTERM, SIGINT or SIGHUP stopped it: 100 + signal


def _launcher(text: bytes, code: int | None) -> LauncherReport:
    """A run counts only when am_run exited by itself with status 0 having written one
    "run" record (and at most one "rss" record) that parse: the measured program can
    write into the launcher's pipe as root (or kill the launcher after it did), and
    what it wrote must never become a result. Anything else is the run's own error,
    never the campaign's."""
    if code != 0:
        return LauncherReport({}, None, {}, _launcher_end(code))
    try:
        found = records.parse(text, "the launcher's pipe")
        status = _status(records.only(found, "run", "the launcher's pipe"))
        rss = [r.fields for r in found if r.kind == "rss"]
        if len(rss) > 1 or len(found) != 1 + len(rss):
            kinds = ", ".join(r.kind for r in found)
            raise records.RecordError(f"the launcher's pipe held records {kinds}")
        series, metrics = _rss(rss[0] if rss else {})
    except (records.RecordError, KeyError, TypeError, ValueError) as e:
        said = printable(str(e))[:300]
        return LauncherReport({}, None, {}, "the launcher's report is not its own (did the "
                              f"program write into its pipe?): {said}")  # fmt: skip
    if status.get("stopped"):
        return LauncherReport({}, None, {}, _CONTINUED)
    return LauncherReport(status, series, metrics)


def _launcher_end(code: int | None) -> str:
    """Why a launcher that did not exit with status 0 has no report."""
    if code is None:
        return "the launcher did not end"
    if code < 0:
        return f"the launcher was killed by {_signame(-code)} before it reported"
    if code > STOPPED and code - STOPPED < signal.NSIG:
        return f"the launcher was stopped by {_signame(code - STOPPED)} before it reported"
    return f"the launcher failed (exit status {code}) before it reported"


def _signame(n: int) -> str:
    with contextlib.suppress(ValueError):
        return f"signal {n} ({signal.Signals(n).name})"
    return f"signal {n}"


def _process_state(pid: int) -> str:
    """A process's state letter from /proc/PID/stat ("" if gone)."""
    fields = owner.stat_fields(pid)
    return fields[0] if fields else ""


def _status(found: dict[str, Any]) -> dict[str, int]:
    """The "run" record's numbers; its one text field, how the memory limit was held,
    becomes a code (LIMIT_BY)."""
    by = LIMIT_BY.index(found.pop("limit_by")) if found.get("limit_by") in LIMIT_BY else 0
    return {k: int(v) for k, v in found.items()} | {"limit_by": by}


LIMIT_BY = ("none", "cgroup", "watchdog", "cgroup2")  # am_run: how a memory limit was held


def _rss(r: dict[str, Any]) -> tuple[RssSeries | None, dict[str, float]]:
    """The series and the metrics derived from every sample (the memory-time integral,
    the last RSS sampled, what sampling cost the launcher), and the transparent huge
    pages the program held when last read (a native workload's own figure, read as it
    ends, takes precedence)."""
    if not r.get("samples"):
        return None, {}
    series = RssSeries(tuple(int(t) for t in r["t_ms"]), tuple(int(k) for k in r["kib"]),
                       int(r["period_us"]), int(r["stride"]))  # fmt: skip
    thp = int(r.get("thp_kib", -1))
    return series, {
        "rss_mib_s": float(r["integral_kib_s"]) / 1024,
        "rss_last_sample_kib": float(r["last_kib"]),
        "rss_samples": float(r["samples"]),
        "rss_sample_s": float(r["sample_ns"]) / 1e9,
    } | ({"anon_huge_kib": float(thp)} if thp >= 0 else {})


def _interpret(spec: RunSpec, o: _Outcome, started: float) -> RunResult:
    st = o.status
    status, detail = o.verdict or _judge(spec, st, o.timed_out, o.stderr[-STDERR_TAIL:].strip())
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
        elif seen and who.real(malloc_object) != who.real(seen):
            status = RunStatus.UNVERIFIED
            detail = f"malloc was served by {malloc_object}, not by {seen}"
    if status is RunStatus.OK and spec.app.parsers:
        metrics, problem = workloads.parse_metrics(spec.app.parsers, o.stdout, o.stderr)
        if problem:
            status, detail = RunStatus.FAILED, problem
    if spec.result_fd and (stage := _last_stage(o.record)):
        labels["stage"] = stage  # how far a run got, also one that crashed
    if status is RunStatus.OK and (said := o.stderr.strip()):
        labels["stderr"] = said[-STDERR_NOTE:]  # e.g. an allocator's warning
    if spec.memory_limit and st:
        labels["memory_limit_by"] = LIMIT_BY[st.get("limit_by", 0)]
    if _who_checked(spec) and st:
        labels["who"] = who.label(o.who)
        problem, malloc_object = who.problem(seen, o.who)
        if shadowed := who.shadowed(o.who, malloc_object, spec.expect_malloc, seen):
            labels["also_defines_malloc"] = shadowed
        if problem and status is RunStatus.OK:
            status, detail = RunStatus.UNVERIFIED, problem
    prof = None
    if spec.profile and status is RunStatus.OK:
        prof, problem = _check_profile(spec, o.profile)
        if problem:
            status, detail = RunStatus.UNVERIFIED, problem
        malloc_object = spec.expect_malloc if not problem else malloc_object
    wait = st.get("status", 0)
    return RunResult(
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


def _wall(spec: RunSpec, o: _Outcome) -> float:
    """The run's wall time; a run killed at its timeout took (at least) the timeout."""
    if o.wall_s is not None:
        return o.wall_s
    if "wall_ns" in o.status:
        return o.status["wall_ns"] / 1e9
    return spec.timeout if o.timed_out else 0.0


def _expected_in_process(spec: RunSpec) -> str | None:
    """What a process must find serving malloc: the profiler when it is in front."""
    if spec.expect_malloc and spec.profile:
        return profile.shim_library()
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
            return {"records": found}, (f"the profiler's malloc forwarded to "
                                        f"{rec['next_malloc']} in {rec.get('exe', '?')}, not "
                                        f"to {spec.expect_malloc}")  # fmt: skip
    return {"records": found}, None


def _judge(spec: RunSpec, st: dict[str, int], timed_out: bool, tail: str) -> tuple[RunStatus, str]:
    if timed_out:
        return RunStatus.TIMEOUT, f"killed after the {spec.timeout:g} s timeout"
    if not st:
        return RunStatus.ERROR, f"the launcher reported nothing: {tail}".strip(": ")
    if st.get("oom"):
        how = "its memory cgroup" if LIMIT_BY[st["limit_by"]] == "cgroup" else "the watchdog"
        return RunStatus.OOM, (f"killed at the memory limit of {spec.memory_limit >> 20} MiB "
                               f"(by {how})")  # fmt: skip
    if st.get("exec_errno"):
        return RunStatus.ERROR, f"cannot start {spec.argv[0]}: {os.strerror(st['exec_errno'])}"
    wait = st["status"]
    stop = spec.app.service.stop_signal if spec.app.service else None
    if os.WIFSIGNALED(wait) and signal.Signals(os.WTERMSIG(wait)).name != stop:
        return RunStatus.CRASHED, f"{signal.Signals(os.WTERMSIG(wait)).name}: {tail}".strip(": ")
    if os.WIFEXITED(wait) and os.WEXITSTATUS(wait) != 0:
        return RunStatus.FAILED, f"exit code {os.WEXITSTATUS(wait)}: {tail}".strip(": ")
    return RunStatus.OK, ""


# A native workload's own RSS reads: each must fit under the launcher's peak.
_SELF_RSS = ("rss_end_kib", "rss_idle_100ms_kib", "rss_idle_1s_kib", "rss_idle_end_kib",
             "alloc_rss_kib")  # fmt: skip


def _disagrees(metrics: dict[str, float], st: dict[str, int]) -> str | None:
    """Where a native workload's self-reported figures contradict the launcher's: its
    clock runs inside the launcher's (the same CLOCK_MONOTONIC), so it cannot report
    more seconds than the launcher measured; its RSS reads cannot exceed the peak by
    more than two reads of the kernel's counters may differ (machine.py)."""
    wall = st.get("wall_ns", 0) / 1e9
    own = metrics.get("seconds", 0.0) + metrics.get("idle_ms", 0.0) / 1000
    if own > wall + 1e-6:
        return (f"the workload reported {own:.6f} s, more than the {wall:.6f} s the launcher "
                "measured: its record is not trustworthy")  # fmt: skip
    limit = st.get("maxrss_kib", 0) + 2 * machine.rss_read_error_kib()
    for key in _SELF_RSS:
        if metrics.get(key, 0.0) > limit:
            return (f"the workload reported {key} {metrics[key]:.0f} KiB, above the peak RSS "
                    f"of {st.get('maxrss_kib', 0)} KiB the kernel gave the launcher: its record "
                    "is not trustworthy")  # fmt: skip
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
