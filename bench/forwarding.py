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

from allocmark import allocators, builder, execute, workloads
from allocmark.model import RunSpec, RunStatus

# family entry -> (static library name, prefix of its C functions)
CASES = {
    "mimalloc@2.1.7": ("libmimalloc.a", "mi_"),
    "jemalloc@5.3.1": ("libjemalloc.a", "_rjem_"),
}
FUNCS = ("malloc", "free", "calloc", "realloc", "posix_memalign", "aligned_alloc")
PARAMS = {"count": 50000, "rounds": 10, "size_min": 16, "size_max": 128, "threads": 1}


def static_lib(name: str, archive: str) -> Path:
    """Build (or reuse) the entry and find the sys crate's static library."""
    spec = allocators.select(allocators.load_catalog(), [name])[0]
    assert spec.recipe is not None
    builder.build(spec)
    with builder.build_lock():
        work, env = builder.project(spec.recipe)
        proc = subprocess.run(
            builder.cargo_command(spec.recipe, "--message-format=json"),
            cwd=work, env=env, capture_output=True, text=True, check=True,
        )  # fmt: skip
    for line in proc.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "build-script-executed" and spec.recipe.crate in msg["package_id"]:
            found = list(Path(msg["out_dir"]).rglob(archive))
            if found:
                return found[0]
    sys.exit(f"{name}: no {archive} in the cargo build output")


def direct_so(archive: Path, prefix: str, out: Path) -> Path:
    defsyms = [f"-Wl,--defsym={f}={prefix}{f}" for f in FUNCS]
    own = "malloc_usable_size" if prefix == "_rjem_" else "usable_size"
    usable = f"-Wl,--defsym=malloc_usable_size={prefix}{own}"
    subprocess.run(
        ["cc", "-shared", "-o", str(out), "-Wl,--whole-archive", str(archive),
         "-Wl,--no-whole-archive", *defsyms, usable, "-lpthread", "-ldl", "-lm"],
        check=True,
    )  # fmt: skip
    return out


def seconds(lib: Path, reps: int) -> list[float]:
    w = workloads.load_catalog()["samethread"]
    params = workloads.resolve_params(w, PARAMS, "bench")
    spec = RunSpec(
        seq=0, allocator=lib.name, workload="samethread", params=params, rep=0,
        argv=workloads.expand(w, params), env=(("LD_PRELOAD", str(lib)),), timeout=120,
        expect_malloc=str(lib), result_fd=True,
    )  # fmt: skip
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
        for name, (archive, prefix) in CASES.items():
            forwarded = allocators.verify(allocators.select(allocators.load_catalog(), [name])[0])
            direct = direct_so(static_lib(name, archive), prefix, Path(tmp) / f"direct-{prefix}.so")
            times: dict[str, list[float]] = {"direct": [], "forwarded": []}
            for _ in range(reps):
                times["direct"] += seconds(direct, 1)
                times["forwarded"] += seconds(Path(str(forwarded.library)), 1)
            d, f = (statistics.median(times[k]) for k in ("direct", "forwarded"))
            print(f"{name:16} direct {d:.4f} s  forwarded {f:.4f} s  forwarded/direct {f / d:.3f}")


if __name__ == "__main__":
    main()
