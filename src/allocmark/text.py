"""Stored or foreign text made safe to show: no terminal escapes, no line breaks of its own."""

from __future__ import annotations

_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F]}


def printable(text: str) -> str:
    """A user's string (a name, a path, a parameter value, a program's output) as it
    can be shown in a terminal: control characters, ANSI escapes among them, written
    as \\xNN."""
    return text.translate(_CONTROL)
