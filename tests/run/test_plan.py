"""Planning: suites, parameter grids, interleaving. No processes are started."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pytest

from allocmark import workloads
from allocmark.errors import UserError
from allocmark.run import plan, start, suites
from tests.fakes import allocs as fake_allocs


def quick_cells() -> list:
    return plan.rows(suites.load_suite("quick"), workloads.load_catalog(), {})


def test_quick_suite_has_six_workloads_and_sweeps() -> None:
    cells = quick_cells()
    assert len({w.name for w, _ in cells}) >= 6
    churn = {(dict(p)["size_max"], dict(p)["threads"]) for w, p in cells if w.name == "churn"}
    assert churn == {(512, 1), (512, 2), (65536, 1)}


def test_thread_ranges_follow_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert suites._expand_range("1..2*cores") == [1, 2, 3, 4]
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert suites._expand_range("1..2*cores") == [1, 2, 4, 8, 16, 32]
    assert suites._expand_range("1..4") == [1, 2, 3, 4]
    assert suites._expand_range("fast") == "fast"


def test_every_builtin_suite_plans() -> None:
    for path in sorted(suites.suites_dir().glob("*.toml")):
        cells = plan.rows(suites.load_suite(path.stem), workloads.load_catalog(), {})
        assert cells, path


def test_baselines_come_first_one_per_allocator_and_program() -> None:
    allocs = fake_allocs("a", "b")
    runs = list(plan.generate(quick_cells(), allocs, blocks=1, timeout=10, seed=7))
    programs = {w.name for w, _ in quick_cells()}
    first = runs[: 2 * len(programs)]
    assert {r.role for r in first} == {"baseline"}
    assert {(r.allocator, r.workload) for r in first} == {(a, p) for a in "ab" for p in programs}
    assert all(r.argv[1:] == ("--baseline", "1") for r in first)
    assert {r.role for r in runs[len(first) :]} == {"measure"}


def test_plan_interleaves_every_cell_once_per_repetition() -> None:
    allocs = fake_allocs("a", "b", "c")
    every = list(plan.generate(quick_cells(), allocs, blocks=3, timeout=10, seed=7))
    assert [r.seq for r in every] == list(range(len(every)))
    runs = [r for r in every if r.role == "measure"]
    n = len(quick_cells()) * 3
    assert len(runs) == 3 * n
    for rep in range(3):
        block = [r for r in runs if r.rep == rep]
        # Each repetition is one contiguous block holding every cell x allocator once.
        assert block == runs[rep * n : (rep + 1) * n]
        assert Counter((r.allocator, r.workload, r.params) for r in block) == Counter(
            {(a.spec.name, w.name, p): 1 for a in allocs for w, p in quick_cells()}
        )
    # Within a cell the allocators run back to back (A B C), in a shuffled order.
    first = runs[:3]
    assert {r.allocator for r in first} == {"a", "b", "c"}
    assert len({r.params for r in first}) == 1


def test_plan_order_is_seeded() -> None:
    allocs = fake_allocs("a", "b", "c", "d")
    order = lambda seed: [  # noqa: E731
        (r.allocator, r.params) for r in plan.generate(quick_cells(), allocs, 2, 10, seed)
    ]
    assert order(1) == order(1)
    assert order(1) != order(2)


def test_plan_carries_preload_and_expected_malloc_owner() -> None:
    runs = [
        r for r in plan.generate(quick_cells(), fake_allocs("a"), 1, 10, 1) if r.role == "measure"
    ]
    runs = [r for r in runs if r.workload == "churn"]
    assert dict(runs[0].env)["LD_PRELOAD"] == "/x/a.so"
    assert runs[0].result_fd
    assert runs[0].argv[0].endswith("am_churn")
    assert "--threads" in runs[0].argv


def test_overrides_replace_suite_values() -> None:
    suite = suites.load_suite("quick")
    cells = plan.rows(suite, workloads.load_catalog(), plan.parse_overrides(["threads=1,2,4"]))
    assert sorted({dict(p)["threads"] for _, p in cells}) == [1, 2, 4]


def test_unknown_override_names_the_parameters() -> None:
    with pytest.raises(UserError, match=r"no selected workload has this parameter.*threads"):
        plan.rows(
            suites.load_suite("quick"), workloads.load_catalog(), plan.parse_overrides(["thread=2"])
        )


@pytest.mark.parametrize("bad", ["threads", "threads=", "=2"])
def test_malformed_override(bad: str) -> None:
    with pytest.raises(UserError, match="NAME=VALUE"):
        plan.parse_overrides([bad])


def test_parameter_below_minimum_is_refused(tmp_path: Path) -> None:
    suite = tmp_path / "s.toml"
    suite.write_text('[[runs]]\nworkload = "churn"\nparams = { threads = 0 }\n')
    with pytest.raises(UserError, match=r"s\.toml.*threads must be >= 1"):
        plan.rows(suites.load_suite(str(suite)), workloads.load_catalog(), {})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("blocks = 0\n", r"key 'blocks': must be at least 1"),
        ("repetiions = 3\n", r"key 'repetiions': unknown key"),
        ("[[runs]]\nworkload = 'nope'\n", r"unknown workload 'nope'"),
        ("[[runs]]\nworkload = 'churn'\nparams = { colour = 1 }\n", r"no parameter 'colour'"),
        ("blocks = [\n", r"invalid TOML"),
    ],
)
def test_suite_errors_name_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(text)
    with pytest.raises(UserError, match=message) as info:
        plan.rows(suites.load_suite(str(path)), workloads.load_catalog(), {})
    assert "mine.toml" in str(info.value)


def test_unknown_builtin_suite_lists_the_known_ones() -> None:
    with pytest.raises(
        UserError,
        match="built-in suites: aging, apps, hardening, idle, memheap, micro, micromalloc, "
        "quick, scaling, versions",
    ):
        suites.load_suite("nosuch")


def test_a_suite_caps_its_blocks_and_the_quick_suite_is_fixed(tmp_path: Path) -> None:
    from allocmark import api

    path = tmp_path / "s.toml"
    path.write_text('blocks = 4\nmax_blocks = 6\n[[runs]]\nworkload = "churn"\n')
    suite = suites.load_suite(str(path))
    assert (suite.blocks, suite.max_blocks, suite.deprecated) == (4, 6, ())
    assert start._precision(api.Request(), suite, "").max_blocks == 6
    assert start._precision(api.Request(min_blocks=9), suite, "").max_blocks == 9  # -n lifts it
    assert start._precision(api.Request(max_blocks=20), suite, "").max_blocks == 20
    quick = suites.load_suite("quick")  # fixed blocks: judged by the exact test, not added
    assert quick.blocks == quick.max_blocks == 10


def test_a_suites_former_keys_are_read_and_said_to_be_deprecated(tmp_path: Path) -> None:
    path = tmp_path / "old.toml"
    path.write_text(
        'repetitions = 4\nmax_repetitions = 6\ntarget_ci = "5%"\n[[runs]]\nworkload = "churn"\n'
    )
    suite = suites.load_suite(str(path))
    assert (suite.blocks, suite.max_blocks, suite.margin) == (4, 6, 0.05)
    assert suite.deprecated == (
        "repetitions is deprecated: it is blocks now",
        "max_repetitions is deprecated: it is max_blocks now",
        "target_ci is deprecated: it is margin now",
    )
    path.write_text('blocks = 5\nrepetitions = 4\n[[runs]]\nworkload = "churn"\n')
    assert suites.load_suite(str(path)).blocks == 5  # the new name wins
