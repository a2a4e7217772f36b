"""The runs export (`report --runs --format json`, read back by `compare`) as a
typed model: it checks a document a user hands to `compare` row by row, names the
row and column of the first problem, and gives the JSON Schema that
`allocmark schema runs` prints for people who write such files themselves.

A row is wide: besides the fixed columns it has one `metric.NAME` column per
metric (a number, or null where the run lacks it) and one `label.NAME` column
per label (text or null), as in the CSV export.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator

from allocmark.model import RunStatus

# Every JSON export names its format and version; a reader refuses others. Version 2:
# `params` is a JSON object everywhere (version 1 wrote it as JSON text in the runs'
# and the summary's rows and the remedies, an object elsewhere), and a run's block is
# `block` (version 1: `rep`, the store's column); version 1 is still read.
FORMAT_VERSION = 2
READ_VERSIONS = (1, 2)
SUMMARY_FORMAT: Final = "allocmark-summary"
RUNS_FORMAT = "allocmark-runs"


class RunRow(BaseModel):
    """One stored run."""

    model_config = ConfigDict(extra="allow", title="allocmark run")
    __pydantic_extra__: dict[str, float | str | None] = Field(init=False)

    seq: int = Field(ge=0, description="the run's place in its campaign's plan")
    role: str = Field("measure", description="measure, verify, setup, ...")
    allocator: str
    workload: str
    params: dict[str, Any] = Field(
        description='the workload\'s parameters, e.g. {"threads": 2} (version 1: as JSON text)'
    )
    block: int = Field(
        ge=0,
        validation_alias=AliasChoices("block", "rep"),
        description="the block the run belongs to (version 1: `rep`)",
    )
    status: RunStatus
    wall_s: float = Field(ge=0)
    user_s: float = Field(ge=0)
    sys_s: float = Field(ge=0)
    maxrss_kib: int = Field(ge=0, description="peak RSS of the run's process tree")
    minflt: int = Field(0, ge=0, description="minor page faults of the run's tree (rusage)")
    majflt: int = Field(0, ge=0, description="major page faults (rusage)")
    nvcsw: int = Field(0, ge=0, description="voluntary context switches (rusage)")
    nivcsw: int = Field(0, ge=0, description="involuntary context switches (rusage)")
    partial: bool = False
    detail: str = ""

    @field_validator("params", mode="before")
    @classmethod
    def _params_object(cls, value: object) -> object:
        """Version 1 wrote the object as JSON text: read either."""
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as e:
                raise ValueError(f"not JSON ({e})") from None
        if not isinstance(value, dict):
            raise ValueError('must be a JSON object such as {"threads": 2}')
        for v in value.values():
            if not isinstance(v, int | str) or isinstance(v, float):
                raise ValueError(f"a parameter's value is a number or text, not {v!r}")
        return value

    @model_validator(mode="after")
    def _wide_columns(self) -> RunRow:
        for key, value in (self.model_extra or {}).items():
            if key.startswith("metric."):
                if isinstance(value, str):
                    raise ValueError(f"column {key!r} must be a number or null, got {value!r}")
            elif key.startswith("label."):
                if value is not None and not isinstance(value, str):
                    raise ValueError(f"column {key!r} must be text or null, got {value!r}")
            else:
                raise ValueError(
                    f"unknown column {key!r} (extra columns are metric.NAME or label.NAME)"
                )
        return self

    def metrics(self) -> dict[str, float]:
        return {
            k[7:]: float(v)
            for k, v in (self.model_extra or {}).items()
            if k.startswith("metric.") and v is not None
        }

    def labels(self) -> dict[str, str]:
        return {
            k[6:]: str(v)
            for k, v in (self.model_extra or {}).items()
            if k.startswith("label.") and v is not None
        }


class RunsExport(BaseModel):
    """An allocmark runs export: every run of one campaign."""

    model_config = ConfigDict(title="allocmark runs export")

    format: Literal["allocmark-runs"]
    version: Literal[1, 2]  # READ_VERSIONS: load() refuses others first
    campaign: dict[str, Any] = Field(
        default_factory=dict, description="the campaign's name, baseline, machine, ..."
    )
    rows: list[RunRow]
