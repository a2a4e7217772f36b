"""analyze: stored runs into a Comparison of rows, cells, ratios and verdicts."""

from __future__ import annotations

import re

import pytest

from allocmark import stats
from allocmark.answer import analyze
from allocmark.model import RunStatus
from allocmark.report import fmt
from tests.fakes import stored

P1 = (("threads", 1),)
P2 = (("threads", 2),)


def comparison() -> analyze.Comparison:
    runs = [
        *(stored("glibc", w, rss=2048) for w in (1.0, 1.2, 1.1)),
        *(stored("je", w, rss=1024, partial=True) for w in (0.5, 0.6, 0.55)),
        *(stored("glibc", w, params=P2) for w in (2.0, 2.0, 2.0)),
        stored("je", 1.0, params=P2),
        stored("je", 0.0, params=P2, status=RunStatus.CRASHED),
        stored("je", 1.0, params=P2),
    ]
    return analyze.compare(runs, ["glibc", "je"], "glibc")


def test_medians_ratios_and_labels() -> None:
    comp = comparison()
    row = comp.rows[0]
    assert row.label == "churn threads=1"
    cell = row.cells["time_s"]["je"]
    assert cell.summary is not None and cell.summary.median == pytest.approx(0.55)
    assert cell.ratio is not None and cell.ratio.significant
    assert cell.ratio.value == pytest.approx(0.5, rel=0.01)
    assert row.cells["peak_rss_kib"]["je"].ratio.value == pytest.approx(0.5)  # type: ignore[union-attr]
    assert comp.partial == frozenset({"je"})
    assert comp.metrics == ("time_s", "peak_rss_kib")  # no overhead or throughput data


def test_a_cell_with_a_crash_shows_no_number() -> None:
    cell = comparison().rows[1].cells["time_s"]["je"]
    assert cell.summary is None and cell.ratio is None
    assert cell.state == "crashed 1/3"
    assert fmt.cell("time_s", cell) == "CRASHED 1/3"


def test_geomean_uses_only_rows_with_numbers() -> None:
    geo = comparison().geomean["time_s"]
    assert geo["glibc"] is not None and geo["glibc"].value == pytest.approx(1.0)
    assert geo["je"] is not None and geo["je"].n == 1


def test_speedup_inverts_time_ratios() -> None:
    runs = [stored("glibc", 1.0), stored("glibc", 1.0), stored("je", 0.5), stored("je", 0.5)]
    comp = analyze.compare(runs, ["glibc", "je"], "glibc", speedup=True)
    assert comp.rows[0].cells["time_s"]["je"].ratio.value == pytest.approx(2.0)  # type: ignore[union-attr]


def test_an_undecided_ratio_is_inconclusive_with_what_it_could_detect() -> None:
    runs = [stored("glibc", w) for w in (1.0, 1.1, 0.9)] + [
        stored("je", w) for w in (1.05, 0.95, 1.0)
    ]
    cell = analyze.compare(runs, ["glibc", "je"], "glibc").rows[0].cells["time_s"]["je"]
    assert cell.verdict is stats.Verdict.UNDECIDED
    assert re.fullmatch(r"undecided \(detects ≥\d+%\)", fmt.verdict("time_s", cell))
    assert "≈" not in fmt.cell("time_s", cell)


def test_loose_cells_are_those_whose_ratio_is_wider_than_the_target() -> None:
    runs = [stored("glibc", w, rep=i) for i, w in enumerate((1.0, 2.0, 3.0, 1.5, 2.5, 2.0))] + [
        stored("je", w, rep=i) for i, w in enumerate((1.0, 2.2, 2.7, 1.6, 2.4, 2.1))
    ]
    comp = analyze.compare(runs, ["glibc", "je"], "glibc", margin=0.02)
    cell = comp.rows[0].cells["time_s"]["je"]
    assert cell.loose and cell.ratio is not None and cell.ratio.half_width > 0.02
    assert (
        not analyze.compare(runs, ["glibc", "je"], "glibc", margin=0.99)
        .rows[0]
        .cells["time_s"]["je"]
        .loose
    )


def test_blocks_are_paired_so_that_what_a_block_shares_cancels() -> None:
    # The machine's speed changes from block to block by up to 8x; within a block
    # je is always half of glibc. Paired: exactly 0.5 and "faster"; Welch on the same
    # values could not tell.
    speed = [1.0, 6.0, 1.5, 5.0, 2.0, 8.0]  # six blocks: the fewest an exact verdict needs
    runs = [stored("glibc", s, rep=i) for i, s in enumerate(speed)] + [
        stored("je", s / 2 * (1.01 if i % 2 else 0.99), rep=i) for i, s in enumerate(speed)
    ]
    cell = analyze.compare(runs, ["glibc", "je"], "glibc").rows[0].cells["time_s"]["je"]
    assert cell.ratio is not None and cell.ratio.paired
    assert cell.ratio.value == pytest.approx(0.5, rel=0.01)
    assert cell.verdict is stats.Verdict.BETTER and fmt.verdict("time_s", cell) == "faster"
    welch = analyze.compare(runs, ["glibc", "je"], "glibc", paired=False).rows[0]
    assert welch.cells["time_s"]["je"].verdict is stats.Verdict.UNDECIDED


def test_a_duration_bound_workload_has_no_time_result() -> None:
    fixed = (("duration_ms", 300),)
    runs = [
        stored(
            a,
            0.3,
            params=fixed,
            workload="larson",
            rep=i,
            metrics={"ops_per_s": 1e6 * (2 if a == "je" else 1)},
        )
        for i in range(3)
        for a in ("glibc", "je")
    ]
    comp = analyze.compare(runs, ["glibc", "je"], "glibc", fixed_time={"larson": "duration_ms"})
    time_cell = comp.rows[0].cells["time_s"]["je"]
    assert time_cell.state == "fixed" and time_cell.ratio is None
    assert comp.geomean["time_s"]["je"] is None  # out of the time geomean
    assert comp.rows[0].cells["ops_per_s"]["je"].ratio.value == pytest.approx(2.0)  # type: ignore[union-attr]
    assert "FIXED" in fmt.legend(comp)
    # duration_ms = 0 makes larson deterministic: then its time is a result.
    assert not analyze.time_is_fixed({"larson": "duration_ms"}, "larson", (("duration_ms", 0),))


def test_missing_cell() -> None:
    comp = analyze.compare([stored("glibc", 1.0)], ["glibc", "je"], "glibc")
    assert comp.rows[0].cells["time_s"]["je"].state == "missing"
    assert comp.geomean["time_s"]["je"] is None
