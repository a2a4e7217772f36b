"""Why a decided difference (answer/why.py): planted causes in fake runs, and A/A."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import get_args

import pytest

from allocmark import schemas
from allocmark.answer import analyze, remedy, why
from allocmark.errors import UserError
from allocmark.model import AllocatorRuns, StoredRun
from allocmark.report import answer, extra
from allocmark.schemas.remedies import Mechanism, RemediesFile
from tests.fakes import stored

BLOCKS = 12


def _runs(
    allocator: str,
    user: float,
    sys: float,
    anon: int,
    file: int,
    faults: int,
    seed: str = "",
    kernel: dict[str, float] | None = None,
    spread: float = 0.01,
) -> list[StoredRun]:
    """Runs whose time is user + sys CPU and whose peak RSS is anonymous + file-backed,
    each within ±1 % from block to block; `kernel`: the kernel's counts by kind (±spread)."""
    rng = random.Random(allocator + seed)
    out = []
    for b in range(BLOCKS):
        u, s = user * rng.uniform(0.99, 1.01), sys * rng.uniform(0.99, 1.01)
        a, f = anon * rng.uniform(0.99, 1.01), file * rng.uniform(0.995, 1.005)
        metrics = {"peak_anon_kib": round(a), "peak_file_kib": round(f), "start_rss_kib": 900.0}
        for kind, n in (kernel or {}).items():
            metrics[f"syscall_{kind}"] = round(n * rng.uniform(1 - spread, 1 + spread))
        run = stored(allocator, u + s, rss=round(a + f), rep=b, metrics=metrics)
        out.append(
            run._replace(
                user_s=u,
                sys_s=s,
                minflt=round(faults * rng.uniform(0.99, 1.01)),
                nvcsw=rng.randint(2, 4),
            )
        )
    return out


def _whys(*sets: list[StoredRun]) -> list[why.Why]:
    return why.explain(_comparison(*sets))


def test_system_time_and_faults_explain_a_slower_allocator() -> None:
    """Planted: every block in its own mapping: system CPU and minor faults up, user
    CPU the same. Named: system CPU, most of it, with more faults; not user CPU."""
    (w,) = _whys(
        _runs("glibc", 0.9, 0.1, 8000, 2000, 1000), _runs("mmapper", 0.9, 0.4, 8000, 2000, 5000)
    )
    assert (w.allocator, w.axis) == ("mmapper", "time")
    assert [f.signal for f in w.factors] == ["sys_s", "minflt"]
    assert w.factors[0].degree == "most of it" and w.factors[1].degree == "with"
    assert 0.9 < (w.factors[0].share or 0) < 1.1
    text = answer.clause(w)
    assert text.startswith("system CPU +3") and "most of it; with 4.9" in text
    assert text.endswith("× the minor faults")


def test_anonymous_memory_at_the_peak_explains_a_larger_peak() -> None:
    (w,) = _whys(
        _runs("glibc", 0.9, 0.1, 8000, 2000, 1000), _runs("padder", 0.9, 0.1, 13000, 2000, 1000)
    )
    assert (w.allocator, w.axis) == ("padder", "rss")
    assert [f.signal for f in w.factors] == ["peak_anon_kib"]
    assert answer.clause(w).startswith("+4.9 MiB anonymous at the peak, most of it")


def test_the_first_samples_rss_is_never_a_cause() -> None:
    """The first RSS sample falls some way into the program (540-840 us of churn's CPU
    time on a quiet machine, later beside a busy process): a faster-growing allocator
    holds more of its work in it. Planted: the larger peak's blocks also have 4 MiB more
    at the first sample. Named: anonymous memory at the peak only, never "at start-up"
    (the flake it was: "+2.2 MiB at start-up, more than all of it", issue 67's stop)."""
    grown = [
        r._replace(metrics=r.metrics | {"start_rss_kib": 900.0 + 4096})
        for r in _runs("bump", 0.9, 0.1, 13000, 2000, 1000)
    ]
    (w,) = _whys(_runs("glibc", 0.9, 0.1, 8000, 2000, 1000), grown)
    assert w.axis == "rss" and [f.signal for f in w.factors] == ["peak_anon_kib"]
    assert "start-up" not in answer.clause(w)


def test_a_difference_nothing_moved_with_is_not_explained() -> None:
    """Planted: time up by waiting (neither CPU nor faults moved): said so, with what
    was checked; never a cause."""
    base = _runs("glibc", 0.9, 0.1, 8000, 2000, 1000)
    waits = [
        r._replace(wall_s=r.wall_s * 1.3)
        for r in _runs("waiter", 0.9, 0.1, 8000, 2000, 1000, seed="x")
    ]
    (w,) = _whys(base, waits)
    assert w.axis == "time" and not w.explained
    assert answer.clause(w) == ("not explained by a decided signal: checked CPU, faults, switches")


def test_a_a_explains_nothing() -> None:
    assert (
        _whys(_runs("glibc", 0.9, 0.1, 8000, 2000, 1000), _runs("twin", 0.9, 0.1, 8000, 2000, 1000))
        == []
    )


def test_a_signal_that_moved_the_other_way_is_not_named() -> None:
    """Faster, with more system CPU (less user CPU): the system CPU is not a reason."""
    (w,) = _whys(
        _runs("glibc", 0.9, 0.1, 8000, 2000, 1000), _runs("fast", 0.4, 0.15, 8000, 2000, 1000)
    )
    assert w.axis == "time" and [f.signal for f in w.factors] == ["user_s"]


def _comparison(*sets: list[StoredRun]) -> analyze.Comparison:
    runs = [r for s in sets for r in s]
    names = list(dict.fromkeys(r.allocator for r in runs))
    comp = analyze.compare(runs, names, "glibc")
    return dataclasses.replace(
        comp, signals=tuple(AllocatorRuns.of_runs(runs, analyze.SIGNAL_METRICS))
    )


def test_freed_pages_kept_name_the_setting_that_returns_them() -> None:
    """jemalloc larger by anonymous memory at the peak: try jemalloc:nodecay; measured
    in the campaign, its own position; else the command that would measure it."""
    base = _runs("glibc", 0.9, 0.1, 8000, 2000, 1000)
    big = _runs("jemalloc", 0.9, 0.1, 14000, 2000, 1000)
    (t,) = remedy.tries(_comparison(base, big))
    assert (t.allocator, t.variant, t.why.axis, t.position) == (
        "jemalloc",
        "jemalloc:nodecay",
        "rss",
        None,
    )
    assert t.command == "allocmark run -w churn -p threads=1 -a glibc,jemalloc,jemalloc:nodecay"
    line = answer.try_line(t)
    assert line.startswith("to try for jemalloc's peak RSS (jemalloc against glibc: +5.9 MiB")
    (t,) = remedy.tries(
        _comparison(base, big, _runs("jemalloc:nodecay", 0.9, 0.1, 8100, 2000, 1000))
    )
    assert t.position is not None and t.position.value < 1.03
    assert "; measured here: peak RSS" in answer.try_line(t)
    flagged = [
        [r._replace(params=(("release", False), ("threads", 1))) for r in runs]
        for runs in (base, big)
    ]
    (t,) = remedy.tries(_comparison(*flagged))  # a bool as the docs and --help write it
    assert " -p release=false -p threads=1 -a " in t.command


def test_no_setting_is_named_for_a_cause_that_is_not_most_of_it() -> None:
    """A larger peak that anonymous memory explains only in part names no setting."""
    base = _runs("glibc", 0.9, 0.1, 8000, 2000, 1000)
    big = _runs("jemalloc", 0.9, 0.1, 9000, 4000, 1000)
    (w,) = why.explain(_comparison(base, big))
    assert w.factors[0].signal == "peak_file_kib"
    assert remedy.tries(_comparison(base, big)) == []


def test_detail_shows_what_each_run_spent() -> None:
    """--detail, Markdown and HTML show the signals' medians per cell and allocator."""
    comp = _comparison(
        _runs("glibc", 0.9, 0.1, 8000, 2000, 1000), _runs("mmapper", 0.9, 0.4, 8000, 2000, 5000)
    )
    table = extra.signals_table(comp)
    assert table is not None and table.heads[2:5] == ("user CPU", "system CPU", "minor faults")
    rows = {r[1]: r for r in table.rows}
    assert rows["mmapper"][3].endswith(" ms") and 390 < float(rows["mmapper"][3][:-3]) < 410
    assert 4900 <= int(rows["mmapper"][4]) <= 5100 and rows["glibc"][9] == "7.8 MiB"
    assert extra.signals_table(dataclasses.replace(comp, signals=())) is None


def test_smaps_near_the_peak_counts_only_where_it_was_read_near_it() -> None:
    """Private dirty memory read at 95 % of the peak explains a larger peak; read at
    a third of it, it is not even checked (never explained by what was far from it)."""

    def near(runs: list[StoredRun], at: float, dirty: float) -> list[StoredRun]:
        return [
            r._replace(
                metrics=r.metrics
                | {
                    "near_peak_rss_kib": r.maxrss_kib * at,
                    "near_peak_dirty_kib": dirty * (1 + r.rep / 1e3),
                }
            )
            for r in runs
        ]

    base = _runs("glibc", 0.9, 0.1, 8000, 2000, 1000)
    big = _runs("jemalloc", 0.9, 0.1, 14000, 2000, 1000)
    (w,) = why.explain(_comparison(near(base, 0.95, 7000), near(big, 0.95, 13000)))
    assert "near_peak_dirty_kib" in w.checked
    most = {f.signal for f in w.factors if f.degree == "most of it"}
    assert most == {"peak_anon_kib", "near_peak_dirty_kib"}
    (w,) = why.explain(_comparison(near(base, 0.3, 7000), near(big, 0.3, 13000)))
    assert "near_peak_dirty_kib" not in w.checked


def test_a_madvise_storm_is_named_with_its_counts() -> None:
    """Planted: every freed block's pages given back (system CPU and faults up): the
    kernel's madvise(MADV_DONTNEED) count names the mechanism, with both counts; the
    counts that did not move name nothing, nor does one that moved by a few calls
    (mmap: 18 against 13, decided: the counts barely vary)."""
    same = {"brk": 30, "futex_wait": 2}
    base = _runs(
        "glibc", 0.9, 0.1, 8000, 2000, 1000, kernel={"madvise_dontneed": 48, "mmap": 13, **same}
    )
    kernel = {"madvise_dontneed": 75050, "mmap": 18, **same}
    storm = _runs("storm", 0.9, 0.4, 8000, 2000, 5000, kernel=kernel, spread=0.0)
    (w,) = _whys(base, storm)
    assert (w.axis, w.mechanisms) == ("time", ("pages",))
    assert "syscall_mmap" not in {f.signal for f in w.factors}
    text = answer.clause(w)
    assert text.startswith("system CPU +3") and "most of it" in text
    assert "madvise(MADV_DONTNEED) calls against 4" in text
    assert "freed pages given back to the kernel" in text


def test_a_futex_lock_is_named_where_no_cpu_explains_the_time() -> None:
    """Planted: threads waiting on a lock made of raw futexes: time up, CPU the same;
    not explained in seconds, but the kernel's futex waits name the mechanism."""
    base = _runs("glibc", 0.9, 0.1, 8000, 2000, 1000, kernel={"futex_wait": 6, "mmap": 40})
    locked = [
        r._replace(wall_s=r.wall_s * 1.4)
        for r in _runs(
            "locked", 0.9, 0.1, 8000, 2000, 1000, kernel={"futex_wait": 486941, "mmap": 40}
        )
    ]
    (w,) = _whys(base, locked)
    assert w.axis == "time" and not w.explained and w.mechanisms == ("locks",)
    text = answer.clause(w)
    assert text.startswith("not explained by a decided signal: checked CPU, faults, switches")
    assert "system calls" in text and "futex waits against 6: threads waiting" in text


def test_a_count_that_did_not_decide_names_no_mechanism() -> None:
    """madvise calls 10 % up by their estimate, ±30 % from block to block: undecided,
    so no mechanism is named, though the time difference is explained."""
    base = _runs("glibc", 0.9, 0.1, 8000, 2000, 1000, kernel={"madvise_dontneed": 100})
    other = _runs("other", 0.9, 0.4, 8000, 2000, 1000, kernel={"madvise_dontneed": 110}, spread=0.3)
    (w,) = _whys(base, other)
    assert w.explained and w.mechanisms == ()
    assert "madvise" not in answer.clause(w)


def test_a_a_with_the_kernels_counts_names_nothing() -> None:
    counts = {"madvise_dontneed": 500, "mmap": 40, "futex_wait": 10}
    assert (
        _whys(
            _runs("glibc", 0.9, 0.1, 8000, 2000, 1000, kernel=counts, spread=0.2),
            _runs("twin", 0.9, 0.1, 8000, 2000, 1000, kernel=counts, spread=0.2),
        )
        == []
    )


def test_a_mechanism_names_the_setting_for_the_allocator_that_makes_the_calls() -> None:
    """glibc slower than an allocator by a thread heap trimmed on every free (99,501
    madvise(MADV_DONTNEED) calls against 1, the CPU by system time): try glibc:keep.
    The same counts on the faster side name nothing: the calls are not its cost."""
    trims = {"madvise_dontneed": 99501, "mprotect": 1000}
    quiet = {"madvise_dontneed": 1, "mprotect": 5}
    glibc = _runs("glibc", 0.05, 0.35, 8000, 2000, 1000, kernel=trims)
    fast = _runs("fast", 0.05, 0.01, 8000, 2000, 1000, kernel=quiet)
    (t,) = remedy.tries(_comparison(glibc, fast))
    assert (t.allocator, t.variant, t.why.axis) == ("glibc", "glibc:keep", "time")
    assert t.why.mechanisms[0] in ("pages", "protect")
    line = answer.try_line(t)
    # the why's allocator's counts first, each within the runs' ±1 %
    assert re.search(r"; 1 madvise\(MADV_DONTNEED\) call against (98|99|100),\d{3}: freed", line)
    assert line.endswith("-a glibc,glibc:keep")  # glibc's setting, against glibc
    # glibc slower by its user CPU, the other making the calls: not glibc's to mend
    slow = _runs("glibc", 0.9, 0.01, 8000, 2000, 1000, kernel=quiet)
    storm = _runs("storm", 0.05, 0.35, 8000, 2000, 1000, kernel=trims)
    (w,) = why.explain(_comparison(slow, storm))
    assert (w.axis, w.delta < 0, w.mechanisms) == ("time", True, ())  # moved the other way
    assert remedy.tries(_comparison(slow, storm)) == []


def test_threads_waiting_on_two_arenas_name_glibcs_default() -> None:
    """glibc:arena2 slower on a row of 4 threads, its futex waits decided and material:
    try glibc (arenas of their own); on a row of one thread, nothing."""
    four = [("threads", 4)]

    def row(runs: list[StoredRun], params: list[tuple[str, object]]) -> list[StoredRun]:
        return [r._replace(params=tuple(params)) for r in runs]

    base = _runs("glibc", 0.9, 0.1, 8000, 2000, 1000, kernel={"futex_wait": 6})
    capped = [
        r._replace(wall_s=r.wall_s * 1.4)
        for r in _runs("glibc:arena2", 0.9, 0.1, 8000, 2000, 1000, kernel={"futex_wait": 48000})
    ]
    (t,) = remedy.tries(_comparison(row(base, four), row(capped, four)))
    assert (t.allocator, t.variant, t.why.mechanisms) == ("glibc:arena2", "glibc", ("locks",))
    one = [("threads", 1)]
    assert remedy.tries(_comparison(row(base, one), row(capped, one))) == []


def test_the_remedies_schema_knows_every_mechanism_and_wants_a_cause() -> None:
    assert set(get_args(Mechanism)) == set(why.MECHANISMS)
    loaded = remedy.load()
    assert {m for r in loaded for m in r.mechanisms} <= set(why.MECHANISMS)
    with pytest.raises(UserError, match="signals or mechanisms"):
        schemas.validate(
            RemediesFile,
            {"remedy": [{"allocator": "glibc", "axis": "time", "try": "glibc:keep", "says": "x"}]},
            "r.toml",
        )


def test_every_signal_is_read_from_the_store() -> None:
    """A signal the comparison never loads is never checked: the kernel's times were
    stored with each why-pass run and left out of every why until they were listed."""
    loaded = set(analyze.SIGNAL_COLUMNS) | set(analyze.SIGNAL_METRICS)
    assert {s.name for s in (*why.TIME, *why.RSS)} <= loaded
