"""The two doors (docs/security.md), held by construction: every process allocmark
starts and every file it writes is found in the code (its syntax tree), and each one
outside the door is on a list here with the reason it may be. A new one fails the
test until it goes through the door (native/identity.py's `start` for anything that
runs untrusted code, files.py for any file written) or is justified here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "allocmark"

# -- the door for untrusted code ----------------------------------------------------------
CODE_DOOR = "native/identity.py"
_STARTS = {
    "subprocess": {"run", "Popen", "call", "check_call", "check_output", "getoutput"},
    "os": {
        "system", "popen", "fork", "forkpty", "posix_spawn", "posix_spawnp",
        "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe",
        "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe",
    },
    "pty": {"spawn", "fork"},
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
    "multiprocessing": {"Pool", "Process", "get_context"},
}  # fmt: skip

# Every process started outside the door: what it runs, and why that is not untrusted.
TRUSTED_STARTS = {
    ("native/identity.py", "sweep"): "am_run --sweep, allocmark's own static program, "
    "started as the identity it kills (the door's own sweep)",
    ("native/identity.py", "start"): "THE door",
    ("run/execute.py", "calibrate"): "am_run --calibrate, allocmark's own fixed loop, no input",
    ("allocators/builder.py", "_sysroot"): "`rustc --print sysroot`: the installed "
    "toolchain says where it is",
    ("allocators/git.py", "line"): "git merge-base on the cache's mirror: git reads a "
    "repository's objects, never runs its hooks or its configuration (a mirror has none "
    "of the user's)",
    ("allocators/git.py", "_git"): "git clone/fetch/checkout/rev-parse of the mirror, as "
    "above; a clone's checkout runs no hook",
    ("allocators/verification.py", "dpkg_version"): "dpkg-query on a library's path: "
    "Debian's database, no code of the library",
    ("allocators/debian.py", "download"): "apt-get download/source --download-only: "
    "signed archives, nothing of them runs",
    ("allocators/debian.py", "_run"): "apt-get update, apt-cache madison: signed indexes",
    ("allocators/debian.py", "_checked"): "dpkg-deb -x, dpkg-source -x: unpack only "
    "(dpkg-source runs no package script)",
    ("profile/summary.py", "_imports"): "nm -D on an allocator library: reads its ELF "
    "symbols, runs none of it",
    ("report/plots.py", "write"): "allocmark's own Python, forked to draw charts",
}


def _dotted(node: ast.expr) -> str:
    """`a.b.c` of a call's function, "" for anything but names and attributes."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    if isinstance(node, ast.Call):  # get_context("fork").Pool(2)
        return _dotted(node.func) + "()." + ".".join(reversed(parts))
    return ""


def _functions(tree: ast.AST) -> dict[ast.AST, str]:
    """Each node of a module with the function (or class body) it is in."""
    owner: dict[ast.AST, str] = {}

    def visit(node: ast.AST, name: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = (
                child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else name
            )
            owner[child] = inner
            visit(child, inner)

    visit(tree, "<module>")
    return owner


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (str(path.relative_to(PACKAGE)), ast.parse(path.read_text()))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def process_starts() -> dict[tuple[str, str], list[str]]:
    """(module, function) -> the calls there that start a process."""
    found: dict[tuple[str, str], list[str]] = {}
    for module, tree in _modules():
        owner = _functions(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in _STARTS:
                names = {a.name for a in node.names} & _STARTS[node.module]
                if names:  # `from subprocess import run` would hide the call's module
                    found.setdefault((module, owner[node]), []).append(f"import {names}")
            if not isinstance(node, ast.Call):
                continue
            name = _dotted(node.func)
            head, _, last = name.rpartition(".")
            for mod, calls in _STARTS.items():
                if last in calls and (head.split(".")[0] == mod or mod in head):
                    found.setdefault((module, owner[node]), []).append(name)
    return found


def test_every_process_start_outside_the_door_is_justified() -> None:
    found = process_starts()
    unjustified = {k: v for k, v in found.items() if k not in TRUSTED_STARTS}
    assert not unjustified, (
        f"processes started outside {CODE_DOOR}'s `start`: {unjustified}; run untrusted code "
        "through identity.start/contained, or justify a trusted tool in TRUSTED_STARTS"
    )
    stale = set(TRUSTED_STARTS) - set(found)
    assert not stale, f"TRUSTED_STARTS names places that start nothing: {stale}"


def test_the_process_start_test_fails_on_a_new_start(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The test above, on a copy of the package with one more subprocess.run (tune's
    display as it was at 7832cb9): it finds it."""
    added = (
        "\n\ndef shown(argv, env):\n    import subprocess\n"
        "    return subprocess.run(argv, env=env, check=False)\n"
    )
    monkeypatch.setattr(f"{__name__}.PACKAGE", _copy_with(tmp_path, "verbs/tune.py", added))
    assert ("verbs/tune.py", "shown") in process_starts()


def _copy_with(tmp_path: Path, module: str, added: str) -> Path:
    """A copy of the package with `added` at the end of `module`."""
    import shutil

    copy = tmp_path / "allocmark"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text() + added)
    return copy


# -- the door for written files -----------------------------------------------------------
FILES_DOOR = "files.py"
_WRITE_ATTRS = {
    "write_text", "write_bytes", "mkdir", "makedirs", "touch", "symlink_to", "hardlink_to",
    "savefig", "rmtree", "copyfile", "copy2", "copytree", "move", "unlink", "rmdir",
    "removedirs", "mkfifo", "mknod", "symlink", "extractall", "mkstemp", "mkdtemp",
    "TemporaryDirectory", "NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile",
}  # fmt: skip
_OS_WRITES = {"remove", "rename", "replace", "link", "copy", "truncate"}  # os.X / shutil.X
_WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_TRUNC", "O_APPEND"}

# Every file written outside the door, and why it may be.
TRUSTED_WRITES = {
    ("store/base.py", "_connect"): "sqlite3.connect: SQLite writes the results database "
    "itself, a file files.create made 0600 with no link followed (Base.__init__)",
    ("report/plots.py", "save"): "matplotlib's savefig, into the file object files.writing gave it",
    ("cli/__init__.py", "main"): "/dev/null opened for writing, as standard output once "
    "the reader of a pipe has gone: writes nothing",
}


def _mode(node: ast.Call, at: int) -> str:
    """The constant mode string of an open() call ("" when not constant)."""
    arg = node.args[at] if len(node.args) > at else None
    arg = next((k.value for k in node.keywords if k.arg == "mode"), arg)
    return arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else ""


def _writes(node: ast.Call) -> str:
    """What the call writes ("" if nothing)."""
    name = _dotted(node.func)
    head, _, last = name.rpartition(".")
    if head == "files":
        return ""  # the door itself
    if name == "open" and any(c in _mode(node, 1) for c in "wax+"):
        return name
    if (
        last in ("open", "fdopen")
        and head
        and any(c in _mode(node, 0 if last == "open" else 1) for c in "wax+")
    ):
        return name
    if name == "os.open" and len(node.args) > 1:
        flags = {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
        if flags & _WRITE_FLAGS:
            return name
    if last in _WRITE_ATTRS:
        return name
    if last in _OS_WRITES and head in ("os", "shutil"):
        return name
    if last in ("replace", "rename") and head and len(node.args) == 1 and not node.keywords:
        return name if head != "dataclasses" else ""  # Path.replace(target)
    if name == "sqlite3.connect":
        return name
    return ""


def file_writes() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for module, tree in _modules():
        if module == FILES_DOOR:
            continue
        owner = _functions(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and (what := _writes(node)):
                found.setdefault((module, owner[node]), []).append(what)
    return found


def test_every_file_written_outside_the_door_is_justified() -> None:
    found = file_writes()
    unjustified = {k: v for k, v in found.items() if k not in TRUSTED_WRITES}
    assert not unjustified, (
        f"files written outside {FILES_DOOR}: {unjustified}; write through files.write/"
        "writing/directory, or justify it in TRUSTED_WRITES"
    )
    stale = set(TRUSTED_WRITES) - set(found)
    assert not stale, f"TRUSTED_WRITES names places that write nothing: {stale}"


@pytest.mark.parametrize(
    "line",
    [
        "Path('x').write_text('y')",
        "open('x', 'w').close()",
        "os.open('x', os.O_WRONLY | os.O_CREAT)",
        "Path('d').mkdir(parents=True)",
        "os.replace('a', 'b')",
    ],
)
def test_the_file_test_fails_on_a_new_write(tmp_path: Path, monkeypatch, line: str) -> None:  # type: ignore[no-untyped-def]
    added = f"\n\ndef export():\n    {line}\n"
    monkeypatch.setattr(f"{__name__}.PACKAGE", _copy_with(tmp_path, "cli/show.py", added))
    assert ("cli/show.py", "export") in file_writes()
