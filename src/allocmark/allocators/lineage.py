"""Which allocator an entry is a build of, and which version: for the plot across
versions (a family with two or more versions in one campaign). A recipe whose
versions are its crate's (scudo-sys) has no place in that order. Debian's builds,
the system's and other releases', are one line; a build that runs under another
glibc than the others (it needs a newer one) is drawn apart.

Revisions of a user's repository (git) are ordered as they were named, a range
oldest first. Versions are ordered by their numbers ("4.5.0" < "5.1.0" < "5.3.0"; TCMalloc's
snapshot dates "2025.05.30" the same way); one with no number (a commit) sorts
last. A Debian build states its version as its library does ("5.3.0-0-g54eaed…")
or as its package does ("2021.8.0-2+deb12u1"): the leading number is the version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from allocmark.model import AllocatorSpec

_NUMBER = re.compile(r"\d+(?:\.\d+)+")
GIT = "git"


@dataclass(frozen=True)
class Lineage:
    family: str  # "jemalloc"
    version: str  # "5.3.0"
    origin: str  # "crate"; the Debian package ("libjemalloc2"), of another release
    # ("bullseye libjemalloc2", ", under glibc 2.43" when it runs under another); "" (a user's
    # .so); "git" (a revision of the user's repository)
    rank: int = -1  # a revision's place in the order named (git): history, not numbers

    @property
    def other_glibc(self) -> bool:
        return ", under glibc " in self.origin

    @property
    def series(self) -> str:
        """The line the version belongs to: crate builds, Debian's, git revisions."""
        if self.origin in ("crate", GIT):
            return self.origin
        return "Debian, under a newer glibc" if self.other_glibc else "Debian"

    @property
    def key(self) -> tuple[tuple[int, ...], str]:
        return ((self.rank,) if self.rank >= 0 else order_key(self.version)), self.origin


def of(spec: AllocatorSpec, stated: str | None) -> Lineage | None:
    """`spec`'s family and version (None: a variant, a flavor, or no version known):
    only plain builds are set side by side across versions."""
    if ":" in spec.name:
        return None
    if spec.git is not None:  # its revision's label, in the order the revisions were named
        return Lineage(spec.family_name, spec.name.partition("@")[2], GIT, spec.git.rank)
    recipe = spec.recipe
    if recipe is not None and recipe.debian is not None:
        deb = recipe.debian
        origin = f"{deb.release} {deb.package or deb.source}"
        under = f", under glibc {deb.glibc}" if deb.glibc else ""
        return Lineage(spec.family_name, recipe.upstream_version, origin + under)
    if recipe is not None:
        if recipe.flavor or not recipe.versioned:
            return None
        return Lineage(spec.family_name, recipe.upstream_version, "crate")
    found = _NUMBER.search(stated or "")
    if found is None:
        return None
    # The system's own (glibc, Debian's packages): the release this system runs.
    return Lineage(spec.family_name, found.group(0), spec.package or "")


def order_key(version: str) -> tuple[int, ...]:
    found = _NUMBER.fullmatch(version) or _NUMBER.match(version)
    return tuple(int(x) for x in found.group(0).split(".")) if found else (1 << 62,)


def families(lineages: dict[str, Lineage]) -> dict[str, list[tuple[str, Lineage]]]:
    """family -> its entries in version order, for families with two or more versions."""
    out: dict[str, list[tuple[str, Lineage]]] = {}
    for name, lin in lineages.items():
        out.setdefault(lin.family, []).append((name, lin))
    return {
        f: sorted(e, key=lambda x: x[1].key)
        for f, e in out.items()
        if len({lin.version for _, lin in e}) >= 2
    }
