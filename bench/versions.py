"""The versions suite's release-to-release table: decided changes, and the time (issue 54:
at least twice as many changes decided as with its fixed 8 blocks, in no more time).

The same suite runs twice, in a random order, on one database each: as it is (its
question release to release: blocks added where a change is still open, within its
budget, each line's versions one after the other in a block) and as it was before
issue 54 (written to a file of its own with `question = "baseline"`, `blocks = 8`,
`max_blocks = 8` and no budget: a fixed 8 blocks of every cell in random order,
judged once). Each prints its wall time as a user waits for it (the
libraries built before either starts), its table's counts per metric, and the ratios
new/old of changes decided (changed or the same) and of time. Both tables have the
same lines and columns: the bench checks that too.

usage: .venv/bin/python bench/versions.py [DIRECTORY (default: a temporary one)]
"""

from __future__ import annotations

import collections
import json
import random
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import tomli_w

ARMS = ("budget", "fixed 8")


def suites(where: Path) -> dict[str, str]:
    """Each arm's suite: the built-in one, and it as it was before issue 54."""
    from allocmark.run import suites as builtin

    suite = tomllib.loads((builtin.suites_dir() / "versions.toml").read_text())
    old = {k: v for k, v in suite.items() if k not in ("question", "budget", "expected")}
    path = where / "versions-fixed8.toml"
    path.write_text(tomli_w.dumps(old | {"blocks": 8, "max_blocks": 8}))
    return {"budget": "versions", "fixed 8": str(path)}


def allocmark(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "allocmark", *args], capture_output=True, text=True, check=False
    )
    if done.returncode not in (0, 1):  # 1: a campaign whose answer is undecided
        raise SystemExit(f"allocmark {' '.join(args)} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def arm(db: Path, suite: str) -> tuple[float, list[dict[str, object]]]:
    began = time.monotonic()
    allocmark("-q", "run", "--suite", suite, "--db", str(db))
    took = time.monotonic() - began
    found = json.loads(allocmark("report", "--db", str(db), "--format", "json"))["releases"]
    return took, found


def counts(found: list[dict[str, object]]) -> str:
    by: collections.Counter[tuple[str, object]] = collections.Counter()
    for c in found:
        metric = "peak RSS" if c["metric"] == "peak_rss_kib" else "speed"
        verdict = str(c["verdict"])
        by[
            metric,
            "same" if verdict == "same" else verdict if verdict == "undecided" else "changed",
        ] += 1
    words = []
    for metric in ("speed", "peak RSS"):
        words.append(
            f"{metric} {by[metric, 'changed']} changed, {by[metric, 'same']} the same, "
            f"{by[metric, 'undecided']} undecided"
            + (f", {by[metric, None]} without numbers" if by[metric, None] else "")
        )
    return "; ".join(words)


def decided(found: list[dict[str, object]]) -> tuple[int, int]:
    changed = sum(c["verdict"] not in ("same", "undecided", None) for c in found)
    same = sum(c["verdict"] == "same" for c in found)
    return changed, same


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        # One block of xthread first: it builds what the catalog lacks, outside both arms.
        warm = ["--db", str(where / "warm.db"), "-w", "xthread", "-n", "1", "--max-blocks", "1"]
        allocmark("-q", "run", "--suite", "versions", *warm)
        order = list(ARMS)
        random.shuffle(order)
        took, found = {}, {}
        arms = suites(where)
        for name in order:
            took[name], found[name] = arm(where / f"{name.replace(' ', '')}.db", arms[name])
    print(f"versions suite, run in the order {', '.join(order)}")
    for name in ARMS:
        changed, same = decided(found[name])
        print(
            f"  {name}: {changed} changed and {same} the same of {len(found[name])} "
            f"({counts(found[name])}); {took[name]:.0f} s"
        )
    new, old = (decided(found[n]) for n in ARMS)
    lines = [{(c["older"], c["newer"], c["row"], c["metric"]) for c in found[n]} for n in ARMS]
    print(
        f"changes decided (changed or the same) new/old: {sum(new)}/{sum(old)} = "
        f"{sum(new) / max(1, sum(old)):.2f}x; changed alone {new[0]}/{old[0]} = "
        f"{new[0] / max(1, old[0]):.2f}x; time new/old {took['budget'] / took['fixed 8']:.2f}; "
        f"the same lines and columns: {'yes' if lines[0] == lines[1] else 'NO'}"
    )


if __name__ == "__main__":
    main()
