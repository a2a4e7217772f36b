"""Allocators from Debian's other releases (allocmark/debian.py): one entry of each
route fetched for real (another release's binary, a source package built here, a
glibc of another release), run, verified and hardened; the catalog's rules; the
refusal of a program built for a newer glibc. Fetches are cached in the user's
cache, so a second run of the suite takes seconds."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from allocmark import allocators, workloads
from allocmark.allocators import builder, debian, lineage, prepare
from allocmark.errors import UserError
from allocmark.model import AllocatorSpec, Status, Verified
from allocmark.run import plan
from tests.conftest import cli

BINARY = "mimalloc-deb@3.0.1"  # trixie's libmimalloc3, built for glibc 2.34: loads here
SOURCE = "musl-mallocng@1.2.5"  # trixie's musl source, built here with allocmark's glue
GLIBC = "glibc@2.41"  # trixie's libc6, under its own loader


def spec(name: str) -> AllocatorSpec:
    return allocators.select(allocators.load_catalog(), [name])[0]


@pytest.mark.parametrize(
    ("debian_version", "upstream"),
    [
        ("2.8.1-1", "2.8.1"),
        ("3.0.1+ds-2.1", "3.0.1"),
        ("2.41-12+deb13u5", "2.41"),
        ("1.2.5-3.1~deb13u1", "1.2.5"),
        ("1:2.4.7-7", "2.4.7"),
        ("2023.1.0", "2023.1.0"),
    ],
)
def test_the_upstream_part_of_a_debian_version(debian_version: str, upstream: str) -> None:
    assert debian.upstream(debian_version) == upstream


def test_entries_name_their_release_route_and_glibc() -> None:
    tcm = spec("tcmalloc-minimal@2.18.1")
    assert tcm.recipe and tcm.recipe.debian and tcm.family_name == "gperftools"
    deb = tcm.recipe.debian
    assert (deb.release, deb.package, deb.glibc, deb.glibc_release) == (
        "sid",
        "libtcmalloc-minimal4t64",
        "2.43",
        "sid",
    )
    # it runs under sid's glibc: the launcher's variable names that glibc's folder
    assert dict(tcm.env)["AM_RUN_GLIBC"] == str(debian.glibc_dir("2.43") / "lib")
    assert tcm.glibc_version == "2.43" and not tcm.other_libc
    libc = spec("glibc@2.41:arena2")
    assert libc.other_libc and libc.glibc_version == "2.41"
    assert dict(libc.env)["MALLOC_ARENA_MAX"] == "2"
    src = spec(SOURCE).recipe
    assert src and src.debian and src.debian.source == "musl" and src.debian.build
    # none of them is in "all": a fetch is asked for by name
    assert not any("@" in s.name for s in allocators.select(allocators.load_catalog(), ["all"]))
    names = [s.name for s in allocators.select(allocators.load_catalog(), ["tcmalloc-minimal@*"])]
    assert names == ["tcmalloc-minimal@2.8.1", "tcmalloc-minimal@2.16", "tcmalloc-minimal@2.18.1"]


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        (
            '"1.0" = { release = "sid", package = "a", source = "b" }',
            "needs exactly one of package",
        ),
        ('"1.0" = { release = "sid", source = "b" }', "key 'debian.x.build': is required"),
        ('"1.0" = { release = "sid", package = "a", glibc = "9.9" }', "glibc 9.9 is no version"),
        ('"1.0" = { release = "Sid!", package = "a" }', "debian.x.version.1.0.release"),
    ],
)
def test_a_bad_debian_entry_is_a_usage_error_naming_its_key(
    tmp_path: Path, entry: str, problem: str
) -> None:
    catalog = tmp_path / "mine.toml"
    catalog.write_text(f'[debian.x]\nlibrary = ["usr/lib/x.so"]\n[debian.x.version]\n{entry}\n')
    r = cli("allocators", "--catalog", str(catalog))
    assert r.returncode == 2, r.stdout
    assert problem in r.stderr and str(catalog) in r.stderr and "Traceback" not in r.stderr


def test_a_program_built_for_a_newer_glibc_is_refused_naming_the_file() -> None:
    ruby = "/usr/bin/ruby"
    if not os.path.exists(ruby):
        pytest.fail("ruby is needed (make setup-apps installs it)")
    need, where = debian.glibc_needed(ruby)
    assert need >= (2, 34) and where  # built on Debian 12 (glibc 2.36)
    why = debian.refusal(ruby, "glibc@2.31", "2.31")
    assert why and f"GLIBC_{'.'.join(map(str, need))}" in why and "glibc@2.31" in why
    assert debian.refusal(ruby, "glibc@2.41", "2.41") is None
    assert debian.glibc_needed("/etc/os-release") == ((0,), "")  # not ELF: nothing asked


def test_a_campaign_s_programs_are_checked_against_each_entry_s_glibc() -> None:
    """The rows' programs (not allocmark's own) are checked as the allocators are
    prepared: an entry of an older glibc than a program needs is refused before any run."""
    if not os.path.exists("/usr/bin/ruby"):
        pytest.fail("ruby is needed (make setup-apps installs it)")
    catalog = workloads.load_catalog()
    rows = [(w, tuple((p.name, p.default) for p in w.params)) for w in catalog.values()]
    rows = [r for r in rows if r[0].name in ("ruby", "churn")]
    programs = plan.programs(rows)
    assert programs == [shutil.which("ruby")]  # churn is allocmark's own: no check
    with pytest.raises(UserError, match=r"ruby.* needs GLIBC_2\.3[4-9].*glibc@2\.31"):
        prepare.check_glibc(programs, [spec("glibc"), spec("glibc@2.31")])
    prepare.check_glibc(programs, [spec("glibc"), spec(GLIBC)])  # 2.41 runs it


@pytest.fixture(scope="module", params=[BINARY, SOURCE, GLIBC])
def fetched(request: pytest.FixtureRequest) -> Verified:
    r = cli("alloc", "build", request.param, timeout=900)
    assert r.returncode == 0, r.stderr + r.stdout
    assert "built or cached in" in r.stdout
    return allocators.verify(spec(request.param))


def test_each_route_is_verified_with_its_origin(fetched: Verified) -> None:
    v = fetched
    assert v.status in (Status.OK, Status.PARTIAL), v.reason
    recipe = v.spec.recipe
    assert recipe and recipe.debian and v.version
    deb = recipe.debian
    assert v.version.startswith(f"{recipe.upstream_version} (Debian {deb.release} ")
    prov = builder.read_provenance(builder.output_dir(v.spec.name, recipe))
    assert debian.upstream(prov["debian_version"]) == recipe.upstream_version
    if deb.source:  # every file of the source package, by checksum
        assert prov["files"] and all(len(d) == 64 for d in prov["files"].values())
        assert prov["build"] == list(deb.build)
    else:
        assert prov["sha256"] in v.version and len(prov["sha256"]) == 64
    if deb.is_glibc:  # the probe ran under that glibc: it says so, and its libc serves malloc
        assert v.version.startswith("2.41 ") and v.malloc_object == v.library
        assert v.preload is None  # the C library is not preloaded: its loader runs the program
    else:
        assert v.malloc_object == v.library and prov["library_sha256"] == v.sha256


def test_the_system_apt_configuration_is_never_touched(tmp_path: Path) -> None:
    """The system's sources stay as they were and its lists gain nothing of trixie's
    (its own apt may refresh bookworm's meanwhile: that is not ours to watch)."""

    def state() -> tuple[dict[str, bytes], dict[str, int]]:
        sources = [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]
        lists = Path("/var/lib/apt/lists").glob("*trixie*")
        return (
            {str(p): p.read_bytes() for p in sources if p.is_file()},
            {str(p): p.stat().st_mtime_ns for p in lists},
        )

    before = state()
    r = cli("alloc", "build", SOURCE, env={"ALLOCMARK_CACHE": str(tmp_path)}, timeout=900)
    assert r.returncode == 0, r.stderr + r.stdout
    assert state() == before
    private = (tmp_path / "debian" / "apt" / "trixie" / "sources.list").read_text()
    assert private.splitlines() == [
        f"deb [signed-by={debian.KEYRING}] {debian.MIRROR} trixie main",
        f"deb-src [signed-by={debian.KEYRING}] {debian.MIRROR} trixie main",
    ]
    assert list((tmp_path / "debian" / "apt" / "trixie" / "lists").glob("*trixie*Sources*"))


def test_programs_run_under_another_glibc_and_under_the_new_families(tmp_path: Path) -> None:
    """A native workload and a real application (ruby, found on PATH by the launcher)
    under trixie's glibc, musl's mallocng and a trixie mimalloc: every run verified."""
    for name in (GLIBC, SOURCE, BINARY):
        assert cli("alloc", "build", name, timeout=900).returncode == 0
    db = tmp_path / "g.db"
    r = cli(
        "run",
        "-w",
        "churn,ruby",
        "-p",
        "count=2000",
        "-p",
        "rounds=1",
        "-p",
        "scale=1",
        "-a",
        f"glibc,{GLIBC},{SOURCE},{BINARY}",
        "-n",
        "1",
        "--max-blocks",
        "1",
        "--db",
        str(db),
        timeout=600,
    )
    assert r.returncode == 0, r.stderr + r.stdout
    with sqlite3.connect(db) as con:
        rows = con.execute(
            "SELECT allocator, workload, status, malloc_object, role FROM runs"
        ).fetchall()
        libc = con.execute("SELECT library FROM allocators WHERE name = ?", (GLIBC,)).fetchone()
    assert {(a, w) for a, w, *_ in rows} >= {
        (GLIBC, "churn"),
        (GLIBC, "ruby"),
        (SOURCE, "ruby"),
        (BINARY, "ruby"),
    }
    assert all(status == "ok" for _, _, status, _, _ in rows), rows
    under = [os.path.realpath(m) for a, _, _, m, _ in rows if a == GLIBC]
    assert under and set(under) == {os.path.realpath(libc[0])}
    assert str(debian.glibc_dir("2.41")) in libc[0]


def test_the_new_entries_take_the_hardening_battery(tmp_path: Path) -> None:
    names = [GLIBC, SOURCE, "duma"]
    r = cli(
        "harden",
        "-a",
        ",".join(names),
        "--tests",
        "double_free,free_null",
        "-n",
        "1",
        "--no-cost",
        "--db",
        str(tmp_path / "h.db"),
        timeout=600,
    )
    assert r.returncode == 0, r.stderr + r.stdout
    score = r.stdout.split("Hardening score per allocator", 1)[1]
    for name in names:
        assert name in score


def test_debian_builds_are_one_line_across_versions_apart_from_crates() -> None:
    deb = lineage.of(spec("tcmalloc-minimal@2.8.1"), None)
    assert deb == lineage.Lineage("gperftools", "2.8.1", "bullseye libtcmalloc-minimal4")
    newer = lineage.of(spec("tcmalloc-minimal@2.18.1"), None)
    assert newer and newer.other_glibc and newer.series == "Debian, under a newer glibc"
    system = lineage.of(spec("glibc"), "2.36")
    assert system == lineage.Lineage("glibc", "2.36", "libc6")
    assert system.series == "Debian"
    assert lineage.of(spec("glibc@2.41:arena2"), None) is None  # variants are not versions
    crate = lineage.of(spec("jemalloc@5.3.1"), None)
    assert crate and crate.series == "crate"


def test_a_pasted_command_runs_under_the_entry_s_glibc() -> None:
    from allocmark.verbs import tune

    line = tune.paste_line(spec("glibc@2.41:arena2"), "/x/libc.so.6", ["true", "-x"])
    loader = debian.glibc_dir("2.41") / "lib" / debian.LOADER
    assert line.startswith("MALLOC_ARENA_MAX=2 ") and "LD_PRELOAD" not in line
    assert f"{loader} --library-path {loader.parent} /usr/bin/true -x" in line
    tcm = tune.paste_line(spec("tcmalloc-minimal@2.18.1"), "/y/libtcmalloc_minimal.so.4", ["ls"])
    assert tcm.startswith("LD_PRELOAD=/y/libtcmalloc_minimal.so.4 ") and "2.43/lib" in tcm


def test_a_library_s_companions_are_its_release_s_not_this_system_s() -> None:
    """bullseye's tbbmalloc proxy needs libtbbmalloc.so.2: bullseye's is preloaded
    first, so this system's 2021.8 one (same soname) is never loaded under it."""
    r = cli("alloc", "build", "tbbmalloc@2020.3", timeout=900)
    assert r.returncode == 0, r.stderr + r.stdout
    v = allocators.verify(spec("tbbmalloc@2020.3"))
    assert v.usable and v.malloc_object == v.library, v.reason
    companion = v.spec.companions[0]
    assert v.preload == f"{companion}:{v.library}" and os.path.isfile(companion)
    maps = subprocess.run(
        ["cat", "/proc/self/maps"],
        env=os.environ | {"LD_PRELOAD": v.preload},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    loaded = {line.split()[-1] for line in maps.splitlines() if "libtbbmalloc" in line}
    assert loaded == {companion, v.library}
