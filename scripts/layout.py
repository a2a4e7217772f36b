"""The repository's tree, one line per folder, for docs/layout.md: read from the
package itself (each subpackage's `__init__` docstring, each top-level module's)
and from native/README.md, so the page cannot drift (tests/test_docs.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "allocmark"
WIDTH = 22  # the name column


SAY = 76  # characters of a folder's line


def first_sentence(doc: str) -> str:
    """The docstring's first sentence; past SAY characters, its part before the first
    colon or parenthesis, else its first words."""
    text = " ".join(doc.split())
    found = re.match(r"(.+?[.?])(\s|$)", text)
    line = (found.group(1) if found else text).rstrip(".")
    if len(line) > SAY:
        line = re.split(r": | \(", line, maxsplit=1)[0]
    if len(line) > SAY:
        line = line[:SAY].rsplit(" ", 1)[0] + " …"
    return line


def _doc(path: Path) -> str:
    return ast.get_docstring(ast.parse(path.read_text())) or ""


def python_lines() -> list[str]:
    lines = ["src/allocmark/"]
    for path in sorted(PACKAGE.glob("*.py")):
        if doc := _doc(path):
            lines.append(f"  {path.name:<{WIDTH}}{first_sentence(doc)}")
    for folder in sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()):
        doc = _doc(folder / "__init__.py") or "(data files)"
        lines.append(f"  {folder.name + '/':<{WIDTH}}{first_sentence(doc)}")
    return lines


def native_lines() -> list[str]:
    said = dict(
        re.findall(r"^- `([\w-]+)/`: (.+)$", (ROOT / "native" / "README.md").read_text(), re.M)
    )
    lines = ["native/"]
    for folder in sorted(p.name for p in (ROOT / "native").iterdir() if p.is_dir()):
        said_line = said.get(folder, "(not described in native/README.md)")
        lines.append(f"  {folder + '/':<{WIDTH}}{said_line}")
    return lines


def tree() -> str:
    return "\n".join(python_lines() + native_lines()) + "\n"


def missing() -> list[str]:
    """Folders without their line: a new package without a docstring, a native folder
    without its README line."""
    return [
        line.split()[0]
        for line in python_lines() + native_lines()
        if line.endswith("(not described in native/README.md)")
    ]
