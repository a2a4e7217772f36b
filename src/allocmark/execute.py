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
import dataclasses
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
from typing import IO, Any, Protocol

from allocmark import native, profile, records, who, workloads
from allocmark.model import RunResult, RunSpec, RunStatus, Service

STDERR_TAIL = 2000  # bytes of a failing child's stderr kept with its run


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


def child_environment(additions: tuple[tuple[str, str], ...]) -> dict[str, str]:
    """Our environment without any LD_PRELOAD of the caller's, plus the run's own."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env.update(additions)
    return env


@dataclass
class _Pipes:
    """Read ends we collect from while the child runs, keyed by purpose."""

    fds: dict[str, int] = field(default_factory=dict)
    data: dict[str, bytearray] = field(default_factory=dict)


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


def run(spec: RunSpec) -> RunResult:
    sentinel = _Sentinel.now()
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
        self.stdout, self.stderr = root / "stdout", root / "stderr"
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
    keep_stdout = _wants(spec, "stdout")
    with room.stderr.open("w+b") as err, _output(room.stdout, keep_stdout) as out:
        child = _Launched(room.fill(spec.argv), _env(spec, room), out, err, spec)
        with child:
            timed_out = child.wait(time.monotonic() + spec.timeout)
    return _Outcome(child.status, child.record, timed_out,
                    stdout=_read(room.stdout) if keep_stdout else "",
                    stderr=_read(room.stderr, whole=_wants(spec, "stderr")))  # fmt: skip


@contextlib.contextmanager
def _output(path: Path, keep: bool) -> Iterator[IO[bytes] | int]:
    if not keep:
        yield subprocess.DEVNULL
        return
    with path.open("w+b") as f:
        yield f


def _read(path: Path, whole: bool = True) -> str:
    """A file's text: all of it (up to 8 MiB) when parsed, else its tail."""
    if not path.exists():
        return ""
    with path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        limit = PARSE_LIMIT if whole else STDERR_TAIL
        f.seek(max(0, size - limit))
        return f.read().decode(errors="replace")


PARSE_LIMIT = 8 << 20


class _Launched:
    """A child started through am_run in its own process group. Leaving the `with`
    block kills whatever of the group is left and reaps the launcher: no benchmark
    or server outlives its run, also on Ctrl-C."""

    def __init__(
        self, argv: list[str], env: dict[str, str], out: IO[bytes] | int, err: IO[bytes],
        spec: RunSpec,
    ) -> None:  # fmt: skip
        self.pipes = _Pipes()
        write_ends = []
        for name in ("status", "record") if spec.result_fd else ("status",):
            r, w = os.pipe()
            self.pipes.fds[name], self.pipes.data[name] = r, bytearray()
            write_ends.append(w)
        if spec.result_fd:
            env["AM_RESULT_FD"] = str(write_ends[1])
        steps = ["--steps", ",".join(map(str, spec.app.steps))] if spec.app.steps else []
        try:
            # Own session = own process group, so a timeout can kill all of it.
            self.proc = subprocess.Popen(
                [str(native.program("am_run")), str(write_ends[0]), *steps, *argv],
                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True, pass_fds=tuple(write_ends),
            )  # fmt: skip
        except OSError:
            for fd in self.pipes.fds.values():
                os.close(fd)
            raise
        finally:
            for w in write_ends:
                os.close(w)
        self.pidfd = os.pidfd_open(self.proc.pid)
        self.open_fds = dict(self.pipes.fds)
        self.closed = False

    def __enter__(self) -> _Launched:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait(self, deadline: float) -> bool:
        """Collect the pipes until the launcher exits; True if the deadline came first."""
        while (remaining := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.pidfd, *self.open_fds.values()], [], [], remaining)
            _collect(self.pipes, self.open_fds, ready)
            if self.pidfd in ready:
                return False
        return True

    def exited(self) -> bool:
        return bool(select.select([self.pidfd], [], [], 0)[0])

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            _kill_group(self.proc.pid)  # on timeout, and anything the child left behind
            self.proc.wait()
            _collect_rest(self.pipes, self.open_fds)
        finally:
            for fd in (self.pidfd, *self.pipes.fds.values()):
                os.close(fd)

    @property
    def status(self) -> dict[str, int]:
        return _parse_status(bytes(self.pipes.data["status"]))

    @property
    def record(self) -> bytes:
        return bytes(self.pipes.data.get("record", b""))


# ---------------------------------------------------------------------------
# A service: a server under the allocator, a client (not under it) driving it
# ---------------------------------------------------------------------------
STOP_GRACE = 10.0  # seconds a server gets to shut down cleanly before SIGKILL


def _run_service(spec: RunSpec, room: _Room) -> _Outcome:
    assert spec.app.service is not None
    service, port = spec.app.service, _free_port()
    deadline = time.monotonic() + spec.timeout
    # The server's own log goes with its stderr: the tail explains a failure.
    with (
        room.stderr.open("w+b") as err,
        _Launched(room.fill(spec.argv, port), _env(spec, room), err, err, spec) as server,
    ):
        outcome = _drive(spec, service, room, server, port, deadline)
    outcome.status = server.status
    outcome.stderr = outcome.stderr or _read(room.stderr, whole=False)
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
    client = _client(room.fill(service.client, port), room, deadline)
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


def _client(argv: list[str], room: _Room, deadline: float) -> _Outcome:
    """The client, without the allocator under test, its output kept for the parsers."""
    env = child_environment(())
    started = time.monotonic()
    with (room.work / "client.out").open("w+b") as out, \
         (room.work / "client.err").open("w+b") as err:  # fmt: skip
        try:
            proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=err, start_new_session=True)  # fmt: skip
        except OSError as e:
            return _Outcome({}, verdict=(RunStatus.ERROR, f"cannot start the client "
                            f"{argv[0]}: {e.strerror or e}"))  # fmt: skip
        try:
            code = proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return _Outcome({}, timed_out=True)
        finally:
            _kill_group(proc.pid)
            proc.wait()
    outcome = _Outcome({}, wall_s=time.monotonic() - started,
                       stdout=_read(room.work / "client.out"),
                       stderr=_read(room.work / "client.err"))  # fmt: skip
    if code != 0:
        tail = outcome.stderr[-STDERR_TAIL:].strip() or outcome.stdout[-STDERR_TAIL:].strip()
        outcome.verdict = (RunStatus.FAILED, f"the client {Path(argv[0]).name} exited with "
                           f"code {code}: {tail}".strip(": "))  # fmt: skip
    return outcome


def _collect(pipes: _Pipes, open_fds: dict[str, int], ready: list[int]) -> None:
    for name, fd in list(open_fds.items()):
        if fd in ready:
            chunk = os.read(fd, 65536)
            pipes.data[name] += chunk
            if not chunk:
                del open_fds[name]


def _collect_rest(pipes: _Pipes, open_fds: dict[str, int]) -> None:
    # Everything that held a write end is dead now, so reads end at EOF.
    for name, fd in open_fds.items():
        while chunk := os.read(fd, 65536):
            pipes.data[name] += chunk


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _parse_status(line: bytes) -> dict[str, int]:
    """am_run's "run" record; {} when the launcher was killed before writing it."""
    if not line.strip():
        return {}
    return {k: int(v) for k, v in records.one(line, "run", "am_run").items()}


def _interpret(spec: RunSpec, o: _Outcome, started: float) -> RunResult:
    st = o.status
    status, detail = o.verdict or _judge(spec, st, o.timed_out, o.stderr[-STDERR_TAIL:].strip())
    metrics: dict[str, float] = {}
    labels = dict(o.labels)
    malloc_object = None
    seen = _expected_in_process(spec)
    if status is RunStatus.OK and spec.result_fd:
        metrics, record_labels, problem = _parse_record(o.record)
        labels |= record_labels
        malloc_object = labels.pop("malloc_object", None)
        if problem:
            status, detail = RunStatus.FAILED, problem
        elif seen and who.real(malloc_object) != who.real(seen):
            status = RunStatus.UNVERIFIED
            detail = f"malloc was served by {malloc_object}, not by {seen}"
    if status is RunStatus.OK and spec.app.parsers:
        metrics, problem = workloads.parse_metrics(spec.app.parsers, o.stdout, o.stderr)
        if problem:
            status, detail = RunStatus.FAILED, problem
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
        wall_s=o.wall_s if o.wall_s is not None else st.get("wall_ns", 0) / 1e9,
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
        metrics=metrics,
        labels=labels,
        malloc_object=malloc_object,
        detail=detail,
        profile=prof,
    )


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
    if st.get("exec_errno"):
        return RunStatus.ERROR, f"cannot start {spec.argv[0]}: {os.strerror(st['exec_errno'])}"
    wait = st["status"]
    stop = spec.app.service.stop_signal if spec.app.service else None
    if os.WIFSIGNALED(wait) and signal.Signals(os.WTERMSIG(wait)).name != stop:
        return RunStatus.CRASHED, f"{signal.Signals(os.WTERMSIG(wait)).name}: {tail}".strip(": ")
    if os.WIFEXITED(wait) and os.WEXITSTATUS(wait) != 0:
        return RunStatus.FAILED, f"exit code {os.WEXITSTATUS(wait)}: {tail}".strip(": ")
    return RunStatus.OK, ""


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
