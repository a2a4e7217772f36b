"""Record once, replay under every allocator: real programs recorded through the CLI,
their traces replayed as the replay workload, and what a replay must keep."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from allocmark import api, native
from tests.conftest import PYTHON, cli, readable

# A single-threaded program of many calls: dicts, lists and strings built and dropped.
SCRIPT = (
    "d = {}\n"
    "for i in range(30000):\n"
    "    d[str(i)] = [i] * (i % 7)\n"
    "    if i % 3 == 0: d.pop(str(i // 2), None)\n"
)

# Threads hand blocks to each other: what one allocates another frees, so the replay
# must wait where the program's threads did.
HANDOFF = r"""
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#define N 20000
static void *slots[N];
static pthread_barrier_t bar;
static void *producer(void *a) {
  for (int i = 0; i < N; i++) { slots[i] = malloc(16 + i % 300); memset(slots[i], 1, 16); }
  pthread_barrier_wait(&bar);
  return a;
}
static void *consumer(void *a) {
  pthread_barrier_wait(&bar);
  for (int i = 0; i < N; i++) free(slots[i]);
  return a;
}
int main(void) {
  pthread_t p, c;
  pthread_barrier_init(&bar, 0, 2);
  pthread_create(&p, 0, producer, 0);
  pthread_create(&c, 0, consumer, 0);
  pthread_join(p, 0);
  pthread_join(c, 0);
  return 0;
}
"""


def _measured(db: Path) -> list:
    cid = api.reader(db).campaign(None).id
    return [r for r in api.reader(db).runs(cid) if r.role == "measure"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A Python program recorded under glibc: (its trace, the database)."""
    where = readable(tmp_path_factory.mktemp("rec"))
    trace, db = where / "py.trace", where / "rec.db"
    r = cli(
        "record", "-o", str(trace), "--db", str(db), "--env", "PYTHONMALLOC=malloc",
        "--", PYTHON, "-c", SCRIPT,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "recorded python3" in r.stdout and "under glibc:" in r.stdout, r.stdout
    return trace, db


def test_a_recorded_program_says_what_it_recorded(recorded: tuple[Path, Path]) -> None:
    trace, db = recorded
    t = api.trace(trace)
    s = t.summary
    assert s.total_calls > 30000 and s.calls["malloc"] > 0 and s.calls["free"] > 0
    assert s.threads == 1 and s.cut == "" and s.recorded is not None
    assert s.recorded.allocator == "glibc" and s.recorded.argv[-1] == SCRIPT
    # The stored run carries the trace's numbers, and its timing is the recorder's.
    (run,) = _measured(db)
    assert run.labels["trace"] == str(trace)
    assert run.metrics["trace_calls"] == s.total_calls
    assert run.metrics["trace_peak_requested_bytes"] == s.peak_requested_bytes
    assert 0 < t.alloc_share < 1  # type: ignore[operator]


def test_replaying_under_the_recording_allocator_makes_the_same_calls(
    recorded: tuple[Path, Path], tmp_path: Path
) -> None:
    """Fidelity: the same calls, and (one thread) the same peak of requested bytes."""
    trace, _ = recorded
    db = tmp_path / "replay.db"
    r = cli("replay", str(trace), "-a", "glibc", "-n", "1", "--db", str(db))
    assert r.returncode == 0, r.stdout + r.stderr
    (run,) = _measured(db)
    s = api.trace(trace).summary
    assert run.metrics["replay_calls"] == s.total_calls
    assert run.metrics["peak_requested_bytes"] == s.peak_requested_bytes
    assert run.metrics["replay_failed"] == 0 and run.metrics["replay_fixups"] == 0
    # Its report says what a replay measures, beside what the trace says of the recording.
    assert "Replays beside their recordings" in r.stdout, r.stdout
    assert "the allocator's own work" in " ".join(r.stdout.split())
    assert run.metrics["trace_peak_requested_bytes"] == s.peak_requested_bytes
    assert run.metrics["trace_maxrss_kib"] == s.recorded.maxrss_kib  # type: ignore[union-attr]


def test_threads_wait_where_the_program_handed_blocks_over(tmp_path: Path, installed: dict) -> None:
    where = readable(tmp_path)
    src, exe = where / "handoff.c", where / "handoff"
    src.write_text(HANDOFF)
    subprocess.run(["cc", "-O1", str(src), "-o", str(exe), "-lpthread"], check=True)
    trace, db = where / "h.trace", where / "h.db"
    r = cli("record", "-o", str(trace), "--db", str(db), "--", str(exe))
    assert r.returncode == 0, r.stdout + r.stderr
    s = api.trace(trace).summary
    assert s.threads == 3 and s.calls["malloc"] >= 20000 and s.calls["free"] >= 20000
    assert s.waits >= 1  # the consumer's frees wait on the producer's blocks
    others = [a for a in ("jemalloc", "tcmalloc-minimal") if a in installed]
    r = cli("replay", str(trace), "-a", ",".join(["glibc", *others]), "-n", "1", "--db",
            str(where / "r.db"))  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    runs = _measured(where / "r.db")
    assert {run.allocator for run in runs} == {"glibc", *others}
    for run in runs:
        assert run.metrics["replay_calls"] == s.total_calls
        assert run.metrics["replay_waits"] >= 0


def test_a_program_stopped_at_its_timeout_leaves_a_readable_trace(tmp_path: Path) -> None:
    """What was written before the stop is a trace; the run is reported as timed out."""
    where = readable(tmp_path)
    trace, db = where / "t.trace", where / "t.db"
    hang = "x = [bytes(50) for _ in range(200000)]\nimport time\ntime.sleep(60)\n"
    r = cli(
        "record", "-o", str(trace), "--db", str(db), "--timeout", "8",
        "--env", "PYTHONMALLOC=malloc", "--", PYTHON, "-c", hang,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    (run,) = _measured(db)
    assert run.status.value == "timeout"
    s = api.trace(trace).summary
    assert s.calls["malloc"] > 100000  # the chunks written before it was stopped
    assert s.process.exit is None  # it never exited: allocation's share is unknown


def test_record_takes_one_allocator_and_one_program(tmp_path: Path) -> None:
    out = tmp_path / "x.trace"
    r = cli("record", "-o", str(out), "-a", "glibc,jemalloc", "--db", str(tmp_path / "d.db"),
            "--", "/bin/true")  # fmt: skip
    assert r.returncode == 2 and "record under one allocator" in r.stderr, r.stderr
    r = cli("record", "-o", str(out), "--db", str(tmp_path / "d.db"))
    assert r.returncode == 2 and "name the workload" in r.stderr, r.stderr
    assert not out.exists()


def test_replay_refuses_a_file_that_is_not_a_trace(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.trace"
    bogus.write_bytes(b"AMTRACE\0" + b"\x01" * 100)
    r = cli("replay", str(bogus), "-a", "glibc", "--db", str(tmp_path / "d.db"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert str(bogus) in r.stderr and "allocmark record" in r.stderr
    r = cli("run", "-w", "replay", "-a", "glibc", "--db", str(tmp_path / "d.db"))
    assert r.returncode == 2 and "-p trace=FILE" in r.stderr, r.stderr


def test_the_replayer_runs_a_trace_by_hand(recorded: tuple[Path, Path]) -> None:
    """am_replay outside allocmark: its record, with the allocator's statistics."""
    trace, _ = recorded
    done = subprocess.run(
        [str(native.program("am_replay")), "--trace", str(trace)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert '"workload": "replay"' in done.stdout and '"alloc_stats": "glibc"' in done.stdout
