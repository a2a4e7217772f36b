"""How many release-to-release changes a split of blocks among rows could decide
(issue 54): a bootstrap of a stored versions campaign's own blocks.

For each schedule (blocks per row), every row's blocks are drawn with replacement from
the campaign's blocks of that row (a block's runs of every allocator together, so what
a block shares stays shared), judged as the report judges them (anytime-valid
intervals, Holm per family, the final look) and the table's verdicts counted, averaged
over SEEDS draws. A schedule equal to the stored blocks reproduces the stored table
(judged with fixed-n intervals, as a campaign of fixed blocks is). It cannot model a
run order the campaign did not have (a line's versions next to each other).

usage: .venv/bin/python bench/versions_bootstrap.py DB [SCHEDULE ...]
  SCHEDULE: blocks per row in the stored rows' order, such as 35,8,6,6,55
  (the rows are printed first)
"""

from __future__ import annotations

import collections
import dataclasses
import random
import sys
from collections.abc import Sequence
from pathlib import Path

from allocmark import stats
from allocmark.answer import analyze, releases, stored as stored_answer
from allocmark.model import StoredRun
from allocmark.store import Store

SEEDS = 3
Row = tuple[str, tuple[tuple[str, object], ...]]


def counts(
    real: analyze.Comparison,
    blocks: dict[Row, dict[int, list[StoredRun]]],
    plan: dict[Row, int],
    fixed: dict[str, str],
    seed: int,
    sequential: bool,
) -> collections.Counter[str]:
    rng = random.Random(seed)
    runs: list[StoredRun] = []
    for row, reps in blocks.items():
        stored = sorted(reps)
        picks = (
            stored if plan[row] == len(stored) else [rng.choice(stored) for _ in range(plan[row])]
        )
        runs += [r._replace(rep=k) for k, rep in enumerate(picks) for r in reps[rep]]
    comp = analyze.compare(
        runs,
        real.allocators,
        real.baseline,
        margin=real.margin,
        fixed_time=fixed,
        sequential=sequential,
        finished=True,
    )
    found = releases.changes(dataclasses.replace(comp, lineages=real.lineages))
    tally: collections.Counter[str] = collections.Counter()
    for c in found:
        word = "same" if c.verdict is stats.Verdict.SAME else "undecided"
        tally[
            f"{'peak RSS' if c.metric == releases.MEMORY else 'speed'} "
            f"{'changed' if c.decided else word}"
        ] += 1
    return tally


def main(argv: Sequence[str]) -> None:
    store = Store(Path(argv[0]), create=False)
    real = stored_answer.comparison(store, 1)
    fixed = dict(store.campaign_plan(1).fixed_time)
    blocks: dict[Row, dict[int, list[StoredRun]]] = collections.defaultdict(dict)
    for r in store.runs(1):
        if r.role == "measure":
            blocks[r.workload, r.params].setdefault(r.rep, []).append(r)
    rows = list(blocks)
    print("rows:", "; ".join(f"{w} {dict(p)}" for w, p in rows))
    stored = {row: len(reps) for row, reps in blocks.items()}
    schedules = [(stored, False, [0])] + [
        (dict(zip(rows, map(int, s.split(",")), strict=True)), True, list(range(SEEDS)))
        for s in argv[1:]
    ]
    for plan, sequential, seeds in schedules:
        total: collections.Counter[str] = collections.Counter()
        for seed in seeds:
            total += counts(real, blocks, plan, fixed, seed, sequential)
        shown = ", ".join(f"{k} {v / len(seeds):.1f}" for k, v in sorted(total.items()))
        decided = sum(v for k, v in total.items() if not k.endswith("undecided")) / len(seeds)
        changed = sum(v for k, v in total.items() if k.endswith("changed")) / len(seeds)
        how = "as stored, fixed-n" if not sequential else "anytime-valid"
        print(
            f"{','.join(str(plan[r]) for r in rows)} ({how}): decided {decided:.1f}, "
            f"changed {changed:.1f} ({shown})"
        )


if __name__ == "__main__":
    main(sys.argv[1:])
