"""The hardening battery: the classifier on outcomes whose truth is known, the
battery's programs, and `allocmark harden`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from allocmark import native, workloads
from allocmark.answer import hardening, stored as stored_answer
from allocmark.model import RunSpec, RunStatus, StoredRun, Verified
from allocmark.run import execute
from allocmark.schemas.hardening import Kind
from allocmark.store import Store
from tests.conftest import cli, readable
from tests.fakes import stored

O = hardening.Outcome  # noqa: E741 - the tables below read better with it


def run(
    status: RunStatus,
    stage: str = "",
    detail: str = "",
    allocator: str = "a",
    test: str = "double_free",
    **metrics: float,
) -> StoredRun:
    labels = {"stage": stage} if stage else {}
    if "seen" in metrics:
        labels["seen"] = str(metrics.pop("seen"))
    if "stderr" in metrics:
        labels["stderr"] = str(metrics.pop("stderr"))
    r = stored(
        allocator,
        0.01,
        status=status,
        workload="harden",
        params=(("size", 64), ("test", test)),
        metrics=dict(metrics),
    )
    return r._replace(labels=labels, detail=detail)


@pytest.mark.parametrize(
    ("kind", "r", "expected"),
    [
        (Kind.MISUSE, run(RunStatus.CRASHED, "setup", "SIGABRT: double free"), O.AT_ERROR),
        (Kind.MISUSE, run(RunStatus.CRASHED, "", "SIGSEGV"), O.AT_ERROR),
        (Kind.MISUSE, run(RunStatus.CRASHED, "error", "SIGABRT: corrupted"), O.LATER),
        (Kind.MISUSE, run(RunStatus.CRASHED, "reveal", "SIGILL"), O.LATER),
        (Kind.MISUSE, run(RunStatus.OK, "reveal", same_block=1), O.CORRUPTED),
        (Kind.MISUSE, run(RunStatus.OK, "reveal", overlap=1), O.CORRUPTED),
        (Kind.MISUSE, run(RunStatus.OK, "reveal", wrong_contents=1, stderr="x"), O.CORRUPTED),
        (
            Kind.MISUSE,
            run(RunStatus.OK, "reveal", stderr="mimalloc: error: double free"),
            O.REPORTED,
        ),
        (Kind.MISUSE, run(RunStatus.OK, "reveal", same_block=0, overlap=0), O.MISSED),
        (Kind.MISUSE, run(RunStatus.TIMEOUT, "error"), O.HANG),
        (Kind.MISUSE, run(RunStatus.UNVERIFIED), O.NOT_RUN),
        (Kind.CONTRACT, run(RunStatus.OK, "error", conforming=1, seen="NULL"), O.CONFORMING),
        (Kind.CONTRACT, run(RunStatus.OK, "error", conforming=0, seen="a block"), O.NONCONFORMING),
        (Kind.CONTRACT, run(RunStatus.CRASHED, "setup", "SIGSEGV"), O.NONCONFORMING),
    ],
)
def test_the_classifier_reads_the_outcome_from_the_run(
    kind: Kind, r: StoredRun, expected: hardening.Outcome
) -> None:
    assert hardening.classify(kind, r).outcome is expected


def test_a_randomised_check_is_a_rate_and_scores_count_by_run() -> None:
    runs = [
        run(RunStatus.CRASHED, "setup", "SIGILL", "sn"),
        run(RunStatus.CRASHED, "error", "SIGILL", "sn"),
        run(RunStatus.OK, "reveal", allocator="sn"),
        run(RunStatus.OK, "reveal", allocator="je", same_block=1),
        run(RunStatus.OK, "reveal", allocator="je"),
        run(RunStatus.OK, "error", allocator="je", test="malloc_huge", conforming=1),
    ]
    m = hardening.matrix(runs, ["je", "sn"])
    assert m is not None and m.allocators == ("je", "sn")
    assert m.cells[("double_free", "sn")].text == "caught 2 of 3"
    assert m.cells[("double_free", "je")].text == "1 CORRUPT, 1 missed"
    assert m.cells[("double_free", "je")].outcome is O.CORRUPTED  # a tie goes to the worse
    je, sn = m.score("je"), m.score("sn")
    assert (je.caught, je.misuse, je.corrupted, je.kept, je.contract) == (0, 1, 1, 1, 1)
    assert je.points == pytest.approx(0.5) and sn.points == pytest.approx(2 / 3)


def test_pairs_set_each_hardened_build_against_its_plain_build() -> None:
    names = [
        "glibc",
        "mimalloc@2.1.7",
        "mimalloc@2.1.7+secure",
        "snmalloc@0.7.6+checks",
        "hardened_malloc@16",
        "hardened_malloc@16+light",
    ]
    assert hardening.pairs(names) == [
        ("mimalloc@2.1.7+secure", "mimalloc@2.1.7"),
        ("hardened_malloc@16", "hardened_malloc@16+light"),
    ]


def test_the_program_has_every_catalogued_test_and_no_other() -> None:
    listed = subprocess.run(
        [str(native.program("am_harden")), "--list"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert sorted(listed) == sorted(hardening.tests()) and len(listed) >= 40
    assert any(t.startswith("cxx_") for t in listed)  # C++ tests too


def battery(alloc: Verified, test: str) -> StoredRun:
    w = workloads.load_catalog()["harden"]
    params = workloads.resolve_params(w, {"test": test}, "test")
    r = execute.run(
        RunSpec(
            seq=0,
            allocator=alloc.spec.name,
            workload="harden",
            params=params,
            rep=0,
            argv=workloads.expand(w, params),
            env=tuple(alloc.child_env().items()),
            timeout=10,
            expect_malloc=alloc.malloc_object,
            result_fd=True,
        )
    )
    return StoredRun(
        0,
        alloc.spec.name,
        "harden",
        params,
        0,
        r.status,
        r.wall_s,
        r.user_s,
        r.sys_s,
        r.maxrss_kib,
        r.metrics,
        r.detail,
        False,
        labels=r.labels,
    )


@pytest.mark.integration
@pytest.mark.parametrize(
    ("test", "expected"),
    [
        ("double_free", O.AT_ERROR),  # glibc's tcache notices it in free()
        ("overflow_32_memcpy", O.CORRUPTED),  # the next block's contents changed, unnoticed
        ("underflow_16", O.LATER),  # the header damage shows when the block is freed
        ("free_of_reused_block", O.MISSED),
        ("malloc_huge", O.CONFORMING),
        ("aligned_alloc_bad_alignment", O.NONCONFORMING),  # glibc 2.36 returns a block
        ("cxx_double_delete", O.AT_ERROR),
        ("cxx_new_huge_throws", O.CONFORMING),
    ],
)
def test_glibc_outcomes_are_what_glibc_is_known_to_do(
    test: str, expected: hardening.Outcome, installed: dict[str, Verified]
) -> None:
    r = battery(installed["glibc"], test)
    seen = hardening.classify(hardening.tests()[test].kind, r)
    assert seen.outcome is expected, (r.status, r.labels, r.detail)
    if expected is O.AT_ERROR:
        assert "free" in seen.detail  # glibc's own message is kept


SPIN = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <unistd.h>
/* A test allocator over glibc: free() of the pointer freed last spins forever
   (a free list looping on itself), or, with AM_TEST_REPORT, says so and goes on. */
static void *last;
void free(void *p) {
  static void (*next)(void *);
  if (!next) next = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  if (p && p == last) {
    if (getenv("AM_TEST_REPORT")) { fputs("testalloc: double free\n", stderr); return; }
    for (;;) pause();
  }
  last = p;
  next(p);
}
"""


@pytest.fixture(scope="module")
def spinning(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = readable(tmp_path_factory.mktemp("spin"))  # the program's user loads it
    (d / "spin.c").write_text(SPIN)
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-O2", "-o", str(d / "spin.so"), str(d / "spin.c"), "-ldl"],
        check=True,
    )
    return d / "spin.so"


@pytest.mark.integration
def test_a_looping_free_is_a_hang_and_a_message_is_reported(spinning: Path) -> None:
    w = workloads.load_catalog()["harden"]
    params = workloads.resolve_params(w, {"test": "double_free"}, "test")
    base = {
        "seq": 0,
        "allocator": "spin",
        "workload": "harden",
        "params": params,
        "rep": 0,
        "argv": workloads.expand(w, params),
        "timeout": 2.0,
        "result_fd": True,
    }
    hung = execute.run(RunSpec(env=(("LD_PRELOAD", str(spinning)),), **base))  # type: ignore[arg-type]
    said = execute.run(
        RunSpec(env=(("LD_PRELOAD", str(spinning)), ("AM_TEST_REPORT", "1")), **base)
    )  # type: ignore[arg-type]
    assert hung.status is RunStatus.TIMEOUT and said.status is RunStatus.OK
    assert said.labels["stage"] == "reveal" and "testalloc: double free" in said.labels["stderr"]
    as_stored = [
        stored("spin", 1.0, status=s.status, workload="harden", params=params)._replace(
            labels=s.labels
        )
        for s in (hung, said)
    ]
    kinds = [hardening.classify(Kind.MISUSE, r).outcome for r in as_stored]
    assert kinds == [O.HANG, O.REPORTED]


@pytest.mark.integration
def test_allocmark_harden_prints_the_matrix_and_scores(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    r = cli(
        "harden",
        "-a",
        "glibc,bump",
        "--tests",
        "double_free,malloc_huge,overflow_32_memcpy",
        "-n",
        "1",
        "--db",
        str(db),
    )
    assert r.returncode == 0, r.stderr
    assert "Hardening battery: what each allocator does about each error" in r.stdout
    lines = {line.split("│")[1].strip(): line for line in r.stdout.splitlines() if "│" in line}
    assert "caught" in lines["double_free"] and "CORRUPT" in lines["overflow_32_memcpy"]
    assert "Hardening score per allocator" in r.stdout and "no hardened build" in r.stderr
    assert "crashed:" not in r.stderr  # the battery's crashes are findings, not failures
    html = cli("report", "--db", str(db), "--format", "html").stdout
    assert 'class="o-caught"' in html and 'class="o-corrupt"' in html
    store = Store(db, create=False)
    comp = stored_answer.comparison(store, store.campaign(None).id)
    assert comp.rows == ()  # the battery's runs are outcomes, not times


def test_an_unknown_test_is_a_usage_error(tmp_path: Path) -> None:
    r = cli("harden", "--tests", "double_free,bogus", "--db", str(tmp_path / "x.db"))
    assert r.returncode == 2 and "no test 'bogus'" in r.stderr and "double_free" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "x.db").exists()


def test_the_battery_runs_the_debugging_allocators_by_default() -> None:
    """Electric Fence and dmalloc are the reference for "caught at the error": in the
    battery unless told otherwise, though never in "all"."""
    from allocmark import allocators, api

    request = api.harden_request()
    assert {"efence", "dmalloc", "glibc"} <= set(request.allocators)
    every = allocators.select(allocators.load_catalog(), ["all"])
    assert "efence" not in [s.name for s in every]
