"""The allocator catalog in the terminal: `allocmark allocators` (one screen, a line
per entry) and `allocmark allocators -a NAME` (each entry in full)."""

from __future__ import annotations

import os
from collections.abc import Sequence

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
        table.add_row(_t(v.spec.name), status, _t(v.version or ""),
                      _t(_home(v.library or "")), (v.sha256 or "")[:12], _t(notes))  # fmt: skip
    console.print(table)


def catalog(console: Console, verified: Sequence[Verified], every: bool = True) -> None:
    """The catalog on one screen: a line per entry (its variants on its line), by family;
    unless `every`, a line per family for the versions not built yet. What many entries
    share (partial, not built, debug) is said once, under the table."""
    table = Table(title="Allocators", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)  # fmt: skip
    rows = allocator_rows(verified, every)
    widest = _catalog_widths(rows)
    for col, width in widest.items():
        table.add_column(col, no_wrap=True, overflow="ellipsis", width=width)
    # rich would squeeze the fixed columns to fit a long note: the note is cut instead.
    room = max(20, console.width - sum(widest.values()) - 2 * len(widest) - 2)
    table.add_column("notes", no_wrap=True, overflow="ellipsis", max_width=room)
    for family, entries in rows.items():
        for i, (v, variants, unbuilt) in enumerate(entries):
            name = f"{_recipe_family(v)}@*" if unbuilt else v.spec.name
            status = "[dim]not built[/]" if unbuilt or _unbuilt(v) else _status(v)
            version = _count(unbuilt) if unbuilt else _short_version(v)
            table.add_row(_t(family if i == 0 else ""), _t(name), status, _t(version),
                          _t(" ".join(variants)), _t(_short_notes(v, unbuilt)))  # fmt: skip
    console.print(table)
    for line in _catalog_footnotes(verified, rows):
        console.print(line, style="dim", highlight=False)


Entries = dict[str, list[tuple[Verified, list[str], int]]]


def _catalog_widths(rows: Entries) -> dict[str, int]:
    """Every column but the notes as wide as its widest cell: the notes give way."""
    lines = [e for es in rows.values() for e in es]
    return {
        "family": max(map(len, rows), default=6),
        "entry": max((len(v.spec.name) for v, _, _ in lines), default=5),
        "status": 9,
        "version": min(
            18, max((len(_count(n) if n else _short_version(v)) for v, _, n in lines), default=7)
        ),
        "variants": max((len(" ".join(variants)) for _, variants, _ in lines), default=8),
    }


def allocator_rows(verified: Sequence[Verified], every: bool) -> Entries:
    """family -> (entry, its variants, 0) in catalog order; unless `every`, the family's
    unbuilt versions as one (first unbuilt entry, [], how many)."""
    rows: Entries = {}
    bases: dict[str, tuple[Verified, list[str], int]] = {}
    unbuilt: dict[str, int] = {}
    for v in verified:
        family = _family(v)
        base, _, variant = v.spec.name.partition(":")
        if variant:  # on its base's line (none: the base is folded into FAMILY@*)
            if base in bases:
                bases[base][1].append(":" + variant)
            continue
        if not every and _unbuilt(v):
            # one line per recipe (gperftools: tcmalloc-minimal@* and tcmalloc@*)
            key = _recipe_family(v)
            unbuilt[key] = unbuilt.get(key, 0) + 1
            if unbuilt[key] > 1:
                continue
        entry: tuple[Verified, list[str], int] = (v, [], 0)
        bases[base] = entry
        rows.setdefault(family, []).append(entry)
    for key, count in unbuilt.items():
        family = next(_family(v) for v in verified if _unbuilt(v) and _recipe_family(v) == key)
        folded = [e for e in rows[family] if _unbuilt(e[0]) and _recipe_family(e[0]) == key]
        rows[family] = [e for e in rows[family] if e not in folded] + [(folded[0][0], [], count)]
    return rows


def _recipe_family(v: Verified) -> str:
    """The name a selection gives every version of (FAMILY@*)."""
    return v.spec.recipe.family if v.spec.recipe else _family(v)


def _count(builds: int) -> str:
    return f"{builds} builds" if builds > 1 else "1 build"


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


def _short_notes(v: Verified, unbuilt: int) -> str:
    spec, recipe = v.spec, v.spec.recipe
    if unbuilt:
        return f"allocmark alloc build {_recipe_family(v)}@*"
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


def _catalog_footnotes(verified: Sequence[Verified], rows: Entries) -> list[str]:
    entries = sum(len(e) for e in rows.values())
    lines = [f"{len(rows)} families, {len(verified)} entries with their variants "
             f"({entries} lines)."]  # fmt: skip
    if any(v.status is Status.PARTIAL for v in verified):
        lines.append("partial: glibc serves the functions it lacks, so a program calling "
                     "them mixes two heaps.")  # fmt: skip
    if any(_unbuilt(v) for v in verified):
        lines.append("not built: `allocmark alloc build NAME` (FAMILY@* for every version, "
                     "--all for all), or on first use.")  # fmt: skip
    if any(not v.spec.recommendable for v in verified):
        lines.append('debug: a debugging allocator (the hardening reference): not in "all", '
                     "never recommended.")  # fmt: skip
    if any("GPL" in v.spec.license for v in verified):
        lines.append("GPL: a library built from it is under the GPL.")
    lines.append("`allocmark allocators -a NAME`: its library, sha256, Rust layer's cost.")
    return lines


def _home(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home) :] if home != "/" and path.startswith(home + "/") else path
