"""Plans signed by the user who made them: a resume runs without a question only the
commands this user planned.

A campaign's database may come from anywhere, and anyone who can write it can change
what a pending run executes (its argv, its environment, its preload, an app's steps or
client) and also the `created_by` that says who planned it. So every planned run is
signed as it is planned, with HMAC-SHA256 under a random key that only this user can
read (`plan.key`, mode 0600, in $XDG_CONFIG_HOME/allocmark or ~/.config/allocmark),
the way Jupyter decides whether a notebook is trusted. The signature covers every
field of the run that decides what executes, and the campaign's random `plan_id`,
so that a run cannot be moved between campaigns. The campaign itself is
sealed too (`seal_campaign`): its plan as stored (the why pass, the budget) and
its allocators' stored specs (their libraries, their environment), which a resume
verifies and probes. A resume checks the seal and every run of the plan, done or
pending (more blocks and the why pass copy done runs), before anything of the campaign
executes; what does not verify (changed, planned elsewhere, or the key is gone) is
listed with its whole command and environment and runs only after `--yes`, which
signs it as the user's own.

The standard library's hmac and secrets do the cryptography; this module only
decides what is signed and where the key lives.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path

from allocmark import files
from allocmark.model import RunSpec
from allocmark.schemas import stored

KEY_NAME = "plan.key"


def key_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "allocmark" / KEY_NAME


def key(create: bool = True) -> bytes | None:
    """This user's signing key, made on first use; None when there is none that only
    this user can read (then nothing verifies, and a resume asks)."""
    path = key_path()
    found = _read(path)
    if found is not None or not create:
        return found
    with contextlib.suppress(OSError):
        _make(path)
    return _read(path)


def _read(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        # A key others can read or write, or another user's, signs nothing of ours.
        if st.st_uid != os.getuid() or st.st_mode & 0o077 or not stat.S_ISREG(st.st_mode):
            return None
        text = f.read(200).strip()
    return bytes.fromhex(text.decode()) if len(text) == 64 and _hex(text) else None


def _hex(text: bytes) -> bool:
    return all(c in b"0123456789abcdef" for c in text)


def _make(path: Path) -> None:
    """Write a new key under a temporary name, then link it into place: two processes
    making one at once both end up with the one that was linked first."""
    files.directory(path.parent, 0o700, parents=True, what="the signing key")
    tmp = path.with_name(f".{KEY_NAME}.{os.getpid()}.{secrets.token_hex(4)}")
    files.write(tmp, secrets.token_hex(32) + "\n", 0o600, "the signing key")
    try:
        files.publish(tmp, path)
    finally:
        files.remove(tmp)


def new_plan_id() -> str:
    return secrets.token_hex(16)


def _message(plan_id: str, s: RunSpec) -> bytes:
    """Everything about a run that decides what executes, in one canonical form: typed
    as the store gives it back (a timeout planned as 600 reads back as 600.0)."""
    fields = [
        plan_id,
        int(s.seq),
        s.allocator,
        s.workload,
        list(s.params),
        int(s.rep),
        list(s.argv),
        [list(kv) for kv in s.env],
        float(s.timeout),
        s.expect_malloc,
        bool(s.result_fd),
        s.role,
        stored.dump(s.app),
        bool(s.profile),
        int(s.memory_limit),
    ]
    if s.trace:  # where a recorded run writes its trace (absent: plans signed before it)
        fields.append(s.trace)
    return json.dumps(fields, separators=(",", ":")).encode()


def sign(secret: bytes | None, plan_id: str, s: RunSpec) -> str | None:
    if secret is None:
        return None
    return hmac.new(secret, _message(plan_id, s), hashlib.sha256).hexdigest()


def unsigned(plan: Sequence[tuple[RunSpec, str | None]], plan_id: object) -> list[RunSpec]:
    """The runs of a stored plan whose signature does not verify under this user's key:
    changed since they were planned, or planned by someone else."""
    secret = key(create=False)
    return [s for s, tag in plan if not verifies(secret, plan_id, s, tag)]


def verifies(secret: bytes | None, plan_id: object, s: RunSpec, tag: object) -> bool:
    if secret is None or not isinstance(plan_id, str) or not isinstance(tag, str):
        return False
    return hmac.compare_digest(
        hmac.new(secret, _message(plan_id, s), hashlib.sha256).hexdigest(), tag
    )


def campaign_message(
    plan_id: str, plan_text: str, allocators: Sequence[tuple[str, str, str]]
) -> bytes:
    """The campaign's plan as stored, and each allocator's (name, spec_json, sha256)."""
    rows = sorted([list(a) for a in allocators])
    return json.dumps([plan_id, plan_text, rows], separators=(",", ":")).encode()


def seal_campaign(secret: bytes | None, message: bytes) -> str | None:
    if secret is None:
        return None
    return hmac.new(secret, b"campaign\0" + message, hashlib.sha256).hexdigest()


def campaign_verifies(message: bytes, tag: object) -> bool:
    secret = key(create=False)
    if secret is None or not isinstance(tag, str):
        return False
    return hmac.compare_digest(seal_campaign(secret, message) or "", tag)
