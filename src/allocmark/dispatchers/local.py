"""The default executor: every run on this machine, one at a time, in plan order."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from allocmark.dispatchers import Batch, Event, run_batch
from allocmark.run.execute import Executor, LocalExecutor


class Local:
    """Runs batches here through `executor` (real child processes by default)."""

    def __init__(self, executor: Executor | None = None) -> None:
        self.executor = executor or LocalExecutor()

    def run_batches(self, batches: Sequence[Batch]) -> Iterator[Event]:
        for batch in batches:
            yield from run_batch(self.executor, batch)
