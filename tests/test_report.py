"""Analysis and report formatting from synthetic stored runs."""

from __future__ import annotations

import csv
import io
import json

import pytest

from allocmark import analyze, stats
from allocmark.model import RunStatus
from allocmark.report import export, fmt
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
    assert cell.summary is not None
    assert cell.summary.median == pytest.approx(0.55)
    assert cell.ratio == pytest.approx(0.55 / 1.1)
    assert row.cells["peak_rss_kib"]["je"].ratio == pytest.approx(0.5)
    assert comp.partial == frozenset({"je"})


def test_a_cell_with_a_crash_shows_no_number() -> None:
    cell = comparison().rows[1].cells["time_s"]["je"]
    assert cell.summary is None and cell.ratio is None
    assert cell.state == "crashed 1/3"
    assert fmt.cell("time_s", cell) == "CRASHED 1/3"


def test_geomean_uses_only_rows_with_numbers() -> None:
    geo = comparison().geomean["time_s"]
    assert geo["glibc"] == pytest.approx(1.0)
    assert geo["je"] == pytest.approx(0.55 / 1.1)


def test_missing_cell() -> None:
    comp = analyze.compare([stored("glibc", 1.0)], ["glibc", "je"], "glibc")
    assert comp.rows[0].cells["time_s"]["je"].state == "missing"
    assert comp.geomean["time_s"]["je"] is None


def test_markdown_table() -> None:
    md = export.markdown(comparison())
    assert "| workload | glibc* | je† |" in md
    assert "| churn threads=1 | 1.10 s ±9.1% ×1.00 | 550.0 ms ±9.1% ×0.50 |" in md
    assert "CRASHED 1/3" in md
    assert "† partial" in md


def test_csv_has_one_row_per_cell_and_metric() -> None:
    rows = list(csv.DictReader(io.StringIO(export.csv_text(comparison()))))
    assert len(rows) == 2 * 2 * 2
    crashed = [r for r in rows if r["allocator"] == "je" and r["params"] == '{"threads": 2}']
    assert {r["state"] for r in crashed} == {"crashed 1/3"}
    assert {r["median"] for r in crashed} == {""}


def test_json_is_versioned() -> None:
    doc = json.loads(export.json_text(comparison(), {"id": 1}))
    assert doc["format"] == "allocmark-report"
    assert doc["version"] == export.FORMAT_VERSION
    assert doc["baseline"] == "glibc"


def test_try_lines_speedup() -> None:
    runs = [stored("glibc", w) for w in (1.0, 1.0)] + [stored("je", w) for w in (0.5, 0.5)]
    lines = analyze.try_lines(runs, ["glibc", "je"], "glibc")
    assert lines[1].speedup == pytest.approx(2.0)
    assert lines[1].speedup_sd == pytest.approx(0.0)


def test_stats_summary() -> None:
    s = stats.summarize([1.0, 2.0, 4.0])
    assert (s.median, s.minimum, s.maximum) == (2.0, 1.0, 4.0)
    assert s.stdev == pytest.approx(1.5275, abs=1e-4)
    assert stats.geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert stats.geomean([]) is None


@pytest.mark.parametrize(
    ("value", "text"), [(0.0123, "12.3 ms"), (1.5, "1.50 s"), (250.0, "250 s")]
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
