"""The terminal's answer at a glance: the one-sentence answer, the verdict matrices
(matrix.py), and a one-sentence answer per workload. The tables of every value and
interval, and the recommendation's reasons, are `--detail` (table.comparison)."""

from __future__ import annotations

import re

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from allocmark.answer.analyze import Comparison
from allocmark.answer.findings import Findings
from allocmark.report import answer, fmt, matrix

STYLES = {
    matrix.BETTER: "green",
    matrix.WORSE: "red",
    matrix.SAME: "cyan",
    matrix.UNDECIDED: "yellow",
    matrix.BASE: "dim",
    matrix.FAILED: "bold red",
    matrix.NONE: "dim",
}
INTERVAL = re.compile(r" \[[^\]]*\]")  # " [1.04–1.58]": in the matrix and --detail
LABEL = 30  # a row's label at most (ten columns of CELL + 1 leave 29 of 120)
CELL = 8  # "▲ 1.94×", "? ±12%", "jemalloc": ten allocators fit 120 columns


def glance(console: Console, comp: Comparison, findings: Findings) -> None:
    """Shown where findings.matrix (a matrix needs a baseline and something to set
    against it); else the tables."""
    found = matrix.matrices(comp, findings)
    answers = answer.leads(findings)
    if answers:
        console.print(Text.assemble(("Answer: ", "bold"), fmt.printable(answers[0][1])))
    # The labels get what ten columns of CELL (and a space each) leave of the width.
    width = max(12, min(LABEL, console.width - len(comp.allocators) * (CELL + 1) - 2))
    for m in found:
        lines = _lines(m, width)
        if max(x.cell_len for x in lines) <= console.width:
            console.print(Text("\n").join(lines))
        else:  # a narrow terminal: rich squeezes the columns
            console.print(_table(m, width))
    console.print(matrix.legend(comp.margin, found), style="dim", highlight=False)
    if comp.noise is not None and comp.noise.rerun:  # else the sentinel's line is a detail
        console.print(fmt.noise(comp), style="dim", highlight=False)
    for scope, lead in answers[1:]:  # the matrix shows each verdict: the sentences, short
        brief = INTERVAL.sub("", lead)
        console.print(
            Text.assemble(
                ("  " + short(fmt.printable(scope), width) + ": ", "bold"), fmt.printable(brief)
            )
        )


def _table(m: matrix.Matrix, width: int) -> Table:
    """The matrix's name heads its label column ("time" / "against glibc"): no title
    line, so that the quick suite's answer fits 40 lines."""
    table = Table(box=None, padding=(0, 0, 0, 1), show_edge=False)
    name = f"{m.axis}\nagainst {short(fmt.printable(m.allocators[0]), width - 8)}"
    table.add_column(Text(name, style="bold underline"), no_wrap=True)
    for a in m.allocators:
        head = Text(_folded(fmt.printable(a)), style="bold")
        table.add_column(head, justify="right", no_wrap=True, min_width=CELL, max_width=CELL)
    for label, marks in m.rows:
        style = "bold" if label == matrix.ALL else ""
        table.add_row(
            Text(short(fmt.printable(label), width), style=style),
            *(Text(x.shown, style=STYLES[x.kind]) for x in marks),
        )
    return table


def _lines(m: matrix.Matrix, width: int) -> list[Text]:
    """The matrix as _table lays it out (a label column as wide as its longest line,
    then CELL columns justified right, one space before each column, headers at the
    bottom of their lines, what is wider than CELL cut with "…"), as lines of text.
    Written here rather than printed as the Table: rich took 0.5 s to lay out the two
    matrices of 100 rows x 10 allocators (issue 27: a report over 100,000 runs in 2 s),
    and every width is known before the first line."""
    name = (m.axis, f"against {short(fmt.printable(m.allocators[0]), width - 8)}")
    labels = [short(fmt.printable(label), width) for label, _ in m.rows]
    w = max(cell_len(x) for x in (*name, *labels))
    heads = [_folded(fmt.printable(a)).split("\n") for a in m.allocators]
    depth = max(len(name), *(len(h) for h in heads))
    lines = []
    for k in range(depth):
        line = Text()
        _put(line, _bottom(name, k, depth), w, "bold underline", left=True)
        for h in heads:
            _put(line, _bottom(h, k, depth), CELL, "bold")
        lines.append(line)
    for label, (full, marks) in zip(labels, m.rows, strict=True):
        line = Text()
        _put(line, label, w, "bold" if full == matrix.ALL else "", left=True)
        for x in marks:
            _put(line, x.shown, CELL, STYLES[x.kind])
        lines.append(line)
    return lines


def _bottom(cell: tuple[str, ...] | list[str], k: int, depth: int) -> str:
    """Line k of `depth` lines of a header cell set at their bottom."""
    at = k - (depth - len(cell))
    return cell[at] if at >= 0 else ""


def _put(line: Text, text: str, width: int, style: str, left: bool = False) -> None:
    """One space, then `text` in `width` columns: cut with "…" beyond it, else padded."""
    if cell_len(text) > width:
        cut = Text(text)
        cut.truncate(width, overflow="ellipsis")
        text = cut.plain
    gap = " " * (width - cell_len(text))
    line.append(" ")
    if not left:
        line.append(gap)
    line.append(text, style=style)
    if left:
        line.append(gap)


def short(label: str, width: int = LABEL) -> str:
    """A row's label within `width`: its start and its end (where the parameter that
    tells two rows apart usually is, e.g. threads=2), the middle cut."""
    if len(label) <= width:
        return label
    head = (width - 1) // 2
    return label[:head] + "…" + label[len(label) - (width - 1 - head) :]


def _folded(name: str) -> str:
    """A name in two lines of CELL: broken at ":", "-", "@" or "+" (after it where the
    first line then fits, else before it: glibc: / arena2, jemalloc / :nodecay) or
    before "malloc" (tbb / malloc); what does not fit is cut with "…"."""
    if len(name) <= CELL:
        return name
    after = [i + 1 for i, c in enumerate(name[:CELL]) if c in ":-@+"]
    before = [i for i, c in enumerate(name[: CELL + 1]) if c in ":-@+" and i > 0]
    cut = max(after or before or [name.find("malloc") if 0 < name.find("malloc") < CELL else CELL])
    rest = name[cut:]
    return name[:cut] + "\n" + (rest if len(rest) <= CELL else rest[: CELL - 1] + "…")
