"""Campaigns on a Dask distributed cluster.

Each batch (a block, or a set-up run) is one task with resource `bench=1`, so a
worker started with `--resources bench=1` runs one benchmark at a time, and the runs
of a block, whose ratios are paired, share a machine and a moment. A worker verifies
every allocator itself (paths and builds differ between hosts) and sends its machine
facts with each run; each campaign's runs on a worker go as a transient identity of
that campaign's own, swept and let go when the campaign ends (and by a worker that
gets another campaign's batch first), as they do here. Dask re-queues the tasks of a
worker that dies; a batch that keeps losing its workers comes back as nothing, so
its runs stay pending for `--resume`, never dropped and never stored as numbers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import allocmark
from allocmark import allocators
from allocmark.dispatchers import Batch, Done, Event, run_batch
from allocmark.errors import AllocmarkError, UserError
from allocmark.model import AllocatorSpec, RunResult, RunSpec, RunStatus, Verified
from allocmark.native import identity
from allocmark.run import machine
from allocmark.run.execute import LocalExecutor

RESOURCE = "bench"
CONNECT_TIMEOUT_S = 10


@dataclasses.dataclass(frozen=True)
class _Origin:
    """What a worker needs to translate the coordinator's runs to its own paths."""

    home: str  # the coordinator's installed package directory
    allocators: tuple[tuple[str, AllocatorSpec, str | None], ...]  # name, spec, its preload
    campaign: str = ""  # one dispatcher serves one campaign: its token, for the identity

    def spec(self, name: str) -> tuple[AllocatorSpec, str | None]:
        for n, spec, preload in self.allocators:
            if n == name:
                return spec, preload
        raise KeyError(name)


class Dask:
    """Runs batches on the workers of the scheduler at `address`."""

    def __init__(self, address: str, verified: Sequence[Verified]) -> None:
        try:
            from distributed import Client
        except ImportError as e:  # an optional dependency
            raise UserError(
                "--dispatcher dask needs the `distributed` package: "
                "pip install 'allocmark[cluster]'"
            ) from e
        try:
            self.client = Client(address, timeout=CONNECT_TIMEOUT_S)
        except OSError as e:
            raise UserError(
                f"--scheduler {address}: cannot connect ({e}); start one with "
                "`dask scheduler` and workers with `dask worker ADDRESS "
                f"--resources {RESOURCE}=1`"
            ) from None
        try:
            _require_bench_workers(self.client.scheduler_info(), address)
        except UserError:
            self.client.close()
            raise
        named = tuple((v.spec.name, v.spec, v.preload) for v in verified)
        self.origin = _Origin(_home(), named, secrets.token_hex(8))

    def run_batches(self, batches: Sequence[Batch]) -> Iterator[Event]:
        from distributed import KilledWorker, as_completed

        futures = {
            self.client.submit(_on_worker, b, self.origin, resources={RESOURCE: 1}, pure=False): b
            for b in batches
        }
        for future in as_completed(futures):
            try:
                events: list[Event] = future.result()
            except KilledWorker:  # its workers died again and again: the runs stay pending
                continue
            except Exception as e:
                raise AllocmarkError(
                    f"a Dask worker failed to run a batch ({type(e).__name__}: {e}); every "
                    "worker needs the same allocmark installed (pip install 'allocmark[cluster]')"
                ) from None
            yield from events

    def close(self) -> None:
        """The campaign's identity let go on every worker that holds it (its processes
        swept), then the connection closed: nothing the campaign's code started waits
        for the next campaign's first batch to end. A worker that cannot be asked (gone)
        sweeps it at its next campaign, or as it exits (identity's atexit)."""
        with contextlib.suppress(Exception):  # the campaign is over: never its failure
            self.client.run(_let_go, self.origin.campaign, on_error="ignore")
        self.client.close()


def _require_bench_workers(info: Mapping[str, Any], address: str) -> None:
    workers = info.get("workers", {}).values()
    if not any(w.get("resources", {}).get(RESOURCE) for w in workers):
        raise UserError(
            f"--scheduler {address}: no worker offers resource {RESOURCE!r}; start "
            f"workers with `dask worker {address} --resources {RESOURCE}=1` (one per "
            "host: two benchmarks on one host disturb each other)"
        )


def _home() -> str:
    return str(Path(allocmark.__path__[0]).resolve())


# ---------------------------------------------------------------------------
# On the worker
# ---------------------------------------------------------------------------
_VERIFIED: dict[str, Verified] = {}  # per worker process: allocators verified here
_CAMPAIGN: list[str] = []  # per worker process: the campaign whose identity it holds


def _own_identity(campaign: str) -> None:
    """The measured programs of each campaign run as a transient identity of its own
    on this worker too (no two campaigns share one): when a batch of another campaign
    comes, the identity the worker held is swept and let go (identity.fresh), and
    its runs claim a new one."""
    if [campaign] != _CAMPAIGN:
        identity.fresh()
        _CAMPAIGN[:] = [campaign]


def _let_go(campaign: str) -> None:
    """The campaign has ended: the identity this worker holds for it is swept and let go."""
    if [campaign] == _CAMPAIGN:
        identity.release()
        _CAMPAIGN.clear()


def _on_worker(batch: Batch, origin: _Origin) -> list[Event]:
    _own_identity(origin.campaign)
    here = machine.current()
    home = _home()
    runnable: list[RunSpec] = []
    refused: dict[int, Done] = {}
    verified_here: dict[str, Verified] = {}
    for spec in batch.specs:
        v = _verified_here(origin.spec(spec.allocator)[0])
        verified_here[spec.allocator] = v
        if v.usable:
            runnable.append(_translated(spec, origin, home, v))
        else:
            why = f"on {here.hostname}: allocator {spec.allocator} is {v.status.value}: {v.reason}"
            result = RunResult(RunStatus.UNVERIFIED, detail=why)
            refused[spec.seq] = Done(spec, result, 0.0, v, here)
    local = dataclasses.replace(batch, specs=tuple(runnable))
    originals = {s.seq: s for s in batch.specs}
    out: list[Event] = []
    for event in run_batch(LocalExecutor(), local):
        if isinstance(event, Done):
            spec = originals[event.spec.seq]
            labels = event.result.labels | {"host": here.hostname}
            result = dataclasses.replace(event.result, labels=labels)
            event = Done(spec, result, event.spent_s, verified_here[spec.allocator], here)
        out.append(event)
    return out + list(refused.values())


def _verified_here(spec: AllocatorSpec) -> Verified:
    """Verified once per worker process: its paths and builds are its own."""
    key = repr(spec)
    if key not in _VERIFIED:
        _VERIFIED[key] = allocators.verify(spec)
    return _VERIFIED[key]


def _translated(spec: RunSpec, origin: _Origin, home: str, here: Verified) -> RunSpec:
    """The coordinator's run with this worker's paths: its package directory and the
    library its own verification found for the allocator."""
    _, preload = origin.spec(spec.allocator)

    def moved(text: str) -> str:
        return text.replace(origin.home, home) if origin.home != home else text

    env = []
    for key, value in spec.env:
        if key == "LD_PRELOAD" and value == preload:
            if here.preload:
                env.append((key, here.preload))
            continue
        env.append((key, moved(value)))
    return dataclasses.replace(
        spec,
        argv=tuple(moved(a) for a in spec.argv),
        env=tuple(env),
        expect_malloc=here.malloc_object if spec.expect_malloc is not None else None,
    )
