"""The layout near the peak (native/shim/am_prof_layout.c, at sample 1): page and line
utilization of the live blocks and the lines holding blocks of two threads, on programs
whose layout under glibc is known."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from allocmark import profile
from allocmark.model import Verified
from allocmark.report import profile_rows
from tests.profile.test_profile import build, profiled

# Two threads take turns (a mutex and a condition variable), each allocating one block
# of 40 bytes a turn, 2,000 turns each, all kept until exit. With an argument: one
# thread allocates all 4,000.
TURNS = r"""
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int turn;
static char *keep[4000];
static void *take(void *arg) {
  int me = (int)(long)arg;
  for (int i = 0; i < 2000; i++) {
    pthread_mutex_lock(&m);
    while (turn % 2 != me) pthread_cond_wait(&c, &m);
    keep[turn] = malloc(40);
    memset(keep[turn], 1, 40);
    turn++;
    pthread_cond_broadcast(&c);
    pthread_mutex_unlock(&m);
  }
  return 0;
}
int main(int argc, char **argv) {
  if (argc > 1) {
    for (int i = 0; i < 4000; i++) { keep[i] = malloc(40); memset(keep[i], 1, 40); }
    return 0;
  }
  pthread_t t;
  pthread_create(&t, 0, take, (void *)1L);
  take(0);
  return pthread_join(t, 0);
}
"""


def _summary(exe: Path, glibc: Verified, tmp: Path, *args: str) -> profile.AllocatorProfile:
    records, _ = profiled(exe, glibc, tmp, args=args)
    return profile.summarize("glibc", profile.merge(records), None)


def _layout(exe: Path, glibc: Verified, tmp: Path, *args: str) -> dict[str, int]:
    records, _ = profiled(exe, glibc, tmp, args=args)
    memory = profile.combine(records)["memory"]
    layout = {k.removeprefix("peak_layout_"): v for k, v in memory.items() if "layout_" in k}
    bytes_, lines, pages = layout["bytes"], layout["lines"], layout["pages"]
    # what holds them holds at least them; and near the peak (within 1/16)
    assert lines * 64 >= bytes_ and pages * 4096 >= bytes_ and lines <= pages * 64
    assert memory["peak_requested"] * 15 // 16 <= bytes_ <= memory["peak_requested"]
    return layout


@pytest.fixture
def glibc(installed: dict[str, Verified]) -> Verified:
    return installed["glibc"]


def test_one_threads_blocks_share_no_line_and_fill_five_sixths(
    tmp_path: Path, glibc: Verified
) -> None:
    """glibc's chunk of a 40-byte block is 48 bytes: 40 requested bytes in each 48."""
    layout = _layout(build(tmp_path, "turns", TURNS), glibc, tmp_path, "one")
    assert layout["shared_lines"] == 0 and layout["blocks"] >= 3750
    assert 0.80 <= layout["bytes"] / (layout["lines"] * 64) <= 0.84


def test_threads_taking_turns_in_one_arena_share_lines(
    tmp_path: Path, glibc: Verified, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each thread in an arena of its own (glibc's default): no line holds both's
    blocks. One arena (MALLOC_ARENA_MAX=1): the blocks alternate, and most lines do."""
    exe = build(tmp_path, "turns", TURNS)
    apart = _layout(exe, glibc, tmp_path)
    assert apart["shared_lines"] == 0
    monkeypatch.setenv("MALLOC_ARENA_MAX", "1")
    together = _layout(exe, glibc, tmp_path)
    assert together["shared_lines"] >= together["lines"] // 2
    # the findings say it, against the arenas apart
    one = dataclasses.replace(_summary(exe, glibc, tmp_path), allocator="one arena")
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    said = profile.findings([_summary(exe, glibc, tmp_path), one], "glibc")
    shared = [f for f in said if "lines shared by threads vs 0 for glibc" in f]
    assert shared and shared[0].startswith("one arena: ")
    lay = profile.layout(one)
    assert lay is not None and f"{lay.shared:,} lines shared" in shared[0]


def test_the_profile_shows_the_layout_or_says_it_needs_every_block(
    tmp_path: Path, glibc: Verified
) -> None:
    exe = build(tmp_path, "turns", TURNS)
    for sample, shown in ((1, "% of "), (64, "n/a")):
        records, _ = profiled(exe, glibc, tmp_path, sample=sample)
        s = profile.summarize("glibc", profile.merge(records), None)
        cells = {label: cell for _, label, (cell,) in profile_rows.rows([s], "glibc")}
        assert shown in cells["page utilization"] and shown in cells["line utilization"]
