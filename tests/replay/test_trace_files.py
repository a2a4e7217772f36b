"""Recordings and traces from elsewhere are untrusted input: crafted ones (bytes
changed, files cut short) through every reader -- am_trace, the Python reader and the
replayer. Each may refuse with a clear error (exit 2, one line naming what was wrong;
a UserError), never crash, hang or raise anything else."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from allocmark import native
from allocmark.errors import UserError
from allocmark.workloads import traces

EXAMPLES = int(os.environ.get("AM_FUZZ_TRACES", "60"))
# A two-thread program of every kind of call, recorded by the recorder itself.
PROGRAM = r"""
#include <malloc.h>
#include <pthread.h>
#include <stdlib.h>
static void *blocks[64];
static void *work(void *a) {
  for (int r = 0; r < 40; r++) {
    for (int i = 0; i < 64; i++) blocks[i] = malloc(1 + (i * 37 + r) % 900);
    for (int i = 0; i < 64; i += 3) blocks[i] = realloc(blocks[i], 2000 + i);
    void *q; if (posix_memalign(&q, 64, 100) == 0) free(q);
    void *z = calloc(10, 10); (void)malloc_usable_size(z); free(z);
    free(aligned_alloc(256, 512)); free(memalign(32, 40));
    for (int i = 0; i < 64; i++) free(blocks[i]);
  }
  return a;
}
int main(void) {
  pthread_t t;
  pthread_create(&t, 0, work, 0);
  pthread_join(t, 0);
  work(0);
  free(NULL);
  return 0;
}
"""


def _limited() -> None:
    """A crafted trace may ask for huge blocks: the replay stays within 2 GiB."""
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def _run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        argv, capture_output=True, timeout=timeout, check=False, preexec_fn=_limited
    )


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(a recording, the trace made of it)."""
    if not shutil.which("cc"):
        pytest.skip("no C compiler")
    where = tmp_path_factory.mktemp("traces")
    src, exe = where / "calls.c", where / "calls"
    src.write_text(PROGRAM)
    # -O0: an optimizer drops a block freed unused (free(aligned_alloc(...)))
    subprocess.run(["cc", "-O0", str(src), "-o", str(exe), "-lpthread"], check=True)
    recording, trace = where / "recording", where / "trace"
    recording.write_bytes(b"")
    env = os.environ | {
        "LD_PRELOAD": str(native.library("libamrec.so")),
        "AM_REC_OUT": str(recording),
    }
    subprocess.run([str(exe)], env=env, check=True, timeout=60)
    done = _run([str(native.program("am_trace")), str(recording), str(trace)])
    assert done.returncode == 0, done.stderr
    return recording, trace


def test_every_call_of_the_program_is_in_its_trace(made: tuple[Path, Path]) -> None:
    s = traces.read(made[1]).summary
    per_round = {
        "malloc": 64, "realloc": 22, "posix_memalign": 1, "calloc": 1,
        "malloc_usable_size": 1, "aligned_alloc": 1, "memalign": 1, "free": 68,
    }  # fmt: skip
    for name, n in per_round.items():  # 40 rounds in each of two threads
        assert s.calls[name] >= 80 * n, (name, s.calls)
    assert s.threads == 2 and s.unknown_frees == 0 and s.conflicts == 0 and s.cut == ""
    done = _run([str(native.program("am_replay")), "--trace", str(made[1])])
    assert done.returncode == 0, done.stderr
    assert f'"replay_calls": {s.total_calls}' in done.stdout.decode()


def _crafted(data: bytes, edits: list[tuple[int, int]], cut: int | None) -> bytes:
    out = bytearray(data)
    for at, value in edits:
        out[at % len(out)] = value
    return bytes(out[:cut] if cut is not None else out)


EDITS = st.lists(st.tuples(st.integers(0, 1 << 30), st.integers(0, 255)), max_size=4)
CUTS = st.none() | st.integers(0, 1 << 30)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(edits=EDITS, cut=CUTS)
def test_a_crafted_recording_is_read_or_refused(
    made: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory, edits: list, cut: int | None
) -> None:
    recording, _ = made
    data = recording.read_bytes()
    where = tmp_path_factory.mktemp("crafted")
    bad = where / "recording"
    bad.write_bytes(_crafted(data, edits, None if cut is None else cut % (len(data) + 1)))
    done = _run([str(native.program("am_trace")), str(bad), str(where / "trace")])
    assert done.returncode in (0, 2), done.stderr
    if done.returncode == 2:
        assert done.stderr.startswith(b"am_trace: ") and done.stderr.count(b"\n") == 1
        return
    _replayed_or_refused(where / "trace")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(edits=EDITS, cut=CUTS)
def test_a_crafted_trace_is_replayed_or_refused(
    made: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory, edits: list, cut: int | None
) -> None:
    data = made[1].read_bytes()
    bad = tmp_path_factory.mktemp("crafted") / "trace"
    bad.write_bytes(_crafted(data, edits, None if cut is None else cut % (len(data) + 1)))
    _replayed_or_refused(bad)


def _replayed_or_refused(trace: Path) -> None:
    try:
        traces.read(trace)
    except UserError as e:
        assert str(trace) in str(e)
    # The replayer reads the header and every chunk itself: it too refuses, or replays.
    done = _run(
        [str(native.program("am_replay")), "--trace", str(trace), "--touch", "0",
         "--stall-s", "1"]
    )  # fmt: skip
    assert done.returncode in (0, 2), done.stderr
    if done.returncode == 2:
        assert b"allocmark workload: " in done.stderr
