"""Every native workload against real allocators: metrics, determinism, release."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from allocmark import workloads
from allocmark.model import RunSpec, RunStatus, Verified
from allocmark.run import execute
from tests.conftest import cli

pytestmark = pytest.mark.integration

# Small parameters: every workload runs in well under a second.
SMALL: dict[str, dict[str, int | str]] = {
    "churn": {"count": 2000, "rounds": 2},
    "samethread": {"count": 2000, "rounds": 2},
    "xthread": {"slots": 500, "steps": 20000},
    "larson": {"slots": 200, "replace": 1000, "duration_ms": 0, "handoffs": 3},
    "prodcons": {"count": 20000},
    "falseshare": {"writes": 10000, "rounds": 2},
    "blowup": {"batch": 500, "rounds": 4},
    "realloc": {"count": 50, "rounds": 1, "size_max": 8192},
    "large": {"count": 20, "size_max": 1048576},
    "threadchurn": {"spawns": 20},
    "pareto": {"steps": 20000},
    "aging": {"phases": 6, "ops": 20000, "live_mib": 4},
}
DETERMINISTIC = ["churn", "samethread", "xthread", "larson", "realloc", "large", "pareto", "aging"]


def run(
    name: str, alloc: Verified, **extra: int | str
) -> tuple[RunStatus, dict[str, float], dict[str, str], str]:
    w = workloads.load_catalog()[name]
    known = {p.name for p in w.params}  # aging has no threads
    params = workloads.resolve_params(
        w, SMALL[name] | {k: v for k, v in extra.items() if k in known}, "test"
    )
    spec = RunSpec(
        seq=0,
        allocator=alloc.spec.name,
        workload=name,
        params=params,
        rep=0,
        argv=workloads.expand(w, params),
        env=tuple(alloc.child_env().items()),
        timeout=60,
        expect_malloc=alloc.malloc_object,
        result_fd=True,
    )
    r = execute.run(spec)
    return r.status, r.metrics, r.labels, r.detail


@pytest.fixture(scope="module")
def pair(installed: dict[str, Verified]) -> list[Verified]:
    """glibc and one preloaded allocator."""
    other = next(
        (installed[n] for n in ("mimalloc", "jemalloc", "tcmalloc-minimal") if n in installed), None
    )
    if other is None:
        pytest.skip("no preloadable allocator installed")
    return [installed["glibc"], other]


def test_catalog_lists_every_native_workload() -> None:
    catalog = workloads.load_catalog()
    # misuse and harden are errors on purpose (their own tests: here and test_harden.py);
    # replay needs a trace (tests/replay)
    native = {n for n, w in catalog.items() if w.kind == "native"}
    assert set(SMALL) | {"misuse", "harden", "replay"} == native


def test_misuse_is_a_run_result_not_a_crash_of_allocmark(pair: list[Verified]) -> None:
    glibc = pair[0]
    w = workloads.load_catalog()["misuse"]
    params = workloads.resolve_params(w, {"kind": "double_free"}, "test")
    spec = RunSpec(
        seq=0,
        allocator="glibc",
        workload="misuse",
        params=params,
        rep=0,
        argv=workloads.expand(w, params),
        env=tuple(glibc.child_env().items()),
        timeout=60,
        expect_malloc=glibc.malloc_object,
        result_fd=True,
    )
    r = execute.run(spec)
    # glibc's tcache notices this double free and aborts: the run says so.
    assert r.status is RunStatus.CRASHED
    assert r.detail.startswith("SIGABRT") and "double free" in r.detail


@pytest.mark.parametrize("name", sorted(SMALL))
def test_workload_emits_valid_metrics(name: str, pair: list[Verified]) -> None:
    for alloc in pair:
        status, metrics, labels, detail = run(name, alloc, threads=2)
        assert status is RunStatus.OK, f"{alloc.spec.name}: {detail}"
        assert metrics["ops"] > 0 and metrics["seconds"] > 0
        assert metrics["ops_per_s"] == pytest.approx(metrics["ops"] / metrics["seconds"], rel=1e-3)
        assert metrics["peak_requested_bytes"] > 0
        assert labels["release_fn"] == "none"


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_same_seed_same_requests(name: str, pair: list[Verified]) -> None:
    seen = [run(name, alloc, threads=1, seed=5)[1] for alloc in pair]
    assert seen[0]["ops"] == seen[1]["ops"]
    assert seen[0]["peak_requested_bytes"] == seen[1]["peak_requested_bytes"]


def test_falseshare_reports_writes_and_shared_lines(pair: list[Verified]) -> None:
    for mode in ("active", "passive"):
        _, m, _, _ = run("falseshare", pair[0], threads=2, mode=mode)
        assert m["writes"] == 2 * 2 * 10000
        assert m["writes_per_s"] > 0 and "same_line_pairs" in m


def test_blowup_and_threadchurn_report_rss(pair: list[Verified]) -> None:
    _, m, _, _ = run("blowup", pair[0])
    assert m["rss_peak_kib"] >= m["rss_end_kib"] > 0 and m["blowup"] > 0
    _, m, _, _ = run("threadchurn", pair[0])
    assert m["threads_created"] == 20 and m["kept_bytes"] > 0 and m["rss_left_kib"] > 0


def test_release_calls_the_allocators_own_function(installed: dict[str, Verified]) -> None:
    expected = {
        "glibc": "malloc_trim",
        "jemalloc": "mallctl(arena.4096.purge)",
        "mimalloc": "mi_collect",
        "tcmalloc": "MallocExtension_ReleaseFreeMemory",
    }
    for name, fn in expected.items():
        if name in installed:
            status, _, labels, detail = run("churn", installed[name], release="true")
            assert status is RunStatus.OK, detail
            assert labels["release_fn"] == fn


def test_null_allocator_overhead_is_at_least_one(tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    result = cli(
        "run",
        "-a",
        "bump,glibc",
        "-w",
        "churn",
        "-p",
        "count=20000",
        "-p",
        "rounds=1",
        "-n",
        "2",
        "--max-blocks",
        "2",
        "--db",
        str(db),
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(cli("report", "--db", str(db), "--format", "json").stdout)
    overhead = {c["allocator"]: c["median"] for c in doc["rows"] if c["metric"] == "overhead_ratio"}
    # bump never frees: one round allocates 1.5x the peak of live bytes, plus headers.
    assert 1.0 <= overhead["bump"] <= 3.0
    assert 0.9 <= overhead["glibc"] <= 3.0


def test_bump_is_hidden_from_all(verified_catalog: list[Verified]) -> None:
    from allocmark import allocators

    names = [s.name for s in allocators.select(allocators.load_catalog(), [])]
    assert "bump" not in names
    assert any(v.spec.name == "bump" and v.usable for v in verified_catalog)


def test_native_workloads_declare_the_allocation_functions_they_call() -> None:
    # The recommendation trusts `calls` to refuse a partial allocator: check it
    # against what each program imports.
    from allocmark import native
    from allocmark.run import who

    if not shutil.which("nm"):
        pytest.skip("needs nm (binutils)")
    for w in workloads.load_catalog().values():
        if w.kind != "native":
            continue
        nm = subprocess.run(
            ["nm", "-D", "--undefined-only", str(native.program(w.program))],
            capture_output=True,
            text=True,
            check=True,
        )
        imported = {line.split()[-1].split("@")[0] for line in nm.stdout.splitlines() if line}
        assert imported & set(who.TRACKED) == set(w.calls), w.name
