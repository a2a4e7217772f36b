"""Allocators built from crates.io: naming, version sweeps, the build itself."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from allocmark import allocators, builder, native
from allocmark.errors import UserError
from allocmark.model import Status
from allocmark.schemas import stored

from .conftest import cli

SMALL = "mimalloc@2.1.7"  # builds in seconds; mimalloc states its own version


def names(selection: list[str]) -> list[str]:
    return [s.name for s in allocators.select(allocators.load_catalog(), selection)]


def test_version_sweeps_expand_to_every_catalogued_version() -> None:
    assert names(["jemalloc@*"]) == ["jemalloc@5.2.1", "jemalloc@5.3.0", "jemalloc@5.3.1"]
    secure = names(["mimalloc@*+secure"])
    assert len(secure) == 6 and all(n.endswith("+secure") for n in secure)
    assert names(["jemalloc@*:nodecay"])[0] == "jemalloc@5.2.1:nodecay"
    # a recipe with a default version answers to its family name
    assert names(["snmalloc", "snmalloc+checks"]) == ["snmalloc@0.7.6", "snmalloc@0.7.6+checks"]
    # "all" stays the installed catalog: recipe entries are opt-in
    assert not any("@" in n for n in names(["all"]))


def test_unknown_version_is_refused_with_the_known_ones() -> None:
    with pytest.raises(
        UserError, match=r"jemalloc versions known to allocmark are 5\.2\.1, 5\.3\.0, 5\.3\.1"
    ):
        names(["jemalloc@9.9.9"])
    r = cli("alloc", "build", "jemalloc@9.9.9")
    assert r.returncode == 2, r.stderr
    assert "5.2.1, 5.3.0, 5.3.1" in r.stderr and "Traceback" not in r.stderr
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


def test_cxx_new_and_delete_run_on_the_built_allocator(
    built: allocators.Verified, tmp_path: Path
) -> None:
    if not shutil.which("g++"):
        pytest.fail("g++ is needed (build-essential, installed by make setup)")
    src = tmp_path / "newdelete.cpp"
    src.write_text(CXX_PROGRAM)
    exe = tmp_path / "newdelete"
    subprocess.run(["g++", "-O1", "-o", str(exe), str(src), "-ldl"], check=True)
    plain = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    under = subprocess.run(
        [str(exe)], capture_output=True, text=True, check=True,
        env=os.environ | {"LD_PRELOAD": str(built.library)},
    ).stdout.split()  # fmt: skip
    assert os.path.realpath(under[0]) == built.library
    # operator new reached the same allocator as malloc: same size classes,
    # which differ from glibc's (104 bytes usable for 100).
    assert under[1] == under[2] and plain[1] == plain[2] == "104" and under[1] != "104"


def test_failed_build_shows_cargo_error_and_keeps_nothing(tmp_path: Path) -> None:
    catalog = tmp_path / "bad.toml"
    catalog.write_text(
        '[recipe.badmi]\ncrate = "libmimalloc-sys"\nbackend = "mimalloc"\n'
        '[recipe.badmi.version]\n"0.0.1" = { crate_version = "=0.0.999" }\n'
    )
    r = cli("alloc", "build", "badmi@0.0.1", "--catalog", str(catalog),
            env={"ALLOCMARK_CACHE": str(tmp_path / "cache")})  # fmt: skip
    assert r.returncode == 2, r.stderr
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
    assert "mimalloc@*" in short.stdout and "builds: allocmark alloc" in short.stdout
    assert "mimalloc@2.1.7" not in short.stdout
    full = cli("allocators", "--all", env=env)
    assert "mimalloc@2.1.7" in full.stdout
    assert full.stdout.count("\n") > short.stdout.count("\n") + 20
