"""Minutes a real command's `try` takes, and what it decides, under this allocmark and
another, side by side in one run (issue 67: the median minutes to a verdict before and
after a change of the sequential design).

usage: .venv/bin/python bench/designs.py OTHER [REPS] [PARTS]
  OTHER: another allocmark's command, e.g. one installed from the commit before a
    change (issue 67's: 7832cb9):
      git worktree add ../before 7832cb9
      /usr/bin/python3 -m venv ../before/.venv && ../before/.venv/bin/pip install ../before
      .venv/bin/python bench/designs.py ../before/.venv/bin/allocmark
  REPS: rounds of every command (default 1).
  PARTS: aa (glibc against twin, the same file under a second name, on calibration's
    seven real commands: every decided difference is false), peer (the three compiled
    programs of seconds under the six allocators of the peer's table); default aa,peer.

Each command's `try` runs at its defaults under both, in a random order per command
(the VM's speed drifts over an hour: paired, not one allocmark and then the other).
The minutes are the wall clock of the `try` command as a user waits for it; what it
decided is each allocmark's own report (`report --format json`) of its database. It
prints, per allocmark: the median minutes (and range), the ratios decided, the "same"
among them, the false differences (A/A), and per command both side by side.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import calibration  # the bench's real commands and twins

THIS = "this"
PEER = "glibc,jemalloc,tcmalloc-minimal,mimalloc,tbbmalloc,scudo"
METRICS = {"time_s": "time", "peak_rss_kib": "peak RSS"}


@dataclass
class Arm:
    """What one allocmark did: per campaign, its minutes and its ratios' verdicts."""

    minutes: dict[str, list[float]] = field(default_factory=dict)  # command -> minutes
    verdicts: dict[str, list[str]] = field(default_factory=dict)  # command -> verdicts

    def add(self, what: str, minutes: float, verdicts: list[str]) -> None:
        self.minutes.setdefault(what, []).append(minutes)
        self.verdicts.setdefault(what, []).extend(verdicts)


def campaign(
    command: list[str], db: Path, argv: list[str], allocators: str
) -> tuple[float, list[str]]:
    """`try` under one allocmark: its wall minutes, and its report's verdicts of every
    ratio to the baseline (time and peak RSS)."""
    began = time.monotonic()
    tried = subprocess.run(
        [*command, "-q", "try", "-a", allocators, "--db", str(db), "--", *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    took = (time.monotonic() - began) / 60
    if tried.returncode not in (0, 1):  # 1: an answer that is undecided
        sys.exit(f"{command[-1]} try exited {tried.returncode}:\n{tried.stderr[-2000:]}")
    shown = subprocess.run(
        [*command, "report", "--db", str(db), "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(shown.stdout)
    verdicts = [
        f"{r['allocator']} {METRICS[r['metric']]} ×{r['ratio_to_baseline']:.2f} {r['verdict']}"
        for r in report["rows"]
        if r["metric"] in METRICS and r["allocator"] != report["baseline"]
    ]
    return took, verdicts


def jobs(work: Path, parts: set[str]) -> list[tuple[str, list[str], str]]:
    """(name, argv, allocators) of every campaign a round runs."""
    commands = calibration.commands(work)
    out = []
    if "aa" in parts:
        pair = calibration.twins(work, "designs")["glibc"]
        out += [(f"{name} A/A", argv, pair) for name, argv in commands.items()]
    if "peer" in parts:
        out += [(f"{name} ×6", commands[name], PEER) for name in calibration.PROGRAMS]
    return out


def run(other: str, reps: int, parts: set[str], work: Path) -> dict[str, Arm]:
    allocmarks = {THIS: [sys.executable, "-m", "allocmark"], "other": [other]}
    arms = {name: Arm() for name in allocmarks}
    rng = random.Random(67)
    todo = jobs(work, parts)
    for i in range(reps):
        for name, argv, allocators in todo:
            order = list(allocmarks)
            rng.shuffle(order)
            for who in order:
                db = work / f"{who}-{name.replace(' ', '-').replace('/', '')}-{i}.db"
                took, verdicts = campaign(allocmarks[who], db, argv, allocators)
                arms[who].add(name, took, verdicts)
                print(f"  {name} ({who}): {took:.1f} min; {'; '.join(verdicts)}", flush=True)
    return arms


def _word(verdict: str) -> str:
    """The verdict of one of `campaign`'s lines ("jemalloc time ×0.85 better"); an
    older allocmark's "inconclusive" is today's "undecided"."""
    word = verdict.rsplit(" ", 1)[-1]
    return "undecided" if word == "inconclusive" else word


def summary(arm: Arm) -> str:
    minutes = [m for ms in arm.minutes.values() for m in ms]
    verdicts = [_word(v) for vs in arm.verdicts.values() for v in vs]
    decided = [v for v in verdicts if v != "undecided"]
    aa = [_word(v) for k, vs in arm.verdicts.items() if "A/A" in k for v in vs]
    false = sum(v in ("better", "worse") for v in aa)
    return (
        f"minutes a `try` took: median {statistics.median(minutes):.1f} "
        f"({min(minutes):.1f}-{max(minutes):.1f}); ratios decided {len(decided)} of "
        f"{len(verdicts)} (same: {decided.count('same')}); "
        f"A/A false differences: {false} of {len(aa)}"
    )


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit(__doc__)
    other = argv[0]
    reps = int(argv[1]) if len(argv) > 1 else 1
    parts = set(argv[2].split(",")) if len(argv) > 2 else {"aa", "peer"}
    with tempfile.TemporaryDirectory(prefix="designs-") as tmp:
        Path(tmp).chmod(0o755)  # the commands run as a campaign's own user and read here
        arms = run(other, reps, parts, Path(tmp))
    for who, arm in arms.items():
        print(f"{who} ({other if who != THIS else 'this allocmark'}): {summary(arm)}")
    print("per command, minutes (median), then each ratio and its verdict, this | other:")
    for what in arms[THIS].minutes:
        mins = [f"{statistics.median(a.minutes[what]):.1f}" for a in arms.values()]
        print(f"  {what}: {' | '.join(mins)} min")
        sides = (arms[THIS].verdicts[what], arms["other"].verdicts[what])
        for this, other in zip(*sides, strict=False):
            print(f"    {this:36} | {other}")


if __name__ == "__main__":
    main(sys.argv[1:])
