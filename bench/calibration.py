"""Calibration: are allocmark's verdicts right as often as they claim? (issues 14, 26)

Two conditions: the machine as it is ("quiet"), and beside a CPU-busy process
this bench starts and stops itself ("busy": one core spinning).

A/A, where every faster/slower verdict is false and every recommendation of the
twin is false:
- real commands under `try` at its default margin and budget: gzip, sort,
  /usr/bin/python3 (PYTHONMALLOC=malloc) and ruby, each 0.05-0.25 s here, and three
  compiled programs of 1-3 s (bench/programs: heap bignums, a Barnes-Hut octree,
  cube covers; stand-ins for the peer's cfrac, barnes and espresso), under
  glibc against `twin` (libc.so.6 again under a second name) and under mimalloc
  against `mtwin` (Debian's libmimalloc.so.2 again). A twin is a symlink: the same
  file, so the same pages (a copy is not the same software for memory: its mapping
  faults in ~116 KiB more and every peak RSS comparison rightly calls it larger);
- the quick suite (nine microbenchmark rows, two of them two-threaded with bimodal
  peak RSS) under glibc and twin, and `compare` across those campaigns (glibc the
  control).

A/A on real applications of seconds (issue 35), under the rules of a user's `run`
(blocks added until decided, its 2-minute budget) and of the apps suite (a fixed 16
blocks, margin 5 %): ruby and python with threads, sqlite, gcc and redis at sizes
that run 1-3 s here, under glibc against twin (one side preloaded) and mimalloc
against mtwin (both preloaded); and the apps suite under glibc against twin. A/B on
real effects measured here: gcc's peak RSS under jemalloc (+8 %) and python's under
mimalloc (-9 %), under `run`'s rules: detected when judged larger and smaller.
(glibc:arena2 on ruby with 10 threads is no such effect here: its peak RSS moves
+-7 % from run to run with Ruby's GC, and arena2's -6 % would take about 57 blocks,
33 minutes; the forecast says so.)

A/B: glibc against `burn` (glibc plus busy work in every k-th malloc, native/burn),
k chosen from paired runs of its own to make samethread 5 %, 10 % and 20 % slower, over
several cells (seeds), at the default margin and budget: detected when judged slower.

A difference under the margin (issue 67): the compiled programs under burn with no work
per malloc against the same with a start delay of 2 % of the program's time (a
constant, so the difference is 2 % whatever the program allocates), under `try` at
its defaults: "faster" is false (target: never), "same" or "undecided" expected,
"slower" true.

Why (issue 42): on A/A, how many differences are explained (only a false verdict can
be); and planted causes: glibc under a second name with MALLOC_MMAP_THRESHOLD_=256
(every block of 256 bytes or more in a mapping of its own, unmapped on free: slower
by system CPU, larger by anonymous memory at the peak) on samethread, one row per
seed: how often the planted cause is named "most of it" for a decided difference
(target >= 90 %), and how often another cause is (target <= 5 %).

Causes inside the allocator (issue 68): burn with a cause planted as raw system calls
or glibc's own (AM_BURN_PLANT: a madvise storm, a futex lock, a mapping per block,
glibc trimming on every free) against glibc, each on a workload where it costs time,
CELLS seeds each at `run`'s defaults: of the decided time differences, how often the
why names the planted mechanism from the kernel's counts (target >= 95 %) and how often
another (target: never); and on A/A, how often any mechanism is named (target: never).

It prints each rate with its 95 % Clopper-Pearson interval, and the median blocks a
verdict took: what the anytime-valid interval costs. Targets (issue 26): false
verdicts and false recommendations <= 5 % over N >= 100 cells, "same" reached in
>= 70 % of A/A time cells of programs under 0.5 s, +10 % detected >= 90 %.

Bisect (issues 44, 54): `allocmark bisect` at its defaults (error rate 5 %, a 10-minute
budget) on repositories of the tests' tiny allocator (tests/allocators/tinyrepo.py: 16
commits after v1.0, libraries rebuilt per commit) on samethread, for time and for peak
RSS. A/A: nothing planted, every commit named is false (target: no commit in >= 95 %).
Planted: from a random commit on, every malloc spins (about +10 % time) or a
constructor touches 768 KiB (about +5 % peak RSS), measured and printed: right when
the bisect names that commit (target >= 90 %), wrong when it names another (<= 5 %).

`tune`, A/A too: glibc's settings replaced (`tune --settings`) by an environment
variable nothing reads, three values of it raced against glibc's defaults on the
python3 command and on samethread; every verdict of such a candidate against the
defaults (tune's Holm family, :nothp in it) is false, and so is recommending one.

usage: .venv/bin/python bench/calibration.py [REPS] [CELLS] [CONDITIONS] [PARTS] [BATCH]
  REPS: repetitions of each A/A command and campaign (default 3: 102 A/A cells
  per condition, and 100 on the applications); CELLS: A/B cells (default 10);
  CONDITIONS: quiet,busy (default); PARTS: aa,ab,tune,apps,appsab,why,bisect,small,
  causes (default: all; apps is the applications' A/A, appsab their A/B, why the planted
  causes: CELLS seeds of samethread under `mmapper`, the right cause named and no
  other; bisect: REPS A/A bisects and CELLS planted ones of each metric; small: the
  +2 % on each compiled program, REPS times; causes: CELLS seeds of each planted
  cause).
  REPS also sets the applications' A/A (REPS campaigns of each pair, and (REPS+1)/2
  of the apps suite, at least 2); a third of CELLS (at least 3) their A/B.
  BATCH (default 0): bisect's planted commits and seeds drawn anew for each batch, so
  that batches of a few bisects each (an hour for 10 of each) add up to more cells.
  AM_CALIBRATION_KEEP=DIR (environment): each condition's campaign databases copied
  there when it ends, so that a later rule can judge the same runs again
  (`allocmark report --db DIR/quiet-....db`). Part `kept` judges the A/A campaigns of
  earlier runs kept so (AM_CALIBRATION_KEPT=DIR[:DIR...], one directory per run: its
  names repeat) with the code of the day, and counts them together, runs nothing of its
  own: A/A gathered over several sessions, at one design, adds up (a design that adds
  blocks differently must be run again, not judged again).
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from scipy.stats import beta

from allocmark import native, stats
from allocmark.answer import analyze, compare, recommend, stored, why
from allocmark.store import Store
from allocmark.verbs import tune

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' tiny allocator
from tests.allocators import tinyrepo

ALLOCMARK = [sys.executable, "-m", "allocmark"]
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
MIMALLOC = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2"
SAMETHREAD = ["-p", "count=50000", "-p", "rounds=4", "-p", "threads=1"]
PYTHON = "d = {}\nfor i in range(200000):\n    d[str(i)] = [i] * 3\n"
RUBY = 'a = []; 200000.times { |i| a << "x#{i}" * 3 }; h = {}; a.each { |s| h[s] = s.size }'


def allocmark(*args: str) -> str:
    done = subprocess.run([*ALLOCMARK, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"allocmark {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


# Compiled programs of seconds this bench builds (bench/programs: stand-ins for the
# peer's cfrac, barnes and espresso, which no registry here serves), sized to run
# 1-3 s here under glibc.
PROGRAMS = {
    "bignum": ("am_bignum.c", ["6000000"]),
    "octree": ("am_octree.c", ["20000", "6"]),
    "sets": ("am_sets.c", ["40", "4000", "300"]),
}


def build_programs(work: Path) -> dict[str, list[str]]:
    """PROGRAMS compiled into work (-O2, warnings are errors), as commands."""
    out = {}
    for name, (source, args) in PROGRAMS.items():
        exe = work / f"am_{name}"
        src = Path(__file__).with_name("programs") / source
        cc = ["cc", "-O2", "-Wall", "-Wextra", "-Werror", str(src), "-o", str(exe), "-lm"]
        subprocess.run(cc, check=True)
        out[name] = [str(exe), *args]
    return out


def commands(work: Path) -> dict[str, list[str]]:
    """The real A/A commands, on an 8 MB text this bench writes (same every time), and
    the compiled programs of seconds."""
    text = work / "text"
    rng = random.Random(1)
    words = [
        "".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 9))) for _ in range(5000)
    ]
    text.write_text("".join(" ".join(rng.choices(words, k=10)) + "\n" for _ in range(120000)))
    return {
        "gzip": ["sh", "-c", f"gzip -6 -c {text} > /dev/null"],
        "sort": ["sort", "-S", "64M", "-o", "/dev/null", str(text)],
        "python3": ["env", "PYTHONMALLOC=malloc", "/usr/bin/python3", "-c", PYTHON],
        "ruby": ["ruby", "-e", RUBY],
        **build_programs(work),
    }


@dataclass
class Tally:
    """What one condition found."""

    cells: list[tuple[str, str, stats.Verdict, int]] = field(default_factory=list)
    # (kind, "" when right, else what was wrong)
    answers: list[tuple[str, str]] = field(default_factory=list)
    across: list[tuple[stats.Verdict | str, str]] = field(default_factory=list)
    detected: dict[float, list[bool]] = field(default_factory=dict)
    seen: dict[float, list[float]] = field(default_factory=dict)
    seconds: dict[str, list[float]] = field(default_factory=dict)  # command -> medians
    tuned: list[tuple[str, stats.Verdict]] = field(default_factory=list)
    tune_answers: list[str] = field(default_factory=list)  # "" right, else what was wrong
    # A/B on applications: (what, detected, measured ratio, blocks)
    app_effects: list[tuple[str, bool, float, int]] = field(default_factory=list)
    aa_explained: list[str] = field(default_factory=list)  # A/A differences explained
    # planted causes: (rules, axis, decided, the planted cause named "most of it", another)
    planted: list[tuple[str, str, bool, bool, bool]] = field(default_factory=list)
    bisects: list[Bisected] = field(default_factory=list)
    minutes: list[float] = field(default_factory=list)  # each real command's `try`, in all
    # +2 % under the margin: (program, measured ratio, verdict)
    small: list[tuple[str, float, stats.Verdict]] = field(default_factory=list)
    # causes planted inside the allocator (issue 68): (plant, row, time decided, the
    # planted mechanism named, the mechanisms named)
    causes: list[tuple[str, str, bool, bool, tuple[str, ...]]] = field(default_factory=list)
    aa_mechanisms: list[str] = field(default_factory=list)  # A/A differences given one

    def add_aa(self, db: Path, twin: str, kind: str) -> None:
        """Every time and peak RSS verdict of `twin` in db's newest campaign, and its answers."""
        comp = explainable(Store(db, create=False))
        for row in comp.rows:
            # A duration-bound workload's speed is its throughput (larson): counted as
            # its time cell, the verdict a user reads for its speed.
            fixed = row.cells["time_s"][twin].fixed
            for metric in ("ops_per_s" if fixed else "time_s", "peak_rss_kib"):
                c = row.cells[metric][twin]
                if c.verdict is not None and c.ratio is not None:
                    what = f"{kind} {row.label} {metric} ×{c.ratio.value:.4f}"
                    speed = "peak_rss_kib" if metric == "peak_rss_kib" else "time_s"
                    self.cells.append((what, speed, c.verdict, int(c.ratio.df) + 1))
        whys = [w for w in why.explain(comp) if w.allocator == twin]
        self.aa_explained += [
            f"{kind} {w.label} {w.axis}: {w.allocator}" for w in whys if w.explained
        ]
        self.aa_mechanisms += [
            f"{kind} {w.label} {w.axis}: {', '.join(w.mechanisms)}" for w in whys if w.mechanisms
        ]
        if not kind.startswith("quick") and (s := comp.rows[0].cells["time_s"][twin].summary):
            self.seconds.setdefault(kind.split("/")[0], []).append(s.median)
            store = Store(db, create=False)
            self.minutes.append(store.spent(store.campaign().id) / 60)
        for a in recommend.answers(comp):
            picked = _picked(a)
            wrong = f"{kind} {a.scope}: recommends {twin}" if twin in picked else ""
            self.answers.append((kind, wrong))

    def add_tune(self, db: Path, kind: str) -> None:
        """Each no-op candidate's verdicts against glibc's defaults, as `tune` judges them."""
        store = Store(db, create=False)
        comp = stored.comparison(store, store.campaign().id)
        noop = {a for a in comp.allocators if UNUSED in a}
        for row in comp.rows:
            for candidate, ratios in tune.defaults_family(comp, row).items():
                if candidate in noop:
                    for metric, r in ratios.items():
                        what = f"{kind} {candidate} {metric} ×{r.value:.4f}"
                        self.tuned.append((what, stats.verdict(r, comp.margin)))
        for a in recommend.answers(comp):
            picked = _picked(a)
            self.tune_answers.append(
                f"{kind} recommends {sorted(picked & noop)}" if picked & noop else ""
            )


def _picked(a: recommend.Answer) -> set[str]:
    """The allocators an answer recommends, ties included."""
    return {c.allocator for c in (a.fastest, a.smallest, *a.tied_time, *a.tied_rss) if c}


def rate(hits: int, n: int) -> str:
    """hits of n, the share and its 95 % Clopper-Pearson interval."""
    if n == 0:
        return "0 of 0"
    low = float(beta.ppf(0.025, hits, n - hits + 1)) if hits else 0.0
    high = float(beta.ppf(0.975, hits + 1, n - hits)) if hits < n else 1.0
    return f"{hits} of {n} ({hits / n:.1%}, 95 % interval {low:.1%}-{high:.1%})"


def twins(work: Path, tag: str) -> dict[str, str]:
    """glibc and mimalloc, each with a twin: the same file under a second name."""
    twins = work / f"twins-{tag}"
    twins.mkdir()
    (twins / "libc.so.6").symlink_to(LIBC)
    (twins / "libmimalloc.so.2").symlink_to(MIMALLOC)
    return {
        "glibc": f"glibc,twin={twins / 'libc.so.6'}",
        "mimalloc": f"mimalloc,mtwin={twins / 'libmimalloc.so.2'}",
    }


REAL = ("gzip", "sort", "python3", "ruby", *PROGRAMS)  # commands()'s names
BASES = {"glibc": "twin", "mimalloc": "mtwin"}  # twins()'s pairs: the twin of each


def aa(tally: Tally, work: Path, reps: int, tag: str) -> None:
    pairs = twins(work, tag)
    for i in range(reps):
        for name, argv in commands(work).items():
            for base, allocators in pairs.items():
                db = work / f"{tag}-{name}-{base}-{i}.db"
                allocmark("try", "-a", allocators, "--db", str(db), "--", *argv)
    for i in range(reps):
        db = work / f"{tag}-quick-{i}.db"
        allocmark("run", "--suite", "quick", "-a", pairs["glibc"], "--db", str(db))
    judge_aa(tally, [work], tag)


def judge_aa(tally: Tally, dirs: Sequence[Path], tag: str) -> None:
    """The A/A campaigns of condition `tag` in dirs (aa's names), judged by this code:
    the verdicts and answers of each, and `compare` across the quick suite's."""
    dbs: list[Path] = []  # the quick suite's, of every directory: compared all together
    for d in dirs:
        for name in REAL:
            for base, twin in BASES.items():
                for db in sorted(d.glob(f"{tag}-{name}-{base}-*.db"), key=_round):
                    tally.add_aa(db, twin, f"{name}/{base}")
        for db in sorted(d.glob(f"{tag}-quick-*.db"), key=_round):
            tally.add_aa(db, "twin", f"quick{_round(db)}")
            dbs.append(db)
    for i, old in enumerate(dbs):
        for new in dbs[i + 1 :]:
            for metric in ("time_s", "peak_rss_kib"):
                for v in compare.compare(compare.load(str(old)), compare.load(str(new)), metric):
                    if not v.control and v.ratio is not None:
                        tally.across.append((v.verdict, f"{v.label} {metric}"))


def _round(db: Path) -> int:
    """The repetition a campaign's database is named by (its last number)."""
    return int(db.stem.rsplit("-", 1)[1])


def kept() -> list[Path]:
    """AM_CALIBRATION_KEPT's directories (colon-separated): databases kept by earlier
    runs of this bench (AM_CALIBRATION_KEEP), judged again by the kept part."""
    dirs = [Path(d) for d in os.environ.get("AM_CALIBRATION_KEPT", "").split(":") if d]
    if not dirs:
        sys.exit("the kept part reads AM_CALIBRATION_KEPT=DIR[:DIR...]: none was set")
    if missing := [str(d) for d in dirs if not d.is_dir()]:
        sys.exit(f"AM_CALIBRATION_KEPT: no such directory: {', '.join(missing)}")
    return dirs


# Real applications of seconds (a run of 1-3 s here), as a suite file.
APPS_SUITE = """description = "calibration: applications of seconds"
allocators = ["glibc"]
seed = {seed}
[[runs]]
workload = "ruby"
params = {{ threads = 4, scale = 2 }}
[[runs]]
workload = "python"
params = {{ threads = 2, scale = 3 }}
[[runs]]
workload = "sqlite"
params = {{ scale = 16 }}
[[runs]]
workload = "gcc"
params = {{ scale = 3 }}
[[runs]]
workload = "redis"
params = {{ requests = 40000, keyspace = 50000 }}
"""


def apps_aa(tally: Tally, work: Path, reps: int, tag: str) -> None:
    """A/A on applications of seconds, under `run`'s default rules and the apps suite's."""
    pairs = twins(work, f"apps-{tag}")
    for i in range(reps):
        suite = work / f"{tag}-apps-{i}.toml"
        suite.write_text(APPS_SUITE.format(seed=100 + i))
        for base, allocators in pairs.items():
            db = work / f"{tag}-apps-{base}-{i}.db"
            allocmark("run", "--suite", str(suite), "-a", allocators, "--db", str(db))
            tally.add_aa(db, "twin" if base == "glibc" else "mtwin", f"apps/{base}")
    for i in range(max(2, (reps + 1) // 2)):
        db = work / f"{tag}-appsuite-{i}.db"
        allocmark(
            "run", "--suite", "apps", "-a", pairs["glibc"], "--seed", str(i + 1), "--db", str(db)
        )
        tally.add_aa(db, "twin", f"appsuite{i}")


# Real effects on applications (measured here, issue 35): peak RSS under another
# allocator, each a workload, its parameters, the allocator and the verdict that is true.
APP_EFFECTS = (
    ("gcc", ("scale=1",), "jemalloc", stats.Verdict.WORSE),  # +8 %
    ("python", ("threads=2", "scale=2"), "mimalloc", stats.Verdict.BETTER),  # -9 %
)


def apps_ab(tally: Tally, work: Path, cells: int, tag: str) -> None:
    """Known peak RSS differences on applications under `run`'s default rules: each
    campaign one cell (a seed of its own), detected when judged as the truth."""
    for i in range(cells):
        for workload, params, allocator, truth in APP_EFFECTS:
            db = work / f"{tag}-appab-{workload}-{i}.db"
            options = [x for p in params for x in ("-p", p)]
            allocmark(
                "run",
                "-a",
                f"glibc,{allocator}",
                "-w",
                workload,
                *options,
                "--seed",
                str(i + 1),
                "--db",
                str(db),
            )
            store = Store(db, create=False)
            comp = stored.comparison(store, store.campaign().id)
            c = comp.rows[0].cells["peak_rss_kib"][allocator]
            if c.verdict is not None and c.ratio is not None:
                what = f"{workload} {allocator}"
                first = first_decided(comp, allocator, c.ratio.alpha)
                tally.app_effects.append((what, c.verdict is truth, c.ratio.value, first))


def first_decided(comp: analyze.Comparison, allocator: str, alpha: float) -> int:
    """The first block at which the peak RSS ratio was decided, at its final level: the
    row ran on while its time was undecided, so its length says nothing of this one."""
    row = comp.rows[0]
    cell, base = row.cells["peak_rss_kib"][allocator], row.cells["peak_rss_kib"]["glibc"]
    a, b = analyze.aligned_blocks(cell, base) or ((), ())
    for n in range(2, len(a) + 1):
        r = stats.paired_ratio(a[:n], b[:n], sequential=comp.sequential)
        if r is not None and stats.verdict(stats.at_alpha(r, alpha), comp.margin) in (
            stats.Verdict.BETTER,
            stats.Verdict.WORSE,
        ):
            return n
    return 0  # never


UNUSED = "AM_CALIBRATION_UNUSED"  # an environment variable no allocator reads
NOOP_SETTINGS = f'[glibc]\nstyle = "env"\n[glibc.values]\n{UNUSED} = [1, 2, 3]\n'


def tune_aa(tally: Tally, work: Path, reps: int, tag: str) -> None:
    """`tune` at its defaults, racing settings that change nothing."""
    settings = work / "noop-settings.toml"
    settings.write_text(NOOP_SETTINGS)
    targets = {
        "python3": ["--", *commands(work)["python3"]],
        "samethread": ["-w", "samethread", *SAMETHREAD],
    }
    for i in range(reps):
        for name, target in targets.items():
            db = work / f"{tag}-tune-{name}-{i}.db"
            allocmark("tune", "-a", "glibc", "--settings", str(settings), "--db", str(db), *target)
            tally.add_tune(db, name)


LOOPS = 200  # steps of a burning malloc: +150-170 % when every malloc burns


def time_ratio(db: Path, name: str) -> stats.Ratio | None:
    store = Store(db, create=False)
    comp = stored.comparison(store, store.campaign().id)
    return comp.rows[0].cells["time_s"][name].ratio


def slowdown(burn: Path, every: int, work: Path, blocks: int) -> float:
    """samethread's time under burn (every `every`-th malloc burns) / under glibc,
    paired over `blocks` blocks, minus 1."""
    db = work / f"tune-{every}.db"
    allocmark(
        "run",
        "-w",
        "samethread",
        *SAMETHREAD,
        "-n",
        str(blocks),
        "--max-blocks",
        str(blocks),
        "-a",
        f"glibc,burn={burn}:{_env(every)}",
        "--db",
        str(db),
    )
    r = time_ratio(db, "burn")
    if r is None:
        sys.exit(f"burn {_env(every)}: no time ratio")
    return r.value - 1


def _env(every: int) -> str:
    return f"AM_BURN_LOOPS={LOOPS},AM_BURN_EVERY={every}"


TARGETS = (0.05, 0.10, 0.20)  # the slowdowns planted by burn


def burn_every(burn: Path, work: Path) -> dict[float, int]:
    """k for +5 %, +10 % and +20 %: full / target, corrected once by a paired run at that k
    (the cost is linear in 1/k, but one campaign's machine is not the next's)."""
    full = slowdown(burn, 1, work, 15)
    if full <= 0:
        sys.exit("burn did not slow samethread down")
    out = {}
    for target in TARGETS:
        guess = max(1, round(full / target))
        seen = slowdown(burn, guess, work, 30)
        factor = min(2.0, max(0.5, seen / target)) if seen > 0 else 0.5  # noisy: nudge only
        out[target] = max(1, round(guess * factor))
    return out


def ab(tally: Tally, work: Path, cells: int, every: dict[float, int], tag: str) -> None:
    burn = native.library("libam_burn.so")
    db = work / f"{tag}-ab.db"
    seeds = ",".join(str(s) for s in range(1, cells + 1))
    allocmark(
        "run",
        "-w",
        "samethread",
        *SAMETHREAD,
        "-p",
        f"seed={seeds}",
        "--db",
        str(db),
        "-a",
        f"glibc,burn5={burn}:{_env(every[0.05])}",
        "-a",
        f"burn10={burn}:{_env(every[0.10])}",
        "-a",
        f"burn20={burn}:{_env(every[0.20])}",
    )
    store = Store(db, create=False)
    comp = stored.comparison(store, store.campaign().id)
    for name, f in (("burn20", 0.20), ("burn10", 0.10), ("burn5", 0.05)):
        for row in comp.rows:
            c = row.cells["time_s"][name]
            tally.detected.setdefault(f, []).append(c.verdict is stats.Verdict.WORSE)
            if c.ratio is not None:
                tally.seen.setdefault(f, []).append(c.ratio.value - 1)


SMALL = 0.02  # a difference under the margin, planted as a constant start delay


def small(tally: Tally, work: Path, reps: int, tag: str) -> None:
    """+2 % on the compiled programs of seconds: burn with no work per malloc against
    the same with a start delay of 2 % of the program's median time (measured here
    first, five runs), under `try` at its defaults. "faster" is false; "slower" is
    true, "same" right (it is under the margin), "undecided" honest."""
    burn = native.library("libam_burn.so")
    programs = build_programs(work)
    for i in range(reps):
        for name, argv in programs.items():
            delay_us = round(SMALL * _median_s(argv, burn) * 1e6)
            db = work / f"{tag}-small-{name}-{i}.db"
            pair = f"plain={burn},slow2={burn}:AM_BURN_START_US={delay_us}"
            allocmark("try", "-a", pair, "--db", str(db), "--", *argv)
            store = Store(db, create=False)
            c = stored.comparison(store, store.campaign().id).rows[0].cells["time_s"]["slow2"]
            if c.verdict is not None and c.ratio is not None:
                tally.small.append((name, c.ratio.value, c.verdict))


def _median_s(argv: list[str], burn: Path) -> float:
    """The median wall time of five runs of argv with burn preloaded (no work)."""
    took = []
    for _ in range(5):
        began = time.monotonic()
        env = {**os.environ, "LD_PRELOAD": str(burn)}
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        took.append(time.monotonic() - began)
    return statistics.median(took)


# The planted cause (tests/answer/test_why_planted.py): glibc under a second name told to
# put every block of 256 bytes or more in a mapping of its own, unmapped on free. Its
# signal, and the others that describe the same cause from the why pass: the system
# time is spent inside malloc and free, and a 256-byte block's mapping is a page
# (size-class rounding), all of it private dirty memory.
PLANTED = {
    "time": ("sys_s", {"prof_inside_s"}),
    "rss": ("peak_anon_kib", {"prof_slack_kib", "near_peak_dirty_kib"}),
}


def explainable(store: Store) -> analyze.Comparison:
    """The newest campaign's comparison with its runs' signals, as a report reads it for
    its whys (a bare comparison has none, and would explain nothing: every count of
    explained differences would read 0)."""
    cid = store.campaign().id
    comp = stored.with_signals(store, cid, stored.comparison(store, cid))
    if not comp.signals:
        raise SystemExit(f"campaign {cid}: no signals stored, nothing a why could read")
    return comp


def why_ab(tally: Tally, work: Path, cells: int, tag: str) -> None:
    """Planted causes: is the planted one named for each decided difference, and no other?
    Under `run`'s default rules (blocks added until decided, then a why pass only when
    it costs at most 15 %), and with `--why` (the pass's 4 profiled blocks always)."""
    twin = twins(work, f"why-{tag}")["glibc"].split("=", 1)[1]
    seeds = ",".join(str(s) for s in range(1, cells + 1))
    for rules, flags in (("run's rules", []), ("--why", ["--why"])):
        db = work / f"{tag}-why{len(flags)}.db"
        planted = f"glibc,mmapper={twin}:MALLOC_MMAP_THRESHOLD_=256"
        allocmark(
            "run",
            "-w",
            "samethread",
            *SAMETHREAD,
            "-p",
            f"seed={seeds}",
            "--db",
            str(db),
            "-a",
            planted,
            *flags,
        )
        comp = explainable(Store(db, create=False))
        found = {(w.label, w.axis): w for w in why.explain(comp) if w.allocator == "mmapper"}
        for row in comp.rows:
            for axis, (signal, same) in PLANTED.items():
                w = found.get((row.label, axis))
                most = (
                    {f.signal for f in w.factors if f.share is not None and f.share >= why.MOST}
                    if w
                    else set()
                )
                tally.planted.append(
                    (rules, axis, w is not None, signal in most, bool(most - {signal} - same))
                )


# Causes planted inside the allocator (burn's AM_BURN_PLANT), each on a workload where it
# costs time, and the mechanism the why must name for it (answer/why.py MECHANISMS).
# `trim` runs in the workload's own thread, whose glibc arena shrinks its heap by
# madvise(MADV_DONTNEED), not brk: pages given back.
CAUSES = {
    "madvise": (
        [
            "churn",
            "-p",
            "count=5000",
            "-p",
            "size_min=8192",
            "-p",
            "size_max=65536",
            "-p",
            "rounds=4",
        ],
        "pages",
    ),
    "futex": (["samethread", "-p", "count=50000", "-p", "rounds=4", "-p", "threads=2"], "locks"),
    "mmap": (
        [
            "churn",
            "-p",
            "count=5000",
            "-p",
            "size_min=4096",
            "-p",
            "size_max=65536",
            "-p",
            "rounds=4",
        ],
        "maps",
    ),
    "trim": (["realloc", "-p", "count=2000", "-p", "rounds=3"], "pages"),
}


def causes(tally: Tally, work: Path, cells: int, tag: str) -> None:
    """Each cause planted inside an allocator (raw system calls, or glibc's own), at
    `run`'s defaults over CELLS seeds: for each decided time difference, is the planted
    mechanism named, and which others?"""
    burn = native.library("libam_burn.so")
    seeds = ",".join(str(s) for s in range(1, cells + 1))
    for plant, (workload, mechanism) in CAUSES.items():
        db = work / f"{tag}-cause-{plant}.db"
        allocators = f"glibc,{plant}={burn}:AM_BURN_PLANT={plant}"
        allocmark("run", "-w", *workload, "-p", f"seed={seeds}", "--db", str(db), "-a", allocators)
        comp = explainable(Store(db, create=False))
        found = {w.label: w for w in why.explain(comp) if w.allocator == plant and w.axis == "time"}
        for row in comp.rows:
            w = found.get(row.label)
            named = w.mechanisms if w else ()
            tally.causes.append((plant, row.label, w is not None, mechanism in named, named))


BISECT_COMMITS = 16
BISECT_SPIN = 30  # steps before each malloc: about +10 % on samethread (printed as measured)
BISECT_RESERVE_KIB = 768  # touched by a constructor: about +5 % of samethread's 15 MiB peak
BISECT_METRICS = {"time": "time", "rss": "peak RSS"}


@dataclass(frozen=True)
class Bisected:
    """One calibration bisect: what was planted, what it named, and what it cost."""

    metric: str  # --metric
    planted: bool
    verdict: str  # "right", "wrong" or "none"
    confirmed: bool  # the named commit confirmed against its parent
    start: float  # the start's ratio (nan: no line)
    confirmation: float  # the confirmation's ratio (nan: none)
    seconds: float
    stretched: bool  # the default budget stretched


def bisects(tally: Tally, work: Path, reps: int, cells: int, tag: str, batch: int) -> None:
    """For time and for peak RSS: REPS A/A bisects and CELLS with a change planted at a
    random commit (+10 % time, +5 % peak RSS), each at bisect's defaults; `batch` draws
    other commits and seeds (batch 0 is the one docs/calibration.md first quoted)."""
    rng = random.Random(44 + batch)
    for metric in BISECT_METRICS:
        for i in range(reps + cells):
            planted = rng.randint(1, BISECT_COMMITS) if i >= reps else None
            time_ = metric == "time"
            repo = tinyrepo.make(
                work / f"bisect-{tag}-{metric}-{i}",
                slow=planted if time_ else None,
                fat=None if time_ else planted,
                broken=None,
                last=BISECT_COMMITS,
                spin=BISECT_SPIN,
                reserve_kib=BISECT_RESERVE_KIB,
            )
            began = time.monotonic()
            out = allocmark(
                "bisect",
                "--repo",
                str(repo.path),
                "--build",
                tinyrepo.BUILD,
                "--library",
                tinyrepo.OUTPUT,
                "v1.0",
                "v2.0",
                "--metric",
                metric,
                "-w",
                "samethread",
                *SAMETHREAD,
                "--seed",
                str(i + 1 + 1000 * batch),
                "--db",
                str(work / f"bisect-{tag}.db"),
            )
            tally.bisects.append(_bisected(out, repo, metric, planted, time.monotonic() - began))
            print("  " + out.strip().splitlines()[-1][:200], flush=True)


def _bisected(
    out: str, repo: tinyrepo.Repo, metric: str, planted: int | None, seconds: float
) -> Bisected:
    start = re.search(r"^start .*?×([\d.]+)", out, re.M)
    confirm = re.search(r"^confirm .*?×([\d.]+)", out, re.M)
    found = re.search(r"first commit decided unlike good: (\S+)", out)
    named = found.group(1) if found else ""
    verdict = (
        "none"
        if not named
        else "right"
        if planted is not None and named == repo.describe(planted)
        else "wrong"
    )
    return Bisected(
        metric,
        planted is not None,
        verdict,
        "; confirmed:" in out or "the start confirms it" in out,
        float(start.group(1)) if start else math.nan,
        float(confirm.group(1)) if confirm else math.nan,
        seconds,
        "default budget stretched" in out,
    )


def report_bisect(t: Tally) -> None:
    for metric, word in BISECT_METRICS.items():
        for planted, what in ((False, "A/A"), (True, "planted change")):
            mine = [b for b in t.bisects if b.planted == planted and b.metric == metric]
            if not mine:
                continue
            wrong = sum(b.verdict != "none" if not planted else b.verdict == "wrong" for b in mine)
            right = sum(b.verdict == "right" for b in mine)
            none = sum(b.verdict == "none" for b in mine)
            named = [b for b in mine if b.verdict != "none"]
            starts = [b.start for b in mine if not math.isnan(b.start)]
            confirms = [b.confirmation for b in mine if not math.isnan(b.confirmation)]
            minutes = [b.seconds / 60 for b in mine]
            print(
                f"  bisect {word}, {what}: a commit wrongly named {rate(wrong, len(mine))}"
                + (f"; right {rate(right, len(mine))}, no commit {none}" if planted else "")
                + f"; confirmed {sum(b.confirmed for b in named)} of {len(named)} named"
                + f" (start ratio {statistics.median(starts):.3f} median"
                + (f", confirmation {statistics.median(confirms):.3f}" if confirms else "")
                + f"; {statistics.median(minutes):.1f} min median, {max(minutes):.1f} most,"
                f" {sum(b.stretched for b in mine)} stretched)"
            )


@contextlib.contextmanager
def condition(name: str) -> Iterator[None]:
    """Nothing else ("quiet"), or one core spinning in another process ("busy")."""
    spinner = None
    if name == "busy":
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()


def report(name: str, t: Tally, reps: int) -> None:
    print(
        f"condition: {name}"
        + (" (one core spinning in a process this bench started)" if name == "busy" else "")
    )
    if any(not c[0].startswith("app") for c in t.cells):
        report_aa(t, reps)
    if any(c[0].startswith("app") for c in t.cells):
        report_apps(t, reps)
    for what in dict.fromkeys(w for w, *_ in t.app_effects):
        mine = [e for e in t.app_effects if e[0] == what]
        hits = [e[1] for e in mine]
        blocks = [e[3] for e in mine if e[1] and e[3]]
        print(
            f"  detected ({what} peak RSS, run's rules): {rate(sum(hits), len(hits))} "
            f"(measured {statistics.median(e[2] - 1 for e in mine):+.1%} median; first "
            f"decided at block {statistics.median(blocks) if blocks else '-'}, median)"
        )
    if t.planted:
        report_why(t)
    if t.small:
        report_small(t)
    if t.causes:
        report_causes(t)
    if t.bisects:
        report_bisect(t)
    for f in sorted(TARGETS, reverse=True):
        if hits := t.detected.get(f, []):
            seen = t.seen.get(f, [])
            median = f", measured {statistics.median(seen):+.1%} median" if seen else ""
            print(f"  detected (+{f:.0%}): {rate(sum(hits), len(hits))} (samethread{median})")


def report_small(t: Tally) -> None:
    """The +2 % cells: a "faster" is false (target: none)."""
    said = [v for *_, v in t.small]
    ratios = [r for _, r, _ in t.small]
    print(
        f"  +2 % planted (start delay; compiled programs, `try`'s defaults): measured "
        f"{statistics.median(ratios) - 1:+.1%} median; faster (false) "
        f"{rate(said.count(stats.Verdict.BETTER), len(said))}; slower "
        f"{said.count(stats.Verdict.WORSE)}, same {said.count(stats.Verdict.SAME)}, "
        f"undecided {said.count(stats.Verdict.UNDECIDED)}"
    )
    for name, r, v in t.small:
        print(f"      {name} ×{r:.4f} {v.value}")


def report_why(t: Tally) -> None:
    """The planted causes' explanations (targets: the right cause >= 90 % of decided
    cells, a wrong one <= 5 %)."""
    for rules in dict.fromkeys(p[0] for p in t.planted):
        for axis, label in (("time", "time (system CPU)"), ("rss", "peak RSS (anonymous)")):
            mine = [p for p in t.planted if p[:2] == (rules, axis)]
            decided = [p for p in mine if p[2]]
            named, other = sum(p[3] for p in decided), sum(p[4] for p in decided)
            print(
                f"  planted cause ({rules}), {label}: decided {rate(len(decided), len(mine))}; "
                f"the planted cause named: {rate(named, len(decided))}; another cause "
                f"named: {rate(other, len(decided))}"
            )


def report_causes(t: Tally) -> None:
    """Causes planted inside the allocator (targets: the mechanism named in >= 95 % of
    decided time cells, another 0 times)."""
    for plant, (_, mechanism) in CAUSES.items():
        mine = [c for c in t.causes if c[0] == plant]
        decided = [c for c in mine if c[2]]
        named = sum(c[3] for c in decided)
        other = [c for c in decided if set(c[4]) - {mechanism}]
        print(
            f"  planted {plant} ({mechanism}): time decided {rate(len(decided), len(mine))}; "
            f"named: {rate(named, len(decided))}; another mechanism: "
            f"{rate(len(other), len(decided))}"
        )
        for c in other:
            print(f"      {c[1]}: {', '.join(c[4])}")


def report_tune(t: Tally, reps: int) -> None:
    false = [what for what, v in t.tuned if v in (stats.Verdict.BETTER, stats.Verdict.WORSE)]
    same = sum(v is stats.Verdict.SAME for _, v in t.tuned)
    wrong = [a for a in t.tune_answers if a]
    print(
        f"  tune A/A: {UNUSED}=1,2,3 against glibc's defaults on python3 and samethread, "
        f"{reps}x each"
    )
    print(f"  tune false verdicts: {rate(len(false), len(t.tuned))}")
    for what in false:
        print(f"      {what}")
    print(f"  tune false recommendations: {rate(len(wrong), len(t.tune_answers))}")
    for what in wrong:
        print(f"      {what}")
    print(f"  tune same reached: {rate(same, len(t.tuned))}")


def report_apps(t: Tally, reps: int) -> None:
    cells = [c for c in t.cells if c[0].startswith("app")]
    answers = [(k, a) for k, a in t.answers if k.startswith("app")]
    false = [c for c in cells if c[2] in (stats.Verdict.BETTER, stats.Verdict.WORSE)]
    print(
        f"  A/A on applications of seconds: ruby (4 threads), python (2 threads), sqlite, "
        f"gcc, redis under glibc/twin and mimalloc/mtwin via `run`, {reps}x each; the apps "
        f"suite under glibc/twin, {max(2, (reps + 1) // 2)}x"
    )
    print(f"  false verdicts: {rate(len(false), len(cells))}")
    for what, *_ in false:
        print(f"      {what}")
    wrong = [a for k, a in answers if a]
    print(f"  false recommendations: {rate(len(wrong), len(answers))}")
    for what in wrong:
        print(f"      {what}")
    for kind, prefix in (("run's rules", "apps/"), ("apps suite, 16 fixed blocks", "appsuite")):
        for metric, label in (("time_s", "time"), ("peak_rss_kib", "peak RSS")):
            mine = [c for c in cells if c[1] == metric and c[0].startswith(prefix)]
            same = sum(c[2] is stats.Verdict.SAME for c in mine)
            blocks = [c[3] for c in mine if c[2] is not stats.Verdict.UNDECIDED]
            print(
                f"  {kind}, {label}: same {rate(same, len(mine))}; median "
                f"{statistics.median(blocks) if blocks else '-'} blocks to a verdict"
            )


def report_aa(t: Tally, reps: int) -> None:
    cells = [c for c in t.cells if not c[0].startswith("app")]
    false = [c for c in cells if c[2] in (stats.Verdict.BETTER, stats.Verdict.WORSE)]
    same = [c for c in cells if c[2] is stats.Verdict.SAME]
    real_time = [c for c in cells if c[1] == "time_s" and not c[0].startswith("quick")]
    answers = [(k, a) for k, a in t.answers if not k.startswith("app")]
    wrong = [a for _, a in answers if a]
    rounds = len(t.minutes) // (len(REAL) * len(BASES))  # one per real campaign
    print(
        f"  A/A: gzip, sort, python3, ruby, {', '.join(PROGRAMS)} under glibc/twin and "
        f"mimalloc/mtwin via `try`, "
        f"and the quick suite under glibc/twin, {rounds}x each"
    )
    print(f"  false verdicts: {rate(len(false), len(cells))}")
    for what, *_ in false:
        print(f"      {what}")
    print(f"  false recommendations: {rate(len(wrong), len(answers))}")
    for what in wrong:
        print(f"      {what}")
    runs = ", ".join(f"{k} {statistics.median(v):.2f} s" for k, v in t.seconds.items())
    print(
        f"  same reached: {rate(len(same), len(cells))}; A/A time cells of the real "
        f"commands (median run here: {runs}): "
        f"{rate(sum(c[2] is stats.Verdict.SAME for c in real_time), len(real_time))}"
    )
    # The quick suite runs a fixed 10 blocks: its cells say nothing of what a verdict
    # costs when blocks are added until decided, so the real commands are apart.
    for kind, real in (("real commands", True), ("quick suite, fixed blocks", False)):
        for metric, label in (("time_s", "time"), ("peak_rss_kib", "peak RSS")):
            mine = [c for c in cells if c[1] == metric and c[0].startswith("quick") != real]
            blocks = [c[3] for c in mine if c[2] is not stats.Verdict.UNDECIDED]
            left = [c[3] for c in mine if c[2] is stats.Verdict.UNDECIDED]
            decided_at = statistics.median(blocks) if blocks else "-"
            left_at = statistics.median(left) if left else "-"
            print(
                f"  blocks to a verdict ({kind}, {label}): median {decided_at} of "
                f"{len(blocks)} decided; {len(left)} undecided (median {left_at} blocks)"
            )
    if t.minutes:
        print(
            f"  minutes a real command's `try` took in all: median "
            f"{statistics.median(t.minutes):.1f} ({min(t.minutes):.1f}-{max(t.minutes):.1f})"
        )
    print(f"  A/A differences explained: {rate(len(t.aa_explained), len(cells))}")
    for what in t.aa_explained:
        print(f"      {what}")
    print(f"  A/A differences given a mechanism: {rate(len(t.aa_mechanisms), len(cells))}")
    for what in t.aa_mechanisms:
        print(f"      {what}")
    across_false = [w for v, w in t.across if v in ("better", "worse")]
    across = rate(len(across_false), len(t.across))
    print(f"  false verdicts through compare across campaigns: {across}")


def main(argv: Sequence[str]) -> None:
    reps = int(argv[0]) if argv else 3
    cells = int(argv[1]) if len(argv) > 1 else 10
    conditions = argv[2].split(",") if len(argv) > 2 else ["quiet", "busy"]
    parts = (
        set(argv[3].split(","))
        if len(argv) > 3
        else {"aa", "ab", "tune", "apps", "appsab", "why", "bisect", "small", "causes"}
    )
    batch = int(argv[4]) if len(argv) > 4 else 0
    with tempfile.TemporaryDirectory(prefix="allocmark-calibration-") as tmp:
        work = Path(tmp)
        # As root, allocmark runs the measured commands as its own user (run/runas.py):
        # they read their inputs here, so the directory is opened as an ordinary one.
        work.chmod(0o755)
        every = burn_every(native.library("libam_burn.so"), work) if "ab" in parts else {}
        for name in conditions:
            tally = Tally()
            # "quiet" means nothing else: even a nice'd job takes the idle core of 2.
            busy = psutil.cpu_percent(interval=3) if name == "quiet" else 0.0
            if busy > 15:
                print(
                    f"warning: the CPUs were {busy:.0f} % busy before the quiet condition "
                    "began: other work is running, and its noise counts as this machine's"
                )
            with condition(name):
                if "aa" in parts:
                    aa(tally, work, reps, name)
                if "kept" in parts:
                    judge_aa(tally, kept(), name)
                if "tune" in parts:
                    tune_aa(tally, work, reps, name)
                if "ab" in parts:
                    ab(tally, work, cells, every, name)
                if "apps" in parts:
                    apps_aa(tally, work, reps, name)
                if "appsab" in parts:
                    apps_ab(tally, work, max(3, cells // 3), name)
                if "why" in parts:
                    why_ab(tally, work, cells, name)
                if "bisect" in parts:
                    bisects(tally, work, reps, cells, name, batch)
                if "small" in parts:
                    small(tally, work, reps, name)
                if "causes" in parts:
                    causes(tally, work, cells, name)
            report(name, tally, reps)
            sys.stdout.flush()
            keep(work)


def keep(work: Path) -> None:
    """The campaigns' databases copied to AM_CALIBRATION_KEEP, when it is set (the
    bench's own files, written by its own process: no untrusted code writes here)."""
    into = os.environ.get("AM_CALIBRATION_KEEP")
    if not into:
        return
    Path(into).mkdir(parents=True, exist_ok=True)
    for db in work.glob("*.db"):
        shutil.copy2(db, Path(into) / db.name)


if __name__ == "__main__":
    main(sys.argv[1:])
