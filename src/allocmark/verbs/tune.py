"""`allocmark tune`: an allocator's settings searched for one program.

Candidates are each allocator at its defaults, each setting of the settings
catalog at each of its values in turn (one at a time: a full grid of five
settings is hundreds of runs a block), and the allocator with transparent huge
pages off. They run as one campaign, in paired blocks like any other; between
rounds a candidate significantly dominated on the objective stops getting blocks
(a race: successive halving), so the budget goes to those still in it.

Before the race, a candidate whose allocator shows the same settings with it as
without (the family's `shown_by`) is left out: a setting another version knows
by that name, or the allocator's default, would only be noise in the race, and a
line to paste that changes nothing.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from allocmark import schemas, tomlfile
from allocmark.allocators import catalog, debian
from allocmark.answer.race import OBJECTIVES, default_of
from allocmark.errors import UserError
from allocmark.model import AllocatorSpec, Prepared, Verified, preload_list
from allocmark.native import identity
from allocmark.request import Note
from allocmark.schemas.settings import Check, Family, SettingsFile, ShownBy, Style

_ENV = {
    Style.TUNABLES: "GLIBC_TUNABLES",
    Style.MALLOC_CONF: "MALLOC_CONF",
    Style.OPTIONS: "SCUDO_OPTIONS",
}
SHOWN_TIMEOUT_S = 30.0  # for `shown_by`'s command to show the settings
_JOIN = {Style.TUNABLES: (":", "="), Style.MALLOC_CONF: (",", ":"), Style.OPTIONS: (":", "=")}


def settings_file() -> Path:
    return Path(str(resources.files("allocmark") / "catalog" / "settings.toml"))


def load_settings(path: Path | None = None) -> dict[str, Family]:
    """Catalog entry name -> its settings family."""
    path = path or settings_file()
    doc = schemas.validate(SettingsFile, tomlfile.load(path), str(path))
    return {entry: f for name, f in doc.root.items() for entry in f.applies or [name]}


def families(extra: Path | None = None) -> dict[str, Family]:
    """The built-in settings, with a user's file (`tune --settings`) over them: an
    entry the file names races the file's values instead of the built-in ones."""
    return load_settings() | (load_settings(extra) if extra else {})


def family_of(name: str, families: Mapping[str, Family]) -> Family | None:
    """The settings of an entry: "jemalloc:nodecay" takes "jemalloc"'s;
    "mimalloc@2.1.7+secure" takes "mimalloc@*"'s if there are any, else "mimalloc"'s."""
    base = name.split(":")[0]
    recipe = base.split("@")[0]
    return families.get(base) or families.get(f"{recipe}@*") or families.get(recipe)


def candidates(spec: AllocatorSpec, families: dict[str, Family]) -> list[AllocatorSpec]:
    """`spec` at its defaults, then one candidate per setting value, then :nothp."""
    family = family_of(spec.name, families)
    out = [spec]
    if family is not None:
        out += [
            _with(spec, family, key, value)
            for key, values in family.values.items()
            for value in values
        ]
    return [*out, catalog.nothp(spec)]


def _with(spec: AllocatorSpec, family: Family, key: str, value: int | str) -> AllocatorSpec:
    env = _set(dict(spec.env), family.style, key, value, family.variable)
    return dataclasses.replace(
        spec,
        name=f"{spec.name}{{{key}={value}}}",
        env=tuple(sorted(env.items())),
        aliases=(),
        baseline=False,
        description=f"{spec.description}; {key}={value}",
    )


def _set(
    env: dict[str, str], style: Style, key: str, value: int | str, variable: str | None = None
) -> dict[str, str]:
    """`env` with the setting added in the allocator's own syntax."""
    if style is Style.ENV:
        return env | {key: str(value)}
    var, (sep, eq) = variable or _ENV[style], _JOIN[style]
    full = f"glibc.malloc.{key}" if style is Style.TUNABLES else key
    return env | {var: sep.join(x for x in (env.get(var, ""), f"{full}{eq}{value}") if x)}


def specs_for(specs: Sequence[AllocatorSpec], families: dict[str, Family]) -> list[AllocatorSpec]:
    """Every candidate of every allocator named, the baseline's defaults kept first."""
    out = [c for s in specs for c in candidates(s, families)]
    if len({c.name for c in out}) != len(out):
        raise UserError("name each allocator to tune once (-a), without its variants")
    return out


# -- does the allocator take the setting? ---------------------------------------------
@dataclass(frozen=True)
class Checked:
    """What the settings check found before the race."""

    left_out: dict[str, str]  # candidate -> why: the allocator does not take its setting
    unchecked: dict[str, str]  # allocator -> why its settings race unchecked


def check(usable: Sequence[Verified], families: Mapping[str, Family]) -> Checked:
    """Each candidate's setting against what its allocator shows it runs with (the
    family's `shown_by`); defaults and :nothp are not checked."""
    by_name = {v.spec.name: v for v in usable}
    shown: dict[str, Shown | None] = {}
    left_out, unchecked = {}, {}
    for v in usable:
        base = default_of(v.spec.name)
        family = family_of(base, families)
        if "{" not in v.spec.name or base not in by_name or not family:
            continue
        if not family.shown_by:
            unchecked[base] = "the settings catalog has no way to see whether it takes them"
            continue
        for name in (base, v.spec.name):
            if name not in shown:
                shown[name] = settings_shown(by_name[name], family)
        if blind := _blind(shown[base], family.shown_by):
            unchecked[base] = blind
        elif why := _not_taken(v.spec.name, by_name[base], family.shown_by.check, shown):
            left_out[v.spec.name] = why
    return Checked(left_out, unchecked)


def _blind(at_defaults: Shown | None, show: ShownBy) -> str:
    """Why the allocator's account at its defaults cannot judge a setting, or ""."""
    command = " ".join(show.command)
    if at_defaults is None:
        return f"{command} did not run under it"
    if at_defaults.status != 0:
        return f"{command} failed under it (exit status {at_defaults.status})"
    if not at_defaults.lines:
        # e.g. a build that reads its options under another name (a prefixed jemalloc)
        return f"it showed no settings (no line matching {show.lines!r})"
    return ""


def _not_taken(
    candidate: str, base: Verified, check: Check, shown: Mapping[str, Shown | None]
) -> str:
    """Why the candidate's setting is not taken, or "" (taken, or it cannot be told)."""
    before, after = shown[base.spec.name], shown[candidate]
    setting = candidate[candidate.index("{") + 1 : -1]
    key = setting.split("=")[0]
    who = f"{base.spec.name} ({base.version or 'version unknown'})"
    if before is None:  # the allocator cannot be judged at all: _blind says why
        return ""
    if after is None:
        return f"{who}'s check did not run to its end with {setting}"
    if after.status != 0:
        return f"{who} fails with {setting} (exit status {after.status})"
    if check is Check.NAME:
        named = [x for x in after.lines if re.search(rf"\b{re.escape(key)}\b", x)]
        if not named:
            return f"{who} does not know {key}"
        if (outside := _outside(named[0], setting.split("=", 1)[1])) is not None:
            return f"{who} ignores {setting}: {key} takes {outside}"
        return ""
    if check is Check.VALUE and before.lines == after.lines:
        return (
            f"{who} shows the same settings with {setting} as without: it does not "
            "know that name, or that value is its default"
        )
    return ""


_RANGE = re.compile(r"\(min: (\S+), max: (\S+)\)")


def _outside(line: str, value: str) -> str | None:
    """The range a line shows as "(min: A, max: B)" (glibc's way) when the numeric
    `value` lies outside it, else None. glibc ignores such a value and shows it as
    unset."""
    m = _RANGE.search(line)
    if m is None:
        return None
    try:
        low, high, v = int(m.group(1), 0), int(m.group(2), 0), int(value, 0)
    except ValueError:
        return None
    return None if low <= v <= high else f"{m.group(1)}–{m.group(2)}"


@dataclass(frozen=True)
class Shown:
    """What `shown_by`'s command said: its exit status (negative: a signal) and the
    lines that show the allocator's settings."""

    status: int
    lines: tuple[str, ...]


def settings_shown(v: Verified, family: Family) -> Shown | None:
    """How the allocator, running `shown_by.command` as `v` runs programs, shows its
    settings (None: the command could not be started or did not end)."""
    show = family.shown_by
    if show is None:
        return None
    env = identity.environment(v.child_env())
    for key, value in show.set.items():
        env = _set(env, family.style, key, value, family.variable)
    # Under another glibc (glibc@2.41) its own loader lists its tunables; any other
    # command runs under that glibc as the runs do (the launcher, AM_RUN_GLIBC).
    other = env.get("AM_RUN_GLIBC")
    loader = os.path.join(other, debian.LOADER) if other else _loader()
    argv = [loader if a == "{ld.so}" else a for a in show.command]
    if argv[0] == loader:
        env.pop("AM_RUN_GLIBC", None)
    # The allocator's constructors run here: untrusted code, through the one door.
    try:
        done = identity.contained(argv, env, SHOWN_TIMEOUT_S)
    except OSError:
        return None
    if done.code is None or done.exec_errno:
        return None  # it could not be started, or did not end
    out = (done.stdout + done.stderr).decode(errors="replace")
    pattern = re.compile(show.lines)
    return Shown(done.code, tuple(line for line in out.splitlines() if pattern.search(line)))


@functools.cache
def _loader() -> str:
    """The system's dynamic loader: the one this (dynamically linked) Python runs on."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split(maxsplit=5)[-1] if line.count(" ") >= 5 else ""
        if re.fullmatch(r".*/ld-linux[^/]*\.so\.\d+", path):
            return path
    return "/lib64/ld-linux-x86-64.so.2"


def paste_line(spec: AllocatorSpec, library: str, argv: Sequence[str]) -> str:
    """The command line that runs `argv` the way candidate `spec` ran."""
    env = dict(spec.env)
    thp = env.pop("AM_RUN_THP", None)  # the launcher's: not an environment variable to paste
    glibc = env.pop("AM_RUN_GLIBC", None)  # likewise: it becomes that glibc's loader
    preload = library and not (spec.system or spec.other_libc)
    words = [f"LD_PRELOAD={shlex.quote(preload_list(spec, library) or '')}"] if preload else []
    words += [f"{k}={shlex.quote(val)}" for k, val in sorted(env.items())]
    if glibc:
        argv = debian.under(list(argv), {"AM_RUN_GLIBC": glibc})
    line = " ".join([*words, shlex.join(argv)])
    return f"{line}  # with THP off (prctl PR_SET_THP_DISABLE)" if thp else line


@dataclass(frozen=True)
class Race:
    """`tune`'s selection (run/start.py): each allocator named, or every catalog entry
    the settings catalog has settings for, with each setting it races as a candidate
    of its own; of those, the candidates whose setting the allocator takes (`check`)."""

    race: str  # the objective (answer/race.py: OBJECTIVES)
    families: dict[str, Family]

    def candidates(
        self, specs: list[AllocatorSpec], explicit: bool, named: bool
    ) -> tuple[list[AllocatorSpec], bool]:
        if not named:
            specs = [s for s in catalog.load_catalog() if s.name in self.families]
        return specs_for(specs, self.families), True

    def taken(self, prepared: Prepared, notes: list[Note]) -> Prepared:
        checked = check(prepared.usable, self.families)
        notes += [
            Note("info", f"left out: {name}: {why}") for name, why in checked.left_out.items()
        ]
        notes += [
            Note("info", f"{name}'s settings are raced unchecked: {why}")
            for name, why in checked.unchecked.items()
        ]
        usable = tuple(v for v in prepared.usable if v.spec.name not in checked.left_out)
        return dataclasses.replace(
            prepared, usable=usable, left_out=tuple(checked.left_out.items())
        )


def race_of(objective: str, settings: Path | None) -> Race:
    """The race `allocmark tune --objective OBJECTIVE [--settings FILE]` asks for."""
    if objective not in OBJECTIVES:
        raise UserError(f"--objective {objective!r}: choose {', '.join(OBJECTIVES)}")
    return Race(objective, families(settings))
