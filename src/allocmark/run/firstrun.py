"""`try`'s first run: the command under the baseline failing stops the campaign."""

from __future__ import annotations

import shlex

from allocmark import units
from allocmark.errors import UserError
from allocmark.model import RunResult, RunSpec, RunStatus
from allocmark.request import CampaignPlan
from allocmark.run import runas
from allocmark.store import Store
from allocmark.text import printable


class CommandFails(UserError):
    """The campaign's command failed on its first run under the baseline."""


TAIL_LINES = 12  # of a failing first run's exit status and stderr, in its error


class FirstRun:
    """`try`'s first run: the command under the baseline. When it fails, nothing after
    it can be measured (every allocator would fail the same way), so the campaign stops
    there with the command's exit status and the end of its stderr, as hyperfine does;
    `-i` (the plan's `stop_on_failure` off) runs on. Armed only in a campaign that has not
    run anything yet: a resume has its first run behind it."""

    def __init__(self, store: Store, cid: int, campaign: CampaignPlan) -> None:
        c = store.campaign(cid)
        self.baseline = c.baseline or ""
        self.armed = campaign.stop_on_failure and c.done == 0
        self.db = store.path

    def check(self, spec: RunSpec, result: RunResult) -> None:
        if not self.armed or spec.allocator != self.baseline:
            return
        self.armed = False
        if result.status in (RunStatus.OK, RunStatus.UNVERIFIED):
            return
        line = shlex.join(spec.argv)
        # its own lines, each made printable: the program's text cannot drive the terminal
        tail = [printable(x) for x in result.detail.splitlines()[-TAIL_LINES:]] or ["no detail"]
        if result.labels.get("stage") == "prepare":
            raise CommandFails(self._prepare(spec, tail))
        if result.status is RunStatus.TIMEOUT:
            fix = (
                f"It ran past its timeout ({spec.timeout:g} s a run): give it more with "
                f"--timeout SECONDS, or a shorter run of the command"
            )
        elif result.status is RunStatus.OOM and spec.memory_limit:
            fix = (
                f"It needs more memory than --memory-limit gives it "
                f"({units.size_text(spec.memory_limit)}): raise --memory-limit, or drop it"
            )
        else:
            fix = "Fix the command (it must exit 0)"
        raise CommandFails(
            f"`{printable(line)}` {result.status.value} on its first run, under "
            f"{self.baseline}:\n  " + "\n  ".join(tail) + "\n"
            f"Nothing else was run: under every allocator it would fail the same way. {fix}, "
            "or add -i (`allocmark try -i`) to run it under every allocator anyway (this run "
            f"is kept in {self.db})."
        )

    def _prepare(self, spec: RunSpec, tail: list[str]) -> str:
        """--prepare failed before the first run: its words, as whom it ran, the fix."""
        who = runas.chosen()
        as_whom = (
            f"It runs as {who.name}, the campaign's identity (never root): what only root may "
            "read or write is closed to it; prepare in a place every user can reach, or pass "
            "--run-as root. "
            if who is not None
            else ""
        )
        return (
            f"--prepare {printable(shlex.join(spec.app.prepare))} failed before the first run "
            f"of the command, under {self.baseline}:\n  " + "\n  ".join(tail) + "\n"
            f"Nothing else was run. {as_whom}Fix --prepare (it must exit 0), or add -i to run "
            f"on anyway (this run is kept in {self.db})."
        )
