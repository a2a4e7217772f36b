"""The HTML report: escaping of hostile strings, and a real render in Chromium."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from allocmark.answer import analyze, findings
from allocmark.answer.report import Report
from allocmark.model import StoredAllocator, StoredRun, Verified
from allocmark.report import html
from allocmark.request import CampaignPlan
from tests.conftest import cli
from tests.fakes import stored

HOSTILE = "<img src=x onerror=alert(1)>&\"'"
PLOTLY_SHA256 = "c23b03591a6bdad0bd0f47a0c5c52305a5519812b73ce254be65cd841553c9c2"
ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"

PLAN = CampaignPlan(seed=1, min_blocks=2)  # a report of runs made here


def _page(comp: analyze.Comparison, runs: list[StoredRun], name: str = "c") -> str:
    campaign = {
        "id": 1,
        "name": name,
        "status": "finished",
        "created": 0,
        "done": len(runs),
        "planned": len(runs),
        "machine": {"hostname": name},
    }
    allocators = tuple(
        StoredAllocator(a, "ok", None, None, None, None, (), {"X": name}, ())
        for a in comp.allocators
    )
    return html.render(
        Report("summary", campaign, PLAN, comp, findings.of(comp), allocators, tuple(runs), ())
    )


def test_hostile_names_are_escaped_everywhere() -> None:
    runs = [stored(HOSTILE, w, workload=f"w{HOSTILE}") for w in (1.0, 1.1)]
    runs += [stored("glibc", w, workload=f"w{HOSTILE}") for w in (1.0, 1.2)]
    comp = analyze.compare(runs, ["glibc", HOSTILE], "glibc")
    page = _page(comp, runs, HOSTILE)
    assert "<img src=x" not in page  # neither in the tables nor in the figures' JSON
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    spec = _figure_data(page)
    assert spec and all("<img" not in json.dumps(f) for f in spec.values())


def _figure_data(page: str) -> dict[str, Any]:
    found = re.search(r'<script type="application/json" id="figure-data">(.*?)</script>', page)
    assert found, "no figure data"
    parsed: dict[str, Any] = json.loads(found.group(1))
    return parsed


def test_the_vendored_plotly_is_the_one_named_in_its_readme() -> None:
    vendor = Path(html.__file__).parent / "vendor"
    digest = hashlib.sha256((vendor / "plotly-basic.min.js").read_bytes()).hexdigest()
    assert digest == PLOTLY_SHA256
    assert PLOTLY_SHA256 in (vendor / "README.md").read_text()


def test_plotly_is_carried_once_and_every_id_is_unique(tmp_path: Path) -> None:
    page = _quick_shaped_page(tmp_path).read_text()
    assert page.count("plotly.js (basic - minified)") == 1
    body = page.split("</head>", 1)[1]
    ids = re.findall(r'\bid="([^"]+)"', body)
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1]
    spec = _figure_data(page)
    assert set(spec) <= set(ids)  # each figure has its element, and no two share one


def test_an_allocator_has_one_colour_in_every_figure(tmp_path: Path) -> None:
    spec = _figure_data(_quick_shaped_page(tmp_path).read_text())
    colours: dict[str, set[str]] = {}
    for fig in spec.values():
        for trace in fig["data"]:
            colour = (trace.get("marker") or {}).get("color") or (trace.get("line") or {}).get(
                "color"
            )
            if trace.get("name") in QUICK and colour:
                colours.setdefault(trace["name"], set()).add(colour)
    assert set(colours) == set(QUICK)
    assert all(len(c) == 1 for c in colours.values()), colours
    assert len({c for cs in colours.values() for c in cs}) == len(QUICK)  # ten, all different


def test_legends_stand_outside_the_data_and_threads_have_their_own_ticks(tmp_path: Path) -> None:
    spec = _figure_data(_quick_shaped_page(tmp_path).read_text())
    for fig in spec.values():
        assert fig["layout"]["legend"]["x"] > 1  # right of every panel's domain (0..1)
    runs = [
        stored(a, 1.0 + i / 10, params=(("count", 9), ("threads", t)), rep=rep,
               metrics={"ops_per_s": 1e6 * t / (1 + i / 10)})
        for i, a in enumerate(("glibc", "mimalloc", "jemalloc"))
        for t in (1, 2, 8)
        for rep in range(4)
    ]  # fmt: skip
    comp = analyze.compare(runs, ["glibc", "mimalloc", "jemalloc"], "glibc")
    scaling = _figure_data(_page(comp, runs))["plot-scaling-churn"]
    assert scaling["layout"]["xaxis"]["tickvals"] == [1, 2, 8]  # the counts run, no 1.2 threads
    assert scaling["layout"]["legend"]["x"] > 1


def test_the_quick_suite_page_is_under_2_mb(tmp_path: Path) -> None:
    assert _quick_shaped_page(tmp_path).stat().st_size <= 2_000_000


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("chromium is not installed (make test installs it)")
    return path


def headless(*args: str) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0"]
    return subprocess.run(
        [chromium(), *flags, *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.integration
def test_html_report_renders_in_chromium(tmp_path: Path, installed: dict[str, Verified]) -> None:
    db, page = tmp_path / "r.db", tmp_path / "report.html"
    names = ",".join(n for n in ("glibc", "mimalloc", "jemalloc") if n in installed)
    evil = f"evil={installed['glibc'].library}:EVIL=<script>alert(2)</script>"
    assert (
        cli(
            "run",
            "-w",
            "churn",
            "-p",
            "count=2000",
            "-p",
            "rounds=1",
            "-p",
            "threads=1,2",
            "-a",
            f"{names},{evil}",
            "-n",
            "2",
            "--max-blocks",
            "2",
            "--db",
            str(db),
        ).returncode
        == 0
    )
    made = cli("report", "--db", str(db), "--format", "html", "-o", str(page))
    assert made.returncode == 0, made.stderr
    text = page.read_text()
    assert "<script>alert(2)</script>" not in text and "&lt;script&gt;alert(2)" in text
    # Self-contained: no element loads anything from elsewhere (XML namespaces are only
    # names; the links inside plotly.js's own code are strings it never fetches here).
    assert not re.search(
        r"""<(script|link|img|iframe|object)\b[^>]*(src|href)=["']?(https?:|//)""", text
    )

    dom = headless("--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert 'data-ready="yes"' in dom.stdout  # the page's script ran to its end
    assert dom.stdout.count('class="comparison sortable"') >= 3
    assert "<svg" in dom.stdout and 'id="runs"' in dom.stdout
    # The answer and its matrices first, then the figures (Plotly drew them: its SVG
    # layer is in the page), the recommendation, and the folded details last.
    marks = (
        'id="answer"',
        'id="matrix-1"',
        'id="matrix-2"',
        'id="figures"',
        'id="plot-time-vs-rss"',
        'id="plot-rss-over-time"',
        'id="recommendation"',
        'id="details"',
        'id="verdicts"',
        'class="comparison sortable"',
        'id="runs"',
        'id="machine"',
        'id="allocators"',
    )
    order = [dom.stdout.index(m) for m in marks]
    assert order == sorted(order)
    assert 'class="main-svg"' in dom.stdout  # plotly.js ran, offline
    assert "for time:" in dom.stdout and "for memory:" in dom.stdout
    console = [line for line in dom.stderr.splitlines() if re.search(r":CONSOLE[:(]", line)]
    assert console == [], console
    # The answer and both matrices fit the first screen of a 1400x900 window.
    first = headless("--window-size=1400,900", "--dump-dom", page.as_uri())
    bottom = re.search(r'data-answer-bottom="(\d+)"', first.stdout)
    assert bottom and int(bottom.group(1)) <= 900, bottom

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "html-report.png"
    made = headless(f"--screenshot={shot}", "--window-size=1400,900", page.as_uri())
    assert made.returncode == 0 and shot.stat().st_size > 10_000


QUICK = (
    "glibc",
    "glibc:arena2",
    "jemalloc",
    "jemalloc:nodecay",
    "tcmalloc-minimal",
    "tcmalloc",
    "mimalloc",
    "tbbmalloc",
    "scudo",
    "scudo:norelease",
)


def _quick_shaped_page(tmp_path: Path) -> Path:
    """Ten allocators by nine workloads with the quick suite's long parameters, their
    ratios spread across workloads (as there: the geometric mean's interval is wide)."""

    def wall(w: int, i: int, rep: int) -> float:
        return (1 + i / 10) ** (1 if w % 2 else -1) * (1 + w / 5) * (1 + rep % 3 / 100)

    runs = [
        stored(
            a,
            wall(w, i, rep),
            rss=1000 + 100 * i * (w % 3),
            rep=rep,
            metrics={"ops_per_s": 1e6 / wall(w, i, rep)},
            params=(
                ("count", 4000 + w),
                ("size_min", 1024 + w),
                ("size_max", 65536 + w),
                ("threads", 1 + w % 2),
            ),
        )
        for w in range(9)
        for i, a in enumerate(QUICK)
        for rep in range(14)
    ]
    comp = analyze.compare(runs, list(QUICK), "glibc")
    campaign = {
        "id": 1,
        "name": "quick",
        "status": "finished",
        "created": 0,
        "done": len(runs),
        "planned": len(runs),
        "machine": {},
    }
    allocators = tuple(StoredAllocator(a, "ok", None, None, None, None, (), {}, ()) for a in QUICK)
    page = tmp_path / "quick.html"
    page.write_text(
        html.render(
            Report("summary", campaign, PLAN, comp, findings.of(comp), allocators, tuple(runs), ())
        )
    )
    return page


@pytest.mark.integration
def test_a_quick_suite_matrix_fits_a_1400_by_900_window(tmp_path: Path) -> None:
    dom = headless("--window-size=1400,900", "--dump-dom", _quick_shaped_page(tmp_path).as_uri())
    right = re.search(r'data-matrix-right="(\d+)"', dom.stdout)
    bottom = re.search(r'data-matrix-bottom="(\d+)"', dom.stdout)
    assert right and bottom, dom.stdout[-500:]
    assert int(right.group(1)) <= 1400 and int(bottom.group(1)) <= 900, (right, bottom)
