"""The summary export held to its JSON Schema (`allocmark schema summary`), as a program
that reads exports would hold it: by the schema, with a JSON Schema validator."""

from __future__ import annotations

from typing import Any

import jsonschema

from allocmark import api


def check_summary(doc: dict[str, Any]) -> None:
    """Raise jsonschema's ValidationError naming the first place `doc` departs from it."""
    jsonschema.validate(doc, api.json_schema("summary"))
