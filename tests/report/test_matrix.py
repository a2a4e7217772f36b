"""The verdict matrix: one glyph and one number per allocator and workload, the same
verdicts as the answer's sentences, in the terminal within 120 columns."""

from __future__ import annotations

import io

from hypothesis import given, strategies as st
from rich.console import Console

from allocmark.answer import analyze, findings
from allocmark.model import RunStatus
from allocmark.report import answer, glance, markdown, matrix
from tests.answer.test_recommend import _comparison, _runs


def _comp() -> analyze.Comparison:
    rows = []
    for w in ("churn", "larson"):
        rows += [
            *_runs("glibc", 1.0, 10000, workload=w),
            *_runs("fast", 0.5, 10000, workload=w),
            *_runs("twin", 1.0, 10000, workload=w),
            *_runs("fat", 1.0, 13000, workload=w),
        ]
    crashed = [r._replace(status=RunStatus.CRASHED) for r in _runs("boom", 0.1, 100)]
    return _comparison(rows, crashed)


def test_each_cell_is_a_glyph_and_a_number() -> None:
    time, rss = matrix.matrices(_comp(), findings.of(_comp()))
    assert time.allocators == ("glibc", "fast", "twin", "fat", "boom")
    cells = {label: [m.shown for m in marks] for label, marks in time.rows}
    assert cells["churn"][0] == "base" and cells["churn"][1].startswith("▲ 2.0")
    assert cells["churn"][2:] == ["= same", "= same", "✗ crashed"] and cells["larson"][4] == "·"
    assert cells[matrix.ALL][4] == "✗ crashed"  # on some workloads: never recommended
    assert [label for label, _ in time.rows] == ["churn", "larson", matrix.ALL]
    assert [m.shown for m in dict(rss.rows)["churn"]][3] == "▼ 1.30×"


def test_the_matrix_says_what_the_answer_says() -> None:
    comp = _comp()
    leads = dict(answer.leads(findings.of(comp)))
    assert leads["all workloads"].startswith("Use fast")
    time, _ = matrix.matrices(comp, findings.of(comp))
    assert dict(time.rows)[matrix.ALL][1].kind == matrix.BETTER  # fast, over all of them


def test_ten_allocators_fit_120_columns() -> None:
    names = [
        "glibc",
        "glibc:arena2",
        "jemalloc",
        "jemalloc:nodecay",
        "mimalloc",
        "tcmalloc-minimal",
        "tcmalloc",
        "tbbmalloc",
        "scudo",
        "scudo:norelease",
    ]
    runs = [
        r
        for i, a in enumerate(names)
        for w in ("churn", "larson threads=2")
        for r in _runs(a, 1.0 + i / 20, 10000 + 100 * i, workload=w)
    ]
    comp = _comparison(runs)
    out = io.StringIO()
    glance.glance(Console(file=out, width=120, no_color=True), comp, findings.of(comp))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("Answer: ")
    assert max(len(line.rstrip()) for line in lines) <= 120, out.getvalue()
    assert "-minimal" in out.getvalue() and "scudo:" in out.getvalue()


def test_markdown_opens_with_the_answer_and_the_matrices() -> None:
    text = markdown.comparison(_comp(), findings.of(_comp()))
    assert text.startswith("**Answer:** Use fast")
    assert text.index("### time against glibc") < text.index("## Recommendation")
    assert (
        "| = same | = same | ✗ crashed |" in text and "| **all (geomean)** | base | ▲ 2.0" in text
    )


@given(
    st.lists(st.from_regex(r"[a-z_]{1,8}=[0-9]{1,6}", fullmatch=True), max_size=6),
    st.integers(12, 80),
)
def test_a_cut_label_leaves_out_whole_words(params: list[str], width: int) -> None:
    """A row label too long for its width loses whole parameters from its middle, never
    half a number ("size_min…4" read as size_min=4); it keeps the workload."""
    label = " ".join(["churn", *params])
    cut = glance.short(label, width)
    assert len(cut) <= width
    if cut == label:
        return
    words = cut.split(" ")
    if len(f"churn … {params[-1]}") <= width:  # whole words fit: it is cut by words
        assert " … " in cut, cut
    if " … " in cut:
        assert words[0] == "churn" and "…" in words
        assert all(w in label.split(" ") for w in words if w != "…")
        at = words.index("…")
        assert label.startswith(" ".join(words[:at])) and label.endswith(" ".join(words[at + 1 :]))
    else:  # no whole words fit: its start and end, the middle cut
        assert cut.startswith(label[:2]) and cut.endswith(label[-2:])


def test_a_partial_allocator_s_undecided_mark_is_never_cut() -> None:
    """ "? ▵1.02×†" is nine columns: its column widens rather than cut it ("? ▵1.02…")."""
    marks = (
        matrix.Mark(matrix.BASE, "base"),
        matrix.Mark(matrix.UNDECIDED, "▵1.02×†"),
        matrix.Mark(matrix.WORSE, "1.22×†"),
    )
    m = matrix.Matrix("time", "", ("glibc", "jemalloc", "tcmalloc-minimal"), (("command", marks),))
    for width in (40, 80, 120):
        console = Console(width=width, file=io.StringIO(), color_system=None)
        for part in glance.panels(m, glance.label_width(m, width), width):
            console.print(*glance._lines(part, glance.label_width(m, width), "glibc"), sep="\n")
        text = console.file.getvalue()  # type: ignore[attr-defined]
        assert "? ▵1.02×†" in text and "▼ 1.22×†" in text, text
