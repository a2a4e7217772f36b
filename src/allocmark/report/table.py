"""Terminal tables (rich)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from allocmark import profile, stats
from allocmark.answer import race
from allocmark.answer.analyze import MEMORY, Cell, Comparison
from allocmark.answer.compare import Shift, Shifts
from allocmark.answer.findings import Findings
from allocmark.answer.tryout import TryLine
from allocmark.report import answer, extra as extra_, fmt, profile_rows
from allocmark.text import cell

LONG_LABEL = 24


def comparison(console: Console, comp: Comparison, found: Findings) -> None:
    """One table per metric: a row per workload and parameter set, a column per allocator."""
    if not comp.rows:  # e.g. only the hardening battery, which has its own tables
        return
    labels = [row.label for row in comp.rows]
    if any(len(label) > LONG_LABEL for label in labels):
        # Long parameter lists would squeeze the allocator columns: number the rows.
        for i, label in enumerate(labels, 1):
            console.print(_t(f"#{i}  {label}"), highlight=False)
        labels = [f"#{i} {row.workload}" for i, row in enumerate(comp.rows, 1)]
    for metric in comp.metrics:
        body = [
            [_styled(metric, row.cells[metric][a], a == comp.baseline) for a in comp.allocators]
            for row in comp.rows
        ]
        # The geomean's interval goes on a line of its own, as narrow as the cells.
        geo = [fmt.geomean(comp.geomean[metric][a]).replace(" [", "\n[") for a in comp.allocators]
        if _transpose(console, comp, labels, body, geo):
            console.print(_transposed(comp, fmt.TITLES[metric], labels, body, geo))
            continue
        table = _metric_table(console, comp, fmt.TITLES[metric], labels, body, geo)
        pad = "" if table.padding[3] else " "  # unpadded: the labels keep their space
        for label, cells in zip(labels, body, strict=True):
            table.add_row(_t(pad + label), *cells)
        table.add_section()
        table.add_row(pad + "geomean", *geo)
        console.print(table)
    console.print(fmt.legend(comp), style="dim")
    if comp.left_out:
        names = ", ".join(fmt.TITLES[m].split(" (")[0] for m in comp.left_out)
        console.print(
            f"{len(comp.rows)} rows: the tables of {names} are left to "
            "`--format md`, csv, json or html",
            style="dim",
            highlight=False,
        )
    if noise := fmt.noise(comp):
        console.print(noise, style="dim", highlight=False)
    recommendation(console, found)


def recommendation(console: Console, found: Findings) -> None:
    """The answer block that ends `run`, `try` and `report` (recommend.py)."""
    blocks = answer.recommendation(found)
    if not blocks:
        return
    console.print(
        Text("Recommendation (against the baseline, 95% family-wise intervals)", style="bold")
    )
    for block in blocks:
        console.print(_t(f"{block.scope}:"), style="bold", highlight=False)
        for line in block.lines:
            console.print(_t(f"  - {line}"), highlight=False)
    if lines := answer.why_lines(found.whys):
        console.print(
            Text(
                "Why (each decided difference: what moved with it, paired by "
                "block, 95% Holm intervals)",
                style="bold",
            )
        )
        for line in lines:
            console.print(_t(f"  {line}"), highlight=False)


def _metric_table(
    console: Console,
    comp: Comparison,
    title: str,
    labels: Sequence[str],
    body: Sequence[Sequence[Text]],
    geo: Sequence[str],
) -> Table:
    """The table's columns. When every cell fits its column as it is (headers folded
    to the widest cell by hand), cells are not wrapped: rich's wrapping is most of
    the time of a report with thousands of cells. Otherwise rich folds to fit."""
    widest = _widest(body, geo)
    label_w = 1 + max((len(label) for label in [*labels, "workload", "geomean"]), default=8)
    n = len(comp.allocators)
    fits = label_w + n * widest + n + 2 <= console.width  # columns and their borders
    # One space between columns: ten allocators fit 160 columns without folding.
    table = Table(title=title, title_justify="left", padding=(0, 0) if fits else (0, 0, 0, 1))
    table.add_column(("" if not fits else " ") + "workload", no_wrap=True)
    for a in comp.allocators:
        name = fmt.printable(fmt.header(comp, a))
        if fits:
            folded = "\n".join(name[i : i + widest] for i in range(0, len(name), widest))
            table.add_column(
                Text(folded), justify="right", no_wrap=True, overflow="crop", min_width=widest
            )
        else:
            table.add_column(Text(name), justify="right", overflow="fold")
    return table


def _transpose(
    console: Console,
    comp: Comparison,
    labels: Sequence[str],
    body: Sequence[Sequence[Text]],
    geo: Sequence[str],
) -> bool:
    """A column per row instead of per allocator, when allocators outnumber rows and
    a column each would not fit the terminal (ten allocators in 120 columns)."""
    if len(comp.allocators) <= len(comp.rows) + 1:
        return False
    label_w = max(len(label) for label in [*labels, "workload"])
    return label_w + len(comp.allocators) * (_widest(body, geo) + 1) + 2 > console.width


def _widest(body: Sequence[Sequence[Text]], geo: Sequence[str]) -> int:
    """The widest line of any cell, geomeans included."""
    cells = (_width(t) for row in body for t in row)
    return max([*cells, *(cell_len(line) for g in geo for line in g.split("\n")), 1])


def _transposed(
    comp: Comparison,
    title: str,
    labels: Sequence[str],
    body: Sequence[Sequence[Text]],
    geo: Sequence[str],
) -> Table:
    table = Table(title=title, title_justify="left", padding=(0, 0, 0, 1))
    table.add_column("allocator", no_wrap=True)
    for label in [*labels, "geomean"]:
        table.add_column(_t(label), justify="right", overflow="fold")
    for i, a in enumerate(comp.allocators):
        cells = [row[i] for row in body]
        table.add_row(_t(fmt.header(comp, a)), *cells, Text(geo[i]))
    return table


def tune_front(console: Console, fronts: Sequence[race.Front]) -> None:
    """A tune campaign's Pareto front per row: each point and the line that runs it."""
    for front in fronts:
        console.print(
            Text(f"Pareto front of time and peak RSS, {front.scope}: run it as", style="bold")
        )
        for name, line in front.lines:
            console.print(_t(f"  {name}:"), highlight=False)
            console.print(_t(f"    {line}"), highlight=False, soft_wrap=True)
        if front.candidates > 1:
            console.print(
                f"(against its allocator's defaults: the {front.candidates} settings' "
                "time and peak RSS intervals judged as one family, Holm)",
                style="dim",
                highlight=False,
            )
        for name, reason in front.left_out:
            console.print(_t(f"(not raced: {name}: {reason})"), style="dim", highlight=False)


MAX_EXTRA_ROWS = 60  # a longer extra table is left to the other formats


def extra(console: Console, tables: Sequence[extra_.Extra]) -> None:
    """The tables beyond the comparison: the hardening battery, phased workloads,
    what the RSS is made of. A table wider than the terminal is cut into parts by
    columns, each repeating the label columns."""
    for t in tables:
        if len(t.rows) > MAX_EXTRA_ROWS:
            console.print(
                f"{t.title}: {len(t.rows)} rows, see `allocmark report --format md` (or html)",
                style="dim",
                highlight=False,
            )
            continue
        parts = _column_parts(t, console.width)
        for i, columns in enumerate(parts, 1):
            more = f" ({i} of {len(parts)})" if len(parts) > 1 else ""
            console.print(Text(fmt.printable(t.title + more), style="bold"))
            table = Table()
            for c in columns:
                numeric = all(_numeric(r[c]) for r in t.rows)
                table.add_column(
                    _t(t.heads[c]), justify="right" if numeric else "left", no_wrap=c < t.keep
                )
            for r, row in enumerate(t.rows):
                styles = t.classes[r] if t.classes else ()
                table.add_row(
                    *(
                        Text(
                            fmt.printable(row[c]),
                            style=_CLASS_STYLE.get(styles[c] if styles else "", ""),
                        )
                        for c in columns
                    )
                )
            console.print(table)
        for note in t.notes:
            console.print(_t(note), highlight=False)


# The hardening battery's outcome classes (report/extra.py) in the terminal.
_CLASS_STYLE = {
    "o-caught": "green",
    "o-ok": "green",
    "o-later": "green",
    "o-message": "yellow",
    "o-mixed": "yellow",
    "o-missed": "",
    "o-corrupt": "bold red",
    "o-no": "bold red",
    "o-hang": "magenta",
    "o-na": "dim",
}


def _column_parts(t: extra_.Extra, width: int) -> list[list[int]]:
    """Column indexes of each part: the label columns, then as many others as fit."""

    def need(c: int) -> int:
        return max([len(t.heads[c]), *(len(r[c]) for r in t.rows)]) + 3

    keep = list(range(min(t.keep, len(t.heads))))
    base = sum(need(c) for c in keep) + 1
    parts: list[list[int]] = []
    current: list[int] = []
    used = base
    for c in range(len(keep), len(t.heads)):
        if current and used + need(c) > width:
            parts.append(keep + current)
            current, used = [], base
        current.append(c)
        used += need(c)
    return [*parts, keep + current] if current or not parts else parts


def _numeric(text: str) -> bool:
    return text in ("", "-") or fmt.number(text) is not None


_t = cell  # user data in a cell: never read as rich markup


def _width(text: Text) -> int:
    return max(cell_len(line) for line in text.plain.split("\n"))


_VERDICT_STYLE = {
    "faster": "bold green",
    "smaller": "bold green",
    "slower": "bold red",
    "larger": "bold red",
    "same": "bold",
    fmt.UNDECIDED: "yellow",
}


def _styled(metric: str, cell: Cell, is_base: bool) -> Text:
    # Short lines keep ten allocator columns readable in a terminal; the ratio's
    # interval as [low–high] is left to the Markdown, CSV, JSON and HTML outputs.
    # Text objects, not markup: big reports have thousands of cells.
    if cell.fixed:
        return Text("FIXED", style="dim")
    if cell.summary is None:
        return Text(fmt.cell(metric, cell), style="bold red")
    head = fmt.quantity(metric, cell.summary.median)
    if is_base:
        return Text.assemble(f"{head}\n{fmt.spread(cell.summary)}\n", ("base", "dim"))
    if cell.ratio is None:
        return Text(f"{head}\n{fmt.spread(cell.summary)}")
    word = fmt.verdict_word(metric, cell.verdict)
    tail = f"\n{fmt.detectable(cell.ratio)}" if word == fmt.UNDECIDED else ""
    return Text.assemble(
        f"{head}\n{fmt.ratio(cell.ratio)}\n", (word, _VERDICT_STYLE.get(word, "")), tail
    )


def try_table(
    console: Console, lines: Sequence[TryLine], comp: Comparison, found: Findings
) -> None:
    baseline = comp.baseline
    table = Table(title="Your command under each allocator", title_justify="left")
    for col in (
        "allocator",
        "Time (mean ± σ)",
        "Range (min … max)",
        "User",
        "System",
        "Peak RSS",
        f"time vs {baseline or 'baseline'}",
        f"peak RSS vs {baseline or 'baseline'}",
    ):
        table.add_column(_t(col), justify="left" if col == "allocator" else "right")
    for line in lines:
        table.add_row(*_try_cells(line, baseline))
    console.print(table)
    console.print(fmt.legend(comp, fmt.MEANS), style="dim")
    if noise := fmt.noise(comp):
        console.print(noise, style="dim", highlight=False)


def _try_cells(line: TryLine, baseline: str | None) -> list[str | Text]:
    name = _t(line.allocator + ("†" if line.partial else ""))
    if line.wall is None or line.user is None or line.sys is None or line.rss_kib is None:
        return [name, f"[bold red]{line.state.upper()}[/]", "", "", "", "", "", ""]
    w = line.wall
    base = line.allocator == baseline
    return [
        name,
        f"{fmt.seconds(w.mean)} ± {fmt.seconds(w.stdev)}",
        f"{fmt.seconds(w.minimum)} … {fmt.seconds(w.maximum)}",
        fmt.seconds(line.user.mean),
        fmt.seconds(line.sys.mean),
        fmt.size_kib(line.rss_kib.mean),
        "baseline" if base else _speed_text(line.time),
        "baseline" if base else _change_text("peak_rss_kib", line.rss),
    ]


def _speed_text(c: Cell | None) -> str:
    """hyperfine's way: "1.54× faster [1.47–1.61]", or same / undecided."""
    if c is None or c.ratio is None:
        return "n/a"
    r = c.ratio
    word = fmt.verdict_word("time_s", c.verdict)
    if word in ("faster", "slower"):
        f, lo, hi = (
            stats.inverted(r.value, r.low, r.high) if word == "faster" else (r.value, r.low, r.high)
        )
        return f"[bold]{f:.2f}× {word}[/] [{lo:.2f}–{hi:.2f}]"
    return _plain_verdict("time_s", c)


def _change_text(metric: str, c: Cell | None) -> str:
    """ "+15% [12–18%] larger", or same / undecided."""
    if c is None or c.ratio is None:
        return "n/a"
    r = c.ratio
    word = fmt.verdict_word(metric, c.verdict)
    if word in ("smaller", "larger"):
        return f"[bold]{r.value - 1:+.0%} {word}[/] [{r.low - 1:+.0%}–{r.high - 1:+.0%}]"
    return _plain_verdict(metric, c)


def _plain_verdict(metric: str, c: Cell) -> str:
    assert c.ratio is not None
    if c.verdict is stats.Verdict.SAME:
        return f"same (×{c.ratio.value:.3f} {fmt.half_width(c.ratio)})"
    return f"[yellow]{fmt.verdict(metric, c)}[/] ×{c.ratio.value:.2f} {fmt.half_width(c.ratio)}"


def verdicts(
    console: Console,
    items: Sequence[Shift],
    metric: str,
    old_label: str,
    new_label: str,
    control: str | None,
) -> None:
    """`allocmark compare`: a row per cell, old and new medians, ratio and verdict."""
    table = Table(
        title=_t(f"{fmt.TITLES[metric]}: {new_label} against {old_label}"), title_justify="left"
    )
    ratio_head = f"(new / {control}) / (old / {control})" if control else "new / old"
    for col in ("workload", "allocator", "old", "new", f"{ratio_head} [95%]", "verdict"):
        table.add_column(col, justify="left" if col in ("workload", "allocator") else "right")
    for v in items:
        table.add_row(
            _t(v.label),
            _t(v.allocator),
            _median_text(metric, v.old),
            _median_text(metric, v.new),
            _ratio_text(v),
            _verdict_text(v),
        )
    console.print(table)


def _median_text(metric: str, c: Cell) -> str:
    if c.summary is None:
        return c.state.upper()
    return f"{fmt.quantity(metric, c.summary.median)} {fmt.spread(c.summary)}"


def _ratio_text(v: Shift) -> str:
    if v.ratio is None:
        return ""
    return f"{v.ratio.value:.3f} {fmt.ratio_interval(v.ratio)}".strip()


def _verdict_text(v: Shift) -> str:
    if v.control:
        drift = f" (drift {v.ratio.value - 1:+.1%})" if v.ratio is not None else ""
        return f"[dim]control{drift}[/]"
    if v.verdict in ("worse", "better") and v.change is not None:
        text = f"{v.word} {v.change:+.1%}"
        return f"[bold red]{text}[/]" if v.verdict == "worse" else f"[bold green]{text}[/]"
    if v.verdict == "undecided" and v.ratio is not None:
        return f"[yellow]{fmt.UNDECIDED}[/] ({fmt.detectable(v.ratio)})"
    return v.verdict


def verdict_summary(s: Shifts, metric: str, control: str | None, margin: float) -> str:
    memory = metric in MEMORY
    worse, better = ("larger", "smaller") if memory else ("slower", "faster")
    parts = [
        f"{s.worse} {worse}",
        f"{s.better} {better}",
        f"{s.same} same",
        f"{s.undecided} {fmt.UNDECIDED}",
    ]
    if s.unjudged:
        parts.append(f"{s.unjudged} without a verdict")
    text = ", ".join(parts)
    if s.worst is not None and s.worst.change is not None:
        text += (
            f"; largest significant regression {s.worst.change:+.1%} "
            f"({s.worst.label}, {s.worst.allocator})"
        )
    family = s.worse + s.better + s.same + s.undecided
    level = (
        f"95% intervals, the {family} cells judged as one family (Holm)" if family > 1 else "95%"
    )
    text += (
        f" ({level}: {worse}/{better} when the interval excludes 1, same when it lies "
        f"within ±{margin:.0%})"
    )
    if control:
        drift = ""
        if s.drift is not None and s.drift.ratio is not None:
            drift = f"; the control itself moved by up to {s.drift.ratio.value - 1:+.1%}"
        return text + (
            f"\ncontrol: {control} ran in both: each allocator's ratio to it is "
            f"compared, so that machine drift between the campaigns cancels{drift}"
        )
    return text + (
        "\nno control (the baseline allocator is not in both): absolute values "
        "taken at different moments are compared; machine drift counts as change"
    )


def profiles(console: Console, views: Sequence[profile.View]) -> None:
    """The profiler's view: per workload, allocators side by side, then findings."""
    for v in views:
        params = " ".join(f"{k}={val}" for k, val in v.params)
        runs = f", {v.runs} runs each (counts per run)" if v.runs > 1 else ""
        table = Table(title=_t(f"Profile: {v.workload} {params}{runs}"), title_justify="left")
        table.add_column("", no_wrap=True)
        for a in v.allocators:
            table.add_column(_t(a), justify="right", overflow="fold")
        section = None
        for sec, label, cells in profile_rows.rows(v.summaries, v.baseline, v.runs):
            if sec != section:
                if section is not None:
                    table.add_section()
                table.add_row(Text(sec, style="bold"), *([""] * len(cells)))
                section = sec
            table.add_row("  " + label, *cells)
        console.print(table)
        for note in v.notes:
            console.print(_t(f"note: {note}"), style="dim", highlight=False)
        console.print("[bold]Findings[/]")
        for line in v.findings:
            console.print(_t(f"  - {line}"), highlight=False)
