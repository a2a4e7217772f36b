"""The library API: what the documentation shows a notebook user runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from allocmark import api
from allocmark.errors import UserError

PAGE = Path(__file__).resolve().parents[1] / "docs" / "python-api.md"


def _python_example() -> str:
    found = re.search(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    assert found, f"{PAGE} has no python block"
    return found.group(1)


@pytest.mark.integration
def test_the_documented_python_example_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _python_example()],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert re.search(r"churn.*: \d+\.\d+ s, x\d\.\d\d \[", done.stdout), done.stdout
    assert (tmp_path / "results" / "notebook.db").is_file()


@pytest.mark.parametrize(
    ("req", "message"),
    [
        (api.Request(dispatcher="ray"), "--dispatcher 'ray'"),
        (api.Request(dispatcher="dask"), "needs --scheduler"),
        (api.Request(command=("true",), workloads=("churn",)), "not both"),
    ],
)
def test_a_request_that_cannot_run_is_a_usage_error(req: api.Request, message: str) -> None:
    with pytest.raises(UserError, match=re.escape(message)):
        next(iter(api.run(req)))


def test_dask_without_bench_workers_is_refused(tmp_path: Path) -> None:
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=1, processes=True, dashboard_address=None, host="127.0.0.1"
    ) as cluster:
        req = api.Request(
            workloads=("churn",),
            dispatcher="dask",
            db=tmp_path / "d.db",
            scheduler=cluster.scheduler_address,
        )
        with pytest.raises(UserError, match="no worker offers resource 'bench'"):
            list(api.run(req))


def test_one_metric_vocabulary_with_the_old_spellings_said_deprecated() -> None:
    """--metric means one thing in every verb (bisect, compare): the words, then the
    spellings an earlier allocmark took, read with a deprecation line."""
    assert api.metric_key("rss") == ("peak_rss_kib", "")
    assert api.metric_key("throughput") == ("ops_per_s", "")
    assert api.metric_key("peak_rss") == (
        "peak_rss_kib",
        "warning: --metric peak_rss is deprecated: it is rss now",
    )
    assert api.metric_key("ops_per_s")[1] == (
        "warning: --metric ops_per_s is deprecated: it is throughput now"
    )
    with pytest.raises(UserError, match=r"--metric 'colour': choose one of time, rss, "):
        api.metric_key("colour")
