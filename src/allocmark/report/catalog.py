"""The allocator catalog in the terminal: `allocmark allocators` (one screen, a line
per entry) and `allocmark allocators -a NAME` (each entry in full)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from rich import box
from rich.console import Console
from rich.table import Table

from allocmark.model import Status, Verified
from allocmark.text import cell as _t

_STATUS_STYLE = {
    Status.OK: "green",
    Status.PARTIAL: "yellow",
    Status.MISSING: "dim",
    Status.BROKEN: "bold red",
}


def allocators(console: Console, verified: Sequence[Verified]) -> None:
    """Verification in full: a row per allocator with its library, sha256 and notes."""
    table = Table(title="Allocators", title_justify="left")
    for col in ("name", "status", "version", "library", "sha256", "notes"):
        table.add_column(col, overflow="fold")
    for v in verified:
        env = " ".join(f"{k}={val}" for k, val in v.spec.env)
        cost = v.spec.recipe.forwarding if v.spec.recipe and v.usable else ""
        baseline = "baseline" if v.spec.baseline else ""
        notes = "; ".join(x for x in (v.reason, env, baseline, cost) if x)
        status = "[dim]not built[/]" if _unbuilt(v) else _status(v)
        table.add_row(
            _t(v.spec.name),
            status,
            _t(v.version or ""),
            _t(_home(v.library or "")),
            (v.sha256 or "")[:12],
            _t(notes),
        )
    console.print(table)


def catalog(console: Console, verified: Sequence[Verified], every: bool = True) -> None:
    """The catalog on one screen: a line per entry (its variants on its line), by family;
    unless `every`, a line per recipe for all its versions (built or not), so that
    every family fits in 40 lines. What many entries share (partial, not built, debug)
    is said once, under the table."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True, show_edge=False)
    rows = allocator_rows(verified, every)
    widest = _catalog_widths(rows)
    for col, width in widest.items():
        table.add_column(col, no_wrap=True, overflow="ellipsis", width=width)
    # rich would squeeze the fixed columns to fit a long note: the note is cut instead.
    room = max(20, console.width - sum(widest.values()) - 2 * len(widest) - 2)
    table.add_column("notes", no_wrap=True, overflow="ellipsis", max_width=room)
    for family, lines in rows.items():
        for i, line in enumerate(lines):
            table.add_row(
                _t(family if i == 0 else ""),
                _t(line.name),
                line.status,
                _t(line.version),
                _t(" ".join(line.variants)),
                _t(line.notes),
            )
    console.print(table)
    for text in _catalog_footnotes(verified, rows, every):
        console.print(text, style="dim", highlight=False)


@dataclass(frozen=True)
class Line:
    """A line of the catalog: an entry with its variants, or (`group`) every version
    of a recipe folded into one."""

    first: Verified
    variants: tuple[str, ...] = ()
    group: tuple[Verified, ...] = ()

    @property
    def name(self) -> str:
        return f"{_recipe_family(self.first)}@*" if self.group else self.first.spec.name

    @property
    def built(self) -> tuple[Verified, ...]:
        return tuple(v for v in self.group if not _unbuilt(v))

    @property
    def status(self) -> str:
        if not self.group:
            return "[dim]not built[/]" if _unbuilt(self.first) else _status(self.first)
        found = {v.status for v in self.built}
        if not found:
            return "[dim]not built[/]"
        return _status(self.built[0]) if len(found) == 1 else "[yellow]mixed[/]"

    @property
    def version(self) -> str:
        if not self.group:
            return _short_version(self.first)
        versions = list(dict.fromkeys(_short_version(v) for v in self.group))
        return versions[0] if len(versions) == 1 else f"{versions[0]}…{versions[-1]}"

    @property
    def notes(self) -> str:
        if not self.group:
            return _short_notes(self.first)
        built, n = self.built, len(self.group)
        parts = [f"{len(built)} of {n} built" if built else f"{n} version{'s' * (n > 1)}"]
        parts += [
            f"{s.value}: {', '.join(_short_version(v) for v in built if v.status is s)}"
            for s in (Status.BROKEN, Status.PARTIAL, Status.OK)
            if any(v.status is s for v in built)
        ]
        if len(built) < n:
            parts.append(f"allocmark alloc build {self.name}")
        return "; ".join(parts)


Entries = dict[str, list[Line]]


def _catalog_widths(rows: Entries) -> dict[str, int]:
    """Every column but the notes as wide as its widest cell: the notes give way."""
    lines = [e for es in rows.values() for e in es]
    return {
        "family": max(map(len, rows), default=6),
        "entry": max((len(x.name) for x in lines), default=5),
        "status": 9,
        "version": min(18, max((len(x.version) for x in lines), default=7)),
        "variants": max((len(" ".join(x.variants)) for x in lines), default=8),
    }


def allocator_rows(verified: Sequence[Verified], every: bool) -> Entries:
    """family -> its lines in catalog order: an entry with its variants; unless
    `every`, the versions of a recipe that has several as one folded line."""
    entries: dict[str, tuple[Verified, list[str]]] = {}
    for v in verified:
        base, _, variant = v.spec.name.partition(":")
        if variant and base in entries:  # on its base's line
            entries[base][1].append(":" + variant)
        elif not variant:
            entries[base] = (v, [])
    groups: dict[str, list[Verified]] = {}
    for v, _ in entries.values():
        if v.spec.recipe and not every:
            groups.setdefault(_recipe_family(v), []).append(v)
    rows: Entries = {}
    shown: set[str] = set()
    for v, variants in entries.values():
        group = groups.get(_recipe_family(v), []) if v.spec.recipe else []
        if len(group) > 1 or (group and _unbuilt(v)):
            if _recipe_family(v) in shown:
                continue
            shown.add(_recipe_family(v))
            kept = sorted({x for g in group for x in entries[g.spec.name][1]})
            rows.setdefault(_family(v), []).append(Line(v, tuple(kept), tuple(group)))
        else:
            rows.setdefault(_family(v), []).append(Line(v, tuple(variants)))
    return rows


def _recipe_family(v: Verified) -> str:
    """The name a selection gives every version of (FAMILY@*)."""
    return v.spec.recipe.family if v.spec.recipe else _family(v)


def _family(v: Verified) -> str:
    return v.spec.family_name


def _unbuilt(v: Verified) -> bool:
    return v.spec.recipe is not None and v.status is Status.MISSING


def _status(v: Verified) -> str:
    return f"[{_STATUS_STYLE[v.status]}]{v.status.value}[/]"


def _short_version(v: Verified) -> str:
    recipe = v.spec.recipe
    if recipe is not None:
        return recipe.upstream_version
    text = v.version or ""
    if v.spec.package and text.startswith(v.spec.package + " "):
        # dpkg's "PACKAGE [EPOCH:]UPSTREAM-REVISION": the upstream version
        return text[len(v.spec.package) + 1 :].split(":", 1)[-1].rsplit("-", 1)[0]
    return text.split("-0-g")[0]  # jemalloc's "5.3.0-0-g54eaed…"


def _short_notes(v: Verified) -> str:
    spec, recipe = v.spec, v.spec.recipe
    notes = [
        "baseline" if spec.baseline else "",
        spec.role if not spec.recommendable else "",
        "GPL" if "GPL" in spec.license else "",
        f"lacks {', '.join(v.lacks)}" if v.lacks else "",
        v.reason if v.status in (Status.BROKEN, Status.MISSING) and not _unbuilt(v) else "",
        recipe.note if recipe else "",
        # where another glibc lives is the cache's business; that it is, the note's
        " ".join(f"{k}={val}" for k, val in spec.env if k != "AM_RUN_GLIBC"),
    ]
    return "; ".join(n for n in notes if n)


def _catalog_footnotes(verified: Sequence[Verified], rows: Entries, every: bool) -> list[str]:
    """Each under 80 columns: the listing fits a terminal's 40 lines."""
    entries = sum(len(e) for e in rows.values())
    more = "" if every else "; --all: a line each"
    lines = [
        f"{len(rows)} families, {len(verified)} entries with their variants "
        f"({entries} lines{more})."
    ]
    if any(v.status is Status.PARTIAL for v in verified):
        lines.append("partial: glibc serves what it lacks; a program calling it mixes two heaps.")
    if any(_unbuilt(v) for v in verified):
        lines.append(
            "not built: `allocmark alloc build NAME` (FAMILY@*: every version), or first use."
        )
    if any(not v.spec.recommendable for v in verified):
        lines.append('debug: the hardening battery\'s reference; not in "all", never recommended.')
    if any("GPL" in v.spec.license for v in verified):
        lines.append("GPL: a library built from it is under the GPL.")
    lines.append("`allocmark allocators -a NAME`: its library, sha256, Rust layer's cost.")
    return lines


def _home(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if home != "/" and path.startswith(home + "/") else path
