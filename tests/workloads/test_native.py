"""The native churn workload: determinism, argument checks, metrics record."""

from __future__ import annotations

import json
import subprocess

import pytest

from allocmark import native
from allocmark.allocators import debian
from allocmark.model import Verified

pytestmark = pytest.mark.integration


def churn(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # An entry of another glibc runs under that glibc's loader, as am_run starts it.
    return subprocess.run(
        debian.under([str(native.program("am_churn")), *args], env or {}),
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=60,
    )


def record(*args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    result = churn(*args, env=env)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))  # no AM_RESULT_FD: the record goes to stdout


def test_same_seed_same_requests_under_every_allocator(installed: dict[str, Verified]) -> None:
    # One thread: the peak of live bytes is exact (with more it is sampled).
    args = ("--count", "3000", "--rounds", "2", "--threads", "1", "--seed", "9")
    peaks = {
        name: record(*args, env=v.child_env())["peak_requested_bytes"]
        for name, v in installed.items()
    }
    assert len(set(peaks.values())) == 1, peaks
    other = record("--count", "3000", "--rounds", "2", "--threads", "1", "--seed", "10")
    assert other["peak_requested_bytes"] != next(iter(peaks.values()))


def test_record_fields() -> None:
    r = record("--count", "100", "--rounds", "3", "--size-min", "8", "--size-max", "8")
    assert r["am"] == "result" and r["v"] == 2 and r["workload"] == "churn"
    assert r["ops"] == 3 * 2 * (100 + 50)
    assert r["peak_requested_bytes"] == 800
    assert float(r["ops_per_s"]) > 0  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--count", "abc"], "--count expects a non-negative integer"),
        (["--count", "-5"], "--count expects a non-negative integer"),
        (["--size-min", "10", "--size-max", "5"], "--size-min must not exceed --size-max"),
        (["--threads", "0"], "--threads must be in 1..1024"),
    ],
)
def test_bad_arguments(args: list[str], message: str) -> None:
    result = churn(*args)
    assert result.returncode == 2
    assert message in result.stderr
