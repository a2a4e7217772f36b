"""The report commands' start: what they import, and what help they show."""

from __future__ import annotations

import subprocess
import sys

import pytest


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


def test_the_report_path_imports_neither_scipy_stats_nor_matplotlib() -> None:
    # Each costs a third of a second at start-up: a report over 100,000 runs has 2 s.
    code = (
        "import sys, allocmark.cli, allocmark.report.data, allocmark.report.table; "
        "print(sorted({m.split('.')[0] + '.' + m.split('.')[1] for m in sys.modules "
        "if m.startswith(('scipy.stats', 'matplotlib.'))}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
