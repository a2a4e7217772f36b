"""libam_who's reports (native/who/am_who.c): which object served malloc in each
process of a run that does not report it itself (applications, a user's command), as
the process says it: a cross-check of the launcher's own reading (image.py), and the
allocator's statistics and the partial allocator's missing functions it called."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from allocmark.native import records
from allocmark.run import image

FUNCTIONS = ("malloc", "free", "calloc", "realloc")


@dataclass(frozen=True)
class Report:
    """One process: what served each function, and every object defining malloc."""

    pid: int
    exe: str
    served: dict[str, str]  # function -> object ("" when nothing exports it)
    libc: str
    defines: tuple[str, ...]


def read(directory: Path) -> list[Report]:
    """One report per process that kept the preload (exec'd programs write again).
    The directory is the program's: every file in it is read as untrusted (no link
    followed, regular files only, bounded; records.read_file), and a bad one is a
    RecordError that fails the run, never the campaign. At most FILES files."""
    names = _names(directory)
    return [
        r
        for name in names
        if not name.startswith((CALLS, STATS)) and (r := _parse(directory / name)) is not None
    ]


FILES = 10_000  # a run's processes, at the most, that libam_who reports
TOTAL = 64 << 20  # bytes of libam_who's files of one run read at the most


def _names(directory: Path) -> list[str]:
    """The directory's file names, once it is known to hold at most FILES files of at
    most TOTAL bytes in all (what allocmark reads of it is bounded whatever the
    program puts there)."""
    names = sorted(os.listdir(directory))
    if len(names) > FILES:
        raise records.RecordError(f"libam_who's directory holds {len(names)} files")
    total = 0
    for name in names:
        with contextlib.suppress(OSError):
            total += os.lstat(directory / name).st_size
    if total > TOTAL:
        raise records.RecordError(
            f"libam_who's directory holds {total >> 20} MiB (at most {TOTAL >> 20} MiB is read)"
        )
    return names


CALLS = "calls."  # files of "calls" records, one per process
STATS = "stats."  # files of "stats" records: one per process that exited normally
STATS_FIELDS = (
    "rss_kib",
    "live_kib",
    "held_kib",
    "metadata_kib",
    "released_kib",
    "mapped_kib",
    "committed_kib",
    "dirty_kib",
    "cached_kib",
    "arenas",  # a count
)


def stats(directory: Path) -> tuple[str, dict[str, float]]:
    """The allocator's statistics of the run's largest process (by its RSS as it
    exited): (its source; {alloc_FIELD: KiB} and alloc_processes, how many processes
    reported). Not a sum: each process reports as it exits, so the records of a
    pipeline or a launcher script (a pyenv shim runs a dozen commands before
    Python) were never resident together."""
    found = [
        r
        for r in _lines(directory, STATS, "stats")
        if r.get("source") != "none" and isinstance(r.get("rss_kib"), int)
    ]
    if not found:
        return "none", {}
    top = max(found, key=lambda r: int(r["rss_kib"]))
    fields = {
        f"alloc_{k}": float(top[k])
        for k in STATS_FIELDS
        if isinstance(top.get(k), int) and top[k] >= 0
    }
    return str(top.get("source")), fields | {"alloc_processes": float(len(found))}


# The functions libam_who sees called where the allocator lacks them (am_who.c).
TRACKED = (
    "reallocarray",
    "pvalloc",
    "valloc",
    "memalign",
    "aligned_alloc",
    "posix_memalign",
    "malloc_usable_size",
)


def calls(directory: Path) -> list[str]:
    """Which of the functions a partial allocator may lack (am_who.c) the run's
    processes called, where the allocator under test did not define them."""
    return sorted({str(r.get("fn")) for r in _lines(directory, CALLS, "calls")})


def _lines(directory: Path, prefix: str, kind: str) -> list[dict[str, Any]]:
    """The fields of every `kind` record in the files named PREFIX.PID."""
    found = []
    for f in [directory / n for n in _names(directory) if n.startswith(prefix)]:
        text = records.read_file(f, "libam_who's report")
        whole = text[: text.rfind(b"\n") + 1]  # a process killed mid-line: its last is cut
        found += [r.fields for r in records.parse(whole, f.name) if r.kind == kind]
    return found


def _parse(path: Path) -> Report | None:
    """The file's "who" record; None for a file cut short (its process died writing)."""
    text = records.read_file(path, "libam_who's report")
    if not text.endswith(b"\n"):
        return None
    r = records.one(text, "who", f"libam_who's report {path.name}")
    served = r.get("served", {})
    return Report(
        pid=int(r.get("pid", 0)),
        exe=str(r.get("exe", "")),
        served={fn: str(served.get(fn, "")) for fn in FUNCTIONS},
        libc=str(r.get("libc", "")),
        defines=tuple(str(d) for d in r.get("defines", [])),
    )


def label(reports: Sequence[Report]) -> str:
    """The reports as stored with the run."""
    return json.dumps([dataclasses.asdict(r) for r in reports])


def served_malloc(reports: Sequence[Report]) -> str | None:
    """The object the first report names as serving malloc."""
    return reports[0].served["malloc"] or None if reports else None


def disagreement(reports: Sequence[Report], bindings: Sequence[image.Binding]) -> str | None:
    """Where libam_who's reports contradict the launcher's readings (image.py): a report
    for an image the launcher never read, or one naming another object for malloc."""
    for r in reports:
        same = [b for b in bindings if b.image.pid == r.pid and real(b.image.exe) == real(r.exe)]
        if not same:
            return (
                f"libam_who reported for {r.exe} (pid {r.pid}), an image the launcher did not read"
            )
        said = r.served["malloc"]
        if all(real(b.served) != real(said) for b in same):
            return (
                f"libam_who in {r.exe} (pid {r.pid}) says malloc was served by "
                f"{said or 'nothing'}; the launcher read {same[-1].served}"
            )
    return None


def shadowed(reports: Sequence[Report], *served: str | None) -> str:
    """Other allocators loaded into the processes (e.g. the libjemalloc Debian's redis
    links), which the allocator under test shadows but whose extra calls may still run."""
    ignore = {real(s) for s in served}
    seen = {d for r in reports for d in r.defines if real(d) not in ignore | {real(r.libc)}}
    return ", ".join(sorted(seen))


def real(path: str | None) -> str | None:
    return os.path.realpath(path) if path else None
