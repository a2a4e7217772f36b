"""Allocators: the catalog (catalog.py), what a command line selects (selection.py)
and what really serves malloc under each (verification.py)."""

from allocmark.allocators.catalog import builtin_catalog, load_catalog
from allocmark.allocators.selection import baseline_name, parse_selection, select, to_build
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
    "to_build",
    "verify",
    "verify_all",
]  # fmt: skip
