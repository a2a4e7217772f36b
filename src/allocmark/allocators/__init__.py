"""The allocators stage: the catalog, the names chosen, what serves malloc.

catalog.py reads the catalogs (built-in and the user's TOML) into `AllocatorSpec`s;
selection.py resolves a command line's names (`FAMILY@*`, `NAME=/lib.so`, revisions
of a repository); verification.py runs the probe under each and gives `Verified`;
builder.py builds entries from their crates.io sys crates; debian.py fetches (and
builds) them from Debian's other releases, and glibc itself; git.py builds revisions
of the user's repository (one library per commit, cached); prepare.py makes a
campaign's allocators ready in one call (built, verified, checked against the
programs it runs); lineage.py orders a family's versions.

May import: model, schemas, native, tomlfile, errors, text, files.
Never: answer, api, cli, dispatchers, profile, report, run, store, verbs, workloads.
"""

from allocmark.allocators.catalog import builtin_catalog, load_catalog
from allocmark.allocators.selection import (
    baseline_name,
    parse_selection,
    select,
    selected,
    to_build,
)
from allocmark.allocators.verification import (
    C_API,
    CORE,
    PROBE_TIMEOUT_S,
    dpkg_version,
    verify,
    verify_all,
)
from allocmark.model import Verified

__all__ = [
    "CORE",
    "C_API",
    "PROBE_TIMEOUT_S",
    "Verified",
    "baseline_name",
    "builtin_catalog",
    "dpkg_version",
    "load_catalog",
    "parse_selection",
    "select",
    "selected",
    "to_build",
    "verify",
    "verify_all",
]
