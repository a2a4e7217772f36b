"""What a run's processes write, kept within bounds while they run: the first
and last bytes of each stream and how many there were. A program that floods
its output for ten minutes costs memory of a few MiB, never the disk."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import time
from dataclasses import dataclass, field

STREAM_KEEP = 64 << 10  # of a stream only shown when a run fails: head and tail each
PARSED_KEEP = 4 << 20  # of a stream output parsers read: head and tail each
PIPE_SIZE = 1 << 20  # the kernel's default limit for an unprivileged pipe


class Bounded:
    """A stream's first `keep` and last `keep` bytes, and its length."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.keep:  # trim now and then, not on every read
                del self.tail[: len(self.tail) - self.keep]

    @property
    def dropped(self) -> int:
        return self.total - len(self.head) - min(len(self.tail), self.keep)

    def data(self) -> bytes:
        tail = bytes(self.tail[-self.keep :]) if self.tail else b""
        if not self.dropped:
            return bytes(self.head) + tail
        return bytes(self.head) + f"\n[... {self.dropped} bytes not kept ...]\n".encode() + tail

    def text(self) -> str:
        return self.data().decode(errors="replace")


@dataclass
class Streams:
    """Read ends of pipes, collected while a process runs."""

    fds: dict[str, int] = field(default_factory=dict)
    kept: dict[str, Bounded] = field(default_factory=dict)

    def pipe(self, name: str, keep: int) -> int:
        """A new pipe collected as `name`; returns its write end (the caller closes it)."""
        r, w = os.pipe()
        # A large pipe lets a chatty program write on while we are not reading, so
        # that its measured time does not include waiting for us.
        with contextlib.suppress(OSError):
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
        self.fds[name], self.kept[name] = r, Bounded(keep)
        return w

    def pump(self, pidfd: int, deadline: float) -> bool:
        """Collect until the process behind `pidfd` exits; True if the deadline came first."""
        return self._read(deadline, pidfd)

    def drain(self, within: float = 2.0) -> None:
        """Read what is left, to EOF, then close the read ends. Bounded in time: a
        process that escaped the kill could hold a write end open for ever."""
        self._read(time.monotonic() + within)
        self.close()

    def _read(self, deadline: float, pidfd: int | None = None) -> bool:
        """Collect until `pidfd` is ready (or, without one, every pipe is at EOF);
        True if the deadline came first."""
        while (remaining := deadline - time.monotonic()) > 0:
            watched = [fd for fd in self.fds.values() if fd >= 0]
            if pidfd is None and not watched:
                return False
            ready, _, _ = select.select(
                [*watched, *([pidfd] if pidfd is not None else [])], [], [], remaining
            )
            self._collect(ready)
            if pidfd is not None and pidfd in ready:
                return False
        return True

    def close(self) -> None:
        for name, fd in self.fds.items():
            if fd >= 0:
                os.close(fd)
                self.fds[name] = -1

    def text(self, name: str) -> str:
        return self.kept[name].text() if name in self.kept else ""

    def _collect(self, ready: list[int]) -> None:
        for name, fd in self.fds.items():
            if fd >= 0 and fd in ready:
                chunk = os.read(fd, 65536)
                if chunk:
                    self.kept[name].add(chunk)
                else:
                    os.close(fd)
                    self.fds[name] = -1
