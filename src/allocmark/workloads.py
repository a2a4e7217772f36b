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
    t.allow(["description", "kind", "program", "args", "params", "env"])
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
    )


def _param(name: str, t: tomlfile.TomlTable) -> Param:
    t.allow(["default", "min", "help"])
    default = t.data.get("default")
    if not isinstance(default, int | str) or isinstance(default, bool):
        raise t.error("default", "is required: an integer or a string")
    return Param(
        name=name,
        kind="int" if isinstance(default, int) else "str",
        default=default,
        help=t.get("help", str, ""),
        minimum=t.get("min", int),
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
    return tuple((p.name, _coerce(p, given.get(p.name, p.default), where)) for p in w.params)


def _coerce(p: Param, value: int | str, where: str) -> int | str:
    if p.kind == "int":
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise UserError(
                f"{where}: parameter {p.name} expects an integer, got {value!r}"
            ) from None
        if p.minimum is not None and number < p.minimum:
            raise UserError(f"{where}: parameter {p.name} must be >= {p.minimum}, got {number}")
        return number
    return str(value)


def expand(w: Workload, params: Params) -> tuple[str, ...]:
    """The argv of one run: every "{name}" replaced, never joined into a shell string."""
    if w.kind == COMMAND:
        return w.argv
    values = {k: str(v) for k, v in params} | {"program": str(native.program(w.program))}
    return tuple(_PLACEHOLDER.sub(lambda m: values[m.group(1)], arg) for arg in w.argv)
