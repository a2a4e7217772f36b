"""The report's tables beyond the comparison, in one form every format renders:
the hardening battery's matrix, scores and costs (hardening.py), phased workloads'
RSS per phase with their steady-state verdicts (aging.py), what the RSS is made of
(composition.py), and what each run spent (the signals the answer's why reads)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from allocmark import stats
from allocmark.answer import aging, analyze, composition, hardening, releases, replays
from allocmark.answer.report import Report
from allocmark.model import AllocatorRuns, RunStatus
from allocmark.report import fmt


@dataclass(frozen=True)
class Extra:
    title: str
    heads: tuple[str, ...]  # the first names the row labels
    rows: tuple[tuple[str, ...], ...]  # label, then one text per further head
    notes: tuple[str, ...] = ()  # lines shown under the table
    classes: tuple[tuple[str, ...], ...] = ()  # a style class per cell ("o-caught"), or none
    keep: int = 1  # label columns, repeated when a terminal cuts the table into parts


def extras(report: Report, made: bool = True) -> list[Extra]:
    """The tables beyond the metrics; `made`: with what the RSS is made of (a detail
    the terminal's glance leaves to --detail)."""
    found = []
    if report.battery is not None:
        found += [battery_table(report.battery), score_table(report.battery)]
    comp, answered = report.comparison, report.findings
    if any(c.label != "geomean" for c in answered.costs):
        found.append(cost_table(answered.costs, comp.margin))
    if steps := releases_table(comp, answered.changes):
        found.append(steps)
    found += aging_tables(report.aging)
    if report.replays:  # what a replay measures: said wherever one is shown
        found.append(replays_table(report.replays))
    if report.made and made:
        found.append(made_table(report.made))
    if made and (spent := signals_table(comp)):
        found.append(spent)
    return found


def releases_table(comp: analyze.Comparison, found: Sequence[releases.Change]) -> Extra | None:
    """A line per consecutive pair of versions (releases.py): per row, the decided
    changes in speed and peak RSS with their intervals; "=" same, "?" undecided."""
    if not found:
        return None
    rows = list(dict.fromkeys(c.row for c in found))
    heads = [f"{row}: {word}" for row in rows for word in ("speed", "peak RSS")]
    pairs = list(dict.fromkeys((c.family, c.series, c.older, c.newer) for c in found))
    by = {(c.older, c.newer, c.row, c.metric != releases.MEMORY): c for c in found}
    several = len({(f, k) for f, k, _, _ in pairs}) > len({f for f, _, _, _ in pairs})
    lines = []
    for family, kind, old, new in pairs:
        label = f"{comp.lineages[old].version} → {comp.lineages[new].version}"
        texts = [_change(by.get((old, new, row, speed))) for row in rows for speed in (True, False)]
        lines.append((family + (f" ({kind})" if several else ""), label, *texts))
    return Extra(
        f"Release to release: each version against the one before it ({_tally(found)})",
        ("family", "versions", *heads),
        tuple(lines),
        notes=(
            "the newer version's time (or throughput) and peak RSS over the older's, "
            "paired by block, 95 % intervals judged as one family per allocator "
            f"(Holm); = the same within ±{comp.margin:.0%}, ? undecided; crate builds, "
            "Debian's, Debian's under a newer glibc and git revisions are each a line "
            "of their own (a build under another glibc changes the C library too)",
            *_commits(comp, pairs),
        ),
        keep=2,
    )


def _tally(found: Sequence[releases.Change]) -> str:
    """What the table's cells say, counted: "4 changed, 2 the same, 1 undecided, of 7"."""
    changed = sum(c.decided for c in found)
    same = sum(c.verdict is stats.Verdict.SAME for c in found)
    parts = [f"{changed} changed", f"{same} the same", f"{len(found) - changed - same} undecided"]
    return ", ".join(parts) + f", of {len(found)}"


def _commits(comp: analyze.Comparison, pairs: Sequence[tuple[str, str, str, str]]) -> list[str]:
    """Where each revision of a repository came from: its commit and `git describe`."""
    names = dict.fromkeys(n for _, _, old, new in pairs for n in (old, new))
    return [
        f"{n}: {g.describe} ({g.commit[:12]}) of {g.repository}"
        for n in names
        if (g := comp.revisions.get(n))
    ]


def _change(c: releases.Change | None) -> str:
    if c is None or c.ratio is None or c.verdict is None:
        return "-"
    if c.verdict is stats.Verdict.SAME:
        return "="
    if not c.verdict.differs:
        return "?"
    r = c.ratio
    word = fmt.verdict_word(c.metric, c.verdict)
    return f"{word} {r.value - 1:+.0%} [{r.low - 1:+.0%}, {r.high - 1:+.0%}]"


# What every run records to explain a difference (why.py): column -> heading, unit.
SIGNAL_COLUMNS = {
    "user_s": ("user CPU", "s"),
    "sys_s": ("system CPU", "s"),
    "minflt": ("minor faults", ""),
    "majflt": ("major faults", ""),
    "nvcsw": ("voluntary switches", ""),
    "nivcsw": ("involuntary switches", ""),
    "start_rss_kib": ("RSS at the first sample", "KiB"),
    "peak_anon_kib": ("anonymous at the peak", "KiB"),
    "peak_file_kib": ("file-backed at the peak", "KiB"),
    # the kernel's counts (run/kernel.py)
    "syscall_mmap": ("mmap calls", ""),
    "syscall_munmap": ("munmap calls", ""),
    "syscall_brk": ("brk calls", ""),
    "syscall_mprotect": ("mprotect calls", ""),
    "syscall_madvise_dontneed": ("madvise(DONTNEED) calls", ""),
    "syscall_futex_wait": ("futex waits", ""),
}


def signals_table(comp: analyze.Comparison) -> Extra | None:
    """Per cell and allocator, the median over its OK measured runs of each signal
    the answer's why reads (None: no run has them); a row named as the comparison
    names it."""
    cells = [c for c in comp.signals if c.role == "measure"]
    named = {(r.workload, r.params): r.label for r in comp.rows}
    rows = tuple(
        (
            named.get((c.workload, c.params), c.workload),
            c.allocator,
            *(_median_signal(c, k, unit) for k, (_, unit) in SIGNAL_COLUMNS.items()),
        )
        for c in cells
    )
    if not any(x != "-" for r in rows for x in r[2:]):
        return None
    return Extra(
        "What each run spent (medians of the measured runs; the answer's why reads these)",
        ("workload", "allocator", *(h for h, _ in SIGNAL_COLUMNS.values())),
        rows,
        keep=2,
    )


def _median_signal(c: AllocatorRuns, column: str, unit: str) -> str:
    values = [
        float(v)
        for v, s in zip(c.columns.get(column, ()), c.statuses, strict=False)
        if v is not None and s is RunStatus.OK
    ]
    if not values:
        return "-"
    m = statistics.median(values)
    return fmt.seconds(m) if unit == "s" else fmt.size_kib(m) if unit == "KiB" else f"{m:.0f}"


def aging_tables(steadies: Sequence[aging.Steady]) -> list[Extra]:
    """Per phased cell: RSS at the end of each phase (MiB) per allocator, the live
    requested MiB beside it, and each allocator's verdict under the table."""
    out = []
    for label in dict.fromkeys(s.label for s in steadies):
        cell = [s for s in steadies if s.label == label]
        rows = tuple(
            (
                str(p + 1),
                f"{phase.live_mib:.1f}",
                *(f"{s.phases[p].rss_mib:.1f}" if p < len(s.phases) else "" for s in cell),
            )
            for p, phase in enumerate(cell[0].phases)
        )
        head = (
            f"Steady state of {label}: slope of RSS from phase {cell[0].first + 1} on, "
            "95% intervals over runs"
        )
        out.append(
            Extra(
                f"RSS at the end of each phase (MiB), {label}",
                ("phase", "live", *(s.allocator for s in cell)),
                rows,
                (head, *(f"{s.allocator}: {s.text}" for s in cell)),
            )
        )
    return out


# What the RSS is made of (composition.Made): column key -> heading.
MADE_COLUMNS = {
    "rss": "RSS",
    "live": "live",
    "held": "held free",
    "metadata": "metadata",
    "rest": "rest",
    "released": "released",
    "committed": "committed",
    "dirty": "of held: dirty",
    "cached": "of held: thread caches",
}


def replays_table(lines: Sequence[replays.Replayed]) -> Extra:
    """Each replay row beside its recording: calls, peaks, allocation's share."""

    def mib(v: float | None, scale: float) -> str:
        return f"{v * scale / 2**20:.1f}" if v is not None else "-"

    rows = tuple(
        (
            r.label,
            f"{r.calls:,.0f}",
            f"{r.waits:,.0f}",
            mib(r.peak_recorded, 1),
            mib(r.peak_replayed, 1),
            mib(r.rss_recorded_kib, 1024),
            mib(r.rss_replayed_kib, 1024),
            f"{r.alloc_share:.0%}" if r.alloc_share is not None else "-",
        )
        for r in lines
    )
    return Extra(
        f"Replays beside their recordings (replays: {lines[0].allocator}, median)",
        (
            "workload",
            "calls",
            "waits",
            "requested peak: recorded",
            "replayed",
            "peak RSS MiB: recorded",
            "replayed",
            "allocation's share when recorded",
        ),
        rows,
        (
            "A replay makes the recorded program's allocation calls again, in its threads and "
            "their orderings: it measures the allocator's own work on them, not the program's "
            "computation, its cache behaviour or its memory beyond its blocks (a byte of each "
            "page written: the program's own touches are not recorded). Requested peaks in "
            "MiB, the recorded order's beside the replay's (the same in one thread); the "
            "recorded peak RSS was the program's under the recorder; allocation's share: of "
            "the recorded program's CPU time, from 1 call in 64 timed (-: not known).",
        ),
    )


def _made_cells(m: composition.Made) -> list[str]:
    """A Made's numbers in MiB and its arenas, "-" where its allocator does not say."""
    values = {**m.kib, "rest": m.rest_kib}
    sizes = [f"{v / 1024:.1f}" if (v := values.get(k)) is not None else "-" for k in MADE_COLUMNS]
    return [*sizes, f"{m.arenas:g}" if m.arenas is not None else "-"]


def made_table(made: Sequence[composition.Made]) -> Extra:
    rows = tuple((m.label, m.allocator, m.source, *_made_cells(m)) for m in made)
    return Extra(
        "What the RSS is made of at the end of the run (the allocator's statistics, MiB)",
        ("workload", "allocator", "stats", *MADE_COLUMNS.values(), "arenas"),
        rows,
        (
            "held: free memory the allocator keeps resident; rest: the program, its libraries "
            "and stacks, and what the allocator does not count; released: mapped but given "
            "back to the OS; dirty: free pages kept, not yet given back; thread caches: free "
            "blocks in them as the run ends; -: the allocator does not say; a command of "
            "several processes: the one with the largest RSS as it exited",
        ),
    )


_CLASS = {
    hardening.Outcome.AT_ERROR: "o-caught",
    hardening.Outcome.LATER: "o-later",
    hardening.Outcome.REPORTED: "o-message",
    hardening.Outcome.MISSED: "o-missed",
    hardening.Outcome.CORRUPTED: "o-corrupt",
    hardening.Outcome.HANG: "o-hang",
    hardening.Outcome.CONFORMING: "o-ok",
    hardening.Outcome.NONCONFORMING: "o-no",
    hardening.Outcome.NOT_RUN: "o-na",
}


def battery_table(m: hardening.Matrix) -> Extra:
    """Tests x allocators: what each allocator did about each error."""
    rows, classes = [], []
    for t in m.tests:
        cells = [m.cells.get((t, a)) for a in m.allocators]
        rows.append((t, m.kinds[t].value, *(c.text if c else "" for c in cells)))
        classes.append(("", "", *(_cell_class(c) for c in cells)))
    runs = max((len(c.seen) for c in m.cells.values()), default=0)
    return Extra(
        f"Hardening battery: what each allocator does about each error ({runs} "
        f"run{'s' if runs != 1 else ''} of each test under each allocator)",
        ("test", "kind", *m.allocators),
        tuple(rows),
        (
            "; ".join(f"{code}: {o.value}" for o, code in hardening.SHORT.items()),
            "caught N of M: a randomised check caught the error in N of the M runs",
        ),
        tuple(classes),
        keep=2,
    )


def _cell_class(c: hardening.Trial | None) -> str:
    if c is None:
        return ""
    return "o-mixed" if len({s.outcome for s in c.seen}) > 1 else _CLASS[c.outcome]


def score_table(m: hardening.Matrix) -> Extra:
    rows = []
    for s in m.scores:
        rows.append(
            (
                s.allocator,
                f"{s.caught} of {s.misuse}",
                str(s.corrupted),
                f"{s.kept} of {s.contract}",
                f"{s.points:.0%}",
            )
        )
    return Extra(
        "Hardening score per allocator",
        (
            "allocator",
            "misuses caught (every run)",
            "misuses with damage",
            "contracts kept",
            "score",
        ),
        tuple(rows),
        (
            "score: the share of points over all tests: 1 for a misuse caught or a contract "
            "kept, 1/2 for a misuse reported without stopping; randomised checks count by run",
        ),
    )


def cost_table(costs: Sequence[hardening.Cost], margin: float) -> Extra:
    rows = []
    for c in costs:
        cells = [_cost_text(c.ratios[m], c.verdicts[m], m) for m in hardening.COST_METRICS]
        rows.append((f"{c.hardened} / {c.plain}", c.label, *cells))
    return Extra(
        "What hardening costs: each hardened build against its plain build (95% intervals)",
        ("hardened / plain", "workload", "time", "peak RSS"),
        tuple(rows),
        (
            f"ratios paired by block; slower/faster, larger/smaller: the interval excludes 1; "
            f"same: within ±{margin:.0%}",
        ),
    )


def _cost_text(r: stats.Ratio | stats.GeoMean | None, v: stats.Verdict | None, m: str) -> str:
    if r is None:
        return "-"
    if isinstance(r, stats.GeoMean):
        return fmt.geomean(r)
    return f"×{r.value:.2f} {fmt.ratio_interval(r)} {fmt.verdict_word(m, v)}".strip()
