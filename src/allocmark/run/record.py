"""A recorded run (`allocmark record`): the recorder in front of the allocator, and
its recording made into a trace.

The recorder (native/record/am_rec.c, libamrec.so) writes every allocation call of
the program's processes to the run's `recording` file as the program runs. When the
run ends, however it ended (a program stopped at its timeout or killed leaves a
recording readable up to its last whole chunk), am_trace makes the recording into a
trace: run through the door as the run's identity, since the recording is the
program's writing and am_trace parses it. The trace is checked as any trace from
elsewhere (workloads/traces.py) and copied to its destination through the one door
that writes files; its numbers become the run's metrics (`trace_*`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from allocmark import files, native
from allocmark.errors import UserError
from allocmark.model import RunResult, RunSpec, RunStatus
from allocmark.native import identity
from allocmark.run import machine, who
from allocmark.workloads import traces

CONVERT_TIMEOUT_S = 3600.0  # am_trace reads some 100 MB/s: a recording of hours
ARGV_KEPT = 200  # words of the command kept in the trace's account (each cut at 1000 bytes)


def preload(env: dict[str, str], recording: Path) -> None:
    """The recorder in front of everything else the run preloads: it sees every call."""
    shim = str(native.library("libamrec.so"))
    env["LD_PRELOAD"] = f"{shim}:{env['LD_PRELOAD']}" if "LD_PRELOAD" in env else shim
    env["AM_REC_OUT"] = str(recording)


def account(spec: RunSpec, result: RunResult) -> str:
    """allocmark's account of the recorded run, the trace's "recorded" (traces.Recorded)."""
    return json.dumps(
        {
            "allocator": spec.allocator,
            "argv": [a[:1000] for a in spec.argv[:ARGV_KEPT]],
            "status": result.status.value,
            "wall_s": result.wall_s,
            "user_s": result.user_s,
            "sys_s": result.sys_s,
            "maxrss_kib": result.maxrss_kib,
            "started": result.started,
            "allocmark": machine.version(),
        }
    )


def made(spec: RunSpec, result: RunResult, recording: Path, work: Path) -> RunResult:
    """The recorded run `result` with its trace made and written to `spec.trace`, or
    the run failed with why it could not be."""
    if result.status is RunStatus.ERROR:  # it never started: nothing was recorded
        return result
    trace = work / "trace"
    argv = [str(native.program("am_trace")), str(recording), str(trace), account(spec, result)]
    try:
        done = identity.contained(argv, {"HOME": str(work)}, CONVERT_TIMEOUT_S)
    except OSError as e:
        return _unmade(result, f"am_trace could not start: {e.strerror or e}")
    if done.code != 0:
        said = (done.stderr or done.stdout).decode(errors="replace").strip()[-400:]
        how = "ran past its timeout" if done.code is None else f"exited with {done.code}"
        return _unmade(
            result, f"the recording could not be made into a trace: am_trace {how}: {said}"
        )
    try:
        found = traces.read(trace)
        if not _forwarded(spec, found):  # its calls were another allocator's: no trace
            p = found.summary.process
            return dataclasses.replace(
                result,
                status=RunStatus.UNVERIFIED,
                detail=f"the recorder's malloc forwarded to {p.next_malloc!r} in {p.exe}, "
                f"not to {spec.expect_malloc}: no trace was written",
            )
        files.copy(trace, Path(spec.trace), 0o644, owner=identity.owner())
    except UserError as e:
        return _unmade(result, str(e))
    return dataclasses.replace(
        result,
        metrics=result.metrics | _metrics(found),
        labels=result.labels | {"trace": spec.trace} | _cut(found),
    )


def _forwarded(spec: RunSpec, t: traces.Trace) -> bool:
    """The recorded process's calls went to the allocator under test."""
    if not spec.expect_malloc:
        return True
    return who.real(t.summary.process.next_malloc) == who.real(spec.expect_malloc)


def _metrics(t: traces.Trace) -> dict[str, float]:
    s = t.summary
    found = {
        "trace_calls": float(s.total_calls),
        "trace_bytes": float(t.size),
        "trace_threads": float(t.threads),
        "trace_processes": float(s.process_count),
        "trace_peak_requested_bytes": float(s.peak_requested_bytes),
        "trace_unknown_frees": float(s.unknown_frees),
    }
    if (share := t.alloc_share) is not None:
        found["trace_alloc_share"] = share
    return found


def _cut(t: traces.Trace) -> dict[str, str]:
    return {"trace_cut": t.summary.cut} if t.summary.cut else {}


def _unmade(result: RunResult, why: str) -> RunResult:
    return dataclasses.replace(result, status=RunStatus.FAILED, detail=why)
