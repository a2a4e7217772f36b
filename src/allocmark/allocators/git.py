"""Allocators built from a git repository the user has: one library per commit.

`-a NAME@git:REPOSITORY#REVISIONS` names revisions (`v1,v2,HEAD`) or a range
(`A..B`: A and every commit on B's first-parent line after it); a `[git.NAME]`
catalog entry or `--build`/`--library` say how a checkout becomes a library. The
repository is copied into a mirror in the cache first (`git clone --mirror`, then
`git fetch` on each use), so that allocmark never runs git inside the user's own
repository (its hooks and configuration are the user's business) and a URL works
like a path. Each revision is built in a fresh clone of the mirror at that commit,
by `sh -c BUILD`, as `git bisect run` runs a command; as root, under the campaign's
own identity through the launcher (native/identity.py), so that a build cannot reach
the store and nothing it starts outlives it. A git failure shows git's own message.
The library is copied into the cache under the commit and a digest of the recipe:
a second use of the same commit and recipe reuses it. A build that fails is never
cached: its error carries the end of its log.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from allocmark import files, native
from allocmark.errors import UserError
from allocmark.model import AllocatorSpec, Env, Git, GitBuild
from allocmark.native import identity
from allocmark.text import printable

PREFIX = "git:"
MAX_REVISIONS = 40  # side by side in one campaign; more is a bisect's job
LOG_TAIL = 12  # lines of a failed build's log in its error
GIT_TIMEOUT_S = 600.0
GIT_MESSAGE = 2000  # characters of git's own message shown with a failure
_LABEL = re.compile(r"[^A-Za-z0-9_.+-]")
Say = Callable[[str], None]


class BuildFailed(UserError):
    """A revision that did not build: skipped, as `git bisect skip` skips it."""

    def __init__(self, spec: AllocatorSpec, why: str, tail: Sequence[str]) -> None:
        self.spec, self.why, self.tail = spec, why, tuple(tail)
        lines = "\n  ".join(self.tail) or "(the log is empty)"
        super().__init__(
            f"{spec.name} ({_commit(spec)[:12]}) did not build: {why}; "
            f"the end of its log:\n  {lines}"
        )


def _commit(spec: AllocatorSpec) -> str:
    return spec.git.commit if spec.git else ""


def is_token(token: str) -> bool:
    """`NAME@git:...`: a revision selection, not a catalog name."""
    name, at, rest = token.partition("@")
    return bool(at) and rest.startswith(PREFIX) and "=" not in name


@dataclass(frozen=True)
class Selection:
    """One `-a NAME@git:REPOSITORY#REVISIONS` value, parsed."""

    name: str
    repository: str  # as given ("" : the catalog entry's)
    revisions: tuple[str, ...]


def parse(token: str) -> Selection:
    name, _, rest = token.partition("@")
    where, hashmark, revs = rest[len(PREFIX) :].partition("#")
    revisions = tuple(r.strip() for r in revs.split(",") if r.strip())
    if not hashmark or not revisions:
        raise UserError(
            f"-a {token[:80]!r}: name the revisions after '#': "
            "NAME@git:REPOSITORY#v1,v2,HEAD or NAME@git:REPOSITORY#A..B"
        )
    return Selection(name, where.strip(), revisions)


def specs(
    sel: Selection, repository: str, build: GitBuild, env: Env = (), description: str = ""
) -> list[AllocatorSpec]:
    """One allocator per revision (a range: per commit), oldest first within a range,
    each named NAME@LABEL (the revision as named, or a range commit's describe)."""
    repo = normalized(repository)
    mirror = refreshed(repo)
    picked: list[tuple[str, str]] = []  # (label, commit)
    for rev in sel.revisions:
        if ".." in rev:
            picked += [(describe(mirror, c), c) for c in expand(mirror, rev)]
        else:
            picked.append((rev, resolve(mirror, rev)))
    first: dict[str, str] = {}  # a commit named twice (v2 and HEAD) runs once
    for label, commit in picked:
        first.setdefault(commit, label)
    unique = list(first.items())
    if len(unique) > MAX_REVISIONS:
        raise UserError(
            f"-a {sel.name}@git:…#{','.join(sel.revisions)[:60]}: "
            f"{len(unique)} commits; at most {MAX_REVISIONS} run side by side. "
            "Name fewer revisions (tags), or find the commit that changed a "
            "metric with `allocmark bisect`"
        )
    out = []
    taken: set[str] = set()
    for rank, (commit, label) in enumerate(unique):
        text = _label(label, commit, taken)
        taken.add(text)
        origin = Git(repo, commit, describe(mirror, commit), label, build, rank)
        out.append(spec_of(sel.name, text, origin, env, description))
    return out


def spec_of(
    name: str, label: str, origin: Git, env: Env = (), description: str = ""
) -> AllocatorSpec:
    what = description or f"{name} from {origin.repository}"
    return AllocatorSpec(
        name=f"{name}@{label}",
        description=f"{what} at {origin.describe} ({origin.commit[:12]})",
        paths=(str(library_path(origin)),),
        env=env,
        user=True,
        family=name,
        version_source="none",
        git=origin,
    )


def label_text(text: str) -> str:
    """`text` as the part of an allocator's name after '@' (selection.NAME_PATTERN)."""
    return _LABEL.sub("-", text)[:40]


def _label(label: str, commit: str, taken: set[str]) -> str:
    text = label_text(label) or commit[:12]
    return text if text not in taken else f"{text}-{commit[:8]}"


def normalized(repository: str) -> str:
    """An absolute path for a local repository; a URL as given."""
    if not repository:
        raise UserError(
            "no repository: NAME@git:PATH#REVISIONS (or a [git.NAME] catalog "
            "entry with `repository`)"
        )
    if repository.startswith("-"):
        raise UserError(f"repository {repository[:80]!r}: a path or URL cannot start with '-'")
    if _is_url(repository):
        return repository
    path = Path(repository).expanduser().resolve()
    if not path.exists():
        raise UserError(f"repository {repository!r}: no such directory")
    if not path.is_dir():
        raise UserError(f"repository {repository!r}: a file, not a git repository's directory")
    if not ((path / ".git").exists() or (path / "HEAD").is_file()):  # a work tree or bare
        raise UserError(
            f"repository {repository!r}: a directory, but not a git repository (no .git "
            "in it); give the repository's top directory"
        )
    return str(path)


def _is_url(text: str) -> bool:
    return "://" in text or bool(re.match(r"^[\w.-]+@[\w.-]+:", text))


def _root(repository: str) -> Path:
    key = hashlib.sha256(repository.encode()).hexdigest()[:16]
    return native.cache_root() / "git" / key


def refreshed(repository: str) -> Path:
    """The cache's mirror of `repository`, fetched once per process."""
    return _refreshed(repository, native.cache_root())


@functools.cache
def _refreshed(repository: str, cache: Path) -> Path:
    root = files.directory(_root(repository), parents=True)
    mirror = root / "mirror.git"
    with files.locked(root / "mirror.lock"):
        if (mirror / "HEAD").is_file():
            _git(
                ["fetch", "--quiet", "--prune", "--tags", "origin"],
                mirror,
                f"cannot fetch {repository}",
            )
        else:
            tmp = root / f"mirror.{os.getpid()}"
            files.remove_tree(tmp)
            _git(
                ["clone", "--quiet", "--mirror", "--", repository, str(tmp)],
                root,
                f"cannot read the repository {repository}",
            )
            files.rename(tmp, mirror)
    for d in (root, root.parent):
        d.chmod(0o755)  # the build's user clones from it
    return mirror


def resolve(mirror: Path, rev: str) -> str:
    if rev.startswith("-"):
        raise UserError(f"revision {rev[:80]!r}: a revision cannot start with '-'")
    try:
        return _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], mirror, "")
    except UserError:
        tags = _git(["tag", "--sort=-version:refname"], mirror, "").split()[:8]
        known = f" (tags: {', '.join(tags)})" if tags else ""
        raise UserError(f"revision {rev[:80]!r} is not a commit of the repository{known}") from None


def describe(mirror: Path, commit: str) -> str:
    return _git(["describe", "--tags", "--always", "--abbrev=12", commit], mirror, "")


def expand(mirror: Path, text: str) -> list[str]:
    """`A..B`: A, then each commit of B's first-parent line after A, oldest first."""
    first, _, last = text.partition("..")
    if not first or not last or last.startswith("."):
        raise UserError(f"range {text!r}: expected OLDER..NEWER (two revisions)")
    return line(mirror, resolve(mirror, first), resolve(mirror, last))


def line(mirror: Path, good: str, bad: str) -> list[str]:
    """`good` and the commits after it up to `bad` along `bad`'s first parents."""
    if good == bad:
        return [good]
    ancestor = subprocess.run(
        ["git", "merge-base", "--is-ancestor", good, bad],
        cwd=mirror,
        capture_output=True,
        env=_env(),
        timeout=GIT_TIMEOUT_S,
    )
    if ancestor.returncode != 0:
        raise UserError(
            f"{good[:12]} is not an ancestor of {bad[:12]}: a range runs from an "
            "older revision to a newer one on its line"
        )
    after = _git(["rev-list", "--reverse", "--first-parent", f"{good}..{bad}"], mirror, "")
    chain = [good, *after.split()]
    if bad not in chain:
        raise UserError(
            f"{good[:12]} is not on {bad[:12]}'s first-parent line (it is on a "
            "merged branch): name a commit of that line"
        )
    return chain


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "LD_PRELOAD"))}
    return env | {"GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}


def _git(args: list[str], cwd: Path, what: str) -> str:
    if shutil.which("git") is None:
        raise UserError("git is not installed: `make setup` installs it (apt-get install git)")
    try:
        proc = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            env=_env(),
            timeout=GIT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise UserError(
            f"{what or 'git'}: git {args[0]} took more than {GIT_TIMEOUT_S:.0f} s"
        ) from None
    if proc.returncode != 0:
        # git's own words, whole (bounded): "dubious ownership" says its fix on later lines
        lines = [printable(line).rstrip() for line in proc.stderr.strip().splitlines()]
        said = "\n  ".join(line for line in lines if line)[:GIT_MESSAGE] or "git failed"
        raise UserError(f"{what or 'git ' + args[0]}: {said}")
    return proc.stdout.strip()


def recipe_key(origin: Git) -> str:
    """The commit and the recipe: what decides the library."""
    b = origin.build
    text = json.dumps([origin.commit, b.build, b.output, sorted(b.env)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_dir(origin: Git) -> Path:
    return _root(origin.repository) / f"{origin.commit[:12]}-{recipe_key(origin)}"


def library_path(origin: Git) -> Path:
    name = Path(origin.build.output).name or "lib.so"
    return build_dir(origin) / name


def is_built(spec: AllocatorSpec) -> bool:
    return spec.git is not None and (build_dir(spec.git) / "provenance.json").is_file()


@dataclass(frozen=True)
class Built:
    library: Path
    seconds: float  # the build's (0: the cache had it)
    cached: bool


def build(spec: AllocatorSpec, say: Say = lambda _: None) -> Built:
    """The library of `spec`'s commit, from the cache or built now (BuildFailed), the
    build run as untrusted code (native/identity.py)."""
    origin = spec.git
    if origin is None:
        raise ValueError(f"{spec.name} is not built from a repository")
    out = build_dir(origin)
    if is_built(spec):
        return Built(library_path(origin), 0.0, True)
    files.directory(out.parent, parents=True)
    with files.locked(out.parent / f"{out.name}.lock"):
        if is_built(spec):
            return Built(library_path(origin), 0.0, True)
        say(f"building {spec.name} ({origin.commit[:12]}): {origin.build.build}")
        started = time.monotonic()
        with identity.home("allocmark-git-", handed=False) as home:
            lib = _build_in(spec, origin, home)
            seconds = time.monotonic() - started
            _install(spec, origin, lib, home.parent / "build.log", seconds)
    return Built(library_path(origin), seconds, False)


def _build_in(spec: AllocatorSpec, origin: Git, home: Path) -> Path:
    """The revision checked out in the build's own directory (`home`, the identity's,
    its HOME and TMPDIR too) and built there; the log stays root's, beside it (the
    build writes it through the descriptor it inherits): it cannot swap it for a link
    to what only root may read."""
    src = home / "src"
    mirror = refreshed(origin.repository)
    _git(
        ["clone", "--quiet", "--shared", "--no-checkout", "--", str(mirror), str(src)],
        home,
        f"cannot check out {spec.name}",
    )
    _git(["checkout", "--quiet", "--detach", origin.commit], src, f"cannot check out {spec.name}")
    identity.give(home)
    log = home.parent / "build.log"
    code = _run_build(origin.build, src, home, log)
    tail = _tail(log)
    if code is None:
        raise BuildFailed(spec, f"it took more than {origin.build.timeout_s:.0f} s", tail)
    if code != 0:
        raise BuildFailed(spec, f"`{origin.build.build}` exited with status {code}", tail)
    return _output(spec, src, origin.build.output, tail)


def _run_build(b: GitBuild, src: Path, home: Path, log: Path) -> int | None:
    """The build command, as untrusted code runs (native/identity.py): as the campaign's
    identity, through the door, every process it started (a daemon it left behind too)
    ended when it ends, with a HOME and a TMPDIR of its own. The identity has already
    been handed the checkout."""
    env = identity.environment(b.env)
    env = {"HOME": str(home), "TMPDIR": str(home), "GIT_TERMINAL_PROMPT": "0"} | env
    with files.writing(log, 0o600, "the build's log", binary=True) as f:
        done = identity.contained(
            ["sh", "-c", b.build], env, b.timeout_s, cwd=src, stdout=f.fileno()
        )
    if done.code is None:
        return None
    return done.code if done.code >= 0 else 128 - done.code


def _output(spec: AllocatorSpec, src: Path, output: str, tail: Sequence[str]) -> Path:
    """The library the build left, refused outside the checkout: the build is the
    repository's code, and root copies what it names into the cache."""
    root = os.path.realpath(src)
    real = os.path.realpath(src / output)
    if os.path.commonpath([root, real]) != root:
        raise BuildFailed(spec, f"--library {output!r} leads outside the checkout", tail)
    if not os.path.isfile(real):
        raise BuildFailed(spec, f"it left no file {output!r} (the --library)", tail)
    return Path(real)


def _tail(log: Path) -> list[str]:
    try:
        text = log.read_bytes()[-8192:].decode("utf-8", "replace")
    except OSError:
        return []
    return [
        "".join(c if c.isprintable() else "?" for c in line)
        for line in text.splitlines()[-LOG_TAIL:]
    ]


def _install(spec: AllocatorSpec, origin: Git, lib: Path, log: Path, seconds: float) -> None:
    """The library (a file the build's identity made, opened with no link followed:
    something the build left running could swap a directory on the path after the
    check) copied into the cache with its log and provenance, in one step."""
    out = build_dir(origin)
    tmp = out.with_name(f"{out.name}.{os.getpid()}")
    files.remove_tree(tmp)
    files.directory(tmp)
    target = tmp / library_path(origin).name
    try:
        files.copy(lib, target, owner=identity.owner())
    except UserError:
        files.remove_tree(tmp)
        raise BuildFailed(
            spec, f"{origin.build.output!r} is not a file the build made", []
        ) from None
    files.copy(log, tmp / "build.log")
    facts = {
        "repository": origin.repository,
        "commit": origin.commit,
        "describe": origin.describe,
        "build": origin.build.build,
        "output": origin.build.output,
        "env": dict(origin.build.env),
        "seconds": round(seconds, 3),
        "built_at": time.time(),
        "sha256": native.sha256_file(str(target)),
    }
    files.write(tmp / "provenance.json", json.dumps(facts, indent=1))
    files.rename(tmp, out)
