"""Reading catalog and suite TOML files with errors that name file, key and fix."""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from allocmark.errors import UserError


def load(path: Path) -> TomlTable:
    """Parse `path`; a missing or malformed file is a UserError naming it."""
    try:
        with path.open("rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a TOML file") from None
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: invalid TOML: {e}") from None
    return TomlTable(data, str(path), "")


@dataclass(frozen=True)
class TomlTable:
    """A TOML table that knows where it came from, for error messages."""

    data: dict[str, Any]
    file: str
    where: str  # dotted key path of this table inside the file, "" at top level

    def error(self, key: str, problem: str) -> UserError:
        at = f"{self.where}.{key}" if self.where else key
        return UserError(f"{self.file}: key '{at}': {problem}")

    def allow(self, keys: Iterable[str]) -> None:
        allowed = sorted(keys)
        for key in self.data:
            if key not in allowed:
                raise self.error(key, f"unknown key (allowed: {', '.join(allowed)})")

    def get(self, key: str, kind: type, default: Any = None, required: bool = False) -> Any:
        if key not in self.data:
            if required:
                raise self.error(key, "is required")
            return default
        value = self.data[key]
        # bool is an int in Python; TOML keeps them apart, and so do we.
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise self.error(key, f"expected {_kind_name(kind)}, got {value!r}")
        return value

    def str_list(self, key: str) -> tuple[str, ...]:
        value = self.data.get(key, [])
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, f"expected a string or a list of strings, got {value!r}")
        return tuple(value)

    def str_map(self, key: str) -> tuple[tuple[str, str], ...]:
        value = self.data.get(key, {})
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise self.error(
                key, f'expected a table of strings, e.g. {{ NAME = "value" }}, got {value!r}'
            )
        return tuple(sorted(value.items()))

    def table(self, key: str) -> TomlTable:
        value = self.get(key, dict, default={})
        return TomlTable(value, self.file, f"{self.where}.{key}" if self.where else key)

    def tables(self, key: str) -> Iterator[tuple[str, TomlTable]]:
        """The sub-tables of table `key`, in file order."""
        outer = self.table(key)
        for name in outer.data:
            yield name, outer.table(name)

    def array_of_tables(self, key: str) -> Iterator[TomlTable]:
        value = self.get(key, list, default=[])
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise self.error(f"{key}[{i}]", "expected a table")
            yield TomlTable(item, self.file, f"{key}[{i}]")


def _kind_name(kind: type) -> str:
    return {
        str: "a string",
        int: "an integer",
        bool: "true or false",
        list: "a list",
        dict: "a table",
        float: "a number",
    }.get(kind, kind.__name__)
