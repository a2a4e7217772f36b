"""SQLite store: every run is written in its own transaction the moment it ends.

One database class, `Store`, made of one part per concern, each a short module:
- schema.py: the tables, their migrations, the transaction that creates or upgrades;
- base.py: opening a file (read-only where it cannot be written), campaigns, their plans;
- campaign_plan.py: a campaign's `CampaignPlan` to and from its column (versioned);
- plans.py: writing a campaign and its signed plan, reading it back for a resume;
- progress.py: writing each run as it ends, the budget spent, status and owner;
- reads.py (and cache.py): what a report reads, kept until the campaign gains a run;
- codec.py: rows to and from columns; a damaged value is a StoreError;
- exchange.py: runs exported and imported; owner.py: one process owns a campaign;
  seal.py: its planned runs are signed.
The parts build on base.py (reads.py through cache.py) and use each other's
helpers (codec, campaign_plan, owner, seal), never this package's `Store`.

May import: schemas, stats, model, request, errors, interrupts, units, files.
Never: answer, api, cli, dispatchers, report, run, verbs.
"""

from __future__ import annotations

from allocmark.store.plans import Plans
from allocmark.store.progress import Lifecycle
from allocmark.store.reads import RUN_COLUMNS, Reads
from allocmark.store.schema import SCHEMA_VERSION

__all__ = ["RUN_COLUMNS", "SCHEMA_VERSION", "Store"]


class Store(Plans, Lifecycle, Reads):
    """A results database. Opening never changes results already stored."""
