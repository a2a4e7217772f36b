"""Workload catalog: typed parameters, and expansion of a template to argv."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import shutil
import signal
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

from allocmark import inputs, native, tomlfile
from allocmark.errors import UserError
from allocmark.model import AppRun, Env, MetricParser, Param, Params, Service, Workload

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
COMMAND = "command"  # name under which `allocmark try` stores a user's command


def builtin_catalog() -> Path:
    return Path(str(resources.files("allocmark") / "catalog" / "workloads.toml"))


def load_catalog() -> dict[str, Workload]:
    doc = tomlfile.load(builtin_catalog())
    doc.allow(["workload"])
    return {name: _workload(name, t) for name, t in doc.tables("workload")}


# Placeholders filled when the run starts, not when it is planned: a fresh
# directory per run and a free port for a server.
RUNTIME = ("tmpdir", "port")
_APP_KEYS = ["packages", "input", "steps", "metrics", "service"]


def _workload(name: str, t: tomlfile.TomlTable) -> Workload:
    t.allow(["description", "kind", "program", "args", "params", "env", "checks", "fixed_time",
             *_APP_KEYS])  # fmt: skip
    kind = t.get("kind", str, required=True)
    if kind not in ("native", "app"):
        raise t.error("kind", f'{kind!r} is not a workload kind (use "native" or "app")')
    params = tuple(_param(p, pt) for p, pt in t.tables("params"))
    known = {p.name for p in params} | {"program"}
    if kind == "app":
        return _app(name, t, params, known)
    argv = ("{program}", *t.str_list("args"))
    _check_refs(t, "args", name, argv, known)
    return Workload(
        name=name,
        description=t.get("description", str, ""),
        kind=kind,
        argv=argv,
        params=params,
        env=_env(t, name, params),
        program=t.get("program", str, required=True),
        checks=tuple(_check(t, c, known) for c in t.str_list("checks")),
        fixed_time=_fixed_time(t, params),
    )


def _fixed_time(t: tomlfile.TomlTable, params: tuple[Param, ...]) -> str:
    """The parameter that, when not 0, fixes the run's duration (larson's duration_ms)."""
    name: str = t.get("fixed_time", str, "")
    if name and name not in {p.name for p in params}:
        raise t.error("fixed_time", f"{name!r} is not a parameter of this workload")
    return name


def time_is_fixed(fixed_time: dict[str, str], workload: str, params: Params) -> bool:
    """Is this cell's time set by a parameter (a duration), so that it is no result?"""
    name = fixed_time.get(workload, "")
    return bool(name) and dict(params).get(name, 0) not in (0, "0")


def _env(t: tomlfile.TomlTable, name: str, params: tuple[Param, ...]) -> Env:
    """The environment; its placeholders may name parameters only (filled when planned)."""
    env = t.str_map("env")
    _check_refs(t, "env", name, [v for _, v in env], {p.name for p in params})
    return env


def _check_refs(
    t: tomlfile.TomlTable, key: str, name: str, argv: Sequence[str], known: set[str]
) -> None:
    for arg in argv:
        for ref in _PLACEHOLDER.findall(arg):
            if ref not in known:
                raise t.error(key, f"{{{ref}}} is not a parameter of {name}")


def _app(name: str, t: tomlfile.TomlTable, params: tuple[Param, ...], known: set[str]) -> Workload:
    """An application: argv of one command or of `steps`, parsers, maybe a service."""
    generator = t.get("input", str, "")
    if generator and generator not in inputs.GENERATORS:
        raise t.error("input", f"unknown generator; known: {', '.join(inputs.GENERATORS)}")
    if generator and "scale" not in {p.name for p in params}:
        raise t.error("input", "an input is sized by a `scale` parameter; declare one")
    known = known | {"data", *RUNTIME} | ({"input"} if generator else set())
    steps = _steps(t)
    argv = steps[0] if len(steps) == 1 else tuple(w for step in steps for w in step)
    _check_refs(t, "args", name, argv, known)
    service = _service(t.table("service"), name, known) if "service" in t.data else None
    executables = [step[0] for step in steps] + ([service.client[0]] if service else [])
    return Workload(
        name=name,
        description=t.get("description", str, ""),
        kind="app",
        argv=argv,
        params=params,
        env=_env(t, name, params),
        program=steps[0][0],
        checks=tuple(_check(t, c, known) for c in t.str_list("checks")),
        packages=t.str_list("packages"),
        needs=tuple(dict.fromkeys(executables)),
        input=generator,
        app=AppRun(
            parsers=tuple(_parser(m, mt) for m, mt in t.tables("metrics")),
            service=service,
            steps=tuple(len(step) for step in steps) if len(steps) > 1 else (),
        ),
    )


def _steps(t: tomlfile.TomlTable) -> list[tuple[str, ...]]:
    """`program` + `args`, or `steps`: several commands run one after another."""
    if "steps" not in t.data:
        return [(t.get("program", str, required=True), *t.str_list("args"))]
    if "program" in t.data or "args" in t.data:
        raise t.error("steps", "give either program and args, or steps (one argv per step)")
    raw = t.get("steps", list)
    if not raw or not all(isinstance(s, list) and s and all(isinstance(w, str) for w in s)
                          for s in raw):  # fmt: skip
        raise t.error("steps", 'expected a list of argv lists, e.g. [["vips", "rot", ...], ...]')
    return [tuple(s) for s in raw]


def _service(t: tomlfile.TomlTable, name: str, known: set[str]) -> Service:
    t.allow(["client", "stop_signal", "ready_timeout"])
    client = t.str_list("client")
    if not client:
        raise t.error("client", "is required: the argv of the program that drives the server")
    _check_refs(t, "client", name, client, known)
    if not any("{port}" in w for w in client):
        raise t.error("client", "must pass {port} to the client")
    stop = t.get("stop_signal", str, "SIGTERM")
    if stop not in signal.Signals.__members__:
        raise t.error("stop_signal", f"{stop!r} is not a signal name such as SIGTERM")
    return Service(client=client, stop_signal=stop,
                   ready_timeout=float(t.get("ready_timeout", int, 30)))  # fmt: skip


def _parser(name: str, t: tomlfile.TomlTable) -> MetricParser:
    t.allow(["regex", "json_key", "combine", "source"])
    regex, key = t.get("regex", str, ""), t.get("json_key", str, "")
    if bool(regex) == bool(key):
        raise t.error("regex", "give exactly one of regex (group 1 is the number) or json_key")
    if regex:
        try:
            if re.compile(regex, re.MULTILINE).groups < 1:
                raise t.error("regex", "needs a group around the number, e.g. '([0-9.]+) ops/s'")
        except re.error as e:
            raise t.error("regex", f"invalid regular expression: {e}") from None
    combine = t.get("combine", str, "last")
    if combine not in ("last", "sum", "hmean"):
        raise t.error("combine", f"{combine!r}: choose last, sum or hmean")
    source = t.get("source", str, "stdout")
    if source not in ("stdout", "stderr"):
        raise t.error("source", f"{source!r}: choose stdout or stderr")
    return MetricParser(name=name, regex=regex, json_key=key, combine=combine, source=source)


def _check(t: tomlfile.TomlTable, text: str, known: set[str]) -> tuple[str, str, str]:
    m = re.fullmatch(r"\s*(\w+)\s*(<=|<)\s*(\w+)\s*", text)
    if not m or not {m.group(1), m.group(3)} <= known:
        raise t.error("checks", f"{text!r} is not 'PARAM <= PARAM' or 'PARAM < PARAM'")
    return m.group(1), m.group(2), m.group(3)


def _param(name: str, t: tomlfile.TomlTable) -> Param:
    t.allow(["default", "min", "max", "help", "choices"])
    default = t.data.get("default")
    if not isinstance(default, int | str):
        raise t.error("default", "is required: an integer, a string or true/false")
    kind = "bool" if isinstance(default, bool) else "int" if isinstance(default, int) else "str"
    choices = t.str_list("choices")
    if choices and default not in choices:
        raise t.error("default", f"{default!r} is not one of the choices {list(choices)}")
    return Param(
        name=name,
        kind=kind,
        default=default,
        help=t.get("help", str, ""),
        minimum=t.get("min", int),
        maximum=t.get("max", int),
        choices=choices,
    )


def command_workload(argv: Sequence[str]) -> Workload:
    """A user's own command (`allocmark try`): measured from outside only."""
    return Workload(name=COMMAND, description="user command", kind="command", argv=tuple(argv))


def resolve_params(w: Workload, given: Mapping[str, int | str], where: str) -> Params:
    """Defaults overlaid by `given`, each checked against its declared type."""
    by_name = {p.name: p for p in w.params}
    for key in given:
        if key not in by_name:
            allowed = ", ".join(by_name) or "none"
            raise UserError(f"{where}: {w.name} has no parameter {key!r} (parameters: {allowed})")
    params = tuple((p.name, _coerce(p, given.get(p.name, p.default), where)) for p in w.params)
    _check_relations(w, dict(params), where)
    return params


def _check_relations(w: Workload, values: dict[str, int | str], where: str) -> None:
    for left, op, right in w.checks:
        a, b = values[left], values[right]
        if not (a <= b if op == "<=" else a < b):  # type: ignore[operator]
            raise UserError(f"{where}: {w.name}: {left} ({a}) must be {op} {right} ({b})")


_TRUE = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _coerce(p: Param, value: int | str, where: str) -> int | str:
    if p.kind == "bool":
        flag = _TRUE.get(str(value).lower())
        if flag is None:
            raise UserError(f"{where}: parameter {p.name} expects true or false, got {value!r}")
        return flag
    if p.choices and str(value) not in p.choices:
        raise UserError(
            f"{where}: parameter {p.name} must be one of {', '.join(p.choices)}, got {value!r}"
        )
    if p.kind == "int":
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise UserError(
                f"{where}: parameter {p.name} expects an integer, got {value!r}"
            ) from None
        if p.minimum is not None and number < p.minimum:
            raise UserError(f"{where}: parameter {p.name} must be >= {p.minimum}, got {number}")
        if p.maximum is not None and number > p.maximum:
            raise UserError(f"{where}: parameter {p.name} must be <= {p.maximum}, got {number}")
        return number
    return str(value)


def expand(w: Workload, params: Params) -> tuple[str, ...]:
    """The argv of one run: every "{name}" replaced, never joined into a shell string.
    An application's executables become absolute paths; "{tmpdir}" and "{port}" stay
    for the executor."""
    if w.kind == COMMAND:
        return w.argv
    values = {k: _arg(v) for k, v in params}
    if w.kind == "native":
        values["program"] = str(native.program(w.program))
        return _fill(w.argv, values)
    return _resolved(w, _fill(w.argv, values | _app_values(w, dict(params))))


def expand_env(w: Workload, params: Params) -> Env:
    """The workload's environment, parameters filled in (VIPS_CONCURRENCY={threads})."""
    values = {k: _arg(v) for k, v in params}
    return tuple((k, _fill((v,), values)[0]) for k, v in w.env)


def expand_app(w: Workload, params: Params) -> AppRun:
    """The application's run-time part, its client's parameters filled in."""
    service = w.app.service
    if service is None:
        return w.app
    client = _fill(service.client, {k: _arg(v) for k, v in params} | _app_values(w, {}))
    client = (executable(client[0], w), *client[1:])
    return dataclasses.replace(w.app, service=dataclasses.replace(service, client=client))


def _fill(argv: Sequence[str], values: Mapping[str, str]) -> tuple[str, ...]:
    def one(m: re.Match[str]) -> str:
        return m.group(0) if m.group(1) in RUNTIME else values[m.group(1)]

    return tuple(_PLACEHOLDER.sub(one, arg) for arg in argv)


def _app_values(w: Workload, params: Mapping[str, int | str]) -> dict[str, str]:
    values = {"data": str(apps_dir())}
    if w.input and params:
        values["input"] = str(inputs.ensure(w.input, int(params["scale"])))
    return values


def _resolved(w: Workload, argv: tuple[str, ...]) -> tuple[str, ...]:
    """Each step's program as the absolute path that will run (recorded with the run)."""
    out, at = list(argv), 0
    for length in w.app.steps or (len(argv),):
        out[at] = executable(out[at], w)
        at += length
    return tuple(out)


def apps_dir() -> Path:
    """The scripts shipped for the script-language applications (ruby, python, lua)."""
    return Path(str(resources.files("allocmark") / "catalog" / "apps"))


def executable(name: str, w: Workload) -> str:
    """`name` on PATH (or as given, if absolute); a missing one is a UserError with the
    command that installs it."""
    found = shutil.which(name)  # an absolute path is checked as it is
    if not found:
        raise UserError(f"workload {w.name}: {name} is not installed; {install_hint(w)}")
    return found


def missing(w: Workload) -> list[str]:
    """The executables of an application that this machine lacks."""
    return [n for n in w.needs if not shutil.which(n)]


def install_hint(w: Workload) -> str:
    packages = " ".join(w.packages) or "the program"
    return f"install it with `sudo apt-get install {packages}` (or `make setup-apps`)"


def _arg(value: int | str) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def describe_params(w: Workload) -> list[str]:
    """One aligned line per parameter: name, type, default, help and limits."""
    lines = []
    for p in w.params:
        limits = [f"{p.minimum}.." if p.minimum is not None else ""]
        if p.maximum is not None:
            limits = [f"{p.minimum if p.minimum is not None else ''}..{p.maximum}"]
        if p.choices:
            limits = ["|".join(p.choices)]
        extra = f" ({limits[0]})" if limits[0] else ""
        lines.append(f"{p.name:<12} {p.kind:<4} default {_arg_text(p.default):<9} {p.help}{extra}")
    for left, op, right in w.checks:
        lines.append(f"requires {left} {op} {right}")
    return lines


def _arg_text(value: int | str) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# ---------------------------------------------------------------------------
# Metrics of an application, read from its output
# ---------------------------------------------------------------------------
def parse_metrics(
    parsers: Sequence[MetricParser], stdout: str, stderr: str
) -> tuple[dict[str, float], str | None]:
    """Each parser's number from the program's output; a missing one is a failure,
    not a silent gap in the report."""
    metrics: dict[str, float] = {}
    for p in parsers:
        text = stdout if p.source == "stdout" else stderr
        values = _json_values(text, p.json_key) if p.json_key else _regex_values(text, p.regex)
        if not values:
            what = f"key {p.json_key!r} in a JSON line" if p.json_key else f"/{p.regex}/"
            tail = text[-300:].strip().replace("\n", " | ")
            return {}, f"metric {p.name}: no {what} in its {p.source} (ends: {tail!r})"
        metrics[p.name] = _combine(values, p.combine)
    return metrics, None


def _regex_values(text: str, regex: str) -> list[float]:
    out = []
    for m in re.finditer(regex, text, re.MULTILINE):
        with contextlib.suppress(ValueError):
            out.append(float(m.group(1)))
    return out


def _json_values(text: str, key: str) -> list[float]:
    for line in reversed(text.splitlines()):
        if line.lstrip().startswith("{"):
            with contextlib.suppress(json.JSONDecodeError):
                value = json.loads(line).get(key)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    return [float(value)]
    return []


def _combine(values: list[float], how: str) -> float:
    if how == "sum":
        return sum(values)
    if how == "hmean":
        return len(values) / sum(1 / v for v in values) if all(v > 0 for v in values) else 0.0
    return values[-1]
