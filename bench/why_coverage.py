"""How many decided differences the answer explains (issue 42's targets: of the
applications' decided peak RSS cells at least 80 %, of their decided time cells at
least 60 %, explained by signals accounting for at least half of the difference).

For a stored campaign it prints, per axis, the decided differences (every allocator
against the baseline, each row's Holm family), how many a signal in the outcome's
units explains at all, how many by at least half ("most of it"), and which signals
did it; then the unexplained ones, with what was checked.

usage: .venv/bin/python bench/why_coverage.py DB [CAMPAIGN]
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

from allocmark.answer import stored, why
from allocmark.report import answer
from allocmark.store import Store


def main(argv: list[str]) -> None:
    if not argv:
        sys.exit(__doc__)
    store = Store(Path(argv[0]), create=False)
    cid = store.campaign(int(argv[1]) if len(argv) > 1 else None).id
    comp = stored.with_signals(store, cid, stored.comparison(store, cid))
    found = why.explain(comp)
    for axis, name in (("time", "time"), ("rss", "peak RSS")):
        cells = [w for w in found if w.axis == axis]
        mostly = [w for w in cells if w.mostly]
        some = [w for w in cells if w.explained]
        by = Counter(next(f.words for f in w.factors if f.share is not None) for w in mostly)
        share = len(mostly) / len(cells) if cells else 0.0
        print(
            f"{name}: {len(cells)} decided differences; explained {len(some)}, by at least "
            f"half {len(mostly)} ({share:.0%}); by: {dict(by.most_common())}"
        )
        for w in cells:
            if not w.mostly:
                print(f"  {w.label}: {w.allocator}: {answer.clause(w, most=3)}")


if __name__ == "__main__":
    main(sys.argv[1:])
