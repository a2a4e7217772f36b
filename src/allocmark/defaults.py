"""Defaults the command line shows in its help: here, so that `allocmark --help`
needs none of the modules that use them."""

from __future__ import annotations

from pathlib import Path

DEFAULT_DB = Path("results/allocmark.db")
DEFAULT_MAX_BLOCKS = 1000  # the budget is the limit: "same" at ±3 % may take hundreds of blocks
DEFAULT_MIN_BLOCKS = 4  # stats.fewblock.MIN_BLOCKS: no verdict is possible in fewer blocks
CONFIRM_RUNS = 20_000  # runs above which a campaign starts only with --yes

# Run as root, allocmark runs the measured programs as a transient uid of the campaign's
# own (native/identity.py), or as the user this variable (`allocmark --run-as USER`) names.
RUN_AS_ENV = "ALLOCMARK_RUN_AS"
# The uids (and gids of the same numbers) of the campaigns' own identities: far above
# any range a distribution or container hands out. Whatever one of them owns or may
# write is untrusted (files.py, run/runas.py).
TRANSIENT_BASE = 0x5A000000
TRANSIENT_COUNT = 1 << 20
