"""A round's blocks: the same time for every open row, and a line's versions in order."""

from __future__ import annotations

import random

from allocmark.model import RunSpec
from allocmark.run import rounds
from allocmark.stats import looks

CHEAP, DEAR = ("churn", ()), ("ruby", ())


def test_every_open_row_gets_about_the_same_time() -> None:
    """A 2 s block and a 30 s one: at 8 blocks each, the dear row grows to the next
    look (9) and the cheap one by what fits in its 30 s (15 blocks: 23), to the last
    look those reach (19)."""
    more = rounds.shares({CHEAP: 8, DEAR: 8}, {CHEAP: 2.0, DEAR: 30.0}, 1000)
    assert more == {DEAR: 1, CHEAP: 11}
    assert all(8 + n in looks.LOOKS for n in more.values())


def test_a_round_never_passes_the_most_blocks_nor_stops_short_of_a_look() -> None:
    assert rounds.shares({CHEAP: 995, DEAR: 8}, {CHEAP: 2.0, DEAR: 30.0}, 1000)[CHEAP] == 5
    # the cheap row at 160 blocks grows to its next look (211: 102 s), the dear one to
    # 9, not to 11 (what fits in 102 s), which is no look
    more = rounds.shares({CHEAP: 160, DEAR: 8}, {CHEAP: 2.0, DEAR: 30.0}, 1000)
    assert more == {CHEAP: 51, DEAR: 1}
    # a row whose cost is unknown yet (no run of it has ended) grows to its next look
    assert rounds.shares({CHEAP: 16, DEAR: 8}, {CHEAP: 0.0, DEAR: 30.0}, 1000)[CHEAP] == 3
    # past the last look, by 1/GROWTH
    assert rounds.shares({CHEAP: 1600}, {CHEAP: 2.0}, 5000)[CHEAP] == 200
    assert rounds.shares({}, {}, 1000) == {}


def _spec(name: str) -> RunSpec:
    return RunSpec(0, name, "w", (), 0, ("true",), (), 5)


def _in_a_run(block: list[str], line: tuple[str, ...]) -> bool:
    """The line's versions next to each other, oldest or newest first."""
    at = block.index(line[0])
    return tuple(block[at : at + len(line)]) == line or tuple(
        block[at - len(line) + 1 : at + 1]
    ) == tuple(reversed(line))


def test_a_lines_versions_run_one_after_the_other() -> None:
    names = ["a@1", "a@2", "a@3", "b@1", "b@2", "lone"]
    members = [_spec(n) for n in random.Random(3).sample(names, len(names))]
    lines = (("a@1", "a@2", "a@3"), ("b@1", "b@2"), ("gone@1", "gone@2"))
    seen = set()
    for seed in range(40):
        block = [s.allocator for s in rounds.ordered(members, lines, random.Random(seed))]
        assert sorted(block) == sorted(names)
        assert _in_a_run(block, lines[0]) and _in_a_run(block, lines[1])
        seen.add(tuple(block))
    # directions and the lines' order vary from block to block: 2 x 2 x 3! orders
    assert len(seen) > 8


def test_without_lines_a_block_is_shuffled() -> None:
    members = [_spec(f"x{i}") for i in range(8)]
    orders = {
        tuple(s.allocator for s in rounds.ordered(list(members), (), random.Random(i)))
        for i in range(10)
    }
    assert len(orders) > 1


def test_planned_blocks_of_a_release_question_run_each_line_in_a_row() -> None:
    from allocmark.model import AllocatorSpec, Status, Verified, Workload
    from allocmark.run import plan

    names = ["a@1", "a@2", "a@3", "b@1", "b@2", "lone"]
    usable = [Verified(AllocatorSpec(name=n, paths=(f"/x/{n}.so",)), Status.OK) for n in names]
    w = Workload("app", "an application", "app", ("/bin/true",))
    lines = (("a@1", "a@2", "a@3"), ("b@1", "b@2"))
    specs = [
        s for s in plan.generate([(w, ())], usable, 6, 5.0, 1, lines=lines) if s.role == "measure"
    ]
    blocks: dict[int, list[str]] = {}
    for s in sorted(specs, key=lambda s: s.seq):
        blocks.setdefault(s.rep, []).append(s.allocator)
    assert len(blocks) == 6
    for block in blocks.values():
        assert sorted(block) == sorted(names)
        assert _in_a_run(block, lines[0]) and _in_a_run(block, lines[1])
    # without lines the plan is as it was: the same seed, the same shuffled order
    plain = plan.generate([(w, ())], usable, 1, 5.0, 1)
    rng = random.Random(1)
    rng.shuffle([(w, ())])  # the cells' order is drawn first
    expected = list(names)
    rng.shuffle(expected)
    assert [s.allocator for s in plain if s.role == "measure"] == expected
