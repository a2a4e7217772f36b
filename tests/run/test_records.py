"""The one reader of native records, and the native parts that write them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from allocmark import native
from allocmark.native import records
from allocmark.run import who


def test_a_record_is_read_with_its_kind_and_version() -> None:
    text = b'\n{"am": "calib", "v": 1, "ns": 5}\n'
    assert records.parse(text, "t") == [records.Record("calib", {"ns": 5})]
    assert records.one(text, "calib", "t") == {"ns": 5}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"am": "run", "v": 1}', "'run' record version 1, this allocmark reads version 4"),
        ('{"am": "nope", "v": 1}', "no such kind"),
        ("am_run 1 status=0", "not a JSON record"),
        ('{"status": 0}', 'needs "am"'),
        ("", "expected one 'run' record, found 0"),
    ],
)
def test_a_record_from_another_build_is_refused_by_name(text: str, message: str) -> None:
    with pytest.raises(records.RecordError, match=message) as info:
        records.one(text, "run", "am_run")
    assert str(info.value).startswith("am_run")


@pytest.mark.integration
def test_am_run_and_the_calibration_write_records() -> None:
    r, w = os.pipe()
    done = subprocess.run(
        [str(native.program("am_run")), str(w), "/bin/true"], pass_fds=(w,), check=True
    )
    os.close(w)
    with os.fdopen(r, "rb") as f:
        status = records.one(f.read(), "run", "am_run")
    assert done.returncode == 0 and status["status"] == 0 and status["maxrss_kib"] > 0
    calib = subprocess.run(
        [str(native.program("am_run")), "--calibrate"], capture_output=True, check=True
    )
    assert records.one(calib.stdout, "calib", "am_run --calibrate")["ns"] > 0


@pytest.mark.integration
def test_libam_who_escapes_what_it_reports(tmp_path: Path) -> None:
    odd = tmp_path / 'a "quoted"\\dir'
    odd.mkdir()
    program = odd / "true"
    shutil.copy("/bin/true", program)
    reports = tmp_path / "who"
    reports.mkdir()
    env = os.environ | {
        "LD_PRELOAD": str(native.library("libam_who.so")),
        "AM_WHO_DIR": str(reports),
    }
    subprocess.run([str(program)], env=env, check=True)
    (report,) = who.read(reports)
    assert report.exe == str(program)
    assert report.served["malloc"].endswith("libc.so.6") and report.libc.endswith("libc.so.6")
