"""A service: a server under the allocator, a client (not under it) driving it. The
server's peak RSS is read from /proc before it is asked to shut down, and it is
killed if it does not."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path

from allocmark.model import RunSpec, RunStatus, Service
from allocmark.native import identity
from allocmark.run import capture, launch, who

STOP_GRACE = 10.0  # seconds a server gets to shut down cleanly before SIGKILL


def run_service(spec: RunSpec, room: launch.Room, env: dict[str, str]) -> launch.Outcome:
    assert spec.app.service is not None
    service, port = spec.app.service, _free_port()
    deadline = time.monotonic() + spec.timeout
    with launch.Launched(room.fill(spec.argv, port), env, spec, merged=True) as server:
        outcome = _drive(spec, service, room, server, port, deadline)
    server.launcher().fill(outcome)
    outcome.stderr = outcome.stderr or server.streams.text("stderr")
    outcome.output |= {f"server_{k}": v for k, v in server.output_bytes().items()}
    if outcome.server_quit and outcome.status.get("status") == 0:
        outcome.verdict = (RunStatus.FAILED, "the server exited by itself, with code 0")
    return outcome


def _drive(
    spec: RunSpec,
    service: Service,
    room: launch.Room,
    server: launch.Launched,
    port: int,
    deadline: float,
) -> launch.Outcome:
    """Wait for the server, run the client, read the peak RSS, stop the server."""
    ready_by = min(deadline, time.monotonic() + service.ready_timeout)
    if not _listening(port, server, ready_by):
        if server.exited():
            return launch.Outcome({}, server_quit=True)  # judged on the server's own status
        if time.monotonic() >= deadline:
            return launch.Outcome({}, timed_out=True)
        why = f"the server did not listen on 127.0.0.1:{port} within {service.ready_timeout:g} s"
        return launch.Outcome({}, verdict=(RunStatus.FAILED, why))
    pid = _server_pid(server.proc.pid, room.who)
    client = _client(room.fill(service.client, port), room, deadline)
    if server.exited():  # it died under load: judged on its own status
        return launch.Outcome({}, stdout=client.stdout, server_quit=True)
    hwm = _vmhwm(pid)
    if pid:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.Signals[service.stop_signal])
    stuck = server.wait(min(deadline, time.monotonic() + STOP_GRACE)) and not client.timed_out
    if hwm is not None:
        client.maxrss_kib = hwm
        client.labels["peak_rss_source"] = "VmHWM of the server before its shutdown"
    if stuck:
        client.verdict = (
            RunStatus.FAILED,
            f"the server ignored {service.stop_signal} for {STOP_GRACE:g} s and was killed",
        )
    return client


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _listening(port: int, server: launch.Launched, by: float) -> bool:
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


def _client(argv: list[str], room: launch.Room, deadline: float) -> launch.Outcome:
    """The client, without the allocator under test, its output kept for the parsers:
    part of the workload, it goes through the door as the server does, as its identity."""
    started = time.monotonic()
    streams = capture.Streams()
    ends = [
        streams.pipe("stdout", capture.PARSED_KEEP),
        streams.pipe("stderr", capture.PARSED_KEEP),
        streams.pipe("status", capture.PARSED_KEEP),
    ]
    env = {"HOME": str(room.work), "TMPDIR": str(room.work)} | identity.environment()
    try:
        proc = identity.start(
            argv, env | {"AM_RUN_SAMPLE_US": "0"}, ends[2], stdout=ends[0], stderr=ends[1]
        )
    except OSError as e:
        streams.close()
        why = f"cannot start the client {argv[0]}: {e.strerror or e}"
        return launch.Outcome({}, verdict=(RunStatus.ERROR, why))
    finally:
        for w in ends:
            os.close(w)
    pidfd = os.pidfd_open(proc.pid)
    try:
        timed_out = streams.pump(pidfd, deadline)
    finally:
        launch.kill_group(proc.pid)
        launcher = proc.wait()
        streams.drain()
        os.close(pidfd)
    code = identity.exit_code(launcher, streams.kept["status"].data())
    if timed_out:
        return launch.Outcome({}, timed_out=True)
    outcome = launch.Outcome(
        {},
        wall_s=time.monotonic() - started,
        stdout=streams.text("stdout"),
        stderr=streams.text("stderr"),
    )
    if code != 0:
        tail = (
            outcome.stderr[-launch.STDERR_TAIL :].strip()
            or outcome.stdout[-launch.STDERR_TAIL :].strip()
        )
        outcome.verdict = (
            RunStatus.FAILED,
            f"the client {Path(argv[0]).name} exited with code {code}: {tail}".strip(": "),
        )
    return outcome
