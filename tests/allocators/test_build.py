"""Allocators built from crates.io: naming, version sweeps, the build itself."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from allocmark import allocators, native
from allocmark.allocators import builder
from allocmark.errors import UserError
from allocmark.model import Status
from allocmark.schemas import stored
from tests.conftest import cli

SMALL = "mimalloc@2.1.7"  # builds in seconds; mimalloc states its own version


def names(selection: list[str]) -> list[str]:
    return [s.name for s in allocators.select(allocators.load_catalog(), selection)]


def test_version_sweeps_expand_to_every_catalogued_version() -> None:
    assert names(["jemalloc@*"]) == [
        "jemalloc@4.5.0",
        "jemalloc@5.1.0",
        "jemalloc@5.2.1",
        "jemalloc@5.3.0",
        "jemalloc@5.3.1",
    ]
    secure = names(["mimalloc@*+secure"])
    assert len(secure) == 6 and all(n.endswith("+secure") for n in secure)
    assert names(["jemalloc@*:nodecay"])[0] == "jemalloc@4.5.0:nodecay"
    # a recipe with a default version answers to its family name
    assert names(["snmalloc", "snmalloc+checks"]) == ["snmalloc@0.7.6", "snmalloc@0.7.6+checks"]
    # "all" stays the installed catalog: recipe entries are opt-in; debugging
    # allocators are for the hardening battery
    assert not any("@" in n for n in names(["all"]))
    assert "efence" not in names(["all"]) and names(["efence"]) == ["efence"]


def test_unknown_version_is_refused_with_the_known_ones() -> None:
    with pytest.raises(
        UserError, match=r"jemalloc versions known to allocmark are 4\.5\.0, 5\.1\.0, 5\.2\.1, "
    ):
        names(["jemalloc@9.9.9"])
    r = cli("alloc", "build", "jemalloc@9.9.9")
    assert r.returncode == 2, r.stderr
    assert "5.2.1, 5.3.0, 5.3.1" in r.stderr and "Traceback" not in r.stderr
    r = cli("alloc", "build", "efence")
    assert r.returncode == 2 and "none of these is built from a crate" in r.stderr
    r = cli("alloc", "build", "nosuch@1.0")
    assert r.returncode == 2 and "no recipe 'nosuch'" in r.stderr


def test_generated_manifest_pins_crate_version_and_features() -> None:
    spec = allocators.select(allocators.load_catalog(), ["mimalloc@2.3.2+secure"])[0]
    assert spec.recipe is not None
    text = builder.cargo_toml(spec.recipe)
    assert 'package = "libmimalloc-sys", version = "=0.1.49", features = ["v2", "secure"]' in text
    assert 'panic = "abort"' in text
    jemalloc = allocators.select(allocators.load_catalog(), ["jemalloc@5.3.1"])[0]
    assert jemalloc.recipe and "disable_initial_exec_tls" in jemalloc.recipe.crate_features
    # an older jemalloc comes from another crate, which lacks the feature
    old = allocators.select(allocators.load_catalog(), ["jemalloc@4.5.0"])[0].recipe
    assert old and old.crate == "jemalloc-sys" and old.crate_features == ()
    assert 'package = "jemalloc-sys", version = "=0.1.4"' in builder.cargo_toml(old)
    # a source-only crate is fetched for its sources, never compiled
    hoard = allocators.select(allocators.load_catalog(), ["hoard"])[0]
    assert hoard.recipe and hoard.recipe.needs_source and "GPL" in hoard.license
    text = builder.cargo_toml(hoard.recipe)
    assert "[target.'cfg(any())'.dependencies]\nsys = { package = \"alloc_hoard\"" in text
    assert builder.cargo_command(hoard.recipe)[4] == "backend_hoard,source_only"


def test_unbuilt_entry_is_listed_with_the_command_that_builds_it(tmp_path: Path) -> None:
    r = cli("allocators", "-a", "rpmalloc", env={"ALLOCMARK_CACHE": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "not built" in r.stdout and "allocmark alloc build rpmalloc@b097fd0" in r.stdout


@pytest.fixture(scope="module")
def built() -> allocators.Verified:
    """A real crate build (cached between test runs in the user's cache)."""
    r = cli("alloc", "build", SMALL, timeout=900)
    assert r.returncode == 0, r.stderr + r.stdout
    assert f"{SMALL}: ok 2.1.7 (libmimalloc-sys 0.1.39)" in r.stdout
    spec = allocators.select(allocators.load_catalog(), [SMALL])[0]
    return allocators.verify(spec)


def test_built_library_serves_malloc_and_records_provenance(built: allocators.Verified) -> None:
    assert built.status is Status.OK, built.reason
    assert built.malloc_object == built.library and built.lacks == ()
    assert built.version == "2.1.7 (libmimalloc-sys 0.1.39)"
    prov = builder.read_provenance(Path(str(built.library)).parent)
    assert prov["crate"] == "libmimalloc-sys" and prov["crate_version"] == "0.1.39"
    assert prov["sha256"] == built.sha256 == native.sha256_file(str(built.library))
    again = cli("alloc", "build", SMALL)
    assert again.returncode == 0 and "(cached)" in again.stdout


CXX_PROGRAM = r"""
#include <dlfcn.h>
#include <malloc.h>
#include <cstdio>
#include <string>
#include <vector>
int main() {
  std::vector<std::string> v;
  for (int i = 0; i < 10000; i++) v.push_back(std::string(40 + i % 200, 'x'));
  char *a = new char[100];
  void *b = malloc(100);
  Dl_info info;
  dladdr(dlsym(RTLD_DEFAULT, "malloc"), &info);
  std::printf("%s %zu %zu\n", info.dli_fname, malloc_usable_size(a), malloc_usable_size(b));
  delete[] a;
  free(b);
  return 0;
}
"""


# Families added with their own backends; Google TCMalloc (abseil and all) takes
# minutes to build, so it is verified by `alloc build --all`, not here.
NEW = ["isoalloc@0.3.0", "hoard@2015", "dlmalloc@2.8.6"]


@pytest.fixture(scope="module", params=[SMALL, *NEW])
def family(request: pytest.FixtureRequest) -> allocators.Verified:
    name = request.param
    r = cli("alloc", "build", name, timeout=900)
    assert r.returncode == 0, r.stderr + r.stdout
    return allocators.verify(allocators.select(allocators.load_catalog(), [name])[0])


def test_every_backend_serves_the_whole_c_api_from_its_own_code(
    family: allocators.Verified,
) -> None:
    assert family.status is Status.OK, family.reason
    assert family.malloc_object == family.library and family.lacks == ()
    recipe = family.spec.recipe
    assert recipe is not None and family.version is not None
    assert family.version.startswith(recipe.upstream_version)
    prov = builder.read_provenance(Path(str(family.library)).parent)
    assert prov["crate"] == recipe.crate and prov["source_only"] is recipe.source_only


def test_cxx_new_and_delete_run_on_the_built_allocator(
    family: allocators.Verified, tmp_path: Path
) -> None:
    built = family
    if not shutil.which("g++"):
        pytest.fail("g++ is needed (build-essential, installed by make setup)")
    src = tmp_path / "newdelete.cpp"
    src.write_text(CXX_PROGRAM)
    exe = tmp_path / "newdelete"
    subprocess.run(["g++", "-O1", "-o", str(exe), str(src), "-ldl"], check=True)
    plain = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    under = subprocess.run(
        [str(exe)],
        capture_output=True,
        text=True,
        check=True,
        env=os.environ | {"LD_PRELOAD": str(built.library)},
    ).stdout.split()
    assert os.path.realpath(under[0]) == built.library
    # operator new reached the same allocator as malloc: same size classes,
    # which differ from glibc's (104 bytes usable for 100) but for dlmalloc's, whose
    # chunk layout glibc's ptmalloc kept.
    assert under[1] == under[2] and plain[1] == plain[2] == "104"
    assert under[1] != "104" or built.spec.family_name == "dlmalloc"


def test_failed_build_shows_cargo_error_and_keeps_nothing(tmp_path: Path) -> None:
    catalog = tmp_path / "bad.toml"
    catalog.write_text(
        '[recipe.badmi]\ncrate = "libmimalloc-sys"\nbackend = "mimalloc"\n'
        '[recipe.badmi.version]\n"0.0.1" = { crate_version = "=0.0.999" }\n'
    )
    r = cli(
        "alloc",
        "build",
        "badmi@0.0.1",
        "--catalog",
        str(catalog),
        env={"ALLOCMARK_CACHE": str(tmp_path / "cache")},
    )
    # listed with its reason, the others go on; the exit status says one failed
    assert r.returncode == 1, r.stderr
    assert "0 of 1 built or cached in" in r.stdout and "1 failed:" in r.stdout
    assert "building badmi@0.0.1 (libmimalloc-sys =0.0.999) failed: cargo exited" in r.stderr
    assert "libmimalloc-sys" in r.stderr.split("Last lines", 1)[1]
    assert "Traceback" not in r.stderr
    assert not list((tmp_path / "cache" / "allocators").glob("*/libam_preload.so"))


def test_store_keeps_the_recipe_of_a_run(tmp_path: Path) -> None:
    spec = allocators.select(allocators.load_catalog(), ["hardened_malloc+light"])[0]
    again = stored.allocator_spec(json.dumps(dataclasses.asdict(spec)))
    assert again == spec


def test_a_new_build_drops_older_builds_of_the_same_entry_only(tmp_path: Path) -> None:
    root = tmp_path / "allocators"
    for d in ("snmalloc-0.7.6-aaaa", "snmalloc-0.7.6-bbbb", "snmalloc-0.7.6-checks-cccc"):
        (root / d).mkdir(parents=True)
    builder._drop_older_builds(root / "snmalloc-0.7.6-bbbb")
    assert sorted(p.name for p in root.iterdir()) == [
        "snmalloc-0.7.6-bbbb",
        "snmalloc-0.7.6-checks-cccc",
    ]


def test_unbuilt_families_are_one_line_each_unless_all(tmp_path: Path) -> None:
    env = {"ALLOCMARK_CACHE": str(tmp_path)}  # an empty cache: nothing built
    short = cli("allocators", env=env)
    assert short.returncode == 0, short.stderr
    assert "mimalloc@*" in short.stdout and "allocmark alloc build mimalloc@*" in short.stdout
    assert "mimalloc@2.1.7" not in short.stdout
    full = cli("allocators", "--all", env=env | {"ALLOCMARK_WIDTH": "120"})
    assert "mimalloc@2.1.7" in full.stdout
    assert full.stdout.count("\n") > short.stdout.count("\n") + 15


@pytest.mark.parametrize("cache", ["empty", "this machine's"])
def test_the_catalog_fits_40_lines_with_every_family(tmp_path: Path, cache: str) -> None:
    """Built or not, the versions of a recipe share one line unless --all."""
    env = {"ALLOCMARK_WIDTH": "120"} | (
        {"ALLOCMARK_CACHE": str(tmp_path)} if cache == "empty" else {}
    )
    short = cli("allocators", env=env)
    assert short.returncode == 0, short.stderr
    lines = short.stdout.splitlines()
    families = {s.family_name for s in allocators.load_catalog([]) if not s.hidden}
    first = {x.split()[0] for x in lines[2:] if x and not x.startswith(" ")}
    assert len(lines) <= 40 and families <= first, (len(lines), families - first)
    assert all(len(line) <= 120 for line in lines)
    full = cli("allocators", "--all", env=env)
    assert full.stdout.count("\n") > short.stdout.count("\n") + 15  # a line per entry there


def test_the_whole_catalog_is_one_line_per_entry(tmp_path: Path) -> None:
    full = cli(
        "allocators", "--all", env={"ALLOCMARK_CACHE": str(tmp_path), "ALLOCMARK_WIDTH": "120"}
    )
    assert full.returncode == 0, full.stderr
    lines = full.stdout.splitlines()
    families = next(x for x in lines if " families, " in x)
    # a line per entry (its variants on it) and a dozen of title, header and notes
    entry_lines = int(families.split("(")[1].split()[0])
    assert len(lines) <= entry_lines + 12 and all(len(line) <= 120 for line in lines)
    assert int(families.split()[0]) >= 18
    # a line per entry, variants on it; what many share said once, under the table
    jemalloc = next(x for x in lines if x.split()[:1] == ["jemalloc"])
    assert ":nodecay" in jemalloc and "lacks reallocarray, pvalloc" in jemalloc
    assert not any(x.split()[:1] == ["jemalloc:nodecay"] for x in lines)
    assert full.stdout.count("mixes two heaps") == 1
    for name in ("google-tcmalloc@2025.06.16", "isoalloc@0.3.0", "hoard@2015", "efence"):
        assert any(name in x for x in lines), name


def test_two_versions_of_a_family_get_a_plot_across_versions(
    built: allocators.Verified, tmp_path: Path
) -> None:
    """Debian's mimalloc (2.0.9) beside a crate build (2.1.7): a real campaign."""
    db = tmp_path / "v.db"
    r = cli(
        "run",
        "-w",
        "churn",
        "-p",
        "count=2000",
        "-p",
        "rounds=1",
        "-p",
        "threads=1",
        "-a",
        f"glibc,mimalloc,{SMALL}",
        "-n",
        "2",
        "--max-blocks",
        "2",
        "--db",
        str(db),
    )
    assert r.returncode == 0, r.stderr
    r = cli(
        "report",
        "--db",
        str(db),
        "--plots",
        str(tmp_path / "plots"),
        "--format",
        "html",
        "-o",
        str(tmp_path / "r.html"),
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "plots" / "versions-mimalloc.svg").is_file()
    page = (tmp_path / "r.html").read_text()
    assert "mimalloc by version, against glibc" in page
    # the two versions on the x axis, in order
    svg = (tmp_path / "plots" / "versions-mimalloc.svg").read_text()
    assert svg.index(">2.0.9<") < svg.index(">2.1.7<")
