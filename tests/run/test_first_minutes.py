"""A new user's first minutes (issue 41): defaults that can decide (blocks a verdict
needs, a default budget stretched to the first verdict), a command that cannot start
refused at once, a failing one stopped after its first run, threads past the cores."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from matplotlib.colors import to_hex

from allocmark import stats, workloads
from allocmark.answer import analyze, findings, forecast, stored as stored_answer
from allocmark.errors import UserError
from allocmark.model import RunResult, RunSpec, RunStatus, Workload
from allocmark.report import charts, plots
from allocmark.request import CampaignPlan, Note, Precision
from allocmark.run import firstrun, machine, rounds, start, suites
from allocmark.stats import fewblock
from allocmark.store import Store
from tests.fakes import allocs as fake_allocs, drive, precision_plan, stored
from tests.run.test_campaign import Blocks, blocks_of, plan3


def budgeted(tmp_path: Path, budget: float, stretch: bool) -> tuple[Store, int]:
    """a 0.8 of b in time, equal peak RSS; three blocks planned, `budget` seconds."""
    s = Store(tmp_path / "s.db")
    how = precision_plan(3, 50, 0.03, budget, stretch)
    cid = s.new_campaign(
        "t", 1, machine.current(), [], fake_allocs("a", "b"), [], plan3(), "b", how
    )
    return s, cid


def events(s: Store, cid: int, fake: object, stretch: rounds.Stretch | None = None) -> list:
    return drive(s, cid, fake, fake_allocs("a", "b"), stretch)


def decided(s: Store, cid: int) -> int:
    comp = stored_answer.comparison(s, cid)
    verdicts = [v for r in comp.rows for v in analyze.decisions(r, comp.baseline, comp.margin)]
    return sum(v is not None and v is not stats.Verdict.UNDECIDED for v in verdicts)


def test_a_default_budget_is_stretched_to_the_first_verdict(tmp_path: Path) -> None:
    # A block costs 1.8 s of runs: 6 s pay for the 3 planned blocks, not for the 4th,
    # from which a verdict is first possible.
    s, cid = budgeted(tmp_path / "kept", 6.0, stretch=False)
    events(s, cid, Blocks())
    assert len(blocks_of(s, cid)) == 3 and decided(s, cid) == 0
    s, cid = budgeted(tmp_path / "stretched", 6.0, stretch=True)
    said = [e.text for e in events(s, cid, Blocks()) if isinstance(e, Note)]
    assert len(blocks_of(s, cid)) >= fewblock.MIN_BLOCKS and decided(s, cid) >= 1
    assert said and all("budget stretched from the default 6 s to" in t for t in said)
    how = s.campaign_plan(cid)
    assert how.budget_given_s == 6.0 and how.budget_s > 6.0


def test_an_explicit_budget_is_kept_as_given(tmp_path: Path) -> None:
    s, cid = budgeted(tmp_path, 6.0, stretch=False)
    assert not [e for e in events(s, cid, Blocks()) if isinstance(e, Note)]
    how = s.campaign_plan(cid)
    assert how.budget_s == 6.0 and how.budget_given_s is None


def far(
    spent: float = 20.0, need: float = 1000.0, undecided: int = 2, decided: int = 0
) -> forecast.Forecast:
    """Two peak RSS ratios, `decided` of them decided, and their wait."""
    wait = forecast.Wait(
        blocks=40, seconds=need * 2, first_blocks=20, first_seconds=need, decided=decided
    )
    return forecast.Forecast(
        blocks=2,
        block_s=50.0,
        undecided=undecided,
        ratios=2,
        waits={"peak RSS": wait},
        planned=4,
        left_s=100.0,
        spent_s=spent,
    )


def stretch_of(
    tmp_path: Path, fc: forecast.Forecast, how: rounds.Stretch
) -> tuple[list[Note], float]:
    s, cid = budgeted(tmp_path, 120.0, stretch=True)
    notes, after = how.apply(s, cid, s.campaign_plan(cid), fc)
    assert after == s.campaign_plan(cid)  # the loop's copy is the stored one
    return notes, after.budget_s


def test_a_far_stretch_is_asked_first_and_refused_without_an_answer(tmp_path: Path) -> None:
    notes, budget = stretch_of(tmp_path / "1", far(), rounds.Stretch())
    assert budget == 120.0 and notes[0].level == "warning"
    assert "--yes stretches it, or --budget 22m sets it" in notes[0].text
    asked: list[str] = []
    no = rounds.Stretch(confirm=lambda q: asked.append(q) or False)
    notes, budget = stretch_of(tmp_path / "2", far(), no)
    assert budget == 120.0 and no.declined and len(asked) == 1
    assert "the first verdict is expected at 20 blocks" in asked[0] and "22 min?" in asked[0]
    assert no.apply(*_again(tmp_path / "3"), far())[0] == []  # asked once, not each round
    notes, budget = stretch_of(tmp_path / "4", far(), rounds.Stretch(confirm=lambda q: True))
    assert budget == 22 * 60 and "stretched from the default 2 min to 22 min" in notes[0].text
    notes, budget = stretch_of(tmp_path / "5", far(), rounds.Stretch(yes=True))
    assert budget == 22 * 60


def test_a_far_ask_after_a_stretch_names_the_budget_in_force(tmp_path: Path) -> None:
    """A stretch to 5 min, then a forecast further still: the warning said "the
    default budget (2 min) ... kept" while 5 min were in force (CI, stop 76)."""
    s, cid = budgeted(tmp_path, 120.0, stretch=True)
    grown = s.stretch_budget(cid, 300.0)
    notes, after = rounds.Stretch().apply(s, cid, grown, far())
    assert after.budget_s == 300.0 and notes[0].level == "warning"
    assert notes[0].text.startswith(
        "the budget (5 min, the default 2 min stretched) ends before any verdict"
    )
    assert "kept at 5 min" in notes[0].text
    asked: list[str] = []
    rounds.Stretch(confirm=lambda q: asked.append(q) or False).apply(s, cid, grown, far())
    assert asked[0].startswith("The budget (5 min, the default 2 min stretched) ends")


def _again(tmp_path: Path) -> tuple[Store, int, CampaignPlan]:
    s, cid = budgeted(tmp_path, 120.0, stretch=True)
    return s, cid, s.campaign_plan(cid)


def test_no_stretch_once_a_ratio_is_decided_or_when_the_budget_reaches(tmp_path: Path) -> None:
    decided = far(undecided=1, decided=1)
    assert stretch_of(tmp_path / "1", decided, rounds.Stretch(yes=True)) == ([], 120.0)
    planned = dataclasses.replace(far(), planned=20)  # the planned blocks reach it anyway
    assert stretch_of(tmp_path / "3", planned, rounds.Stretch(yes=True)) == ([], 120.0)
    near = far(spent=20.0, need=60.0)  # 20 + 1.25 * 60 = 95 s: within 120 s
    assert stretch_of(tmp_path / "2", near, rounds.Stretch(yes=True)) == ([], 120.0)
    assert near.first_verdict_blocks() == 20
    unknown = dataclasses.replace(near, waits={}, blocks=1)  # one block: no noise seen
    assert unknown.first_verdict_s() == (fewblock.MIN_BLOCKS - 1) * 50.0


def test_speed_without_a_verdict_stretches_though_peak_rss_has_one(tmp_path: Path) -> None:
    """A program of seconds under six allocators: peak RSS decided at 4 blocks, speed
    not (its clearest ratio needs 6, the next look): the default budget still stretches
    for speed, the axis a user asks "which is faster" of."""
    fc = far(undecided=3, decided=1)
    speed = forecast.Wait(blocks=9, seconds=600.0, first_blocks=6, first_seconds=300.0)
    fc = dataclasses.replace(fc, ratios=4, waits={**fc.waits, "speed": speed})
    assert fc.first_verdict_blocks() == 6 and fc.first_verdict_s() == 300.0
    notes, budget = stretch_of(tmp_path, fc, rounds.Stretch(yes=True))
    assert budget > 120.0 and "expected at 6 blocks" in notes[0].text


def test_a_campaign_plans_the_blocks_a_verdict_needs() -> None:
    from allocmark.defaults import DEFAULT_MIN_BLOCKS

    assert DEFAULT_MIN_BLOCKS == fewblock.MIN_BLOCKS  # what `-n` shows in the help
    sequential = Precision(max_blocks=1000, margin=0.03)
    assert start.planned_blocks(3, sequential) == fewblock.MIN_BLOCKS
    assert start.planned_blocks(8, sequential) == 8
    assert start.planned_blocks(3, None) == 3  # a profile: as asked
    assert start.planned_blocks(3, Precision(max_blocks=3, margin=0.03)) == 3  # -n 3 --max-blocks 3


def test_only_allocmarks_own_default_budget_stretches() -> None:
    from allocmark.request import Request

    suite = suites.adhoc_suite([], 3, 600, 1)
    assert start._precision(Request(), suite, "").stretch
    assert not start._precision(Request(budget_s=120.0), suite, "").stretch
    assert not start._precision(Request(budget_s=0.0), suite, "").stretch
    own = dataclasses.replace(suite, budget_s=60.0, budget_given=True)
    assert not start._precision(Request(), own, "").stretch


class FailsFirst:
    """The baseline (b) fails with exit code 3 and a stderr; a succeeds."""

    def __init__(self) -> None:
        self.calls: list[RunSpec] = []

    def calibrate(self) -> float | None:
        return None

    def run(self, spec: RunSpec) -> RunResult:
        self.calls.append(spec)
        if spec.allocator == "b":
            return RunResult(RunStatus.FAILED, exit_code=3, detail="exit code 3: no such input")
        return RunResult(RunStatus.OK, wall_s=0.1, maxrss_kib=1000)


def failing(tmp_path: Path, stop: bool) -> tuple[Store, int]:
    """A command's plan: a verification run of each allocator (the baseline b's second),
    then three blocks."""
    s = Store(tmp_path / "f.db")
    how = CampaignPlan(seed=1, min_blocks=3, stop_on_failure=stop)
    checks = [dataclasses.replace(r, seq=i, role="verify") for i, r in enumerate(plan3()[:2])]
    measured = [dataclasses.replace(r, seq=r.seq + 2) for r in plan3()]
    cid = s.new_campaign(
        "t", 1, machine.current(), [], fake_allocs("a", "b"), [], checks + measured, "b", how
    )
    return s, cid


def test_a_command_failing_under_the_baseline_stops_after_its_first_run(tmp_path: Path) -> None:
    s, cid = failing(tmp_path, stop=True)
    fake = FailsFirst()
    with pytest.raises(
        firstrun.CommandFails,
        match="failed on its first run, under b:\n  exit code 3: no such input\n",
    ) as e:
        events(s, cid, fake)
    assert e.value.exit_code == 2 and "-i" in str(e.value)
    assert [c.allocator for c in fake.calls] == ["b"]  # the baseline's run first, and alone
    assert s.campaign(cid).status == "failed" and len(s.runs(cid)) == 1
    with pytest.raises(Exception, match="no unfinished campaign"):
        s.campaign(unfinished=True)  # nothing to resume


def test_ignore_failure_runs_every_run_though_the_baseline_fails(tmp_path: Path) -> None:
    s, cid = failing(tmp_path, stop=False)
    fake = FailsFirst()
    events(s, cid, fake)
    assert len(fake.calls) == 8 and s.campaign(cid).status == "finished"


def test_a_command_that_cannot_start_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="nonexistent-cmd: command not found"):
        workloads.check_command(["nonexistent-cmd"])
    with pytest.raises(UserError, match=r"command not found \(no such file"):
        workloads.check_command([str(tmp_path / "nope")])
    plain = tmp_path / "plain"
    plain.write_text("echo hi\n")
    with pytest.raises(UserError, match=r"not executable \(chmod \+x"):
        workloads.check_command([str(plain)])
    with pytest.raises(UserError, match="a directory"):
        workloads.check_command([str(tmp_path)])
    workloads.check_command(["true"])  # found in PATH
    workloads.check_command(["/bin/true"])


def test_threads_past_the_cores_are_said_at_the_start() -> None:
    w = Workload(name="samethread", description="", kind="native", argv=())
    x = Workload(name="xthread", description="", kind="native", argv=())
    cells = [(w, (("threads", t),)) for t in (1, 2, 3, 4)] + [(x, (("threads", 4),))]
    [note] = start.past_cores(cells, 2)
    assert note.level == "warning"
    assert note.text.startswith(
        "threads=3 (samethread), threads=4 (samethread, xthread): more "
        "threads than this machine's 2 cores"
    )
    assert start.past_cores(cells, 4) == []


def test_the_scaling_plot_marks_the_points_past_the_cores(tmp_path: Path) -> None:
    runs = [
        stored(
            a,
            1.0,
            params=(("threads", t),),
            rep=rep,
            workload="xthread",
            metrics={"ops_per_s": 1e6 * min(t, 2) * (1.1 if a == "a" else 1.0)},
        )
        for t in (1, 2, 3, 4)
        for a in ("a", "b")
        for rep in range(3)
    ]
    comp = dataclasses.replace(analyze.compare(runs, ["b", "a"], "b"), cores=2)
    every = plots.drawn(charts.every(comp, findings.of(comp)))  # as `report --plots` draws them
    [plot] = [p for p in every if p.name == "scaling-xthread"]
    try:
        assert tmp_path / "scaling-xthread.png" in plots.save(every, tmp_path)
        ax = plot.figure.axes[0]
        assert "more threads than the 2 cores" in plot.title
        assert any("time-slicing" in t.get_text() for t in ax.texts)
        hollow = [ln for ln in ax.lines if ln.get_markerfacecolor() == "white"]
        assert len(hollow) == 2 and all(list(ln.get_xdata()) == [3, 4] for ln in hollow)
        lines = [ln for ln in ax.lines if ln.get_markerfacecolor() != "white"]
        # each hollow mark in its line's colour, and the lines in the cycle's first two
        assert [to_hex(h.get_color()) for h in hollow] == [to_hex(x.get_color()) for x in lines]
        assert [to_hex(x.get_color()) for x in lines] == ["#1f77b4", "#ff7f0e"]
        assert ax.patches  # the span past the cores
    finally:
        plots.close(every)
    unmarked = dataclasses.replace(comp, cores=8)
    [plot] = plots.drawn(charts.scaling(unmarked))
    try:
        assert "cores" not in plot.title and not plot.figure.axes[0].patches
    finally:
        plots.close([plot])
