"""Every export format, and the report's formats of numbers."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from allocmark import api, schemas, stats
from allocmark.answer import (
    across,
    aging,
    analyze,
    composition,
    findings,
    recommend,
    releases,
    remedy,
    tryout,
    why,
)
from allocmark.answer.report import Report
from allocmark.errors import UserError
from allocmark.model import AllocatorRuns, RunStatus, StoredRun
from allocmark.report import csvfile, fmt, jsonfile, markdown, rows, summary, table
from allocmark.request import CampaignPlan
from allocmark.store import exchange
from tests.answer.test_analyze import comparison
from tests.exports import check_summary
from tests.fakes import stored

P1 = (("threads", 1),)
P2 = (("threads", 2),)

PLAN = CampaignPlan(seed=1, min_blocks=2)  # a report of runs made here


# ---------------------------------------------------------------------------
# stats.py against values worked out by hand
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# compare.py: finds a real slowdown, keeps quiet about noise
# ---------------------------------------------------------------------------


# ---------------------------------------------------------------------------
# analyze.py and the exports
# ---------------------------------------------------------------------------


def _report(
    comp: analyze.Comparison | None,
    view: str = "summary",
    runs: tuple[StoredRun, ...] = (),
    campaign: dict[str, object] | None = None,
) -> Report:
    found = findings.of(comp) if comp is not None else findings.NONE
    return Report(view, dict(campaign or {}), PLAN, comp or analyze.NOTHING, found, (), runs, ())


def test_markdown_table() -> None:
    md = markdown.comparison(comparison(), findings.of(comparison()))
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


def test_the_summary_schema_is_drawn_from_the_value_s_own_classes() -> None:
    """One definition: each object of the export has exactly its class's fields (what it
    derives and exports, less what it keeps out), so a field added to the value is in
    the export and its schema with no second edit."""
    defs = api.json_schema("summary")["$defs"]
    classes = {
        "Led": summary.Led,
        "Said": summary.Said,
        "Why": why.Why,
        "Factor": why.Factor,
        "Choice": recommend.Choice,
        "Position": recommend.Position,
        "Tally": across.Tally,
        "Try": remedy.Try,
        "Steady": aging.Steady,
        "Phase": aging.Phase,
        "Made": composition.Made,
        "Change": releases.Change,
        "Ratio": stats.Ratio,
        "SummaryRow": rows.SummaryRow,
    }
    whys = {"explained", "mechanisms"}
    derived = {"Led": set(), "Said": whys, "Why": whys, "Factor": {"degree"}}
    derived |= {"Steady": {"text"}, "Made": {"rest_kib"}}
    for name, cls in classes.items():
        declared = {f.name for f in dataclasses.fields(cls)} - (
            {"ratio"} if name == "Position" else set()
        )
        assert set(defs[name]["properties"]) == declared | derived.get(name, set()), name
        assert defs[name]["additionalProperties"] is False, name
    assert {"lead", "fastest", "tied_time"} <= set(defs["Led"]["properties"])
    assert "ratio" not in defs["Position"]["properties"]  # kept out where it is declared


def test_json_exports_are_versioned_and_checked(tmp_path: Path) -> None:
    doc = json.loads(jsonfile.render(_report(comparison(), campaign={"id": 1})))
    assert (doc["format"], doc["version"]) == (exchange.SUMMARY_FORMAT, summary.VERSION)
    check_summary(doc)
    assert "allocmark summary export" in json.dumps(api.json_schema("summary"))
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


def _two_allocator_cells(name: str) -> list[AllocatorRuns]:
    times = tuple(1.0 + 0.01 * i for i in range(30))
    base = [
        AllocatorRuns(
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
    table.comparison(console, comp, findings.of(comp))
    text = console.export_text()
    assert name + "*" not in text  # the header is folded to the cells' width...
    assert "a-long-allo" in text and "cator-name*" in text  # ...in pieces
    assert "×1.50 ±0.0%" in text and "slower" in text
    row = next(line for line in text.splitlines() if "churn threads=1" in line)
    assert re.search(r"│ +1\.15 s│ +1\.72 s│", row), row  # medians, right-justified


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


def test_an_interval_is_printed_with_the_decimals_that_tell_its_ends_apart() -> None:
    """ "[1.14–1.14]" says nothing a reader can use (issue 42)."""
    tight = stats.Ratio(1.142, 1.1404, 1.1447, 0.001, 0.001, 10)
    assert fmt.ratio_interval(tight) == "[1.140–1.145]"
    assert fmt.ratio_interval(dataclasses.replace(tight, low=1.05, high=1.25)) == "[1.05–1.25]"
