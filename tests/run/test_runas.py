"""Which user the measured program runs as, and what that user must not reach."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from allocmark import native
from allocmark.errors import UserError
from allocmark.run import runas

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="only root runs programs as another user")
SOMEONE = runas.RunAs("someone", 54321, 54321)  # owns nothing here


def test_not_root_the_program_runs_as_allocmark_s_own_user() -> None:
    user = pwd.getpwnam(runas.DEDICATED)  # any user but root: allocmark as that user
    assert runas._chosen("", "", user.pw_uid) is None
    assert runas._chosen(runas.DEDICATED, "", user.pw_uid) is None
    with pytest.raises(UserError, match="only root can run the program as another user"):
        runas._chosen("root", "", user.pw_uid)


@ROOT_ONLY
def test_root_picks_the_named_user_else_the_sudo_user_else_allocmark() -> None:
    assert runas._chosen("root", "", 0) is None  # --run-as root: as before
    chosen = runas._chosen("", "", 0)
    assert chosen is not None and chosen.name == runas.DEDICATED and chosen.uid != 0
    sudo = runas._chosen("", runas.DEDICATED, 0)
    assert sudo is not None and sudo.name == runas.DEDICATED
    assert runas._chosen("", "root", 0) == chosen  # sudo from root: not root again
    with pytest.raises(UserError, match="--run-as nosuchuser4711: no such user"):
        runas._chosen("nosuchuser4711", "", 0)


def test_what_a_user_can_write_follows_the_modes_and_the_sticky_bit(tmp_path: Path) -> None:
    own = tmp_path / "own"
    own.mkdir()
    own.chmod(0o755)
    f = own / "x.db"
    f.write_text("")
    f.chmod(0o644)
    assert not runas.can_write(SOMEONE, f) and not runas.can_write(SOMEONE, own)
    assert runas.can_read(SOMEONE, f)  # the test's directories are open (conftest.py)
    own.chmod(0o777)  # anyone may replace the file in its directory
    assert runas.can_write(SOMEONE, f) and runas.can_write(SOMEONE, own)
    own.chmod(0o1777)  # sticky, as /tmp: the file is safe, the directory is not
    assert not runas.can_write(SOMEONE, f) and runas.can_write(SOMEONE, own)
    f.chmod(0o646)
    assert runas.can_write(SOMEONE, f)


@ROOT_ONLY
def test_a_database_the_program_s_user_could_change_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    with pytest.raises(
        UserError,
        match=r"shared \(the results database's directory\) is "
        "writable by allocmark",
    ):
        runas.guard(shared / "x.db")
    safe = tmp_path / "safe"
    safe.mkdir()
    safe.chmod(0o755)
    user = runas.guard(safe / "x.db")
    assert user is not None and user.name == runas.DEDICATED


@ROOT_ONLY
def test_a_package_others_cannot_enter_runs_from_a_copy_they_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private = tmp_path / "home"
    (private / "_bin").mkdir(parents=True)
    private.chmod(0o700)
    program = private / "_bin" / "am_x"
    program.write_bytes(b"#!/bin/sh\n")
    program.chmod(0o755)
    monkeypatch.setenv("ALLOCMARK_CACHE", str(tmp_path / "cache"))
    copy = native.staged(program, "_bin/am_x")
    assert copy != program and copy.read_bytes() == program.read_bytes()
    assert not runas.can_read(SOMEONE, program) and runas.can_read(SOMEONE, copy)
    assert native.staged(program, "_bin/am_x") == copy  # one copy per build
    private.chmod(0o755)
    assert native.staged(program, "_bin/am_x") == program  # reachable: used in place
