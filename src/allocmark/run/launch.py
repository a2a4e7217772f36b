"""Starting a child through the native launcher `am_run`, in its own process group
with bounded output pipes, ending whatever of it is left, and reading the launcher's
report: a run counts only when the launcher exited by itself and wrote one record
(the measured program can write into its pipe)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from allocmark import files
from allocmark.model import RssSeries, RunSpec, RunStatus
from allocmark.native import identity, kernel as counted_record, records
from allocmark.run import capture, image, kernel, runas, who
from allocmark.store import owner
from allocmark.text import printable

LAUNCHER_KNOBS = (
    "AM_RUN_SAMPLE_US",
    "AM_RUN_NO_NEAR_PEAK",
    "AM_RUN_NO_CGROUP",
    "AM_RUN_KCOUNT",
    "AM_RUN_KTIME",
)
STDERR_TAIL = 2000  # bytes of a failing child's stderr kept with its run


@dataclass
class Outcome:
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
    launcher_problem: str = ""  # why the launcher's report cannot count (see launcher_report)
    images: tuple[image.Image, ...] = ()  # the launcher's readings of the program's images
    watch_errno: int | None = None  # why the launcher could not read them (None: not asked)


class Room:
    """A run's private directory: {tmpdir} for the program, the who-reports, the
    profiler's records, the recorder's recording: all the measured program's user's."""

    def __init__(self, root: Path, user: runas.RunAs | None = None) -> None:
        self.work = files.directory(root / "work", 0o700)
        self.who = files.directory(root / "who", 0o700)
        self.profile = root / "profile"  # the profiler's records (AM_PROF_OUT)
        self.recording = root / "recording"  # the recorder's chunks (AM_REC_OUT)
        files.write(self.profile, b"", 0o600)
        files.write(self.recording, b"", 0o600)
        runas.hand_over(user, self.work, self.who, self.profile, self.recording)

    def fill(self, argv: tuple[str, ...], port: int = 0) -> list[str]:
        """Run-time placeholders: this run's directory and port."""
        return [a.replace("{tmpdir}", str(self.work)).replace("{port}", str(port)) for a in argv]


def keep(spec: RunSpec, source: str) -> int:
    """How much of a stream to keep: enough for the output parsers that read it (or
    what `try --show-output` shows)."""
    parsed = any(p.source == source for p in spec.app.parsers) or spec.app.show_output
    return capture.PARSED_KEEP if parsed else capture.STREAM_KEEP


class Launched:
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
        err = self.streams.pipe("stderr", keep(spec, "stderr"))
        out: int = err if merged else subprocess.DEVNULL
        if not merged and keep(spec, "stdout") == capture.PARSED_KEEP:
            out = self.streams.pipe("stdout", capture.PARSED_KEEP)
        # The kernel counts the run's system calls wherever it can (run/kernel.py).
        env["AM_RUN_KCOUNT"] = "0" if kernel.prepare() else "1"
        # The launcher's own knobs, from allocmark's environment (tests and benches turn
        # sampling or counting off): am_run reads and removes them, the program never
        # sees them.
        env |= {k: v for k, v in os.environ.items() if k in LAUNCHER_KNOBS}
        if not spec.count:  # taken again uncounted (kernel.BUDGET), whatever the knobs say
            env["AM_RUN_KCOUNT"] = "0"
        steps = ["--steps", ",".join(map(str, spec.app.steps))] if spec.app.steps else []
        if spec.memory_limit:
            steps = ["--memory-limit", str(spec.memory_limit), *steps]
        try:
            self.proc = identity.start(
                argv,
                env,
                ours["status"],
                steps,
                stdout=out,
                stderr=err,
                pass_fds=tuple(v for k, v in ours.items() if k != "status"),
            )
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

    def __enter__(self) -> Launched:
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
        """What am_run reported once the run ended, judged by how it ended (launcher_report)."""
        if self.stopped:
            return LauncherReport(
                {},
                None,
                {},
                "the launcher was stopped (SIGSTOP) and never "
                "reported; it was killed at the timeout",
            )
        if self.ended_by_us:  # a timeout, a server that never listened: judged by that
            return LauncherReport({}, None, {})
        return launcher_report(self.streams.kept["status"].data(), self.proc.returncode)

    @property
    def record(self) -> bytes:
        return self.streams.kept["record"].data() if "record" in self.streams.kept else b""

    def output_bytes(self) -> dict[str, float]:
        """The size of each output stream that was longer than what was kept of it."""
        return {
            f"{name}_bytes": float(b.total)
            for name, b in self.streams.kept.items()
            if name in ("stdout", "stderr") and b.dropped
        }


def _end(launcher: subprocess.Popen[bytes]) -> None:
    """Stop a launcher still running: SIGTERM makes am_run kill its whole tree
    (also what left its process group); SIGKILL to the group if it does not end."""
    if launcher.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            launcher.send_signal(signal.SIGTERM)
            launcher.send_signal(signal.SIGCONT)  # a stopped launcher must act on it now
        with contextlib.suppress(subprocess.TimeoutExpired):
            launcher.wait(LAUNCHER_GRACE)
    kill_group(launcher.pid)


LAUNCHER_GRACE = 5.0  # seconds am_run gets to end its tree


def kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@dataclass(frozen=True)
class LauncherReport:
    """am_run's "run" record as numbers ({} when it cannot count), the RSS series of its
    "rss" record with the metrics derived from every sample and the kernel's counts of
    its "kernel" record (kernel.py), why the report cannot count ("" when it can), its
    readings of the program's images ("image" records; the "watch" record's errno, None
    when the run did not ask for them), why the kernel did not count ("" when it did or
    was not asked), and why it did not time a profiled run's calls (likewise)."""

    status: dict[str, int]
    series: RssSeries | None
    metrics: dict[str, float]
    problem: str = ""
    images: tuple[image.Image, ...] = ()
    watch_errno: int | None = None
    uncounted: str = ""
    untimed: str = ""  # why a profiled run's calls were not timed ("" when they were)

    def fill(self, outcome: Outcome) -> None:
        """Hand what the launcher reported to the run's outcome."""
        outcome.status, outcome.rss, outcome.rss_metrics = self.status, self.series, self.metrics
        outcome.launcher_problem = self.problem
        outcome.images, outcome.watch_errno = self.images, self.watch_errno
        if why := self.uncounted or (kernel.prepare() if self.status else ""):
            outcome.labels[kernel.LABEL] = why
        if self.untimed:
            outcome.labels[counted_record.UNTIMED] = self.untimed


_CONTINUED = (
    "the launcher was stopped (SIGSTOP) and continued while the program ran: its "
    "times and samples are not the run's"
)


STOPPED = 100  # am_run's exit status when SIGTERM, SIGINT or SIGHUP stopped it: 100 + signal


def launcher_report(text: bytes, code: int | None) -> LauncherReport:
    """A run counts only when am_run exited by itself with status 0 having written one
    "run" record (and at most one "rss", "watch" and "kernel" record) that parse: the
    measured program can write into the launcher's pipe as root (or kill the launcher
    after it did), and what it wrote must never become a result. Anything else is the
    run's own error, never the campaign's."""
    if code != 0:
        return LauncherReport({}, None, {}, _launcher_end(code))
    try:
        found = records.parse(text, "the launcher's pipe")
        status = _status(records.only(found, "run", "the launcher's pipe"))
        rss = [r.fields for r in found if r.kind == "rss"]
        watch = [r.fields for r in found if r.kind == "watch"]
        counted = [r.fields for r in found if r.kind == "kernel"]
        images = tuple(image.parse(r.fields) for r in found if r.kind == "image")
        singles = (rss, watch, counted)
        if any(len(x) > 1 for x in singles) or len(found) != 1 + sum(map(len, singles)) + len(
            images
        ):
            kinds = ", ".join(sorted({r.kind for r in found}))
            raise records.RecordError(f"the launcher's pipe held records {kinds}")
        series, metrics = _rss(rss[0] if rss else {})
        kernel_record = counted_record.read(counted[0]) if counted else None
        metrics = metrics | (kernel_record.metrics if kernel_record else {})
        if watch:
            metrics = metrics | {"watch_read_s": int(watch[0]["read_ns"]) / 1e9}
    except (records.RecordError, KeyError, TypeError, ValueError) as e:
        said = printable(str(e))[:300]
        return LauncherReport(
            {},
            None,
            {},
            f"the launcher's report is not its own (did the program write into its pipe?): {said}",
        )
    if status.get("stopped"):
        return LauncherReport({}, None, {}, _CONTINUED)
    watch_errno = int(watch[0]["errno"]) if watch else None
    return LauncherReport(
        status,
        series,
        metrics,
        images=images,
        watch_errno=watch_errno,
        uncounted=kernel_record.uncounted if kernel_record else "",
        untimed=kernel_record.untimed if kernel_record else "",
    )


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
    series = RssSeries(
        tuple(int(t) for t in r["t_ms"]),
        tuple(int(k) for k in r["kib"]),
        int(r["period_us"]),
        int(r["stride"]),
    )
    thp = int(r.get("thp_kib", -1))
    return series, {
        "rss_mib_s": float(r["integral_kib_s"]) / 1024,
        "rss_last_sample_kib": float(r["last_kib"]),
        "rss_samples": float(r["samples"]),
        "rss_sample_s": float(r["sample_ns"]) / 1e9,
        **_peak(r),
    } | ({"anon_huge_kib": float(thp)} if thp >= 0 else {})


# smaps_rollup's fields as am_run writes them, by the metric each becomes
NEAR_PEAK = (
    "near_peak_anon_kib",
    "near_peak_dirty_kib",
    "near_peak_lazyfree_kib",
    "near_peak_thp_kib",
)


def _peak(r: dict[str, Any]) -> dict[str, float]:
    """What the RSS is made of: at the first sample (and how far into the program it
    fell: the first process's CPU time then), at the largest sample (anonymous and
    file-backed, from statm), and from smaps_rollup read nearest the peak (with the
    RSS it was read at, and what the reads cost)."""
    peak, file = int(r["peak_kib"]), int(r["peak_file_kib"])
    out = {
        "start_rss_kib": float(r["start_kib"]),
        "peak_anon_kib": float(max(peak - file, 0)),
        "peak_file_kib": float(file),
        "near_peak_reads": float(r["smaps_reads"]),
        "near_peak_read_s": float(r["smaps_ns"]) / 1e9,
    }
    if int(r["start_cpu_us"]) >= 0:
        out["start_cpu_s"] = int(r["start_cpu_us"]) / 1e6
    if int(r["smaps_at_kib"]) >= 0:
        out["near_peak_rss_kib"] = float(r["smaps_at_kib"])
        out |= {name: float(v) for name, v in zip(NEAR_PEAK, r["smaps_kib"], strict=True)}
    return out
