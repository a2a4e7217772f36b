"""The package's layout as a checked contract: the stage folders, their docstrings,
the import contracts (a forbidden import fails them, by name), the one reader of
native output, and docs/layout.md generated from the tree."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "allocmark"
sys.path.insert(0, str(ROOT / "scripts"))
import layout  # noqa: E402


def subpackages() -> list[Path]:
    return sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())


def test_the_top_level_holds_a_dozen_entries_besides_the_stage_folders() -> None:
    loose = [
        p.name
        for p in PACKAGE.iterdir()
        if p.name != "__pycache__" and not (p / "__init__.py").is_file()
    ]
    assert len(loose) <= 12, loose
    for stage in ("stats", "run", "allocators", "workloads", "answer", "verbs", "store"):
        assert (PACKAGE / stage / "__init__.py").is_file(), stage


def test_every_subpackage_states_its_contract() -> None:
    for package in subpackages():
        doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
        assert doc, f"{package.name}/__init__.py has no docstring"
        if package.name != "catalog":  # data, not code
            assert "May import" in doc, f"{package.name}/__init__.py: what may it import?"


def lint_imports(src: Path) -> subprocess.CompletedProcess[str]:
    lint = Path(sys.executable).parent / "lint-imports"
    return subprocess.run(
        [str(lint), str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT,
        env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_the_import_contracts_hold() -> None:
    done = lint_imports(ROOT / "src")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("stats/ratios.py", "from allocmark.run import plan", "stats imports nothing of allocmark"),
        (
            "report/fmt.py",
            "from allocmark.run import execute",
            "report never imports the run stage",
        ),
        ("cli/show.py", "from allocmark.store import Store", "the CLI imports api"),
        ("cli/app.py", "from allocmark.allocators import builder", "the CLI imports api"),
        ("store/codec.py", "from allocmark.answer import analyze", "the pipeline's layers"),
    ],
)
def test_a_forbidden_import_fails_its_contract_by_name(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    copy = tmp_path / "allocmark"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text() + f"\n{line}  # a wrong turn\n")
    done = lint_imports(tmp_path)
    assert done.returncode != 0
    broken = [x for x in done.stdout.splitlines() if x.endswith("BROKEN")]
    assert any(x.startswith(contract) for x in broken), done.stdout


# Every other place that reads JSON, and what it reads: none of it is what a native
# program wrote, which native/records.py alone parses.
NOT_NATIVE = {
    "allocators/builder.py": "a build's provenance.json; `cargo metadata`",
    "answer/analyze.py": "columns the store keeps as JSON",
    "report/html.py": "columns the store keeps as JSON",
    "schemas/exchange.py": "an exchange file's values",
    "store/codec.py": "columns the store keeps as JSON",
    "store/exchange.py": "an exchange file",
    "workloads/catalog.py": "an application's own output (its metric parser)",
}


def test_native_output_has_one_reader() -> None:
    readers = set()
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        if re.search(r"\bjson\.loads?\(", text):
            readers.add(str(path.relative_to(PACKAGE)))
    assert readers - set(NOT_NATIVE) == {"native/records.py"}, readers


def test_the_layout_page_matches_the_tree() -> None:
    page = (ROOT / "docs" / "layout.md").read_text()
    block = re.search(r"<!-- layout -->\n```text\n(.*?)```\n<!-- end layout -->", page, re.S)
    assert block, "docs/layout.md has lost its generated block"
    assert block.group(1) == layout.tree(), "run `make docs` to regenerate docs/layout.md"
    assert not layout.missing(), "native/README.md needs a line for these folders"
