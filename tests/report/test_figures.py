"""The charts both drawings translate (charts.py): what a bar of a row of fixed duration
shows, and that no row is left an empty slot."""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
import os
from pathlib import Path

import pytest

from allocmark.answer import analyze, findings, why
from allocmark.report import chart, charts, figures, plots
from tests.fakes import stored

LARSON = (("duration_ms", 300), ("threads", 2))


def _comparison() -> analyze.Comparison:
    """larson runs for a set time: its speed is its throughput (mimalloc 1.25x glibc's),
    beside a row whose time is its own (churn: mimalloc 0.8x)."""
    runs = [
        stored(a, 0.3, params=LARSON, workload="larson", rep=rep, metrics={"ops_per_s": ops})
        for rep in range(6)
        for a, ops in (("glibc", 1e6 * (1 + rep % 2 / 100)), ("mimalloc", 1.25e6))
    ]
    runs += [
        stored(a, wall * (1 + rep % 3 / 100), rep=rep)
        for rep in range(6)
        for a, wall in (("glibc", 1.0), ("mimalloc", 0.8))
    ]
    return analyze.compare(
        runs, ["glibc", "mimalloc"], "glibc", fixed_time={"larson": "duration_ms"}
    )


def test_a_row_of_fixed_duration_shows_its_time_per_operation() -> None:
    comp = _comparison()
    larson = next(r for r in comp.rows if r.workload == "larson")
    throughput = larson.cells["ops_per_s"]["mimalloc"].ratio
    shown = charts.shown_ratio(comp, larson, "time_s", "mimalloc")
    assert throughput is not None and shown is not None
    assert shown.value == pytest.approx(1 / throughput.value)
    assert (shown.low, shown.high) == pytest.approx((1 / throughput.high, 1 / throughput.low))
    assert larson.cells["time_s"]["mimalloc"].ratio is None  # its time says nothing


def test_every_row_with_a_ratio_has_its_bar() -> None:
    comp = _comparison()
    drawn = figures.page(charts.normalized(comp))
    (time_bars,) = [f for f in drawn if f.id == "plot-normalized-time_s"]
    (trace,) = time_bars.data
    assert trace["x"] == [r.label for r in comp.rows]  # larson too: no empty slot
    assert all(isinstance(y, float) and math.isfinite(y) for y in trace["y"])


def _written(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_two_processes_write_the_plot_files_one_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report --plots` draws in two forked processes: the same files, byte for byte
    (an SVG carries no date), in the same order, as one process writes them."""
    comp = _comparison()
    found = findings.of(comp)
    contexts = []
    real = multiprocessing.get_context

    def spied(method: str) -> object:
        contexts.append(method)
        return real(method)

    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(multiprocessing, "get_context", spied)
    listed = plots.write(charts.every(comp, found), tmp_path / "two")
    assert contexts == ["fork"]
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    alone = plots.write(charts.every(comp, found), tmp_path / "one")
    assert [p.name for p in listed] == [p.name for p in alone]
    assert len(listed) >= 8 and {p.suffix for p in listed} == {".svg", ".png"}
    assert _written(tmp_path / "two") == _written(tmp_path / "one")
    assert multiprocessing.active_children() == []  # the writers ended with the call


def test_a_chart_of_the_first_rows_says_how_many_it_leaves_out() -> None:
    """Past MAX_PANELS rows a chart draws the first ones, and its title counts them
    against the comparison's rows."""
    runs = [
        stored(a, wall * (1 + rep % 3 / 100), params=(("count", c),), rep=rep)
        for c in range(chart.MAX_PANELS + 1)
        for rep in range(4)
        for a, wall in (("glibc", 1.0), ("mimalloc", 0.8))
    ]
    comp = analyze.compare(runs, ["glibc", "mimalloc"], "glibc")
    assert len(comp.rows) == 13
    for made in (charts.distributions(comp), charts.time_vs_rss(comp, findings.of(comp))):
        (drawn,) = made
        assert len(drawn.panels) == 12 and drawn.title.endswith("(first 12 of 13 rows)")
    few = analyze.compare(
        [r for r in runs if dict(r.params)["count"] < 2], ["glibc", "mimalloc"], "glibc"
    )
    (drawn,) = charts.distributions(few)
    assert "first" not in drawn.title and len(drawn.panels) == 2


def test_the_why_chart_names_every_row_apart_where_a_cut_name_would_read_alike() -> None:
    """Two rows whose names differ only past the bar's room are named by what varies
    between them alone; a name that fits is the report's own."""
    params = [
        (("count", 50000), ("size_min", 16), ("size_max", 1024), ("threads", t)) for t in (1, 4)
    ]
    factor = why.Factor("user_s", "user CPU", "s", 0.1, 1.2, 1.1, 1.3, 0.9)
    whys = tuple(
        why.Why(label.split()[0], p, label, "scudo", "time", 0.1 * (i + 1), (factor,), ("user_s",))
        for i, (p, label) in enumerate(
            [
                (params[0], "churn count=50000 size_min=16 size_max=1024 threads=1"),
                (params[1], "churn count=50000 size_min=16 size_max=1024 threads=4"),
                ((("threads", 2),), "larson threads=2"),
            ]
        )
    )
    comp = _comparison()
    found = dataclasses.replace(findings.NONE, whys=whys)
    (drawn,) = charts.why_parts(comp, found)
    names = drawn.panels[0].traces[0].xs
    assert len(set(names)) == 3, names
    assert "larson threads=2: scudo" in names  # fits: the report's own name
    assert {n for n in names if "threads=4" in n or "threads=1" in n} == {
        "churn threads=4: scudo",
        "churn threads=1: scudo",
    }
