"""Application entries of the workload catalog and their output parsers (no processes)."""

from __future__ import annotations

import tomllib

import pytest

from allocmark import workloads
from allocmark.errors import UserError
from allocmark.model import MetricParser, Service, Workload

GOOD = """
kind = "app"
packages = ["redis-server"]
program = "/usr/bin/redis-server"
args = ["--port", "{port}", "--dir", "{tmpdir}", "--io-threads", "{n}"]
env = { X = "{n}" }
service = { client = ["redis-benchmark", "-p", "{port}", "-n", "{n}"] }
metrics = { ops_per_s = { regex = '^"\\\\w+","([0-9.]+)"', combine = "hmean" } }
params = { n = { default = 3, min = 1 } }
"""


def workload(text: str) -> Workload:
    """The entry [workload.w] of a catalog file mine.toml."""
    return workloads.parse_catalog({"workload": {"w": tomllib.loads(text)}}, "mine.toml")["w"]


def test_an_app_entry_becomes_a_workload_with_service_and_parsers() -> None:
    w = workload(GOOD)
    assert w.kind == "app" and w.packages == ("redis-server",)
    assert w.needs == ("/usr/bin/redis-server", "redis-benchmark")
    assert w.app.service == Service(client=("redis-benchmark", "-p", "{port}", "-n", "{n}"))
    assert w.app.parsers[0].combine == "hmean"
    params = workloads.resolve_params(w, {"n": 5}, "test")
    # Run-time placeholders stay for the executor; parameters are filled in.
    argv = workloads.expand(w, params)
    assert argv[0] == "/usr/bin/redis-server"
    assert argv[1:] == ("--port", "{port}", "--dir", "{tmpdir}", "--io-threads", "5")
    assert workloads.expand_env(w, params) == (("X", "5"),)


def test_builtin_steps_run_in_turn() -> None:
    vips = workloads.load_catalog()["vips"]
    assert vips.app.steps == (5, 4, 5, 5)
    assert len(vips.argv) == sum(vips.app.steps)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ('input = "nope"', "key 'workload.w.input': unknown generator; known: text"),
        ('input = "text"', "sized by a `scale` parameter"),
        ('steps = [["a"]]', "give either program and args, or steps"),
        ('args = ["{nope}"]', r"\{nope\} is not a parameter of w"),
        ("metrics = { m = { regex = 'no group' } }", "needs a group around the number"),
        ("metrics = { m = { regex = '(' } }", "invalid regular expression"),
        ("metrics = { m = { regex = '(x)', json_key = 'k' } }", "exactly one of regex"),
        (
            "metrics = { m = { json_key = 'k', combine = 'max' } }",
            "key 'workload.w.metrics.m.combine': 'max': choose 'last', 'sum' or 'hmean'",
        ),
        ('service = { client = ["c"] }', "must pass {port} to the client"),
        ('service = { client = ["c", "{port}"], stop_signal = "TERM" }', "not a signal name"),
        ('kind = "shell"', "key 'workload.w.kind': 'shell': choose 'native' or 'app'"),
        ("params = { n = { default = 1.5 } }", "key 'workload.w.params.n.default'"),
        ('service = { client = ["c", "{port}"], ready_timeout = 0 }', "must be more than 0"),
        ('env = { X = "{tmpdir}" }', r"key 'workload.w.env': \{tmpdir\} is not a parameter of w"),
    ],
)
def test_app_entry_errors_name_the_key(change: str, message: str) -> None:
    key = change.split("=")[0].strip()
    kept = "\n".join(line for line in GOOD.splitlines() if not line.startswith(key + " "))
    with pytest.raises(UserError, match=message) as info:
        workload(kept + "\n" + change)
    assert "mine.toml" in str(info.value)


def p(**kw: str) -> MetricParser:
    return MetricParser(name="m", **kw)


def test_regex_combines_several_matches() -> None:
    out = '"test","rps"\n"SET","100.0","1"\n"GET","300.0","1"\n'
    rx = r'^"[A-Z]+","([0-9.]+)"'
    assert workloads.parse_metrics([p(regex=rx)], out, "")[0] == {"m": 300.0}
    assert workloads.parse_metrics([p(regex=rx, combine="sum")], out, "")[0] == {"m": 400.0}
    # Equal work at 100/s and 300/s: 2 units in 1/100 + 1/300 s = 150/s.
    hmean = workloads.parse_metrics([p(regex=rx, combine="hmean")], out, "")[0]["m"]
    assert hmean == pytest.approx(150.0)


def test_json_key_reads_the_last_json_line_of_the_chosen_stream() -> None:
    err = 'noise\n{"ops": 1}\n{"ops": 7, "x": "y"}\n'
    assert workloads.parse_metrics([p(json_key="ops", source="stderr")], "", err)[0] == {"m": 7.0}


def test_a_missing_metric_is_a_failure_that_says_what_was_looked_for() -> None:
    metrics, problem = workloads.parse_metrics([p(json_key="ops")], "no json here", "")
    assert metrics == {}
    assert problem is not None and "metric m: no key 'ops' in a JSON line in its stdout" in problem
    assert "no json here" in problem
