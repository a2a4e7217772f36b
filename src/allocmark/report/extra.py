"""The report's tables beyond the comparison, in one form every format renders:
phased workloads' RSS per phase with their steady-state verdicts (aging.py), and
what the RSS is made of (composition.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from allocmark import aging, analyze, composition
from allocmark.report import data, fmt


@dataclass(frozen=True)
class Extra:
    title: str
    heads: tuple[str, ...]  # the first names the row labels
    rows: tuple[tuple[str, ...], ...]  # label, then one text per further head
    notes: tuple[str, ...] = ()  # lines shown under the table


def extras(report: data.ReportData) -> list[Extra]:
    found = aging_tables(report.aging)
    if report.made:
        found.append(made_table(report.made))
    return found


def aging_tables(steadies: Sequence[aging.Steady]) -> list[Extra]:
    """Per phased cell: RSS at the end of each phase (MiB) per allocator, the live
    requested MiB beside it, and each allocator's verdict under the table."""
    labels = analyze.label_rows(list(dict.fromkeys((s.workload, s.params) for s in steadies)))
    out = []
    for key, label in labels.items():
        cell = [s for s in steadies if (s.workload, s.params) == key]
        rows = tuple(
            (str(p + 1), f"{phase.live_mib:.1f}",
             *(f"{s.phases[p].rss_mib:.1f}" if p < len(s.phases) else "" for s in cell))
            for p, phase in enumerate(cell[0].phases)
        )  # fmt: skip
        head = (f"Steady state of {label}: slope of RSS from phase {cell[0].first + 1} on, "
                "95% intervals over runs")  # fmt: skip
        out.append(Extra(f"RSS at the end of each phase (MiB), {label}",
                         ("phase", "live", *(s.allocator for s in cell)), rows,
                         (head, *(f"{s.allocator}: {s.text}" for s in cell))))  # fmt: skip
    return out


def made_table(made: Sequence[composition.Made]) -> Extra:
    labels = analyze.label_rows(list(dict.fromkeys((m.workload, m.params) for m in made)))
    rows = tuple((labels[(m.workload, m.params)], m.allocator, m.source, *fmt.made_cells(m))
                 for m in made)  # fmt: skip
    return Extra(
        "What the RSS is made of at the end of the run (the allocator's statistics, MiB)",
        ("workload", "allocator", "stats", *fmt.MADE_COLUMNS.values()),
        rows,
        ("held: free memory the allocator keeps resident; rest: the program, its libraries "
         "and stacks, and what the allocator does not count; released: mapped but given "
         "back to the OS; -: the allocator does not say",),
    )  # fmt: skip
