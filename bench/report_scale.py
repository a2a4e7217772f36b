"""How long `allocmark report` takes over a database of 100,000 stored runs.

The database is synthetic (made here, in one transaction, through the store's
own schema): 10 allocators x 100 cells x 100 repetitions, with the metrics a
native workload and the launcher record (RSS over time, the allocator's
statistics). The report is timed as a user runs it, as a separate
process: once cold (it fills the cell cache), then the median of several runs.
Targets (issue 27): <= 2 s warm and <= 3 s for the first report after a campaign,
on the machine that runs it; `python -c pass` is printed beside them to scale by.
The runs carry the signals the answer's why reads (issue 42), and their ratios
differ by allocator, so that every decided difference is explained as a real
campaign's would be.

usage: .venv/bin/python bench/report_scale.py [RUNS] [REPEATS]
"""

from __future__ import annotations

import json
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from allocmark.model import AllocatorSpec, RunSpec, Status, Verified
from allocmark.run import machine
from allocmark.store import Store

ALLOCATORS = [f"alloc{i}" for i in range(10)]
LABELS = json.dumps({"release_fn": "none", "alloc_stats": "glibc"})


def cells() -> list[tuple[tuple[str, int], ...]]:
    return [(("size_max", 64 << k), ("threads", t)) for k in range(10) for t in range(1, 11)]


def make(path: Path, runs: int) -> None:
    reps = max(1, runs // (len(ALLOCATORS) * len(cells())))
    allocs = [
        Verified(
            AllocatorSpec(name=a, paths=(f"/x/{a}.so",)),
            Status.OK,
            library=f"/x/{a}.so",
            sha256="0" * 64,
            version="1",
        )
        for a in ALLOCATORS
    ]
    plan = [
        RunSpec(
            seq=i,
            allocator=a,
            workload="churn",
            params=p,
            rep=r,
            argv=("x",),
            env=(),
            timeout=60,
            result_fd=True,
        )
        for i, (r, p, a) in enumerate(
            (r, p, a) for r in range(reps) for p in cells() for a in ALLOCATORS
        )
    ]
    store = Store(path)
    cid = store.new_campaign("synthetic", 1, machine.current(), [], allocs, [], plan, ALLOCATORS[0])
    rng = random.Random(1)
    run_rows, metric_rows = [], []
    for s in plan:
        wall = (1 + ALLOCATORS.index(s.allocator) / 10) * rng.lognormvariate(0, 0.05)
        params = json.dumps(s.params)
        run_rows.append(
            (
                s.seq + 1,
                cid,
                s.seq,
                s.allocator,
                s.workload,
                params,
                s.rep,
                "ok",
                0,
                wall,
                wall * 0.9,
                wall * 0.1,
                50000,
                "",
                "",
                0,
                LABELS,
                round(12000 * wall),
                0,
                3,
                round(40 * wall),
            )
        )
        for name, value in (
            ("ops", 1e6),
            ("seconds", wall),
            ("ops_per_s", 1e6 / wall),
            ("peak_requested_bytes", 4e7),
            ("threads", 1.0),
            ("overhead_ratio", 1.2),
            ("anon_huge_kib", 0.0),
            ("live_bytes_end", 0.0),
            ("rss_end_kib", 20000.0 * wall),
            ("rss_mib_s", 40 * wall),
            ("rss_last_sample_kib", 20000.0),
            ("rss_samples", 200.0),
            ("rss_sample_s", 0.005),
            ("alloc_rss_kib", 20000.0),
            ("alloc_live_kib", 100.0),
            ("alloc_held_kib", 15000.0),
            ("alloc_mapped_kib", 30000.0),
            # what every run records for the answer's why (issue 42)
            ("start_rss_kib", 900.0),
            ("peak_anon_kib", 45000.0 * wall),
            ("peak_file_kib", 5000.0),
            ("near_peak_reads", 3.0),
            ("near_peak_read_s", 0.0004),
            ("near_peak_rss_kib", 48000.0),
            ("near_peak_anon_kib", 43000.0),
            ("near_peak_dirty_kib", 44000.0),
            ("near_peak_lazyfree_kib", 0.0),
            ("near_peak_thp_kib", 0.0),
        ):
            metric_rows.append((s.seq + 1, name, value))
    with store.db:
        store.db.executemany(
            "INSERT INTO runs (id, campaign_id, seq, allocator, workload, params_json, rep, "
            "status, exit_code, wall_s, user_s, sys_s, maxrss_kib, detail, malloc_object, "
            "partial, labels_json, minflt, majflt, nvcsw, nivcsw) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            run_rows,
        )
        store.db.executemany("INSERT INTO metrics VALUES (?,?,?)", metric_rows)
    store.set_status(cid, "finished")
    store.close()


def timed(args: list[str]) -> float:
    t0 = time.monotonic()
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - t0


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "big.db"
        t0 = time.monotonic()
        make(db, runs)
        print(f"made {runs} synthetic runs in {time.monotonic() - t0:.1f} s")
        empty = statistics.median(timed([sys.executable, "-c", "pass"]) for _ in range(5))
        print(f"python -c pass: median {empty:.3f} s of 5 (this machine's floor)")
        base = [sys.executable, "-m", "allocmark", "report", "--db", str(db)]
        # The first report reads the runs and keeps what it read (the cell cache);
        # later ones, until the campaign gains a run, start from that. `run` prints
        # a report as it ends, so a user's first `report` is usually a later one.
        cold = Path(tmp) / "cold.db"
        shutil.copyfile(db, cold)
        first = timed([sys.executable, "-m", "allocmark", "report", "--db", str(cold)])
        print(
            f"first allocmark report (table) over {runs} runs, filling the cache: "
            f"{first:.2f} s (target <= 3 s)"
        )
        first = timed([*base, "--format", "csv"])
        print(
            f"first allocmark report (csv) over {runs} runs, filling the cache: {first:.2f} s "
            "(target <= 3 s)"
        )
        for label, extra in (("table", []), ("csv", ["--format", "csv"])):
            times = [timed(base + extra) for _ in range(repeats)]
            print(
                f"allocmark report ({label}) over {runs} runs: median "
                f"{statistics.median(times):.2f} s of {repeats} (target <= 2 s)"
            )


if __name__ == "__main__":
    main()
