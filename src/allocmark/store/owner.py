"""Who runs a campaign: one process at a time, so that two `run --resume` never
run the same pending runs. The owner is stored with the campaign; a dead owner's
campaign can be taken over, a live one's cannot."""

from __future__ import annotations

import os
import socket
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from allocmark.request import Creator


@dataclass(frozen=True)
class Owner:
    host: str
    boot_id: str  # a pid means nothing across reboots
    pid: int
    started: int  # the process's start time in clock ticks since boot (pids are reused)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        return f"process {self.pid} on {self.host}"


def me() -> Owner:
    return Owner(socket.gethostname(), _boot_id(), os.getpid(), _start_ticks(os.getpid()) or 0)


def creator() -> Creator:
    """Who plans a campaign: a resume by anyone else shows what it will run first."""
    return Creator(socket.gethostname(), os.getuid())


def from_json(data: object) -> Owner | None:
    """The stored owner, or None when there is none or it cannot be read."""
    if not isinstance(data, dict):
        return None
    try:
        return Owner(
            str(data["host"]), str(data["boot_id"]), int(data["pid"]), int(data["started"])
        )
    except (KeyError, TypeError, ValueError):
        return None


def alive(o: Owner) -> bool | None:
    """Whether `o` still runs: True/False on this machine, None (unknown) elsewhere."""
    if o.host != socket.gethostname() or o.boot_id != _boot_id():
        return None
    return _start_ticks(o.pid) == o.started


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> int | None:
    fields = stat_fields(pid)
    if len(fields) < 20 or fields[0] in ("Z", "X"):  # a zombie has ended
        return None
    return int(fields[19])


def stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat from field 3 (the state letter) on; [] when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    # The command name (field 2) may hold spaces and parentheses: split after it.
    return stat[stat.rindex(")") + 2 :].split()
