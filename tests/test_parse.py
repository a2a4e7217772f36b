"""`-a` selections and catalog entries (no processes)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from allocmark import allocators, workloads
from allocmark.errors import UserError
from allocmark.run import suites
from allocmark.verbs import tune
from tests.conftest import cli


def test_names_and_user_libraries_mix() -> None:
    got = allocators.parse_selection(["glibc,mine=/tmp/l.so:A=1,B=2,jemalloc", "tcmalloc"])
    names, adhoc = got.names, got.adhoc
    assert names == ["glibc", "jemalloc", "tcmalloc"]
    assert adhoc[0].name == "mine"
    assert adhoc[0].paths == ("/tmp/l.so",)
    assert adhoc[0].env == (("A", "1"), ("B", "2"))
    assert adhoc[0].user


def test_bad_env_pair() -> None:
    with pytest.raises(UserError, match="is not ENV=VALUE"):
        allocators.parse_selection(["mine=/tmp/l.so:1X=2"])


def test_unknown_catalog_name_suggests_or_counts() -> None:
    """A typo gets the near name (as git and pip do), not a screen of names; a name
    near none gets the count and where the list is. Hidden entries are never named."""
    with pytest.raises(UserError, match=r"unknown allocator 'jemaloc' \(did you mean 'jemalloc'"):
        allocators.select(allocators.load_catalog(), ["jemaloc"])
    with pytest.raises(UserError, match=r"'zzz'; \d+ are known") as e:
        allocators.select(allocators.load_catalog(), ["zzz"])
    assert "bump" not in str(e.value) and "allocmark allocators" in str(e.value)


def test_builtin_catalog_has_the_debian_allocators_and_variants() -> None:
    names = {s.name for s in allocators.load_catalog()}
    assert {
        "glibc",
        "glibc:arena2",
        "jemalloc",
        "jemalloc:nodecay",
        "tcmalloc-minimal",
        "tcmalloc",
        "mimalloc",
        "tbbmalloc",
        "scudo",
        "scudo:norelease",
    } <= names
    base = [s for s in allocators.load_catalog() if s.baseline]
    assert [s.name for s in base] == ["glibc"]


def test_user_catalog_entry_replaces_and_adds(tmp_path: Path) -> None:
    cat = tmp_path / "mine.toml"
    cat.write_text(
        '[allocator.mine]\nlibrary = ["/opt/libmine.so"]\nversion = "none"\n'
        '[allocator.mine.variant.fast]\nenv = { MINE_FAST = "1" }\n'
    )
    specs = {s.name: s for s in allocators.load_catalog([cat])}
    assert specs["mine:fast"].env == (("MINE_FAST", "1"),)
    assert specs["mine:fast"].paths == ("/opt/libmine.so",)
    assert specs["mine"].user


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[allocator.x]\ndescription = "no library"\n', "key 'allocator.x.library': is required"),
        (
            '[allocator.x]\nlibrary = "/x.so"\nversion = "git"\n',
            "key 'allocator.x.version': 'git': expected one of probe:NAME",
        ),
        (
            '[allocator.x]\nlibrary = "/x.so"\nenv = { A = 1 }\n',
            "key 'allocator.x.env.A': input should be a valid string, got 1",
        ),
        ('[allocator."a b"]\nlibrary = "/x.so"\n', "may only use letters"),
    ],
)
def test_catalog_errors(tmp_path: Path, text: str, message: str) -> None:
    cat = tmp_path / "c.toml"
    cat.write_text(text)
    with pytest.raises(UserError, match=message):
        allocators.load_catalog([cat])


@pytest.mark.parametrize("kind", ["suite", "catalog", "workloads", "settings"])
def test_the_json_schema_validates_every_shipped_file(kind: str) -> None:
    import jsonschema

    from allocmark import schemas

    schema = schemas.json_schema(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    files = {
        "suite": sorted(suites.suites_dir().glob("*.toml")),
        "catalog": [allocators.builtin_catalog()],
        "workloads": [workloads.builtin_catalog()],
        "settings": [tune.settings_file()],
    }[kind]
    assert files
    for path in files:
        jsonschema.validate(tomllib.loads(path.read_text()), schema)
    bad = {
        "suite": {"blocks": 0},
        "catalog": {"allocator": {"x": {"version": "git"}}},
        "workloads": {"workload": {"w": {"kind": "shell"}}},
        "settings": {"glibc": {"style": "yaml", "values": {}}},
    }[kind]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_schema_command_prints_json_and_refuses_unknown_kinds() -> None:
    done = cli("schema", "suite")
    assert done.returncode == 0 and json.loads(done.stdout)["title"] == "allocmark suite"
    bad = cli("schema", "workload-catalog")
    assert bad.returncode == 2 and "choose suite, catalog, workloads" in bad.stderr
