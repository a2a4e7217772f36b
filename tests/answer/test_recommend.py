"""The recommendation: the answer block on comparisons whose truth is known."""

from __future__ import annotations

import dataclasses
import random

from allocmark import labels, stats
from allocmark.answer import analyze, findings, recommend
from allocmark.model import RunStatus, StoredRun
from allocmark.report import answer
from tests.fakes import stored

BLOCKS = 12  # enough for the exact test at Holm's alpha/8 (2^-11 < 0.05/8)


def _runs(
    allocator: str, time: float, rss: int, workload: str = "churn", **kw: object
) -> list[StoredRun]:
    rng = random.Random(f"{allocator}/{workload}")
    return [
        stored(
            allocator,
            time * rng.uniform(0.99, 1.01),
            rss=round(rss * rng.uniform(0.999, 1.001)),
            workload=workload,
            rep=b,
            **kw,
        )  # type: ignore[arg-type]
        for b in range(BLOCKS)
    ]


def _comparison(
    *sets: list[StoredRun], partial: frozenset[str] = frozenset(), **extra: object
) -> analyze.Comparison:
    runs = [r for s in sets for r in s]
    names = list(dict.fromkeys(r.allocator for r in runs))
    comp = analyze.compare(runs, names, "glibc")
    return dataclasses.replace(comp, partial=partial or comp.partial, **extra)  # type: ignore[arg-type]


def test_the_fastest_and_the_smallest_are_named_with_their_trade_off() -> None:
    comp = _comparison(
        _runs("glibc", 1.0, 10000),
        _runs("fast", 0.6, 12000),
        _runs("small", 1.3, 7000),
        _runs("worse", 1.5, 13000),
    )
    (a,) = recommend.answers(comp)
    assert a.fastest is not None and a.fastest.allocator == "fast"
    assert a.smallest is not None and a.smallest.allocator == "small"
    assert [c.allocator for c in a.front] == ["fast", "glibc", "small"]
    assert [c.allocator for c in a.others] == ["worse"]
    lines = answer.blocks([a])[0].lines
    assert lines[0].startswith("Use fast for time (1.6") and ", small for memory (" in lines[0]
    assert lines[1].startswith("for time: fast: 1.6") and "× faster" in lines[1]
    assert "peak RSS +20.0% [+19.9%–+20.1%]" in lines[1]
    assert lines[2].startswith("for memory: small: 1.30× slower") and "peak RSS -30.0%" in lines[2]


def test_nothing_better_keeps_the_baseline() -> None:
    comp = _comparison(_runs("glibc", 1.0, 10000), _runs("slow", 1.5, 12000))
    (a,) = recommend.answers(comp)
    assert a.fastest is None and a.smallest is None
    lines = answer.blocks([a])[0].lines
    keep = "Keep glibc: no allocator is significantly faster or smaller by more than 3%"
    assert lines[0] == keep + "."
    assert lines[1] == "for time: keep glibc: no allocator is significantly faster by more than 3%"


def test_a_failed_allocator_is_never_recommended() -> None:
    crashed = [r._replace(status=RunStatus.CRASHED) for r in _runs("boom", 0.1, 100)]
    (a,) = recommend.answers(_comparison(_runs("glibc", 1.0, 10000), crashed))
    assert a.fastest is None and a.excluded == (("boom", "its runs failed (crashed 12/12)"),)


def test_a_partial_allocator_is_refused_only_for_a_program_that_calls_what_it_lacks() -> None:
    sets = (_runs("glibc", 1.0, 10000), _runs("je", 0.5, 9000, partial=True))
    key = labels.row_key("churn", (("threads", 1),))
    lacks = {"je": ("reallocarray",)}
    calls_it = _comparison(*sets, lacks=lacks, calls={key: ("aligned_alloc", "reallocarray")})
    (a,) = recommend.answers(calls_it)
    assert a.fastest is None
    assert a.excluded == (
        (
            "je",
            "partial: it lacks reallocarray, which this program calls: "
            "glibc would serve (or free) blocks of it",
        ),
    )
    (b,) = recommend.answers(_comparison(*sets, lacks=lacks, calls={key: ("aligned_alloc",)}))
    assert b.fastest is not None and b.fastest.allocator == "je"
    (c,) = recommend.answers(_comparison(*sets, lacks=lacks))  # calls unknown
    assert c.fastest is None and "is not known" in c.excluded[0][1]


def test_too_little_data_says_inconclusive_and_how_many_blocks_would_decide() -> None:
    rng = random.Random(3)
    noisy = [stored("maybe", 0.97 * rng.uniform(0.8, 1.2), rss=10000, rep=b) for b in range(4)]
    base = [stored("glibc", rng.uniform(0.8, 1.2), rss=10000, rep=b) for b in range(4)]
    (a,) = recommend.answers(_comparison(base, noisy))
    assert [c.allocator for c in a.undecided] == ["maybe"]
    line = next(x for x in answer.blocks([a])[0].lines if x.startswith("undecided"))
    assert "(not significant)" in line and "blocks in all would decide" in line
    assert int(line.rsplit("about ", 1)[1].split()[0]) > 4
    # Nothing decided, and `maybe` could still be faster beyond the margin: the answer
    # says so, with what was measured, and never "keep glibc".
    lead = answer.lead(a)
    assert lead.startswith("Undecided after 4 blocks: no allocator is yet significantly")
    assert "Keep" not in lead and "blocks in all (about" in lead and "more) would decide" in lead
    assert answer.blocks([a])[0].lines[1] == "for time: undecided after 4 blocks (see below)"


def test_an_undecided_answer_names_the_leading_estimate() -> None:
    rng = random.Random(5)
    base = [stored("glibc", rng.uniform(0.9, 1.1), rss=10000, rep=b) for b in range(4)]
    lean = [stored("lean", 0.8 * rng.uniform(0.7, 1.3), rss=10000, rep=b) for b in range(4)]
    (a,) = recommend.answers(_comparison(base, lean))
    assert a.fastest is None and answer.contenders(a)
    assert "; leading, not significant yet: lean 1." in answer.lead(a)


def test_the_leader_gets_its_own_wait_beside_a_ratio_on_the_margin() -> None:
    """am_bignum's answer said "about 1066 blocks in all would decide" when mimalloc's
    1.23× needed a few more blocks and tbbmalloc's 1.03× (on the margin) all of them:
    the leading ratio's wait is said as its own."""
    rng = random.Random(5)
    base = [stored("glibc", rng.uniform(0.9, 1.1), rss=10000, rep=b) for b in range(4)]
    lean = [stored("lean", 0.8 * rng.uniform(0.7, 1.3), rss=10000, rep=b) for b in range(4)]
    edge = [stored("edge", 0.98 * rng.uniform(0.8, 1.2), rss=10000, rep=b) for b in range(4)]
    (a,) = recommend.answers(_comparison(base, lean, edge))
    lead = answer.lead(a)
    clear = next(c.time for c in a.undecided if c.allocator == "lean")
    every = max(c.time.blocks_to_decide for c in a.undecided if c.time)
    assert clear is not None and clear.blocks_to_decide < every
    assert f"about {clear.blocks_to_decide} blocks in all (about " in lead
    assert "would decide the leading one; " in lead
    assert f"about {every} blocks in all" in lead and lead.endswith("would decide every one.")


def test_over_all_workloads_comes_first_from_the_geometric_means() -> None:
    comp = _comparison(
        _runs("glibc", 1.0, 10000),
        _runs("fast", 0.5, 10000),
        _runs("glibc", 2.0, 10000, workload="larson"),
        _runs("fast", 1.0, 10000, workload="larson"),
    )
    found = answer.blocks(recommend.answers(comp))
    assert [b.scope for b in found] == [recommend.OVERALL, "churn", "larson"]
    assert found[0].lines[0].startswith("Use fast for time: 2.0")
    assert found[0].lines[1].startswith("for time: fast: 2.0")


def test_the_time_against_rss_picture_has_a_point_per_allocator_and_row() -> None:
    from allocmark.report import charts, plots

    comp = _comparison(
        _runs("glibc", 1.0, 10000),
        _runs("fast", 0.6, 12000),
        _runs("glibc", 1.0, 10000, workload="larson"),
        _runs("fast", 0.7, 9000, workload="larson"),
    )
    (scatter,) = plots.drawn(charts.time_vs_rss(comp, findings.of(comp)))
    try:
        axes = [ax for ax in scatter.figure.axes if ax.get_visible()]
        assert [ax.get_title() for ax in axes] == ["churn", "larson"]
        assert all(len(ax.containers) == 2 for ax in axes)  # glibc and fast, with bars
    finally:
        plots.close([scatter])


def test_a_ten_allocator_report_fits_120_columns() -> None:
    import io

    from rich.console import Console

    from allocmark.report import table

    rng = random.Random(5)
    names = ["glibc", *(f"allocator{i}" for i in range(9))]
    rows = ("churn", "larson", "xthread", "samethread", "prodcons")
    sets = [
        _runs(a, rng.uniform(0.5, 2), rng.randrange(5000, 20000), workload=w)
        for a in names
        for w in rows
    ]
    comp = _comparison(*sets)
    console = Console(file=io.StringIO(), width=120, record=True)
    table.comparison(console, comp, findings.of(comp))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "allocator8" in text and "┃ allocator" in text  # transposed: a row per allocator


def test_a_difference_inside_the_margin_is_the_same_and_recommends_nothing() -> None:
    # 1 % faster and 1 % smaller, every block: significant, and too small to matter.
    comp = _comparison(_runs("glibc", 1.0, 10000), _runs("twin", 0.99, 9900))
    cell = comp.rows[0].cells["time_s"]["twin"]
    assert cell.ratio is not None and cell.ratio.high < 1  # the interval excludes 1 ...
    assert cell.verdict is stats.Verdict.SAME  # ... and lies inside ±3 %: same
    (a,) = recommend.answers(comp)
    assert a.fastest is None and a.smallest is None and a.others == ()
    assert (
        answer.blocks([a])[0]
        .lines[0]
        .startswith(
            "Keep glibc: no allocator is significantly faster or smaller by more than "
            "3% (at most 1.0"
        )
    )


def test_the_recommended_allocator_is_never_called_dominated() -> None:
    # `fast` is picked for time; `small` for memory; neither may appear as dominated,
    # and `both` (faster and smaller than glibc, clearly beaten by neither) is on the front.
    comp = _comparison(
        _runs("glibc", 1.0, 10000),
        _runs("fast", 0.5, 10500),
        _runs("small", 0.98, 6000),
        _runs("both", 0.7, 8000),
        _runs("worse", 1.5, 13000),
    )
    (a,) = recommend.answers(comp)
    picked = {a.fastest.allocator if a.fastest else "", a.smallest.allocator if a.smallest else ""}
    assert picked == {"fast", "small"}
    assert not picked & {c.allocator for c in a.others}
    assert [c.allocator for c in a.others] == ["worse"]
    assert "both" in {c.allocator for c in a.front}
    dominated = [x for x in answer.blocks([a])[0].lines if x.startswith("dominated")]
    assert dominated == [
        "dominated (another allocator beats each on one axis without losing on the other): worse"
    ]


def test_two_winners_not_clearly_apart_are_a_tie() -> None:
    comp = _comparison(
        _runs("glibc", 1.0, 10000),
        _runs("one", 0.60, 10000),
        _runs("two", 0.605, 10000),
        _runs("three", 0.8, 10000),
    )
    (a,) = recommend.answers(comp)
    assert a.fastest is not None and a.fastest.allocator == "one"
    assert [c.allocator for c in a.tied_time] == ["two"]  # 1 % apart: within the margin
    assert "two" not in {c.allocator for c in a.others}  # a tie is never called dominated
    assert answer.blocks([a])[0].lines[0].endswith("; a tie for time: two.")


def test_two_winners_are_set_apart_by_their_own_duel_not_their_intervals() -> None:
    # `one` and `two` share each block's noise, glibc has its own: their intervals to
    # glibc are wide and overlap, yet `one` is 8 % faster than `two` in every block.
    rng = random.Random(5)
    runs = []
    for b in range(BLOCKS):
        shared, own = rng.lognormvariate(0, 0.2), rng.lognormvariate(0, 0.2)
        runs += [
            stored("glibc", 1.0 * own, rss=1000, rep=b),
            stored("one", 0.60 * shared, rss=1000, rep=b),
            stored("two", 0.65 * shared, rss=1000, rep=b),
        ]
    comp = analyze.compare(runs, ["glibc", "one", "two"], "glibc")
    cells = comp.rows[0].cells["time_s"]
    assert cells["two"].ratio.low < cells["one"].ratio.high  # type: ignore[union-attr]
    (a,) = recommend.answers(comp)
    assert a.fastest is not None and a.fastest.allocator == "one"
    assert a.tied_time == ()


def test_a_debugging_allocator_is_never_recommended_however_fast() -> None:
    comp = _comparison(
        _runs("glibc", 1.0, 10000), _runs("efence", 0.5, 9000), roles={"efence": "debug"}
    )
    for a in recommend.answers(comp):
        assert a.fastest is None and a.smallest is None
        assert a.excluded == (
            ("efence", "a debugging allocator (hunts heap bugs; not for speed or memory)"),
        )


def test_versions_of_a_family_are_drawn_in_version_order_with_debian_apart() -> None:
    from allocmark.allocators import lineage
    from allocmark.report import plots, versions

    names = {"jemalloc@5.3.0": 0.8, "jemalloc@4.5.0": 0.9, "jemalloc": 0.85, "jemalloc@5.1.0": 0.7}
    comp = _comparison(
        _runs("glibc", 1.0, 10000),
        *(_runs(n, t, 9000) for n, t in names.items()),
        lineages={
            "jemalloc@5.3.0": lineage.Lineage("jemalloc", "5.3.0", "crate"),
            "jemalloc@4.5.0": lineage.Lineage("jemalloc", "4.5.0", "crate"),
            "jemalloc@5.1.0": lineage.Lineage("jemalloc", "5.1.0", "crate"),
            "jemalloc": lineage.Lineage("jemalloc", "5.3.0", "libjemalloc2"),
        },
    )
    (plot,) = plots.drawn(versions.charts(comp, findings.of(comp)))
    try:
        assert plot.name == "versions-jemalloc"
        time_ax = plot.figure.axes[0]
        assert [t.get_text() for t in time_ax.get_xticklabels()] == ["4.5.0", "5.1.0", "5.3.0"]
        crate, debian = time_ax.containers  # crate builds joined, Debian's apart
        xs, ys = crate.lines[0].get_data()
        assert list(xs) == [0, 1, 2]
        assert [round(y, 1) for y in ys] == [0.9, 0.7, 0.8]
        assert list(debian.lines[0].get_xdata()) == [2.18]
    finally:
        plots.close([plot])
    one_version = dataclasses.replace(
        comp, lineages={"jemalloc": lineage.Lineage("jemalloc", "5.3.0", "libjemalloc2")}
    )
    assert versions.charts(one_version, findings.of(one_version)) == []


def test_a_version_is_the_number_its_build_states() -> None:
    from allocmark.allocators import lineage
    from allocmark.model import AllocatorSpec

    debian = AllocatorSpec("jemalloc", package="libjemalloc2")
    assert lineage.of(debian, "5.3.0-0-g54eaed1d8b56b1aa") == lineage.Lineage(
        "jemalloc", "5.3.0", "libjemalloc2"
    )
    tbb = AllocatorSpec("tbbmalloc", package="libtbbmalloc2")
    assert lineage.of(tbb, "libtbbmalloc2 2021.8.0-2+deb12u1").version == "2021.8.0"  # type: ignore[union-attr]
    assert lineage.of(AllocatorSpec("jemalloc:nodecay"), "5.3.0") is None
    # the system's glibc is one version beside another release's (glibc@2.41)
    system = AllocatorSpec("glibc", system=True, package="libc6")
    assert lineage.of(system, "2.36") == lineage.Lineage("glibc", "2.36", "libc6")
    assert lineage.order_key("2025.05.30") < lineage.order_key("2025.06.16")
    assert lineage.order_key("4.5.0") < lineage.order_key("5.1.0") < lineage.order_key("b097fd0")


def test_every_challenger_decided_worse_but_one_keeps_the_baseline() -> None:
    """Issue 53 (realloc in the quick suite): every other allocator decided slower, one
    undecided. The sentence says what the cells support: keep the baseline, how many
    were decided worse, and the one left open with its estimate."""
    rng = random.Random(11)
    base = [stored("glibc", rng.uniform(0.8, 1.2), rss=10000, rep=b) for b in range(BLOCKS)]
    open_ = [
        stored("arena2", rng.uniform(0.8, 1.2), rss=round(9800 * rng.uniform(0.9, 1.1)), rep=b)
        for b in range(BLOCKS)
    ]
    comp = _comparison(base, open_, _runs("slow1", 3.0, 30000), _runs("slow2", 2.5, 25000))
    (a,) = recommend.answers(comp)
    assert [c.allocator for c in answer.contenders(a)] == ["arena2"]
    lead = answer.lead(a)
    assert lead.startswith(
        "Keep glibc so far: 2 of 3 alternatives decided slower and larger; undecided: arena2 ("
    ), lead
    assert "Undecided" not in lead and "would decide" in lead


def _noisy(allocator: str, time: float, blocks: int) -> list[StoredRun]:
    """Blocks whose times vary 5 % (log-normal), the same draws for a name."""
    rng = random.Random(f"{allocator}/6")
    return [
        stored(allocator, time * rng.lognormvariate(0, 0.05), rss=10000, rep=b)
        for b in range(blocks)
    ]


def _looked(blocks: int) -> analyze.Comparison:
    runs = [*_noisy("glibc", 1.0, blocks), *_noisy("fast", 0.9, blocks)]
    return analyze.compare(runs, ["glibc", "fast"], "glibc", sequential=True, finished=True)


def test_a_winner_decided_only_for_a_verdict_is_not_yet_recommended() -> None:
    """6 blocks of 10 % at 5 % noise: faster at the verdicts' 5 %, not at the 1 % a use
    needs (issue 67: a "use" is wrong at most 1 % of the time). The answer says so with
    the blocks a use needs, never "keep glibc", and the campaign is not done."""
    comp = _looked(6)
    (row,) = comp.rows
    cell = row.cells["time_s"]["fast"]
    assert cell.verdict is stats.Verdict.BETTER and cell.firm is not None
    assert stats.verdict(cell.firm, comp.margin) is stats.Verdict.UNDECIDED
    assert stats.Verdict.UNDECIDED in analyze.decisions(row, "glibc", comp.margin)
    (a,) = recommend.answers(comp)
    assert a.fastest is None and [c.allocator for c in a.pending_time] == ["fast"]
    lines = answer.blocks([a])[0].lines
    assert lines[0].startswith("No recommendation yet: fast: 1.")
    assert "decided at a verdict's 5%, not yet at the 1% a recommendation needs" in lines[0]
    wait = a.pending_time[0].time.blocks_to_decide  # type: ignore[union-attr]
    assert wait is not None and wait > 6 and f"; about {wait} blocks in all" in lines[0]
    assert lines[1].startswith("for time: no recommendation yet: fast: 1.")
    assert not any("keep glibc" in line.lower() for line in lines[:2])


def test_a_winner_decided_at_the_level_a_use_needs_is_used() -> None:
    comp = _looked(24)
    (a,) = recommend.answers(comp)
    assert a.fastest is not None and a.fastest.allocator == "fast" and a.pending_time == ()
    assert a.fastest.time is not None and a.fastest.time.firm is stats.Verdict.BETTER
    assert answer.lead(a).startswith("Use fast for time: 1.1")
    (row,) = comp.rows
    assert stats.Verdict.UNDECIDED not in analyze.decisions(row, "glibc", comp.margin)


def test_a_use_over_all_workloads_is_held_to_the_same_level() -> None:
    """Two rows each decided faster for a verdict only: pooled, the use is pending too."""
    runs = [
        r._replace(workload=w)
        for w in ("churn", "larson")
        for r in [*_noisy("glibc", 1.0, 6), *_noisy("fast", 0.9, 6)]
    ]
    comp = analyze.compare(runs, ["glibc", "fast"], "glibc", sequential=True, finished=True)
    overall = recommend.answers(comp)[-1]
    assert overall.scope == recommend.OVERALL
    assert overall.fastest is None
    fast = recommend.overall_positions(comp, recommend.per_row(comp))["fast"]
    assert isinstance(fast, recommend.Choice) and fast.time is not None
    assert fast.time.firm is not stats.Verdict.BETTER


def test_of_two_as_fast_the_smaller_is_used() -> None:
    """tcmalloc-minimal 1.37× faster, +284 % peak RSS, mimalloc 1.34× faster, +31 %
    (am_sets, docs/calibration.md): their duel on time is within the margin, mimalloc is
    decided smaller, so "use tcmalloc" would recommend a dominated allocator."""
    comp = _comparison(
        _runs("glibc", 1.0, 10000), _runs("big", 0.60, 30000), _runs("lean", 0.61, 11000)
    )
    (a,) = recommend.answers(comp)
    assert a.fastest is not None and a.fastest.allocator == "lean"
    assert [c.allocator for c in a.tied_time] == ["big"]
    assert answer.lead(a).startswith("Use lean for time: 1.6")
    assert "big" not in {c.allocator for c in a.others}  # named in the tie, not dominated
