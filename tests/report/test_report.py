"""Statistics against hand-checked values, analysis and every export format."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
import random
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from scipy import special

from allocmark import stats
from allocmark.answer import analyze, compare
from allocmark.errors import UserError
from allocmark.model import CellRuns, RunStatus, StoredRun
from allocmark.report import csvfile, data, fmt, jsonfile, markdown, table, tryout
from allocmark.stats import batch, signedrank, student, summary
from allocmark.store import exchange
from tests.fakes import stored

P1 = (("threads", 1),)
P2 = (("threads", 2),)


# ---------------------------------------------------------------------------
# stats.py against values worked out by hand
# ---------------------------------------------------------------------------
def test_summary_and_t_interval() -> None:
    s = stats.summarize([1.0, 2.0, 3.0, 4.0, 5.0])
    assert (s.n, s.median, s.mean, s.minimum, s.maximum) == (5, 3.0, 3.0, 1.0, 5.0)
    assert s.stdev == pytest.approx(math.sqrt(2.5))
    # t(0.975, 4) = 2.776445; half-width = 2.776445 * 1.581139 / sqrt(5) = 1.963243
    assert s.ci_low == pytest.approx(3 - 1.963243, abs=1e-5)
    assert s.ci_high == pytest.approx(3 + 1.963243, abs=1e-5)
    assert s.ci_rel == pytest.approx(1.963243 / 3, abs=1e-5)
    one = stats.summarize([7.0])
    assert (one.ci_low, one.ci_high, one.ci_rel) == (7.0, 7.0, math.inf)


def test_mad_outliers() -> None:
    # median 3, deviations 2 1 0 1 97, MAD 1: only 100 has |0.6745 * dev| > 3.5
    assert stats.summarize([1.0, 2.0, 3.0, 4.0, 100.0]).outliers == 1
    assert stats.summarize([1.0, 1.0, 1.0, 1.0, 10.0]).outliers == 0  # MAD 0


def test_ratio_of_geometric_means_and_welch() -> None:
    r = stats.ratio([2.0, 2.2, 1.8], [1.0, 1.1, 0.9])
    assert r is not None
    assert r.value == pytest.approx(2.0)  # every log differs by exactly ln 2
    assert r.low < 2.0 < r.high and r.significant
    same = stats.ratio([1.0, 1.1, 0.9], [1.05, 0.95, 1.0])
    assert same is not None and not same.significant and same.low < 1 < same.high
    single = stats.ratio([2.0], [1.0])
    assert single is not None and single.value == 2.0 and not single.significant
    assert stats.ratio([], [1.0]) is None and stats.ratio([0.0, 1.0], [1.0, 1.0]) is None


def test_geomean_interval() -> None:
    g = stats.geomean([1.0, 4.0])
    assert g is not None and g.value == pytest.approx(2.0) and g.n == 2
    # logs 0 and ln 4: sd = 0.980258, t(0.975, 1) = 12.706205 -> half = 8.807
    assert math.log(g.high) - math.log(g.value) == pytest.approx(8.8074, abs=1e-3)
    assert stats.geomean([]) is None


def test_paired_ratio_and_its_interval() -> None:
    # log ratios ln 0.5, ln 0.5 * 1.1, ln 0.5 / 1.1: centre ln 0.5, sd = ln 1.1
    r = stats.paired_ratio([0.5, 0.55, 0.5 / 1.1], [1.0, 1.0, 1.0])
    assert r is not None and r.paired and r.df == 2
    assert r.value == pytest.approx(0.5)  # Hodges–Lehmann: the median Walsh average
    se = math.log(1.1) / math.sqrt(3)
    assert r.se == pytest.approx(se)
    # Three blocks: too few for any interval (fewblock.MIN_BLOCKS; the exact test's
    # share of 2.5 % needs 7).
    assert (r.low, r.high, r.half_width, r.blocks_needed) == (0.0, math.inf, math.inf, 4)
    # 80 % power, for the blocks a verdict would need: t(0.975, 2) + t(0.80, 2)
    assert r.detectable == pytest.approx(math.exp(5.363313 * se) - 1, rel=1e-5)
    # Four: Student's interval at 2.5 %.
    four = stats.paired_ratio([0.5, 0.55, 0.5 / 1.1, 0.5], [1.0] * 4)
    assert four is not None
    logs = [math.log(x) for x in (0.5, 0.55, 0.5 / 1.1, 0.5)]
    mean, sd = sum(logs) / 4, statistics.stdev(logs)
    half = student.quantile(3, 1 - 0.0125) * sd / 2
    assert (math.log(four.low), math.log(four.high)) == (
        pytest.approx(mean - half),
        pytest.approx(mean + half),
    )
    # Seven blocks: the exact interval at 2.5 % runs from the smallest to the largest
    # Walsh average; Student's lies inside it, and the two intersected are Student's.
    seven = stats.paired_ratio([0.5, 0.55, 0.5 / 1.1, 0.51, 0.49, 0.5, 0.52], [1.0] * 7)
    assert seven is not None
    _, low, high = signedrank.interval(seven.logs, 0.025)
    assert (low, high) == (pytest.approx(math.log(0.5 / 1.1)), pytest.approx(math.log(0.55)))
    assert low < math.log(seven.low) < math.log(seven.high) < high
    one = stats.paired_ratio([1.0], [2.0])
    assert one is not None and (one.value, one.low, one.high, one.df) == (0.5, 0.5, 0.5, 0)
    assert stats.paired_ratio([1.0, 0.0], [1.0, 1.0]) is None


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (1.05, 1.10, stats.Verdict.WORSE),
        (0.80, 0.90, stats.Verdict.BETTER),
        (0.99, 1.02, stats.Verdict.SAME),
        (0.90, 1.02, stats.Verdict.INCONCLUSIVE),
        (1.001, 1.02, stats.Verdict.SAME),  # significant, and inside the margin: same
        (1.001, 1.05, stats.Verdict.WORSE),  # excludes 1, not inside the margin
        (0.95, 0.999, stats.Verdict.BETTER),
    ],
)
def test_four_verdicts(low: float, high: float, expected: stats.Verdict) -> None:
    r = stats.Ratio(math.sqrt(low * high), low, high, 0.5, se=0.01, df=10)
    assert stats.verdict(r, 0.03) is expected
    flipped = {stats.Verdict.WORSE: stats.Verdict.BETTER, stats.Verdict.BETTER: stats.Verdict.WORSE}
    assert stats.verdict(r, 0.03, higher_is_better=True) is flipped.get(expected, expected)


def test_holm_judges_a_family_step_by_step() -> None:
    def r(p: float) -> stats.Ratio:  # 1.03 with the se that gives this p (t, 20 df)
        se = math.log(1.03) / float(special.stdtrit(20, 1 - p / 2))
        half = float(special.stdtrit(20, 0.975)) * se
        return stats.Ratio(1.03, 1.03 * math.exp(-half), 1.03 * math.exp(half), p, se, 20)

    # 0.001 < 0.05/3 and 0.02 < 0.05/2 are rejected; 0.3 is not, and is judged at 0.05/1.
    judged = stats.holm([r(0.3), r(0.001), r(0.02)])
    assert [x.alpha for x in judged] == pytest.approx([0.05, 0.05 / 3, 0.05 / 2])
    wide = judged[1]
    assert math.log(wide.high / wide.value) == pytest.approx(2.613 * wide.se, rel=1e-3)
    # The first not rejected stops it: 0.03 > 0.05/2, so both are judged at 0.05/2.
    judged = stats.holm([r(0.03), r(0.04)])
    assert [x.alpha for x in judged] == pytest.approx([0.025, 0.025])
    assert stats.verdict(r(0.03), 0.03) is stats.Verdict.WORSE
    assert stats.verdict(judged[0], 0.03) is stats.Verdict.INCONCLUSIVE
    assert stats.holm([r(0.5)])[0].alpha == pytest.approx(0.05)


def test_compare_judges_its_cells_as_a_family() -> None:
    # Twenty cells of noise, each compared on its own at 95 %, would flag about one;
    # judged as a family, noise flags none in 95 % of such comparisons.
    rng = random.Random(11)
    runs_old, runs_new = [], []
    for cell in range(20):
        params = (("cell", cell),)
        runs_old += [stored("je", w, params=params) for w in _sample(rng, 1.0)]
        runs_new += [stored("je", w, params=params) for w in _sample(rng, 1.0)]
    verdicts = compare.compare(
        compare.ResultSet.of_runs("a", runs_old), compare.ResultSet.of_runs("b", runs_new)
    )
    assert [v.ratio.alpha for v in verdicts if v.ratio] == [pytest.approx(0.05 / 20)] * 20
    assert not [v for v in verdicts if v.verdict in ("worse", "better")]


def test_ratio_of_ratios_adds_the_variances() -> None:
    a = stats.Ratio(1.1, 1.0, 1.2, 0.1, se=0.03, df=9)
    b = stats.Ratio(1.0, 0.9, 1.1, 0.9, se=0.04, df=9)
    r = stats.ratio_of_ratios(a, b)
    assert r is not None and r.value == pytest.approx(1.1) and r.se == pytest.approx(0.05)
    # Welch–Satterthwaite: 0.05^4 / (0.03^4/9 + 0.04^4/9)
    assert r.df == pytest.approx(0.05**4 / (0.03**4 / 9 + 0.04**4 / 9))


# ---------------------------------------------------------------------------
# compare.py: finds a real slowdown, keeps quiet about noise
# ---------------------------------------------------------------------------
def _sample(rng: random.Random, center: float, n: int = 10) -> list[float]:
    return [center * math.exp(rng.gauss(0, 0.03)) for _ in range(n)]


def _set(label: str, walls: list[float], allocator: str = "je") -> compare.ResultSet:
    return compare.ResultSet.of_runs(label, [stored(allocator, w) for w in walls])


def test_compare_detects_an_injected_20_percent_slowdown() -> None:
    rng = random.Random(7)
    old, new = _set("old", _sample(rng, 1.0)), _set("new", _sample(rng, 1.2))
    (v,) = compare.compare(old, new)
    assert v.verdict == "worse" and v.word == "slower"
    assert v.change == pytest.approx(0.2, abs=0.03)
    assert compare.failing([v], 0.05) == [v]
    assert compare.failing([v], 0.30) == []


def test_compare_does_not_flag_samples_of_one_distribution() -> None:
    flagged = 0
    for seed in range(40):
        rng = random.Random(seed)
        (v,) = compare.compare(_set("a", _sample(rng, 1.0)), _set("b", _sample(rng, 1.0)))
        flagged += v.verdict in ("worse", "better")
    assert flagged <= 5  # 5 % false positives expected: 2 of 40; 5 is far in the tail


def _campaign(label: str, speed: float, twin: float = 1.0, blocks: int = 8) -> compare.ResultSet:
    """glibc and a twin in blocks; `speed` is how slow the machine was that day."""
    rng = random.Random(label)
    runs = []
    for i in range(blocks):
        block = speed * math.exp(rng.gauss(0, 0.10))  # shared by the block's runs
        runs += [
            stored("glibc", block * math.exp(rng.gauss(0, 0.01)), rep=i),
            stored("twin", block * twin * math.exp(rng.gauss(0, 0.01)), rep=i),
        ]
    return compare.ResultSet.of_runs(label, runs, baseline="glibc")


def test_compare_with_a_control_cancels_the_machines_drift() -> None:
    # The same software, the machine 45 % slower the second time: absolute values
    # say "slower"; through the control the twin's ratio to glibc has not moved.
    old, new = _campaign("old", 1.0), _campaign("new", 1.45)
    verdicts = {v.allocator: v for v in compare.compare(old, new)}
    assert verdicts["glibc"].control and verdicts["glibc"].verdict == "control"
    assert verdicts["glibc"].ratio is not None and verdicts["glibc"].ratio.value > 1.2
    assert verdicts["twin"].verdict in ("same", "inconclusive")
    s = compare.summarize(list(verdicts.values()))
    assert (s.worse, s.better) == (0, 0) and s.drift is verdicts["glibc"]
    # Without the control in both sets the absolute comparison is all there is.
    lone = compare.ResultSet(new.label, tuple(c for c in new.cells if c.allocator == "twin"))
    assert compare.control_of(old, lone) is None


def test_compare_with_a_control_finds_a_real_change() -> None:
    old, new = _campaign("old", 1.0), _campaign("new", 1.45, twin=1.10)
    twin = next(v for v in compare.compare(old, new) if v.allocator == "twin")
    assert twin.verdict == "worse" and twin.change == pytest.approx(0.10, abs=0.03)


def test_compare_matches_two_single_allocator_sets() -> None:
    rng = random.Random(3)
    old = _set("je", _sample(rng, 1.0), "jemalloc")
    new = _set("je-nodecay", _sample(rng, 0.7), "jemalloc:nodecay")
    (v,) = compare.compare(old, new)
    assert v.allocator == "jemalloc → jemalloc:nodecay" and v.word == "faster"
    s = compare.summarize([v])
    assert (s.worse, s.better, s.same, s.worst) == (0, 1, 0, None)


def test_compare_matches_cells_across_a_parameter_the_catalog_added_later() -> None:
    rng = random.Random(5)
    old = _set("old", _sample(rng, 1.0))  # churn threads=1, from before idle_ms existed
    later = (("idle_ms", 0), ("threads", 1))
    new = compare.ResultSet.of_runs(
        "new", [stored("je", w, params=later) for w in _sample(rng, 1.3)]
    )
    (v,) = compare.compare(old, new)
    assert v.params == (("threads", 1),) and v.word == "slower"
    varied = compare.ResultSet.of_runs(
        "v",
        [  # a sweep of the new parameter: no match
            stored("je", 1.0, params=(("idle_ms", i), ("threads", 1))) for i in (0, 100)
        ],
    )
    with pytest.raises(UserError, match="no cell in common"):
        compare.compare(old, varied)


def test_compare_without_common_cells_is_a_usage_error() -> None:
    a = _set("a", [1.0, 1.0], "x")
    b = compare.ResultSet.of_runs("b", [stored("x", 1.0, workload="other")])
    with pytest.raises(UserError, match="no cell in common"):
        compare.compare(a, b)


# ---------------------------------------------------------------------------
# analyze.py and the exports
# ---------------------------------------------------------------------------
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
    assert cell.verdict is stats.Verdict.INCONCLUSIVE
    assert re.fullmatch(r"inconclusive \(detects ≥\d+%\)", fmt.verdict("time_s", cell))
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
    assert welch.cells["time_s"]["je"].verdict is stats.Verdict.INCONCLUSIVE


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


def _report(
    comp: analyze.Comparison | None,
    view: str = "summary",
    runs: tuple[StoredRun, ...] = (),
    campaign: dict[str, object] | None = None,
) -> data.ReportData:
    return data.ReportData(view, dict(campaign or {}), comp, (), runs, ())


def test_markdown_table() -> None:
    md = markdown.comparison(comparison())
    assert "| workload | glibc* | je† |" in md
    # ±: t(0.975, 2) = 4.3027 x sd 0.1 / sqrt(3) / mean 1.1 = 22.6 %; je's ratio is Welch's
    # (the fake runs share one block): exp(t(df) * SE) - 1 on the log scale.
    assert "| churn threads=1 | 1.10 s ±22.6% base | 550.0 ms ×0.50 ±" in md
    assert "faster |" in md
    assert "CRASHED 1/3" in md and "† partial" in md


def test_summary_csv_has_one_row_per_cell_and_metric() -> None:
    rows = list(csv.DictReader(io.StringIO(csvfile.render(_report(comparison())))))
    assert len(rows) == 2 * 2 * 2
    crashed = [r for r in rows if r["allocator"] == "je" and r["params"] == '{"threads": 2}']
    assert {r["state"] for r in crashed} == {"crashed 1/3"}
    assert {r["median"] for r in crashed} == {""}
    ok = next(r for r in rows if r["allocator"] == "je" and r["metric"] == "time_s")
    assert float(ok["ci_low"]) < float(ok["mean"]) < float(ok["ci_high"])
    assert ok["significant"] == "True"


def test_json_exports_are_versioned_and_checked(tmp_path: Path) -> None:
    doc = json.loads(jsonfile.render(_report(comparison(), campaign={"id": 1})))
    assert (doc["format"], doc["version"]) == (exchange.SUMMARY_FORMAT, exchange.FORMAT_VERSION)
    runs_path = tmp_path / "runs.json"
    # rusage's faults and switches travel with each run (issue 42: what explains).
    runs = [
        stored("je", 0.5)._replace(minflt=812, majflt=3, nvcsw=14, nivcsw=9),
        stored("je", 0.6, status=RunStatus.CRASHED),
    ]
    runs_path.write_text(jsonfile.render(_report(None, "runs", tuple(runs), {"id": 1})))
    campaign, loaded = exchange.load_runs(runs_path)
    assert campaign == {"id": 1} and loaded == runs
    assert json.loads(runs_path.read_text())["rows"][0]["minflt"] == 812
    future = dict(json.loads(runs_path.read_text()), version=99)
    runs_path.write_text(json.dumps(future))
    with pytest.raises(UserError, match="version 99 is not one this allocmark reads"):
        exchange.load(runs_path, exchange.RUNS_FORMAT)
    with pytest.raises(UserError, match="expected an allocmark-runs export"):
        (tmp_path / "s.json").write_text(json.dumps(doc))
        exchange.load(tmp_path / "s.json", exchange.RUNS_FORMAT)


def test_try_lines_carry_the_paired_ratios() -> None:
    times = (1.0, 1.2, 1.1, 0.9, 1.3, 1.0)  # six blocks: the fewest an exact verdict needs
    runs = [stored("glibc", w, rep=i) for i, w in enumerate(times)] + [
        stored("je", w / 2, rep=i, rss=2048) for i, w in enumerate(times)
    ]
    comp = analyze.compare(runs, ["glibc", "je"], "glibc")
    lines = tryout.try_lines(runs, comp)
    assert lines[1].time is not None and lines[1].time.ratio is not None
    assert lines[1].time.ratio.value == pytest.approx(0.5)
    assert lines[1].time.verdict is stats.Verdict.BETTER
    assert lines[1].rss is not None and lines[1].rss.verdict is stats.Verdict.WORSE


@pytest.mark.parametrize(
    ("value", "text"), [(0.0123, "12.3 ms"), (1.5, "1.50 s"), (25.0, "25.0 s"), (250.0, "250 s")]
)
def test_seconds_format(value: float, text: str) -> None:
    assert fmt.seconds(value) == text


def test_size_format() -> None:
    assert fmt.size_kib(512) == "512 KiB"
    assert fmt.size_kib(2048) == "2.0 MiB"
    assert fmt.size_kib(3 * 1024 * 1024) == "3.00 GiB"


@pytest.mark.parametrize(
    ("value", "text"),
    [(946.0, "946 /s"), (23000.0, "23.0 k/s"), (12_345_678.0, "12.3 M/s"), (100e6, "100 M/s")],
)
def test_rate_format(value: float, text: str) -> None:
    assert fmt.rate(value) == text


@pytest.mark.parametrize("seed", range(20))
def test_numpy_and_plain_summaries_agree(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([stats.VECTOR_MIN, 31, 100])
    values = [rng.lognormvariate(0, 0.3) for _ in range(n)]
    if seed % 4 == 0:
        values[rng.randrange(n)] *= 50  # an outlier
    if seed % 5 == 0:
        values = [round(v, 1) for v in values]  # ties, an even count
    fast, plain = stats.summarize(values), summary._summarize_list(values)
    for field in dataclasses.fields(stats.Summary):
        a, b = getattr(fast, field.name), getattr(plain, field.name)
        assert a == pytest.approx(b, rel=1e-12, abs=1e-15), field.name
    other = [v * rng.uniform(0.9, 1.2) for v in values]
    fast_ratio = stats.paired_ratio(values, other)
    plain_mean, plain_sd = summary.mean_sd(
        [math.log(x / y) for x, y in zip(values, other, strict=True)]
    )
    logs = [math.log(x / y) for x, y in zip(values, other, strict=True)]
    centre = signedrank.interval(logs)[0]
    assert fast_ratio is not None and math.log(fast_ratio.value) == pytest.approx(centre)
    assert fast_ratio.se == pytest.approx(plain_sd / math.sqrt(n))
    assert min(logs) <= plain_mean <= max(logs)


def _two_allocator_cells(name: str) -> list[CellRuns]:
    times = tuple(1.0 + 0.01 * i for i in range(30))
    base = [
        CellRuns(
            name,
            "churn",
            (("threads", t),),
            "measure",
            False,
            (RunStatus.OK,) * 30,
            {"wall_s": times, "rep": tuple(float(i) for i in range(30))},
        )
        for t in (1, 2)
    ]
    slower = [
        dataclasses.replace(
            c, allocator="b", columns=c.columns | {"wall_s": tuple(1.5 * v for v in times)}
        )
        for c in base
    ]
    return base + slower


def test_a_table_that_fits_has_whole_cells_and_folded_headers() -> None:
    name = "a-long-allocator-name"
    comp = analyze.compare(_two_allocator_cells(name), [name, "b"], name)
    console = Console(file=io.StringIO(), width=100, record=True)
    table.comparison(console, comp)
    text = console.export_text()
    assert name + "*" not in text  # the header is folded to the cells' width...
    assert "a-long-allo" in text and "cator-name*" in text  # ...in pieces
    assert "×1.50 ±0.0%" in text and "slower" in text
    row = next(line for line in text.splitlines() if "churn threads=1" in line)
    assert re.search(r"│ +1\.15 s│ +1\.72 s│", row), row  # medians, right-justified


@pytest.mark.parametrize("seed", range(10))
def test_batched_paired_ratios_equal_one_at_a_time(seed: int) -> None:
    rng = random.Random(seed)
    pairs = []
    for _ in range(30):
        n = rng.choice([2, 5, stats.VECTOR_MIN, 40])
        a = [rng.lognormvariate(0, 0.2) for _ in range(n)]
        b = [x * rng.uniform(0.8, 1.3) for x in a]
        pairs.append((a, b) if rng.random() < 0.9 else (a, a))  # some with se = 0
    for (a, b), batched in zip(pairs, batch.paired_ratios(pairs), strict=True):
        one = stats.paired_ratio(a, b)
        assert one is not None and batched is not None
        for field in dataclasses.fields(stats.Ratio):
            x, y = getattr(one, field.name), getattr(batched, field.name)
            assert x == pytest.approx(y, rel=1e-12, abs=1e-15) or (x != x and y != y), field.name


def test_the_report_path_imports_neither_scipy_stats_nor_matplotlib() -> None:
    # Each costs a third of a second at start-up: a report over 100,000 runs has 2 s.
    code = (
        "import sys, allocmark.cli, allocmark.report.data, allocmark.report.table; "
        "print(sorted({m.split('.')[0] + '.' + m.split('.')[1] for m in sys.modules "
        "if m.startswith(('scipy.stats', 'matplotlib.'))}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _runs_export(tmp_path: Path, runs: list[StoredRun]) -> Path:
    path = tmp_path / "runs.json"
    path.write_text(jsonfile.render(_report(None, "runs", tuple(runs), {"baseline": "je"})))
    return path


def test_a_runs_export_keeps_metrics_labels_and_roles(tmp_path: Path) -> None:
    runs = [
        stored("je", 0.5, metrics={"ops": 10.0}),
        stored("je", 0.6, status=RunStatus.TIMEOUT)._replace(
            role="verify", labels={"host": "a"}, detail="timed out"
        ),
    ]
    campaign, loaded = exchange.load_runs(_runs_export(tmp_path, runs))
    assert campaign == {"baseline": "je"} and loaded == runs


def test_the_runs_export_schema_validates_an_export(tmp_path: Path) -> None:
    import jsonschema

    from allocmark import schemas

    schema = schemas.json_schema("runs")
    jsonschema.Draft202012Validator.check_schema(schema)
    doc = json.loads(_runs_export(tmp_path, [stored("je", 0.5, metrics={"ops": 1.0})]).read_text())
    jsonschema.validate(doc, schema)
    doc["rows"][0]["status"] = "fine"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, schema)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"status": "fine"}, r"key 'rows\[1\].status': 'fine': choose 'ok'"),
        ({"wall_s": "fast"}, r"key 'rows\[1\].wall_s': input should be a valid number"),
        ({"wall_s": -1}, r"key 'rows\[1\].wall_s': must be at least 0"),
        ({"params": "[1]"}, r"key 'rows\[1\].params': must be a JSON object"),
        ({"params": "{"}, r"key 'rows\[1\].params': not JSON"),
        ({"metric.ops": "many"}, r"key 'rows\[1\]': column 'metric.ops' must be a number"),
        ({"label.host": 3}, r"key 'rows\[1\]': column 'label.host' must be text"),
        ({"colour": "red"}, r"key 'rows\[1\]': unknown column 'colour'"),
        ({"seq": None}, r"key 'rows\[1\].seq': input should be a valid integer"),
    ],
)
def test_a_malformed_runs_export_names_row_and_column(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    path = _runs_export(tmp_path, [stored("je", 0.5), stored("je", 0.6)])
    doc = json.loads(path.read_text())
    doc["rows"][1].update(change)
    path.write_text(json.dumps(doc))
    with pytest.raises(UserError, match=f"^{re.escape(str(path))}: {message}"):
        exchange.load_runs(path)


@pytest.mark.parametrize("argv", [["report", "--help"], ["try", "--help"]])
def test_a_verbs_help_loads_no_run_stack(argv: list[str]) -> None:
    code = (
        "import runpy, sys; sys.argv = ['allocmark', *sys.argv[1:]]\n"
        "try: runpy.run_module('allocmark', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print('LOADED', sorted(m for m in ('allocmark.api', 'allocmark.report.data', "
        "'allocmark.store') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    assert "Usage" in out.stdout and out.stdout.rstrip().endswith("LOADED []"), out.stdout[-300:]


def test_help_after_the_double_dash_belongs_to_the_command() -> None:
    import importlib

    app = importlib.import_module("allocmark.cli.app")  # the package re-exports the Typer app
    assert app._asks_help(["report", "--help"])
    assert not app._asks_help(["try", "-a", "glibc", "--", "python3", "--help"])


def test_an_interval_is_printed_with_the_decimals_that_tell_its_ends_apart() -> None:
    """ "[1.14–1.14]" says nothing a reader can use (issue 42)."""
    tight = stats.Ratio(1.142, 1.1404, 1.1447, 0.001, 0.001, 10)
    assert fmt.ratio_interval(tight) == "[1.140–1.145]"
    assert fmt.ratio_interval(dataclasses.replace(tight, low=1.05, high=1.25)) == "[1.05–1.25]"
