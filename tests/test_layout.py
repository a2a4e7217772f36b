"""The package's layout as a checked contract: the stage folders, their docstrings,
the import contracts (a forbidden import fails them, by name), the one reader of
native output, and docs/layout.md generated from the tree."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "allocmark"
sys.path.insert(0, str(ROOT / "scripts"))
import layout  # noqa: E402


def subpackages() -> list[Path]:
    return sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())


def test_the_top_level_holds_a_dozen_entries_besides_the_stage_folders() -> None:
    """A dozen, and the files door (files.py), which every stage that writes imports."""
    loose = [
        p.name
        for p in PACKAGE.iterdir()
        if p.name != "__pycache__" and not (p / "__init__.py").is_file()
    ]
    assert len(loose) <= 13 and "files.py" in loose, loose
    for stage in ("stats", "run", "allocators", "workloads", "answer", "verbs", "store"):
        assert (PACKAGE / stage / "__init__.py").is_file(), stage


def docstring(package: Path) -> str:
    return ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""


def names_after(doc: str, label: str) -> set[str]:
    """The names a contract's line lists: `May import: a, b/, `c`.` -> {a, b, c}."""
    found = re.search(rf"^{label}: (.*?)\.$", doc, re.M | re.S)
    if not found or found.group(1).strip() in ("", "nothing"):
        return set()
    return {x.strip(" `/\n") for x in found.group(1).split(",")}


def top_names() -> set[str]:
    """What a module of allocmark can import: its subpackages and loose modules."""
    return {p.stem for p in PACKAGE.iterdir() if p.suffix == ".py"} - {"__init__"} | {
        p.name for p in subpackages()
    }


def imported(package: Path) -> set[str]:
    """The top-level names of allocmark that the package's modules import."""
    out = set()
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                parts = node.module.split(".")
                if parts[0] != "allocmark":
                    continue
                out |= {parts[1]} if len(parts) > 1 else {a.name for a in node.names}
            elif isinstance(node, ast.Import):
                out |= {a.name.split(".")[1] for a in node.names if a.name.startswith("allocmark.")}
    return out & top_names() - {package.name}


def forbidden(name: str) -> set[str]:
    """What the import contracts of pyproject.toml forbid package `name` to import:
    every layer above its own, its `|` siblings, and each forbidden contract's list."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    out: set[str] = set()
    for contract in contracts["contracts"]:
        strip = lambda m: m.strip().removeprefix("allocmark.")  # noqa: E731
        if contract["type"] == "layers":
            layers = contract["layers"]
            mine = next(
                (i for i, x in enumerate(layers) if name in map(strip, re.split("[:|]", x))), None
            )
            if mine is None:
                continue
            out |= {strip(m) for layer in layers[:mine] for m in re.split("[:|]", layer)}
            if "|" in layers[mine]:
                out |= {strip(m) for m in layers[mine].split("|")} - {name}
        elif f"allocmark.{name}" in contract["source_modules"]:
            out |= {strip(m) for m in contract["forbidden_modules"]}
    return out


@pytest.mark.parametrize("name", [p.name for p in subpackages()])
def test_every_subpackage_contract_is_true(name: str) -> None:
    """Its docstring names every module it holds (and none it does not), what it may
    import (all it does import) and what it may never import: what the import
    contracts forbid it, no more and no less."""
    package = PACKAGE / name
    doc = docstring(package)
    assert doc, f"{name}/__init__.py has no docstring"
    modules = {str(p.relative_to(package)) for p in package.rglob("*.py")} - {"__init__.py"}
    named = set(re.findall(r"(?<![\w/.])([\w/]+\.py)\b", doc))
    assert modules - named == set(), f"{name}/__init__.py does not name these modules"
    assert named - modules == set(), f"{name}/__init__.py names modules it does not hold"
    if name == "catalog":  # data, and an application's script: it imports nothing
        assert imported(package) == set()
        return
    may, never = names_after(doc, "May import"), names_after(doc, "Never")
    assert may | never <= top_names(), (
        f"{name}: not a name of allocmark: {(may | never) - top_names()}"
    )
    assert imported(package) - may == set(), f"{name} imports what its contract does not list"
    assert never == forbidden(name), f"{name}: its Never line is not what the contracts forbid"
    assert may & never == set(), f"{name}: both allowed and forbidden"


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
            "the pipeline's layers",
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
    "answer/stored.py": "columns the store keeps as JSON",
    "report/html.py": "columns the store keeps as JSON",
    "schemas/exchange.py": "an exchange file's values",
    "store/base.py": "a campaign's plan, as an export shows it",
    "store/campaign_plan.py": "a campaign's plan, as stored",
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


def test_no_settings_dict_crosses_a_module_boundary() -> None:
    """The campaign's plan is a `request.CampaignPlan` everywhere but in its column: the
    column is named by the store alone, decoded by store/campaign_plan.py alone, and
    no function takes or returns settings as a dict."""
    from allocmark.store import Store

    named = {
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "settings_json" in p.read_text()
    }
    assert named <= {
        "store/schema.py",
        "store/base.py",
        "store/plans.py",
        "store/campaign_plan.py",
    }, named
    assert not hasattr(Store, "settings")
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for arg in [*node.args.args, *node.args.kwonlyargs]:
                hint = ast.unparse(arg.annotation) if arg.annotation else ""
                dict_like = hint.startswith(("dict", "Mapping", "dict[", "Mapping["))
                assert not (dict_like and arg.arg in ("settings", "plan")), (
                    f"{path.relative_to(PACKAGE)}: {node.name}({arg.arg}: {hint})"
                )


def _answer_calls(path: Path) -> list[str]:
    """The functions of answer/ that a module calls (its classes are types it builds)."""
    import importlib
    import inspect

    tree = ast.parse(path.read_text())
    modules: dict[str, str] = {}
    names: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("allocmark.answer"):
            for a in node.names:
                if node.module == "allocmark.answer":
                    modules[a.asname or a.name] = f"allocmark.answer.{a.name}"
                else:
                    names[a.asname or a.name] = (str(node.module), a.name)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f, target = node.func, None
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in modules:
            target = (modules[f.value.id], f.attr)
        elif isinstance(f, ast.Name) and f.id in names:
            target = names[f.id]
        if target and not inspect.isclass(getattr(importlib.import_module(target[0]), target[1])):
            out.append(f"{path.name}:{node.lineno} {target[0]}.{target[1]}")
    return out


def test_report_draws_what_answer_found_and_judges_nothing() -> None:
    """report/ reads answer's values (answer.findings, once per report) and builds its
    types: no format calls a function of answer/ while it draws."""
    called = [c for path in sorted((PACKAGE / "report").glob("*.py")) for c in _answer_calls(path)]
    assert called == []
