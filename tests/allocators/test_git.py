"""Allocators built from a git repository: revisions side by side, cached builds, and
`allocmark bisect` finding planted commits (tinyrepo.py), on real builds and runs."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from allocmark import labels, stats
from allocmark.allocators import git, lineage
from allocmark.allocators.selection import parse_selection
from allocmark.answer import analyze, releases
from allocmark.errors import UserError
from allocmark.model import GitBuild
from allocmark.report import extra
from allocmark.run import runas
from allocmark.verbs import bisect
from tests.allocators import tinyrepo
from tests.answer.test_across import _runs
from tests.conftest import cli, readable
from tests.exports import check_summary

pytestmark = pytest.mark.integration
# A short cell whose time is mostly malloc calls: the planted spin makes it ~10× slower.
CELL = ("-w", "samethread", "-p", "count=20000", "-p", "rounds=2")
HOW = ("--build", tinyrepo.BUILD, "--library", tinyrepo.OUTPUT)


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory the run-as user can read, with the repository and a cache of its own
    (ALLOCMARK_CACHE: the tests' builds and mirrors leave nothing in the real cache)."""
    where = readable(tmp_path_factory.mktemp("git"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ALLOCMARK_CACHE", str(where / "cache"))
        yield where


@pytest.fixture(scope="module")
def repo(place: Path) -> tinyrepo.Repo:
    return tinyrepo.make(place / "tiny")


def _db(place: Path, name: str) -> Path:
    d = place / "db"
    d.mkdir(exist_ok=True)
    d.chmod(0o755)
    return d / name


def _bisect(place: Path, repo: tinyrepo.Repo, *args: str) -> subprocess.CompletedProcess[str]:
    return cli("bisect", "--repo", str(repo.path), *HOW, *args, "--db", str(_db(place, "b.db")))


def _steps(text: str) -> list[str]:
    """The step lines, not the lines that say what a step expects before it."""
    return [
        line for line in text.splitlines() if line.startswith("step ") and " expects " not in line
    ]


@pytest.mark.parametrize(("metric", "planted"), [("time", tinyrepo.SLOW), ("rss", tinyrepo.FAT)])
def test_bisect_finds_the_planted_commit(
    place: Path, repo: tinyrepo.Repo, metric: str, planted: int
) -> None:
    # At an error rate of 0.001 a wrong commit is named at most once in 1,000 runs of
    # this test; the planted changes (10× the time, 8× the peak RSS) decide in a few blocks.
    done = _bisect(place, repo, "v1.0", "v2.0", *CELL, "--metric", metric, "--error-rate", "0.001")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    n = tinyrepo.LAST
    bound = math.ceil(math.log2(n)) + 2
    steps = _steps(out)
    print(out)
    assert f"{n} commits after v1.0 up to v2.0; at most {bound} steps" in out
    assert f"first commit decided unlike good: {repo.describe(planted)}" in out
    assert 1 <= len(steps) <= bound
    # a verdict per step, or the broken commit skipped with its build's failure
    words = [re.search(r"(like good|like bad|skipped)", s) for s in steps]
    assert all(words), steps
    broken = [s for s in steps if repo.describe(tinyrepo.BROKEN) in s]
    assert broken and all("skipped: `make` exited with status 2" in s for s in broken), steps
    assert re.search(r"^start .* differs \(higher\) in \d+ blocks", out, re.M), out
    # the noise the start measured, and before each step what it expects
    assert re.search(
        r"noise: a block's log ratio varies by [\d.]+ \(sd of the start's", done.stderr
    )
    assert re.search(
        r"^step \d+ expects about \d+ blocks, [\d.]+ (s|min) of its [\d.]+ (s|min) share "
        r"\(noise [\d.]+ a block, (√3 × the start's|earlier steps')\)$",
        out,
        re.M,
    ), out
    # the culprit confirmed against its parent (commit planted - 1 builds), its change
    # quoted as a factor (past 2×)
    word = bisect.WORDS[labels.metric_key(metric)[0]]
    parent = re.escape(repo.describe(planted - 1))
    assert re.search(rf"^confirm  {re.escape(repo.describe(planted))} / its parent: ×", out, re.M)
    assert re.search(
        rf"; confirmed: {word} ×[\d.]+ \[×[\d.]+, ×[\d.]+\] against its parent {parent} in "
        r"\d+ blocks",
        out,
    ), out


def test_an_aa_bisect_decides_no_commit(place: Path, repo: tinyrepo.Repo) -> None:
    """v1.0 to commit 4: only a changelog changes, the libraries are the same. The start
    decides BAD unlike GOOD at most at its level (error rate 0.001 × 0.9 / 4: this
    test fails by chance at most once in 4,000 runs)."""
    done = _bisect(
        place,
        repo,
        "v1.0",
        repo.commits[4],
        *CELL,
        "--error-rate",
        "0.001",
        "--max-blocks",
        "6",
        "--budget",
        "2m",
    )
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    assert "at most 4 steps and a confirmation, a budget of 2 min" in done.stdout
    assert "no commit decided unlike good" in done.stdout
    assert not _steps(done.stdout)


def test_revisions_run_side_by_side_and_their_builds_are_reused(
    place: Path, repo: tinyrepo.Repo
) -> None:
    db = _db(place, "range.db")
    last = repo.commits[3]
    how = ("--build", "make libtiny.so", "--library", tinyrepo.OUTPUT)  # a recipe of its own
    first = cli(
        "run",
        "-a",
        f"tiny@git:{repo.path}#v1.0..{last}",
        *how,
        *CELL,
        "-n",
        "2",
        "--max-blocks",
        "2",
        "--db",
        str(db),
    )
    assert first.returncode == 0, first.stderr
    assert first.stderr.count("building tiny@") == 4
    with sqlite3.connect(db) as con:
        specs = [json.loads(t) for (t,) in con.execute("SELECT spec_json FROM allocators")]
    recorded = [(s["git"]["commit"], s["git"]["describe"], s["git"]["repository"]) for s in specs]
    assert recorded == [(repo.commits[i], repo.describe(i), str(repo.path)) for i in range(4)]
    plots = place / "plots"
    shown = cli("report", "--db", str(db), "--plots", str(plots))
    assert shown.returncode == 0, shown.stderr
    summary = json.loads(cli("report", "--db", str(db), "--format", "json").stdout)
    check_summary(summary)  # revisions and releases, as the schema says
    assert {r["commit"] for r in summary["revisions"].values()} == set(repo.commits[:4])
    assert [(c["older"], c["newer"]) for c in summary["releases"]][:1] == [
        ("tiny@v1.0", f"tiny@{repo.describe(1)}")
    ]
    assert (plots / "versions-tiny.svg").is_file()
    built = sorted(p.stat().st_mtime_ns for p in (place / "cache" / "git").rglob("libtiny.so"))
    again = cli(
        "run",
        "-a",
        f"tiny@git:{repo.path}#v1.0..{last}",
        *how,
        *CELL,
        "-n",
        "2",
        "--max-blocks",
        "2",
        "--db",
        str(db),
    )
    assert again.returncode == 0, again.stderr
    assert "building" not in again.stderr
    assert (
        sorted(p.stat().st_mtime_ns for p in (place / "cache" / "git").rglob("libtiny.so")) == built
    )


def test_a_revision_that_does_not_build_is_listed_with_its_log_and_skipped(
    place: Path, repo: tinyrepo.Repo
) -> None:
    db = _db(place, "skip.db")
    revs = ",".join(repo.commits[i] for i in (7, 8, 9))
    done = cli(
        "run",
        "-a",
        f"tiny@git:{repo.path}#{revs}",
        *HOW,
        *CELL,
        "-n",
        "2",
        "--max-blocks",
        "2",
        "--db",
        str(db),
    )
    assert done.returncode == 0, done.stderr
    assert f"skipped: tiny@{repo.commits[8]}"[:60] in done.stderr
    assert "this does not compile" in done.stderr
    with sqlite3.connect(db) as con:
        names = [n for (n,) in con.execute("SELECT name FROM allocators")]
    assert sorted(names) == sorted(f"tiny@{repo.commits[i]}"[:45] for i in (7, 9))
    # None builds: refused with what each said, and nothing stored
    alone = _db(place, "none.db")
    done = cli(
        "run", "-a", f"tiny@git:{repo.path}#{repo.commits[8]}", *HOW, *CELL, "--db", str(alone)
    )
    assert done.returncode == 2, done.stderr
    assert "no revision built: tiny@" in done.stderr and "this does not compile" in done.stderr
    assert not alone.exists()


def test_the_build_runs_as_the_measured_user_and_stays_in_its_checkout(
    place: Path, repo: tinyrepo.Repo
) -> None:
    """A build is the repository's code: as root it runs as the campaign's transient
    identity, and a library named outside the checkout is refused, never copied into
    the cache."""
    sel = git.Selection("who", str(repo.path), ("v1.0",))
    (spec,) = git.specs(sel, str(repo.path), GitBuild("id -u > uid", "uid"))
    git.build(spec)
    uid = int((Path(spec.paths[0])).read_text().strip())
    assert runas.transient(runas.RunAs("", uid, uid)) if os.geteuid() == 0 else uid == os.geteuid()
    (outside,) = git.specs(sel, str(repo.path), GitBuild("true", "../../../etc/passwd"))
    with pytest.raises(git.BuildFailed, match="leads outside the checkout"):
        git.build(outside)
    assert not git.is_built(outside)
    (link,) = git.specs(sel, str(repo.path), GitBuild("ln -s /etc/shadow lib.so", "lib.so"))
    with pytest.raises(git.BuildFailed, match="leads outside the checkout"):
        git.build(link)
    # Its log cannot become a link to what only root reads (the error shows its end).
    swap = "rm -f ../build.log; ln -sf /etc/shadow ../build.log; echo tried; exit 3"
    (liar,) = git.specs(sel, str(repo.path), GitBuild(swap, "lib.so"))
    with pytest.raises(git.BuildFailed, match="exited with status 3") as failed:
        git.build(liar)
    assert failed.value.tail[-1] == "tried" and "root:" not in str(failed.value)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("-a", "tiny@git:{repo}#v1.0"), "Give --build CMD and --library LIB"),
        (
            ("-a", "tiny@git:{repo}#nosuch", *HOW),
            "revision 'nosuch' is not a commit of the repository (tags: v2.0, v1.0)",
        ),
        (("-a", "tiny@git:{repo}#v2.0..v1.0", *HOW), "is not an ancestor of"),
        (("-a", "tiny@git:{repo}/nope#v1.0", *HOW), "no such directory"),
        (("-a", "tiny@git:{repo}#", *HOW), "name the revisions after '#'"),
        (("-a", "tiny@git:{repo}#v1.0", "--build", "make"), "--build and --library go together"),
        (("-a", "glibc", *HOW), "name them with -a NAME@git:PATH#REV"),
    ],
)
def test_usage_errors_name_the_value_and_the_fix(
    place: Path, repo: tinyrepo.Repo, args: tuple[str, ...], says: str
) -> None:
    done = cli(
        "run",
        *(a.replace("{repo}", str(repo.path)) for a in args),
        *CELL,
        "--db",
        str(_db(place, "usage.db")),
    )
    assert done.returncode == 2, done.stderr
    assert says in done.stderr.replace("\n", " "), done.stderr
    assert "Traceback" not in done.stderr


def test_bisect_refuses_what_it_cannot_do(place: Path, repo: tinyrepo.Repo) -> None:
    same = _bisect(place, repo, "v1.0", "v1.0", *CELL)
    assert same.returncode == 2 and "nothing to bisect" in same.stderr
    broken = _bisect(place, repo, "v1.0", repo.commits[tinyrepo.BROKEN], *CELL)
    assert broken.returncode == 2 and "BAD must build" in broken.stderr
    metric = _bisect(place, repo, "v1.0", "v2.0", *CELL, "--metric", "colour")
    assert metric.returncode == 2 and "--metric 'colour': choose one of time" in metric.stderr


def test_revisions_run_to_the_end_of_the_value() -> None:
    got = parse_selection(["mine@git:/r#v1,v2,HEAD", "glibc,jemalloc"])
    assert got.names == ["glibc", "jemalloc"]
    assert got.revisions == [git.Selection("mine", "/r", ("v1", "v2", "HEAD"))]
    with pytest.raises(UserError, match="more than once"):
        parse_selection(["mine@git:/r#v1", "mine=/x.so"])


def test_the_levels_of_a_bisect_never_add_up_past_its_error_rate() -> None:
    levels = bisect.Levels(0.05, 6)
    spent = [levels.next() for _ in range(200)]
    assert sum(spent) <= 0.05
    assert spent[0] == pytest.approx(0.05 * 0.9 / 6)
    assert spent[6] == pytest.approx(0.05 * 0.1 / 2)


def test_release_to_release_decides_the_planted_change_only() -> None:
    """Three versions; 3.0 is 20 % slower than 2.0, the rest equal: only that step is
    decided, and the report's table says so with its interval."""
    runs = [
        r for a, t in (("v1", 1.0), ("v2", 1.0), ("v3", 1.2)) for r in _runs(a, "w", t, 10000, 0.01)
    ]
    comp = analyze.compare(runs, ["v1", "v2", "v3"], "v1")
    lines = {
        a: lineage.Lineage("fam", v, "crate")
        for a, v in (("v1", "1.0"), ("v2", "2.0"), ("v3", "3.0"))
    }
    comp = dataclasses.replace(comp, lineages=lines)
    found = releases.changes(comp)
    decided = [(c.older, c.newer, c.metric, c.verdict) for c in found if c.decided]
    assert decided == [("v2", "v3", "time_s", stats.Verdict.WORSE)]
    table = extra.releases_table(comp, releases.changes(comp))
    assert table is not None
    rows = {r[1]: r[2:] for r in table.rows}
    assert rows["2.0 → 3.0"][0].startswith("slower +20% [")
    assert rows["1.0 → 2.0"][0] in ("=", "?")
    cells = [t for r in table.rows for t in r[2:]]
    changed = sum(t.startswith(("slower", "faster", "larger", "smaller")) for t in cells)
    counts = f"{changed} changed, {cells.count('=')} the same, {cells.count('?')} undecided"
    assert table.title.endswith(f"({counts}, of {len(cells)})")
    assert changed == 1
    # what is still open runs as a line, in version order (run/rounds.py)
    assert releases.open_versions(comp, found).versions == {}

    def opened(*older: str) -> releases.Open:
        undecided = stats.Verdict.UNDECIDED
        return releases.open_versions(
            comp,
            [dataclasses.replace(c, verdict=undecided) if c.older in older else c for c in found],
        )

    assert opened("v1").versions == {"w": frozenset({"v1", "v2"})}
    assert opened("v1").lines == {"w": (("v1", "v2"),)}
    assert opened("v2", "v1").lines == {"w": (("v1", "v2", "v3"),)}


def test_a_catalog_entry_names_the_repository_and_its_recipe(
    place: Path, repo: tinyrepo.Repo
) -> None:
    entry = place / "mine.toml"
    entry.write_text(
        f'[git.tiny]\nrepository = "{repo.path}"\nbuild = "make"\noutput = "libtiny.so"\n'
        'description = "the tests\' tiny allocator"\n'
    )
    db = _db(place, "catalog.db")
    done = cli(
        "run",
        "--catalog",
        str(entry),
        "-a",
        "tiny@git:#v1.0",
        *CELL,
        "-n",
        "2",
        "--max-blocks",
        "2",
        "--db",
        str(db),
    )
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(db) as con:
        (text,) = con.execute("SELECT spec_json FROM allocators").fetchone()
    spec = json.loads(text)
    assert spec["name"] == "tiny@v1.0" and spec["git"]["commit"] == repo.commits[0]
    assert spec["description"].startswith("the tests' tiny allocator at v1.0")


def test_try_runs_a_command_under_revisions(place: Path, repo: tinyrepo.Repo) -> None:
    db = _db(place, "try.db")
    done = cli(
        "try",
        "-a",
        f"tiny@git:{repo.path}#v1.0,v2.0",
        "-a",
        "glibc",
        *HOW,
        "-n",
        "2",
        "--max-blocks",
        "2",
        "--db",
        str(db),
        "--",
        "/bin/true",
    )
    assert done.returncode == 0, done.stderr
    assert "tiny@v1.0" in done.stdout and "tiny@v2.0" in done.stdout


def test_a_url_is_mirrored_like_a_path(place: Path, repo: tinyrepo.Repo) -> None:
    """A URL (file:// here: no network) goes through the same mirror as a path."""
    url = f"file://{repo.path}"
    (spec,) = git.specs(git.Selection("tiny", url, ("v2.0",)), url, GitBuild(*HOW[1::2]))
    assert spec.git is not None and spec.git.repository == url
    assert spec.git.commit == repo.commits[-1] and spec.git.describe == "v2.0"
    assert git.build(spec).library.is_file()
