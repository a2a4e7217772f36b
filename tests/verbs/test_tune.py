"""`allocmark tune`: candidates from the settings catalog, the race, the answer."""

from __future__ import annotations

import dataclasses
import json
import re
import sqlite3
from pathlib import Path

import pytest

from allocmark.allocators import catalog
from allocmark.answer import analyze, race
from allocmark.errors import UserError
from allocmark.model import AllocatorSpec, Status, Verified
from allocmark.run import start
from allocmark.schemas.settings import Check, Family, ShownBy, Style
from allocmark.verbs import tune
from tests.conftest import cli
from tests.fakes import stored

GLIBC = AllocatorSpec(name="glibc", system=True, baseline=True)
JEMALLOC = AllocatorSpec(
    name="jemalloc", paths=("/x/libjemalloc.so.2",), env=(("MALLOC_CONF", "dirty_decay_ms:0"),)
)


def test_candidates_try_one_setting_at_a_time_then_no_thp() -> None:
    families = tune.load_settings()
    names = [c.name for c in tune.candidates(GLIBC, families)]
    assert names[0] == "glibc" and names[-1] == "glibc:nothp"
    assert "glibc{arena_max=2}" in names
    by_name = {c.name: c for c in tune.candidates(JEMALLOC, families)}
    # A setting joins what the entry already sets, in the allocator's own syntax.
    assert dict(by_name["jemalloc{narenas=1}"].env)["MALLOC_CONF"] == "dirty_decay_ms:0,narenas:1"
    assert dict(tune.candidates(GLIBC, families)[1].env)["GLIBC_TUNABLES"].startswith(
        "glibc.malloc."
    )
    assert ("AM_RUN_THP", "never") in by_name["jemalloc:nothp"].env


def test_a_crate_built_jemalloc_gets_its_settings_in_the_variable_it_reads() -> None:
    crate = AllocatorSpec(
        name="jemalloc@5.3.0",
        paths=("/x/libam_preload.so",),
        env=(("_RJEM_MALLOC_CONF", "dirty_decay_ms:0"),),
    )
    families = tune.load_settings()
    env = dict(
        next(
            c for c in tune.candidates(crate, families) if c.name == "jemalloc@5.3.0{narenas=1}"
        ).env
    )
    assert env == {"_RJEM_MALLOC_CONF": "dirty_decay_ms:0,narenas:1"}  # prefixed build
    assert tune.family_of("jemalloc@5.2.1:nodecay", families) is families["jemalloc@*"]
    assert tune.family_of("jemalloc:nodecay", families) is families["jemalloc"]


def test_a_broken_settings_file_names_its_key(tmp_path: Path) -> None:
    bad = tmp_path / "settings.toml"
    bad.write_text('[glibc]\nstyle = "yaml"\n[glibc.values]\narena_max = [1]\n')
    with pytest.raises(UserError, match=r"settings.toml: key 'glibc.style'"):
        tune.load_settings(bad)


def _rows(name: str, time: float, rss: int) -> list:  # type: ignore[type-arg]
    # 12 blocks: enough for the exact test at Holm's alpha/10 (the race judges 10 ratios)
    return [stored(name, time * (1 + 0.01 * (b % 3)), rss=rss, rep=b) for b in range(12)]


def test_the_race_drops_what_another_candidate_clearly_beats() -> None:
    names = ["glibc", "je{fast=1}", "je{slow=1}", "je{tied=1}", "je", "je:nothp"]
    runs = [
        *_rows("glibc", 1.0, 1000),
        *_rows("je{fast=1}", 0.5, 1000),
        *_rows("je{slow=1}", 2.0, 900),
        *_rows("je{tied=1}", 0.5, 1000),
        *_rows("je", 2.0, 1000),
        *_rows("je:nothp", 2.0, 1000),
    ]
    comp = analyze.compare(runs, names, "glibc")
    (out,) = race.dominated(comp, "time").values()
    # glibc stays: every block's ratios pair with it; je stays: its settings are
    # judged against it
    assert out == {"je{slow=1}", "je:nothp"}
    (pareto,) = race.dominated(comp, "pareto").values()
    assert pareto == set()  # slow is smaller, :nothp ties on RSS: both on the front


def test_a_setting_is_judged_against_its_own_allocators_defaults() -> None:
    runs = [
        *_rows("glibc", 1.0, 1000),
        *_rows("jemalloc", 0.8, 2000),
        *_rows("jemalloc{narenas=1}", 0.8, 1000),
    ]
    comp = analyze.compare(runs, ["glibc", "jemalloc", "jemalloc{narenas=1}"], "glibc")
    text = race.against_default(comp, comp.rows[0], "jemalloc{narenas=1}")
    assert text.startswith("against jemalloc's defaults: time ×1.00")
    assert "peak RSS ×0.50 [0.50–0.50] smaller" in text
    assert race.default_of("jemalloc:nothp") == "jemalloc"


def test_paste_lines_run_the_program_as_the_candidate_ran() -> None:
    (cand,) = [
        c
        for c in tune.candidates(JEMALLOC, tune.load_settings())
        if c.name == "jemalloc{narenas=4}"
    ]
    line = tune.paste_line(cand, "/x/libjemalloc.so.2", ["./prog", "a b"])
    assert (
        line == "LD_PRELOAD=/x/libjemalloc.so.2 MALLOC_CONF=dirty_decay_ms:0,narenas:4 ./prog 'a b'"
    )
    off = tune.paste_line(catalog.nothp(GLIBC), "", ["./prog"])
    assert off == "./prog  # with THP off (prctl PR_SET_THP_DISABLE)"


@pytest.mark.integration
def test_tune_races_and_prints_the_front_as_lines_to_paste(
    tmp_path: Path, installed: dict[str, Verified]
) -> None:
    db = tmp_path / "t.db"
    # jemalloc 5.3's muzzy_decay_ms defaults to 0: that candidate is left out, and
    # the report says so again
    je = "jemalloc" in installed and (installed["jemalloc"].version or "").startswith("5.3")
    r = cli(
        "tune",
        "-a",
        "glibc,jemalloc" if je else "glibc",
        "-w",
        "churn",
        "-p",
        "count=2000",
        "-p",
        "rounds=2",
        "-n",
        "2",
        "--budget",
        "15s",
        "--db",
        str(db),
    )
    assert r.returncode == 0, r.stderr
    left_out = "jemalloc{muzzy_decay_ms=0}: jemalloc (5.3"
    assert not je or f"left out: {left_out}" in r.stdout + r.stderr
    assert "Pareto front of time and peak RSS, churn: run it as" in r.stdout
    assert "am_churn --count 2000" in r.stdout
    with sqlite3.connect(db) as con:
        names = {n for (n,) in con.execute("SELECT name FROM allocators")}
        stored = json.loads(con.execute("SELECT settings_json FROM campaigns").fetchone()[0])
    assert {"glibc", "glibc{arena_max=1}", "glibc:nothp"} <= names
    assert stored["precision"]["race"] == "pareto"
    again = cli("report", "--db", str(db))
    assert "Pareto front of time and peak RSS, churn: run it as" in again.stdout
    assert not je or f"(not raced: {left_out}" in again.stdout
    bad = cli("tune", "--objective", "speed", "-w", "churn", "--db", str(db))
    assert bad.returncode == 2 and "--objective 'speed'" in bad.stderr


@pytest.mark.integration
def test_tune_races_a_users_settings_file_instead_of_the_built_in_values(
    tmp_path: Path,
) -> None:
    mine, db = tmp_path / "mine.toml", tmp_path / "t.db"
    mine.write_text('[glibc]\nstyle = "env"\n[glibc.values]\nAM_UNUSED = [1, 2]\n')
    r = cli(
        "tune",
        "-a",
        "glibc",
        "--settings",
        str(mine),
        "-w",
        "churn",
        "-p",
        "count=2000",
        "-p",
        "rounds=1",
        "-n",
        "2",
        "--max-blocks",
        "2",
        "--db",
        str(db),
    )
    assert r.returncode == 0, r.stderr
    assert "glibc's settings are raced unchecked" in r.stdout + r.stderr
    with sqlite3.connect(db) as con:
        rows = dict(con.execute("SELECT name, env_json FROM allocators").fetchall())
    assert set(rows) == {"glibc", "glibc{AM_UNUSED=1}", "glibc{AM_UNUSED=2}", "glibc:nothp"}
    assert json.loads(rows["glibc{AM_UNUSED=2}"])["AM_UNUSED"] == "2"
    mine.write_text('[glibc]\nstyle = "env"\n[glibc.values]\nAM_UNUSED = "one"\n')
    bad = cli("tune", "-a", "glibc", "--settings", str(mine), "-w", "churn", "--db", str(db))
    assert bad.returncode == 2 and str(mine) in bad.stderr and "Traceback" not in bad.stderr


def _fake(family: Family, *settings: tuple[str, str]) -> list[Verified]:
    """A system allocator at its defaults and with each setting, as verified."""
    base = AllocatorSpec(name="fake", system=True)
    out = [Verified(base, Status.OK, version="1.0")]
    for key, value in settings:
        (cand,) = [
            c for c in tune.candidates(base, {"fake": family}) if c.name == f"fake{{{key}={value}}}"
        ]
        out.append(Verified(cand, Status.OK, version="1.0"))
    return out


def test_a_setting_that_changes_nothing_the_allocator_shows_is_left_out() -> None:
    shown = ShownBy(
        command=["sh", "-c", 'echo "opt.a: ${FAKE_A:-5}"; echo "opt.b: 7"'], lines="^opt"
    )
    family = Family(style=Style.ENV, values={"FAKE_A": [1, 5], "FAKE_OLD": [1]}, shown_by=shown)
    usable = _fake(family, ("FAKE_A", "1"), ("FAKE_A", "5"), ("FAKE_OLD", "1"))
    out = tune.check(usable, {"fake": family}).left_out
    assert set(out) == {"fake{FAKE_A=5}", "fake{FAKE_OLD=1}"}  # its default; a name it ignores
    assert out["fake{FAKE_OLD=1}"].startswith("fake (1.0) shows the same settings with FAKE_OLD=1")
    assert tune.check(usable, {"fake": family}).unchecked == {}
    blind = Family(style=Style.ENV, values={"FAKE_A": [1]})
    assert tune.check(usable[:2], {"fake": blind}) == tune.Checked(
        {}, {"fake": "the settings catalog has no way to see whether it takes them"}
    )


def test_a_setting_whose_name_no_line_shows_is_left_out() -> None:
    # glibc's way: an unset tunable shows as 0, so the name and the range are checked
    line = "glibc.malloc.arena_max: 0x0 (min: 0x1, max: 0xffff)"
    shown = ShownBy(command=["sh", "-c", f"echo '{line}'"], lines="^glibc", check=Check.NAME)
    family = Family(
        style=Style.TUNABLES, values={"arena_max": [0, 2], "arena_mux": [1]}, shown_by=shown
    )
    usable = _fake(family, ("arena_max", "0"), ("arena_max", "2"), ("arena_mux", "1"))
    assert tune.check(usable, {"fake": family}).left_out == {
        "fake{arena_mux=1}": "fake (1.0) does not know arena_mux",
        # out of its range: glibc ignores it and shows it as unset
        "fake{arena_max=0}": "fake (1.0) ignores arena_max=0: arena_max takes 0x1–0xffff",
    }


@pytest.mark.integration
def test_the_shipped_checks_see_what_real_allocators_take(installed: dict[str, Verified]) -> None:
    families = tune.load_settings()
    glibc = installed["glibc"]
    wanted = {"glibc{trim_threshold=0}", "glibc{arena_max=2}", "glibc{tcache_count=0}"}
    usable = [glibc] + [
        Verified(c, Status.OK) for c in tune.candidates(glibc.spec, families) if c.name in wanted
    ]
    bogus = families["glibc"].model_copy(
        update={"values": {"no_such_tunable": [1], "arena_max": [0]}}
    )
    odd = [Verified(c, Status.OK) for c in tune.candidates(glibc.spec, {"glibc": bogus})[1:3]]
    assert tune.check([*usable, *odd], families | {"glibc": bogus}).left_out == {
        "glibc{no_such_tunable=1}": f"glibc ({glibc.version}) does not know no_such_tunable",
        "glibc{arena_max=0}": f"glibc ({glibc.version}) ignores arena_max=0: arena_max takes "
        "0x1–0xffffffffffffffff",
    }
    if "jemalloc" in installed:
        j = installed["jemalloc"]
        cands = {c.name: c for c in tune.candidates(j.spec, families)}
        picked = [
            dataclasses.replace(j, spec=cands[n])
            for n in ("jemalloc{narenas=1}", "jemalloc{tcache_max=4096}")
        ]
        assert tune.check([j, *picked], families).left_out == {}
        odd = families["jemalloc"].model_copy(update={"values": {"no_such_opt": [1]}})
        (cand,) = tune.candidates(j.spec, {"jemalloc": odd})[1:2]
        assert list(
            tune.check([j, dataclasses.replace(j, spec=cand)], {"jemalloc": odd}).left_out
        ) == ["jemalloc{no_such_opt=1}"]
    assert tune.family_of("mimalloc@2.1.7+secure", families) is families["mimalloc"]


def test_a_partial_allocator_is_warned_of_once_with_its_candidates() -> None:
    from allocmark.model import Prepared

    base = Verified(JEMALLOC, Status.OK, lacks=("pvalloc",), reason="lacks pvalloc")
    usable = [
        dataclasses.replace(base, spec=c) for c in tune.candidates(JEMALLOC, tune.load_settings())
    ]
    notes = start.unusable_notes(Prepared(tuple(usable), (), None))
    assert [n.text for n in notes] == [
        f"warning: jemalloc and its {len(usable) - 1} tuned variants are partial: lacks pvalloc"
    ]


def test_settings_judged_together_get_wider_intervals() -> None:
    def rows(name: str, time: float) -> list:  # type: ignore[type-arg]
        step = 3 if "{" in name else 7  # candidates vary unlike their defaults
        return [stored(name, time * (1 + 0.03 * ((b * step) % 5)), rep=b) for b in range(10)]

    one = [*rows("glibc", 1.0), *rows("jemalloc", 1.0), *rows("jemalloc{narenas=1}", 0.9)]
    many = one + [
        r for n in ("jemalloc{a=1}", "jemalloc{b=1}", "jemalloc{c=1}") for r in rows(n, 1.0)
    ]
    texts = []
    for runs in (one, many):
        names = list(dict.fromkeys(r.allocator for r in runs))
        comp = analyze.compare(runs, names, "glibc")
        texts.append(race.against_default(comp, comp.rows[0], "jemalloc{narenas=1}"))
        assert race.candidate_count(comp) == len(names) - 2
    bounds = [
        tuple(map(float, re.search(r"time ×[\d.]+ \[([\d.]+)–([\d.]+)\]", t).groups()))
        for t in texts
    ]  # type: ignore[union-attr]
    assert bounds[1][0] < bounds[0][0] and bounds[1][1] > bounds[0][1]


def test_a_setting_the_allocator_fails_with_is_left_out_as_such() -> None:
    shown = ShownBy(
        command=["sh", "-c", 'echo "opt: ${FAKE_A:-0}"; [ "$FAKE_A" != 9 ]'], lines="^opt"
    )
    family = Family(style=Style.ENV, values={"FAKE_A": [1, 9]}, shown_by=shown)
    usable = _fake(family, ("FAKE_A", "1"), ("FAKE_A", "9"))
    assert tune.check(usable, {"fake": family}).left_out == {
        "fake{FAKE_A=9}": "fake (1.0) fails with FAKE_A=9 (exit status 1)"
    }


def test_an_allocator_that_shows_nothing_at_its_defaults_is_raced_unchecked() -> None:
    # A prefixed jemalloc reads _RJEM_MALLOC_CONF: MALLOC_CONF=stats_print:true shows
    # nothing, and then no setting can be told taken or not.
    for command, why in (
        (["true"], "it showed no settings (no line matching '^opt')"),
        (["false"], "false failed under it (exit status 1)"),
        (["/no/such"], "/no/such did not run under it"),
    ):
        family = Family(
            style=Style.ENV, values={"FAKE_A": [1]}, shown_by=ShownBy(command=command, lines="^opt")
        )
        usable = _fake(family, ("FAKE_A", "1"))
        assert tune.check(usable, {"fake": family}) == tune.Checked({}, {"fake": why})


@pytest.mark.integration
def test_a_built_crate_jemalloc_takes_its_settings() -> None:
    from allocmark import allocators
    from allocmark.allocators import builder, verification

    built = [
        s
        for s in allocators.load_catalog()
        if s.name.startswith("jemalloc@") and builder.is_built(s)
    ]
    if not built:
        pytest.skip("no crate-built jemalloc (allocmark alloc build jemalloc@5.3.0)")
    families = tune.load_settings()
    usable = [
        v for v in verification.verify_all(tune.candidates(built[0], families)[:3]) if v.usable
    ]
    # MALLOC_CONF would be ignored by this prefixed build: the check would be blind
    assert tune.check(usable, families) == tune.Checked({}, {})
