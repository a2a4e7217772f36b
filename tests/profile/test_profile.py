"""The profiler shim (libamprof.so) on crafted programs with known answers, and
`allocmark profile` end to end under every usable allocator."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import sqlite3
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from allocmark import profile
from allocmark.model import Verified
from allocmark.native import records
from allocmark.report import profile_rows
from tests.conftest import PYTHON, cli

pytestmark = pytest.mark.integration

# N mallocs of known sizes, M frees, K reallocs, a calloc, a posix_memalign.
# No stdio: printf would allocate its buffer through malloc.
CRAFTED = r"""
#include <stdlib.h>
int main(void) {
  void *p[100];
  for (int i = 0; i < 100; i++) p[i] = malloc(24 + i);          /* N = 100 */
  for (int i = 0; i < 10; i++) p[i] = realloc(p[i], 1000 + i);   /* K = 10 */
  void *c = calloc(3, 50);
  void *a;
  if (posix_memalign(&a, 64, 200)) return 1;
  for (int i = 0; i < 60; i++) free(p[i]);                       /* M = 60 (+2) */
  free(c);
  free(a);
  return 0;
}
"""

# The program's own truth: which of its mallocs got an address it had seen before.
NEW_REUSE = r"""
#include <stdlib.h>
#include <stdio.h>
#include <unistd.h>
static void *seen[4000];
static int nseen;
static int known(void *p) {
  for (int i = 0; i < nseen; i++) if (seen[i] == p) return 1;
  seen[nseen++] = p;
  return 0;
}
int main(void) {
  void *p[1000];
  int reuse = 0;
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 1000; i++) reuse += known(p[i] = malloc(16 + (i % 5) * 16));
    for (int i = 0; i < 1000; i += 2) free(p[i]);
    for (int i = 1; i < 1000; i += 2) free(p[i]);
  }
  char line[64];
  int n = snprintf(line, sizeof line, "%d\n", reuse);   /* after the mallocs above */
  return write(1, line, (size_t)n) == n ? 0 : 1;
}
"""

THREAD_EXIT = r"""
#include <pthread.h>
#include <stdlib.h>
static void *work(void *arg) {
  (void)arg;
  for (int i = 0; i < N; i++) free(malloc(40));
  pthread_exit(NULL);   /* never returns to a wrapper around the start routine */
}
int main(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, work, NULL)) return 1;
  pthread_join(t, NULL);
  for (int i = 0; i < N / 100; i++) free(malloc(40));
  return 0;
}
"""

MMAP = r"""
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
int main(void) {
  void *big[4];
  for (int i = 0; i < 4; i++) memset(big[i] = malloc(8 << 20), 1, 4096);
  for (int i = 0; i < 4; i++) free(big[i]);
  void *mine = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return mine == MAP_FAILED || munmap(mine, 1 << 20);
}
"""

# Known live bytes: the peak comes after the allocation loop; the program tells it.
LIVE = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static void *p[200000];
int main(void) {
  unsigned x = 12345;
  long total = 0;
  for (int i = 0; i < 200000; i++) {
    x = x * 1103515245u + 12345u;
    size_t n = 16 + (x >> 16) % 241;
    total += (long)n;
    p[i] = malloc(n);
  }
  for (int i = 0; i < 200000; i++) free(p[i]);
  char line[64];
  int n = snprintf(line, sizeof line, "%ld\n", total);
  return write(1, line, (size_t)n) == n ? 0 : 1;
}
"""

FORK = r"""
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
  for (int i = 0; i < 20; i++) free(malloc(100));
  pid_t c = fork();
  if (c == 0) {                        /* a child that allocates, then exits */
    for (int i = 0; i < 5; i++) free(malloc(100));
    exit(0);
  }
  pid_t e = fork();
  if (e == 0) {                        /* a child that execs another program */
    execl("/bin/true", "true", (char *)0);
    _exit(127);
  }
  waitpid(c, NULL, 0);
  waitpid(e, NULL, 0);
  for (int i = 0; i < 30; i++) free(malloc(100));
  return 0;
}
"""


def build(tmp: Path, name: str, source: str, *defines: str) -> Path:
    src, exe = tmp / f"{name}.c", tmp / name
    src.write_text(source)
    # -fno-builtin: the compiler would drop an allocation that nothing reads.
    cc = ["cc", "-O1", "-fno-builtin", "-pthread", *(f"-D{d}" for d in defines)]
    subprocess.run([*cc, "-o", str(exe), str(src)], check=True)
    return exe


def profiled(
    exe: Path, alloc: Verified, tmp: Path, sample: int = 1, args: Sequence[str] = ()
) -> tuple[list[dict[str, Any]], str]:
    """Run `exe` under the shim in front of `alloc`; its records and its output.
    Sample 1 (the default here) makes every number exact."""
    out = tmp / f"{exe.name}.{alloc.spec.name}.prof"
    out.unlink(missing_ok=True)
    preload = ":".join(x for x in (profile.shim_library(), alloc.preload) if x)
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"} | dict(alloc.spec.env)
    env |= {"LD_PRELOAD": preload, "AM_PROF_OUT": str(out), "AM_PROF_SAMPLE": str(sample)}
    proc = subprocess.run(
        [str(exe), *args], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return profile.read(out), proc.stdout


@pytest.fixture(scope="module")
def allocs(installed: dict[str, Verified]) -> list[Verified]:
    """glibc and the Debian allocators that serve every function."""
    return [installed[n] for n in ("glibc", "mimalloc", "jemalloc") if n in installed]


def _minus(rec: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """A record's counts less a baseline record's: what the program's own code did."""
    out: dict[str, Any] = {"api": {}, "path": {}}
    for kind in ("api", "path"):
        for name, pairs in rec[kind].items():
            was = base[kind].get(name, {})
            out[kind][name] = {k: v - was.get(k, 0) for k, v in pairs.items()}
    sizes = profile.size_histogram(rec, "malloc")
    was_sizes = profile.size_histogram(base, "malloc")
    out["sizes"] = profile.records.add_lists(sizes, [-n for n in was_sizes])
    final = rec["memory"]["final_requested"] - base["memory"]["final_requested"]
    out["final_requested"] = final
    return out


def test_exact_counts_of_a_crafted_program(tmp_path: Path, allocs: list[Verified]) -> None:
    exe = build(tmp_path, "crafted", CRAFTED)
    empty = build(tmp_path, "empty", "int main(void) { return 0; }\n")
    for alloc in allocs:
        # What the process allocates before main (jemalloc's start-up calls dlsym,
        # which allocates) is counted too: measured on a program doing nothing.
        (base,), _ = profiled(empty, alloc, tmp_path)
        (rec,), _ = profiled(exe, alloc, tmp_path)
        own = _minus(rec, base)
        api = {name: pairs for name, pairs in own["api"].items() if pairs.get("calls")}
        assert {k: (v["calls"], v["bytes"]) for k, v in api.items()} == {
            "malloc": (100, sum(24 + i for i in range(100))),
            "realloc": (10, sum(1000 + i for i in range(10))),
            "calloc": (1, 150),
            "posix_memalign": (1, 200),
            "free": (62, 0),
        }, alloc.spec.name
        # 24..123 bytes: buckets [16,32) 8 sizes, [32,64) 32, [64,128) 60.
        assert own["sizes"][5:8] == [8, 32, 60]
        # Every call was timed (AM_PROF_SAMPLE=1), on the path it took.
        timed = {p: v.get("samples", 0) for p, v in own["path"].items()}
        assert timed.get("malloc_new", 0) + timed.get("malloc_reuse", 0) == 100
        assert timed["free"] == 62 and timed["realloc"] == 10
        # 40 blocks of the first loop are never freed; live requested bytes end there.
        assert own["final_requested"] == sum(24 + i for i in range(60, 100))
        assert os.path.realpath(rec["next_malloc"]) == os.path.realpath(alloc.malloc_object or "")


def test_new_and_reuse_match_the_programs_own_count(tmp_path: Path, allocs: list[Verified]) -> None:
    exe = build(tmp_path, "newreuse", NEW_REUSE)
    for alloc in allocs:
        records, told = profiled(exe, alloc, tmp_path)
        malloc = records[0]["api"]["malloc"]
        # The shim must agree with the program exactly (beyond what start-up allocates).
        extra = malloc["calls"] - 3000
        assert 0 <= extra <= 2, alloc.spec.name
        # Every call is sampled here, so every one is classified.
        assert malloc["sampled_reuse"] == int(told), alloc.spec.name
        assert malloc["sampled_new"] == 3000 - int(told) + extra
        assert int(told) > 0  # the allocator did hand addresses out again


def test_counts_of_a_thread_that_ends_with_pthread_exit_are_kept(
    tmp_path: Path, allocs: list[Verified]
) -> None:
    exe = build(tmp_path, "texit", THREAD_EXIT, "N=1000")
    # The same thread creation and pthread_exit without the loops: what libc's
    # own thread machinery allocates (glibc's unwinder loads libgcc_s).
    same = build(tmp_path, "texit0", THREAD_EXIT, "N=0")
    for alloc in allocs:
        (rec,), _ = profiled(exe, alloc, tmp_path)
        (base,), _ = profiled(same, alloc, tmp_path)
        own = _minus(rec, base)["api"]
        assert own["malloc"]["calls"] == 1010, alloc.spec.name
        assert own["free"]["calls"] == 1010
        assert rec["threads"]["count"] == 2


def test_mmap_is_counted_inside_jemalloc_and_outside_any_allocator(
    tmp_path: Path, installed: dict[str, Verified]
) -> None:
    if "jemalloc" not in installed:
        pytest.skip("Debian jemalloc is not installed")
    exe = build(tmp_path, "mmap", MMAP)
    (je,), _ = profiled(exe, installed["jemalloc"], tmp_path)
    # jemalloc maps its memory through libc's mmap, where the shim sees it.
    assert je["sys"]["mmap"]["in_calls"] >= 1
    assert je["sys"]["mmap"]["in_bytes"] >= 8 << 20
    assert je["sys"]["mmap"]["out_calls"] == 1 and je["sys"]["munmap"]["out_calls"] == 1
    (gl,), _ = profiled(exe, installed["glibc"], tmp_path)
    # glibc maps inside libc: nothing is visible, and the report says so.
    assert gl["sys"]["mmap"]["in_calls"] == 0 and gl["sys"]["mmap"]["out_calls"] == 1
    assert "none is visible" in profile.visibility(installed["glibc"].malloc_object)[0]
    assert "mmap" in profile.visibility(installed["jemalloc"].library)[1]
    if "tbbmalloc" in installed:
        # The proxy serves malloc; libtbbmalloc.so.2, which it needs, maps the memory:
        # its calls are the allocator's too.
        (tbb,), _ = profiled(exe, installed["tbbmalloc"], tmp_path)
        assert tbb["sys"]["mmap"]["in_calls"] >= 1 and tbb["sys"]["mmap"]["out_calls"] == 1


def test_live_bytes_are_exact_at_sample_1_and_estimated_within_their_margin(
    tmp_path: Path, allocs: list[Verified]
) -> None:
    exe = build(tmp_path, "live", LIVE)
    for alloc in allocs:
        (exact,), told = profiled(exe, alloc, tmp_path)
        truth = int(told)
        # Exact: the program's blocks plus what start-up keeps live (libstdc++,
        # which Debian's jemalloc loads, keeps a 71 KiB pool).
        assert truth <= exact["memory"]["peak_requested"] <= truth + (128 << 10), alloc.spec.name
        assert exact["memory"]["peak_requested_sd"] == 0
        for _ in range(3):
            (est,), _ = profiled(exe, alloc, tmp_path, sample=256)
            mem = est["memory"]
            assert mem["track_interval"] >= 8192 and mem["peak_tracked_blocks"] > 100
            # Sampled: within 4 standard deviations of the exact peak (and the
            # deviation claimed is the one a byte-sampled estimate has).
            sd = mem["peak_requested_sd"]
            assert 0.002 * truth < sd < 0.05 * truth, alloc.spec.name
            assert abs(mem["peak_requested"] - exact["memory"]["peak_requested"]) < 4 * sd + 4096
            # All 200,000 calls are counted, new/reuse from the timed ones.
            malloc = est["api"]["malloc"]
            assert malloc["calls"] >= 200000
            assert 700 <= malloc["sampled_new"] + malloc["sampled_reuse"] <= 900
            # Sizes below 4 KiB split as the timed calls: 16..256 bytes, uniform.
            sizes = profile.size_histogram(est, "malloc")
            assert sum(sizes) == pytest.approx(malloc["calls"])
            for k, share in ((5, 16 / 241), (6, 32 / 241), (7, 64 / 241), (8, 128 / 241)):
                assert abs(sizes[k] / malloc["calls"] - share) < 0.08, (k, sizes)


def test_fork_and_exec_do_not_corrupt_the_profile(tmp_path: Path, allocs: list[Verified]) -> None:
    exe = build(tmp_path, "fork", FORK)
    for alloc in allocs:
        records, _ = profiled(exe, alloc, tmp_path)
        by_exe = {}
        for r in records:
            by_exe.setdefault(Path(r["exe"]).name, []).append(r)
        parent_pid = min(r["pid"] for r in by_exe["fork"])
        parent = next(r for r in by_exe["fork"] if r["pid"] == parent_pid)
        child = next(r for r in by_exe["fork"] if r["pid"] != parent_pid)
        assert 50 <= parent["api"]["malloc"]["calls"] <= 52, alloc.spec.name
        assert child["api"]["malloc"]["calls"] == 5  # started clean after the fork
        assert child["ppid"] == parent_pid
        assert "true" in by_exe  # the exec'd program wrote its own record
        combined = profile.combine(records)
        assert combined["processes"][0]["pid"] == parent_pid


def test_profile_command_under_every_usable_allocator(tmp_path: Path) -> None:
    """A multi-threaded stress run under the shim and each allocator: all verified,
    profiles stored and shown side by side with findings."""
    db = tmp_path / "p.db"
    r = cli(
        "profile",
        "-w",
        "xthread",
        "-p",
        "threads=2",
        "-p",
        "steps=20000",
        "-p",
        "slots=500",
        "--db",
        str(db),
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    assert "Profile: xthread" in r.stdout and "Findings" in r.stdout
    assert "malloc reuse" in r.stdout and "hardware counters:" in r.stdout
    assert "unverified" not in r.stderr and "crashed" not in r.stderr, r.stderr
    again = cli("report", "--db", str(db), "--profile")
    assert again.returncode == 0 and "Profile: xthread" in again.stdout
    _profile_exports(db, tmp_path)
    plain = tmp_path / "plain.db"
    assert (
        cli(
            "run",
            "-a",
            "glibc",
            "-w",
            "churn",
            "-p",
            "count=100",
            "-n",
            "1",
            "--max-blocks",
            "1",
            "--db",
            str(plain),
        ).returncode
        == 0
    )
    refused = cli("report", "--db", str(plain), "--profile")
    assert refused.returncode == 2 and "was not profiled" in refused.stderr
    # run --profile: the usual report, then the profiler's view, from the same runs.
    both = cli(
        "run",
        "--profile",
        "--sample",
        "4",
        "-a",
        "glibc",
        "-w",
        "churn",
        "-p",
        "count=1000",
        "-n",
        "2",
        "--max-blocks",
        "2",
        "--db",
        str(tmp_path / "both.db"),
    )
    assert both.returncode == 0, both.stderr
    assert "Peak RSS" in both.stdout and "Profile: churn" in both.stdout
    assert "TSC ticks of 1 call in 4" in both.stdout


def _profile_exports(db: Path, tmp_path: Path) -> None:
    """report --profile honours --format and -o: every format holds the same view."""
    files = {f: tmp_path / f"profile.{f}" for f in ("table", "md", "csv", "json", "html")}
    for f, path in files.items():
        done = cli("report", "--db", str(db), "--profile", "--format", f, "-o", str(path))
        assert done.returncode == 0, done.stderr
        assert "malloc reuse" in path.read_text() or f in ("csv", "json"), f
    assert "### Profile: xthread" in files["md"].read_text()
    assert "Findings" in files["table"].read_text() and "\x1b[" not in files["table"].read_text()
    rows = list(csv.DictReader(io.StringIO(files["csv"].read_text())))
    assert {r["line"] for r in rows} >= {"malloc (new / reuse)", "malloc reuse"}
    doc = json.loads(files["json"].read_text())
    assert doc["format"] == "allocmark-profile" and doc["profiles"][0]["findings"]
    assert doc["profiles"][0]["summaries"][0]["paths"]["malloc_reuse"]["samples"] > 0
    assert "<h2>Profile: xthread" in files["html"].read_text()
    with sqlite3.connect(db) as con:  # each run keeps the shim's records as they were
        stored = [json.loads(t) for (t,) in con.execute("SELECT profile_json FROM profiles")]
    assert stored and all(r["records"][0]["exe"].endswith("am_xthread") for r in stored)


def test_an_app_under_the_profiler_is_verified(tmp_path: Path) -> None:
    r = cli(
        "profile",
        "-a",
        "glibc,jemalloc",
        "-w",
        "sqlite",
        "-p",
        "scale=1",
        "--db",
        str(tmp_path / "s.db"),
    )
    assert r.returncode == 0, r.stderr
    assert "unverified" not in r.stderr, r.stderr
    assert "Profile: sqlite" in r.stdout


# ---------------------------------------------------------------------------
# Parsing and numbers (no processes)
# ---------------------------------------------------------------------------
RECORD = {
    "pid": 10,
    "ppid": 1,
    "exe": "/bin/x",
    "next_malloc": "/lib/libc.so.6",
    "sample": 1,
    "fast_bytes": 4096,
    "tsc_per_us": 2800,
    "hw_errno": 2,
    "threads": {"count": 1, "cycles": 1000, "alloc_cycles": 250},
    "threads_list": [{"tid": 10, "cycles": 1000, "alloc_cycles": 250}],
    "api": {"malloc": {"calls": 400, "bytes": 10000, "sampled_new": 3, "sampled_reuse": 1}},
    "sizes": {"malloc": [0] * 13 + [100]},
    "sizes_sampled": {"malloc": [0, 0, 0, 0, 0, 3, 1]},
    "path": {"malloc_new": {"samples": 3, "cycles": 300}},
    "hist": {"malloc_new": [0] * 26 + [3]},
    "sys": {
        "mmap": {
            "in_calls": 2,
            "in_cycles": 20,
            "in_bytes": 8192,
            "out_calls": 0,
            "out_cycles": 0,
            "out_bytes": 0,
        }
    },
    "locks": {
        "lock_calls": 0,
        "contended": 0,
        "wait_cycles": 0,
        "trylock_calls": 0,
        "trylock_failed": 0,
        "unlock_calls": 0,
    },
    "memory": {
        "peak_requested": 100,
        "peak_requested_sd": 5,
        "peak_tracked_blocks": 3,
        "rss_at_peak_kib": 1000,
        "final_requested": 0,
        "track_interval": 16384,
        "sampled_requested": 100,
        "sampled_usable": 120,
        "untracked": 0,
        "bitmap_full": 0,
        "threads_unmerged": 0,
    },
}


def _records_file(tmp_path: Path, *recs: dict[str, Any], tail: str = "") -> Path:
    path = tmp_path / "prof.jsonl"
    lines = [json.dumps({"am": "prof", "v": records.VERSIONS["prof"]} | r) for r in recs]
    path.write_text("".join(line + "\n" for line in lines) + tail)
    return path


def test_a_record_parses_and_sums(tmp_path: Path) -> None:
    (rec,) = profile.read(_records_file(tmp_path, RECORD))
    assert rec == RECORD
    malloc = rec["api"]["malloc"]
    assert malloc == {"calls": 400, "bytes": 10000, "sampled_new": 3, "sampled_reuse": 1}
    both = profile.merge([rec, rec])
    assert both["api"]["malloc"]["calls"] == 800 and both["hist"]["malloc_new"][26] == 6
    assert both["memory"]["peak_requested"] == 100  # a peak is not summed
    assert both["memory"]["track_interval"] == 16384  # nor is the interval
    # A merged peak keeps the margin and RSS measured at it, not another record's.
    low = {
        **rec,
        "memory": rec["memory"]
        | {"peak_requested": 50, "peak_requested_sd": 40, "rss_at_peak_kib": 9000},
    }
    mixed = profile.merge([low, rec])["memory"]
    assert (mixed["peak_requested"], mixed["peak_requested_sd"], mixed["rss_at_peak_kib"]) == (
        100,
        5,
        1000,
    )
    # The calls split as the timed ones did; a record of version 1 counted every call.
    assert profile.new_and_reuse(both["api"]["malloc"]) == (600, 200)
    assert profile.new_and_reuse({"calls": 4, "new": 3, "reuse": 1}) == (3, 1)
    assert profile.live_margin(rec["memory"]) == pytest.approx(1.96 * 5 / 100)
    s = profile.summarize("glibc", both, None)
    # Bucket 26 holds 192..223 cycles: the median lies inside it.
    assert s.paths["malloc_new"].median is not None and 192 <= s.paths["malloc_new"].median < 224
    assert s.time_share == 0.25
    # 100 calls of 4-8 KiB counted one by one; the other 300 split as the sampled ones.
    assert profile.size_histogram(both, "malloc")[5:7] == [450.0, 150.0]
    assert s.malloc_sizes[13] == 200.0
    cells = {label: cell for _, label, (cell,) in profile_rows.rows([s], "glibc")}
    assert cells["  its sizes (top 2)"] == "16-31 B 56%, 4-8 KiB 25%"


def test_a_profile_stored_from_a_version_2_record_still_summarises() -> None:
    old = {k: v for k, v in RECORD.items() if k not in ("fast_bytes", "sizes_sampled")}
    s = profile.summarize("glibc", profile.merge([old]), None)
    assert s.malloc_sizes[13] == 100 and s.calls["malloc"] == 400


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        ("nonsense\n", "not a JSON record"),
        ('{"am": "prof", "v": 4, "pid"', "not a JSON record"),
        ('{"am": "prof", "v": 3}\n', "'prof' record version 3"),
    ],
)
def test_a_broken_record_is_an_error_not_a_number(tmp_path: Path, tail: str, message: str) -> None:
    with pytest.raises(records.RecordError, match=message):
        profile.read(_records_file(tmp_path, RECORD, tail=tail))


def test_histogram_buckets_and_quantiles() -> None:
    assert [profile.bucket_low(b) for b in range(10)] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 10]
    hist = [0] * 40
    hist[20] = 50  # 64..79 cycles
    hist[26] = 50  # 192..223
    assert profile.quantile(hist, 0.25) == pytest.approx(64 + 16 * 0.5)
    assert 192 <= (profile.quantile(hist, 0.99) or 0) < 224
    assert profile.quantile([0, 0], 0.5) is None


def test_what_the_shim_could_not_count_is_said() -> None:
    gaps = profile.explain._gaps({"bitmap_full": 1, "untracked": 3, "threads_unmerged": 2})
    assert len(gaps) == 3 and "incomplete" in gaps[0] and "3 blocks" in gaps[1]
    assert profile.explain._gaps({"bitmap_full": 0, "untracked": 0}) == []


def test_a_run_keeps_its_raw_records_and_older_summed_profiles_still_read() -> None:
    two = [RECORD, RECORD | {"pid": 11, "ppid": 10}]
    assert profile.of_stored({"records": two}) == profile.combine(two)
    summed = profile.combine(two)
    assert profile.of_stored(summed) == summed  # stored before the records were kept


def test_your_own_program_is_profiled_side_by_side(tmp_path: Path) -> None:
    # A program allocmark did not write, run directly (issue 18, item 5).
    db = tmp_path / "p.db"
    program = [PYTHON, "-c", "x = [bytes(i % 300) for i in range(100000)]"]
    r = cli(
        "profile",
        "-a",
        "glibc,mimalloc",
        "--db",
        str(db),
        "--",
        *program,
        env={"PYTHONMALLOC": "malloc"},
    )
    assert r.returncode == 0, r.stderr
    assert "Profile: command" in r.stdout and "Findings" in r.stdout
    assert "mimalloc" in r.stdout and "calls" in r.stdout
    tried = cli(
        "try",
        "--profile",
        "-a",
        "glibc",
        "-n",
        "1",
        "--max-blocks",
        "1",
        "--db",
        str(tmp_path / "t.db"),
        "--",
        "true",
    )
    assert tried.returncode == 0, tried.stderr
    assert (
        "Your command under each allocator" in tried.stdout and "Profile: command" in tried.stdout
    )


def test_findings_compare_the_kernels_counts_and_the_layout() -> None:
    """Counts 1.5x apart and 10 or more, said in the kernel's words; utilization 10
    points apart; the lock finding is kept beside the kernel's counts."""
    base = profile.summarize("glibc", profile.merge([RECORD]), None)
    memory = dict(base.memory) | {
        "peak_layout_bytes": 90_000,
        "peak_layout_blocks": 900,
        "peak_layout_pages": 25,
        "peak_layout_lines": 1500,
        "peak_layout_shared_lines": 40,
    }
    glibc = dataclasses.replace(
        base, kernel={"mprotect": 17_761.0, "brk": 27.0, "madvise": 0.0}, memory=memory
    )
    packed = memory | {"peak_layout_pages": 23, "peak_layout_shared_lines": 0}
    other = dataclasses.replace(
        base,
        allocator="mimalloc",
        kernel={"mprotect": 463.0, "brk": 1.0, "madvise": 954.0},
        memory=packed,
        locks={"contended": 3, "trylock_failed": 0, "wait_cycles": 900},
    )
    said = profile.findings([glibc, other], "glibc")
    assert "mimalloc: 463 mprotect calls per run vs 17,761 for glibc (the kernel's count)" in said
    assert "mimalloc: 1 brk call per run vs 27 for glibc (the kernel's count)" in said
    assert "mimalloc: 954 madvise calls per run vs 0 for glibc (the kernel's count)" in said
    # 90,000 bytes in 23 pages (96 %) against 25 (88 %): 8 points, not said
    assert not any("page utilization" in f for f in said)
    assert "mimalloc: 0 lines shared by threads vs 40 for glibc" in said
    assert any(f.startswith("mimalloc: lock contention per run: 3 contended") for f in said)
    spread = dataclasses.replace(glibc, memory=memory | {"peak_layout_pages": 30})
    said = profile.findings([spread, other], "glibc")
    assert "mimalloc: page utilization 96% vs 73% for glibc (near the peak)" in said
