"""Typed models of the files users write, of exchange files and of stored JSON.

Pydantic models: the files users write (suite.py, catalog.py, workloads.py,
settings.py, hardening.py, remedies.py), the runs export `compare` reads
(exchange.py) and the store's JSON columns (stored.py). A report's JSON export is
the report value's own image, and its schema is drawn from it (in report/).

The models validate the TOML, give the JSON Schema that `allocmark schema` prints
(so that an editor checks a suite as it is typed), and their errors become one
line naming the file, the key, the value and what is expected. Every stage may
import it.

May import: model, request, errors, interrupts.
Never: allocators, answer, api, cli, dispatchers, native, profile, report, run, stats,
store, verbs, workloads.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from allocmark import interrupts
from allocmark.errors import UserError

M = TypeVar("M", bound=BaseModel)


KINDS = ("suite", "catalog", "workloads", "settings", "runs")


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of the file kind `kind` (KINDS): suite, catalog, workloads,
    settings or runs (the runs export that `compare` reads)."""
    from allocmark.schemas.catalog import CatalogFile
    from allocmark.schemas.exchange import RunsExport
    from allocmark.schemas.settings import SettingsFile
    from allocmark.schemas.suite import SuiteFile
    from allocmark.schemas.workloads import WorkloadCatalog

    models: dict[str, type[BaseModel]] = {
        "suite": SuiteFile,
        "catalog": CatalogFile,
        "workloads": WorkloadCatalog,
        "settings": SettingsFile,
        "runs": RunsExport,
    }
    return models[kind].model_json_schema()


def validate(model: type[M], data: dict[str, Any], file: str) -> M:
    """`data` (a parsed TOML file) as `model`; the first problem as a UserError."""
    try:
        with interrupts.held():
            return model.model_validate(data)
    except ValidationError as e:
        raise error(file, _first(e.errors()), model) from None


_TYPES = {
    "bool": "true or false",
    "int": "an integer",
    "str": "a string",
    "float": "a number",
    "list[str]": "a list of strings",
    "dict[str,str]": "a table of strings",
}


def _first(errors: list[ErrorDetails]) -> ErrorDetails:
    """The first error; for a value that fits no member of a union (an int, a string
    or a boolean), one error that lists what the members accept."""
    first = errors[0]
    loc = first["loc"]
    if not loc or str(loc[-1]) not in _TYPES:
        return first
    tags = [str(e["loc"][-1]) for e in errors if e["loc"][:-1] == loc[:-1]]
    expected = " or ".join(dict.fromkeys(_TYPES.get(t, t) for t in tags))
    return ErrorDetails(
        type="union", loc=loc[:-1], msg=f"Expected {expected}", input=first.get("input")
    )


def key_path(loc: tuple[int | str, ...]) -> str:
    """('runs', 0, 'workload') -> 'runs[0].workload'."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def key_error(file: str, loc: tuple[int | str, ...], problem: str) -> UserError:
    return UserError(f"{file}: key '{key_path(loc)}': {problem}")


def error(file: str, detail: ErrorDetails, model: type[BaseModel]) -> UserError:
    # Drop dict-key markers and union members' tags ("list[str]") from the key path.
    loc = tuple(p for p in detail["loc"] if p != "[key]" and str(p) not in _TYPES)
    kind, value, ctx = detail["type"], detail.get("input"), detail.get("ctx", {})
    if kind == "missing":
        problem = "is required"
    elif kind == "extra_forbidden":
        allowed = _fields_at(model, loc[:-1])
        problem = f"unknown key (allowed: {', '.join(allowed)})"
    elif kind in ("greater_than_equal", "greater_than"):
        bound = ctx.get("ge", ctx.get("gt"))
        least = "at least" if kind.endswith("equal") else "more than"
        problem = f"must be {least} {bound}, got {value!r}"
    elif kind == "string_pattern_mismatch" and "[key]" in detail["loc"]:
        problem = f"name {value!r} may only use letters, digits and _ . + -"
    elif kind == "value_error":  # our validators' own words
        shown = "" if isinstance(value, dict | list) else f", got {json.dumps(value)}"
        problem = detail["msg"].removeprefix("Value error, ") + shown
    elif kind == "enum":
        problem = f"{value!r}: choose {ctx.get('expected', '')}"
    elif kind == "string_pattern_mismatch" and (expected := _expected(model, loc)):
        problem = f"{value!r}: expected {expected}"
    else:
        problem = f"{detail['msg'][0].lower()}{detail['msg'][1:]}, got {json.dumps(value)}"
    return key_error(file, loc, problem)


def _fields_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The keys allowed in the table at `loc`."""
    current = _model_at(model, loc)
    return sorted(current.model_fields) if current else []


def _expected(model: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """What the field at `loc` accepts, in words (its `expected` schema extra)."""
    parent = _model_at(model, loc[:-1])
    field = parent.model_fields.get(str(loc[-1])) if parent and loc else None
    extra = field.json_schema_extra if field else None
    return str(extra.get("expected", "")) if isinstance(extra, dict) else ""


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model of the table at `loc`, walking through lists and dicts."""
    current: Any = model
    for part in loc:
        if (
            isinstance(current, type)
            and issubclass(current, BaseModel)
            and isinstance(part, str)
            and part in current.model_fields
        ):
            current = current.model_fields[part].annotation
        current = _inner_model(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _inner_model(tp: Any) -> Any:
    """The model inside list[M], dict[str, M], M | None (or tp itself)."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    for arg in (
        typing.get_args(tp) if typing.get_origin(tp) or isinstance(tp, types.UnionType) else ()
    ):
        found = _inner_model(arg)
        if isinstance(found, type) and issubclass(found, BaseModel):
            return found
    return tp
