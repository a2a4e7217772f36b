"""Run one RunSpec as a child process and measure it. Never raises for a bad child.

The child is started through the native launcher `am_run`, which forks it from a
small process (so that peak RSS is the child's own, not Python's) and reports
its wait status, wall time and rusage on a pipe. Native workloads add their own
metrics record on a second pipe (AM_RESULT_FD).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import IO, Protocol

from allocmark import native
from allocmark.model import RunResult, RunSpec, RunStatus

STDERR_TAIL = 2000  # bytes of a failing child's stderr kept with its run


class Executor(Protocol):
    """Runs one spec; the campaign loop only talks to this."""

    def run(self, spec: RunSpec) -> RunResult: ...


class LocalExecutor:
    """Runs children on this machine, one at a time."""

    def run(self, spec: RunSpec) -> RunResult:
        return run(spec)


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


def run(spec: RunSpec) -> RunResult:
    started = time.time()
    with tempfile.TemporaryFile() as err:
        try:
            status_line, record, timed_out = _spawn_and_wait(spec, err)
        except OSError as e:
            return RunResult(
                RunStatus.ERROR,
                started=started,
                detail=f"cannot start {spec.argv[0]}: {e.strerror or e}",
            )
        err.seek(max(0, err.seek(0, os.SEEK_END) - STDERR_TAIL))
        tail = err.read().decode(errors="replace").strip()
    return _interpret(spec, _parse_status(status_line), record, timed_out, started, tail)


def _spawn_and_wait(spec: RunSpec, err: IO[bytes]) -> tuple[bytes, bytes, bool]:
    env = child_environment(spec.env)
    if "LD_PRELOAD" in env:  # am_run hands it to the child only
        env["AM_RUN_LD_PRELOAD"] = env.pop("LD_PRELOAD")
    pipes, write_ends = _Pipes(), []
    for name in ("status", "record") if spec.result_fd else ("status",):
        r, w = os.pipe()
        pipes.fds[name], pipes.data[name] = r, bytearray()
        write_ends.append(w)
    if spec.result_fd:
        env["AM_RESULT_FD"] = str(write_ends[1])
    argv = [str(native.program("am_run")), str(write_ends[0]), *spec.argv]
    try:
        # Own session = own process group, so a timeout can kill all of it.
        proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
            pass_fds=tuple(write_ends),
        )
    except OSError:
        for fd in (*write_ends, *pipes.fds.values()):
            os.close(fd)
        raise
    for w in write_ends:
        os.close(w)
    try:
        timed_out = _wait(proc, pipes, spec.timeout)
    finally:
        for fd in pipes.fds.values():
            os.close(fd)
    return bytes(pipes.data["status"]), bytes(pipes.data.get("record", b"")), timed_out


def _wait(proc: subprocess.Popen[bytes], pipes: _Pipes, timeout: float) -> bool:
    """Collect the pipes until the launcher exits or time runs out; True on timeout."""
    deadline = time.monotonic() + timeout
    pidfd = os.pidfd_open(proc.pid)
    reaped = timed_out = False
    try:
        open_fds = dict(pipes.fds)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([pidfd, *open_fds.values()], [], [], remaining)
            _collect(pipes, open_fds, ready)
            if pidfd in ready:
                break
        _kill_group(proc.pid)  # on timeout, and for anything the child left behind
        proc.wait()
        reaped = True
        _collect_rest(pipes, open_fds)
        return timed_out
    finally:
        os.close(pidfd)
        if not reaped:  # interrupted (Ctrl-C): leave nothing running
            _kill_group(proc.pid)
            proc.wait()


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
    """am_run's "am_run 1 key=value ..." line; {} when the launcher was killed first."""
    words = line.decode(errors="replace").split()
    if words[:2] != ["am_run", "1"]:
        return {}
    return {k: int(v) for k, _, v in (w.partition("=") for w in words[2:])}


def _interpret(
    spec: RunSpec, st: dict[str, int], record: bytes, timed_out: bool, started: float, tail: str
) -> RunResult:
    status, detail = _judge(spec, st, timed_out, tail)
    metrics: dict[str, float] = {}
    labels: dict[str, str] = {}
    malloc_object = None
    if status is RunStatus.OK and spec.result_fd:
        metrics, labels, problem = _parse_record(record)
        malloc_object = labels.pop("malloc_object", None)
        if problem:
            status, detail = RunStatus.FAILED, problem
        elif spec.expect_malloc and _real(malloc_object) != _real(spec.expect_malloc):
            status = RunStatus.UNVERIFIED
            detail = f"malloc was served by {malloc_object}, not by {spec.expect_malloc}"
    wait = st.get("status", 0)
    return RunResult(
        status=status,
        wall_s=st.get("wall_ns", 0) / 1e9,
        user_s=st.get("utime_us", 0) / 1e6,
        sys_s=st.get("stime_us", 0) / 1e6,
        maxrss_kib=st.get("maxrss_kib", 0),
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
    )


def _judge(spec: RunSpec, st: dict[str, int], timed_out: bool, tail: str) -> tuple[RunStatus, str]:
    if timed_out:
        return RunStatus.TIMEOUT, f"killed after the {spec.timeout:g} s timeout"
    if not st:
        return RunStatus.ERROR, f"the launcher reported nothing: {tail}".strip(": ")
    if st.get("exec_errno"):
        return RunStatus.ERROR, f"cannot start {spec.argv[0]}: {os.strerror(st['exec_errno'])}"
    wait = st["status"]
    if os.WIFSIGNALED(wait):
        return RunStatus.CRASHED, f"{signal.Signals(os.WTERMSIG(wait)).name}: {tail}".strip(": ")
    if os.WEXITSTATUS(wait) != 0:
        return RunStatus.FAILED, f"exit code {os.WEXITSTATUS(wait)}: {tail}".strip(": ")
    return RunStatus.OK, ""


def _parse_record(record: bytes) -> tuple[dict[str, float], dict[str, str], str | None]:
    """Numbers become metrics, strings labels (malloc_object among them)."""
    try:
        data = json.loads(record)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return {}, {}, f"no valid metrics record on AM_RESULT_FD: {record[:200]!r}"
    if not isinstance(data, dict):
        return {}, {}, "metrics record is not a JSON object"
    metrics = {
        k: float(v)
        for k, v in data.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    labels = {k: v for k, v in data.items() if isinstance(v, str) and k != "workload"}
    return metrics, labels, None


def _real(path: str | None) -> str | None:
    return os.path.realpath(path) if path else None
