"""What a campaign is asked (Request: from the command line to the plan) and how it
is planned and stored (CampaignPlan with its Precision and Creator), with the notes
the way there yields: plain, frozen, comparable, as in model.py, whose types they
use (what the allocators are prepared into, `Prepared`, is model.py's)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from allocmark.defaults import DEFAULT_DB
from allocmark.model import GitBuild


@dataclass(frozen=True)
class Request:
    """One campaign: what to run, on which allocators, how precisely, and where.
    Every field has one name and one type from the command line to the store."""

    workloads: tuple[str, ...] = ()  # workload names; none (and no command): the suite's
    command: tuple[str, ...] = ()  # or the user's own program and its arguments
    env: tuple[str, ...] = ()  # NAME=VALUE the command runs with (`try --env`)
    suite: str | None = None  # built-in suite name or suite .toml file (default: quick)
    allocators: tuple[str, ...] = ()  # NAME[,NAME...] or NAME=/path/lib.so[:ENV=VAL,...]
    params: tuple[str, ...] = ()  # NAME=V[,V...] parameter overrides
    min_blocks: int | None = None  # blocks per cell to start with (default: the suite's, or 3)
    max_blocks: int | None = None  # at most this many blocks per cell (default DEFAULT_MAX_BLOCKS)
    margin: float | None = None  # add blocks until every ratio is decided, same within ±this
    budget_s: float | None = None  # stop adding blocks after this long (0: no limit)
    timeout_s: float | None = None  # per run
    seed: int | None = None  # shuffle seed of the run order
    catalogs: tuple[Path, ...] = ()  # extra allocator catalog files
    sample: int = 0  # profile: time 1 allocator call in `sample`; 0: not profiled
    record: Path | None = None  # record: the one run recorded, its trace written here
    db: Path = DEFAULT_DB
    dispatcher: str = "local"  # --dispatcher: where the runs happen, "local" or "dask"
    scheduler: str | None = None  # the Dask scheduler's address, for dispatcher "dask"
    yes: bool = False  # start a campaign of more than CONFIRM_RUNS runs
    memory_limit: int = 0  # bytes a run's processes may use together (0: no limit)
    ignore_failure: bool = False  # `try -i`: run on though the command fails under the baseline
    why: str = "off"  # the why pass (run/whypass.py): "auto", "on" or "off"
    warmup: int = 0  # runs of each allocator and cell before the blocks, not measured
    prepare: str = ""  # a shell command run before each run of `command`, not timed
    show_output: bool = False  # show each run's output (try --show-output)
    dry_run: bool = False  # check and say the campaign, run and store nothing (--dry-run)
    build: GitBuild | None = None  # how `-a NAME@git:...` revisions become libraries


@dataclass(frozen=True)
class Note:
    """Something the user should read: a skipped cell, an unusable allocator, a build."""

    level: str  # "info" or "warning"
    text: str


@dataclass(frozen=True)
class Precision:
    """Add blocks to a cell until every ratio to the baseline that decides it (time,
    or throughput for duration-bound workloads, and peak RSS) is decided (faster,
    slower, or the same within ±margin, by anytime-valid intervals judged as one
    family), the cell has max_blocks blocks, or the campaign has spent budget_s seconds
    (0: no budget)."""

    max_blocks: int
    margin: float
    budget_s: float = 0.0
    race: str = ""  # `tune`: drop candidates dominated on this objective (race.OBJECTIVES)
    # What the blocks are for: "baseline", every ratio to the baseline decided; "releases",
    # every version against the one before it (answer/releases.py), blocks going only to
    # the versions of a change still open.
    question: str = "baseline"
    # budget_s is allocmark's default, not the user's: it is stretched to reach the first
    # verdict the forecast says is possible (forecast.Forecast.first_verdict_s).
    stretch: bool = False


@dataclass(frozen=True)
class Creator:
    """Who planned a campaign: a resume by anyone else shows what it will run first."""

    host: str
    uid: int


PLAN_VERSION = 2  # of CampaignPlan as stored; store/campaign_plan.py migrates older ones


@dataclass(frozen=True)
class CampaignPlan:
    """How a campaign runs, made once from its request when it starts and stored with it
    (store/campaign_plan.py): every stage reads this, never its JSON.
    Changed only by the loop's two events, each stored at once: a default budget
    stretched (`budget_given_s` keeps the one it had) and the why pass planned (`why_pass`
    says what it did)."""

    seed: int
    min_blocks: int  # the blocks planned at the start
    plan_id: str = ""  # what each planned run's signature names (store/seal.py)
    sample: int = 0  # under the profiler, timing 1 allocator call in `sample`; 0: not
    memory_limit: int = 0  # bytes a run's processes may use together; 0: no limit
    created_by: Creator | None = None
    fixed_time: tuple[tuple[str, str], ...] = ()  # (workload, the parameter fixing its time)
    calls: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (native workload, what it calls)
    precision: Precision | None = None  # None: the blocks are fixed (a profile)
    expected_s: float = 0.0  # how long its suite took where it was sized; 0: not said
    stop_on_failure: bool = False  # `try`: the command failing under the baseline stops it
    why: str = "off"  # the why pass (run/whypass.py): "auto", "on", "off"
    why_pass: str | None = None  # what the why pass did, once planned
    left_out: tuple[tuple[str, str], ...] = ()  # tune: (candidate, why), before the race
    budget_given_s: float | None = None  # the budget before it was stretched
    version: int = PLAN_VERSION

    @property
    def sequential(self) -> bool:
        """Are blocks added until the ratios decide (a margin to reach, more blocks
        allowed than it starts with)? `-n 5 --max-blocks 5` never looks."""
        return self.precision is not None and self.precision.max_blocks > self.min_blocks

    @property
    def budget_s(self) -> float:
        return self.precision.budget_s if self.precision else 0.0
