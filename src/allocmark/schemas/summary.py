"""The summary export (`report --format json`) as a typed model: the JSON Schema that
`allocmark schema summary` prints for the people and programs that read a report
(a dashboard, a CI gate), and the check a test runs on every export it writes, so
that the document and its schema never part.

The document is the report value (answer.report.Report) as plain JSON: the
comparison's rows (one per row x metric x allocator, as the CSV has them), then what
the comparison answers (answer.findings: the recommendation, the whys, what to try,
the release-to-release changes) and the memory beyond it (phases, what the RSS is
made of). Every record is closed (no field the schema does not name), but the
campaign's own block (its machine, plan and provenance, as stored).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Verdict = Literal["better", "worse", "same", "inconclusive"]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Interval(_Closed):
    value: float
    low: float
    high: float


class Tally(_Closed):
    """An allocator on one axis across workloads: the rows' verdicts counted."""

    better: int
    worse: int
    same: int
    undecided: int
    low: float | None = Field(description="the smallest decided ratio")
    high: float | None = Field(description="the largest decided ratio")


class Position(_Closed):
    """An allocator against the baseline on one axis, lower is better."""

    value: float
    low: float
    high: float
    verdict: Verdict
    blocks_to_decide: int | None = Field(description="about how many blocks in all would decide")
    inverted: bool = Field(description="a speed-up or throughput ratio turned over")
    tally: Tally | None = Field(description="over all workloads: the rows' verdicts")


class Choice(_Closed):
    allocator: str
    time: Position | None
    rss: Position | None


class Answer(_Closed):
    """Which allocator to use on one row, or over all of them (scope "all workloads")."""

    scope: str
    baseline: str
    front: list[Choice] = Field(description="not dominated on (time, peak RSS)")
    fastest: Choice | None
    smallest: Choice | None
    undecided: list[Choice]
    others: list[Choice]
    excluded: list[tuple[str, str]] = Field(description="(allocator, why not recommended)")
    margin: float
    tied_time: list[Choice]
    tied_rss: list[Choice]
    blocks: int
    block_s: float = Field(description="seconds one more block of its rows takes")
    max_blocks: int = Field(description="the blocks its campaign may run a row (0: no cap)")
    lead: str = Field(description="the answer in one sentence")


class Factor(_Closed):
    signal: str
    words: str
    unit: str = Field(description='"s", "KiB", or "" (a count)')
    delta: float
    ratio: float
    low: float
    high: float
    share: float | None = Field(description="of the difference it accounts for")
    degree: str


class Why(_Closed):
    workload: str
    params: dict[str, Any]
    allocator: str
    axis: Literal["time", "rss"]
    delta: float = Field(description="the allocator's minus the baseline's, s or KiB")
    text: str
    explained: bool
    checked: list[str] = Field(description="the signals tested")
    factors: list[Factor]


class Try(_Closed):
    workload: str
    params: dict[str, Any]
    allocator: str = Field(description="whose cost the variant addresses")
    axis: Literal["time", "rss"]
    try_: str = Field(alias="try", description="the variant to try")
    says: str
    measured: dict[str, Any] | None = Field(description="its position here, when measured")
    command: str


class Revision(_Closed):
    repository: str
    commit: str
    describe: str
    revision: str


class Change(_Closed):
    """One version against the one before it on one row and metric."""

    family: str
    series: str
    older: str
    newer: str
    row: str
    metric: str
    verdict: Verdict | None
    ratio: dict[str, float] | None


class Phase(_Closed):
    rss_mib: float
    live_mib: float


class Steady(_Closed):
    workload: str
    params: dict[str, Any]
    allocator: str
    runs: int
    phases: list[Phase]
    first: int
    slope: float | None
    low: float | None
    high: float | None
    verdict: str
    label: str
    text: str


class Made(_Closed):
    workload: str
    params: dict[str, Any]
    allocator: str
    source: str
    runs: int
    kib: dict[str, float | None]
    label: str
    rest_kib: float | None


class SummaryRow(_Closed):
    """One row x metric x allocator: its summary, and its ratio to the baseline."""

    workload: str
    params: dict[str, Any]
    allocator: str
    partial: bool
    metric: str
    runs: int
    state: str
    median: float | None
    mean: float | None
    stdev: float | None
    min: float | None
    max: float | None
    ci_low: float | None
    ci_high: float | None
    outliers: int | None
    ratio_to_baseline: float | None
    ratio_low: float | None
    ratio_high: float | None
    p_value: float | None
    significant: bool | None
    verdict: str | None
    ratio_margin: float | None
    detectable: float | None
    loose: bool
    final_look: bool


class SummaryExport(_Closed):
    """An allocmark summary export: one campaign's report."""

    model_config = ConfigDict(title="allocmark summary export")

    format: Literal["allocmark-summary"]
    version: Literal[2] = Field(description="2: params an object everywhere (1: text in rows)")
    campaign: dict[str, Any] = Field(description="id, name, machine, plan, ... as stored")
    baseline: str | None
    allocators: list[str]
    partial: list[str]
    speedup: bool
    geomean: dict[str, dict[str, Interval | None]] = Field(description="metric -> allocator")
    margin: float
    interval: Literal["anytime-valid", "signed-rank", "welch"]
    recommendation: list[Answer]
    aging: list[Steady]
    made_of: list[Made]
    why: list[Why]
    try_: list[Try] = Field(alias="try")
    revisions: dict[str, Revision]
    releases: list[Change]
    rows: list[SummaryRow]
