"""Ctrl-C held back while native code runs that would swallow it.

pydantic-core builds and runs its validators in Rust: a KeyboardInterrupt raised in
the middle of that is "ignored" and leaves a validator that rejects valid input (a
Ctrl-C while starting once printed "name 'arena2' may only use letters, digits ...").
Inside `held()`, SIGINT only takes note; the KeyboardInterrupt comes when the block
ends, where Python code can handle it.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def held() -> Iterator[None]:
    """SIGINT during the block raises KeyboardInterrupt after it (main thread only:
    elsewhere signal handlers cannot be set, and signals are not delivered)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda sig, _frame: seen.append(sig))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if seen:
        raise KeyboardInterrupt
