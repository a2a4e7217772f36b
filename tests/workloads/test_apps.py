"""Real applications as workloads: every app of the catalog at a tiny scale under
glibc and a preloaded allocator; redis never leaves a server behind; inputs are
deterministic; libam_who sees through what a program links and exports."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from allocmark import native, workloads
from allocmark.errors import UserError
from allocmark.model import RunSpec, RunStatus, Service, Verified
from allocmark.run import execute, plan
from allocmark.workloads import inputs
from tests.conftest import cli

pytestmark = pytest.mark.integration

# Tiny parameters: each app runs in about a second or less.
TINY: dict[str, dict[str, int | str]] = {
    "ruby": {"scale": 1, "threads": 2},
    "python": {"scale": 1, "threads": 2},
    "lua": {"scale": 1},
    "sqlite": {"scale": 1},
    "rocksdb": {"num": 5000},
    "gcc": {"scale": 1},
    "redis": {"requests": 2000, "keyspace": 5000, "clients": 4},
    "vips": {"scale": 1},
    "x264": {"scale": 1, "preset": "ultrafast"},
    "pbzip2": {"scale": 1},
}
# What each app's parsers must find (beyond time and peak RSS from outside).
EXPECTED_METRICS = {
    "ruby": {"ops": 60000},
    "python": {"ops": 40000},
    "lua": {"ops": 30000},
    "rocksdb": {"ops_per_s": None, "fill_ops_per_s": None},
    "redis": {"ops_per_s": None},
    "x264": {"fps": None},
}
REDIS = "/usr/bin/redis-check-rdb"  # what /usr/bin/redis-server links to


def specs(name: str, allocs: list[Verified], timeout: float = 120, **extra: int) -> list[RunSpec]:
    w = workloads.load_catalog()[name]
    params = workloads.resolve_params(w, TINY[name] | extra, "test")
    return list(plan.generate([(w, params)], allocs, 1, timeout, 1))


@pytest.fixture(scope="module")
def pair(installed: dict[str, Verified]) -> list[Verified]:
    """glibc and one preloaded allocator that serves every function."""
    other = next((installed[n] for n in ("mimalloc", "jemalloc") if n in installed), None)
    if other is None:
        pytest.skip("no preloadable allocator installed")
    return [installed["glibc"], other]


def test_the_catalog_has_every_app_and_each_is_installed() -> None:
    apps = {n: w for n, w in workloads.load_catalog().items() if w.kind == "app"}
    assert set(apps) == set(TINY)
    assert {n: workloads.missing(w) for n, w in apps.items() if workloads.missing(w)} == {}


@pytest.mark.parametrize("name", sorted(TINY))
def test_app_runs_verified_with_its_metrics(name: str, pair: list[Verified]) -> None:
    for spec in specs(name, pair):
        r = execute.run(spec)
        assert r.status is RunStatus.OK, f"{spec.allocator}: {r.detail}"
        assert r.wall_s > 0 and r.maxrss_kib > 1000
        assert os.path.realpath(r.malloc_object or "") == os.path.realpath(spec.expect_malloc or "")
        for metric, value in EXPECTED_METRICS.get(name, {}).items():
            assert r.metrics[metric] > 0
            if value is not None:
                assert r.metrics[metric] == value


def test_redis_runs_on_the_allocator_under_test_not_its_own_jemalloc(
    pair: list[Verified],
) -> None:
    """Debian's redis links libjemalloc: under glibc (preloaded), malloc must be
    libc's, and the run records that libjemalloc is loaded too."""
    before = _redis_pids()
    glibc = next(s for s in specs("redis", pair) if s.allocator == "glibc")
    r = execute.run(glibc)
    assert r.status is RunStatus.OK, r.detail
    assert "libjemalloc" in r.labels["also_defines_malloc"]
    assert r.labels["peak_rss_source"].startswith("VmHWM")
    assert _redis_pids() <= before


def _redis_pids() -> set[int]:
    pids = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (
                    os.readlink(d / "exe") == REDIS
                    and (d / "status").read_text().find("State:\tZ") < 0
                ):
                    pids.add(int(d.name))
            except OSError:
                continue
    return pids


def _with_client(spec: RunSpec, *client: str) -> RunSpec:
    assert spec.app.service is not None
    service = dataclasses.replace(spec.app.service, client=client)
    return dataclasses.replace(spec, app=dataclasses.replace(spec.app, service=service))


def test_redis_is_stopped_after_a_client_failure(pair: list[Verified]) -> None:
    before = _redis_pids()
    spec = _with_client(specs("redis", pair[:1])[0], "sh", "-c", "echo no >&2; exit 3", "{port}")
    r = execute.run(spec)
    assert r.status is RunStatus.FAILED
    assert "client sh exited with code 3: no" in r.detail
    assert _redis_pids() <= before


def test_redis_is_killed_on_timeout(pair: list[Verified]) -> None:
    before = _redis_pids()
    spec = _with_client(specs("redis", pair[:1], timeout=2)[0], "sleep", "60")
    started = time.monotonic()
    r = execute.run(spec)
    assert r.status is RunStatus.TIMEOUT
    assert time.monotonic() - started < 10
    assert _redis_pids() <= before


def _fake_server(pair: list[Verified], *argv: str) -> RunSpec:
    spec = dataclasses.replace(specs("redis", pair[:1])[0], argv=argv, timeout=30)
    service = Service(("true", "{port}"), "SIGTERM", 1)
    return dataclasses.replace(spec, app=dataclasses.replace(spec.app, service=service))


@pytest.mark.parametrize(
    ("argv", "status", "detail"),
    [
        (("sleep", "60"), RunStatus.FAILED, "did not listen on 127.0.0.1:"),
        (("true",), RunStatus.FAILED, "the server exited by itself, with code 0"),
        (("sh", "-c", "echo bye >&2; kill -SEGV $$"), RunStatus.CRASHED, "SIGSEGV: bye"),
    ],
)
def test_a_server_that_does_not_serve_is_reported_not_waited_for(
    pair: list[Verified], argv: tuple[str, ...], status: RunStatus, detail: str
) -> None:
    started = time.monotonic()
    r = execute.run(_fake_server(pair, *argv))
    assert r.status is status and detail in r.detail
    assert time.monotonic() - started < 10


def test_ctrl_c_during_a_redis_run_leaves_no_server(tmp_path: Path) -> None:
    before = _redis_pids()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "allocmark",
            "run",
            "-a",
            "glibc",
            "-w",
            "redis",
            "-n",
            "1",
            "--max-blocks",
            "1",
            "-p",
            "requests=100000000",
            "--db",
            str(tmp_path / "r.db"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not _redis_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _redis_pids() - before, "the redis server never started"
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "interrupted" in err
    assert _redis_pids() <= before


# ---------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------
# sha256 of each generator at scale 1: the same on every machine and version.
DIGESTS = {
    "text": "1fc417da2210cae5ae7d691670192af24c33705d70f09913599eaae7bb9cc5df",
    "sql": "ceb82d41c0a153beefc443ffc67a09896156a3666a2d0b5fd954ef5e13299625",
    "c_source": "45be1238a38fedbe3e7c7a531e3ce3a01f755d58921549ea94776bd3863fa109",
    "image": "2deea4817f013828a58b71901337d6ec02ae6f19a4512309617439faa4b8c6ee",
    "frames": "8ec2f424041f4c3c685860ed41aeb0eddd9b2fc7bdce2f663b7a39c31d36e4f7",
}


def test_inputs_are_deterministic_and_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ALLOCMARK_CACHE", str(tmp_path))
    assert set(DIGESTS) == set(inputs.GENERATORS)
    for name, digest in DIGESTS.items():
        path = inputs.ensure(name, 1)
        assert native.sha256_file(path) == digest, name
        mtime = path.stat().st_mtime_ns
        assert inputs.ensure(name, 1) == path and path.stat().st_mtime_ns == mtime  # cached
    assert not list(tmp_path.glob("inputs/.*"))  # no half-written file left


# ---------------------------------------------------------------------------
# libam_who: what really serves malloc in a program we did not write
# ---------------------------------------------------------------------------
def _command_spec(argv: list[str], alloc: Verified) -> RunSpec:
    w = workloads.command_workload(argv)
    return next(iter(plan.generate([(w, ())], [alloc], 1, 30, 1)))


def test_a_program_that_takes_mallocs_address_is_still_seen_through(
    tmp_path: Path, pair: list[Verified]
) -> None:
    """A non-PIE program that stores &malloc exports a "canonical PLT" stub named
    malloc; the check must name the library its calls reach, not the program."""
    src = tmp_path / "addr.c"
    src.write_text(
        "#include <stdlib.h>\n#include <stdio.h>\n"
        "void *(*volatile am_fn)(size_t) = malloc;\n"
        'int main(void) { void *p = am_fn(10); printf("%d\\n", p != 0); free(p); }\n'
    )
    exe = tmp_path / "addr"
    subprocess.run(["cc", "-no-pie", "-fno-pic", "-o", str(exe), str(src)], check=True)
    for alloc in pair:
        r = execute.run(_command_spec([str(exe)], alloc))
        assert r.status is RunStatus.OK, r.detail
        assert os.path.realpath(r.malloc_object or "") == os.path.realpath(
            alloc.malloc_object or ""
        )


def test_a_program_with_its_own_malloc_is_unverified(tmp_path: Path, pair: list[Verified]) -> None:
    exe = tmp_path / "own"
    src = tmp_path / "own.c"
    src.write_text(
        "#include <stddef.h>\nstatic char heap[1 << 20]; static size_t used;\n"
        "void *malloc(size_t n) { void *p = heap + used; used += (n + 15) & ~15ul; return p; }\n"
        "void free(void *p) { (void)p; }\n"
        "void *calloc(size_t a, size_t b) { return malloc(a * b); }\n"
        "void *realloc(void *p, size_t n) { (void)p; return malloc(n); }\n"
        "int main(void) { return malloc(1) == 0; }\n"
    )
    subprocess.run(["cc", "-rdynamic", "-o", str(exe), str(src)], check=True)
    r = execute.run(_command_spec([str(exe)], pair[1]))
    assert r.status is RunStatus.UNVERIFIED
    assert f"malloc in {exe}" in r.detail and f"was served by {exe}" in r.detail


def test_a_static_program_is_unverified(tmp_path: Path, pair: list[Verified]) -> None:
    src = tmp_path / "static.c"
    src.write_text("int main(void) { return 0; }\n")
    exe = tmp_path / "static"
    if subprocess.run(["cc", "-static", "-o", str(exe), str(src)], check=False).returncode:
        pytest.skip("no static C library")
    r = execute.run(_command_spec([str(exe)], pair[1]))
    assert r.status is RunStatus.UNVERIFIED
    assert f"was served by {exe}" in r.detail  # its own malloc, linked in


def test_every_process_of_a_command_is_checked(tmp_path: Path, pair: list[Verified]) -> None:
    """sh and the program it starts both report what serves their malloc."""
    r = execute.run(_command_spec(["sh", "-c", "ls / > /dev/null"], pair[1]))
    assert r.status is RunStatus.OK, r.detail
    exes = {p["exe"] for p in json.loads(r.labels["who"])}
    assert len(exes) == 2 and any(e.endswith("ls") for e in exes)


# ---------------------------------------------------------------------------
# The CLI's view
# ---------------------------------------------------------------------------
def test_workloads_lists_apps_as_installed_and_their_packages() -> None:
    r = cli("workloads")
    assert r.returncode == 0
    assert "redis (app)" in r.stdout and "installed" in r.stdout
    packages = cli("workloads", "--packages").stdout.split()
    assert {"ruby", "redis-server", "redis-tools", "rocksdb-tools", "libvips-tools"} <= set(
        packages
    )


def test_missing_app_is_skipped_in_a_suite_and_an_error_when_named() -> None:
    w = dataclasses.replace(
        workloads.load_catalog()["ruby"], needs=("/nonexistent/ruby9",), packages=("ruby9",)
    )
    with pytest.raises(UserError, match="sudo apt-get install ruby9"):
        plan.installed([(w, ())], strict=True)
    native_w = workloads.load_catalog()["churn"]
    kept, notes = plan.installed([(w, ()), (native_w, ())], strict=False)
    assert kept == [(native_w, ())]
    assert notes == [
        "ruby: /nonexistent/ruby9 not installed; install it with "
        "`sudo apt-get install ruby9` (or `make setup-apps`)"
    ]
