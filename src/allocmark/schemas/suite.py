"""A suite file: which workloads, with which parameter grids, how precisely."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Value = int | str  # "1..4" and "1..2*cores" are ranges, expanded when the suite is read


_DURATION = r"^\s*(\d+(\.\d+)?h)?(\d+(\.\d+)?m)?(\d+(\.\d+)?s?)?\s*$"


def _duration(description: str, example: str, unlimited: bool = False) -> Any:
    """A duration field: 2m, 90s, 1m30s, 1h (`unlimited`: also none)."""
    pattern = _DURATION + ("|^(none|unlimited)$" if unlimited else "")
    return Field(
        None, pattern=pattern, description=description, json_schema_extra={"expected": example}
    )


def _percentage(description: str) -> Any:
    """A percentage field: 3% or 0.03."""
    return Field(
        None,
        pattern=r"^\d+(\.\d+)?%?$",
        description=description,
        json_schema_extra={"expected": "a percentage such as 3% or 0.03"},
    )


class SuiteRun(BaseModel):
    """One [[runs]] entry: a workload and its parameter grid."""

    model_config = ConfigDict(extra="forbid", strict=True)

    workload: str = Field(description="a workload of `allocmark workloads`")
    params: dict[str, Value | list[Value]] = Field(
        default_factory=dict,
        description='parameter -> value or list of values (every combination runs); "1..4" '
        'is a range, "1..2*cores" scales with the machine',
    )


class SuiteFile(BaseModel):
    """An allocmark suite (`allocmark run --suite FILE`)."""

    model_config = ConfigDict(extra="forbid", strict=True, title="allocmark suite")

    description: str = ""
    allocators: list[str] | str = Field(
        default_factory=lambda: ["all"],
        description='allocator names, or "all": every usable entry and variant',
    )
    blocks: int | None = Field(None, ge=1, description="blocks every row gets at least (3)")
    max_blocks: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="blocks a row gets at most (default 1000: the budget is the limit); "
        "equal to blocks for exactly that many, judged by the exact test",
    )
    repetitions: int | None = Field(
        None, ge=1, description="deprecated: the former name of blocks (read when it is absent)"
    )
    max_repetitions: int | None = Field(
        None,
        ge=1,
        le=1_000_000,
        description="deprecated: the former name of max_blocks (read when it is absent)",
    )
    timeout: float = Field(600, gt=0, le=7 * 86400, description="seconds per run (a week at most)")
    seed: int = Field(1, ge=0, le=2**63 - 1, description="shuffle seed of the run order")
    budget: str | None = _duration(
        "add blocks while the campaign has spent less than this, e.g. 2m, 90s; 0 or none: no limit",
        "a duration such as 2m, 90s, 1m30s, 1h or none",
        unlimited=True,
    )
    expected: str | None = _duration(
        "how long the suite took, as it is, on the 2-core VM it was sized on (said when it "
        "starts, before this machine's own runs tell)",
        "a duration such as 18m",
    )
    margin: str | None = _percentage(
        "equivalence margin: add blocks until every ratio is faster, slower, or the same "
        "within ±this, e.g. 3%"
    )
    target_ci: str | None = _percentage(
        "deprecated: the former name of margin (read when it is absent)"
    )
    question: Literal["baseline", "releases"] = Field(
        "baseline",
        description="what the blocks decide: baseline, every allocator against the "
        "baseline; releases, every version of a family against the one before it",
    )
    runs: list[SuiteRun] = Field(default_factory=list)
