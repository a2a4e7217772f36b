"""Cost of the Rust forwarding layer of crate-built allocators (issue 5).

For each family, the same static library that `allocmark alloc build` links
(from the same cargo build) is also linked into a plain C shared object whose
`malloc`, `free`, ... are the allocator's prefixed functions themselves
(`ld --defsym`): the same C code, exported directly. samethread with small
sizes at 1 thread (the most malloc-heavy case) runs under both, interleaved;
the ratio of medians is the forwarding cost.

usage: .venv/bin/python bench/forwarding.py [REPETITIONS]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from allocmark import allocators, workloads
from allocmark.allocators import builder
from allocmark.model import RunSpec, RunStatus
from allocmark.run import execute

FUNCS = ("malloc", "free", "calloc", "realloc", "posix_memalign", "aligned_alloc")


def prefixed(prefix: str, usable: str = "usable_size") -> dict[str, str]:
    return {f: prefix + f for f in FUNCS} | {"malloc_usable_size": prefix + usable}


TCMALLOC = {
    "malloc": "Malloc",
    "free": "Free",
    "calloc": "Calloc",
    "realloc": "Realloc",
    "posix_memalign": "PosixMemalign",
    "aligned_alloc": "AlignedAlloc",
    "malloc_usable_size": "MallocSize",
}
# entry -> (static library, the C function each exported name is, the package that
# builds the library: the sys crate, or the layer itself for a source-only crate)
CASES = {
    "mimalloc@2.1.7": ("libmimalloc.a", prefixed("mi_"), None),
    "jemalloc@5.3.1": ("libjemalloc.a", prefixed("_rjem_", "malloc_usable_size"), None),
    "google-tcmalloc@2025.06.16": (
        "libtcmalloc.a",
        {k: f"TCMallocInternal{v}" for k, v in TCMALLOC.items()},
        None,
    ),
    # IsoAlloc has no aligned calls of its own (the layer grows the request)
    "isoalloc@0.3.0": (
        "libisoalloc.a",
        {
            "malloc": "iso_alloc",
            "free": "iso_free",
            "calloc": "iso_calloc",
            "realloc": "iso_realloc",
            "malloc_usable_size": "iso_chunksz",
        },
        None,
    ),
    "hoard@2015": ("libam_hoard.a", prefixed("hoard_", "malloc_usable_size"), "am_preload"),
}
PARAMS = {"count": 50000, "rounds": 10, "size_min": 16, "size_max": 128, "threads": 1}


def static_lib(name: str, archive: str, package: str | None) -> Path:
    """Build (or reuse) the entry and find the sys crate's static library."""
    spec = allocators.select(allocators.load_catalog(), [name])[0]
    assert spec.recipe is not None
    builder.build(spec)
    with builder.build_lock():
        work, env = builder.project(spec.recipe)
        proc = subprocess.run(
            builder.cargo_command(spec.recipe, "--message-format=json"),
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    for line in proc.stdout.splitlines():
        msg = json.loads(line)
        built_by = package or spec.recipe.crate
        if msg.get("reason") == "build-script-executed" and built_by in msg["package_id"]:
            found = list(Path(msg["out_dir"]).rglob(archive))
            if found:
                return found[0]
    sys.exit(f"{name}: no {archive} in the cargo build output")


def direct_so(archive: Path, symbols: dict[str, str], out: Path) -> Path:
    defsyms = [f"-Wl,--defsym={name}={target}" for name, target in symbols.items()]
    subprocess.run(
        [
            "c++",
            "-shared",
            "-o",
            str(out),
            "-Wl,--whole-archive",
            str(archive),
            "-Wl,--no-whole-archive",
            *defsyms,
            "-lpthread",
            "-ldl",
            "-lm",
        ],
        check=True,
    )
    return out


def seconds(lib: Path, reps: int) -> list[float]:
    w = workloads.load_catalog()["samethread"]
    params = workloads.resolve_params(w, PARAMS, "bench")
    spec = RunSpec(
        seq=0,
        allocator=lib.name,
        workload="samethread",
        params=params,
        rep=0,
        argv=workloads.expand(w, params),
        env=(("LD_PRELOAD", str(lib)),),
        timeout=120,
        expect_malloc=str(lib),
        result_fd=True,
    )
    out = []
    for _ in range(reps):
        r = execute.run(spec)
        if r.status is not RunStatus.OK:
            sys.exit(f"samethread under {lib}: {r.status.value}: {r.detail}")
        out.append(r.metrics["seconds"])
    return out


def main() -> None:
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    print(f"samethread {PARAMS}, {reps} interleaved repetitions; median seconds")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, (archive, symbols, package)) in enumerate(CASES.items()):
            forwarded = allocators.verify(allocators.select(allocators.load_catalog(), [name])[0])
            lib = static_lib(name, archive, package)
            direct = direct_so(lib, symbols, Path(tmp) / f"direct-{i}.so")
            times: dict[str, list[float]] = {"direct": [], "forwarded": []}
            for _ in range(reps):
                times["direct"] += seconds(direct, 1)
                times["forwarded"] += seconds(Path(str(forwarded.library)), 1)
            d, f = (statistics.median(times[k]) for k in ("direct", "forwarded"))
            print(f"{name:28} direct {d:.4f} s  forwarded {f:.4f} s  forwarded/direct {f / d:.3f}")


if __name__ == "__main__":
    main()
