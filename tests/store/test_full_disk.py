"""A campaign on a disk that fills up (issue 41): it stops with the right advice (the
file, the filesystem, the runs kept, the command that finishes it), loses nothing,
and `--resume` finishes it once there is room, repeating no run."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import cli


@contextlib.contextmanager
def small_filesystem(where: Path, size: str) -> Iterator[Path]:
    """A tmpfs of `size` mounted at `where` (root only), unmounted afterwards."""
    where.mkdir()
    # mode 0755: a tmpfs is 1777 otherwise, where the measured program's user could plant
    # a journal beside the database (run/runas.py refuses that)
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(
            f"no small filesystem can be made here (mount -t tmpfs: "
            f"{made.stderr.strip() or made.returncode}); needs root"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def runs(db: Path) -> list[tuple[int, float]]:
    with contextlib.closing(sqlite3.connect(db)) as con:
        return con.execute("SELECT seq, started FROM runs ORDER BY seq").fetchall()


def roles(db: Path) -> dict[str, int]:
    with contextlib.closing(sqlite3.connect(db)) as con:
        return dict(con.execute("SELECT role, count(*) FROM runs GROUP BY role").fetchall())


def test_a_full_disk_says_so_and_resume_finishes_without_repeating(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "full", "400k") as full:
        db = full / "x.db"
        r = cli(
            "run",
            "-a",
            "glibc,jemalloc,mimalloc",
            "-w",
            "churn,samethread",
            "-n",
            "30",
            "--max-blocks",
            "30",
            "-p",
            "count=2000",
            "--db",
            str(db),
        )
        said = " ".join(r.stderr.split())
        assert r.returncode == 2, r.stderr
        assert "Traceback" not in r.stderr and "cannot be read" not in said
        assert "restore it from a copy" not in said
        assert f"no room left for {db}: the disk is full at {full} (a filesystem of" in said
        kept = runs(db)
        assert kept, said
        assert f"keeps its {len(kept)} finished runs, intact" in said
        assert f"then finish it with `allocmark run --resume --db {db}`" in said
        subprocess.run(["mount", "-o", "remount,size=64m", str(full)], check=True)
        again = cli("run", "--resume", "--db", str(db))
        assert again.returncode == 0, again.stderr
        after = runs(db)
        # Every measured run and baseline, once (a why pass may follow them: its
        # profiled blocks, when they cost at most 15 % of the campaign).
        assert roles(db)["measure"] + roles(db)["baseline"] == 2 * 3 * 30 + 2 * 3
        assert len({seq for seq, _ in after}) == len(after)
        assert after[: len(kept)] == kept  # the kept runs unchanged: none run again
