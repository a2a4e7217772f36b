"""The HTML report: escaping of hostile strings, and a real render in Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from allocmark.answer import analyze
from allocmark.model import Verified
from allocmark.report import data, html, plots
from tests.conftest import cli
from tests.fakes import stored

HOSTILE = "<img src=x onerror=alert(1)>&\"'"
ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts"


def test_hostile_names_are_escaped_everywhere() -> None:
    runs = [stored(HOSTILE, w, workload=f"w{HOSTILE}") for w in (1.0, 1.1)]
    runs += [stored("glibc", w, workload=f"w{HOSTILE}") for w in (1.0, 1.2)]
    comp = analyze.compare(runs, ["glibc", HOSTILE], "glibc")
    figures = plots.all_plots(comp)
    try:
        report = data.ReportData(
            "summary",
            {
                "id": 1,
                "name": HOSTILE,
                "status": "finished",
                "created": 0,
                "done": 4,
                "planned": 4,
                "machine": {"hostname": HOSTILE},
            },
            comp,
            (
                {
                    "name": HOSTILE,
                    "status": "ok",
                    "env_json": json.dumps({"X": HOSTILE}),
                    "lacks_json": "[]",
                },
            ),
            tuple(runs),
            (),
        )
        page = html.render(report, figures)
    finally:
        plots.close(figures)
    assert "<img src=x" not in page  # neither in the tables nor in the SVG text
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    # Every static plot but the one drawn interactively (its SVG is made in the browser).
    body = page.split("</head>", 1)[1]  # plotly.js, in the head, writes "<svg" itself
    assert body.count("<svg") == len(figures) - 1 >= 1


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
    # The answer and its matrices first, then the reasons, the interactive scatter
    # (Plotly drew it: its SVG layer is in the page), the other plots, the tables; the
    # details last.
    marks = (
        'id="answer"',
        'id="matrix-1"',
        'id="matrix-2"',
        'id="recommendation"',
        'id="plot-time-vs-rss"',
        'id="verdicts"',
        'id="plot-rss-over-time"',
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
    allocators = tuple(
        {"name": a, "status": "ok", "env_json": "{}", "lacks_json": "[]"} for a in QUICK
    )
    page = tmp_path / "quick.html"
    page.write_text(
        html.render(data.ReportData("summary", campaign, comp, allocators, tuple(runs), ()), ())
    )
    return page


@pytest.mark.integration
def test_a_quick_suite_matrix_fits_a_1400_by_900_window(tmp_path: Path) -> None:
    dom = headless("--window-size=1400,900", "--dump-dom", _quick_shaped_page(tmp_path).as_uri())
    right = re.search(r'data-matrix-right="(\d+)"', dom.stdout)
    bottom = re.search(r'data-matrix-bottom="(\d+)"', dom.stdout)
    assert right and bottom, dom.stdout[-500:]
    assert int(right.group(1)) <= 1400 and int(bottom.group(1)) <= 900, (right, bottom)
