"""Calibration: are allocmark's verdicts right as often as they claim? (issue 14)

A/A: the quick suite with glibc and `twin`, libc.so.6 again under a second name
(a symlink: the same file, so the same pages; a copy of the file is not the same
software for memory: fully in the page cache, its mapping faults in ~116 KiB more
and every peak RSS comparison rightly calls it larger), K campaigns at the
suite's default precision and budget. Every
faster/slower verdict for twin is false: inside each campaign (time and peak RSS
cells) and through `compare` between campaigns (with glibc as the control).
Target: at most 5 %.

A/B: glibc against `burn` (glibc plus a set amount of busy work in every k-th
malloc, native/burn), k chosen from a paired run of its own (every malloc
burning) to make samethread 5 % and 10 % slower, over N cells (samethread, seeds 1..N),
at the default precision and budget. Target: at least 90 % of the +10 % cells
judged slower.

usage: .venv/bin/python bench/calibration.py [K] [N]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from allocmark import analyze, compare, native, stats
from allocmark.store import Store

ALLOCMARK = [sys.executable, "-m", "allocmark"]
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
SAMETHREAD = ["-p", "count=50000", "-p", "rounds=4", "-p", "threads=1"]


def allocmark(*args: str) -> str:
    done = subprocess.run([*ALLOCMARK, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"allocmark {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


Found = tuple[str, str]  # (verdict word, what it was about)


def verdicts_inside(db: Path, allocator: str) -> list[Found]:
    store = Store(db, create=False)
    comp = analyze.stored_comparison(store, store.campaign().id)
    return [
        (c.verdict.value, f"{db.stem} {row.label} {metric} ×{c.ratio.value:.4f}")
        for row in comp.rows
        for metric in ("time_s", "peak_rss_kib")
        if (c := row.cells[metric][allocator]).verdict is not None and c.ratio is not None
    ]


def verdicts_across(old: Path, new: Path) -> list[Found]:
    out = []
    for metric in ("time_s", "peak_rss_kib"):
        for v in compare.compare(compare.load(str(old)), compare.load(str(new)), metric):
            if not v.control and v.ratio is not None:
                what = f"{old.stem}->{new.stem} {v.label} {metric} ×{v.ratio.value:.4f}"
                out.append((v.verdict, what))
    return out


def false_share(items: list[Found]) -> str:
    wrong = [what for verdict, what in items if verdict in ("better", "worse")]
    return f"{len(wrong)} of {len(items)} ({len(wrong) / max(1, len(items)):.0%})" + "".join(
        f"\n      {w}" for w in wrong
    )


def aa(k: int, work: Path) -> None:
    twin = work / "twin" / "libc.so.6"
    twin.parent.mkdir()
    twin.symlink_to(LIBC)
    dbs = []
    for i in range(k):
        db = work / f"aa{i}.db"
        allocmark("run", "--suite", "quick", "-a", f"glibc,twin={twin}", "--db", str(db))
        dbs.append(db)
    inside = [found for db in dbs for found in verdicts_inside(db, "twin")]
    across = [f for i, a in enumerate(dbs) for b in dbs[i + 1 :] for f in verdicts_across(a, b)]
    print(f"A/A, {k} quick-suite campaigns of glibc and libc again as 'twin' (time, peak RSS):")
    print(f"  false verdicts inside campaigns (target <= 5%): {false_share(inside)}")
    print(f"  false verdicts through compare across campaigns: {false_share(across)}")


def time_ratio(db: Path, name: str) -> list[stats.Ratio | None]:
    """Every row's time ratio of `name` to glibc in the newest campaign of db."""
    store = Store(db, create=False)
    comp = analyze.stored_comparison(store, store.campaign().id)
    return [row.cells["time_s"][name].ratio for row in comp.rows]


LOOPS = 200  # steps of a burning malloc: +150-170 % when every malloc burns


def slowdown(burn: Path, every: int, work: Path, blocks: int) -> float:
    """samethread's time under burn (every `every`-th malloc burns) / under glibc,
    paired over `blocks` blocks, minus 1."""
    db = work / f"tune-{every}.db"
    allocmark("run", "-w", "samethread", *SAMETHREAD, "-n", str(blocks), "--max-runs",
              str(blocks), "-a", f"glibc,burn={burn}:{_env(every)}", "--db", str(db))  # fmt: skip
    (r,) = time_ratio(db, "burn")
    if r is None:
        sys.exit(f"burn {_env(every)}: no time ratio")
    return r.value - 1


def _env(every: int) -> str:
    return f"AM_BURN_LOOPS={LOOPS},AM_BURN_EVERY={every}"


def tune(burn: Path, work: Path, target: float, full: float) -> int:
    """k for a `target` slowdown: full / target, corrected once by a paired run at that
    k (the cost is linear in 1/k, but one campaign's machine is not the next's)."""
    guess = max(1, round(full / target))
    seen = slowdown(burn, guess, work, 30)
    factor = min(2.0, max(0.5, seen / target)) if seen > 0 else 0.5  # noisy: nudge only
    return max(1, round(guess * factor))


def ab(n: int, work: Path) -> None:
    burn = native.library("libam_burn.so")
    full = slowdown(burn, 1, work, 15)  # large, so measured to a few per cent of itself
    if full <= 0:
        sys.exit("burn did not slow samethread down")
    every = {f: tune(burn, work, f, full) for f in (0.05, 0.10)}
    db = work / "ab.db"
    seeds = ",".join(str(s) for s in range(1, n + 1))
    allocmark("run", "-w", "samethread", *SAMETHREAD, "-p", f"seed={seeds}", "--db", str(db),
              "-a", f"glibc,burn5={burn}:{_env(every[0.05])}",
              "-a", f"burn10={burn}:{_env(every[0.10])}")  # fmt: skip
    store = Store(db, create=False)
    comp = analyze.stored_comparison(store, store.campaign().id)
    print(f"A/B, {n} samethread cells (seeds 1..{n}), default precision and budget:")
    for name, f in (("burn10", 0.10), ("burn5", 0.05)):
        cells = [row.cells["time_s"][name] for row in comp.rows]
        found = sum(c.verdict is stats.Verdict.WORSE for c in cells)
        seen = [c.ratio.value - 1 for c in cells if c.ratio is not None]
        print(f"  +{f:.0%} (1 malloc in {every[f]} burns, measured "
              f"{statistics.median(seen):+.1%} median): detected {found} of {len(cells)}"
              + ("  (target >= 90%)" if f == 0.10 else ""))  # fmt: skip
    widths = [row.cells["time_s"]["burn10"].ratio for row in comp.rows]
    print("  interval half-widths: " + ", ".join(f"±{r.half_width:.1%}" for r in widths if r))


def main() -> None:
    k = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    with tempfile.TemporaryDirectory(prefix="allocmark-calibration-") as tmp:
        aa(k, Path(tmp))
        ab(n, Path(tmp))


if __name__ == "__main__":
    main()
