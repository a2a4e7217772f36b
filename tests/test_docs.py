"""The documentation site: it builds with --strict (a broken link or a page left out
of the navigation fails), and its schema page is what `allocmark schema` prints."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Material's notice of its successor off; never -q: mkdocs then drops the warnings
# that --strict would have counted (a broken link passed).
QUIET = dict(os.environ) | {"NO_MKDOCS_2_WARNING": "1"}


def _docs_script() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("docs_script", ROOT / "scripts" / "docs.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
        check=False,
        env=QUIET,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "site" / "statistics" / "index.html").is_file()


def test_the_schema_page_is_current() -> None:
    page = (ROOT / "docs" / "schemas.md").read_text()
    assert page == _docs_script().schemas_page(), "run `make docs` to regenerate docs/schemas.md"


def test_a_broken_link_fails_the_build(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# x\n\nsee [nowhere](nowhere.md)\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: t\nnav:\n  - Home: index.md\n")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(tmp_path / "mkdocs.yml"),
            "-d",
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
        check=False,
        env=QUIET,
    )
    assert done.returncode != 0 and "nowhere.md" in done.stderr + done.stdout


def test_the_readme_is_short_and_its_links_lead_somewhere() -> None:
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    links = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text)
    assert links and all((ROOT / link).is_file() for link in links), links


def test_the_pages_state_the_defaults_the_code_has() -> None:
    """Issue 53: docs/reports.md said `try` starts with 3 blocks (it is 4)."""
    from allocmark.defaults import DEFAULT_MAX_BLOCKS, DEFAULT_MIN_BLOCKS

    reports = " ".join((ROOT / "docs" / "reports.md").read_text().split())
    assert f"start with `-n` blocks ({DEFAULT_MIN_BLOCKS})" in reports
    assert f"until `--max-blocks` ({DEFAULT_MAX_BLOCKS})" in reports
