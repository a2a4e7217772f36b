"""The report commands' start: what they import, and what help they show."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("argv", [["report", "--help"], ["try", "--help"]])
def test_a_verbs_help_loads_no_run_stack(argv: list[str]) -> None:
    code = (
        "import runpy, sys; sys.argv = ['allocmark', *sys.argv[1:]]\n"
        "try: runpy.run_module('allocmark', run_name='__main__')\n"
        "except SystemExit: pass\n"
        "print('LOADED', sorted(m for m in ('allocmark.api', 'allocmark.answer.report', "
        "'allocmark.store') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    assert "Usage" in out.stdout and out.stdout.rstrip().endswith("LOADED []"), out.stdout[-300:]


def test_help_after_the_double_dash_belongs_to_the_command() -> None:
    import importlib

    app = importlib.import_module("allocmark.cli.app")  # the package re-exports the Typer app
    assert app._asks_help(["report", "--help"])
    assert not app._asks_help(["try", "-a", "glibc", "--", "python3", "--help"])


def test_the_report_path_imports_neither_scipy_stats_nor_matplotlib() -> None:
    # Each costs a third of a second at start-up: a report over 100,000 runs has 2 s.
    code = (
        "import sys, allocmark.cli, allocmark.answer.report, allocmark.report.table, "
        "allocmark.report.terminal; "
        "print(sorted({m.split('.')[0] + '.' + m.split('.')[1] for m in sys.modules "
        "if m.startswith(('scipy.stats', 'matplotlib.'))}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_report_loads_no_run_stage(tmp_path: Path) -> None:
    """`allocmark report` reads stored runs: the campaigns side of the API, the run
    stage and the dispatchers stay unloaded (a tenth of a second at start-up)."""
    from allocmark.model import RunResult, RunStatus
    from allocmark.run import machine
    from allocmark.store import Store
    from tests.fakes import allocs, specs

    db = tmp_path / "r.db"
    s = Store(db)
    cid = s.new_campaign("t", 1, machine.current(), [], allocs("a", "b"), [], specs(4), "b")
    for spec in specs(4):
        s.record(cid, spec, RunResult(RunStatus.OK, wall_s=1.0, maxrss_kib=100), allocs("a")[0])
    s.set_status(cid, "finished")
    s.close()
    code = (
        "import sys, runpy; sys.argv = ['allocmark', 'report', '--db', sys.argv[1]]\n"
        "try:\n    runpy.run_module('allocmark', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith(('allocmark.run', "
        "'allocmark.dispatchers', 'allocmark.api.campaigns'))), file=sys.stderr)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(db)], capture_output=True, text=True, check=True
    )
    assert "alloc" in out.stdout  # the report was printed
    assert out.stderr.strip().splitlines()[-1] == "[]"
