"""What a running campaign prints: its notes, a progress bar with the ratios still
undecided, -v's line per run, the plan's and a dry run's lines; and SIGTERM taken
as Ctrl-C, so that a campaign ends as cleanly either way."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from allocmark.cli.app import (
    VERBOSITY,
    err,
    out,
)
from allocmark.errors import AllocmarkError, Interrupted

if TYPE_CHECKING:
    from allocmark import api


def follow(events: Iterator[api.Event], db: Path, progress: Bar | None = None) -> int | None:
    """Prints a campaign's notes and progress as it runs; its id at the end (None: a
    dry run, which said what it would run)."""
    from allocmark import api

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        with progress or Bar() as progress:
            for event in events:
                if isinstance(event, api.Finished):
                    return event.campaign
                if isinstance(event, api.Dry):
                    out().print(dry_line(event), highlight=False, soft_wrap=True)
                    return None
                progress.show(event)
    except KeyboardInterrupt:
        raise Interrupted(
            f"interrupted: finished runs are saved in {db}; "
            f"finish with `allocmark run --resume --db {db}`"
        ) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
    raise AllocmarkError("the campaign ended without finishing")  # not reached


class Bar:
    """The progress bar and how many ratios are still undecided."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskID,
            TextColumn,
            TimeElapsedColumn,
        )

        # Not rich's ETA: blocks are added while a ratio is open, so the runs' total
        # grows and a speed-based ETA resets each round. The forecast's range, capped
        # by the budget, is the time left ("" until the noise is known).
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.fields[left]}"),
        )
        self.level = VERBOSITY["level"]
        self.bar = Progress(*columns, console=err(), transient=False, disable=self.level < 0)
        self.task: TaskID | None = None
        self.precision = "first blocks"
        self.target: float | None = None
        self.warned: set[str] = set()
        self.said_at = 0  # the blocks of the last forecast printed

    def __enter__(self) -> Bar:
        return self  # the bar starts with the plan: a refusal before it prints no blank line

    def __exit__(self, *exc: object) -> None:
        if self.task is not None:  # rich's stop() prints a line break even if never started
            self.bar.stop()

    def ask(self, question: str) -> bool:
        """A yes/no question on the terminal, the bar paused; False where none can be
        asked (no terminal: a script, CI), so that nothing waits on an answer."""
        if not sys.stdin.isatty():
            return False
        started = self.task is not None
        if started:
            self.bar.stop()
        try:
            return typer.confirm(question, default=True, err=True)
        finally:
            if started:
                self.bar.start()

    def show(self, event: api.Event) -> None:
        from rich.markup import escape

        from allocmark import api
        from allocmark.model import RunStatus
        from allocmark.text import printable

        if isinstance(event, api.Note):
            if self.level >= 0 or event.level == "warning":
                style = "yellow" if event.level == "warning" else "cyan"
                err().print(f"[{style}]{escape(event.text)}[/]")
        elif isinstance(event, api.Planned):
            if self.level >= 0:
                out().print(plan_line(event), highlight=False)
            self.target = event.precision.margin if event.precision else None
            self.bar.start()
            self.task = self.bar.add_task(
                "running", total=event.total, completed=event.done, left=""
            )
        elif isinstance(event, api.RoundDone):
            more = f", {event.blocks} more blocks" if event.blocks else ", done"
            self.precision = (
                f"{event.ratios - event.undecided} of {event.ratios} ratios "
                f"decided (margin ±{self.target or 0:.0%}){more}"
            )
            if self.task is not None:  # the bar's last words are the campaign's last state
                self.bar.update(self.task, description=self.precision)
                if not event.blocks:  # no more blocks: nothing left to forecast
                    self.bar.update(self.task, left="")
        elif isinstance(event, api.Forecast) and not event.ratios:
            self.precision = "nothing to compare"  # one allocator: no ratio, no forecast
        elif isinstance(event, api.Forecast):
            self.precision = (
                f"{event.ratios - event.undecided} of {event.ratios} ratios "
                f"decided after {event.blocks} blocks"
            )
            # After the first two blocks, then each time the blocks have doubled: a long
            # campaign has a round every few blocks, and its forecast moves slowly.
            if self.level >= 0 and (event.blocks >= 2 * self.said_at or event.blocks <= 2):
                self.said_at = event.blocks
                self.bar.console.print(event.text(), style="dim", highlight=False, soft_wrap=True)
            if self.task is not None and (ends := event.remaining()) is not None:
                self.bar.update(self.task, left=left(*ends))
            alert = event.alert()
            if alert and alert[0] not in self.warned:  # each kind once
                self.warned.add(alert[0])
                self.bar.console.print(f"[yellow]{escape(alert[1])}[/]", soft_wrap=True)
        elif isinstance(event, api.RunDone) and self.task is not None:
            spec, result = event.spec, event.result
            what = f"{self.precision} | {spec.allocator} {spec.workload}"
            self.bar.update(self.task, completed=event.done, total=event.total, description=what)
            if self.level > 0:
                self.bar.console.print(run_line(event), soft_wrap=True, markup=False)
            if result.shown:  # try --show-output; the program's text cannot drive the terminal
                self.bar.console.print(
                    "\n".join(printable(x) for x in result.shown.rstrip("\n").split("\n")),
                    soft_wrap=True,
                    markup=False,
                    highlight=False,
                )
            # The battery's crashes are its findings (its matrix shows them).
            if result.status is not RunStatus.OK and spec.workload != api.HARDEN_WORKLOAD:
                params = " ".join(f"{k}={v}" for k, v in spec.params)
                self.bar.console.print(
                    f"{result.status.value}: {spec.allocator} {spec.workload}"
                    f"{' ' + params if params else ''}: {result.detail[:300]}",
                    soft_wrap=True,
                    markup=False,
                )


def run_line(event: api.RunDone) -> str:
    """-v: one run as it ended, what it measured or why it measured nothing."""
    from allocmark.report import fmt
    from allocmark.units import size_text

    spec, result = event.spec, event.result
    params = "".join(f" {k}={v}" for k, v in spec.params)
    head = f"run {event.done}/{event.total}: {spec.allocator} {spec.workload}{params}"
    if result.status.value != "ok":
        return f"{head}: {result.status.value}: {result.detail[:200]}"
    rss = f", peak RSS {size_text(result.maxrss_kib * 1024)}" if result.maxrss_kib else ""
    return f"{head}: ok, {fmt.seconds(result.wall_s)}{rss}"


def plan_line(p: api.Planned) -> str:
    from allocmark import api

    if p.done:
        return f"resuming campaign {p.campaign}: {p.total - p.done} runs left{eta(p)}"
    more = ""
    if p.precision:
        budget = (
            f"{api.duration(p.precision.budget_s)} budget"
            if p.precision.budget_s
            else "no time budget"
        )
        if p.precision.stretch:
            budget += ", the default: stretched if the first verdict needs more"
        more = (
            f", then more blocks until every ratio is faster, slower or the same within "
            f"±{p.precision.margin:.0%} "
            f"(up to {p.precision.max_blocks} blocks, {budget})"
        )
    if p.why != "off":
        more += ", then a why pass (4 profiled blocks of the rows with a decided difference" + (
            ")" if p.why == "on" else ", if they add at most 15 % to the time)"
        )
    warm = f", {p.warmup} warm-up" if p.warmup else ""
    return (
        f"campaign {p.campaign}: {count(p.allocators, 'allocator')}, "
        f"{count(p.min_blocks, 'block')} of every row{more}; {p.measured} measured + "
        f"{p.setup} set-up runs (baseline RSS, verification{warm}) to start{eta(p)} -> {p.db}"
    )


def left(low: float, high: float) -> str:
    from allocmark import api

    if high <= 0:
        return ""
    if api.duration(low) == api.duration(high):
        return f"left: about {api.duration(high)}"
    return f"left: {api.duration(low)}–{api.duration(high)}"


def dry_line(d: api.Dry) -> str:
    build = f"; the first use builds {', '.join(d.to_build)}" if d.to_build else ""
    return (
        f"dry run: {d.suite}: {count(len(d.allocators), 'allocator')} "
        f"({', '.join(d.allocators)}), {count(d.rows, 'row')}, {count(d.blocks, 'block')} "
        f"to start: {d.runs} measured runs{build}; nothing was built, run or stored"
    )


def count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def eta(p: api.Planned) -> str:
    if p.estimate_s is None and p.expected_s:
        from allocmark import api

        return f" (about {api.duration(p.expected_s)} on the 2-core VM this suite was sized on)"
    if p.estimate_s is None:
        return " (time: unknown until the first runs end)"
    t = p.estimate_s
    about = f"{t:.0f} s" if t < 90 else f"{t / 60:.0f} min" if t < 5400 else f"{t / 3600:.1f} h"
    return f" (about {about} at this database's earlier run times)"


def terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a campaign as cleanly as Ctrl-C
