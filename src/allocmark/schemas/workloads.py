"""The workload catalog: native microbenchmarks and real applications."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from allocmark.schemas.catalog import Name, StrList


class Kind(StrEnum):
    NATIVE = "native"  # allocmark's own C workloads: they report their own metrics
    APP = "app"  # a real application: measured from outside, metrics parsed from its output


class Combine(StrEnum):
    LAST = "last"
    SUM = "sum"
    HMEAN = "hmean"


class FileKind(StrEnum):
    NONE = ""
    TRACE = "trace"  # a trace `allocmark record` made: checked, and staged where runs read it


class Source(StrEnum):
    STDOUT = "stdout"
    STDERR = "stderr"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class ParamEntry(_Strict):
    """A typed parameter: its default's type is the parameter's type."""

    default: bool | int | str = Field(description="an integer, a string or true/false")
    min: int | None = None
    max: int | None = None
    help: str = ""
    choices: StrList = Field(default_factory=list)
    file: Annotated[FileKind, Field(strict=False)] = Field(
        FileKind.NONE, description='a string parameter naming a file of this kind ("trace")'
    )


class MetricEntry(_Strict):
    """How to read one metric from an application's output: exactly one of regex or
    json_key."""

    regex: str = Field("", description="group 1 is the number")
    json_key: str = Field("", description="that key of the last JSON line")
    combine: Annotated[Combine, Field(strict=False)] = Combine.LAST
    source: Annotated[Source, Field(strict=False)] = Source.STDOUT


class ServiceEntry(_Strict):
    """A server and the client that drives it ({port} is free, on 127.0.0.1)."""

    client: StrList = Field(default_factory=list)
    stop_signal: str = "SIGTERM"
    ready_timeout: int = Field(30, gt=0, description="seconds until the port must listen")


class WorkloadEntry(_Strict):
    """[workload.NAME]: a command template with typed parameters."""

    description: str = ""
    kind: Annotated[Kind, Field(strict=False)]
    program: str | None = None
    args: StrList = Field(default_factory=list)
    params: dict[Name, ParamEntry] = Field(default_factory=dict)
    env: dict[str, str] = Field(default_factory=dict)
    checks: StrList = Field(default_factory=list, description="'PARAM <= PARAM' relations")
    fixed_time: str = Field("", description="the parameter that fixes the run's duration")
    calls: StrList = Field(
        default_factory=list,
        description="native: the allocation functions beyond malloc, calloc, realloc and "
        "free that the program calls (a partial allocator lacking one is not recommended)",
    )
    packages: StrList = Field(default_factory=list, description="Debian packages it needs")
    input: str = Field("", description="a generated input file (see workloads/inputs.py)")
    steps: list[list[str]] | None = Field(None, description="several commands, in turn")
    metrics: dict[Name, MetricEntry] = Field(default_factory=dict)
    service: ServiceEntry | None = None


class WorkloadCatalog(_Strict):
    """allocmark's workload catalog (src/allocmark/catalog/workloads.toml)."""

    model_config = ConfigDict(title="allocmark workload catalog")

    workload: dict[Name, WorkloadEntry] = Field(default_factory=dict)
