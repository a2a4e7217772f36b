"""Every shell example of the README and docs/ runs as pasted, in a fresh shell
(issue 53): the lines of ```sh blocks, the `$ ` lines of the output blocks (with their
`\\` continuations) and the `allocmark ...` commands written inline in the text.

A fresh shell: `bash -c`, an environment of HOME, PATH (/usr/local/bin first: where
`make setup` links the command), LANG and nothing else of ours. Its directory holds
what the examples name: results/quick.db, results/apps.db, results/try.db and results/allocmark.db
(a finished `try`), the tiny git repository of tests/allocators/tinyrepo.py (the
developers' examples run inside a checkout), /tmp/libnomalloc.so (the tour's refusal).

What would run for minutes (a campaign, a build, `make test` itself) runs as a dry
run: ALLOCMARK_DRY_RUN=1 (every campaign verb's --dry-run: checked as far as its first
build, nothing run or stored) and MAKEFLAGS=n (`make -n`). Reading verbs (`report`,
`allocators`, `schema`, ...) run for real. An example followed by an `ERROR:` line in
its block must fail with exit status 2 and that error; every other must exit 0.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.allocators import tinyrepo
from tests.conftest import cli

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A placeholder the reader fills in (a word of capitals that is no variable being set,
# or an ellipsis): an example of the form, not a command to paste.
PLACEHOLDER = re.compile(r"(?<![\w$])[A-Z][A-Z_-]*\b(?!=)|…|\.\.\.")
# Examples that need what no fresh directory has, each with where it is tested.
ELSEWHERE = {
    "allocmark run --resume": "an interrupted campaign: tests/test_cli.py resumes one",
}


@dataclass(frozen=True)
class Example:
    page: str
    command: str
    error: str = ""  # the `ERROR:` line the page shows after it ("" : it succeeds)


def examples() -> list[Example]:
    found: dict[str, Example] = {}
    for page in PAGES:
        text = page.read_text()
        for e in _blocks(page.name, text) + _inline(page.name, text):
            if not PLACEHOLDER.search(e.command.split(" #")[0]):  # a comment is prose
                found.setdefault(e.command, e)
    return list(found.values())


def _blocks(page: str, text: str) -> list[Example]:
    out: list[Example] = []
    for lang, body in re.findall(r"^```(\w*)\n(.*?)^```", text, re.M | re.S):
        lines = body.splitlines()
        if lang == "sh":
            out += [Example(page, x) for x in lines if x.strip()]
            continue
        for i, line in enumerate(lines):
            if not line.startswith("$ "):
                continue
            command, j = line[2:], i
            while command.endswith("\\"):
                j += 1
                command = command[:-1] + " " + lines[j].strip()
            after = lines[j + 1] if j + 1 < len(lines) else ""
            out.append(Example(page, command, after if after.startswith("ERROR:") else ""))
    return out


def _inline(page: str, text: str) -> list[Example]:
    prose = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    found = re.findall(r"`(allocmark [^`]+)`", prose)
    return [Example(page, " ".join(c.split())) for c in found]


EXAMPLES = examples()


@pytest.fixture(scope="module")
def shell(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A checkout of the tiny allocator with the results the examples read, and the
    environment of a fresh login."""
    base = tmp_path_factory.mktemp("examples")
    repo = tinyrepo.make(base / "tiny")
    work = repo.path
    # docs/developers.md: "commit 5, tagged `v1.1` here, ... commit 11, tagged `v1.2`"
    for tag, commit in (("v1.1", tinyrepo.SLOW), ("v1.2", tinyrepo.FAT)):
        subprocess.run(["git", "tag", tag, repo.commits[commit]], cwd=work, check=True)
    (work / "results").mkdir()
    done = work / "results" / "allocmark.db"
    # profiled, so that `report --profile` has its view too
    r = cli("try", "-a", "glibc,jemalloc", "--no-why", "--profile", "--db", str(done), "--", "true")
    assert r.returncode == 0, r.stderr
    for name in ("quick.db", "apps.db", "try.db"):
        shutil.copy(done, work / "results" / name)
    # docs/workloads.md: "`allocmark run --suite my-suite.toml` runs your own"
    suites = ROOT / "src" / "allocmark" / "catalog" / "suites"
    shutil.copy(suites / "quick.toml", work / "my-suite.toml")
    _no_malloc(Path("/tmp/libnomalloc.so"))
    home = base / "home"
    home.mkdir()
    env = {
        "HOME": str(home),
        "PATH": f"{home}/.local/bin:/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "ALLOCMARK_DRY_RUN": "1",
        "MAKEFLAGS": "n",
    }
    if os.getuid():  # where `make setup` linked it for a user
        env["PATH"] = f"{Path.home()}/.local/bin:" + env["PATH"]
    return work, env


def _no_malloc(path: Path) -> None:
    """The tour's library that exports no malloc."""
    if path.exists():
        return
    source = path.with_suffix(".c")
    source.write_text("int am_nothing(void) { return 0; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(path), str(source)], check=True)


def test_the_pages_have_examples() -> None:
    pages = {e.page for e in EXAMPLES}
    assert {"README.md", "tour.md", "developers.md", "allocators.md"} <= pages
    assert len(EXAMPLES) >= 30


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.command[:70] for e in EXAMPLES])
def test_an_example_runs_as_pasted(example: Example, shell: tuple[Path, dict[str, str]]) -> None:
    if example.command in ELSEWHERE:
        pytest.skip(ELSEWHERE[example.command])
    work, env = shell
    where = ROOT if example.command.startswith("make ") else work
    done = subprocess.run(
        ["bash", "-c", example.command],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    said = done.stdout + done.stderr
    assert "Traceback" not in said, said
    assert "command not found" not in said, said  # allocmark is on PATH
    if example.error:
        assert done.returncode == 2, (example, said[-2000:])
        head = example.error.split(":", 2)[:2]  # "ERROR: allocator 'bad'"
        assert ":".join(head) in said, (example, said[-2000:])
    else:
        assert done.returncode == 0, (example, said[-2000:])
