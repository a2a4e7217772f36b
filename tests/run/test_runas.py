"""Which user the measured program runs as, and what that user must not reach."""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
from pathlib import Path

import pytest

from allocmark import native
from allocmark.errors import UserError
from allocmark.native import identity
from allocmark.run import runas

ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="only root runs programs as another user")
SOMEONE = runas.RunAs("someone", 54321, 54321)  # owns nothing here


def test_not_root_the_program_runs_as_allocmark_s_own_user() -> None:
    user = pwd.getpwnam("nobody")  # any user but root: allocmark as that user
    assert identity._chosen("", user.pw_uid) is None
    assert identity._chosen("nobody", user.pw_uid) is None
    with pytest.raises(UserError, match="only root can run the program as another user"):
        identity._chosen("root", user.pw_uid)


@ROOT_ONLY
def test_root_runs_each_campaign_as_a_transient_uid_of_its_own() -> None:
    assert identity._chosen("root", 0) is None  # --run-as root: as before
    assert identity._chosen("", 0) == identity.TRANSIENT
    named = identity._chosen("nobody", 0)
    assert isinstance(named, runas.RunAs) and named.name == "nobody"
    with pytest.raises(UserError, match="--run-as nosuchuser4711: no such user"):
        identity._chosen("nosuchuser4711", 0)
    seen = []
    for _ in range(3):
        with runas.campaign():
            who = runas.chosen()
            assert who is not None and runas.transient(who) and who == runas.chosen()
            with pytest.raises(KeyError):
                pwd.getpwuid(who.uid)  # no passwd entry: nothing else is this identity
            seen.append(who.uid)
    assert len(set(seen)) == 3  # no two campaigns share one


@ROOT_ONLY
def test_what_a_campaign_s_identity_started_dies_with_the_campaign() -> None:
    """A daemon the program (or a build) left behind, in a session of its own, is killed
    when the campaign ends: kill(-1) as the identity reaches every process of it."""
    with runas.campaign():
        who = runas.chosen()
        assert who is not None
        daemon = subprocess.Popen(
            ["setsid", "sleep", "300"], user=who.uid, group=who.gid, extra_groups=[]
        )
    assert daemon.wait(timeout=10) == -signal.SIGKILL


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
def test_a_database_the_program_s_identity_could_change_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    with pytest.raises(
        UserError, match=r"x.db \(the results database\) can be changed by .* through \S*/shared:"
    ):
        runas.guard(shared / "x.db")
    safe = tmp_path / "safe"
    safe.mkdir()
    safe.chmod(0o755)
    user = runas.guard(safe / "x.db")
    assert user is not None and runas.transient(user)


@ROOT_ONLY
def test_the_guard_checks_the_real_path_and_every_directory_above_it(tmp_path: Path) -> None:
    """Finding 5: a database reached through a link into a directory the program's
    identity can write, or below a directory it could rename away and replace."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    (shared / "x.db").write_bytes(b"")
    safe = tmp_path / "safe"
    safe.mkdir()
    safe.chmod(0o755)
    (safe / "x.db").symlink_to(shared / "x.db")
    with pytest.raises(UserError, match="can be changed by"):
        runas.guard(safe / "x.db")
    below = shared / "results"  # root's own 0755 directory, in one others can write
    below.mkdir()
    below.chmod(0o755)
    with pytest.raises(UserError, match=f"through {below}"):
        runas.guard(below / "y.db")
    lib = safe / "libx.so"
    lib.write_bytes(b"")
    lib.chmod(0o666)
    with pytest.raises(UserError, match=r"libx.so \(an allocator's library\)"):
        runas.guard(safe / "z.db", [str(lib)])
    lib.chmod(0o644)
    assert runas.guard(safe / "z.db", [str(lib)]) is not None


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
