"""Stored or foreign text made safe to show: no terminal escapes, no line breaks of its own."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F]}


def printable(text: str) -> str:
    """A user's string (a name, a path, a parameter value, a program's output) as it
    can be shown in a terminal: control characters, ANSI escapes among them, written
    as \\xNN."""
    return text.translate(_CONTROL)


def cell(text: str) -> Text:
    """A user's string as a rich table cell: never read as markup, controls shown."""
    from rich.text import Text  # only where a table is drawn

    return Text(printable(text))


def suggest(word: str, known: Iterable[str]) -> str:
    """ " (did you mean 'jemalloc'?)" for a near miss among `known`, else "" (difflib's
    ratio, as git and pip suggest: a typo of a letter or two, not a guess)."""
    import difflib

    close = difflib.get_close_matches(word, list(known), n=3, cutoff=0.75)
    if not close:
        return ""
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)"
