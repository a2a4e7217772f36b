"""Workload catalog: typed parameters, and expansion of a template to argv."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

from allocmark import native, schemas, tomlfile
from allocmark.errors import UserError
from allocmark.model import AppRun, Env, MetricParser, Param, Params, Service, Workload
from allocmark.schemas.workloads import (
    Kind,
    MetricEntry,
    ParamEntry,
    ServiceEntry,
    WorkloadCatalog,
    WorkloadEntry,
)
from allocmark.workloads import inputs, traces

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
COMMAND = "command"  # name under which `allocmark try` stores a user's command


def builtin_catalog() -> Path:
    return Path(str(resources.files("allocmark") / "catalog" / "workloads.toml"))


def load_catalog() -> dict[str, Workload]:
    path = builtin_catalog()
    return parse_catalog(tomlfile.load(path), str(path))


def parse_catalog(data: dict[str, object], file: str) -> dict[str, Workload]:
    """A workload catalog document (parsed TOML) as workloads; errors name file and key."""
    doc = schemas.validate(WorkloadCatalog, dict(data), file)
    return {
        name: _workload(name, entry, _Where(file, name)) for name, entry in doc.workload.items()
    }


# Placeholders filled when the run starts, not when it is planned: a fresh
# directory per run and a free port for a server.
RUNTIME = ("tmpdir", "port")


@dataclasses.dataclass(frozen=True)
class _Where:
    """The entry being read, for errors that name the file and the key."""

    file: str
    name: str

    def error(self, key: str, problem: str) -> UserError:
        """`key`: dotted inside the entry, e.g. "service.client"."""
        return schemas.key_error(self.file, ("workload", self.name, *key.split(".")), problem)


def _workload(name: str, t: WorkloadEntry, at: _Where) -> Workload:
    params = tuple(_param(p, pt, at) for p, pt in t.params.items())
    known = {p.name for p in params} | {"program"}
    if t.kind is Kind.APP:
        return _app(name, t, params, known, at)
    if t.program is None:
        raise at.error("program", "is required")
    argv = ("{program}", *_strs(t.args))
    _check_refs(at, "args", argv, known)
    return Workload(
        name=name,
        description=t.description,
        kind=t.kind.value,
        argv=argv,
        params=params,
        env=_env(t, at, params),
        program=t.program,
        checks=tuple(_check(at, c, known) for c in _strs(t.checks)),
        fixed_time=_fixed_time(t, at, params),
        calls=_strs(t.calls),
    )


def _strs(value: str | list[str]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else tuple(value)


def _fixed_time(t: WorkloadEntry, at: _Where, params: tuple[Param, ...]) -> str:
    """The parameter that, when not 0, fixes the run's duration (larson's duration_ms)."""
    if t.fixed_time and t.fixed_time not in {p.name for p in params}:
        raise at.error("fixed_time", f"{t.fixed_time!r} is not a parameter of this workload")
    return t.fixed_time


def _env(t: WorkloadEntry, at: _Where, params: tuple[Param, ...]) -> Env:
    """The environment; its placeholders may name parameters only (filled when planned)."""
    env = tuple(sorted(t.env.items()))
    _check_refs(at, "env", [v for _, v in env], {p.name for p in params})
    return env


def _check_refs(at: _Where, key: str, argv: Sequence[str], known: set[str]) -> None:
    for arg in argv:
        for ref in _PLACEHOLDER.findall(arg):
            if ref not in known:
                raise at.error(key, f"{{{ref}}} is not a parameter of {at.name}")


def _app(
    name: str, t: WorkloadEntry, params: tuple[Param, ...], known: set[str], at: _Where
) -> Workload:
    """An application: argv of one command or of `steps`, parsers, maybe a service."""
    if t.input and t.input not in inputs.GENERATORS:
        raise at.error("input", f"unknown generator; known: {', '.join(inputs.GENERATORS)}")
    if t.input and "scale" not in {p.name for p in params}:
        raise at.error("input", "an input is sized by a `scale` parameter; declare one")
    known = known | {"data", *RUNTIME} | ({"input"} if t.input else set())
    steps = _steps(t, at)
    argv = steps[0] if len(steps) == 1 else tuple(w for step in steps for w in step)
    _check_refs(at, "args", argv, known)
    service = _service(t.service, at, known) if t.service else None
    executables = [step[0] for step in steps] + ([service.client[0]] if service else [])
    return Workload(
        name=name,
        description=t.description,
        kind="app",
        argv=argv,
        params=params,
        env=_env(t, at, params),
        program=steps[0][0],
        checks=tuple(_check(at, c, known) for c in _strs(t.checks)),
        packages=_strs(t.packages),
        needs=tuple(dict.fromkeys(executables)),
        input=t.input,
        app=AppRun(
            parsers=tuple(_parser(m, mt, at) for m, mt in t.metrics.items()),
            service=service,
            steps=tuple(len(step) for step in steps) if len(steps) > 1 else (),
        ),
    )


def _steps(t: WorkloadEntry, at: _Where) -> list[tuple[str, ...]]:
    """`program` + `args`, or `steps`: several commands run one after another."""
    if t.steps is None:
        if t.program is None:
            raise at.error("program", "is required")
        return [(t.program, *_strs(t.args))]
    if t.program is not None or t.args:
        raise at.error("steps", "give either program and args, or steps (one argv per step)")
    if not t.steps or not all(t.steps):
        raise at.error("steps", 'expected a list of argv lists, e.g. [["vips", "rot", ...], ...]')
    return [tuple(s) for s in t.steps]


def _service(t: ServiceEntry, at: _Where, known: set[str]) -> Service:
    client = _strs(t.client)
    if not client:
        raise at.error(
            "service.client", "is required: the argv of the program that drives the server"
        )
    _check_refs(at, "service", client, known)
    if not any("{port}" in w for w in client):
        raise at.error("service.client", "must pass {port} to the client")
    if t.stop_signal not in signal.Signals.__members__:
        raise at.error(
            "service.stop_signal", f"{t.stop_signal!r} is not a signal name such as SIGTERM"
        )
    return Service(client=client, stop_signal=t.stop_signal, ready_timeout=float(t.ready_timeout))


def _parser(name: str, t: MetricEntry, at: _Where) -> MetricParser:
    if bool(t.regex) == bool(t.json_key):
        raise at.error(
            f"metrics.{name}", "give exactly one of regex (group 1 is the number) or json_key"
        )
    if t.regex:
        try:
            groups = re.compile(t.regex, re.MULTILINE).groups
        except re.error as e:
            why = f"invalid regular expression: {e}"
            raise at.error(f"metrics.{name}.regex", why) from None
        if groups < 1:
            raise at.error(
                f"metrics.{name}.regex", "needs a group around the number, e.g. '([0-9.]+) ops/s'"
            )
    return MetricParser(
        name=name,
        regex=t.regex,
        json_key=t.json_key,
        combine=t.combine.value,
        source=t.source.value,
    )


def _check(at: _Where, text: str, known: set[str]) -> tuple[str, str, str]:
    m = re.fullmatch(r"\s*(\w+)\s*(<=|<)\s*(\w+)\s*", text)
    if not m or not {m.group(1), m.group(3)} <= known:
        raise at.error("checks", f"{text!r} is not 'PARAM <= PARAM' or 'PARAM < PARAM'")
    return m.group(1), m.group(2), m.group(3)


def _param(name: str, t: ParamEntry, at: _Where) -> Param:
    kind = "bool" if isinstance(t.default, bool) else "int" if isinstance(t.default, int) else "str"
    choices = _strs(t.choices)
    if choices and t.default not in choices:
        raise at.error(
            f"params.{name}.default", f"{t.default!r} is not one of the choices {list(choices)}"
        )
    if t.file and kind != "str":
        raise at.error(f"params.{name}.file", "a file parameter's default is a string")
    return Param(
        name=name,
        kind=kind,
        default=t.default,
        help=t.help,
        minimum=t.min,
        maximum=t.max,
        choices=choices,
        file=t.file.value,
    )


def command_workload(argv: Sequence[str], env: Env = ()) -> Workload:
    """A user's own command (`allocmark try`): measured from outside only; `env`: the
    variables the user gave it (`--env`)."""
    return Workload(
        name=COMMAND, description="user command", kind="command", argv=tuple(argv), env=env
    )


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def parse_env(given: Sequence[str]) -> Env:
    """`--env NAME=VALUE` values, each checked; a name given twice is refused."""
    out: dict[str, str] = {}
    for item in given:
        name, eq, value = item.partition("=")
        if not eq or not _NAME.fullmatch(name):
            raise UserError(f"--env {item!r}: give NAME=VALUE, e.g. --env PYTHONMALLOC=malloc")
        if name in out:
            raise UserError(f"--env {name}: given twice; give each variable once")
        if name == "LD_PRELOAD":  # it was dropped without a word: the allocator's own
            raise UserError(
                f"--env {item!r}: allocmark sets LD_PRELOAD to the allocator under test; "
                f"measure your library as an allocator of its own: -a mine={value or 'PATH'}"
            )
        out[name] = value
    return tuple(out.items())


def check_command(argv: Sequence[str]) -> None:
    """A command that cannot start is refused before any run, as a shell would refuse
    it: a name without "/" is looked up in PATH (the launcher's execvp does the same),
    a path must be an executable file."""
    if not argv or not argv[0]:
        raise UserError("no command: give it after --, e.g. `allocmark try -- ./my-program`")
    name = argv[0]
    if "/" not in name:
        if shutil.which(name) is None:
            raise UserError(
                f"{name}: command not found (searched PATH); give its path, e.g. ./" + name
            )
        return
    path = Path(name)
    if not path.exists():
        raise UserError(f"{name}: command not found (no such file)")
    if path.is_dir() or not os.access(path, os.X_OK):
        what = "a directory" if path.is_dir() else "not executable"
        fix = "" if path.is_dir() else f" (chmod +x {name}, or run it through its interpreter)"
        raise UserError(f"{name}: cannot run it: {what}{fix}")


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


INT64 = 2**63 - 1


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
        if abs(number) > INT64:  # no program reads it: its argv parser would wrap or refuse
            raise UserError(
                f"{where}: parameter {p.name} = {value} is beyond a 64-bit integer "
                f"(at most {INT64:,}); give a smaller value"
            )
        return number
    if p.file:
        return _file(p, str(value), where)
    return str(value)


def _file(p: Param, value: str, where: str) -> str:
    """A file parameter's value: the file checked (a trace's header and summary), as
    an absolute path."""
    if not value:
        raise UserError(
            f"{where}: parameter {p.name} names the {p.file} to use: give -p {p.name}=FILE "
            f"({traces.HOW})"
        )
    return str(traces.read(Path(value).resolve()).path)


def expand(w: Workload, params: Params) -> tuple[str, ...]:
    """The argv of one run: every "{name}" replaced, never joined into a shell string.
    An application's executables become absolute paths; "{tmpdir}" and "{port}" stay
    for the executor."""
    if w.kind == COMMAND:
        return w.argv
    values = {k: _arg(v) for k, v in params}
    for p in w.params:  # a file the run reads: where its identity can read it
        if p.file and values.get(p.name):
            values[p.name] = str(traces.staged(Path(values[p.name])))
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
