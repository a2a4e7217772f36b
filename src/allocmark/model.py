"""The data that flows through the pipeline: plain, frozen, comparable."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any, NamedTuple

from pydantic import PlainSerializer

Env = tuple[tuple[str, str], ...]
# A row's parameters, in order; as JSON an object ({"threads": 2}), wherever a value
# that holds them is exported (report/summary.py).
Params = Annotated[
    tuple[tuple[str, int | str], ...],
    PlainSerializer(dict, return_type=dict[str, int | str]),
]


class Status(StrEnum):
    """Verification outcome of an allocator."""

    OK = "ok"
    PARTIAL = "partial"  # usable, but leaves some allocation functions to glibc
    MISSING = "missing"
    BROKEN = "broken"


class RunStatus(StrEnum):
    """Outcome of one run; only OK runs ever become numbers in a report."""

    OK = "ok"
    CRASHED = "crashed"  # killed by a signal
    FAILED = "failed"  # non-zero exit, or no metrics record from a native workload
    TIMEOUT = "timeout"
    OOM = "oom"  # killed at its memory limit (--memory-limit)
    UNVERIFIED = "unverified"  # malloc was not served by the allocator under test
    ERROR = "error"  # could not be started at all


@dataclass(frozen=True)
class Debian:
    """Where an allocator of another Debian release comes from (allocators/debian.py):
    a binary package's library, or a library built here from a source package."""

    release: str  # "bullseye", "trixie", "sid"
    package: str = ""  # the binary package whose library is taken
    source: str = ""  # or the source package built here by `build`
    members: tuple[str, ...] = ()  # the library's path in the package (globs)
    companions: tuple[str, ...] = ()  # other libraries of the package that it needs
    build: tuple[str, ...] = ()  # shell commands run in the unpacked source
    output: str = ""  # what `build` makes, relative to the source
    files: tuple[str, ...] = ()  # allocmark's own files put into the source first
    glibc: str = ""  # needs a newer glibc than this system's: runs under glibc@VERSION
    glibc_release: str = ""  # the release whose libc6 that glibc is
    debian_version: str = ""  # an exact Debian version; "" takes the release's newest
    is_glibc: bool = False  # the C library itself: programs run under its own loader


@dataclass(frozen=True)
class Recipe:
    """How allocmark builds an allocator: from its crates.io `-sys` crate, or (with
    `debian`) from another Debian release's binary or source package."""

    family: str  # "mimalloc"
    backend: str  # module of native/preload-rs that forwards to it
    crate: str  # "libmimalloc-sys"
    crate_version: str  # cargo requirement, "=0.1.39"
    upstream_version: str  # the allocator's own version, "2.1.7"
    flavor: str = ""  # "secure", "checks", "light" or "" (the crate's defaults)
    crate_features: tuple[str, ...] = ()
    build_env: Env = ()  # e.g. CFLAGS for the crate's C build
    needs_source: bool = False  # build.rs compiles C from the crate's sources
    source_only: bool = False  # the crate is not built, only its sources (build.rs)
    sys_std: bool = False  # the sys crate links Rust's std (its panic handler)
    self_reports: bool = False  # the library states its version (mi_version, mallctl)
    versioned: bool = True  # versions are the allocator's own, not its crate's
    forwarding: str = ""  # measured cost of the Rust forwarding layer, for the notes
    note: str = ""  # what this version is, where its name does not say
    debian: Debian | None = None  # from Debian, not from a crate

    @property
    def glibc_version(self) -> str:
        """The glibc its programs run under, where not the system's: its own (a glibc
        entry), or the one a build for a newer glibc needs ("" for the system's)."""
        if self.debian is None:
            return ""
        return self.upstream_version if self.debian.is_glibc else self.debian.glibc


@dataclass(frozen=True)
class GitBuild:
    """How a revision of the user's allocator repository becomes a library: `build`
    run by `sh -c` in a clean checkout of the revision, as `git bisect run` runs a
    command, and the library it leaves at `output` (relative to the checkout)."""

    build: str  # "make -j2"
    output: str  # "build/libmine.so"
    env: Env = ()  # the build's extra environment (CFLAGS=-O2)
    timeout_s: float = 1800.0


@dataclass(frozen=True)
class Git:
    """Where an allocator built from a git repository comes from (allocators/git.py)."""

    repository: str  # an absolute path, or a URL
    commit: str  # the full sha the revision resolved to
    describe: str  # `git describe --tags --always` of the commit
    revision: str  # as the user named it ("v1", "HEAD", "a1b2c3d..e4f5a6b")
    build: GitBuild
    rank: int = 0  # its place among the revisions named (oldest first in a range)


@dataclass(frozen=True)
class AllocatorSpec:
    """A catalog entry (or a user's `-a name=/lib.so`), not yet checked."""

    name: str  # "jemalloc" or "jemalloc:nodecay"
    description: str = ""
    system: bool = False  # the C library's own malloc: nothing is preloaded
    paths: tuple[str, ...] = ()  # candidate library paths, globs allowed
    package: str | None = None  # Debian package that provides it
    version_source: str = "auto"  # "probe:<name>", "dpkg", "auto" or "none"
    env: Env = ()
    baseline: bool = False
    user: bool = False  # given by the user: unusable means a usage error
    hidden: bool = False  # left out of "all" (the null allocator); name it to use it
    recipe: Recipe | None = None  # built by `allocmark alloc build`; left out of "all"
    aliases: tuple[str, ...] = ()  # other names it answers to ("snmalloc" for snmalloc@0.7.6)
    family: str = ""  # the allocator it is a build of, where not its name ("gperftools")
    role: str = "general"  # "debug", "wrapper": never recommended (schemas.catalog.Role)
    license: str = ""  # where it binds what is built from it ("GPL-2.0-or-later")
    # Preloaded before it: libraries of its own release that it needs, so that they,
    # not this system's of the same soname, are the ones loaded (tbbmalloc's proxy).
    companions: tuple[str, ...] = ()
    git: Git | None = None  # built from the user's repository at one commit

    @property
    def recommendable(self) -> bool:
        return self.role == "general"

    @property
    def family_name(self) -> str:
        """The allocator it is a build of: its recipe's family, its catalog family, or
        its own name."""
        return self.family or (self.recipe.family if self.recipe else self.base)

    @property
    def base(self) -> str:
        return self.name.split(":", 1)[0]

    @property
    def other_libc(self) -> bool:
        """Another glibc than the system's (glibc@VERSION): nothing is preloaded, the
        program runs under that C library's own loader."""
        return bool(self.recipe and self.recipe.debian and self.recipe.debian.is_glibc)

    @property
    def glibc_version(self) -> str:
        """The glibc its programs run under, where not the system's: its own (glibc@2.41),
        or the one a build for a newer glibc needs ("" for the system's)."""
        return self.recipe.glibc_version if self.recipe else ""


def preload_list(spec: AllocatorSpec, library: str | None) -> str | None:
    """LD_PRELOAD for `library` of `spec`: its companions first."""
    return ":".join([*spec.companions, library]) if library else None


@dataclass(frozen=True)
class Verified:
    """An allocator as checked on this machine by the probe."""

    spec: AllocatorSpec
    status: Status
    library: str | None = None  # real path of the preloaded object (libc for glibc)
    sha256: str | None = None
    version: str | None = None
    served: tuple[tuple[str, str | None], ...] = ()  # function -> object serving it
    lacks: tuple[str, ...] = ()  # C functions left to glibc
    reason: str = ""  # why missing/broken, with the fix

    @property
    def usable(self) -> bool:
        return self.status in (Status.OK, Status.PARTIAL)

    @property
    def malloc_object(self) -> str | None:
        return dict(self.served).get("malloc")

    @property
    def preload(self) -> str | None:
        # The C library is preloaded too: ahead of an allocator the program links
        # itself (Debian's redis links libjemalloc), it then really serves malloc.
        if self.spec.other_libc:
            return None  # its programs' children start under the system's glibc
        if self.spec.system:
            return self.malloc_object
        return preload_list(self.spec, self.library)

    def child_env(self) -> dict[str, str]:
        """Environment additions for a child running on this allocator."""
        env = dict(self.spec.env)
        if self.preload:
            env["LD_PRELOAD"] = self.preload
        return env


@dataclass(frozen=True)
class Prepared:
    """What a campaign will run on, and what it could not use (allocators/prepare.py)."""

    usable: tuple[Verified, ...]
    unusable: tuple[Verified, ...]
    baseline: str | None
    left_out: tuple[tuple[str, str], ...] = ()  # tune: (candidate, why), before the race
    unbuilt: tuple[str, ...] = ()  # revisions that did not build: why, with their log's end


@dataclass(frozen=True)
class Param:
    """A typed workload parameter."""

    name: str
    kind: str  # "int", "str" or "bool"
    default: int | str
    help: str = ""
    minimum: int | None = None
    maximum: int | None = None
    choices: tuple[str, ...] = ()
    file: str = ""  # a str naming a file of this kind ("trace": workloads/traces.py)


@dataclass(frozen=True)
class MetricParser:
    """How one metric is read from a program's output (apps, not native workloads)."""

    name: str  # metric name; "ops_per_s" is the report's throughput column
    regex: str = ""  # group 1 of a match is the number
    json_key: str = ""  # or: this key of the last JSON object line
    combine: str = "last"  # several matches: "last", "sum" or "hmean" (rates of equal work)
    source: str = "stdout"  # or "stderr"


@dataclass(frozen=True)
class Service:
    """A server measured under the allocator while a client (not under it) drives it."""

    client: tuple[str, ...]  # argv template of the client; "{port}" is the server's
    stop_signal: str = "SIGTERM"  # how the server is asked to shut down cleanly
    ready_timeout: float = 30.0  # seconds to wait for it to listen on 127.0.0.1:{port}


@dataclass(frozen=True)
class AppRun:
    """What executing an application needs beyond argv: output parsers, a service."""

    parsers: tuple[MetricParser, ...] = ()
    service: Service | None = None
    steps: tuple[int, ...] = ()  # argv is several commands of these lengths, run in turn
    # `try --prepare CMD`: run before each run of the command, as its identity, in its
    # directory, without the allocator, and not timed (hyperfine's --prepare)
    prepare: tuple[str, ...] = ()
    show_output: bool = False  # `try --show-output`: the run's output is shown, not only kept


@dataclass(frozen=True)
class Workload:
    """A command template with typed parameters and a metrics contract."""

    name: str
    description: str
    kind: str  # "native" (metrics on AM_RESULT_FD), "app" or "command" (from outside)
    argv: tuple[str, ...]  # template; "{param}" placeholders, "{program}" for native
    params: tuple[Param, ...] = ()
    env: Env = ()
    program: str = ""  # native: name under the package's _bin; app: executable
    checks: tuple[tuple[str, str, str], ...] = ()  # (param, "<=" or "<", param)
    packages: tuple[str, ...] = ()  # app: the Debian packages that provide it
    needs: tuple[str, ...] = ()  # app: every executable it runs (program, client, ...)
    input: str = ""  # app: generator of "{input}" (see inputs.py), sized by `scale`
    app: AppRun = AppRun()
    fixed_time: str = ""  # a parameter that, when not 0, sets the run's duration (larson)
    calls: tuple[str, ...] = ()  # native: allocation functions beyond malloc/calloc/realloc/free


@dataclass(frozen=True)
class RunSpec:
    """One planned child process."""

    seq: int  # position in the campaign's plan
    allocator: str
    workload: str
    params: Params
    rep: int
    argv: tuple[str, ...]
    env: Env  # additions to the inherited environment, LD_PRELOAD included
    timeout: float
    expect_malloc: str | None = None  # must serve malloc: checked by the record or libam_who
    result_fd: bool = False  # the child writes a metrics record to AM_RESULT_FD
    role: str = "measure"  # "baseline": the workload doing nothing, for its RSS;
    # "verify": checks what serves malloc in every process for the measured runs
    app: AppRun = AppRun()  # output parsers and service of an application
    profile: bool = False  # run under the profiler shim (libamprof.so)
    trace: str = ""  # recorded (libamrec.so), its trace written to this path (run/record.py)
    memory_limit: int = 0  # bytes the run's processes may use together; 0: no limit
    # The kernel counts its system calls (run/kernel.py); off for the run taken again
    # where counting would cost too much (kernel.BUDGET, dispatchers.run_steady).
    count: bool = True


@dataclass(frozen=True)
class RssSeries:
    """A run's resident size over time, sampled by the launcher: each point is the
    largest RSS of `stride` samples taken `period_us` apart, from `t_ms` on."""

    t_ms: tuple[int, ...]
    kib: tuple[int, ...]
    period_us: int
    stride: int = 1


@dataclass(frozen=True)
class Profiled:
    """A profiled run as stored: its profile records (profile/ reads them), the kernel's
    counts of its system calls (`syscall_<kind>` metrics, run/kernel.py) and the time
    inside some of them (`systime_<kind>`, seconds), and why there are no counts (""
    when counted) or no times ("" when timed, or when the run was not profiled by a
    launcher that times)."""

    allocator: str
    workload: str
    params: Params
    profile: dict[str, Any]
    counts: dict[str, float]
    uncounted: str = ""
    untimed: str = ""


@dataclass(frozen=True)
class RunResult:
    """What one child did, measured from outside and (for native workloads) inside."""

    status: RunStatus
    wall_s: float = 0.0
    user_s: float = 0.0
    sys_s: float = 0.0
    maxrss_kib: int = 0
    minflt: int = 0
    majflt: int = 0
    nvcsw: int = 0
    nivcsw: int = 0
    exit_code: int | None = None
    signal: int | None = None
    started: float = 0.0  # Unix time
    metrics: dict[str, float] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # text fields of the record
    malloc_object: str | None = None
    detail: str = ""  # why it is not OK: stderr tail, timeout, ...
    profile: dict[str, Any] | None = None  # {"records": the profiler's records, one per process}
    rss: RssSeries | None = None  # the launcher's samples (None: sampling off, or no record)
    shown: str = ""  # the program's output, with `try --show-output` (shown, never stored)


@dataclass(frozen=True)
class Campaign:
    """One invocation of `run`/`try`, as stored."""

    id: int
    name: str
    status: str  # "running", "interrupted", "finished", "failed" (store.base.ENDED)
    created: float
    baseline: str | None
    planned: int
    done: int


@dataclass(frozen=True)
class StoredAllocator:
    """One allocator of a campaign as stored: what it was verified as."""

    name: str
    status: str  # Status's value
    library: str | None  # the preloaded library (None: glibc's own malloc)
    sha256: str | None
    version: str | None
    reason: str | None  # why it is not usable
    lacks: tuple[str, ...]  # functions it leaves to glibc (a partial allocator)
    env: dict[str, str]  # set for its runs
    served: tuple[tuple[str, str | None], ...]  # function -> the object that served it


class StoredRun(NamedTuple):
    """One finished run as read back for analysis.

    A NamedTuple rather than a frozen dataclass: reports read 100,000s of these,
    and a tuple is built several times faster; it is just as immutable.
    """

    seq: int
    allocator: str
    workload: str
    params: Params
    rep: int
    status: RunStatus
    wall_s: float
    user_s: float
    sys_s: float
    maxrss_kib: int
    metrics: dict[str, float]
    detail: str
    partial: bool
    role: str = "measure"
    labels: dict[str, str] = {}  # noqa: RUF012 - never mutated; readers get their own
    # rusage of the run's tree: what explains a difference (answer/why.py)
    minflt: int = 0
    majflt: int = 0
    nvcsw: int = 0
    nivcsw: int = 0


@dataclass(frozen=True)
class AllocatorRuns:
    """One allocator's runs of one row (a workload with its parameters) in one role,
    column by column: the runs behind its cells (a cell: row x allocator x metric,
    answer/analyze.Cell), what analysis reads. Index i of every tuple is the same run."""

    allocator: str
    workload: str
    params: Params
    role: str
    partial: bool
    statuses: tuple[RunStatus, ...]
    columns: dict[str, tuple[float | None, ...]]  # wall_s, user_s, sys_s, maxrss_kib, metrics

    @staticmethod
    def of_runs(runs: Sequence[StoredRun], names: Sequence[str]) -> list[AllocatorRuns]:
        """Group runs by row, allocator and role, keeping the metrics in `names`."""
        groups: dict[tuple[str, str, Params, str], list[StoredRun]] = {}
        for r in runs:
            groups.setdefault((r.allocator, r.workload, r.params, r.role), []).append(r)
        return [AllocatorRuns._of_group(key, rs, names) for key, rs in groups.items()]

    @staticmethod
    def _of_group(
        key: tuple[str, str, Params, str], rs: Sequence[StoredRun], names: Sequence[str]
    ) -> AllocatorRuns:
        columns: dict[str, tuple[float | None, ...]] = {
            "wall_s": tuple(r.wall_s for r in rs),
            "user_s": tuple(r.user_s for r in rs),
            "sys_s": tuple(r.sys_s for r in rs),
            "maxrss_kib": tuple(float(r.maxrss_kib) for r in rs),
            "rep": tuple(float(r.rep) for r in rs),
            **{
                c: tuple(float(getattr(r, c)) for r in rs)
                for c in ("minflt", "majflt", "nvcsw", "nivcsw")
            },
        }
        columns |= {n: tuple(r.metrics.get(n) for r in rs) for n in names}
        return AllocatorRuns(
            *key,
            partial=any(r.partial for r in rs),
            statuses=tuple(r.status for r in rs),
            columns=columns,
        )


@dataclass(frozen=True)
class Machine:
    """Facts about the machine, recorded with every campaign (run/machine.py gathers them)."""

    hostname: str
    cpu_model: str
    cores: int
    kernel: str
    glibc: str
    allocmark_version: str
    python: str
    memory_kib: int
    governor: str
    thp: str = "unknown"  # the system's transparent huge pages mode: always, madvise, never
    rss_read_error_kib: int = 0  # how far one read of a process's RSS may be off (see below)
