"""Which allocator an entry is a build of, and which version: for the plot across
versions (a family with two or more versions in one campaign). A recipe whose
versions are its crate's (scudo-sys) has no place in that order.

Versions are ordered by their numbers ("4.5.0" < "5.1.0" < "5.3.0"; TCMalloc's
snapshot dates "2025.05.30" the same way); one with no number (a commit) sorts
last. A Debian build states its version as its library does ("5.3.0-0-g54eaed…")
or as its package does ("2021.8.0-2+deb12u1"): the leading number is the version.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from allocmark.model import AllocatorSpec

_NUMBER = re.compile(r"\d+(?:\.\d+)+")


@dataclass(frozen=True)
class Lineage:
    family: str  # "jemalloc"
    version: str  # "5.3.0"
    origin: str  # "crate", or the Debian package ("libjemalloc2"), or "" (a user's .so)

    @property
    def key(self) -> tuple[tuple[int, ...], str]:
        return order_key(self.version), self.origin


def of(spec: AllocatorSpec, stated: str | None) -> Lineage | None:
    """`spec`'s family and version (None: a variant, a flavor, or no version known):
    only plain builds are set side by side across versions."""
    if ":" in spec.name:
        return None
    if spec.recipe is not None:
        if spec.recipe.flavor or not spec.recipe.versioned:
            return None
        return Lineage(spec.family_name, spec.recipe.upstream_version, "crate")
    found = _NUMBER.search(stated or "")
    if found is None or spec.system:
        return None
    return Lineage(spec.family_name, found.group(0), spec.package or "")


def order_key(version: str) -> tuple[int, ...]:
    found = _NUMBER.fullmatch(version) or _NUMBER.match(version)
    return tuple(int(x) for x in found.group(0).split(".")) if found else (1 << 62,)


def families(lineages: dict[str, Lineage]) -> dict[str, list[tuple[str, Lineage]]]:
    """family -> its entries in version order, for families with two or more versions."""
    out: dict[str, list[tuple[str, Lineage]]] = {}
    for name, lin in lineages.items():
        out.setdefault(lin.family, []).append((name, lin))
    return {f: sorted(e, key=lambda x: x[1].key)
            for f, e in out.items() if len({lin.version for _, lin in e}) >= 2}  # fmt: skip
