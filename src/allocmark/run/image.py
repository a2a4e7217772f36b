"""What served malloc in each process image of a run, decided from outside the program.

The launcher reads every image of the run as it ends, at an execve or exit_group the
image cannot pass until it has been read (native/run/am_run_watch.c): its executable,
the files it had mapped, and ld.so's link map (the order the objects were loaded in:
the program, the preloads, their needed libraries breadth-first, then what dlopen
added). Nothing the program or its allocator writes to a file or a pipe takes part.
This module binds malloc as ld.so does: the first object of the link map whose dynamic
symbol table defines malloc serves it; a statically linked program serves its own. The
objects' symbol tables are read with pyelftools, once per file.

An image with no reading (killed by a signal after an exec), one whose reading did not
fit the record, or one whose binding passes through an object that can no longer be
read leaves the run unverified: allocmark never guesses which allocator ran.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Image:
    """One process image as the launcher read it when it ended ("exit") or was about to
    be replaced ("exec"): `scope` is its link map's names in order ("" first: the
    program), None when it had no dynamic loader or the map could not be read; `cut`
    when the reading did not fit its record; `launcher` when it is the launcher's own
    fork on its way to exec the program (named by the launcher, not read)."""

    pid: int
    at: str
    exe: str = ""
    objects: tuple[str, ...] = ()
    scope: tuple[str, ...] | None = None
    cut: bool = False
    launcher: bool = False


def parse(fields: dict[str, Any]) -> Image:
    """An "image" record's fields (records.py checked its kind and version)."""
    scope = fields.get("scope")
    return Image(
        pid=int(fields["pid"]),
        at=str(fields["at"]),
        exe=str(fields.get("exe", "")),
        objects=tuple(str(o) for o in fields.get("objects", [])),
        scope=tuple(str(n) for n in scope) if isinstance(scope, list) else None,
        cut=bool(fields.get("cut", 0)),
        launcher=bool(fields.get("launcher", 0)),
    )


@dataclass(frozen=True)
class Binding:
    """What served malloc in one image: the object, or why it cannot be told."""

    image: Image
    served: str | None
    why_unknown: str = ""


def bind(image: Image) -> Binding:
    """The object ld.so bound this image's malloc to."""
    if image.cut:
        return Binding(image, None, "its reading did not fit the launcher's record")
    if image.scope is None:
        facts = _facts(_real(image.exe))
        if facts is not None and not facts.loader:
            return Binding(image, _real(image.exe))  # statically linked: its own malloc
        return Binding(image, None, "the launcher could not read its link map")
    mapped = {_real(o) for o in image.objects if not o.endswith(" (deleted)")}
    for n, name in enumerate(image.scope):
        path = _real(image.exe if n == 0 and not name else name)
        if path not in mapped:
            continue  # the vDSO, which is no file
        facts = _facts(path)
        if facts is None:
            return Binding(image, None, f"{path} can no longer be read")
        if facts.malloc:
            return Binding(image, path)
    return Binding(image, None, "no object it loaded defines malloc")


def _real(path: str) -> str:
    return os.path.realpath(path) if path else ""


@dataclass(frozen=True)
class Facts:
    """What binding malloc needs of one object: does it ask for a dynamic loader (a
    program without one is statically linked), does it export malloc."""

    loader: bool
    malloc: bool


def _facts(path: str) -> Facts | None:
    """The object's facts (None when it cannot be read as ELF), cached by its identity."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return _read_facts(path, st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=512)
def _read_facts(path: str, *identity: int) -> Facts | None:
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSegment
    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    try:
        with open(path, "rb") as f:
            elf = ELFFile(f)
            segments = list(elf.iter_segments())
            loader = any(s.header.p_type == "PT_INTERP" for s in segments)
            dynsym = elf.get_section_by_name(".dynsym")
            if isinstance(dynsym, SymbolTableSection):
                symbols = dynsym.get_symbol_by_name("malloc") or []
            else:  # no section headers (stripped): the dynamic segment's table
                dyn = next((s for s in segments if isinstance(s, DynamicSegment)), None)
                symbols = [s for s in dyn.iter_symbols() if s.name == "malloc"] if dyn else []
            return Facts(loader, any(_exports(s) for s in symbols))
    except (OSError, ELFError, ValueError, KeyError, AttributeError, StopIteration):
        return None


def _exports(symbol: Any) -> bool:
    """A definition other objects bind to (not an undefined reference, such as a
    non-PIE program's canonical PLT stub, nor a hidden symbol)."""
    entry = symbol.entry
    return (
        entry.st_shndx != "SHN_UNDEF"
        and entry.st_info.bind in ("STB_GLOBAL", "STB_WEAK")
        and entry.st_other.visibility in ("STV_DEFAULT", "STV_PROTECTED")
    )


def unread(images: Sequence[Image]) -> list[int]:
    """Processes whose last reading was before an exec: the image the exec started
    ended without one (a signal killed it), so what served its malloc is unknown."""
    last: dict[int, str] = {}
    for i in images:
        last[i.pid] = i.at
    return sorted(pid for pid, at in last.items() if at == "exec")


@dataclass(frozen=True)
class Verification:
    """What the readings say: why the run cannot be verified ("" when it can), the
    object that served malloc in the program's first image, and every image's binding."""

    problem: str
    served: str | None
    bindings: tuple[Binding, ...]


def verification(
    expected: str | None, images: Sequence[Image], watch_errno: int | None
) -> Verification:
    """Every image of the program must have bound malloc to `expected`."""
    if watch_errno is None:
        return Verification("the launcher did not read the program's images", None, ())
    if watch_errno:
        return Verification(
            f"the launcher could not watch the program ({os.strerror(watch_errno)}): "
            "what served malloc was not read from outside it",
            None,
            (),
        )
    bindings = tuple(bind(i) for i in images if not i.launcher)
    if not bindings:
        return Verification("the launcher read no image of the program", None, ())
    served = bindings[0].served
    if lost := unread(images):
        return Verification(
            f"process {lost[0]} ended without a reading after an exec (killed by a "
            "signal?): what served its malloc is unknown",
            served,
            bindings,
        )
    for b in bindings:
        where = f"{b.image.exe} (pid {b.image.pid})"
        if b.served is None:
            return Verification(
                f"what served malloc in {where} cannot be told: {b.why_unknown}", served, bindings
            )
        if _real(b.served) != _real(expected or ""):
            return Verification(
                f"malloc in {where} was served by {b.served}, not by {expected} "
                "(as the launcher read it)",
                b.served,
                bindings,
            )
    return Verification("", served, bindings)
