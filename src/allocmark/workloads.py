"""Workload catalog: typed parameters, and expansion of a template to argv."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

from allocmark import native, tomlfile
from allocmark.errors import UserError
from allocmark.model import Param, Params, Workload

_PLACEHOLDER = re.compile(r"\{(\w+)\}")
COMMAND = "command"  # name under which `allocmark try` stores a user's command


def builtin_catalog() -> Path:
    return Path(str(resources.files("allocmark") / "catalog" / "workloads.toml"))


def load_catalog() -> dict[str, Workload]:
    doc = tomlfile.load(builtin_catalog())
    doc.allow(["workload"])
    return {name: _workload(name, t) for name, t in doc.tables("workload")}


def _workload(name: str, t: tomlfile.TomlTable) -> Workload:
    t.allow(["description", "kind", "program", "args", "params", "env", "checks"])
    kind = t.get("kind", str, required=True)
    if kind != "native":
        raise t.error("kind", f'{kind!r} is not supported yet (use "native")')
    params = tuple(_param(p, pt) for p, pt in t.tables("params"))
    argv = ("{program}", *t.str_list("args"))
    known = {p.name for p in params} | {"program"}
    for arg in argv:
        for ref in _PLACEHOLDER.findall(arg):
            if ref not in known:
                raise t.error("args", f"{{{ref}}} is not a parameter of {name}")
    return Workload(
        name=name,
        description=t.get("description", str, ""),
        kind=kind,
        argv=argv,
        params=params,
        env=t.str_map("env"),
        program=t.get("program", str, required=True),
        checks=tuple(_check(t, c, known) for c in t.str_list("checks")),
    )


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
    """The argv of one run: every "{name}" replaced, never joined into a shell string."""
    if w.kind == COMMAND:
        return w.argv
    values = {k: _arg(v) for k, v in params} | {"program": str(native.program(w.program))}
    return tuple(_PLACEHOLDER.sub(lambda m: values[m.group(1)], arg) for arg in w.argv)


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
