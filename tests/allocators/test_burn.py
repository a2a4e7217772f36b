"""The calibration's test allocator (native/burn): its start delay is wall time spent
before main, whatever the program."""

from __future__ import annotations

import os
import subprocess
import time

from allocmark import native


def _took(env: dict[str, str]) -> float:
    """Seconds a trivial program (`true`) takes with libam_burn preloaded."""
    began = time.monotonic()
    done = subprocess.run(
        ["/bin/true"],
        env={**os.environ, "LD_PRELOAD": str(native.library("libam_burn.so")), **env},
        check=False,
    )
    assert done.returncode == 0
    return time.monotonic() - began


def test_the_start_delay_is_spent_before_main() -> None:
    # A lower bound only: a slow machine takes longer, never shorter.
    assert _took({"AM_BURN_START_US": "300000"}) >= 0.3
