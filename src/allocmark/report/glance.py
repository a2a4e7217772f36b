"""The terminal's answer at a glance: the one-sentence answer, the verdict matrices
(matrix.py), and a one-sentence answer per workload. The tables of every value and
interval, and the recommendation's reasons, are `--detail` (table.comparison)."""

from __future__ import annotations

import dataclasses
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
    for m in found:
        width = label_width(m, console.width)
        base = m.allocators[0]
        for part in panels(m, width, console.width):
            lines = _lines(part, width, base)
            if max(x.cell_len for x in lines) <= console.width:
                console.print(Text("\n").join(lines))
            else:  # narrower than a label and one column: rich squeezes them
                console.print(_table(part, width, base))
    console.print(matrix.legend(comp.margin, found), style="dim", highlight=False)
    if comp.noise is not None and (comp.noise.rerun or comp.noise.uncounted):  # else a detail
        console.print(fmt.noise(comp), style="dim", highlight=False)
    width = max((label_width(m, console.width) for m in found), default=LABEL)
    for scope, lead in answers[1:]:  # the matrix shows each verdict: the sentences, short
        brief = INTERVAL.sub("", lead)
        console.print(
            Text.assemble(
                ("  " + short(fmt.printable(scope), width) + ": ", "bold"), fmt.printable(brief)
            )
        )


PANEL_MIN = 3  # allocator columns a panel keeps beside a long label


def label_width(m: matrix.Matrix, columns: int) -> int:
    """The row labels' width: the longest label where the width leaves room for it
    beside every allocator's column (a row label names what varies: never cut at 160
    columns), else what is left of the width, and never below LABEL where the columns
    must wrap anyway (panels): there a label may leave room for as few as PANEL_MIN
    columns per panel (whole labels at 80 columns, in a panel more)."""
    longest = max((cell_len(fmt.printable(label)) for label, _ in m.rows), default=0)
    longest = max(longest, len(m.axis), 8 + len(m.allocators[0]) if m.allocators else 0)
    room = columns - len(m.allocators) * (column(m) + 1) - 1
    # Where the columns must wrap into panels anyway, a label may take all but
    # PANEL_MIN columns of the width.
    return max(12, min(longest, max(room, columns - PANEL_MIN * (column(m) + 1) - 1)))


def column(m: matrix.Matrix) -> int:
    """An allocator column's width: CELL, or the widest mark where one is wider (an
    undecided partial allocator's "? ▵1.02×†"): a number is never cut."""
    return max([CELL, *(cell_len(x.shown) for _, marks in m.rows for x in marks)])


def panels(m: matrix.Matrix, width: int, columns: int) -> list[matrix.Matrix]:
    """The matrix in as many panels as the width needs, each with the row labels and
    as many allocator columns as fit: a narrow terminal wraps the columns, never cuts
    a number or drops an allocator."""
    per = max(1, (columns - width - 1) // (column(m) + 1))
    if per >= len(m.allocators):
        return [m]
    return [
        dataclasses.replace(
            m,
            allocators=m.allocators[i : i + per],
            rows=tuple((label, marks[i : i + per]) for label, marks in m.rows),
        )
        for i in range(0, len(m.allocators), per)
    ]


def _table(m: matrix.Matrix, width: int, base: str) -> Table:
    """The matrix's name heads its label column ("time" / "against glibc"): no title
    line, so that the quick suite's answer fits 40 lines."""
    table = Table(box=None, padding=(0, 0, 0, 1), show_edge=False)
    name = f"{m.axis}\nagainst {short(fmt.printable(base), width - 8)}"
    table.add_column(Text(name, style="bold underline"), no_wrap=True)
    for a in m.allocators:
        head = Text(_folded(fmt.printable(a)), style="bold")
        wide = column(m)
        table.add_column(head, justify="right", no_wrap=True, min_width=wide, max_width=wide)
    for label, marks in m.rows:
        style = "bold" if label == matrix.ALL else ""
        table.add_row(
            Text(short(fmt.printable(label), width), style=style),
            *(Text(x.shown, style=STYLES[x.kind]) for x in marks),
        )
    return table


def _lines(m: matrix.Matrix, width: int, base: str) -> list[Text]:
    """The matrix as _table lays it out (a label column as wide as its longest line,
    then columns of `column` justified right, one space before each column, headers at
    the bottom of their lines, a label wider than its column cut with "…"), as lines.
    Written here rather than printed as the Table: rich took 0.5 s to lay out the two
    matrices of 100 rows x 10 allocators (issue 27: a report over 100,000 runs in 2 s),
    and every width is known before the first line."""
    name = (m.axis, f"against {short(fmt.printable(base), width - 8)}")
    labels = [short(fmt.printable(label), width) for label, _ in m.rows]
    w = max(cell_len(x) for x in (*name, *labels))
    heads = [_folded(fmt.printable(a)).split("\n") for a in m.allocators]
    depth = max(len(name), *(len(h) for h in heads))
    wide = column(m)
    lines = []
    for k in range(depth):
        line = Text()
        _put(line, _bottom(name, k, depth), w, "bold underline", left=True)
        for h in heads:
            _put(line, _bottom(h, k, depth), wide, "bold")
        lines.append(line)
    for label, (full, marks) in zip(labels, m.rows, strict=True):
        line = Text()
        _put(line, label, w, "bold" if full == matrix.ALL else "", left=True)
        for x in marks:
            _put(line, x.shown, wide, STYLES[x.kind])
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
    """A row's label within `width`: its workload and its last parameters (where the
    one that tells two rows apart usually is, e.g. threads=2), whole words left out
    of the middle for "…" (never half a number); a label whose words cannot fit so
    keeps its start and its end, the middle cut."""
    if len(label) <= width:
        return label
    words = label.split(" ")
    head, tail, middle = words[:1], list[str](), words[1:]
    # One word from the end, one from the start, in turn, while they fit.
    for from_end in (i % 2 == 0 for i in range(2 * len(middle))):
        if not middle:
            break
        w = middle[-1] if from_end else middle[0]
        kept = [*head, "…", w, *tail] if from_end else [*head, w, "…", *tail]
        if len(" ".join(kept)) > width:
            continue
        if from_end:
            tail.insert(0, middle.pop())
        else:
            head.append(middle.pop(0))
    if tail and len(" ".join([*head, "…", *tail])) <= width:
        return " ".join([*head, "…", *tail])
    half = (width - 1) // 2
    return label[:half] + "…" + label[len(label) - (width - 1 - half) :]


def _folded(name: str, lines: int = 3) -> str:
    """A name in lines of CELL: broken at ":", "-", "@" or "+" (after it where the
    line then fits, else before it: glibc: / arena2, jemalloc / :nodecay) or before
    "malloc" (tbb / malloc), at most `lines` of them (scudo: / norelea / se); only a
    name longer than that (a user's own, up to 64 characters) is cut with "…"."""
    if len(name) <= CELL:
        return name
    if lines == 1:
        return name[: CELL - 1] + "…"
    after = [i + 1 for i, c in enumerate(name[:CELL]) if c in ":-@+"]
    before = [i for i, c in enumerate(name[: CELL + 1]) if c in ":-@+" and i > 0]
    even = (len(name) + 1) // 2 if len(name) <= 2 * CELL else CELL  # norel / ease
    cut = max(after or before or [name.find("malloc") if 0 < name.find("malloc") < CELL else even])
    return name[:cut] + "\n" + _folded(name[cut:], lines - 1)
