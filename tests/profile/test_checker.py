"""The profile's checker: every finding and every table cell of `allocmark profile`
read back against the value it describes.

Generated pairs of profiles (hypothesis over path cycles, new/reuse, the kernel's
counts, the layout near the peak, lock counts, runs) are rendered as `profile` renders
them (profile.findings, report/profile_rows.rows); each finding must be read by one rule
below, its numbers those of the profiles (within the rounding of their text), and it
must be said exactly when its rule's condition holds (worked out here again, from the
definitions in docs/profiler.md, not by the code under test). Each rule names the
contradiction it catches, as tests/report/test_checker.py does for the answer."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence

from hypothesis import given, settings, strategies as st

from allocmark import profile
from allocmark.profile import AllocatorProfile, PathStats
from allocmark.report import profile_rows

NUMBER = r"[\d,]+(?:\.\d)?"
KINDS = ("mmap", "munmap", "mremap", "mprotect", "brk", "madvise", "futex_wait")
TIMED = ("mmap", "munmap", "mremap", "mprotect", "brk", "madvise", "futex_lock")
TIME = r"[\d.]+ m?s"  # units.time_text: 12.3 ms, 1.50 s
SHIM = ("mmap", "munmap", "madvise", "mprotect", "mremap")  # seen through the PLT
PAGE, LINE = 4096, 64


def _n(text: str) -> float:
    return float(text.replace(",", ""))


def _near(text: str, value: float) -> bool:
    """A count's text says this value: to its whole number, or its one decimal."""
    step = 0.05 if "." in text else 0.5
    return abs(_n(text) - value) <= step + 1e-9


def _percent_near(text: str, value: float, decimals: int) -> bool:
    return abs(float(text) - 100 * value) <= 0.5 * 10**-decimals + 1e-9


def _apart(a: float, b: float) -> bool:
    """docs/profiler.md: counts 1.5x apart or more, and 10 or more in either."""
    hi, lo = max(a, b), min(a, b)
    return hi >= 10 and hi >= 1.5 * max(lo, 1.0)


@st.composite
def profiles(draw: st.DrawFn, name: str) -> AllocatorProfile:
    counts = st.sampled_from((0.0, 0.4, 1.0, 6.0, 9.6, 10.0, 14.0, 27.0, 463.0, 17_761.0))
    medians = st.sampled_from((None, 20.0, 27.0, 40.0, 54.0, 81.0, 300.0))
    paths = {
        p: PathStats(calls=100, samples=100, median=m, p90=m, p99=m)
        for p in profile.PATHS
        for m in [draw(medians)]
    }
    memory: dict[str, int] = {}
    if draw(st.booleans()):
        pages = draw(st.integers(1, 400))
        live = draw(st.integers(pages * PAGE // 8, pages * PAGE))
        lines = draw(st.integers(max(1, -(-live // LINE)), max(1, -(-live // LINE)) * 2))
        memory = {
            "peak_layout_bytes": live,
            "peak_layout_blocks": 10,
            "peak_layout_pages": pages,
            "peak_layout_lines": lines,
            "peak_layout_shared_lines": draw(st.sampled_from((0, 1, 9, 10, 15, 40, lines))),
        }
    lock_counts = st.sampled_from((0, 3, 30, 12_345))
    seconds = st.sampled_from((0.0, 0.0004, 0.001, 0.0099, 0.01, 0.015, 0.0151, 0.3, 2.5, 12.0))
    return AllocatorProfile(
        allocator=name,
        paths=paths,
        calls={},
        new=draw(st.sampled_from((0, 5, 1000))),
        reuse=draw(st.sampled_from((0, 7, 99_000))),
        syscalls={n: {"in_calls": draw(st.sampled_from((0, 5, 10, 30, 1000)))} for n in SHIM},
        visible=draw(st.frozensets(st.sampled_from(SHIM))),
        locks={k: draw(lock_counts) for k in ("contended", "trylock_failed", "wait_cycles")},
        time_share=draw(st.sampled_from((None, 0.0, 0.017, 0.5))),
        threads=1,
        memory=memory,
        processes=1,
        hw="",
        visibility="",
        kernel=(
            {k: draw(counts) for k in KINDS if draw(st.booleans())} if draw(st.booleans()) else {}
        ),
        times={k: draw(seconds) for k in TIMED} if draw(st.booleans()) else {},
    )


# A rule: a pattern for one finding (after "NAME: "), and its check given the match, the
# profile it is about and the baseline (None: the baseline's own findings).
Rule = tuple[str, re.Pattern[str], Callable[..., bool]]


def _reuse(m: re.Match[str], s: AllocatorProfile, _b: object) -> bool:
    return _percent_near(m["p"], s.reuse / (s.new + s.reuse), 1)


def _share(m: re.Match[str], s: AllocatorProfile, _b: object) -> bool:
    return s.time_share is not None and _percent_near(m["p"], s.time_share, 1)


def _cycles(m: re.Match[str], s: AllocatorProfile, b: AllocatorProfile) -> bool:
    p = m["path"].replace(" ", "_")
    mine, theirs = s.paths[p].median, b.paths[p].median
    return (
        mine is not None
        and theirs is not None
        and m["base"] == b.allocator
        and abs(float(m["r"]) - mine / theirs) <= 0.05 + 1e-9
        and _near(m["a"], mine)
        and _near(m["b"], theirs)
    )


def _kernel(m: re.Match[str], s: AllocatorProfile, b: AllocatorProfile) -> bool:
    kind = m["kind"].replace(" ", "_")
    return _calls_said(m, s.kernel.get(kind, 0.0), b.kernel.get(kind, 0.0), b)


def _shim(m: re.Match[str], s: AllocatorProfile, b: AllocatorProfile, runs: int) -> bool:
    mine, theirs = (p.syscalls[m["kind"]]["in_calls"] / runs for p in (s, b))
    return _calls_said(m, mine, theirs, b)


def _calls_said(m: re.Match[str], mine: float, theirs: float, b: AllocatorProfile) -> bool:
    """ "N kind call(s) per run vs M for base": both counts, the noun's number, the base."""
    plural = m["n"] != "1"
    return (
        m["base"] == b.allocator
        and _near(m["n"], mine)
        and _near(m["m"], theirs)
        and (m["s"] == "s") == plural
    )


def _seconds(text: str) -> float:
    value, unit = text.split()
    return float(value) / (1000 if unit == "ms" else 1)


def _time_near(text: str, value: float) -> bool:
    """A time's text says this value, to its three significant digits."""
    said = _seconds(text)
    digits = text.split()[0]
    step = 10.0 ** -len(digits.partition(".")[2]) / (1000 if text.endswith(" ms") else 1)
    return abs(said - value) <= step / 2 + 1e-12


def _times(m: re.Match[str], s: AllocatorProfile, b: AllocatorProfile) -> bool:
    kind = "futex_lock" if m["what"] == "futex lock waits" else m["what"].removesuffix(" calls")
    return (
        m["base"] == b.allocator
        and kind in TIMED
        and _time_near(m["a"], s.times[kind])
        and _time_near(m["b"], b.times[kind])
    )


def _use(m: re.Match[str], s: AllocatorProfile, b: AllocatorProfile) -> bool:
    unit = PAGE if m["what"] == "page" else LINE
    held = "peak_layout_pages" if m["what"] == "page" else "peak_layout_lines"
    mine = s.memory["peak_layout_bytes"] / (s.memory[held] * unit)
    theirs = b.memory["peak_layout_bytes"] / (b.memory[held] * unit)
    return (
        m["base"] == b.allocator
        and _percent_near(m["a"], mine, 0)
        and _percent_near(m["b"], theirs, 0)
    )


def _shared(m: re.Match[str], s: AllocatorProfile, b: AllocatorProfile) -> bool:
    return (
        m["base"] == b.allocator
        and _near(m["a"], s.memory["peak_layout_shared_lines"])
        and _near(m["b"], b.memory["peak_layout_shared_lines"])
    )


def _locks(m: re.Match[str], s: AllocatorProfile, _b: object, runs: int) -> bool:
    keys = ("contended", "trylock_failed", "wait_cycles")
    return all(_near(m[g], s.locks[k] / runs) for g, k in zip("cfw", keys, strict=True))


RULES: tuple[Rule, ...] = (
    ("reuse share", re.compile(r"(?P<p>[\d.]+)% of allocations reuse an address"), _reuse),
    (
        "time share",
        re.compile(r"~(?P<p>[\d.]+)% of its threads' time inside the allocator \(estimated\)"),
        _share,
    ),
    (
        "cycles against the baseline",
        re.compile(
            r"(?P<r>[\d.]+)x the (?P<path>[a-z ]+) cycles of (?P<base>\S+) "
            rf"\(median (?P<a>{NUMBER}) vs (?P<b>{NUMBER})\)"
        ),
        _cycles,
    ),
    (
        "the kernel's count",
        re.compile(
            rf"(?P<n>{NUMBER}) (?P<kind>[a-z ]+) call(?P<s>s?) per run vs (?P<m>{NUMBER}) "
            r"for (?P<base>\S+) \(the kernel's count\)"
        ),
        _kernel,
    ),
    (
        "the shim's count",
        re.compile(
            rf"(?P<n>{NUMBER}) (?P<kind>[a-z]+) call(?P<s>s?) per run vs (?P<m>{NUMBER}) "
            r"for (?P<base>\S+)"
        ),
        _shim,
    ),
    (
        "the kernel's timing",
        re.compile(
            rf"(?P<a>{TIME}) inside (?P<what>[a-z ]+) per run vs (?P<b>{TIME}) for "
            r"(?P<base>\S+) \(the kernel's timing\)"
        ),
        _times,
    ),
    (
        "utilization",
        re.compile(
            r"(?P<what>page|line) utilization (?P<a>\d+)% vs (?P<b>\d+)% for (?P<base>\S+) "
            r"\(near the peak\)"
        ),
        _use,
    ),
    (
        "shared lines",
        re.compile(
            rf"(?P<a>{NUMBER}) lines shared by threads vs (?P<b>{NUMBER}) for (?P<base>\S+)"
        ),
        _shared,
    ),
    (
        "lock contention",
        re.compile(
            rf"lock contention per run: (?P<c>{NUMBER}) contended acquisitions, "
            rf"(?P<f>{NUMBER}) failed trylocks, (?P<w>{NUMBER}) cycles waiting"
        ),
        _locks,
    ),
)


def _expected(s: AllocatorProfile, b: AllocatorProfile | None, runs: int) -> set[str]:
    """The rules (and their subjects) that must be said of `s`: worked out from the
    definitions, not from the code under test."""
    out = set()
    if s.new + s.reuse:
        out.add("reuse share")
    if s.time_share is not None:
        out.add("time share")
    if s.locks["contended"] + s.locks["trylock_failed"]:
        out.add("lock contention")
    if b is None:
        return out
    for p in profile.PATHS:
        mine, theirs = s.paths[p].median, b.paths[p].median
        if mine and theirs and max(mine / theirs, theirs / mine) >= 1.5:
            out.add(f"cycles against the baseline {p.replace('_', ' ')}")
    if s.kernel and b.kernel:
        out |= {
            f"the kernel's count {k.replace('_', ' ')}"
            for k in KINDS
            if _apart(s.kernel.get(k, 0.0), b.kernel.get(k, 0.0))
        }
    else:  # the shim's counts stand in, of calls both make through the PLT
        for n in set(SHIM) & s.visible & b.visible:
            mine, theirs = s.syscalls[n]["in_calls"], b.syscalls[n]["in_calls"]
            if mine != theirs and max(mine, theirs) >= 10 * runs:
                out.add(f"the shim's count {n}")
    if s.times and b.times:  # docs/profiler.md: 1.5x apart, and 10 ms a run in either
        out |= {
            f"the kernel's timing {k}"
            for k in TIMED
            if _apart(s.times[k] * 1000, b.times[k] * 1000)
        }
    mine, theirs = s.memory, b.memory
    if mine and theirs:
        for what, unit, held in (("page", PAGE, "pages"), ("line", LINE, "lines")):
            use = [
                m["peak_layout_bytes"] / (m[f"peak_layout_{held}"] * unit) for m in (mine, theirs)
            ]
            if abs(use[0] - use[1]) >= 0.10:
                out.add(f"utilization {what}")
        if _apart(mine["peak_layout_shared_lines"], theirs["peak_layout_shared_lines"]):
            out.add("shared lines")
    return out


def _read(finding: str, s: AllocatorProfile, b: AllocatorProfile | None, runs: int) -> str:
    """The rule (and its subject) a finding is read by, after its numbers are checked."""
    head, _, said = finding.partition(": ")
    assert head == s.allocator, f"a finding about another allocator: {finding!r}"
    for name, pattern, check in RULES:
        m = pattern.fullmatch(said)
        if m is None:
            continue
        args = (m, s, b, runs) if check in (_locks, _shim) else (m, s, b)
        assert check(*args), f"{name}: its numbers are not the profile's: {finding!r}"
        subject = {"cycles against the baseline": "path", "the kernel's count": "kind"}
        subject["the shim's count"] = "kind"
        if name == "the kernel's timing":
            what = m["what"]
            return f"{name} {'futex_lock' if what == 'futex lock waits' else what.split()[0]}"
        key = subject.get(name) or ("what" if name == "utilization" else "")
        return f"{name} {m[key]}" if key else name
    raise AssertionError(f"a finding no rule reads: {finding!r}")


@settings(max_examples=400, deadline=None)
@given(profiles("glibc"), profiles("mimalloc"), st.sampled_from((1, 3)))
def test_every_finding_says_its_profile(
    base: AllocatorProfile, other: AllocatorProfile, runs: int
) -> None:
    """Caught: a number that is not the profile's (a ratio inverted, a per-run count not
    divided, a baseline misnamed), a singular on a plural, a finding withheld where its
    condition holds, a finding said where it does not, a sentence no rule reads."""
    said = profile.findings([base, other], "glibc", runs)
    for s, b in ((base, None), (other, base)):
        mine = [f for f in said if f.startswith(f"{s.allocator}: ")]
        read = [_read(f, s, b, runs) for f in mine]
        assert len(read) == len(set(read)), f"a finding said twice: {mine}"
        assert set(read) == _expected(s, b, runs), f"{s.allocator}: said {read}"


KERNEL = "system calls per run, the kernel's count"  # the kernel rows' section begins so
NEAR = "layout near the peak"
INSIDE = "time inside them per run"


def _cells(rows: Sequence[profile_rows.Row], section: str, label: str) -> list[str]:
    return next(c for sect, name, c in rows if sect.startswith(section) and name == label)


@settings(max_examples=200, deadline=None)
@given(profiles("glibc"), profiles("mimalloc"))
def test_the_tables_layout_and_kernel_cells_say_their_values(
    base: AllocatorProfile, other: AllocatorProfile
) -> None:
    """Caught: a utilization over the wrong unit, pages and lines swapped, a shared share
    not of the lines, a kernel cell of another kind, a count shown where none was made."""
    table = profile_rows.rows([base, other], "glibc")
    for i, s in enumerate((base, other)):
        m = s.memory
        page, line, shared = (
            _cells(table, NEAR, label)[i]
            for label in ("page utilization", "line utilization", "lines shared by threads")
        )
        if not m:
            assert page == line == shared == "n/a"
            continue
        for text, held, unit in ((page, "pages", PAGE), (line, "lines", LINE)):
            got = re.fullmatch(rf"(?P<p>\d+)% of (?P<n>{NUMBER}) {held}", text)
            assert got, text
            n = m[f"peak_layout_{held}"]
            assert _percent_near(got["p"], m["peak_layout_bytes"] / (n * unit), 0), text
            assert _near(got["n"], n), text
        got = re.fullmatch(rf"(?P<n>{NUMBER}) \((?P<p>[\d.]+)%\)", shared)
        assert got, shared
        assert _near(got["n"], m["peak_layout_shared_lines"]), shared
        lines = m["peak_layout_lines"]
        assert _percent_near(got["p"], m["peak_layout_shared_lines"] / lines, 1), shared
    for kind in TIMED:
        label = "futex lock waits" if kind == "futex_lock" else f"{kind} calls"
        shown = any(s.times.get(kind) for s in (base, other))
        for s, cell in _row(table, INSIDE, label, shown, (base, other), lambda s: bool(s.times)):
            got = re.fullmatch(rf"(?P<t>{TIME})(?: \((?P<per>[\d,.]+) µs a call\))?", cell)
            assert got and _time_near(got["t"], s.times[kind]), cell
            n = s.kernel.get(kind, 0.0)
            assert (got["per"] is not None) == bool(n), cell
            if n:
                assert abs(_n(got["per"]) - s.times[kind] / n * 1e6) <= 0.05 + 1e-9, cell
    for label, kinds in profile_rows.KERNEL_ROWS:
        shown = any(s.kernel.get(k) for s in (base, other) for k in kinds)
        for s, cell in _row(table, KERNEL, label, shown, (base, other), lambda s: bool(s.kernel)):
            parts = cell.split(" / ")
            assert len(parts) == len(kinds), cell
            assert all(_near(t, s.kernel.get(k, 0.0)) for t, k in zip(parts, kinds, strict=True))


def _row(
    table: Sequence[profile_rows.Row],
    section: str,
    label: str,
    shown: bool,
    profiles: Sequence[AllocatorProfile],
    has: Callable[[AllocatorProfile], bool],
) -> list[tuple[AllocatorProfile, str]]:
    """One row's cells of the profiles that have its values: the row is there exactly
    when `shown`, and a profile without them (`has`) says n/a."""
    present = [n for sect, n, _ in table if sect.startswith(section) and n == label]
    assert bool(present) == shown, f"{label}: shown {bool(present)}, measured {shown}"
    if not shown:
        return []
    out = []
    for s, cell in zip(profiles, _cells(table, section, label), strict=True):
        if has(s):
            out.append((s, cell))
        else:
            assert cell == "n/a", cell
    return out


def test_the_checker_catches_a_wrong_finding() -> None:
    """The checker is not vacuous: a finding with its counts swapped fails it."""
    base = _one("glibc", kernel={"madvise": 99_501.0}, reuse=5)
    other = _one("glibc:keep", kernel={"madvise": 1.0}, reuse=5)
    said = profile.findings([base, other], "glibc")
    finding = "glibc:keep: 1 madvise call per run vs 99,501 for glibc (the kernel's count)"
    assert finding in said
    _read(finding, other, base, 1)
    swapped = "glibc:keep: 99,501 madvise calls per run vs 1 for glibc (the kernel's count)"
    try:
        _read(swapped, other, base, 1)
    except AssertionError:
        return
    raise AssertionError("a swapped count was read as true")


def _one(name: str, **fields: object) -> AllocatorProfile:
    paths = {p: PathStats(1, 1, None, None, None) for p in profile.PATHS}
    blank = AllocatorProfile(
        allocator=name,
        paths=paths,
        calls={},
        new=0,
        reuse=0,
        syscalls={},
        locks={"contended": 0, "trylock_failed": 0, "wait_cycles": 0},
        time_share=None,
        threads=1,
        memory={},
        processes=1,
        hw="",
        visibility="",
    )
    return dataclasses.replace(blank, **fields)  # type: ignore[arg-type]
